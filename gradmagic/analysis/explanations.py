"""Three textbook explanations of backpropagation, computed on a run's :class:`Trace`.

* **Forward mode** (:func:`jvp`, :func:`forward_vs_reverse`): each input's
  tangent carried through the recorded graph, node by node, with each node's
  local derivatives: ``tangent(node) = Σ ∂node/∂parent · tangent(parent)``.
  One pass per input; reverse mode (``backward()``) gets every input's
  gradient in one pass. Both must give the same numbers.
* **The topological walk** (:func:`walk`): the depth-first search of
  micrograd's ``build_topo``, step by step: visit a node, visit its parents
  (in recorded order), then append the node to the order. Backward runs in
  the reverse of that order.
* **The chain rule as a sum over paths** (:func:`paths`): ∂target/∂x is the
  sum, over every path from ``x`` to the target, of the product of the local
  derivatives along it. Paths are counted exactly by dynamic programming;
  past a handful they are not listed but the largest contributions are found
  best-first (a top-k per node), without enumerating them.

Everything reads the trace's public API only (``trace.nodes[i]`` with
``.parents``, ``.local``, ``.data``, ``.grad``, ``.label``, ``.is_leaf``,
``.is_constant``, ``.shape``; ``trace.node(name)``, ``trace.target``).
Forward mode covers scalar graphs: a tensor node's local derivative is a
Jacobian the trace does not record, so :func:`jvp` says so (:class:`ForwardModeError`).
"""

from __future__ import annotations

import ast
import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "ForwardModeError",
    "NodeError",
    "Tangents",
    "jvp",
    "Pass",
    "Comparison",
    "forward_vs_reverse",
    "edge_count",
    "inputs",
    "forward_operations",
    "Walk",
    "walk",
    "Path",
    "Paths",
    "paths",
    "HANDFUL",
    "TOP",
]

HANDFUL = 12  # up to this many paths are all listed
TOP = 8  # past a handful, the largest contributions listed


class ForwardModeError(ValueError):
    """Forward mode cannot run on this trace (tensor nodes), or a seed is wrong."""


class NodeError(ForwardModeError, KeyError):
    """No node has this name or index."""

    def __str__(self):  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


# =========================================================================== graph facts
class _Graph:
    """The trace's parents and local derivatives as plain lists, read once per trace.

    ``Node.local`` is computed each time it is read; the algorithms here read
    every node's many times (one forward pass per input), so they share one copy.
    """

    def __init__(self, trace):
        # from the trace's columns, not through a Node view per node (slow on big graphs)
        self.parents = [
            () if a < 0 else (a,) if b < 0 else (a, b)
            for a, b in zip(trace.parent_a.tolist(), trace.parent_b.tolist())
        ]
        tensor = np.zeros(trace.n, dtype=bool)
        tensor[list(trace.tensor_data)] = True
        self.tensor = tensor.tolist()
        self.labels = list(map(trace.label_names.__getitem__, trace.label_code.tolist()))
        self._local = None
        self._trace = weakref.ref(trace)

    @property
    def local(self) -> list:
        """∂node/∂parent per parent (``()`` for a leaf, None for a tensor node)."""
        if self._local is None:
            nodes = self._trace().nodes
            self._local = [
                None if t else (n.local if p else ())
                for n, p, t in zip(nodes, self.parents, self.tensor)
            ]
        return self._local


_GRAPHS: weakref.WeakKeyDictionary[Any, _Graph] = weakref.WeakKeyDictionary()


def _graph(trace) -> _Graph:
    try:
        return _GRAPHS[trace]
    except KeyError:
        g = _GRAPHS[trace] = _Graph(trace)
        while len(_GRAPHS) > 2:  # only the latest runs: Out[] keeps every displayed trace
            del _GRAPHS[next(iter(_GRAPHS))]
        return g


def edge_count(trace) -> int:
    """How many (node, parent) edges the graph has: one multiply-add each per pass."""
    first = trace.parent_a >= 0
    return int(np.count_nonzero(first) + np.count_nonzero(first & (trace.parent_b >= 0)))


def inputs(trace) -> list:
    """The run's inputs: leaves that are not constants, in graph order."""
    leaves = trace.leaf_index
    return leaves[~trace.constant[leaves]].tolist()


def _index(trace, key) -> int:
    """A node index from a name (as ``trace.node`` chooses) or an index."""
    if isinstance(key, str):
        try:
            return trace.node(key).index
        except KeyError as exc:
            raise NodeError(exc.args[0]) from None
    if isinstance(key, bool) or not isinstance(key, int):
        raise NodeError(
            f"a node is named by its label (a str) or its index (an int), "
            f"got {type(key).__name__} {key!r}"
        )
    if not -len(trace.nodes) <= key < len(trace.nodes):
        raise NodeError(f"node index {key} is out of range: the trace has {len(trace.nodes)} nodes")
    return key % len(trace.nodes)


def tensor_nodes(trace) -> list:
    """Indices of operation nodes without a scalar local derivative (tensor ops)."""
    g = _graph(trace)
    return [i for i, (p, t) in enumerate(zip(g.parents, g.tensor)) if p and t]


def _scalar_only(trace, what: str = "forward mode here covers") -> None:
    bad = tensor_nodes(trace)
    if bad:
        first = trace.nodes[bad[0]]
        raise ForwardModeError(
            f"{what} scalar graphs: this run has {len(bad):,} tensor "
            f"operation node{'s' if len(bad) != 1 else ''} (the first: {first.name}, "
            f"op {first.op}), whose local derivative is a Jacobian the trace does not record"
        )


# =========================================================================== forward mode
class Tangents(Mapping):
    """Every node's tangent for one seed: ``t[i]`` by node index, ``t['x']`` by name.

    As a mapping it is keyed by node index (``dict(t)``); ``t.by_name`` maps
    each label to its node's tangent (the node ``trace.grads`` uses for that
    name). ``t.target`` is the target's tangent: the directional derivative
    of the target along the seed. ``t.operations`` counts the multiply-adds
    the pass did (edges out of nodes that depend on a seeded input).
    """

    def __init__(self, trace, seed: dict, values: list, operations: int, reached: list):
        self.trace = trace
        self.seed = seed  # node index → seed tangent
        self._values = values  # indexed like trace.nodes
        self.operations = operations
        self.reached = reached  # node index → True when it depends on a seeded input

    def __getitem__(self, key):
        if isinstance(key, str):
            return self._values[self.trace.node(key).index]
        if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(self._values):
            return self._values[key]
        raise KeyError(key)

    def __iter__(self):
        return iter(range(len(self._values)))

    def __len__(self):
        return len(self._values)

    @property
    def target(self):
        return self._values[self.trace.target.index]

    @property
    def by_name(self) -> dict:
        """label → tangent, for every label (same choice of node as ``trace.grads``)."""
        out = {}
        for n in self.trace.nodes:
            if n.label:
                out[n.label] = n.index
        for name in getattr(self.trace, "bindings", {}) or {}:
            if name in out:
                try:
                    out[name] = self.trace.node(name).index
                except KeyError:
                    pass
        return {name: self._values[i] for name, i in out.items()}

    def __repr__(self):
        seed = ", ".join(f"{self.trace.nodes[i].name}: {v:g}" for i, v in self.seed.items())
        return (
            f"<Tangents {{{seed}}}: d{self.trace.target.name} = {self.target!r}, "
            f"{len(self._values)} nodes>"
        )


def _seed(trace, seed) -> dict:
    if isinstance(seed, (str, int)) and not isinstance(seed, bool):
        seed = {seed: 1.0}
    if not isinstance(seed, Mapping):
        raise ForwardModeError(
            "jvp needs a seed: {input name or node index: tangent}, e.g. "
            f"{{'x': 1}}; got {type(seed).__name__}"
        )
    out = {}
    for key, value in seed.items():
        i = _index(trace, key)
        node = trace.nodes[i]
        if node.parents:
            raise ForwardModeError(
                f"{node.name} is computed by {node.op}, not an input: forward mode seeds "
                f"inputs (leaves) and carries their tangents through the graph"
            )
        if node.shape is not None:
            raise ForwardModeError(
                f"{node.name} is a tensor: forward mode here covers scalar graphs"
            )
        try:
            out[i] = float(value)
        except (TypeError, ValueError):
            raise ForwardModeError(
                f"the seed of {node.name} must be a number, got {value!r}"
            ) from None
    return out


def jvp(trace, seed, *, checked: bool = False) -> Tangents:
    """Forward mode over the recorded graph: every node's tangent for ``seed``.

    ``seed`` maps inputs (names or node indices) to their tangents; inputs not
    in it have tangent 0 (``{'x': 1}`` gives every node's derivative with
    respect to x; ``'x'`` alone means the same). Nodes are visited in the
    trace's order (parents first) and each adds ``local × tangent(parent)``
    over its parents. A node that depends on no seeded input keeps the exact
    tangent 0 without any arithmetic (so a nan local derivative on a branch
    that does not depend on x does not spoil ∂/∂x, as it does not in backward).
    """
    if not checked:  # the caller has made sure the graph is scalar
        _scalar_only(trace)
    seeds = _seed(trace, seed)
    g = _graph(trace)
    n = len(g.parents)
    values = [0.0] * n
    reached = [False] * n
    operations = 0
    for i, (parents, local) in enumerate(zip(g.parents, g.local)):
        if not parents:
            if i in seeds:
                values[i] = seeds[i]
                reached[i] = True
            continue
        total, any_reached = 0.0, False
        for p, d in zip(parents, local):
            if reached[p]:
                total += d * values[p]
                any_reached = True
                operations += 1
        if any_reached:
            values[i] = total
            reached[i] = True
    return Tangents(trace, seeds, values, operations, reached)


@dataclass
class Pass:
    """One forward-mode pass: input ``index`` seeded with 1."""

    index: int
    name: str
    tangent: float  # ∂target/∂input by forward mode
    grad: float  # ∂target/∂input by reverse mode (the recorded gradient)
    operations: int  # multiply-adds of this pass
    nodes: int  # nodes the input reaches (those the pass computes)

    @property
    def difference(self) -> float:
        return abs(self.tangent - self.grad)

    @property
    def agrees(self) -> bool:
        a, b = self.tangent, self.grad
        if a == b or (a != a and b != b):
            return True
        return abs(a - b) <= 1e-12 + 1e-9 * max(abs(a), abs(b))


@dataclass
class Comparison:
    """Forward against reverse mode on one graph: passes, operations, agreement."""

    inputs: int  # how many inputs the run has (forward mode needs one pass each)
    passes: list  # the passes run (at most ``limit``)
    edges: int  # multiply-adds of one backward pass (one per edge)
    forward_operations: int  # multiply-adds of all forward passes (run or, past limit, counted)
    error: str | None = None  # why forward mode could not run

    @property
    def agree(self) -> bool:
        return self.error is None and all(p.agrees for p in self.passes)

    @property
    def worst(self) -> float:
        return max((p.difference for p in self.passes if p.difference == p.difference), default=0.0)

    @property
    def complete(self) -> bool:
        return len(self.passes) == self.inputs


def forward_operations(trace, ins=None) -> int:
    """Multiply-adds of one forward pass per input, all inputs, without running them.

    A pass seeded at input x does one multiply-add per edge out of a node that
    depends on x; summed over inputs that is, per edge, how many inputs its
    parent depends on (a bitset of inputs per node, OR-ed down the graph).
    """
    ins = inputs(trace) if ins is None else ins
    bit = {i: 1 << k for k, i in enumerate(ins)}
    parents = _graph(trace).parents
    deps = [0] * len(parents)
    total = 0
    for i, ps in enumerate(parents):
        if not ps:
            deps[i] = bit.get(i, 0)
            continue
        d = 0
        for p in ps:
            d |= deps[p]
            total += deps[p].bit_count()
        deps[i] = d
    return total


BUDGET = 400_000  # node visits of the forward passes a comparison runs


def forward_vs_reverse(trace, limit: int = 50, budget: int = BUDGET) -> Comparison:
    """Run forward mode once per input (up to ``limit`` inputs) and compare with backward.

    At most ``budget`` node visits are spent (a 100,000-node graph gets 4 passes);
    the remaining passes are counted (their multiply-adds,
    :func:`forward_operations`) but not run: the cost of forward mode is the
    point being made.
    """
    limit = max(1, min(limit, budget // max(1, len(trace.nodes))))
    ins = inputs(trace)
    edges = edge_count(trace)
    try:
        _scalar_only(trace)
    except ForwardModeError as exc:
        return Comparison(len(ins), [], edges, 0, error=str(exc))
    passes = []
    for i in ins[:limit]:
        t = jvp(trace, {i: 1.0}, checked=True)
        node = trace.nodes[i]
        passes.append(Pass(i, node.name, t.target, node.grad, t.operations, sum(t.reached)))
    return Comparison(len(ins), passes, edges, forward_operations(trace, ins))


# =========================================================================== the walk
@dataclass
class Walk:
    """micrograd's ``build_topo`` from the target, as a list of events.

    ``events[k]`` is ``('v', i)`` (node ``i`` visited: added to the visited
    list) or ``('t', i)`` (node ``i`` appended to the topological order, after
    all its parents). :meth:`at` gives the two lists after ``k`` events.
    ``unreached`` are names the cell bound to nodes the target does not depend
    on: the walk never gets to them, so backward leaves them out.
    """

    events: list
    order: list  # the topological order (parents first), the target last
    unreached: dict = field(default_factory=dict)  # name → data

    @property
    def backward(self) -> list:
        """The order backward processes nodes in: the walk's order reversed."""
        return self.order[::-1]

    @property
    def visited(self) -> list:
        return [i for kind, i in self.events if kind == "v"]

    def at(self, step: int) -> tuple:
        """(visited list, order list, event) after the first ``step`` events."""
        step = max(0, min(step, len(self.events)))
        visited = [i for kind, i in self.events[:step] if kind == "v"]
        order = [i for kind, i in self.events[:step] if kind == "t"]
        return visited, order, (self.events[step - 1] if step else None)

    def depth(self, step: int) -> list:
        """The recursion stack (node indices, the target first) during event ``step``."""
        stack = []
        for kind, i in self.events[:step]:
            if kind == "v":
                stack.append(i)
            else:
                stack.pop()
        return stack


def walk(trace) -> Walk:
    """The depth-first walk of micrograd's ``build_topo``, from the target.

    Faithful to the recursive original (visit, recurse into each parent in the
    recorded order, append after the parents) but with an explicit stack, so
    a deep chain does not hit Python's recursion limit::

        def build_topo(v):
            if v not in visited:
                visited.add(v)
                for child in v._prev:
                    build_topo(child)
                topo.append(v)
    """
    parents_of = _graph(trace).parents
    seen = [False] * len(parents_of)
    events, order = [], []
    root = trace.target.index
    seen[root] = True
    events.append(("v", root))
    stack = [(root, 0)]  # node, next parent slot to recurse into
    while stack:
        i, k = stack[-1]
        parents = parents_of[i]
        if k < len(parents):
            stack[-1] = (i, k + 1)
            p = parents[k]
            if not seen[p]:
                seen[p] = True
                events.append(("v", p))
                stack.append((p, 0))
        else:
            stack.pop()
            events.append(("t", i))
            order.append(i)
    return Walk(events, order, unreached(trace))


def unreached(trace) -> dict:
    """Names the cell assigned to nodes the target does not depend on (name → data).

    The trace holds the target's graph only; ``trace.unreached`` keeps the
    names bound to other nodes. When the cell's source is known, names it does
    not assign (leftovers from earlier cells) are left out.
    """
    names = dict(getattr(trace, "unreached", None) or {})
    source = getattr(trace, "source", None)
    if names and source:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return names
        stored = {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        names = {k: v for k, v in names.items() if k in stored}
    return names


# =========================================================================== paths
@dataclass
class Path:
    """One path from the input to the target, target first.

    ``steps[j]`` is ``(child, parent, local, slot)``: the edge from ``parent``
    into ``child`` (``child.parents[slot]``) and ∂child/∂parent. ``product``
    multiplies the locals.
    """

    steps: tuple
    product: float

    @property
    def nodes(self) -> list:
        """The nodes along the path, the target first, the input last."""
        return [self.steps[0][0]] + [s[1] for s in self.steps] if self.steps else []


@dataclass
class Paths:
    """Every path from one input to the target, or the largest past a handful."""

    input: int
    count: int  # how many paths there are (exact)
    paths: list  # all of them (count <= handful) or the largest |product| first
    total: float  # the sum over all paths (forward mode, by dynamic programming)
    grad: float  # the recorded gradient (reverse mode)
    complete: bool  # True when ``paths`` holds every path
    zero_terms: list = field(default_factory=list)  # (child, parent): branches x does not reach
    error: str | None = None

    @property
    def listed_sum(self) -> float:
        return math.fsum(p.product for p in self.paths)


def _magnitude(x) -> float:
    return math.inf if x != x else abs(x)


def paths(trace, input, *, handful: int = HANDFUL, top: int = TOP) -> Paths:
    """The chain rule as a sum over paths, for ``input`` (a name or a node index).

    Counts the paths exactly (``count[node] = Σ count[parent]``, one term per
    edge, so ``a + a`` counts twice), lists them all when there are at most
    ``handful``, and otherwise the ``top`` largest |products|, found by keeping
    the ``top`` best partial paths at each node (a prefix of a best path is
    among the best prefixes, since every |local| is ≥ 0). ``zero_terms`` are
    the edges into nodes that depend on the input from parents that do not
    (the ``5y²`` of ``3x² + xy + 5y²`` for ∂/∂x): their share is 0.
    """
    i = _index(trace, input)
    nodes = trace.nodes
    src = nodes[i]
    target = trace.target.index
    try:
        _scalar_only(trace, "paths are listed for")
    except ForwardModeError as exc:
        return Paths(i, 0, [], math.nan, src.grad, False, error=str(exc))
    g = _graph(trace)
    count = [0] * len(nodes)
    total = [0.0] * len(nodes)
    count[i] = 1
    total[i] = 1.0
    zero = []
    constant = None
    for k in range(i + 1, len(nodes)):
        c, t, hit = 0, 0.0, False
        for p, d in zip(g.parents[k], g.local[k]):
            if count[p]:
                c += count[p]
                t += d * total[p]
                hit = True
        if hit:
            count[k], total[k] = c, t
            for p in g.parents[k]:
                if not count[p]:
                    if constant is None:
                        constant = [n.is_leaf and n.is_constant for n in nodes]
                    if not constant[p]:
                        zero.append((k, p))
    zero = list(dict.fromkeys(zero))
    n = count[target]
    if n <= handful:
        found = _all_paths(trace, i, count)
        complete = True
    else:
        found = _best_paths(trace, i, count, top)
        complete = False
    return Paths(i, n, found, total[target], src.grad, complete, zero)


def _all_paths(trace, start: int, count) -> list:
    """Every path from ``start`` to the target (only called for a handful)."""
    g = _graph(trace)
    out = []
    # depth-first from the target down parents that ``start`` reaches; a partial path is
    # a linked list (step, rest) so extending it costs O(1)
    stack: list[tuple[int, Any]] = [(trace.target.index, None)]  # (node, (step, rest) or None)
    while stack:
        i, linked = stack.pop()
        if i == start:
            steps = []
            while linked is not None:
                step, linked = linked
                steps.append(step)
            steps.reverse()
            product = 1.0
            for step in steps:
                product *= step[2]
            out.append(Path(tuple(steps), product))
            continue
        parents, local = g.parents[i], g.local[i]
        for slot in range(len(parents) - 1, -1, -1):
            p = parents[slot]
            if count[p]:
                stack.append((p, ((i, p, local[slot], slot), linked)))
    out.sort(key=lambda path: -_magnitude(path.product))
    return out


def _best_paths(trace, start: int, count, k: int) -> list:
    """The ``k`` paths with the largest |product|, without enumerating the rest.

    At each node reached, keep the ``k`` best partial paths from ``start``
    (magnitude, signed product, back-pointer to the parent's entry).
    """
    g = _graph(trace)
    # node → [(magnitude, product, (parent, rank, local derivative, slot) or None)]
    best: dict[int, list[tuple[float, float, Any]]] = {start: [(1.0, 1.0, None)]}
    for i in range(start + 1, len(g.parents)):
        if not count[i]:
            continue
        cands = []
        for slot, (p, d) in enumerate(zip(g.parents[i], g.local[i])):
            for rank, (mag, prod, _) in enumerate(best.get(p, ())):
                cands.append((mag * _magnitude(d), prod * d, (p, rank, d, slot)))
        cands.sort(key=lambda c: -c[0] if c[0] == c[0] else -math.inf)
        best[i] = cands[:k]
    out = []
    target = trace.target.index
    for _mag, prod, back in best.get(target, ()):
        steps: list[tuple[int, int, float, int]] = []
        i = target
        while back is not None:
            p, rank, d, slot = back
            steps.append((i, p, d, slot))
            i = p
            back = best[p][rank][2]
        out.append(Path(tuple(steps), prod))
    return out
