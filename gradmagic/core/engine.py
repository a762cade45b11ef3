"""A scalar reverse-mode autograd engine.

A :class:`Value` is one node of a computation graph: a number (``data``), the
gradient of the last ``backward()`` target with respect to it (``grad``), the
operation that made it and the nodes it was made from (its parents).

Each arithmetic operator or method below computes its result with the float
forward of its entry in :mod:`gradmagic.core.ops` and remembers the entry and its
inputs; ``backward()`` then walks the graph once, in reverse topological order,
and applies each entry's local derivatives (the chain rule)::

    >>> a, b = Value(2.0, label="a"), Value(-3.0, label="b")
    >>> L = a * b + a
    >>> L.backward()
    >>> a.grad, b.grad            # dL/da = b + 1, dL/db = a
    (-2.0, 2.0)

Design notes:

* Nodes hold no closures and no references to their children, so a graph has
  no reference cycles and is freed as soon as it is unreachable.
* ``backward()`` never recurses: a chain of a million nodes is fine.
* Graph walks key on node identity, never on ``==`` or ``hash``, which follow
  the numbers (``Value(2) == 2``) as Python's own numbers do.
* Arithmetic on a ``Value`` never raises for numeric reasons: ``log(-1)`` is
  nan, ``exp(1000)`` is inf (IEEE rules, with an int too big for a float read
  as ±inf), and ``.finite`` says so. Relu and abs at 0 use the subgradient 0
  and ``.kink`` says so.
* What ``%%autograd`` makes of a number is a ``Float``, ``Int`` or ``Float64``
  node instead (:mod:`gradmagic.core.number_nodes`): a float, int or numpy
  float64 subclass whose arithmetic is Python's own, exceptions included,
  sharing the graph protocol of :class:`~gradmagic.core.graph.GraphNode` with
  ``Value``. That module registers its classes in :mod:`gradmagic.core.graph`
  (``SCALARS``, ``SCALAR_NODES``...), so the walks and ``backward`` know them
  while this module imports none of it.
* ``backward`` and the engine's state live in :mod:`gradmagic.core.graph`
  (shared by every node class) and are importable from here.
* Every operation comes from the table in :mod:`gradmagic.core.ops`; each is also
  reachable by name through :func:`apply`.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance, type) changes its own
# code, as in plain Python, and not the engine's
from builtins import float, int, isinstance, type  # noqa: A004

import math
import numbers
import operator
from array import array as _array
from typing import Any


from . import graph as _graph
from .graph import (
    FLOAT_NODES,
    INT_NODES,
    SCALAR_NODES,
    SCALARS,
    GraphNode,
    backward,
    is_grad_enabled,
    no_grad,
    state,
)
from .ops import OPS, Op, real

__all__ = ["Value", "no_grad", "is_grad_enabled", "apply", "walk", "Walk", "backward"]

_FLOAT, _INT = float, int


def _number(x):
    """``x`` as a plain Python int or float for a constant node, or None."""
    t = type(x)
    if t is float or t is int:
        return x
    if t is bool:  # not numbers for the magic, but Python adds them as ints
        return int(x)
    if isinstance(x, numbers.Integral):  # numpy integers, ...
        return int(x)
    if isinstance(x, numbers.Real):  # numpy floats, fractions, ...
        return float(x)
    return None


class Value(GraphNode):
    """A scalar node of the computation graph.

    ``Value(data, label="")`` makes a leaf. ``data`` keeps its Python type: an
    int stays an int (so ``range(v)`` and ``xs[v]`` work), a float a float.
    """

    # _a, _b: the parents (None when absent); _mark: scratch for graph walks
    __slots__ = ("data", "grad", "label", "_op", "_a", "_b", "_mark", "_born")

    def __init__(self, data, label: str = ""):
        if isinstance(data, Value):
            data = data.data
        else:
            num = _number(data)
            if num is None or type(data) is bool:
                raise TypeError(f"Value needs a real number, got {type(data).__name__} {data!r}")
            data = num
        self.data = data
        self.grad = 0.0
        self.label = label
        self._op = self._a = self._b = self._mark = None

    # ---------------------------------------------------------------- behaving like a number
    def __repr__(self):
        name = f"label={self.label!r}, " if self.label else ""
        op = f", op={self.op!r}" if self._op is not None else ""
        return f"Value({name}data={self.data!r}, grad={self.grad!r}{op})"

    def __str__(self):
        return str(self.data)

    def __format__(self, spec):
        return format(self.data, spec)

    def __float__(self):
        state.float_conversions += 1
        return real(self.data)

    def __int__(self):
        state.branch_events += 1
        return int(self.data)

    def __index__(self):
        if type(self.data) is not int:
            raise TypeError(
                f"{type(self.data).__name__} Value {self.data!r} cannot be used as an "
                "integer (index, range, repeat count)"
            )
        state.branch_events += 1
        return self.data

    def __bool__(self):
        state.branch_events += 1
        return bool(self.data)

    def __hash__(self):
        return hash(self.data)

    def __pos__(self):
        return self

    def __divmod__(self, other):
        return self // other, self % other

    def __rdivmod__(self, other):
        return other // self, other % self

    def __complex__(self):
        return complex(self.data)

    # ---------------------------------------------------------------- float's other methods
    # read-only number facts, as float and int have them (so code written for
    # numbers keeps working); only ``real`` and ``conjugate()`` keep the graph
    @property
    def real(self) -> "Value":
        """The real part: this Value itself (a real number is its own real part)."""
        return self

    @property
    def imag(self):
        """The imaginary part: a plain 0 (0.0 for a float), a constant with no gradient."""
        return self.data.imag

    def conjugate(self) -> "Value":
        """The complex conjugate: this Value itself (a real number is its own conjugate)."""
        return self

    def is_integer(self) -> bool:
        """Whether the number is a whole number: a plain bool, counted as a branch event."""
        state.branch_events += 1
        data = self.data
        return type(data) is int or data.is_integer()

    def as_integer_ratio(self) -> tuple:
        """The number as a plain (numerator, denominator) pair of ints (cuts the graph;
        counted as a float conversion, like ``float(v)``)."""
        state.float_conversions += 1
        return self.data.as_integer_ratio()


SCALAR_NODES.add(Value)


class Walk:
    """One walk of a graph: the nodes in topological order and their links by mark.

    ``order`` lists the nodes, parents first, the root last; ``codes[i]`` is
    1 + the position of node ``i``'s op entry in the op tables (its
    ``_trace_code``: 0 for a leaf, 255 for an entry of no table or a leaf
    with an entry), and
    ``named`` lists the positions of the nodes with a label. The walk
    leaves ``base + i`` in node ``i``'s ``_mark`` (until another walk reaches
    it), and ``pa[i]``/``pb[i]`` are the marks of its parents (``base - 1``
    where there is none): minus ``base``, their positions. ``data`` holds each node's
    number as a float (an ``array('d')``; nan for an int too big for one); ``ints`` lists
    the positions of plain ints (their exact numbers are read from ``order`` where a float
    cannot hold them); at the positions in ``odd`` (arrays, numbers of other types) it
    holds nan and ``odd_data`` their numbers (None for a tensor node: the Trace of a
    graph with tensors reads the nodes). ``tensors`` is
    True if a node is not a
    scalar. After ``backward(root, seed, walk)`` on scalar nodes, ``grads``
    holds the gradients in reverse order (root first). A
    :class:`~gradmagic.analysis.trace.Trace` is
    made from these lists without reading the links again.
    """

    __slots__ = (
        "order",
        "codes",
        "pa",
        "pb",
        "named",
        "data",
        "ints",
        "odd",
        "odd_data",
        "grads",
        "base",
        "tensors",
        "zeroed",
    )
    order: list[GraphNode]
    codes: list[int]
    pa: list[int]
    pb: list[int]
    named: list[int]
    data: _array[float]
    ints: list[int]
    odd: list[int]
    odd_data: list[Any]
    grads: _array[float] | None
    base: int
    tensors: bool
    zeroed: bool

    def index(self, node) -> int:
        """The position of ``node`` in ``order`` (-1 if this walk did not reach it).

        Valid until another walk reaches the node.
        """
        m = getattr(node, "_mark", None)
        if m.__class__ is not int:
            return -1
        i = m - self.base
        return i if 0 <= i < len(self.order) and self.order[i] is node else -1


def walk(root, zero: bool = False) -> Walk:
    """Every node ``root`` depends on, parents first, with their op entries, parents, labels.

    The same iterative depth-first walk as :meth:`GraphNode.topo` (no
    recursion, no set keyed on nodes, which compare by number), recording
    what a Trace needs as it places each node. With ``zero``, it also resets
    each node's gradient as it places it, which :func:`backward` then skips.
    """
    if state.open_writes:
        _graph.settle()
    w = Walk()
    w.grads, w.zeroed = None, zero
    w.order, w.codes, w.pa, w.pb, w.named = [], [], [], [], []
    w.data, w.ints, w.odd, w.odd_data = _array("d"), [], [], []
    _walk(w, root, zero)
    return w


def _walk(w: Walk, root, zero: bool) -> None:
    """:func:`walk` into ``w``'s columns, in one loop (a call per node costs a sixth)."""
    entered = state.last_mark + 1
    w.base = base = i = entered + 1
    float_nodes, int_nodes, nan = FLOAT_NODES, INT_NODES, math.nan
    stack, tensors = [root], False
    push, pop, append, code_append = stack.append, stack.pop, w.order.append, w.codes.append
    a_append, b_append, named_append = w.pa.append, w.pb.append, w.named.append
    data_append, int_append = w.data.append, w.ints.append
    try:
        while stack:
            v = stack[-1]
            m = v._mark
            if m is not entered:  # reached for the first time, or placed already
                if m is not None and m > entered:  # placed (pushed by two children)
                    pop()
                    continue
                a, b, waiting = v._a, v._b, False  # its parents are placed before it
                if a is not None and (a._mark is None or a._mark < entered):
                    push(a)
                    waiting = True
                if b is not None and (b._mark is None or b._mark < entered):
                    push(b)
                    waiting = True
                if waiting:
                    v._mark = entered
                    continue
            pop()  # its parents are placed: place it
            v._mark = i
            i += 1
            append(v)
            a, b, op = v._a, v._b, v._op  # (an entry of no table, or on a leaf, is 255)
            a_append(entered if a is None else a._mark)
            b_append(entered if a is None or b is None else b._mark)
            code_append(
                (0 if op is None else 255) if a is None else getattr(op, "_trace_code", 255)
            )
            if v.label:
                named_append(i - 1 - base)
            cls = v.__class__  # its number as a float, read while the node is at hand
            if cls in float_nodes:
                data_append(v)  # a float itself
            elif cls is Value and v.data.__class__ is _FLOAT:
                data_append(v.data)
            elif cls in int_nodes or cls is Value and v.data.__class__ is _INT:
                try:
                    data_append(v.data)  # a plain int (the Trace keeps it exact)
                except OverflowError:  # too big for a float: nan, its int in order
                    data_append(nan)
                int_append(i - 1 - base)
            else:  # a bool, an int subclass, an array...: kept aside for the Trace
                tensors = _odd(w, v, i - 1 - base, zero) or tensors
                continue
            if zero:
                v.grad = 0.0
    finally:
        state.last_mark, w.tensors = i, tensors


def _odd(w: Walk, v, row: int, zero: bool) -> bool:
    """Keep node ``v`` (row ``row``) aside for the Trace; True if it is a tensor.

    A bool or an int subclass keeps its number; a tensor keeps nothing here, as
    the Trace of a graph with tensors reads their data itself.
    """
    w.data.append(math.nan)
    w.odd.append(row)
    if v.__class__ in SCALAR_NODES:
        w.odd_data.append(v.data)
        if zero:
            v.grad = 0.0
        return False
    w.odd_data.append(None)
    if zero:
        v._zero_grad()
    return True


def _other(x):
    """``x`` as a Value for a binary op, or None if it is not a number."""
    if isinstance(x, Value) or x.__class__ in SCALARS:
        return x
    num = _number(x)
    if num is None:
        return None
    v = _new(Value)
    v.data = num
    v.grad = 0.0
    v.label = ""
    v._op = v._a = v._b = v._mark = None
    return v


_new = object.__new__


# A binary op's forward on Values. For the ops whose ``f`` is Python's own operator
# (``operator.add``: the same result, exceptions included) the operator is written
# in the code, which saves a call per node; every other op calls its ``f``.
_BINARY = """
def forward(self, other):
    cls = other.__class__
    if cls is not Value:
        if cls is float or cls is int:  # a plain number: a constant leaf, made here
            number = other
            other = _new(Value)
            other.data = number
            other.grad = 0.0
            other.label = ""
            other._op = other._a = other._b = other._mark = None
        else:
            other = _other(other)
            if other is None:
                return NotImplemented
    out = _new(Value)
    try:
        out.data = {expression}
    except OverflowError:  # an int too big for a float: read it as ±inf
        out.data = f(real(self.data), real(other.data))
    out.grad = 0.0
    out.label = ""
    out._mark = None
    if state.grad_enabled:
        out._op = op
        out._a = self
        out._b = other
    else:
        out._op = out._a = out._b = None
    return out
"""
_OPERATORS = {operator.add: "+", operator.sub: "-", operator.mul: "*"}


def _make_binary(op: Op):
    f = op.f
    symbol = _OPERATORS.get(f)
    expression = (
        f"self.data {symbol} other.data" if symbol is not None else "f(self.data, other.data)"
    )
    scope = {
        "Value": Value,
        "_other": _other,
        "_new": _new,
        "real": real,
        "state": state,
        "f": f,
        "op": op,
        "float": float,
        "int": int,
    }
    exec(_BINARY.format(expression=expression), scope)  # noqa: S102 - fixed template
    forward = scope["forward"]

    def reflected(self, other):
        other = _other(other)
        if other is None:
            return NotImplemented
        return forward(other, self)

    forward.__doc__ = f"self {op.symbol} other as a new node ({op.rule})."
    reflected.__doc__ = f"other {op.symbol} self as a new node ({op.rule})."
    return forward, reflected


def _make_unary(op: Op):
    f = op.f

    def forward(self):
        out = _new(Value)
        try:
            out.data = f(self.data)
        except OverflowError:  # an int too big for a float: read it as ±inf
            out.data = f(real(self.data))
        out.grad = 0.0
        out.label = ""
        out._b = out._mark = None
        if state.grad_enabled:
            out._op = op
            out._a = self
        else:
            out._op = out._a = None
        return out

    forward.__doc__ = f"{op.name} of this Value ({op.rule})."
    return forward


def _make_compare(name: str):
    cmp = getattr(operator, name)

    def compare(self, other):
        if isinstance(other, Value):
            other = other.data
        elif _number(other) is None:
            return NotImplemented
        state.branch_events += 1
        return cmp(self.data, other)

    compare.__name__ = f"__{name}__"
    return compare


# ---------------------------------------------------------------- methods from the op table
# Each entry's ``method`` says how Python spells it: a binary operator
# (``__add__``, which also gets ``__radd__``), a protocol method (``__neg__``)
# or a plain method (``v.tanh()``). A new entry in ops.OPS needs no change here.
_FORWARD = {}  # op name -> the function that makes its node

for _op in OPS.values():
    if _op.arity == 2:
        _fwd, _rev = _make_binary(_op)
        for _name in _op.method.split():
            setattr(Value, _name, _fwd)
            setattr(Value, _name.replace("__", "__r", 1), _rev)
    else:
        _fwd = _make_unary(_op)
        for _name in _op.method.split():
            setattr(Value, _name, _fwd)
    _FORWARD[_op.name] = _fwd


def __round__(self, ndigits=None):
    if ndigits is None:
        return _FORWARD["round"](self)
    return _FORWARD["roundn"](self, ndigits)


Value.__round__ = __round__  # type: ignore[attr-defined]  # (it calls the table's forwards)

for _name in ["lt", "le", "gt", "ge", "eq", "ne"]:
    setattr(Value, f"__{_name}__", _make_compare(_name))

del _op, _fwd, _name, _rev


def _entry_node(op: Op, args) -> Value:
    """:func:`apply` of an op entry that is not the table's own."""
    if len(args) != op.arity:
        raise TypeError(f"op {op.name!r} takes {op.arity} argument(s), got {len(args)}")
    parents = [_other(a) for a in args]
    if any(p is None for p in parents):
        raise TypeError(
            f"op {op.name!r} needs numbers or Values, got {', '.join(type(a).__name__ for a in args)}"
        )
    out = Value(op.f(*[p.data for p in parents]))
    if state.grad_enabled:
        out._op, out._a = op, parents[0]
        out._b = parents[1] if len(parents) > 1 else None
    return out


def apply(name: str | Op, *args) -> Value:
    """The node for op ``name`` of :data:`gradmagic.core.ops.OPS` on ``args``.

    Arguments are Values or plain numbers. This is what ``a + b``, ``-a`` or
    ``a.tanh()`` do, reachable by the op's name (``apply("tanh", a)``). ``name`` may
    also be an :class:`~gradmagic.core.ops.Op` of your own, such as an entry being
    written before it joins the table: its node is a Value made with its ``f``,
    differentiated with its ``df`` and replayed by the check with its ``np``.
    """
    if isinstance(name, Op):
        return _entry_node(name, args)
    forward = _FORWARD.get(name)
    if forward is None:
        raise ValueError(f"unknown op {name!r}; the ops are {', '.join(OPS)}")
    if len(args) != OPS[name].arity:
        raise TypeError(f"op {name!r} takes {OPS[name].arity} argument(s), got {len(args)}")
    if any(a.__class__ in SCALARS for a in args):  # number nodes make number nodes
        return _graph.number_apply(OPS[name], args)
    first = _other(args[0])
    out = NotImplemented if first is None else forward(first, *args[1:])
    if out is NotImplemented:
        raise TypeError(
            f"op {name!r} needs numbers or Values, got {', '.join(type(a).__name__ for a in args)}"
        )
    return out
