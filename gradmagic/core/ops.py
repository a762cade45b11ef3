"""The one table of scalar operations.

Every operation the engine knows is one :class:`Op` entry in :data:`OPS`:

* ``f``      -- the float forward, on plain Python numbers (ints stay ints where
  Python keeps them ints, so ``7 // 2`` is still ``3``);
* ``df``     -- the local derivatives: ``df(x, out)`` for a unary op returns
  d out/d x; ``df(x, y, out)`` for a binary op returns ``(d out/d x, d out/d y)``;
* ``np``     -- the same forward on numpy arrays, used to replay a recorded graph
  with many perturbed inputs at once (the numerical check);
* ``kink``   -- optional predicate on the inputs: True where the op is not
  differentiable and ``df`` returns a subgradient (relu and abs at 0);
* ``rule``   -- the derivative as a formula, for people.

plus how the op is reached (``method``, ``math``, ``numpy``, ``torch``: see
:class:`OpBase`). Adding an operation means adding one entry here (and its array
version in :mod:`gradmagic.core.tensor_ops`): ``Value``'s methods, the cell
runtime's function table, numpy dispatch and the PyTorch replay derive from it.

Forwards never raise for numeric reasons: a result that is not finite (log of a
negative number, exp overflow, division by zero) is ``nan`` or ``±inf``, as in
IEEE arithmetic, and the engine marks such nodes. The one exception is an int
argument too large for a float (``10 ** 400``): ``f`` and ``df`` may then raise
``OverflowError``, and the caller retries with :func:`real` of the arguments
(the engine does), which reads such an int as ``±inf``. Checking for it up front
would slow down every operation for a case that almost never happens.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance) changes its own
# code, as in plain Python, and not the engine's
from builtins import float, int, isinstance  # noqa: A004

import math
import operator
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

INF = math.inf
NAN = math.nan


@dataclass(frozen=True)
class OpBase:
    """What every operation record says about itself, scalar or tensor.

    ``f``/``df``/``np``/``rule``/``kink`` are described in the module notes. The
    rest tells every other part of gradmagic how the op is reached, so that no
    other table names ops:

    * ``method``  -- how Python spells it on a node, space-separated names:
      ``"__add__"`` (a binary operator, which also gets its reflected
      ``__radd__``), ``"__neg__"``, a method name (``"tanh"``); ``""`` for none
      (reached by name only: ``apply("roundn", v, 2)``);
    * ``math``    -- names of :mod:`math` functions that compute this op on one
      number (``("exp",)``): a cell's ``math.exp(x)`` then keeps the graph;
    * ``numpy``   -- names of numpy functions that compute it (``("exp",)``):
      ``np.exp(x)`` keeps the graph, and a numpy ufunc of that name called on a
      Tensor dispatches to the op;
    * ``torch``   -- the PyTorch function for the replay (``--torch``): a name
      in ``torch`` (``"exp"``), or ``torch -> function`` when it needs adapting.
    """

    name: str  # unique key, also what ``Value.op`` returns
    arity: int
    f: Callable
    df: Any
    np: Callable
    rule: str
    kink: Optional[Callable] = None
    display: str = ""  # symbol shown in graphs; defaults to name
    method: str = ""
    math: tuple = ()
    numpy: tuple = ()
    torch: Any = None

    # what a graph walk records for a node's op: 1 + the entry's position in the op
    # tables, set on every table entry by gradmagic.analysis.trace (a leaf records 0;
    # an entry of no table, a test's own, keeps 255)
    _trace_code = 255

    @property
    def symbol(self) -> str:
        return self.display or self.name

    def torch_function(self, torch):
        """The PyTorch function of this op, or None if it has none."""
        t = self.torch
        if t is None:
            return None
        return getattr(torch, t) if isinstance(t, str) else t(torch)


@dataclass(frozen=True)
class Op(OpBase):
    """A scalar operation: ``df(x[, y], out)`` gives the local derivatives."""

    def local_grads(self, *args) -> tuple:
        """d out / d input for each input; ``args`` are the inputs, then the output.

        An int too big for a float is read as ``±inf`` (see the module notes).
        """
        try:
            d = self.df(*args)
        except OverflowError:
            d = self.df(*map(real, args))
        return (d,) if self.arity == 1 else tuple(d)


# --------------------------------------------------------------------------- helpers
def _sign(x):
    return (x > 0) - (x < 0)


_FLOAT_MAX = sys.float_info.max


def real(x):
    """``x`` as a float; an int too large for a float becomes ``±inf``."""
    try:
        return float(x)
    except OverflowError:
        return INF if x > 0 else -INF


def _too_big(x):
    """True for an int that no float can hold."""
    return isinstance(x, int) and not -_FLOAT_MAX <= x <= _FLOAT_MAX


def _div(x, y):
    try:
        return x / y
    except ZeroDivisionError:
        return NAN if x == 0 or x != x else math.copysign(INF, x) * math.copysign(1.0, y)


def _floordiv(x, y):
    try:
        return x // y
    except ZeroDivisionError:
        return _div(x, y)


def _mod(x, y):
    try:
        return x % y
    except ZeroDivisionError:
        return NAN


def _pow(x, y):
    try:
        r = x**y
    except ZeroDivisionError:  # 0 ** negative: inf, signed as -0.0 ** an odd power (IEEE)
        return math.copysign(INF, x) if y % 2 == 1 else INF
    except OverflowError:
        if _too_big(x) or _too_big(y):  # not a float overflow: see the module notes
            raise
        return -INF if x < 0 and y % 2 == 1 else INF  # odd powers keep the sign
    if isinstance(r, complex):  # negative base, fractional exponent
        return NAN
    return r


def _pow_df(x, y, out):
    if y == 0:
        dx = 0.0
    else:
        dx = y * _pow(x, y - 1)
    if x > 0:
        dy = out * math.log(x)
    elif x == 0:
        dy = 0.0 if y > 0 else NAN
    else:  # d/dy x**y has no real value for a negative base
        dy = NAN
    return dx, dy


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:  # too big a result, or an int beyond float range
        return INF if x > 0 else 0.0


def _log(x):
    if x > 0:
        return math.log(x)
    return -INF if x == 0 else NAN


def _sqrt(x):
    if x >= 0:
        return math.sqrt(x)
    return NAN


def _guarded(f, errors, fallback):
    """``f``, giving ``fallback(x)`` where it raises one of ``errors``."""

    def g(x):
        try:
            return f(x)
        except errors:
            return fallback(x)

    g.__name__ = f.__name__
    return g


# a domain error is nan (``math.sin(inf)``)
_sin, _cos, _tan = (_guarded(f, ValueError, lambda x: NAN) for f in (math.sin, math.cos, math.tan))


def _to_integer(f):
    """``f`` (floor, ceil, trunc, round) passing nan and ±inf through unchanged.

    ``math.floor(inf)`` raises; here, as in numpy, it is ``inf``.
    """
    return _guarded(f, (OverflowError, ValueError), lambda x: x)


def _sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + _exp(-x))
    e = _exp(x)
    return e / (1.0 + e)


def _np_sigmoid(x):
    # the float forward's formula, so that the replay computes the same numbers
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _np_log(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(x)


def _np_pow(x, y):
    with np.errstate(all="ignore"):
        return np.power(np.asarray(x, dtype=float), y)


def _round_n(x, n):
    """``round(x, n)``; a fractional ``n`` is truncated, a non-finite one gives nan."""
    try:
        n = int(n)
    except (OverflowError, ValueError):  # n is nan or ±inf
        return NAN
    # past this many digits rounding changes nothing (floats) or gives 0 (ints);
    # clamping spares Python computing 10 ** n for a huge n
    limit = 400 + (x.bit_length() if isinstance(x, int) else 0)
    return round(x, max(-limit, min(n, limit)))


def _np_round_n(x, n):
    """:func:`_round_n` on arrays: ``round(x * 10**n) / 10**n`` (10**n in two factors past
    10**300, for the digits of the smallest floats), and as Python rounds where that
    overflows (digits past a float's precision leave ``x`` as it is; 10**n under the
    smallest float leaves a signed 0) or ``n`` is not finite (nan). A tie in decimal
    (``round(2.675, 2)``) may still differ: Python rounds the float's exact value."""
    with np.errstate(all="ignore"):
        n = np.trunc(n)
        part = np.minimum(n, 300.0)
        first, second = np.power(10.0, part), np.power(10.0, n - part)
        scaled = x * first * second
        out = np.round(scaled) / second / first
        finite = np.isfinite(x)
        out = np.where(~np.isfinite(scaled) & finite, x, out)
        out = np.where(first == 0, np.copysign(0.0, x), out)
        out = np.where(finite, out, x)  # inf and nan round to themselves
        return np.where(np.isfinite(n), out, np.nan)


def _np_integer(f):
    """A numpy rounding function as the replay of an op whose Python result is an int: a
    zero comes out +0.0, as ``int`` has no -0 (``1 / trunc(-0.3)`` is inf, not -inf)."""

    def rounded(x):
        return f(x) + 0.0

    rounded.__name__ = f"{f.__name__}_int"
    return rounded


def _zero1(x, out):
    return 0.0


def _zero2(x, y, out):
    return 0.0, 0.0


def _torch_floordiv(torch):
    return lambda x, y: torch.div(x, y, rounding_mode="floor")


def _torch_roundn(torch):
    return lambda x, n: torch.round(x, decimals=int(n.item()))


# --------------------------------------------------------------------------- the table
_TABLE = [
    # binary
    Op(
        "+",
        2,
        operator.add,
        lambda x, y, out: (1.0, 1.0),
        np.add,
        "∂(a+b)/∂a = 1, ∂(a+b)/∂b = 1",
        method="__add__",
        torch="add",
    ),
    Op(
        "-",
        2,
        operator.sub,
        lambda x, y, out: (1.0, -1.0),
        np.subtract,
        "∂(a−b)/∂a = 1, ∂(a−b)/∂b = −1",
        method="__sub__",
        torch="sub",
    ),
    Op(
        "*",
        2,
        operator.mul,
        lambda x, y, out: (y, x),
        np.multiply,
        "∂(a·b)/∂a = b, ∂(a·b)/∂b = a",
        method="__mul__",
        torch="mul",
    ),
    Op(
        "/",
        2,
        _div,
        lambda x, y, out: (_div(1.0, y), _div(-out, y)),
        np.divide,
        "∂(a/b)/∂a = 1/b, ∂(a/b)/∂b = −a/b²",
        method="__truediv__",
        torch="div",
    ),
    Op(
        "**",
        2,
        _pow,
        _pow_df,
        _np_pow,
        "∂(aᵇ)/∂a = b·aᵇ⁻¹, ∂(aᵇ)/∂b = aᵇ·ln a",
        method="__pow__",
        torch="pow",
    ),
    Op(
        "//",
        2,
        _floordiv,
        _zero2,
        np.floor_divide,
        "a // b is piecewise constant: both derivatives are 0",
        method="__floordiv__",
        torch=_torch_floordiv,
    ),
    Op(
        "%",
        2,
        _mod,
        lambda x, y, out: (1.0, -float(_floordiv(x, y))),
        np.mod,
        "∂(a mod b)/∂a = 1, ∂(a mod b)/∂b = −⌊a/b⌋",
        method="__mod__",
        torch="remainder",
    ),
    Op(
        "roundn",
        2,
        _round_n,
        _zero2,
        _np_round_n,
        "round(a, n) is piecewise constant: derivative 0",
        display="round",
        torch=_torch_roundn,
    ),
    # unary
    Op(
        "float",
        1,
        float,
        lambda x, out: 1.0,
        np.positive,
        "∂float(a)/∂a = 1 (a one-element array's number as a Python number)",
        torch="clone",
    ),
    Op(
        "neg",
        1,
        operator.neg,
        lambda x, out: -1.0,
        np.negative,
        "∂(−a)/∂a = −1",
        display="−",
        method="__neg__",
        torch="neg",
    ),
    Op(
        "abs",
        1,
        abs,
        lambda x, out: float(_sign(x)),
        np.abs,
        "∂|a|/∂a = sign(a) (0 at a = 0)",
        kink=lambda x: x == 0,
        method="__abs__",
        torch="abs",
    ),
    Op(
        "exp",
        1,
        _exp,
        lambda x, out: out,
        np.exp,
        "∂eᵃ/∂a = eᵃ",
        method="exp",
        math=("exp",),
        torch="exp",
    ),
    Op(
        "log",
        1,
        _log,
        lambda x, out: _div(1.0, x),
        _np_log,
        "∂ln a/∂a = 1/a",
        method="log",
        torch="log",
    ),
    Op(
        "sqrt",
        1,
        _sqrt,
        lambda x, out: _div(0.5, out),
        np.sqrt,
        "∂√a/∂a = 1/(2√a)",
        method="sqrt",
        math=("sqrt",),
        torch="sqrt",
    ),
    Op(
        "tanh",
        1,
        math.tanh,
        lambda x, out: 1.0 - out * out,
        np.tanh,
        "∂tanh a/∂a = 1 − tanh²a",
        method="tanh",
        math=("tanh",),
        torch="tanh",
    ),
    Op(
        "sigmoid",
        1,
        _sigmoid,
        lambda x, out: out * (1.0 - out),
        _np_sigmoid,
        "∂σ(a)/∂a = σ(a)(1 − σ(a))",
        display="σ",
        method="sigmoid",
        torch="sigmoid",
    ),
    # written so that nan passes through, as in numpy and PyTorch
    Op(
        "relu",
        1,
        lambda x: 0.0 if x <= 0 else x,
        lambda x, out: 0.0 if x <= 0 else 1.0,
        lambda x: np.maximum(x, 0.0),
        "∂relu(a)/∂a = 1 if a > 0 else 0 (0 at a = 0)",
        kink=lambda x: x == 0,
        method="relu",
        torch="relu",
    ),
    Op(
        "sin",
        1,
        _sin,
        lambda x, out: _cos(x),
        np.sin,
        "∂sin a/∂a = cos a",
        method="sin",
        math=("sin",),
        torch="sin",
    ),
    Op(
        "cos",
        1,
        _cos,
        lambda x, out: -_sin(x),
        np.cos,
        "∂cos a/∂a = −sin a",
        method="cos",
        math=("cos",),
        torch="cos",
    ),
    Op(
        "atan",
        1,
        math.atan,
        lambda x, out: 1.0 / (1.0 + x * x),
        np.arctan,
        "∂atan a/∂a = 1/(1 + a²)",
        method="atan",
        math=("atan",),
        numpy=("arctan",),
        torch="atan",
    ),
    Op(
        "tan",
        1,
        _tan,
        lambda x, out: 1.0 + out * out,
        np.tan,
        "∂tan a/∂a = 1 + tan²a",
        method="tan",
        math=("tan",),
        torch="tan",
    ),
    Op(
        "round",
        1,
        _to_integer(round),
        _zero1,
        _np_integer(np.round),
        "round(a) is piecewise constant: derivative 0",
        numpy=("rint",),
        torch="round",
    ),
    Op(
        "floor",
        1,
        _to_integer(math.floor),
        _zero1,
        _np_integer(np.floor),
        "⌊a⌋ is piecewise constant: derivative 0",
        method="__floor__",
        numpy=("floor",),
        torch="floor",
    ),
    Op(
        "ceil",
        1,
        _to_integer(math.ceil),
        _zero1,
        _np_integer(np.ceil),
        "⌈a⌉ is piecewise constant: derivative 0",
        method="__ceil__",
        numpy=("ceil",),
        torch="ceil",
    ),
    Op(
        "trunc",
        1,
        _to_integer(math.trunc),
        _zero1,
        _np_integer(np.trunc),
        "trunc(a) is piecewise constant: derivative 0",
        method="__trunc__",
        numpy=("trunc",),
        torch="trunc",
    ),
]

OPS: dict[str, Op] = {op.name: op for op in _TABLE}
"""Operation name → :class:`Op`."""
