"""What the numerical check perturbs: which leaves (and which elements of an array leaf).

A :class:`Perturbation` lists the perturbed elements, each moved up and down by eps on its
own, then the random directions, each moving every leaf of ``spread`` at once by ±eps (a
sign per leaf). :func:`choose` makes it: every input leaf of a small graph; of a big one a
seeded sample (the named leaves first) plus one direction through all of them, so that a
wrong gradient outside the sample still shows; and a note saying what was left out.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Perturbation", "choose", "sample", "signs"]

# all the leaves of a scalar graph are checked while the replay computes at most this many
# numbers (nodes times evaluation points), or when there are at most DEEP_LEAVES of them
SMALL = 2**15
# a scalar graph too big for that: the leaves perturbed one by one, beside the direction.
# A wide graph replays many points at little more than the cost of one (a level's nodes in
# one numpy call); a deep one replays on floats, each point a pass over every node.
WIDE_LEAVES = 16
DEEP_LEAVES = 1
# a graph with arrays: the numbers all the replays may compute, leaves past it are sampled
WORK = 2**25


class Perturbation:
    """The perturbations of one check: ``node[j]``, ``elem[j]`` (a flat element of an array
    leaf, -1 for a scalar) for each element moved on its own, then each row of ``signs``, a
    direction moving every leaf of ``spread`` by ±eps at once."""

    def __init__(self, node, elem, spread=None, signs=None):
        self.node = np.asarray(node, dtype=np.intp)
        self.elem = np.asarray(elem, dtype=np.intp)
        self.spread = np.zeros(0, np.intp) if spread is None else np.asarray(spread, np.intp)
        self.signs = np.zeros((0, len(self.spread))) if signs is None else signs

    def __len__(self):
        return len(self.node) + len(self.signs)

    def __getitem__(self, part: slice) -> "Perturbation":
        return self.select(range(*part.indices(len(self))))

    def select(self, positions) -> "Perturbation":
        """The perturbations at ``positions`` (elements first, then directions)."""
        k = len(self.node)
        alone = [j for j in positions if j < k]
        return Perturbation(
            self.node[alone],
            self.elem[alone],
            self.spread,
            self.signs[[j - k for j in positions if j >= k]],
        )

    def moved(self, data, eps: float) -> tuple:
        """Each direction's leaves moved up and down: two (directions, leaves) arrays."""
        x = data[self.spread]
        return x + eps * self.signs, x - eps * self.signs


def _hashes(n: int, seed: int, start: int = 1) -> np.ndarray:
    """Seeded pseudo-random uint64s for positions ``start`` … ``start + n - 1`` (splitmix64,
    which starts sooner than numpy's generators)."""
    with np.errstate(over="ignore"):
        x = np.arange(start, start + n, dtype=np.uint64) + np.uint64(seed % 2**64) * np.uint64(
            0x9E3779B97F4A7C15
        )
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def sample(items: np.ndarray, k: int, seed: int) -> list:
    """``k`` of ``items``, a seeded random choice."""
    if k >= len(items):
        return items.tolist()
    return items[np.argpartition(_hashes(len(items), seed), k)[:k]].tolist()


def signs(n: int, seed: int) -> np.ndarray:
    """A seeded random direction: ``n`` signs ±1.0 (independent of :func:`sample`'s)."""
    bits = (_hashes(n, seed, start=2**62) >> np.uint64(17)) & np.uint64(1)
    return np.where(bits == 1, 1.0, -1.0)


def choose(trace, max_leaves, max_elements: int, seed: int, wide=None):
    """(the :class:`Perturbation`, notes on what was left out or sampled).

    ``max_leaves``: ``"auto"``, ``None`` (every leaf) or an int > 0. ``wide()`` says
    whether a scalar graph replays many points cheaply (asked only when it matters).
    """
    nodes = trace.nodes
    notes = []
    leaves = trace.leaf_index
    fixed = leaves[trace.constant[leaves]]
    leaves = leaves[~trace.constant[leaves]]
    if trace.tensor_data:  # complex inputs: this check moves real numbers only
        real = [not np.iscomplexobj(trace.tensor_data.get(i, 0.0)) for i in leaves.tolist()]
        if not all(real):
            names = ", ".join(nodes[i].name for i in leaves[~np.array(real)].tolist()[:5])
            notes.append(f"complex inputs not checked ({names}): the check moves real numbers.")
            leaves = leaves[np.array(real, dtype=bool)]
    # unnamed constants are numbers written in the cell: not worth a note
    named = [nodes[i].label for i in fixed[trace.label_code[fixed] > 0].tolist()]
    if named:
        notes.append(
            f"{len(named)} named constant{'' if len(named) == 1 else 's'} "
            f"(requires_grad=False: {', '.join(named[:5])}"
            f"{', ...' if len(named) > 5 else ''}) not checked."
        )
    scalar = not trace.tensor_data
    limit = _limit(trace, len(leaves), max_leaves, wide)
    spread = None
    if len(leaves) > limit:
        if scalar:
            spread = leaves
            if max_leaves == "auto" and limit > 1:  # the direction takes a leaf's place
                limit -= 1
        why = (
            "as max_leaves asked"
            if max_leaves != "auto"
            else "to keep the check fast"
            if not scalar
            else "to keep it within about twice a backward pass"
        )
        leaves, note = _sample_leaves(trace, leaves, limit, seed, spread is not None, why)
        notes.append(note)
    else:
        leaves = leaves.tolist()
    if scalar:
        direction = None if spread is None else signs(len(spread), seed)[None, :]
        return Perturbation(leaves, np.full(len(leaves), -1), spread, direction), notes
    return _elements(trace, leaves, max_elements, seed, notes), notes


def _limit(trace, n_leaves: int, max_leaves, wide) -> int:
    """How many leaves to perturb one by one (the direction included)."""
    if max_leaves is None:
        return n_leaves
    if max_leaves != "auto":
        if isinstance(max_leaves, bool) or not isinstance(max_leaves, int) or max_leaves < 1:
            raise ValueError(f"max_leaves must be 'auto', None or an int > 0, got {max_leaves!r}")
        return max_leaves
    if trace.tensor_data:
        sizes = trace.n + sum(max(1, a.size) - 1 for a in trace.tensor_data.values())
        return max(50, WORK // (2 * sizes))
    if n_leaves <= 2 or trace.n * (2 * n_leaves + 1) <= SMALL:
        return n_leaves
    return 1 + (WIDE_LEAVES if wide is not None and wide() else DEEP_LEAVES)


def _sample_leaves(trace, leaves: np.ndarray, limit: int, seed: int, joint: bool, why: str):
    """``limit`` of ``leaves``, the named ones first, and the note that says so."""
    labelled = trace.label_code[leaves] > 0
    named, rest = leaves[labelled], leaves[~labelled]
    if len(named) >= limit:
        chosen = sample(named, limit, seed)
        how = f"a random sample of the {len(named):,} named ones, seed {seed}"
    else:
        chosen = named.tolist() + sample(rest, limit - len(named), seed)
        how = f"the named ones, then a random sample with seed {seed}"
    chosen.sort()
    together = f" and all {len(leaves):,} at once along a random direction" if joint else ""
    return chosen, (
        f"Checked {len(chosen):,} of {len(leaves):,} leaves one by one ({how})"
        f"{together}{',' if together else ''} {why}; pass max_leaves=None to "
        "check each of them."
    )


def _elements(trace, leaves: list, max_elements: int, seed: int, notes: list) -> Perturbation:
    """Each scalar leaf, and the elements of each array leaf (a seeded sample of at most
    ``max_elements`` of a big one)."""
    nodes = trace.nodes
    rng = None
    node, elem = [], []
    for i in leaves:
        shape = nodes[i].shape
        if shape is None:
            node.append(i)
            elem.append(-1)
            continue
        size = int(np.prod(shape))
        if size > max_elements:
            rng = rng or np.random.default_rng(seed)
            elems = np.sort(rng.choice(size, size=max_elements, replace=False))
            notes.append(
                f"{nodes[i].name}: {max_elements} of its {size:,} elements "
                f"perturbed (random sample, seed {seed})."
            )
        else:
            elems = np.arange(size)
        node += [i] * len(elems)
        elem += elems.tolist()
    return Perturbation(node, elem)
