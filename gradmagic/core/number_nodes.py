"""The magic's number nodes: a float, an int or a numpy float64 that is a graph node.

What ``%%autograd`` makes of a number is a :class:`Float`, :class:`Int` or
:class:`Float64`: a subclass of the number's own type, named as it, whose
arithmetic is Python's (or numpy's) own on the plain numbers, so results,
exceptions and their messages are exactly plain code's. While a cell is recorded
(``state.recording``) a result is a node linked to its operands with the op's entry
of :data:`~gradmagic.core.ops.OPS`; outside a recording results are plain numbers.
The nodes share the graph protocol of :class:`~gradmagic.core.engine.GraphNode`
with ``Value``; importing this module registers them with the engine's walks.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance, type) changes its own
# code, as in plain Python, and not the engine's
from builtins import float, int, isinstance  # noqa: A004

import operator
import sys as _sys
import warnings as _warnings

import numpy as np

from . import graph as _graph
from .fpstate import WARNS as _WARNS, calm as _calm, careful as _careful
from .engine import Value
from .graph import GraphNode, state
from .ops import OPS, Op, real
from .sites import cursor

__all__ = ["Float", "Int", "Float64", "SCALARS", "constant", "with_data", "plain", "DEFER"]

# Python's own types, held here: code run under the magic may rebind builtins.float
_FLOAT, _INT = float, int
_float_of, _int_of = float.__float__, int.__index__


def _leaf(node):
    """``node``, a number just made, as a leaf of the graph made at the current site."""
    node.grad = 0.0
    node.label = ""
    node._op = node._a = node._b = node._mark = None
    node._site = cursor.site
    return node


def _set_data(self, value):
    """``x.data = ...`` on a number node: a number cannot change; the message says how a
    training step is written instead."""
    raise AttributeError(
        f"property 'data' of '{type(self).__name__}' object has no setter: a number of "
        "%%autograd is a plain number and cannot change. Write the step on what holds it "
        "(w[i] = w[i] - 0.1 * g; params['W'] = ...), with the gradients of the last run "
        "(gradmagic.last.grads_of('w')), or use a Value class of your own"
    )


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

    # _born: the count of the birth that made a leaf (set only on leaves the magic made;
    # see gradmagic.notebook.runtime.born)
    __slots__ = ("grad", "label", "_op", "_a", "_b", "_mark", "_site", "_born")

    # numpy scalars (np.float32(2) * x) leave the operation to the node, which computes
    # it as plain Python would with the plain number (numpy would read a float
    # subclass as a float64); arrays (priority 0) still compute it themselves
    __array_priority__ = -100.0

    data = property(float.__float__, _set_data, doc="The number as a plain float.")

    def __new__(cls, x=0.0, /):
        return _leaf(_FLOAT.__new__(cls, x))

    def __reduce_ex__(self, protocol):  # pickles are plain floats
        return _FLOAT, (_float_of(self),)

    def __copy__(self):  # a number is its own copy, as a plain one is
        return self

    def __deepcopy__(self, memo=None):
        return self

    __hash__ = float.__hash__


class Int(GraphNode, int):
    """An int that is a node of the graph (see :class:`Float`); its type is named ``int``.

    An int subclass cannot have slots, so its graph links live in its
    ``__dict__``. Bit operations, ``bit_length``, indexing and every int
    method are int's own (they give plain ints: their derivative is 0).
    """

    __array_priority__ = -100.0  # see Float

    data = property(int.__index__, _set_data, doc="The number as a plain int.")

    def __new__(cls, x=0, /, *base):
        return _leaf(_INT.__new__(cls, x, *base))

    def __reduce_ex__(self, protocol):
        return _INT, (_int_of(self),)

    def __copy__(self):  # a number is its own copy, as a plain one is
        return self

    def __deepcopy__(self, memo=None):
        return self

    __hash__ = int.__hash__


class Float64(np.float64):
    """A numpy float64 that is a node of the graph (see :class:`Float`); named ``float64``.

    What ``np.exp(x)`` or ``x * np.float64(2)`` give in plain Python is a
    ``np.float64``: under the magic it is this node, with numpy's own
    arithmetic, repr and warnings.
    """

    # no __slots__: slots on a numpy scalar subclass overlap its data; links live in __dict__

    __array_priority__ = -100.0  # see Float

    data = property(float.__float__, _set_data, doc="The number as a plain float.")

    def __new__(cls, x=0.0, /):
        return _leaf(np.float64.__new__(cls, x))

    def __reduce_ex__(self, protocol):
        return np.float64, (_float_of(self),)

    def __copy__(self):  # a number is its own copy, as a plain one is
        return self

    def __deepcopy__(self, memo=None):
        return self

    __hash__ = np.float64.__hash__


# numpy scalars break with a mixin base (np.float64.item crashes): the protocol is copied
for _name, _attr in vars(GraphNode).items():
    if not _name.startswith("__"):
        setattr(Float64, _name, _attr)

for _cls, _base in ((Float, float), (Int, int), (Float64, np.float64)):  # named as theirs
    _cls.__name__ = _cls.__qualname__ = _base.__name__
    _cls.__module__ = _base.__module__

SCALARS = _graph.SCALARS
SCALARS.update((Float, Int, Float64))
SCALAR_NODES = _graph.SCALAR_NODES
SCALAR_NODES.update(SCALARS)
_graph.FLOAT_NODES.update((Float, Float64))
_graph.INT_NODES.add(Int)

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


def result(number, op, a, b=None):
    """``number``, the plain result of ``op`` on ``a`` (a node) and ``b`` (numpy's
    ``np.log(x)``), as a node linked to them while a cell is recorded (else ``number``)."""
    return _number_node(number, op, a, b) if _recording() else number


def of_tensor(number, node):
    """A Float holding ``number``, the one number of the tensor node ``node`` (``float(s)``,
    ``s.item()``): a scalar node of the same graph, linked to ``node`` by ``float``."""
    out = Float(number)
    out._op = OPS["float"]
    out._a = node
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
    if node._op.__class__ is not Op:  # np.float64(x) of a leaf, float(a[i]): x * 1
        out = _number_node(number, OPS["*"], node, 1)
    else:
        out = _number_node(number, node._op, node._a, node._b)
    if out.__class__ in SCALARS:
        out.label = node.label
    return out


def plain(x):
    """A number node's plain number (of its own type: float, int or numpy float64)."""
    cls = x.__class__
    if cls is Float:
        return _float_of(x)
    if cls is Int:
        return _int_of(x)
    if cls is Float64:
        return np.float64(_float_of(x))
    return x


_plain_of = plain


def _recording() -> bool:
    return state.recording and state.grad_enabled


def _at_caller(f, *args):
    """``f(*args)`` (numpy scalar arithmetic) with numpy's warnings attributed to the line
    that used the operator: the frame two levels up, the caller of the node's method.

    numpy names the innermost Python frame in its RuntimeWarning: without this it
    would be this module's, where plain Python names the user's line.
    """
    r = _calm(f, args)
    if r is _WARNS:
        r = warned_at(f, args, None, _sys._getframe(2))
    if r is not _WARNS:
        return r
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        r = f(*args)
    if caught:
        reissue(caught, _sys._getframe(2))
    return r


def warned_at(f, args, kwargs, frame):
    """``f(*args, **kwargs)`` (numpy's C code on numbers, which writes nothing it reads), its
    floating-point warnings issued at ``frame``'s line as numpy issues them at the line that
    calls it; :data:`~gradmagic.core.fpstate.WARNS` where only numpy can (see
    :func:`~gradmagic.core.fpstate.careful`)."""
    done = _careful(f, args, kwargs)
    if done is None:
        return _WARNS
    result, messages, error = done
    reissue(
        [_warnings.WarningMessage(RuntimeWarning(m), RuntimeWarning, "", 0) for m in messages],
        frame,
    )
    if error is not None:
        raise error
    return result


def reissue(caught, frame) -> None:
    """Warn again the warnings ``caught``, as raised at ``frame``'s line (as is, without one)."""
    if frame is None:
        for w in caught:
            _warnings.warn(w.message, w.category, stacklevel=1)
        return
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


def _finite_as_floats(pyop, x, y) -> bool:
    """True when ``pyop`` on ``x`` and ``y`` read as Python floats gives a finite float:
    numpy's float64 arithmetic then gives the same number without a warning."""
    try:
        t = pyop(_FLOAT(x), _FLOAT(y))
    except (ArithmeticError, ValueError):
        return False
    return t.__class__ is _FLOAT and t - t == 0.0


def _numpy_cut(r, node) -> None:
    """Report a numpy scalar result of another type (``np.int8(2) * x``): no node holds
    it, so no gradient flows through it."""
    cut = state.cut
    if cut is not None and isinstance(r, _NP_GENERIC) and node.__class__ is not Int:
        who = repr(node.label) if node.label else repr(_plain_of(node))
        cut(
            f"numpy {r.__class__.__name__} arithmetic computes outside the graph: {who} "
            "entered it as a plain number"
        )


_NP_GENERIC = np.generic


LIFTED: dict = {}
"""A number kind that array nodes hold (complex, numpy's float32 and float16) → its node
class (``core.array_nodes``), once imported."""


def _lifted(pyop, x, z, swap: bool, node):
    """A number node ``x`` meeting ``z``, a complex or a numpy float32 or float16: while a
    cell is recorded, ``z`` as a node of its kind, which computes Python's (numpy's) own
    result as a node."""
    if _recording():
        z = LIFTED[z.__class__](z)
        return pyop(z, node) if swap else pyop(node, z)
    return pyop(z, x) if swap else pyop(x, z)


def _complex_cut(node, x) -> None:
    cut = state.cut
    if cut is not None and _recording() and node.__class__ is not Int:
        who = repr(node.label) if node.label else repr(x)
        cut(
            f"complex arithmetic computes outside the graph (gradmagic differentiates real "
            f"numbers only): {who} entered it as a plain number"
        )


DEFER: set = set()
"""numpy scalar classes that compute arithmetic with a number node themselves, as nodes
(``core.array.Scalar64``, a float64 array node): a number node returns NotImplemented to them."""


def _number_binary(op, method, reflected, swap: bool, own=_OWN, pyop=None, quiet=False):
    """``self <op> other`` (``other <op> self`` if ``swap``) with Python's own operator.

    The operator runs on the plain numbers, so the result, its type, and any
    exception and message are exactly plain Python's; while a cell is recorded
    the result becomes a node. An int node meeting a plain float computes as
    plain Python would, with float's method (``int.__mul__`` declines a float).
    A numpy scalar operand computes with numpy's own promotion (``np.float32(2) * x``
    is a float32 node: see :func:`_lifted`). With
    ``quiet`` (numpy float64 nodes), numpy's warnings name the user's line.
    """

    def forward(self, other):
        x = _plain_of(self)
        if other.__class__ not in own:
            if other.__class__ in LIFTED:
                return _lifted(pyop, x, other, swap, self)
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
        if r.__class__ is complex:  # a negative number to a fractional power
            _complex_cut(self, x)
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


_graph.number_apply = _number_apply


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
    """``**`` as :func:`_number_binary` makes it, and ``pow(a, b, m)`` (integers only, no
    gradient) on the plain numbers."""
    method = base.__rpow__ if swap else base.__pow__
    reflected = float.__pow__ if swap else float.__rpow__
    binary = _number_binary(OPS["**"], method, reflected, swap, own, pow, quiet)

    def forward(self, other, mod=None):
        if mod is not None:
            return method(_plain_of(self), _plain_of(other), _plain_of(mod))
        return binary(self, other)

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
                for _m, _r, _swap in ((_name, _rname, False), (_rname, _name, True)):
                    _forward = _number_binary(
                        _op, getattr(_base, _m), getattr(float, _r), _swap, _own, _pyop, _quiet
                    )
                    setattr(_cls, _m, _forward)
            elif _op.arity == 1 and _name in ("__neg__", "__abs__"):
                setattr(_cls, _name, _number_unary(_op, getattr(_base, _name)))
            elif _op.arity == 1 and not _name.startswith("__"):
                # what the magic's math dispatch builds with (floor, round: int's own, plain)
                setattr(_cls, _name, _number_math(_op))
    # the methods are made per class from the table (the type checker sees float's and int's)
    _cls.__pow__ = _number_pow(_base, False, _own, _quiet)  # type: ignore[method-assign]
    _cls.__rpow__ = _number_pow(_base, True, _own, _quiet)  # type: ignore[method-assign]
    _cls.__divmod__ = _number_divmod(_base, False, _own, _quiet)  # type: ignore[method-assign]
    _cls.__rdivmod__ = _number_divmod(_base, True, _own, _quiet)  # type: ignore[method-assign]
    _cls.__pos__ = _number_pos  # type: ignore[method-assign]
    for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(
            _cls,
            f"__{_name}__",
            _number_compare(getattr(_base, f"__{_name}__"), getattr(operator, _name)),
        )
del _cls, _base, _own, _rname, _name, _op, _pyop, _quiet, _m, _r, _swap, _forward


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
            for _m in (_name, _name.replace("__", "__r", 1)):
                _forward = _float_fast(Float.__dict__[_m], _op, getattr(float, _m), _m != _name)
                setattr(Float, _m, _forward)
del _op, _name, _m, _forward
