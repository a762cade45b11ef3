"""The replay of a recorded graph at perturbed inputs: what the numerical check measures.

It reads only the trace's columns (values, op codes, parents), never live nodes, and never
runs the user's code again (no side effect runs twice). Every evaluation point is a column:
column 0 unperturbed, then ``x + eps`` and ``x - eps`` for each perturbation of a
:class:`~gradmagic.analysis.perturb.Perturbation`, so one pass computes every
``f(x ± eps e_i)``. :meth:`Replay.measure` runs it one of three ways:

- ``"floats"``: a pass per point on plain floats with the float forwards the engine ran.
  For a few points of a scalar graph: a numpy call per node costs more than a few float
  operations, so a deep graph (a long loop) is checked this way.
- ``"groups"``: numpy columns, all the nodes of one level and op in one call
  (:class:`GroupedProgram`). For a wide scalar graph (a network) at many points.
- ``"nodes"``: numpy columns, node by node (tensor graphs; deep graphs at many points).

The numpy replays split the columns into chunks that fit in memory.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from .numbers import fmt
from .perturb import Perturbation

__all__ = ["Replay", "Measured", "GroupedProgram", "group_levels", "rounding_scale", "FLOAT_POINTS"]

# perturbations replayed on plain floats, at most (beyond it numpy's columns pay)
FLOAT_POINTS = 3
# numbers in one chunk of columns: the node-by-node replay's (its memory), and the grouped
# replay's, smaller, as each of its calls gathers rows from the whole chunk
CHUNK = 2**22
GROUP_CHUNK = 2**21
# a graph replays by groups where its calls average at least this many nodes: a sum of
# squares (a group of squares, then a call a +) does, a loop whose every step waits for the
# one before does not (what it saves would not pay for its levels)
GROUP_MIN = 1.5
# op nodes, the last of the graph, whose levels say whether the rest is worth computing
PROBE = 2048
_EPS_FLOAT = float(np.finfo(float).eps)
_SAME = "same"  # a group's second operands are its first
# rounding errors allowed each evaluation of the target, in float epsilons times the size of
# the numbers that carry it (see rounding_scale)
_ROUNDING = 2.0


class Measured:
    """What one replay measured, one entry per perturbation: the target unperturbed
    (``f0``), the central slope (``numeric``), the one-sided slopes (``fwd``, ``bwd``), the
    actual steps after rounding and the size of the numbers compared."""

    def __init__(self, f0, plus, minus, hp, hm):
        self.f0 = f0
        self.steps = steps = hp + hm
        self.numeric = (plus - minus) / steps
        self.fwd, self.bwd = (plus - f0) / hp, (f0 - minus) / hm
        self.size = np.maximum(np.abs(f0), np.maximum(np.abs(plus), np.abs(minus)))
        self.slack = None

    def rounding(self, scale: float):
        """How far rounding may move each central slope (kept as ``slack``); ``size``
        becomes the size of the numbers rounded, at least ``scale``."""
        self.size = np.maximum(self.size, scale)
        self.slack = (2 * _ROUNDING * _EPS_FLOAT) * self.size / self.steps
        return self.slack


def rounding_scale(trace) -> float:
    """The size of the rounding errors the target carries, over the float epsilon.

    Each op node rounds its number by up to eps_float * |v|, which reaches the target times
    the node's gradient: the root sum of squares of ``grad * data`` over the op nodes. It
    exceeds |target| where large numbers cancel on the way: ``(1e12 + x) - 1e12`` is 2 but
    carries 1e12's rounding.
    """
    ops = trace.parent_a >= 0
    with np.errstate(all="ignore"):
        terms = (trace.grad * trace.data)[ops]
        terms = terms[np.isfinite(terms)]
        # sums of squares, not np.dot: BLAS wakes its threads for a long vector, which on a
        # busy machine costs far more than the sum
        total = float(np.square(terms).sum())
        for i, data in trace.tensor_data.items():
            grad = trace.tensor_grad.get(i)
            if ops[i] and grad is not None:  # (float32 rounds by its own epsilon)
                wide = np.asarray(data, dtype=np.result_type(data.dtype, np.float64))
                t = np.ravel(np.abs(np.asarray(grad) * wide)) * (_epsilon(data.dtype) / _EPS_FLOAT)
                t = t[np.isfinite(t)]
                total += float(np.square(t).sum())
    return math.sqrt(total) if math.isfinite(total) else math.inf


def _epsilon(dtype) -> float:
    return float(np.finfo(dtype).eps) if dtype.kind in "fc" else _EPS_FLOAT


def in_precision(trace, eps: float, atol: float, rtol: float) -> tuple:
    """``(eps, atol, rtol, note)`` for the least precise numbers the graph holds: where they
    are float32 or float16, a step of at least the cube root of their machine epsilon (the
    step at which a central difference's rounding and truncation errors balance) and
    tolerances of at least its square root, as gradcheck and check_grads loosen theirs."""
    kind = max({x.dtype for x in trace.tensor_data.values()}, key=_epsilon, default=None)
    if kind is None or _epsilon(kind) <= _EPS_FLOAT:
        return eps, atol, rtol, ""
    eps, tol = max(eps, _epsilon(kind) ** (1 / 3)), _epsilon(kind) ** 0.5
    note = (
        f"The graph computes in {kind.name}: inputs are moved by {eps:.2g} (the cube root of its "
        f"machine epsilon) and atol and rtol are at least {tol:.2g} (its square root)."
    )
    return eps, max(atol, tol), max(rtol, tol), note


class Replay:
    """A trace's graph, ready to be replayed at perturbed inputs."""

    def __init__(self, trace):
        self.trace = trace
        self.n = trace.n
        self.target = trace.n - 1
        leaf = trace.parent_a < 0
        self.op_rows = np.flatnonzero(~leaf)  # the op nodes, in topological order
        self.scalar = not trace.tensor_data
        # a scalar graph can replay on plain floats with each op's float forward
        self.floats_ok = self.scalar and all(callable(getattr(e, "f", None)) for e in trace.ops)
        self._grouped = False  # not made yet (None: too deep for groups)
        self._program = None

    def grouped(self) -> Optional["GroupedProgram"]:
        """The level-grouped program of a scalar graph, or None where its groups are too small
        to pay (a deep graph: a long loop)."""
        if self._grouped is False:
            self._grouped = (
                GroupedProgram.make(self.trace, self.op_rows)
                if self.scalar and len(self.op_rows)
                else None
            )
        return self._grouped

    # ------------------------------------------------------------------ measuring
    def measure(self, perturbation: Perturbation, eps: float, engine: str = "auto") -> Measured:
        """Replay the graph at every point of ``perturbation``, in as few chunks as memory
        allows. ``engine``: ``"floats"``, ``"groups"``, ``"nodes"`` or ``"auto"`` (floats
        for at most ``FLOAT_POINTS`` perturbations, else groups where the graph is wide, else
        nodes)."""
        count = len(perturbation)
        if engine == "floats" or (engine == "auto" and self.floats_ok and count <= FLOAT_POINTS):
            try:
                return self._measure_floats(perturbation, eps)
            except Exception:  # noqa: BLE001 - an op's float forward raised: numpy's then
                if engine == "floats":
                    raise
        grouped = None
        per_chunk = max(1, (GROUP_CHUNK // self.n - 1) // 2)
        if engine == "groups":
            grouped = GroupedProgram.make(self.trace, self.op_rows, min_size=0)
        elif engine == "auto" and self.scalar and len(self.op_rows):
            grouped = self.grouped()
            # each chunk of columns takes every group step: past a point (a huge graph, few
            # columns a chunk) one walk node by node costs less
            chunks = -(-max(count, 1) // per_chunk)
            if grouped is not None and 2 * chunks * grouped.calls > len(self.op_rows):
                grouped = None
        if grouped is not None:
            parts = [
                grouped.run(self, perturbation[start : start + per_chunk], eps)
                for start in range(0, max(count, 1), per_chunk)
            ]
        else:
            per_chunk = max(1, (CHUNK // self._peak() - 1) // 2)
            parts = []
            for start in range(0, max(count, 1), per_chunk):
                values, steps = self._replay(perturbation[start : start + per_chunk], eps)
                parts.append((self._target_column(values, 1 + 2 * len(steps[0])), steps))
        f0 = parts[0][0][0]
        f = np.concatenate([p[0][1:] for p in parts])
        hp = np.concatenate([p[1][0] for p in parts])
        hm = np.concatenate([p[1][1] for p in parts])
        return Measured(f0, f[0::2], f[1::2], hp, hm)

    def _measure_floats(self, perturbation: Perturbation, eps: float) -> Measured:
        """A pass on plain floats for each point: unperturbed, then each leaf up and down,
        then each direction's leaves up and down."""
        trace, rows = self.trace, self.op_rows
        floats = [e.f for e in trace.ops]
        program = (
            rows.tolist(),
            list(map(floats.__getitem__, trace.op_code[rows].tolist())),
            trace.parent_a[rows].tolist(),
            trace.parent_b[rows].tolist(),
        )
        data = trace.data.tolist()
        hp: list[float] = []
        hm: list[float] = []
        points: list[tuple[Sequence[int], Sequence[float]]] = [((), ())]  # (the nodes moved,
        # their numbers)
        for leaf in perturbation.node.tolist():
            x = data[leaf]
            up, down = x + eps, x - eps
            hp.append(up - x)
            hm.append(x - down)
            points += [((leaf,), (up,)), ((leaf,), (down,))]
        spread = perturbation.spread.tolist()
        for up, down in zip(*(m.tolist() for m in perturbation.moved(trace.data, eps))):
            hp.append(eps)
            hm.append(eps)
            points += [(spread, up), (spread, down)]
        f = []
        for moved, numbers in points:
            values = data.copy()
            for i, x in zip(moved, numbers):
                values[i] = x
            _float_pass(*program, values)
            f.append(float(values[self.target]))
        return Measured(
            np.float64(f[0]),
            np.array(f[1::2]),
            np.array(f[2::2]),
            np.array(hp, dtype=float),
            np.array(hm, dtype=float),
        )

    def _target_column(self, values, k: int):
        f = np.asarray(values[self.target], dtype=float)
        if f.ndim == 0:  # nothing perturbed in this chunk: one value for every column
            f = np.full(k, float(f))
        if f.ndim > 1:
            if f[0].size != 1:
                raise ValueError(
                    f"the target has shape {f.shape[1:]}; the numerical check needs a scalar target"
                )
            f = f.reshape(len(f))
        return f

    # ------------------------------------------------------------------ node by node
    def _make_program(self) -> None:
        """``(node, forward, a, b, free_a, free_b)`` for each op node: ``b`` is -1 for a unary
        op, -2 for a tensor op (``a`` its parents, ``free_b`` those to free). ``free_*`` marks
        a parent's last use, after which its array is dropped, so the replay's working set
        stays small."""
        trace, n = self.trace, self.n
        tensors = trace.tensor_data
        rows = self.op_rows
        a, b = trace.parent_a[rows], trace.parent_b[rows]
        last = np.full(n, -1, dtype=np.int64)
        last[a] = rows  # repeated indices: the last (largest) row wins
        has_b = b >= 0
        last_b = np.full(n, -1, dtype=np.int64)
        last_b[b[has_b]] = rows[has_b]
        last = np.maximum(last, last_b)
        last[self.target] = n  # never freed
        free_a = last[a] == rows
        free_b = has_b & (last[np.maximum(b, 0)] == rows) & (b != a)
        forwards = [entry.np for entry in trace.ops]
        program = list(
            zip(
                rows.tolist(),
                map(forwards.__getitem__, trace.op_code[rows].tolist()),
                a.tolist(),
                b.tolist(),
                free_a.tolist(),
                free_b.tolist(),
            )
        )
        for k, i in enumerate(rows.tolist() if tensors else ()):
            if i in tensors:  # a tensor op: its numpy forward with the node's params
                out, fn, pa, pb, _, _ = program[k]
                parents = (pa,) if pb < 0 else (pa, pb)
                free = tuple(p for p in set(parents) if last[p] == i)
                program[k] = (out, _with_params(fn, trace.params.get(i)), parents, -2, False, free)
        self._program = program
        # the most array elements alive at once, per column: a leaf lives from the start, an
        # op node from its row, each until its last use
        start = np.where(trace.parent_a < 0, 0, np.arange(n))
        end = np.where(last < 0, start, np.minimum(last, n - 1))
        weight = np.ones(n)
        for i, arr in tensors.items():
            weight[i] = max(1, arr.size)
        alive = np.cumsum(
            np.bincount(start, weight, minlength=n + 1)
            - np.bincount(end + 1, weight, minlength=n + 1)
        )
        self._peak_size = max(1, int(alive.max())) if n else 1

    def _peak(self) -> int:
        if self._program is None:
            self._make_program()
        return self._peak_size

    def _replay(self, perturbation: Perturbation, eps: float, keep: bool = False):
        """One pass over the nodes: every node's columns (``keep``) or the target's."""
        if self._program is None:
            self._make_program()
        values, steps = self._leaf_columns(perturbation, eps)
        for out, fn, a, b, free_a, free_b in self._program:
            if b >= 0:
                values[out] = fn(values[a], values[b])
                if free_b and not keep:
                    values[b] = None
            elif b == -1:
                values[out] = fn(values[a])
            else:
                values[out] = fn([values[i] for i in a])
                if not keep:
                    for i in free_b:
                        values[i] = None
            if free_a and not keep:
                values[a] = None
        return values, steps

    def _leaf_columns(self, perturbation: Perturbation, eps: float):
        """The leaves' columns, and the actual steps up and down of each perturbation.

        Column 0 is unperturbed; perturbation ``j`` moves its leaf by +eps in column
        ``2j + 1`` and by -eps in column ``2j + 2``. The steps are ``(x + eps) - x`` and
        ``x - (x - eps)`` after rounding. In a scalar graph an unperturbed leaf stays a
        plain number (numpy broadcasts it); with arrays, every scalar leaf gets its row.
        """
        trace, p = self.trace, perturbation
        count = len(p)
        k = 1 + 2 * count
        hp, hm = np.empty(count), np.empty(count)
        plus = np.arange(1, k, 2)  # the column of perturbation j's x + eps
        data = trace.data
        values = data.tolist()
        alone = np.flatnonzero(p.elem < 0)
        spread = p.spread if len(p.signs) else p.spread[:0]
        if self.scalar:
            leaves = np.unique(np.concatenate((p.node[alone], spread)))
        else:
            leaves = np.flatnonzero(trace.parent_a < 0)
            leaves = leaves[[i not in trace.tensor_data for i in leaves.tolist()]]
        base = data[leaves]
        m = np.repeat(base[:, None], k, axis=1)
        if alone.size:
            rows = np.searchsorted(leaves, p.node[alone])
            cols = plus[alone]
            m[rows, cols] += eps
            m[rows, cols + 1] -= eps
            hp[alone], hm[alone] = m[rows, cols] - base[rows], base[rows] - m[rows, cols + 1]
        if spread.size:  # each direction moves every leaf of spread
            rows = np.searchsorted(leaves, spread)
            for j, (up, down) in enumerate(zip(*p.moved(data, eps)), len(p.node)):
                m[rows, plus[j]] = up
                m[rows, plus[j] + 1] = down
                hp[j] = hm[j] = eps
        for leaf, row in zip(leaves.tolist(), m):
            values[leaf] = row
        for leaf, array in trace.tensor_data.items():  # (k, *shape) each
            if trace.parent_a[leaf] >= 0:
                continue
            array = np.asarray(array, dtype=float)
            flat = array.reshape(-1)
            columns = np.repeat(flat[None, :], k, axis=0)
            pick = np.flatnonzero(p.node == leaf)
            if pick.size:
                elems, c = p.elem[pick], plus[pick]
                columns[c, elems] += eps
                columns[c + 1, elems] -= eps
                hp[pick] = columns[c, elems] - flat[elems]
                hm[pick] = flat[elems] - columns[c + 1, elems]
            values[leaf] = columns.reshape((k,) + array.shape)
        return values, (hp, hm)

    # ------------------------------------------------------------------ the sanity check
    def agrees(self, f0):
        """(ok, note): does the unperturbed replay give the recorded target value?"""
        recorded = self.trace.target.data
        slack = 4 * _EPS_FLOAT * rounding_scale(self.trace)  # (float32 numbers round more)
        if _same(f0, recorded) or abs(np.sum(f0, dtype=float) - np.sum(recorded)) <= slack:
            return True, ""
        values, _ = self._replay(Perturbation([], []), 1.0, keep=True)
        first = ""
        for node in self.trace.nodes:
            got = np.asarray(values[node.index])
            got = got if got.ndim == 0 else got[0]
            if not _same(got, node.data):
                first = f" (it first differs at node #{node.index} {node.name!r}"
                if node.shape is None:
                    first += f": replayed {fmt(float(got), 6)}, recorded {fmt(node.data, 6)}"
                first += ")"
                break
        return False, (
            f"Replay mismatch: replaying the graph gives {fmt(float(f0), 6)} but the "
            f"run recorded {fmt(recorded, 6)}{first}. The numerical check is not "
            "trustworthy: an op's numpy forward differs from its float forward, "
            "or a node was changed after the run."
        )


def _float_pass(
    outs, fns, As, Bs, values, mul=operator.mul, add=operator.add, sub=operator.sub
) -> None:
    """Every op node of a scalar graph computed on plain floats, in order. ``+``, ``-`` and
    ``*`` are written as operators (the same float operations), which spares a call a node:
    it keeps the default check of a deep graph within twice a backward pass."""
    for out, f, a, b in zip(outs, fns, As, Bs):
        if f is mul:
            values[out] = values[a] * values[b]
        elif f is add:
            values[out] = values[a] + values[b]
        elif f is sub:
            values[out] = values[a] - values[b]
        elif b < 0:
            values[out] = f(values[a])
        else:
            values[out] = f(values[a], values[b])


def _with_params(fn, params):
    """A tensor op's replay: ``fn(*inputs, **params)`` on the list of inputs."""
    params = params or {}

    def replay(inputs):
        return fn(*inputs, **params)

    return replay


def _same(a, b) -> bool:
    """Equal up to float rounding (nan equals nan)."""
    if isinstance(b, (int, float)) and not isinstance(a, np.ndarray):
        a = float(a)
        return a == b or abs(a - b) <= 1e-12 + 1e-9 * abs(b) or (a != a and b != b)
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return False
    return bool(np.all(np.isclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True) | (a == b)))


# =========================================================================== groups
class GroupedProgram:
    """A scalar graph compiled for the numpy replay: the nodes of one level and op at once.

    A node's level is one more than its deepest parent's (leaves: 0), so the nodes of a level
    depend only on earlier ones, and the nodes of a level that share an op are one numpy call
    on a 2-d array ``V`` (a row per node, a column per point). Rows are numbered leaves first,
    then op nodes in the order computed, so each group is one slice of ``V``, its parents a
    slice too where they are consecutive rows, else gathered with ``take``. ``calls`` counts
    the numpy calls of one run.
    """

    __slots__ = ("leaves", "pos", "steps", "calls")

    @classmethod
    def make(cls, trace, rows, min_size: Optional[float] = None) -> Optional["GroupedProgram"]:
        """The program of op nodes ``rows`` (ascending), or None if its calls average fewer
        than ``min_size`` nodes (default ``GROUP_MIN``).

        In a big graph the levels of the last ``PROBE`` op nodes (a loop's last steps, a
        network's last layers) are computed first, their parents taken as inputs: where they
        are not worth groups, the graph is taken for a deep one without computing the levels
        of the rest, which would cost about half a backward pass.
        """
        least = GROUP_MIN if min_size is None else min_size
        if len(rows) >= 2 * PROBE and group_levels(trace, rows[-PROBE:], least, probe=True) is None:
            return None
        found = group_levels(trace, rows, least)
        if found is None:
            return None
        self = cls()
        self._compile(trace, rows, *found)
        return self

    def _compile(self, trace, rows, key, perm, cut) -> None:
        n = trace.n
        pa = trace.parent_a
        order = rows[perm]  # op nodes in the order they are computed
        leaves = np.flatnonzero(pa < 0)
        nl = len(leaves)
        pos = np.empty(n, dtype=np.intp)  # node index -> row of V
        pos[leaves] = np.arange(nl)
        pos[order] = np.arange(nl, n)
        A = pos[pa[order]]
        b = trace.parent_b[order]
        B = np.where(b >= 0, pos[np.maximum(b, 0)], -1)
        starts = np.concatenate(([0], cut))
        ends = np.concatenate((cut, [len(order)]))
        code = (key[starts] // 2) % len(trace.ops)
        square = (key[starts] % 2).astype(bool).tolist()
        forwards = [entry.np for entry in trace.ops]
        is_ufunc = np.array([isinstance(f, np.ufunc) for f in forwards], dtype=bool)
        binary = B[starts] >= 0
        # a group of one node is a single call: a binary ufunc (written in place) or another;
        # consecutive singles of one kind make one run of (fn, a row, b row or -1, row)
        single = ends - starts == 1
        kind = np.where(single, np.where(binary & is_ufunc[code], 1, 2), 0).tolist()
        where = starts[single]
        run = list(
            zip(
                map(forwards.__getitem__, code[single].tolist()),
                A[where].tolist(),
                B[where].tolist(),
                (where + nl).tolist(),
            )
        )
        taken = (np.cumsum(single) - single).tolist()  # singles before each group
        # breaks[i]: how many times the rows of A (B) stop being consecutive before position i
        breaks_a = np.concatenate(([0], np.cumsum(np.diff(A) != 1))).tolist()
        breaks_b = np.concatenate(([0], np.cumsum(np.diff(B) != 1))).tolist()
        steps: list[tuple[Any, bool, Any, Any, int, int]] = []  # (forward or None: a run of
        # singles, is a ufunc or its kind, parent rows, second parent rows, start, end)
        for f, g in _runs(kind):
            if kind[f]:
                steps.append((None, kind[f] == 1, run[taken[f] : taken[f] + g - f], None, 0, 0))
            else:
                s, e = int(starts[f]), int(ends[f])
                fn = forwards[code[f]]
                b = None if not binary[f] else _SAME if square[f] else _rows(B, s, e, breaks_b)
                steps.append(
                    (fn, isinstance(fn, np.ufunc), _rows(A, s, e, breaks_a), b, s + nl, e + nl)
                )
        self.calls = sum(len(a) if fn is None else 1 for fn, _, a, _, _, _ in steps)
        self.leaves, self.pos, self.steps = leaves, pos, steps

    def run(self, replay: Replay, perturbation: Perturbation, eps: float):
        """(target column, (steps up, steps down)) at the perturbation's points."""
        trace, p = replay.trace, perturbation
        k = 1 + 2 * len(p)
        V = np.empty((trace.n, k))
        V[: len(self.leaves)] = trace.data[self.leaves][:, None]
        rows = self.pos[p.node]
        x = trace.data[p.node]
        up, down = x + eps, x - eps
        cols = np.arange(1, 2 * len(p.node) + 1, 2)
        V[rows, cols] = up
        V[rows, cols + 1] = down
        hp, hm = up - x, x - down
        if len(p.signs):  # each direction moves every leaf of spread in two columns
            spread = self.pos[p.spread]
            for c, u, d in zip(range(2 * len(p.node) + 1, k, 2), *p.moved(trace.data, eps)):
                V[spread, c] = u
                V[spread, c + 1] = d
            hp = np.concatenate((hp, np.full(len(p.signs), eps)))
            hm = np.concatenate((hm, np.full(len(p.signs), eps)))
        row = None  # each row of V as a view, made once if single nodes need them
        for fn, uf, a, b, s, e in self.steps:
            if fn is None:  # a run of single nodes
                row = row or list(V)
                if uf:
                    for f, i, j, r in a:
                        f(row[i], row[j], row[r])
                else:
                    for f, i, j, r in a:
                        row[r][:] = f(row[i]) if j < 0 else f(row[i], row[j])
                continue
            x = V[a] if type(a) is slice else V.take(a, axis=0)
            if b is None:
                if uf:
                    fn(x, V[s:e])
                else:
                    V[s:e] = fn(x)
                continue
            y = x if b is _SAME else V[b] if type(b) is slice else V.take(b, axis=0)
            if uf:
                fn(x, y, V[s:e])
            else:
                V[s:e] = fn(x, y)
        return V[self.pos[replay.target]].copy(), (hp, hm)


def _rows(index: np.ndarray, s: int, e: int, breaks: list):
    """Rows ``index[s:e]`` of ``V`` to read: a slice (a view, nothing copied) where they are
    consecutive."""
    if breaks[e - 1] == breaks[s]:
        return slice(int(index[s]), int(index[s]) + e - s)
    return index[s:e]


def _runs(kind: list):
    """(first, end) of each step: a group of several nodes alone, consecutive singles of one
    kind together."""
    first = 0
    for k in range(1, len(kind) + 1):
        if k == len(kind) or kind[k] != kind[k - 1] or kind[k] == 0:
            yield first, k
            first = k


def group_levels(trace, rows, least, probe: bool = False):
    """(key, perm, cut) of op nodes ``rows`` (ascending): each node's level and op code as one
    sort key, the order that sorts them and where each group starts in it; None if the groups
    average fewer than ``least`` nodes. A ``probe`` (the last rows of
    a graph) takes parents outside ``rows`` as inputs (level 0)."""
    pa, pb = trace.parent_a, trace.parent_b
    if probe:
        found: dict[int, int] = {}
        get = found.get
        for i, a, b in zip(rows.tolist(), pa[rows].tolist(), pb[rows].tolist()):
            x, y = get(a, 0), get(b, 0)
            found[i] = (x if x > y else y) + 1
        levels = np.array(list(found.values()), dtype=np.int64)  # (in the order of rows)
    else:
        level = [0] * (trace.n + 1)  # level[-1] (a missing second parent) stays 0
        for i, a, b in zip(rows.tolist(), pa[rows].tolist(), pb[rows].tolist()):
            x, y = level[a], level[b]
            level[i] = (x if x > y else y) + 1
        levels = np.array(level, dtype=np.int64)[rows]
    # a node whose two parents are one node (x * x) is grouped apart: its parent is read once
    square = pa[rows] == pb[rows]
    key = (levels * len(trace.ops) + trace.op_code[rows]) * 2 + square
    perm = np.argsort(key, kind="stable")
    key = key[perm]
    cut = np.flatnonzero(key[1:] != key[:-1]) + 1
    if len(rows) < least * (len(cut) + 1):
        return None
    return key, perm, cut
