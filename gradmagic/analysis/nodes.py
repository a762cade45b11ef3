"""The rows of a :class:`~gradmagic.analysis.trace.Trace` seen one node at a time.

``trace.nodes`` is a :class:`Nodes` sequence; each item a :class:`Node`, a small view made
when read that reads the trace's columns. :class:`ExactInts` is ``trace.exact`` (the ints
nodes held), and :func:`nest` shapes gradients read by path into the containers the paths
name.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import is_

import numpy as np

from ..core.ops import real
from .numbers import short

__all__ = ["Node", "Nodes", "ExactInts", "nest"]


class Node:
    """One node of a traced graph, as it was when the trace was taken.

    A view of row ``index`` of its trace's columns: ``index``, ``label``,
    ``op``, ``data``, ``grad``, ``parents``, ``kink``, ``finite``, ``shape``,
    ``requires_grad``, ``is_leaf``, ``is_constant``, ``local``, ``name``.
    Two views of the same row of the same trace are equal.
    """

    __slots__ = ("trace", "index")

    def __init__(self, trace, index: int):
        self.trace = trace
        self.index = index  # position in Trace.nodes (topological: parents first)

    def __eq__(self, other):
        return isinstance(other, Node) and other.trace is self.trace and other.index == self.index

    def __hash__(self):
        return hash((id(self.trace), self.index))

    def __repr__(self):
        return (
            f"Node(index={self.index}, label={self.label!r}, op={self.op!r}, "
            f"data={short(self.data)}, grad={short(self.grad)}, parents={self.parents})"
        )

    @property
    def label(self) -> str:
        """The name it was assigned to, or '' (constants, temporaries)."""
        t = self.trace
        return t.label_names[t.label_code[self.index]]

    @property
    def op(self) -> str:
        """The operation that made it, '' for a leaf."""
        entry = self.opdef
        return "" if entry is None else entry.name

    @property
    def opdef(self):
        """The op table entry (scalar or tensor) that made it, None for a leaf."""
        t = self.trace
        code = t.op_code[self.index]
        return None if code < 0 else t.ops[code]

    @property
    def data(self):
        """float/int, or a numpy array for a tensor node."""
        return self.trace._data(self.index)

    @data.setter
    def data(self, value):  # edits the snapshot only (tests simulate a changed node)
        t, i = self.trace, self.index
        if i in t.tensor_data:
            t.tensor_data[i] = np.asarray(value, dtype=float)
        else:
            t.exact.pop(i, None)
            if isinstance(value, int):
                t.exact[i] = value
            t.data[i] = real(value)

    @property
    def grad(self):
        return self.trace._grad(self.index)

    @grad.setter
    def grad(self, value):  # edits the snapshot only (tests simulate a wrong gradient)
        t, i = self.trace, self.index
        if i in t.tensor_grad:
            t.tensor_grad[i] = np.asarray(value, dtype=float)
        else:
            t.grad[i] = real(value)

    @property
    def parents(self) -> tuple:
        """Indices into Trace.nodes."""
        t, i = self.trace, self.index
        a = int(t.parent_a[i])
        if a < 0:
            return ()
        b = int(t.parent_b[i])
        return (a,) if b < 0 else (a, b)

    @property
    def kink(self) -> bool:
        """A subgradient was used (relu/abs at 0)."""
        return bool(self.trace.kink[self.index])

    @property
    def finite(self) -> bool:
        """Data and grad are finite (a constant: data alone)."""
        return bool(self.trace.finite[self.index])

    @property
    def cut(self) -> str:
        """Where a cut made this number ("line 3: statistics.mean"), or '' (see Trace.cut)."""
        return self.trace.cut_notes.get(self.index, "")

    @property
    def shape(self) -> tuple | None:
        """None for a scalar."""
        arr = self.trace.tensor_data.get(self.index)
        return None if arr is None else arr.shape

    @property
    def requires_grad(self) -> bool:
        """False for a leaf that asked for no gradient."""
        return self.index not in self.trace.no_grad

    @property
    def is_leaf(self) -> bool:
        return self.trace.parent_a[self.index] < 0

    @property
    def is_constant(self) -> bool:
        """A leaf that is not an input: neither checked nor flagged.

        That is an unnamed number written in the cell (the ``2`` in ``x ** 2``)
        or a leaf that asked for no gradient (``requires_grad=False``). An
        unnamed tensor made with ``requires_grad=True`` is an input.
        """
        return bool(self.trace.constant[self.index])

    @property
    def local(self) -> tuple | None:
        """d node / d parent for each parent at the recorded data (``()`` for a leaf).

        None for a tensor node (a leaf too), whose local derivative is a Jacobian. Computed
        when asked, from the snapshot (the parents' recorded data).
        """
        if self.index in self.trace.tensor_data:
            return None
        parents = self.parents
        if not parents:
            return ()
        data = self.trace._data
        return self.opdef.local_grads(*[data(p) for p in parents], data(self.index))

    @property
    def name(self) -> str:
        """The label, or for an unnamed node its value (constants) or op."""
        label = self.label
        if label:
            return label
        if self.is_leaf:
            return short(self.data)
        return f"({self.op})"


def nest(rest: dict):
    """``{'[0]': g0, '[1]': g1}`` → ``[g0, g1]``; ``{".b": g, "['k'][0]": h}`` →
    ``{'b': g, 'k': [h]}``: the suffixes of paths made into the containers they name."""
    groups: dict = {}
    for suffix, g in rest.items():
        step, tail = _first_step(suffix)
        groups.setdefault(step, {})[tail] = g
    out = {
        step: (inner[""] if list(inner) == [""] else nest({t: g for t, g in inner.items() if t}))
        for step, inner in groups.items()
    }
    if all(isinstance(k, int) for k in out) and sorted(out) == list(range(len(out))):
        return [out[i] for i in range(len(out))]
    return out


def _first_step(suffix: str):
    """``"[0].w"`` → ``(0, ".w")``; ``".w[1]"`` → ``("w", "[1]")``; keys as Python reads them."""
    if suffix.startswith("."):
        end = len(suffix)
        for c in ".[":
            i = suffix.find(c, 1)
            if i > 0:
                end = min(end, i)
        return suffix[1:end], suffix[end:]
    depth, quote = 0, None
    for i, c in enumerate(suffix):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                text = suffix[1:i]
                try:
                    key = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    key = text
                return key, suffix[i + 1 :]
    return suffix, ""


class ExactInts(Mapping):
    """``trace.exact``: node index → the int it held, for a graph of many ints.

    An int that a float holds exactly (``int`` itself, under 2**53 in size) is read back
    from the data column, marked by one flag a node; other ints (bools, bigger ones,
    subclasses) are kept as they were. A plain dict of every int node costs about 100
    bytes a node; this, one.
    """

    __slots__ = ("_flag", "_data", "_kept")

    def __init__(self, flag: np.ndarray, data: np.ndarray, kept: dict):
        self._flag, self._data, self._kept = flag, data, kept

    @classmethod
    def of(cls, positions: list, values: list, data: np.ndarray, ints=(), nodes=()) -> "ExactInts":
        """The ints among ``values`` (the numbers of nodes ``positions``, already written
        into ``data``), and nodes ``ints``: plain ints, written into ``data`` as floats
        (nan if too big for one), whose exact number ``nodes[i].data`` is read where a float
        may not hold it."""
        where = np.asarray(positions, dtype=np.intp)
        plain = np.fromiter(map(is_, map(type, values), repeat(int)), bool, len(values))
        small = plain & (np.abs(data[where]) < _EXACT_FLOAT)
        flag = np.zeros(len(data), dtype=bool)
        flag[where[small]] = True
        kept = {}
        for k in np.flatnonzero(~small).tolist():
            x = values[k]
            if isinstance(x, int):
                kept[positions[k]] = x
        if len(ints):
            ints = np.asarray(ints, dtype=np.intp)
            exact = np.abs(data[ints]) < _EXACT_FLOAT  # (nan: no)
            flag[ints[exact]] = True
            for i in ints[~exact].tolist():
                kept[i] = x = nodes[i].data
                data[i] = real(x)
        return cls(flag, data, kept)

    def get(self, i, default=None):
        x = self._kept.get(i)
        if x is not None:
            return x
        return int(self._data[i]) if 0 <= i < len(self._flag) and self._flag[i] else default

    def __getitem__(self, i):
        x = self.get(i)
        if x is None:
            raise KeyError(i)
        return x

    def __contains__(self, i):
        return i in self._kept or (
            isinstance(i, (int, np.integer)) and 0 <= i < len(self._flag) and bool(self._flag[i])
        )

    def __iter__(self):
        return iter(sorted(set(np.flatnonzero(self._flag).tolist()).union(self._kept)))

    def __len__(self):
        return int(np.count_nonzero(self._flag)) + len(self._kept)

    def pop(self, i, default=None):
        """Forget node ``i``'s int (its data is being replaced)."""
        x = self.get(i, default)
        self._kept.pop(i, None)
        if 0 <= i < len(self._flag):
            self._flag[i] = False
        return x

    def __setitem__(self, i, x):
        if 0 <= i < len(self._flag):
            self._flag[i] = False
        self._kept[i] = x


_EXACT_FLOAT = 2.0**53  # ints below this in size are floats exactly


class Nodes(Sequence):
    """``trace.nodes``: a sequence of :class:`Node` views, made when read."""

    __slots__ = ("trace",)

    def __init__(self, trace):
        self.trace = trace

    def __len__(self):
        return self.trace.n

    def __getitem__(self, i):
        n = self.trace.n
        if isinstance(i, slice):
            return [Node(self.trace, j) for j in range(*i.indices(n))]
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"node index {i} out of range for {n} nodes")
        return Node(self.trace, i)

    def __iter__(self):
        t = self.trace
        return map(Node, repeat(t, t.n), range(t.n))

    def __reversed__(self):
        t = self.trace
        return map(Node, repeat(t, t.n), range(t.n - 1, -1, -1))
