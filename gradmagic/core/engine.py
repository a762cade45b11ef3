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
* What ``%%autograd`` makes of a number is a :class:`Float`, :class:`Int` or
  :class:`Float64` node instead (bottom of this module): a float, int or numpy
  float64 subclass whose arithmetic is Python's own, exceptions included,
  sharing the graph protocol of :class:`GraphNode` with ``Value``.
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
import sys as _sys
import warnings as _warnings
from array import array as _array
from contextlib import contextmanager

import numpy as np

from .ops import OPS, Op, real
from .sites import cursor

__all__ = ["Value", "no_grad", "is_grad_enabled", "apply", "walk", "Walk"]


class _State:
    """Process-wide engine switches and counters (read by the magic and views)."""

    grad_enabled = True
    # how often a Value's number decided control flow (comparisons, bool(),
    # int(), __index__): a numerical check then holds for this branch only
    branch_events = 0
    # how often a Value was converted to a float by code that could have cut
    # the graph (float(v), math.exp(v) outside an %%autograd cell, ...)
    float_conversions = 0
    # True while the magic runs a cell (its graph is being recorded): set by
    # gradmagic.notebook.runtime.recording; a Tensor leaf then refuses in-place writes
    recording = False
    # while the magic records a cell: a function ``cut(message)`` that reports a
    # place where numbers left the graph (a numpy function with no gradient rule)
    cut = None


state = _State()


@contextmanager
def no_grad():
    """Within this block, operations on Values record no graph.

    Results are plain leaves (no parents), as in ``torch.no_grad()``; useful for
    optimizer updates and evaluation.
    """
    before = state.grad_enabled
    state.grad_enabled = False
    try:
        yield
    finally:
        state.grad_enabled = before


def is_grad_enabled() -> bool:
    return state.grad_enabled


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


class GraphNode:
    """The graph protocol every scalar node class shares (no state of its own).

    A node has ``data`` (its number), ``grad``, ``label``, ``_op`` (the
    :class:`~gradmagic.core.ops.Op` that made it, or None), ``_a``/``_b`` (its
    parents, None when absent) and ``_mark`` (scratch for graph walks).
    """

    __slots__ = ()
    _site = -1  # where the magic made it (core.sites); a class's own slot overrides it

    # ---------------------------------------------------------------- graph facts
    @property
    def op(self) -> str:
        """Name of the operation that made this node ('' for a leaf)."""
        return self._op.name if self._op is not None else ""

    @property
    def opdef(self) -> Op | None:
        """The :class:`gradmagic.core.ops.Op` entry that made this node, or None."""
        return self._op

    @property
    def parents(self) -> tuple:
        """The nodes this one was computed from (empty for a leaf)."""
        if self._a is None:
            return ()
        return (self._a,) if self._b is None else (self._a, self._b)

    @property
    def is_leaf(self) -> bool:
        return self._a is None

    @property
    def kink(self) -> bool:
        """True where the op is not differentiable here and a subgradient was used."""
        op = self._op
        return op is not None and op.kink is not None and op.kink(*[p.data for p in self.parents])

    @property
    def finite(self) -> bool:
        """False when data or grad is nan, infinite or an int too big for a float."""
        try:
            return math.isfinite(self.data) and math.isfinite(self.grad)
        except OverflowError:  # a huge int
            return False

    def local_grads(self) -> tuple:
        """d self / d parent for each parent, at the recorded data."""
        op = self._op
        if op is None:
            return ()
        return op.local_grads(*[p.data for p in self.parents], self.data)

    # ---------------------------------------------------------------- backward
    def topo(self) -> list:
        """Every node this one depends on, itself last, parents before children.

        An iterative depth-first walk that marks the nodes it visits, so it
        needs neither recursion nor a set keyed on nodes. (:func:`walk` also
        gives each node's position and its parents' positions.)
        """
        global _last_mark
        order = []
        entered = _last_mark + 1  # this walk's marks: above every earlier walk's
        left = _last_mark = entered + 1
        stack = [self]
        push, pop, append = stack.append, stack.pop, order.append
        while stack:
            v = stack[-1]
            m = v._mark
            if m is entered:
                pop()
                v._mark = left
                append(v)
                continue
            if m is left:
                pop()
                continue
            v._mark = entered
            a = v._a
            if a is not None:
                m = a._mark
                if m is not entered and m is not left:
                    push(a)
                b = v._b
                if b is not None:
                    m = b._mark
                    if m is not entered and m is not left:
                        push(b)
        return order

    def backward(self, grad: float = 1.0) -> None:
        """Fill ``.grad`` of every node of this graph with d self / d node.

        Idempotent: the graph's gradients are reset first, so calling it twice
        gives the same gradients (it does not accumulate across calls as
        PyTorch does). Nodes reached along several paths accumulate.
        """
        backward(self, float(grad))


class Value(GraphNode):
    """A scalar node of the computation graph.

    ``Value(data, label="")`` makes a leaf. ``data`` keeps its Python type: an
    int stays an int (so ``range(v)`` and ``xs[v]`` work), a float a float.
    """

    # _a, _b: the parents (None when absent); _mark: scratch for graph walks
    __slots__ = ("data", "grad", "label", "_op", "_a", "_b", "_mark")

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
    holds nan and ``odd_data`` their numbers. ``tensors`` is
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

    def index(self, node) -> int:
        """The position of ``node`` in ``order`` (-1 if this walk did not reach it).

        Valid until another walk reaches the node.
        """
        m = getattr(node, "_mark", None)
        if m.__class__ is not int:
            return -1
        i = m - self.base
        return i if 0 <= i < len(self.order) and self.order[i] is node else -1


# Walks mark nodes with ints, each walk's above every earlier walk's: ``topo`` marks a
# node ``entered`` while its parents are walked and ``left`` after; ``walk`` marks it
# with ``base + its position`` after.
_last_mark = 0


def walk(root, zero: bool = False) -> Walk:
    """Every node ``root`` depends on, parents first, with their op entries, parents, labels.

    The same iterative depth-first walk as :meth:`GraphNode.topo` (no
    recursion, no set keyed on nodes, which compare by number), recording
    what a Trace needs as it places each node. With ``zero``, it also resets
    each node's gradient as it places it, which :func:`backward` then skips.
    """
    try:
        return _walk(root, zero, True)
    except AttributeError:  # an op entry of no table (a test's own node class): walk again
        return _walk(root, zero, False)


def _walk(root, zero: bool, tables: bool) -> Walk:
    """:func:`walk`; ``tables``: every op entry has a ``_trace_code`` (those of the op tables)."""
    global _last_mark
    entered = _last_mark + 1
    base = i = entered + 1
    none = base - 1
    scalar = SCALAR_NODES
    tensors = False
    order, codes, pa, pb, named, ints, odd, odd_data = [], [], [], [], [], [], [], []
    data = _array("d")
    nan = math.nan
    stack = [root]
    push, pop, append = stack.append, stack.pop, order.append
    code_append, a_append, b_append, named_append = (
        codes.append,
        pa.append,
        pb.append,
        named.append,
    )
    data_append, odd_append, odd_data_append = data.append, odd.append, odd_data.append
    int_append = ints.append
    try:
        while stack:
            v = stack[-1]
            m = v._mark
            if m is not entered:  # reached for the first time, or placed already
                if m is not None and m > entered:  # placed (pushed by two children)
                    pop()
                    continue
                a = v._a
                if a is not None:  # its parents first (a leaf, or a node whose parents
                    m = a._mark  # are placed already, is placed at once)
                    waiting = m is None or m < entered
                    if waiting:
                        push(a)
                    b = v._b
                    if b is not None:
                        m = b._mark
                        if m is None or m < entered:
                            push(b)
                            waiting = True
                    if waiting:
                        v._mark = entered
                        continue
            # its parents are placed: place it
            pop()
            v._mark = i
            i += 1
            append(v)
            a = v._a
            if a is None:
                a_append(none)
                b_append(none)
                op = v._op
                code_append(0 if op is None else 255)  # (an entry on a leaf: odd)
            else:  # a node with parents has an op entry
                a_append(a._mark)
                b = v._b
                b_append(none if b is None else b._mark)
                code_append(v._op._trace_code if tables else getattr(v._op, "_trace_code", 255))
            if v.label:
                named_append(i - 1 - base)
            # its number as a float, read while the node is at hand
            cls = v.__class__
            if cls is Float or cls is Float64:
                data_append(v)  # a float itself
                if zero:
                    v.grad = 0.0
            elif cls is Value and v.data.__class__ is _FLOAT:
                data_append(v.data)
                if zero:
                    v.grad = 0.0
            elif cls is Int or cls is Value and v.data.__class__ is _INT:
                try:
                    data_append(v.data)  # a plain int (the Trace keeps it exact)
                except OverflowError:  # too big for a float: nan, its int in order
                    data_append(nan)
                int_append(i - 1 - base)
                if zero:
                    v.grad = 0.0
            else:  # a bool, an int subclass, an array...: kept aside for the Trace
                data_append(nan)
                odd_append(i - 1 - base)
                odd_data_append(v.data)
                if cls in scalar:
                    if zero:
                        v.grad = 0.0
                else:
                    tensors = True
                    if zero:
                        v._zero_grad()
    finally:
        _last_mark = i
    w = Walk()
    w.order, w.codes, w.pa, w.pb, w.named = order, codes, pa, pb, named
    w.data, w.ints, w.odd, w.odd_data, w.grads = data, ints, odd, odd_data, None
    w.base, w.tensors, w.zeroed = base, tensors, zero
    return w


def _zeroed_order(root) -> tuple:
    """``root``'s topological order with every gradient reset, and whether a node is a tensor."""
    global _last_mark
    order = []
    entered = _last_mark + 1
    left = _last_mark = entered + 1
    tensors = False
    scalar = SCALAR_NODES
    stack = [root]
    push, pop, append = stack.append, stack.pop, order.append
    while stack:
        v = stack[-1]
        m = v._mark
        if m is not entered:  # reached for the first time, or placed already
            if m is left:
                pop()
                continue
            a = v._a
            if a is not None:  # its parents first; placed at once if they are
                waiting = a._mark is not left
                if waiting:
                    push(a)
                b = v._b
                if b is not None and b._mark is not left:
                    push(b)
                    waiting = True
                if waiting:
                    v._mark = entered
                    continue
        pop()  # its parents are placed: place it
        v._mark = left
        append(v)
        if v.__class__ in scalar:
            v.grad = 0.0
        else:
            tensors = True
            v._zero_grad()
    return order, tensors


def backward(root, seed, walk_: Walk | None = None) -> None:
    """Reverse-mode sweep from ``root`` with d root/d root = ``seed``.

    Shared by every kind of node. A node that is not a scalar (a tensor)
    provides ``_zero_grad()`` and an op with ``vjp(node)`` that adds its
    gradient into its parents; nodes link to their parents through
    ``_a``/``_b`` and carry a ``_mark`` slot for the walks. ``walk_`` is
    ``walk(root, zero=True)`` when the caller has it: the magic walks the
    graph once, for backward and its trace. The graph's gradients are reset
    during the walk, then the sweep runs from the root in reverse order.
    """
    if walk_ is None:
        order, tensors = _zeroed_order(root)
    else:
        order, tensors = walk_.order, walk_.tensors
        if not walk_.zeroed:
            for v in order:
                if v.__class__ in SCALAR_NODES:
                    v.grad = 0.0
                else:
                    v._zero_grad()
    if tensors:
        _backward_nodes(root, seed, order)
        return
    root.grad = seed
    keep = walk_ is not None  # the gradients for the walk's Trace, read as they become final
    if keep:
        walk_.grads = grads = _array("d")
        grad_append = grads.append
    add, sub, mul, relu = _ADD, _SUB, _MUL, _RELU
    for v in reversed(order):
        g = v.grad
        if keep:
            grad_append(g)
        op = v._op
        if op is None:
            continue
        a = v._a
        b = v._b
        try:
            # the commonest ops written out: the same products as their df, one call fewer
            if op is add:
                a.grad += g
                b.grad += g
            elif op is mul:
                da = b.data * g
                db = a.data * g
                a.grad += da
                b.grad += db
            elif op is sub:
                a.grad += g
                b.grad += -g
            elif op is relu:
                a.grad += (0.0 if a.data <= 0 else 1.0) * g
            elif b is None:
                a.grad += op.df(a.data, v.data) * g
            else:
                da, db = op.df(a.data, b.data, v.data)
                da *= g  # both products first, so neither is added twice
                db *= g  # if the second one overflows
                a.grad += da
                b.grad += db
        except OverflowError:  # an int too big for a float
            for p, d in zip(v.parents, v.local_grads()):
                p.grad += real(d) * g


def _backward_nodes(root, seed, order) -> None:
    """The sweep node by node, for a graph with tensors (see :func:`backward`); the
    gradients are reset already."""
    root.grad = seed
    for v in reversed(order):
        op = v._op
        if op is None:
            continue
        cls = v.__class__
        if cls is not Value and cls not in SCALARS:
            op.vjp(v)
            continue
        g = v.grad
        a = v._a
        b = v._b
        try:
            if b is None:
                a.grad += op.df(a.data, v.data) * g
            else:
                da, db = op.df(a.data, b.data, v.data)
                da *= g  # both products first, so neither is added twice
                db *= g  # if the second one overflows
                a.grad += da
                b.grad += db
        except OverflowError:  # an int too big for a float
            for p, d in zip(v.parents, v.local_grads()):
                p.grad += real(d) * g


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


Value.__round__ = __round__

for _name in ["lt", "le", "gt", "ge", "eq", "ne"]:
    setattr(Value, f"__{_name}__", _make_compare(_name))

del _op, _fwd, _name, _rev

_ADD, _SUB, _MUL, _RELU = OPS["+"], OPS["-"], OPS["*"], OPS["relu"]


def apply(name: str, *args) -> Value:
    """The node for op ``name`` of :data:`gradmagic.core.ops.OPS` on ``args``.

    Arguments are Values or plain numbers. This is what ``a + b``, ``-a`` or
    ``a.tanh()`` do, reachable by the op's name (``apply("tanh", a)``).
    """
    forward = _FORWARD.get(name)
    if forward is None:
        raise ValueError(f"unknown op {name!r}; the ops are {', '.join(OPS)}")
    if len(args) != OPS[name].arity:
        raise TypeError(f"op {name!r} takes {OPS[name].arity} argument(s), got {len(args)}")
    if any(a.__class__ in SCALARS for a in args):  # number nodes make number nodes
        return _number_apply(OPS[name], args)
    first = _other(args[0])
    out = NotImplemented if first is None else forward(first, *args[1:])
    if out is NotImplemented:
        raise TypeError(
            f"op {name!r} needs numbers or Values, got {', '.join(type(a).__name__ for a in args)}"
        )
    return out


# ---------------------------------------------------------------- numbers that are nodes
# Python's own types, held here: code run under the magic may rebind builtins.float
_FLOAT, _INT = float, int
_float_of, _int_of = float.__float__, int.__index__


class Float(GraphNode, float):
    """A float that is a node of the graph: what ``%%autograd`` makes of a number.

    It *is* a float: ``isinstance``, ``repr``, ``json``, ``struct``, hashing,
    C functions and every float method are float's own, and its type is named
    ``float``. Arithmetic computes with Python's own operator, so results,
    exceptions and their messages are Python's; while the magic records a
    cell, a result is a node linked to its operands (``_op``, ``_a``,
    ``_b``), with the op's entry of :data:`~gradmagic.core.ops.OPS` for its
    derivatives. Outside a recording (a node left in the namespace and used
    by a later plain cell) and under :func:`no_grad`, results are plain
    numbers. ``data`` is the plain float; a node's number never changes.
    """

    __slots__ = ("grad", "label", "_op", "_a", "_b", "_mark", "_site")

    # numpy scalars (np.float32(2) * x) leave the operation to the node, which computes
    # it as plain Python would with the plain number (numpy would read a float
    # subclass as a float64); arrays (priority 0) still compute it themselves
    __array_priority__ = -100.0

    data = property(float.__float__, doc="The number as a plain float.")

    def __new__(cls, x=0.0, /):
        self = _FLOAT.__new__(cls, x)
        self.grad = 0.0
        self.label = ""
        self._op = self._a = self._b = self._mark = None
        self._site = cursor.site
        return self

    def __reduce_ex__(self, protocol):  # copies and pickles are plain floats
        return _FLOAT, (_float_of(self),)

    __hash__ = float.__hash__


class Int(GraphNode, int):
    """An int that is a node of the graph (see :class:`Float`); its type is named ``int``.

    An int subclass cannot have slots, so its graph links live in its
    ``__dict__``. Bit operations, ``bit_length``, indexing and every int
    method are int's own (they give plain ints: their derivative is 0).
    """

    __array_priority__ = -100.0  # see Float

    data = property(int.__index__, doc="The number as a plain int.")

    def __new__(cls, x=0, /, *base):
        self = _INT.__new__(cls, x, *base)
        self.grad = 0.0
        self.label = ""
        self._op = self._a = self._b = self._mark = None
        self._site = cursor.site
        return self

    def __reduce_ex__(self, protocol):
        return _INT, (_int_of(self),)

    __hash__ = int.__hash__


class Float64(np.float64):
    """A numpy float64 that is a node of the graph (see :class:`Float`); named ``float64``.

    What ``np.exp(x)`` or ``x * np.float64(2)`` give in plain Python is a
    ``np.float64``: under the magic it is this node, with numpy's own
    arithmetic, repr and warnings.
    """

    # no __slots__: slots on a numpy scalar subclass overlap its data; links live in __dict__

    __array_priority__ = -100.0  # see Float

    data = property(float.__float__, doc="The number as a plain float.")

    def __new__(cls, x=0.0, /):
        self = np.float64.__new__(cls, x)
        self.grad = 0.0
        self.label = ""
        self._op = self._a = self._b = self._mark = None
        self._site = cursor.site
        return self

    def __reduce_ex__(self, protocol):
        return np.float64, (_float_of(self),)

    __hash__ = np.float64.__hash__


# numpy scalars break with a mixin base (np.float64.item crashes): the protocol is copied
for _name, _attr in vars(GraphNode).items():
    if not _name.startswith("__"):
        setattr(Float64, _name, _attr)

for _cls, _base in ((Float, float), (Int, int), (Float64, np.float64)):  # named as theirs
    _cls.__name__ = _cls.__qualname__ = _base.__name__
    _cls.__module__ = _base.__module__

SCALARS = frozenset({Float, Int, Float64})
"""The number classes that are nodes (what the magic makes)."""
SCALAR_NODES = frozenset({Value, Float, Int, Float64})
"""Every scalar node class: a node whose ``grad`` is one number."""

# operands a number node computes with itself; anything else (another numpy
# scalar, a Fraction, a Value, an array) gets NotImplemented first, so its own
# reflected method decides, as it would against a plain float or int
_OWN = frozenset({float, int, bool, Float, Int})
_OWN64 = _OWN | {np.float64, Float64}
_NODE_OF = {float: Float, int: Int, np.float64: Float64}
_MAKE = {float: float.__new__, int: int.__new__, np.float64: np.float64.__new__}


def _number_node(r, op, a, b):
    """Python's result ``r`` of ``op`` on ``a`` (a node) and ``b`` as a node, if it is a number."""
    cls = r.__class__
    node_class = _NODE_OF.get(cls)
    if node_class is None:  # a complex power, NotImplemented, ...: Python's own result
        return r
    out = _MAKE[cls](node_class, r)
    out.grad = 0.0
    out.label = ""
    out._mark = None
    out._site = cursor.site
    out._op = op
    if a.__class__ not in SCALAR_NODES:  # a plain operand: a constant leaf
        a = constant(a)
    out._a = a
    if b is not None and b.__class__ not in SCALAR_NODES:
        b = constant(b)
    out._b = b
    return out


def constant(x):
    """A leaf node holding the plain number ``x`` (an int, a float or a numpy float64;
    a bool or a numpy integer counts as an int, another numpy float as a float64)."""
    cls = x.__class__
    if cls is np.float64 or cls is Float64:
        return Float64(x)
    if isinstance(x, _FLOAT):
        return Float(x)
    if isinstance(x, np.floating):  # another numpy float met in arithmetic (np.float32)
        return Float64(x)
    return Int(x)


def with_data(node, number):
    """``node`` holding exactly ``number``: the same op and parents, Python's own result.

    ``math.log2(x)`` is built from ``log`` and ``/`` but must hold
    ``math.log2``'s own number. A Value or Tensor is changed in place; a
    number node cannot be, so a new one is made (labelled as ``node``).
    """
    cls = node.__class__
    if cls not in SCALARS:
        if cls in _OWN:  # no graph was built (a plain operand decided): the plain number
            return number
        node.data = number.item() if cls is Value and isinstance(number, np.generic) else number
        return node
    if _NODE_OF.get(number.__class__) is cls and number == node.data:
        return node
    if node._op is None:  # np.float64(x) of a leaf: the new type, linked to x by x * 1
        out = _number_node(number, OPS["*"], node, 1)
    else:
        out = _number_node(number, node._op, node._a, node._b)
    if out.__class__ in SCALARS:
        out.label = node.label
    return out


def plain(x):
    """A number node's plain number (of its own type: float, int or numpy float64)."""
    return _plain_of(x)


def _plain_of(x):
    """A number node's plain number (of its own type: float, int or numpy float64)."""
    cls = x.__class__
    if cls is Float:
        return _float_of(x)
    if cls is Int:
        return _int_of(x)
    if cls is Float64:
        return np.float64(_float_of(x))
    return x


def _recording() -> bool:
    return state.recording and state.grad_enabled


def _at_caller(f, *args):
    """``f(*args)`` (numpy scalar arithmetic) with numpy's warnings attributed to the line
    that used the operator: the frame two levels up, the caller of the node's method.

    numpy names the innermost Python frame in its RuntimeWarning: without this it
    would be this module's, where plain Python names the user's line.
    """
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        r = f(*args)
    if caught:
        frame = _sys._getframe(2)
        registry = frame.f_globals.setdefault("__warningregistry__", {})
        for w in caught:
            _warnings.warn_explicit(
                w.message,
                w.category,
                frame.f_code.co_filename,
                frame.f_lineno,
                frame.f_globals.get("__name__"),
                registry,
            )
    return r


def _finite_as_floats(pyop, x, y) -> bool:
    """True when ``pyop`` on ``x`` and ``y`` read as Python floats gives a finite float:
    numpy's float64 arithmetic then gives the same number without a warning."""
    try:
        t = pyop(_FLOAT(x), _FLOAT(y))
    except (ArithmeticError, ValueError):
        return False
    return t.__class__ is _FLOAT and t - t == 0.0


def _numpy_cut(r, node) -> None:
    """Report a numpy scalar result of another type (``np.float32(2) * x``): no node holds
    it, so no gradient flows through it."""
    cut = state.cut
    if cut is not None and isinstance(r, _NP_GENERIC) and node.__class__ is not Int:
        who = repr(node.label) if node.label else repr(_plain_of(node))
        cut(
            f"numpy {r.__class__.__name__} arithmetic computes outside the graph: {who} "
            "entered it as a plain number"
        )


_NP_GENERIC = np.generic
DEFER: set = set()
"""numpy scalar classes that compute arithmetic with a number node themselves, as nodes
(``core.array.Scalar64``, a float64 array node): a number node returns NotImplemented to them."""


def _number_binary(op, method, reflected, swap: bool, own=_OWN, pyop=None, quiet=False):
    """``self <op> other`` (``other <op> self`` if ``swap``) with Python's own operator.

    The operator runs on the plain numbers, so the result, its type, and any
    exception and message are exactly plain Python's; while a cell is recorded
    the result becomes a node. An int node meeting a plain float computes as
    plain Python would, with float's method (``int.__mul__`` declines a float).
    A numpy scalar operand computes with Python's operator on the plain
    numbers (numpy's own promotion: ``np.float32(2) * x`` is a float32). With
    ``quiet`` (numpy float64 nodes), numpy's warnings name the user's line.
    """

    def forward(self, other):
        x = _plain_of(self)
        if other.__class__ not in own:
            if not isinstance(other, _NP_GENERIC) or other.__class__ in DEFER:
                return NotImplemented
            y = _plain_of(other)
            r = _at_caller(pyop, y, x) if swap else _at_caller(pyop, x, y)
            if r.__class__ not in _NODE_OF and _recording():
                _numpy_cut(r, self)
                return r
        else:
            y = _plain_of(other)
            if quiet and not (
                _finite_as_floats(pyop, y, x) if swap else _finite_as_floats(pyop, x, y)
            ):
                r = _at_caller(method, x, y)
                if r is NotImplemented and y.__class__ is _FLOAT:
                    r = _at_caller(reflected, y, x)
            else:
                r = method(x, y)
                if r is NotImplemented and y.__class__ is _FLOAT:
                    r = reflected(y, x)
        if r is NotImplemented or not _recording():
            return r
        return _number_node(r, op, other, self) if swap else _number_node(r, op, self, other)

    return forward


def _number_unary(op, method):
    def forward(self):
        r = method(_plain_of(self))
        if not _recording():
            return r
        return _number_node(r, op, self, None)

    return forward


def _number_math(op):
    """``x.exp()``, ``x.tanh()``...: the engine's forward, which never raises (as on a Value)."""
    f = op.f

    def forward(self):
        try:
            r = f(self.data)
        except OverflowError:
            r = f(real(self.data))
        if not _recording():
            return r
        return _number_node(r, op, self, None)

    forward.__name__ = op.name
    forward.__doc__ = f"{op.name} of this number as a node ({op.rule})."
    return forward


def _number_apply(op, args):
    """:func:`apply` with a number node among ``args``: the op's forward on the plain
    numbers, a number node linked to the args while a cell is recorded."""
    plain_args = [_plain_of(a) for a in args]
    try:
        r = op.f(*plain_args)
    except OverflowError:
        r = op.f(*map(real, plain_args))
    if not _recording():
        return r
    return _number_node(r, op, args[0], args[1] if len(args) > 1 else None)


def _number_compare(method, pyop):
    def compare(self, other):
        state.branch_events += 1
        if isinstance(other, _NP_GENERIC):  # numpy's own comparison (np.float32(x) == x)
            return pyop(_plain_of(self), _plain_of(other))
        return method(_plain_of(self), _plain_of(other))

    return compare


def _number_divmod(base, swap: bool, own=_OWN, quiet=False):
    method = base.__rdivmod__ if swap else base.__divmod__
    reflected = float.__divmod__ if swap else float.__rdivmod__

    def forward(self, other):
        x = _plain_of(self)
        if other.__class__ not in own:
            if not isinstance(other, _NP_GENERIC) or other.__class__ in DEFER:
                return NotImplemented
            y = _plain_of(other)
            pair = _at_caller(divmod, y, x) if swap else _at_caller(divmod, x, y)
        else:
            y = _plain_of(other)
            call = _at_caller if quiet else _direct
            pair = call(method, x, y)
            if pair is NotImplemented and y.__class__ is _FLOAT:
                pair = call(reflected, y, x)
        if pair is NotImplemented or not _recording() or pair.__class__ is not tuple:
            return pair
        a, b = (other, self) if swap else (self, other)
        return (_number_node(pair[0], OPS["//"], a, b), _number_node(pair[1], OPS["%"], a, b))

    return forward


def _direct(f, *args):
    return f(*args)


def _number_pow(base, swap: bool, own=_OWN, quiet=False):
    method = base.__rpow__ if swap else base.__pow__
    reflected = float.__pow__ if swap else float.__rpow__

    def forward(self, other, mod=None):
        if mod is not None:  # pow(a, b, m): integers only, no gradient
            return method(_plain_of(self), _plain_of(other), _plain_of(mod))
        x = _plain_of(self)
        if other.__class__ not in own:
            if not isinstance(other, _NP_GENERIC) or other.__class__ in DEFER:
                return NotImplemented
            y = _plain_of(other)
            r = _at_caller(pow, y, x) if swap else _at_caller(pow, x, y)
        else:
            y = _plain_of(other)
            if quiet and not (
                _finite_as_floats(pow, y, x) if swap else _finite_as_floats(pow, x, y)
            ):
                r = _at_caller(method, x, y)
                if r is NotImplemented and y.__class__ is _FLOAT:
                    r = _at_caller(reflected, y, x)
            else:
                r = method(x, y)
                if r is NotImplemented and y.__class__ is _FLOAT:
                    r = reflected(y, x)
        if r is NotImplemented or not _recording():
            return r
        return (
            _number_node(r, OPS["**"], other, self)
            if swap
            else _number_node(r, OPS["**"], self, other)
        )

    return forward


def _number_pos(self):
    return self if _recording() else _plain_of(self)


for _cls, _base, _own in ((Float, float, _OWN), (Int, int, _OWN), (Float64, np.float64, _OWN64)):
    _quiet = _cls is Float64
    for _op in OPS.values():  # Python's operators (each entry's method), exp, log, tanh...
        for _name in _op.method.split():
            if _op.arity == 2 and _name.startswith("__") and _name != "__pow__":
                _rname = _name.replace("__", "__r", 1)
                _pyop = getattr(operator, _name.strip("_"))
                setattr(
                    _cls,
                    _name,
                    _number_binary(
                        _op,
                        getattr(_base, _name),
                        getattr(float, _rname),
                        False,
                        _own,
                        _pyop,
                        _quiet,
                    ),
                )
                setattr(
                    _cls,
                    _rname,
                    _number_binary(
                        _op,
                        getattr(_base, _rname),
                        getattr(float, _name),
                        True,
                        _own,
                        _pyop,
                        _quiet,
                    ),
                )
            elif _op.arity == 1 and _name in ("__neg__", "__abs__"):
                setattr(_cls, _name, _number_unary(_op, getattr(_base, _name)))
            elif _op.arity == 1 and not _name.startswith("__"):
                # what the magic's math dispatch builds with (floor, round: int's own, plain)
                setattr(_cls, _name, _number_math(_op))
    _cls.__pow__ = _number_pow(_base, False, _own, _quiet)
    _cls.__rpow__ = _number_pow(_base, True, _own, _quiet)
    _cls.__divmod__ = _number_divmod(_base, False, _own, _quiet)
    _cls.__rdivmod__ = _number_divmod(_base, True, _own, _quiet)
    _cls.__pos__ = _number_pos
    for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(
            _cls,
            f"__{_name}__",
            _number_compare(getattr(_base, f"__{_name}__"), getattr(operator, _name)),
        )
del _cls, _base, _own, _rname, _name, _op, _pyop, _quiet


# ---------------------------------------------------------------- Float's fast path
# A Float node meeting a float or a Float node (most of a cell's arithmetic): float's
# own method reads both numbers as they are (it accepts float subclasses and returns a
# plain float, the same number, exception and message as on the plain numbers), and
# the result node is made in place: no call per step. Anything else takes the general
# forward above.
_new_float = float.__new__


def _float_fast(general, op, method, swap: bool):
    def forward(self, other):
        cls = other.__class__
        if cls is not Float and cls is not _FLOAT or self.__class__ is not Float:
            return general(self, other)
        r = method(self, other)  # a float: float's methods never decline a float
        if not (state.recording and state.grad_enabled):
            return r
        out = _new_float(Float, r)
        out.grad = 0.0
        out.label = ""
        out._mark = None
        out._site = site = cursor.site
        out._op = op
        if cls is _FLOAT:  # a plain operand: a constant leaf
            other = _new_float(Float, other)
            other.grad = 0.0
            other.label = ""
            other._op = other._a = other._b = other._mark = None
            other._site = site
        if swap:
            out._a = other
            out._b = self
        else:
            out._a = self
            out._b = other
        return out

    forward.__name__ = general.__name__
    forward.__doc__ = general.__doc__
    return forward


for _op in OPS.values():
    for _name in _op.method.split():
        if _op.arity == 2 and _name.startswith("__") and _name != "__pow__":
            _rname = _name.replace("__", "__r", 1)
            setattr(
                Float, _name, _float_fast(Float.__dict__[_name], _op, getattr(float, _name), False)
            )
            setattr(
                Float,
                _rname,
                _float_fast(Float.__dict__[_rname], _op, getattr(float, _rname), True),
            )
del _op, _name, _rname
