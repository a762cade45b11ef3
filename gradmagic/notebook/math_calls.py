"""The math and numpy functions a cell calls by name, made to keep the graph.

A cell's ``math.exp(x)`` or ``np.log1p(x)`` with a number node runs as the rewritten call
``fn(math.exp)(x)``: :func:`gradmagic.notebook.runtime.fn` looks the function up in the table
made here. An op's own ``math``/``numpy`` names (from :data:`gradmagic.core.ops.OPS`) build the
op; a function that is several ops (``log2``, ``sinh``, ``hypot``) is built from them; a
function with no gradient rule computes on the plain numbers and the cut is recorded. The
function itself always runs first on the plain numbers, so it fails as in plain Python and
the node holds exactly its result. Importing this module fills ``runtime``'s table.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance, type) changes its own
# code, as in plain Python, and not the engine's
from builtins import float, int, isinstance, type  # noqa: A004

import functools
import math
import sys
import warnings

import numpy as np

from . import runtime as _runtime
from ..core import array as _array
from ..core import engine, number_nodes
from ..core.array import Scalar16, Scalar32, Scalar64
from ..core.engine import SCALAR_NODES, Value
from ..core.fpstate import WARNS, calm
from ..core.number_nodes import SCALARS, Int, with_data
from ..core.ops import OPS
from ..core.tensor import Tensor
from ..core.tensor import has_rule as tensor_has_rule
from .runtime import _ARRAY_NODES, _as_constant, _describe, _record, _who, is_node, literal


_SCALAR_NODES = SCALAR_NODES
_FLOAT_SCALARS = frozenset({Scalar64, Scalar32, Scalar16})
_FLOATS = frozenset({number_nodes.Float, number_nodes.Float64})


def _num(x):
    return x.data if type(x) in _SCALAR_NODES else x


def _has_value(args) -> bool:
    for a in args:
        if type(a) in _SCALAR_NODES:
            return _runtime._run is not None or type(a) is Value
    return False


def _as_float(x):
    """``float(x)`` for a Value, keeping the graph (a Tensor passes as it is)."""
    return x * 1.0 if type(x.data) is int else x


def _keeps(build, tensors: bool = True, op=None):
    """Wrap ``f``: plain numbers go to ``f``; with a Value, ``build`` makes the graph.

    ``f`` itself runs first on the plain numbers, so it fails as in plain
    Python (``math.log(0)`` raises ValueError), and the node holds exactly
    ``f``'s result (``math.log2(8)`` is 3.0, not ``log(8) / log(2)``). A
    Tensor argument goes to :func:`_on_tensor` if ``tensors``; without it
    (``float(T)``), ``f`` converts it as in plain Python.
    """

    def wrap(f):
        plain = _warning_at_caller(f) if isinstance(f, np.ufunc) else f
        lean = op if isinstance(f, np.ufunc) and op is not None and op.arity == 1 else None

        def keep(*args, **kwargs):
            if lean is not None and len(args) == 1 and type(args[0]) in _FLOATS and not kwargs:
                if _runtime._run is not None and _array.tracking():  # np.log(x): one node
                    number = plain(number_nodes.plain(args[0]))
                    if type(number) is np.float64:
                        return number_nodes.result(number, lean, args[0])
            if kwargs or not _has_value(args):
                if tensors and len(args) == 1 and type(args[0]) in _ARRAY_NODES:
                    if type(args[0]) is Tensor:
                        return _on_tensor(f, build, args[0])
                    return _on_array(f, build, args[0])
                x = args[0] if len(args) == 1 else None
                if not tensors and type(x) in _FLOAT_SCALARS and x.requires_grad:
                    if f is np.float64 and type(x) is Scalar64:
                        return x  # np.float64(x) of a float64 node: the same number
                    if f is float and _array.tracking():
                        return _array.as_float(x)  # a number node of the same graph
                    if _array.tracking():  # np.float64 of a float32 node: a copy, linked
                        return _array._link(_array._COPY, plain(_array._pv(x)), x)
                return plain(*args, **kwargs)
            if any(type(a) in _ARRAY_NODES for a in args):
                return f(*args)  # Values and Tensors mixed: as plain Python (conversions counted)
            number = plain(*map(_num, args))
            node = build(*args)
            return with_data(node, number)

        return functools.update_wrapper(keep, f, updated=())

    return wrap


def _warning_at_caller(f):
    """``f`` whose warnings (numpy's RuntimeWarning) point at the line that called the wrapper.

    numpy attributes a warning to the Python frame calling it: called from a
    wrapper here, it would name this file instead of the user's line.
    """

    def call(*args, **kwargs):
        # numpy's own loop on numbers (no node's code, nothing written that it reads)
        if len(args) == f.nin and "out" not in kwargs and _ARRAY_NODES.isdisjoint(map(type, args)):
            result = calm(f, args, kwargs)
            if result is WARNS:
                result = number_nodes.warned_at(f, args, kwargs, sys._getframe(2))
            if result is not WARNS:
                return result
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = f(*args, **kwargs)
        if caught:
            number_nodes.reissue(caught, sys._getframe(2))
        return result

    return call


def _on_tensor(f, build, t):
    """``f(t)`` for a Tensor ``t``, keeping the graph where ``build`` can.

    ``np.log1p(T)`` works elementwise on any Tensor; ``math.exp(T)`` on a
    one-element one (plain Python converts it to a float there) and gives a
    one-element Tensor. As for Values, the result holds exactly ``f``'s
    numbers. Without a graph for it (``math.tan``), or for a larger Tensor
    given to a ``math`` function, ``f(t)`` runs as in plain Python: a counted
    conversion or the usual error.
    """
    elementwise = isinstance(f, np.ufunc)
    if elementwise:
        if tensor_has_rule(f):
            return f(t)  # a ufunc the Tensor knows (np.floor: plain values)
        # no rule of its own (np.log1p): built from ops that have one
    elif t.data.size != 1:
        return f(t)
    try:
        node = build(t)
    except (TypeError, AttributeError):  # no graph for it
        return f(t)
    if node is not t and is_node(node):
        exact = f(t.data) if elementwise else f(t.data.item())
        node.data = np.broadcast_to(np.asarray(exact, dtype=np.float64), node.data.shape).copy()
    return node


def _on_array(f, build, t):
    """``f(t)`` for an array node ``t`` (:class:`~gradmagic.core.array.Array`, ``Scalar64``).

    A numpy ufunc computes numpy's own result; where the Array has no rule for it
    (``np.log1p``), the graph is built from ops that have one (on a Tensor that
    stands for ``t``) and holds numpy's numbers. A ``math`` function gives
    Python's plain float, as plain Python does, and the conversion is reported.
    """
    if not isinstance(f, np.ufunc):
        if _array.tracking() and t.requires_grad:
            _record(
                f"{_describe(f)} takes an array node as a plain number (its result is a "
                "Python float)"
            )
        return f(_array.plain_array(t))
    if tensor_has_rule(f) or not (_array.tracking() and t.requires_grad):
        return f(t)
    exact = f(_array.plain_array(t))
    stand_in = _array._t._apply(_array._COPY, t)
    try:
        node = build(stand_in)
    except (TypeError, AttributeError):  # no graph for it
        return f(t)
    if not is_node(node) or node is stand_in:
        return f(t)
    return _array._adopt(exact, node)


def _cut(f):
    """Wrap a function with no gradient rule: compute on numbers, record the cut."""
    name = _describe(f)

    def cut(*args, **kwargs):
        if not _has_value(args):
            return _as_constant(f(*args, **kwargs))
        who = ", ".join(_who(a) for a in args if type(a) in _SCALAR_NODES)
        result = _as_constant(f(*map(_num, args), **kwargs))
        _record(
            f"{name} has no gradient rule: {who} entered it as a plain number",
            result if type(result) in SCALARS else None,
            name,
        )
        return result

    return functools.update_wrapper(cut, f, updated=())


def _narrowing(f):
    """Wrap a conversion to numpy's ``float32`` or ``float16``: numpy's own number(s) in
    that precision, linked to the node that went in by a copy."""

    def convert(*args, **kwargs):
        if len(args) == 1 and not kwargs and _runtime._run is not None and _array.tracking():
            x = args[0]
            if (type(x) in _SCALAR_NODES and type(x) is not Int) or (
                type(x) in _ARRAY_NODES and type(x) is not Tensor and x.requires_grad
            ):
                return _array._link(_array._COPY, f(_array._pv(x)), x)
        return f(*args, **kwargs)

    return functools.update_wrapper(convert, f, updated=())


def _on_numbers(f):
    """Wrap a predicate (``isfinite``, ``isclose``): it reads the numbers, no graph needed."""

    def test(*args, **kwargs):
        return f(*map(_num, args), **{k: _num(v) for k, v in kwargs.items()})

    return functools.update_wrapper(test, f, updated=())


def _value(x):
    return x if is_node(x) else literal(x)


def _log(x, base=None):
    if base is None:
        return _value(x).log()
    return _value(x).log() / _value(base).log()


def _hypot(*xs):
    return sum(_value(x) * x for x in xs).sqrt()


def _atan2(y, x):
    # atan(y / x) has atan2's derivatives wherever x != 0; the quadrant is a constant
    yv, xv = _num(y), _num(x)
    if xv == 0:
        return -(_value(x) / y).atan() + math.copysign(math.pi / 2, yv)
    turn = 0.0 if xv > 0 else math.copysign(math.pi, yv)
    return (_value(y) / x).atan() + turn


def _copysign(x, y):
    return abs(_value(x)) * math.copysign(1.0, _num(y))


def _quotient_rest(plain_rest):
    # x - n * y with n the whole quotient that plain_rest (math.fmod, math.remainder) used
    def rest(x, y):
        n = round((_num(x) - plain_rest(_num(x), _num(y))) / _num(y))
        return _value(x) - _value(y) * float(n)

    return rest


def _cbrt(x):
    return x ** (1 / 3) if _num(x) >= 0 else -((-x) ** (1 / 3))


def _fsum(iterable):
    xs = list(iterable)
    if not _has_value(xs):
        return math.fsum(xs)
    return with_data(sum(xs, 0.0), math.fsum(map(_num, xs)))


def _pow(base, exp, mod=None):
    if mod is not None:
        return pow(_num(base), _num(exp), _num(mod))
    return base**exp


def _complex(*args, **kwargs):
    """``complex(x, y)`` of number nodes: ``x + y * 1j``, a complex node of the graph."""
    nodes = any(type(a) in SCALARS for a in args)
    if kwargs or not nodes or len(args) > 2 or _runtime._run is None:
        return _complex_cut(*args, **kwargs)
    exact = complex(*map(_num, args))  # (raises as Python does)
    z = args[0] + (args[1] * 1j if len(args) == 2 else 0j)
    return z if z == exact else _complex_cut(*args)  # (inf * 1j is not complex(0, inf))


def _isinstance(obj, cls):
    kind = type(obj)
    return isinstance(obj, cls) or ((kind is Value or kind is Tensor) and isinstance(obj.data, cls))


# Functions that are not ops but are built from several (each op's own math/numpy names come
# from its entry in core.ops.OPS: ``math.exp`` is the op ``exp``).
_COMPOSITES = {  # name -> graph of the function from Value operations
    "log": _log,
    "log2": lambda x: _value(x).log() / math.log(2),
    "log10": lambda x: _value(x).log() / math.log(10),
    "log1p": lambda x: (1 + x).log(),
    "expm1": lambda x: x.exp() - 1,
    "exp2": lambda x: 2**x,
    "sinh": lambda x: (x.exp() - (-x).exp()) / 2,
    "cosh": lambda x: (x.exp() + (-x).exp()) / 2,
    "asinh": lambda x: (x + (x * x + 1).sqrt()).log(),
    "acosh": lambda x: (x + (x * x - 1).sqrt()).log(),
    "atanh": lambda x: ((1 + x) / (1 - x)).log() / 2,
    "fabs": lambda x: _as_float(abs(x)),
    "degrees": lambda x: x * (180 / math.pi),
    "radians": lambda x: x * (math.pi / 180),
    "hypot": _hypot,
    "pow": lambda x, y: _as_float(_value(x) ** y),
    "atan2": _atan2,
    "copysign": _copysign,
    "fmod": _quotient_rest(math.fmod),
    "remainder": _quotient_rest(math.remainder),
    "cbrt": _cbrt,
}
_NUMPY_NAMES = {
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
    "rad2deg": "degrees",
    "deg2rad": "radians",
    "arctan2": "atan2",
}
_NUMPY_COMPOSITES = (
    "log2 log10 log1p expm1 exp2 sinh cosh arcsinh arccosh arctanh fabs degrees radians "
    "rad2deg deg2rad hypot arctan2 copysign fmod cbrt"
).split()
# functions of real numbers that have no gradient rule here: unless an op covers them, they
# compute on the plain numbers and the cut is recorded
_MAYBE_NO_GRADIENT = (
    "atan asin acos atan2 erf erfc gamma lgamma cbrt copysign fmod remainder arctan "
    "arcsin arccos arctan2"
).split()
_PREDICATES = ("isclose", "isfinite", "isnan", "isinf")


def _named_method(op) -> str:
    """A unary op's method that is not an operator (``"exp"``), or ``""``."""
    name = op.method.split()[0] if op.method else ""
    return name if op.arity == 1 and not name.startswith("__") else ""


def _op_builder(op):
    """The graph of ``op`` applied to nodes: its method (``x.exp()``) or engine.apply."""
    name = _named_method(op)
    if name:
        return lambda x: getattr(_value(x), name)()
    return lambda *xs: engine.apply(op.name, *xs)


def _table() -> tuple[dict, frozenset[str]]:
    """Functions (by object) → their graph-keeping versions, and the names they are called by."""
    table, names = {}, set()

    def add(module, name, wrapped):
        f = getattr(module, name, None)
        if f is not None:
            if f not in table:  # numpy 2 has aliases (np.atan is np.arctan): first one wins
                table[f] = wrapped(f)
            names.add(name)

    for op in OPS.values():  # an op's own names first: they win over composites
        for module, wanted in ((math, op.math), (np, op.numpy)):
            for name in wanted:
                add(module, name, _keeps(_op_builder(op), op=op))
        # numpy's ufunc of the method's name (np.tanh): on a number node numpy would
        # compute on the plain float and cut the graph silently
        name = _named_method(op)
        if name and isinstance(getattr(np, name, None), np.ufunc):
            add(np, name, _keeps(_op_builder(op), op=op))
    for name, build in _COMPOSITES.items():  # math has every one, by these names
        add(math, name, _keeps(build))
    for name in _NUMPY_COMPOSITES:
        add(np, name, _keeps(_COMPOSITES[_NUMPY_NAMES.get(name, name)]))
    for module in (math, np):
        for name in _MAYBE_NO_GRADIENT:
            if module is np and tensor_has_rule(getattr(np, name, None)):
                continue  # a ufunc the array nodes have a rule for: numpy's call keeps the graph
            add(module, name, _cut)
        for name in _PREDICATES:
            add(module, name, _on_numbers)
    for t in (float, np.float64):
        table[t] = _keeps(_as_float, tensors=False)(t)  # a Tensor converts: floats have
        # methods (round, is_integer) a Tensor has not
        names.add(t.__name__)
    for t in (np.float32, np.float16):  # numbers of their own precision, nodes too
        table[t] = _narrowing(t)
        names.add(t.__name__)
    table[pow] = _pow
    table[isinstance] = _isinstance
    table[math.fsum] = _fsum
    table[complex] = _complex
    names.update(("pow", "isinstance", "fsum", "complex"))
    return table, frozenset(names)


_complex_cut = _cut(complex)
DISPATCH, DISPATCHED_NAMES = _table()
"""Function → its graph-keeping version; DISPATCHED_NAMES: the names a cell calls them by."""

_runtime._DISPATCH.update(DISPATCH)
# floor, ceil and trunc ask the number itself (x.__floor__()): their derivative is 0, no cut
_runtime._DISPATCH.update((f, f) for f in (math.floor, math.ceil, math.trunc))
_runtime.no_rule = _cut
