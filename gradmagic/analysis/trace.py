"""A snapshot of one backward run: the nodes, their values and gradients, as columns.

A :class:`Trace` is what ``%%autograd`` returns and what every view, the
numerical check, the expected answers and the PyTorch replay read. It copies
what it needs from the live nodes when it is made -- values, gradients, op
entries, parent links, labels -- into numpy columns (an array only the graph
holds is kept, not copied), and keeps no live node: later changes to the Values
(an optimizer step, another backward) do not change it, and a kept trace costs
about 30 bytes a node.

``trace.nodes[i]`` gives a :class:`Node`, a small view made on demand that
reads the columns.
"""

from __future__ import annotations


import sys
from collections.abc import Mapping
from itertools import chain, repeat
from typing import Any
from operator import attrgetter
from sys import getrefcount

import math

import numpy as np

from ..core.array_nodes import Array, Scalar64
from ..core.engine import walk as engine_walk
from ..core.fpstate import ignoring
from ..core.ops import OPS, Op, real
from ..core.tensor_ops import TENSOR_OPS
from .nodes import ExactInts, Node, Nodes, nest
from .numbers import all_finite, short
from .options import Options

__all__ = ["Node", "Trace", "COLUMNS"]

COLUMNS = (
    "data",
    "grad",
    "op_code",
    "parent_a",
    "parent_b",
    "label_code",
    "kink",
    "finite",
    "constant",
    "site",
)
"""The per-node numpy columns of a :class:`Trace`."""

_DATA, _GRAD, _LABEL = attrgetter("data"), attrgetter("grad"), attrgetter("label")
_OP, _A, _B = attrgetter("_op"), attrgetter("_a"), attrgetter("_b")
_SITE = attrgetter("_site")


def _IDENTITY(x):
    return x


_LINKS = attrgetter("_a", "_b", "_op")
# every op table entry, scalar and tensor, by id: the walk's op entries become codes in one pass
_OP_ENTRIES = list(OPS.values()) + list(TENSOR_OPS.values())
assert len(_OP_ENTRIES) < 254  # a code is a byte
for _c, _op in enumerate(_OP_ENTRIES):  # frozen entries: the number a graph walk records
    object.__setattr__(_op, "_trace_code", _c + 1)
del _c, _op
_ONE_PASS = 1 << 15  # from this many nodes on, read the links in one pass
_FLOAT_TYPES = {float: 0, int: 1}  # a value's Python type → its kind; anything else: 2
_FLOATS = {float}


def _finite(x) -> bool:
    """:func:`all_finite` of an array, with numpy's errors ignored already."""
    if x.__class__ is np.ndarray and x.dtype.kind == "f" and x.ndim:
        return math.isfinite(_sum(x, None)) or bool(np.isfinite(x).all())
    return all_finite(x)


_sum = np.add.reduce
_FRESH_GRADS = frozenset({Array, Scalar64})
_COUNTED = sys.implementation.name == "cpython" and sys.version_info < (3, 14)


def _fresh_data(order, parents_a, parents_b):
    """``fresh(i, x)`` for node ``i``'s data ``x``: a numpy scalar node's (made afresh at each
    read), or an array node's plain view whose numbers only the graph holds (CPython's
    reference counts: the node held by the walk's list and its children, its memory by it
    and ``x``), which nothing can change later."""
    links = np.concatenate((parents_a[parents_a >= 0], parents_b[parents_b >= 0]))
    children = np.bincount(links, minlength=len(order)).tolist()

    def fresh(i, x):
        node = order[i]
        if node.__class__ is Scalar64:
            return x.base is None
        owner = node.base if node.__class__ is Array and _COUNTED else None
        return (
            owner is not None
            and owner.__class__ is np.ndarray
            and owner.base is None
            and x.base is owner
            and getrefcount(node) == children[i] + 3  # (the list, the links, node, the call)
            and getrefcount(owner) == 4  # (node.base, x.base, owner, the call)
        )

    return fresh


class Trace:
    """One run: ``trace.value``, ``trace.grads``, ``trace.nodes``, ``trace.target``.

    Parameters
    ----------
    target:
        The node ``backward()`` was called on (its gradients must be filled).
    walk:
        The :class:`~gradmagic.core.engine.Walk` backward made
        (``walk(target, zero=True)``, then ``backward(target, 1.0, walk)``), as
        the magic does: the columns of links, ops and labels come from its
        lists. Made here when neither it nor ``order`` is given.
    order:
        Instead of a walk: the graph's nodes, parents first and ``target``
        last (``target.topo()``); the links are then read from the nodes.
    bindings:
        Names in the user's namespace → the node each name refers to after the
        run; these decide which node ``grads[name]`` means when a name labels
        several nodes (``x = x * 2`` in a loop).
    branch_events:
        How many times a Value's number decided control flow during the run.
    float_conversions:
        How many times a Value was turned into a float outside the graph.
    source:
        The cell's text, kept as ``trace.source``.
    options:
        Display and check settings (eps, atol, rtol, rankdir, max_nodes, ...).

    Columns
    -------
    Row ``i`` of every column is node ``i`` of ``trace.nodes`` (topological
    order: parents first, the target last); ``trace.n`` is their number.

    ``data``, ``grad``
        float64 arrays: each scalar node's value and gradient (an int too big
        for a float reads ±inf; ``exact`` keeps every int value as it was).
        nan for a tensor node, whose arrays are in ``tensor_data`` and
        ``tensor_grad`` (index → array copy).
    ``op_code``
        int16: the node's op as a position in ``ops`` (the distinct op table
        entries of this graph, scalar and tensor), -1 for a leaf.
    ``parent_a``, ``parent_b``
        int32: the indices of the first and second parent, -1 where there is none.
    ``label_code``
        int32: position in ``label_names`` (``label_names[0]`` is ``''``).
    ``kink``, ``finite``, ``constant``
        bool: a subgradient was used; data and grad are finite (a constant:
        data alone); a leaf that is not an input (:attr:`Node.is_constant`).
    ``exact``
        index → the int a node held (ints stay ints in ``Node.data``).
    ``params``
        index → a tensor op's non-differentiable arguments (axis, shape, ...).
    ``no_grad``
        frozenset of the leaves made with ``requires_grad=False``.
    """

    # (set as the snapshot is made, by either of its two ways)
    exact: Mapping[int, Any]  # an ExactInts, or a dict of a graph's few ints
    tensor_data: dict[int, Any]
    tensor_grad: dict[int, Any]
    params: dict
    _leaves: np.ndarray | None
    _finite: np.ndarray | None  # (the columns finite and kink, made when first read)
    _kink: np.ndarray | None
    _names: dict[str, int] | None
    _report: tuple[Any, Any] | None  # (settings, CheckReport) of the last check()

    def __init__(
        self,
        target,
        *,
        order=None,
        walk=None,
        bindings: dict | None = None,
        branch_events: int = 0,
        float_conversions: int = 0,
        source: str | None = None,
        options: Options | dict | None = None,
        warnings: list | None = None,
        sites: tuple | None = None,
    ):
        if walk is not None:
            order = walk.order
        elif order is None:
            walk = engine_walk(target)
            order = walk.order
        if not order or order[-1] is not target:
            raise ValueError("order must list the graph's nodes with the target last")
        names = list(bindings or {})
        if walk is not None:
            self._from_walk(walk)
            found = list(map(walk.index, (bindings or {}).values()))
        else:
            self._snapshot(order)
            found = self._find(
                np.fromiter(map(id, (bindings or {}).values()), np.int64, len(names))
            ).tolist()
            del self._ids  # only needed while reading the live graph
        self._sites_of(order, sites)
        # a numpy scalar target (np.sum(a * w)) is a number, as plain numpy gives it
        self._scalar_target = isinstance(target, np.generic)
        self.bindings = {name: i for name, i in zip(names, found) if i >= 0}
        # names bound to nodes the target does not depend on (explanations.walk greys them)
        values = list((bindings or {}).values())
        self.unreached = {
            name: (d.copy() if isinstance(d, np.ndarray) else d)
            for name, i, d in zip(names, found, (v.data for v in values))
            if i < 0
        }
        self.branch_events = branch_events
        self.float_conversions = float_conversions
        self.source = source
        self.options = Options.of(options)
        self.warnings: list[str] = list(warnings or [])
        self._report = None  # (settings, CheckReport) of the last check()
        # the code, ready to be run again plainly for the check (notebook.rerun.Rerun), or
        # None: then the check can only replay the graph
        self.rerun: Any = None
        # a learner's own engine's gradients judged (an expect-kind CheckReport), or None
        self.claims: Any = None
        # ... and their own graph as their draw_dot draws it (notebook.learner.drawing), or None
        self.own_graph: dict | None = None
        self.steps: list = []  # a training loop: the loss at each backward() the cell called
        self.trained = False  # backward() was called on a node other than the target
        self.zero_grads: dict = {}  # label → 0: a function's inputs that do not reach the target
        self._names = None  # label → node index, made on first use

    # ------------------------------------------------------------------ the snapshot
    def _sites_of(self, order, sites) -> None:
        """``site`` and ``calls``: where in the code each node was made (``core.sites``).

        ``sites`` is ``(first, calls, functions[, runs])`` from the run that made the graph:
        its first site, its call records ``(base, function id, caller's site)``, the
        rewritten functions by id (``(name, filename, lines)``) and how many times each
        looped statement ran (site → count, ``runs``). Sites become offsets from ``first``
        (-1: made before the run or outside rewritten code).
        """
        n = self.n
        self.calls: list = []
        self.functions: dict = {}
        self.runs: dict = {}
        if sites is None:
            self.site = np.full(n, -1, dtype=np.int32)
            return
        first, calls, functions, *rest = sites
        self.runs = {site - first: count for site, count in (rest[0] if rest else {}).items()}
        raw = np.fromiter(map(_SITE, order), np.int64, n) - first
        raw[(raw < 0) | (raw > np.iinfo(np.int32).max)] = -1
        self.site = raw.astype(np.int32)
        self.calls = [(b - first, f, p - first if p >= first else -1) for b, f, p in calls]
        used = {f for _, f, _ in calls}
        self.functions = {f: functions[f] for f in used}

    def _from_walk(self, w) -> None:
        """Fill the columns from a :class:`~gradmagic.core.engine.Walk` of the graph.

        The walk recorded each node's op entry and its parents' marks as it
        placed the nodes; this turns them into columns with numpy, and reads
        labels, data and gradients in one ``map`` pass each.
        """
        order = w.order
        n = self.n = len(order)
        links = np.subtract(
            np.fromiter(chain(w.pa, w.pb), np.int64, 2 * n),
            w.base,
            out=np.empty(2 * n, np.int32),
            casting="unsafe",
        )
        self.parent_a, self.parent_b = links[:n], links[n:]
        self._op_codes_of(w.codes, order)
        self._labels_of(order, w.named)
        self.exact = {}
        self.tensor_data = {}
        self.tensor_grad = {}
        self.params = {}
        if w.grads is None or len(w.grads) != n:  # a graph with tensors: read the nodes
            self._values(order)
            return
        self.data = np.frombuffer(w.data, dtype=np.float64).copy()
        odd = w.odd  # numbers of other types (bools, int subclasses...)
        if odd:
            values = w.odd_data
            try:
                self.data[odd] = values
            except (TypeError, ValueError, OverflowError):  # an int too big for a float...
                self.data[odd] = list(map(real, values))
        if odd or w.ints:
            self.exact = ExactInts.of(odd, w.odd_data, self.data, w.ints, order)
        self.grad = np.frombuffer(w.grads, dtype=np.float64)[::-1].copy()
        self._flags(order)

    def _op_codes_of(self, codes: list, order) -> None:
        """``op_code`` and ``ops`` from the walk's codes (``_trace_code`` of each node's op: 0
        for a leaf, 255 for an entry of no table or a leaf with an entry), read as bytes.

        The entries are numbered in order of first use (``bytes.find``: one ``memchr`` per
        entry the graph uses); -1 for a leaf. A graph with a code 255 is numbered by the
        entries' identities instead (:meth:`_number_ops`).
        """
        raw = bytes(codes)
        if raw.find(255) >= 0:
            self._number_ops(lambda i: order[i]._op)
            return
        arr = np.frombuffer(raw, np.uint8)
        used = sorted(set(raw), key=raw.find)
        renumber = [-1] * 256
        for number, code in enumerate(c for c in used if c):
            renumber[code] = number
        self.op_code = np.array(renumber, np.int16)[arr]
        self.ops = [_OP_ENTRIES[c - 1] for c in used if c]

    def _number_ops(self, op_at) -> None:
        """``op_code`` and ``ops`` with this graph's op entries numbered by identity, in order
        of first use (-1: a leaf); ``op_at(i)`` is node ``i``'s entry."""
        n = self.n
        ops = [op_at(i) for i in range(n)]
        ids = list(map(id, ops))
        distinct = dict.fromkeys(ids)
        distinct.pop(id(None), None)
        code_of = {k: c for c, k in enumerate(distinct)}
        code_of[id(None)] = -1
        self.op_code = np.fromiter(map(code_of.__getitem__, ids), np.int16, n)
        self.ops = [ops[ids.index(k)] for k in distinct]

    def _labels(self, labels: list) -> None:
        """``label_code`` and ``label_names`` from each node's label."""
        self._labels_of(
            labels,
            np.flatnonzero(np.fromiter(map(bool, labels), bool, len(labels))).tolist(),
            _IDENTITY,
        )

    def _labels_of(self, nodes, named: list, label=_LABEL) -> None:
        """``label_code`` and ``label_names``: ``named`` are the positions in ``nodes`` with a
        label (most nodes of a graph, those an op made, have none), read with ``label``."""
        label_at = {"": 0}
        code = label_at.setdefault
        self.label_code = np.zeros(len(nodes), dtype=np.int32)
        if named:
            self.label_code[named] = [code(label(nodes[i]), len(label_at)) for i in named]
        self.label_names = list(label_at)

    def _snapshot(self, order) -> None:
        """Fill the columns from the live nodes (parents first).

        Every per-node step is a ``map`` or a numpy call; only tensor nodes,
        ints and kinks are visited one by one.
        """
        n = self.n = len(order)
        # parent links as indices: node ids sorted once, each parent's id looked up
        # with a binary search (a dict keyed on ids costs several times more)
        ids = np.fromiter(map(id, order), np.int64, n)
        perm = np.argsort(ids, kind="stable")
        self._ids = (ids[perm], perm)
        if n >= _ONE_PASS:  # the ids of parents and op entry in one pass over the nodes
            links = (
                np.fromiter(map(id, chain.from_iterable(map(_LINKS, order))), np.int64, 3 * n)
                .reshape(n, 3)
                .T.copy()
            )
        else:  # (a pass each is cheaper while the nodes fit in the cache)
            links = [np.fromiter(map(id, map(get, order)), np.int64, n) for get in (_A, _B, _OP)]
        self.parent_a = self._find(links[0])
        self.parent_b = self._find(links[1])
        # op codes: the distinct op entries in order of first use, -1 for a leaf
        op_ids = links[2]
        distinct, first, code = np.unique(op_ids, return_index=True, return_inverse=True)
        rank = np.argsort(first, kind="stable")  # code by first use, not by address
        entries = [order[i]._op for i in first[rank].tolist()]
        renumber = np.empty(len(distinct), dtype=np.int16)
        renumber[rank] = np.arange(len(distinct), dtype=np.int16)
        self.op_code = renumber[code.reshape(-1)] if n else np.zeros(0, dtype=np.int16)
        if entries and entries[0] is None:  # the leaves' "op"
            self.op_code -= 1
            entries.pop(0)
        elif None in entries:
            none = entries.index(None)
            self.op_code[self.op_code == none] = -1
            self.op_code[self.op_code > none] -= 1
            entries.pop(none)
        self.ops = entries
        self._labels(list(map(_LABEL, order)))
        self.exact = {}
        self.tensor_data = {}
        self.tensor_grad = {}
        self.params = {}
        self._values(order)

    def _values(self, order) -> None:
        """The data and grad columns read from the nodes (tensor nodes one by one)."""
        n = self.n
        # what no one else holds is kept as it is: the data of the magic's nodes nothing else
        # holds (see _fresh_data), the gradient of a node the magic made (its numbers plain
        # again after the cell, the node dropped; the sweep adds contributions out of place)
        fresh = _fresh_data(order, self.parent_a, self.parent_b)
        exact: dict[int, Any] = {}  # (filled by _column with the int values)
        self.exact = exact
        self.data = self._column(list(map(_DATA, order)), self.tensor_data, exact, fresh)
        grad = None
        if not self.tensor_data:  # every gradient is a number: straight into floats
            try:
                grad = np.fromiter(map(_GRAD, order), np.float64, n)
            except (TypeError, ValueError, OverflowError):
                pass
        if grad is None:
            fresh = lambda i, x: x.base is None and order[i].__class__ in _FRESH_GRADS  # noqa: E731
            grad = self._column(list(map(_GRAD, order)), self.tensor_grad, None, fresh)
        self.grad = grad
        self._flags(order)

    def _numbers_of_arrays(self, order) -> None:
        """A float64 number node an array op made (``W[i, j]``, ``np.sum(A)``) is kept as the
        0-d array node it stands for: its data and gradient 0-d arrays and its op's params
        (its ``finite`` and ``kink`` are read from them as a tensor node's are)."""
        codes = [c for c, e in enumerate(self.ops) if e.__class__ is not Op]
        if not codes:
            return
        data, grad, tensors, grads = self.data, self.grad, self.tensor_data, self.tensor_grad
        for i in np.flatnonzero(np.isin(self.op_code, codes)).tolist():
            if i in tensors:
                continue
            tensors[i] = np.array(data[i])
            grads[i] = np.array(grad[i])
            data[i] = grad[i] = np.nan
            v = order[i]
            if v._params:
                self.params[i] = dict(v._params)

    def _flags(self, order) -> None:
        """``constant`` (and the tensor nodes' extras) from the columns; ``finite`` and
        ``kink`` are made from them when first read."""
        no_grad = []
        self.constant = (self.parent_a < 0) & (self.label_code == 0)
        grads, params, constant = self.tensor_grad, self.params, self.constant
        for i, x in self.tensor_data.items():  # tensor nodes, one by one
            v = order[i]
            if i not in grads:  # a numpy scalar gradient
                grads[i] = np.array(v.grad, dtype=x.dtype).reshape(x.shape)
                self.grad[i] = np.nan
            if v._a is None:
                constant[i] = not v.requires_grad
                if constant[i]:
                    no_grad.append(i)
            else:
                constant[i] = False
                if v._params:  # (replay reads none as no params)
                    params[i] = v.params
        self.no_grad = frozenset(no_grad)
        self._numbers_of_arrays(order)
        self._finite = self._kink = self._leaves = None

    @property
    def finite(self) -> np.ndarray:
        """bool column: data and grad are finite (a constant: data alone)."""
        if self._finite is None:
            constant = self.constant
            finite = np.isfinite(self.data) & (np.isfinite(self.grad) | constant)
            with ignoring():  # (the error state set once for the loop, not at each sum)
                for i, x in self.tensor_data.items():
                    finite[i] = _finite(x) and (constant[i] or _finite(self.tensor_grad[i]))
            self._finite = finite
        return self._finite

    @property
    def kink(self) -> np.ndarray:
        """bool column: a subgradient was used at the node (its op's kink test)."""
        if self._kink is None:
            self._kink = kink = np.zeros(self.n, dtype=bool)
            for i, x in self.tensor_data.items():
                entry = self.op_entry(i)
                if entry is not None and entry.kink is not None and self.parent_a[i] >= 0:
                    parents = [self._data(p) for p in Node(self, i).parents]
                    kink[i] = bool(entry.kink(x, *parents, **self.params.get(i, {})))
            self._scalar_kinks(kink)
        return self._kink

    def _find(self, query: np.ndarray) -> np.ndarray:
        """The index of the node with each id in ``query`` (int32), -1 where none has it."""
        ids, perm = self._ids
        if not len(ids):
            return np.full(len(query), -1, dtype=np.int32)
        pos = np.searchsorted(ids, query)
        np.minimum(pos, len(ids) - 1, out=pos)
        return np.where(ids[pos] == query, perm[pos], -1).astype(np.int32)

    def _column(self, values: list, arrays: dict, exact: dict | None, fresh) -> np.ndarray:
        """A float64 column of ``values``; arrays go to ``arrays``, ints also to ``exact``.

        An array is copied unless ``fresh(i, x)`` says no one else holds it and it shares its
        memory with no other array kept (a node's gradient may be its child's, or a view
        of it): each entry of ``arrays`` owns its numbers."""
        n = len(values)
        if set(map(type, values)) <= _FLOATS:
            return np.array(values, dtype=np.float64) if n else np.zeros(0)
        kinds = np.fromiter(map(_FLOAT_TYPES.get, map(type, values), repeat(2, n)), np.int8, n)
        odd = np.flatnonzero(kinds).tolist()
        kept: set = set()  # ids of the arrays kept as they are
        for i in odd:
            x = values[i]
            if isinstance(x, np.ndarray):
                if x.__class__ is np.ndarray and id(x) not in kept and fresh(i, x):
                    kept.add(id(x))
                else:
                    x = x.copy()
                arrays[i] = x
                values[i] = np.nan
            elif isinstance(x, int) and exact is not None:
                exact[i] = x
                values[i] = real(x)
            elif isinstance(x, complex):  # a complex number's gradient: a 0-d array of it
                arrays[i] = np.array(x)
                values[i] = np.nan
            else:
                values[i] = real(x)
        return np.array(values, dtype=np.float64) if n else np.zeros(0)

    def _scalar_kinks(self, kink: np.ndarray) -> None:
        """``kink`` for scalar nodes: each kinked op's test on its parents' data column."""
        for c, entry in enumerate(self.ops):
            test = getattr(entry, "kink", None)
            if test is None or getattr(entry, "arity", None) is None:
                continue
            rows = np.flatnonzero(self.op_code == c)
            rows = (
                np.array([i for i in rows.tolist() if i not in self.tensor_data], dtype=np.intp)
                if self.tensor_data
                else rows
            )
            if not rows.size:
                continue
            args = [self.data[self.parent_a[rows]]]
            if entry.arity == 2:
                args.append(self.data[self.parent_b[rows]])
            try:
                with np.errstate(all="ignore"):
                    hit = np.asarray(test(*args), dtype=bool)
                if hit.shape != rows.shape:
                    raise ValueError
            except Exception:  # noqa: BLE001 - a test written for numbers only
                data = self._data
                hit = np.array(
                    [bool(test(*[data(p) for p in Node(self, i).parents])) for i in rows.tolist()],
                    dtype=bool,
                )
            kink[rows] = hit

    def _data(self, i: int):
        """Node ``i``'s data as recorded: a float, the exact int, or an array."""
        arr = self.tensor_data.get(i)
        if arr is not None:
            return arr
        x = self.exact.get(i)
        return float(self.data[i]) if x is None else x

    def _grad(self, i: int):
        arr = self.tensor_grad.get(i)
        return float(self.grad[i]) if arr is None else arr

    # ------------------------------------------------------------------ cuts
    # Set by mark_cuts (the magic does, after the run): the numbers a function with no
    # gradient rule made (index → "line 3: statistics.mean"), and every place the run
    # cut the graph that may reach the target: (line, function) pairs.
    cut_notes: dict = {}
    cut_places: tuple = ()

    def mark_cuts(self, notes: dict, places) -> None:
        """Record the run's cuts: ``notes`` (node index → where its number was made outside
        the graph) and ``places`` ((line, function) of each cut the gradient may miss)."""
        self.cut_notes = dict(notes)
        self.cut_places = tuple(dict.fromkeys(places))

    @property
    def cut(self) -> np.ndarray:
        """bool column: the node's number was made outside the graph, by a function with no
        gradient rule, so no gradient flows through it to what went in (``cut_notes``)."""
        column = np.zeros(self.n, dtype=bool)
        if self.cut_notes:
            column[list(self.cut_notes)] = True
        return column

    # ------------------------------------------------------------------ facts
    @property
    def nodes(self) -> Nodes:
        """Every node, parents first: ``trace.nodes[i]`` is a :class:`Node`."""
        return Nodes(self)

    @property
    def target(self) -> Node:
        """The node backward ran from (the last one)."""
        return Node(self, self.n - 1)

    @property
    def value(self):
        """The target's data: a float, an int, an array, or numpy's scalar for one."""
        value = self._data(self.n - 1)
        if self._scalar_target and isinstance(value, np.ndarray) and value.ndim == 0:
            return value[()]
        if self._scalar_target and value.__class__ is float:  # a float64 number node's
            return np.float64(value)
        return value

    @property
    def leaf_index(self) -> np.ndarray:
        """Indices of the leaves (nodes with no parents), ascending."""
        if self._leaves is None:
            self._leaves = np.flatnonzero(self.parent_a < 0)
        return self._leaves

    @property
    def leaves(self) -> list[Node]:
        return [Node(self, i) for i in self.leaf_index.tolist()]

    def op_entry(self, i: int):
        """The op table entry (scalar or tensor) that made node ``i``, or None."""
        code = self.op_code[i]
        return None if code < 0 else self.ops[code]

    def _named(self) -> dict:
        """label → index of the node it means (as :meth:`node` chooses), for every label."""
        if self._names is None:
            rows = np.flatnonzero(self.label_code)
            names = self.label_names
            out = dict(zip(map(names.__getitem__, self.label_code[rows].tolist()), rows.tolist()))
            for name, i in self.bindings.items():
                if names[self.label_code[i]] == name:
                    out[name] = i
            self._names = out
        return self._names

    def node(self, name: str) -> Node:
        """The node a name means: the one it is bound to, else the last so labelled."""
        if name in self.bindings:
            return Node(self, self.bindings[name])
        i = self._named().get(name)
        if i is None:
            raise KeyError(
                f"no node is labelled {name!r}; labelled nodes: "
                f"{', '.join(sorted(self.grads)) or 'none'}"
            )
        return Node(self, i)

    @property
    def grads(self) -> dict:
        """label → gradient of the target, for every labelled node (and 0 for a named input
        that does not reach the target: a function's parameter, see ``zero_grads``)."""
        grads = {name: self._grad(i) for name, i in self._named().items()}
        for name, zero in self.zero_grads.items():
            grads.setdefault(name, zero)
        return grads

    def grads_of(self, path: str):
        """The gradient of what ``path`` names, in the shape of the data it names.

        ``trace.grads_of("n.w[0]")`` is one number; ``trace.grads_of("n.w")`` the list of the
        gradients of ``n.w``'s numbers, ``trace.grads_of("params")`` a dict of lists: the
        container the cell held, filled with gradients (the inputs the magic named by
        their paths). A KeyError if nothing is named so.
        """
        return grads_of(self.grads, path)

    @property
    def values(self) -> dict:
        """label → data, for every labelled node (same choice of node as ``grads``)."""
        return {name: self._data(i) for name, i in self._named().items()}

    @property
    def branch_dependent(self) -> bool:
        """True if the run's control flow depended on a Value's number."""
        return self.branch_events > 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the columns (tensor arrays and dicts not counted)."""
        return sum(getattr(self, c).nbytes for c in COLUMNS)

    # ------------------------------------------------------------------ checks
    def check(
        self,
        eps: float | None = None,
        atol: float | None = None,
        rtol: float | None = None,
        *,
        max_leaves="auto",
        max_elements: int | None = None,
        seed: int = 0,
    ):
        """The numerical check: finite differences beside each analytic gradient.

        Settings default to the run's options (``--eps/--atol/--rtol``), else
        PyTorch gradcheck's (eps 1e-6, atol 1e-5, rtol 1e-3); ``max_leaves=None``
        checks every leaf of a big graph (see :func:`gradmagic.analysis.check.check`).
        The report of the last settings asked for is kept.
        """
        from .check import check

        opts = self.options
        settings = (
            eps if eps is not None else opts.eps,
            atol if atol is not None else opts.atol,
            rtol if rtol is not None else opts.rtol,
        )
        choice = (max_leaves, max_elements, seed)
        if self._report is None or self._report[0] != (settings, choice):
            self._report = (
                (settings, choice),
                check(self, *settings, max_leaves=max_leaves, max_elements=max_elements, seed=seed),
            )
        return self._report[1]

    def expect(self, mapping, atol: float | None = None, rtol: float | None = None):
        """Compare named gradients (and ``name.data`` values) with expected numbers."""
        from .check import expect

        opts = self.options
        return expect(
            self,
            mapping,
            atol=atol if atol is not None else opts.atol,
            rtol=rtol if rtol is not None else opts.rtol,
        )

    def jvp(self, seed):
        """Forward mode: every node's tangent for ``seed`` (``{'x': 1}``); see
        :func:`gradmagic.analysis.explanations.jvp`."""
        from .explanations import jvp

        return jvp(self, seed)

    # ------------------------------------------------------------------ display
    def __repr__(self):
        return (
            f"<Trace: {self.n} nodes, {len(self.leaf_index)} leaves, "
            f"target {self.target.name} = {short(self.value)}>"
        )


def grads_of(grads: dict, path: str):
    """The gradient of what ``path`` names among ``grads`` (label → gradient), in the shape
    of the data it names (see :meth:`Trace.grads_of`); a KeyError if nothing is named so."""
    if path in grads:
        return grads[path]
    inner = {}
    for label, g in grads.items():
        if label.startswith(path) and label[len(path) : len(path) + 1] in ("[", "."):
            inner[label[len(path) :]] = g
    if not inner:
        raise KeyError(
            f"no input is named {path!r} or below it; named: "
            f"{', '.join(sorted(grads)[:10]) or 'none'}"
        )
    return nest(inner)
