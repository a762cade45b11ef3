"""Elementwise tensor operations: arithmetic, ``where``, and the functions of one or two numbers.

Entries of :data:`~gradmagic.core.tensor_ops.TENSOR_OPS`; the fields are :class:`~gradmagic.core.tensor_op.TensorOp`'s.
"""

from __future__ import annotations

import numpy as np

from .ops import _torch_floordiv
from .tensor_op import TensorOp, _same_grad, _lift, _quiet


def _pairwise(f):
    """Elementwise binary forward ``f`` for batched inputs."""

    def g(x, y):
        x, y = _lift(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        return f(x, y)

    g.__name__ = f"batched_{getattr(f, '__name__', 'f')}"
    return g


# --------------------------------------------------------------------------- elementwise rules
def _pow_dx(g, out, x, y):
    return g * np.where(y == 0, 0.0, y * np.power(x, y - 1.0))


def _pow_dy(g, out, x, y):
    x = np.asarray(x, dtype=np.result_type(x, out))  # (a negative x to a complex power: ln x)
    # d/dy x**y = x**y ln x; at x = 0 it is 0 for y > 0 and undefined otherwise
    return g * np.where(x == 0, np.where(np.real(y) > 0, 0.0, np.nan), out * np.log(x))


def _share(x, y, pick):
    """Where ``pick(x, y)``: 1, ties: ½, else 0 -- the split of a max/min gradient."""
    return np.where(x == y, 0.5, pick(x, y).astype(float))


def _any_zero(out, x):
    return bool(np.any(np.asarray(x) == 0))


def _any_tie(out, x, y):
    return bool(np.any(np.asarray(x) == np.asarray(y)))


def _on_a_jump(out, x, y):
    """True where ``x // y`` and ``x % y`` jump: ``x`` a multiple of ``y``."""
    with np.errstate(all="ignore"):
        return bool(np.any(np.mod(x, y) == 0))


def _zero(g, out, x, y):
    return np.zeros(np.shape(g))


# --------------------------------------------------------------------------- where
def _where_batched(x, y, cond):
    c, x, y = _lift(np.asarray(cond)[None], np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    return np.where(c, x, y)


def _negated_grad(g, out, *args):
    return -g


# --------------------------------------------------------------------------- more numpy: helpers
_LN2, _LN10 = float(np.log(2.0)), float(np.log(10.0))


def _tanh_dx(g, out, x):
    d = out * out  # (1 - out²) made in one array: big temporaries cost more than the sums
    if d.__class__ is np.ndarray and getattr(g, "dtype", None) == d.dtype and g.shape == d.shape:
        return np.multiply(g, np.subtract(1.0, d, out=d), out=d)
    return g * (1.0 - d)


def _unit(name):
    """``torch -> function`` for a torch function of one tensor, called as ``f(x)``."""
    return lambda torch: getattr(torch, name)


def _nan_to_num(x, nan, posinf, neginf):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def _torch_nan_to_num(torch):
    return lambda x, nan, posinf, neginf: torch.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def _unary_entry(name, f, d, rule, torch=None, numpy=None, kink=None, display="", method=""):
    return TensorOp(
        name,
        1,
        _quiet(f),
        (_quiet(d),),
        _quiet(f),
        rule,
        kink=kink,
        display=display,
        method=method,
        numpy=(name,) if numpy is None else numpy,
        torch=torch or _unit(name),
    )


def _binary_entry(name, f, dx, dy, rule, torch=None, kink=None):
    return TensorOp(
        name,
        2,
        _quiet(f),
        (_quiet(dx), _quiet(dy)),
        _quiet(_pairwise(f)),
        rule,
        kink=kink,
        numpy=(name,),
        torch=torch or _unit(name),
    )


def _sinc_dx(g, out, x):
    x = np.asarray(x, dtype=float)
    px = np.pi * x
    safe = np.where(x == 0, 1.0, x)
    return g * np.where(x == 0, 0.0, (np.cos(px) - out) / safe)


def _torch_imag(torch):
    return lambda x: torch.imag(x) if x.is_complex() else torch.zeros_like(x)


OPS = [
    # elementwise binary (numpy broadcasting)
    TensorOp(
        "+",
        2,
        np.add,
        (_same_grad, _same_grad),
        _pairwise(np.add),
        "∂(a+b)/∂a = 1, ∂(a+b)/∂b = 1",
        method="__add__",
        numpy=("add",),
        torch="add",
    ),
    TensorOp(
        "-",
        2,
        np.subtract,
        (_same_grad, _negated_grad),
        _pairwise(np.subtract),
        "∂(a−b)/∂a = 1, ∂(a−b)/∂b = −1",
        method="__sub__",
        numpy=("subtract",),
        torch="sub",
    ),
    TensorOp(
        "*",
        2,
        np.multiply,
        (lambda g, out, x, y: g * y, lambda g, out, x, y: g * x),
        _pairwise(np.multiply),
        "∂(a·b)/∂a = b, ∂(a·b)/∂b = a",
        method="__mul__",
        numpy=("multiply",),
        torch="mul",
    ),
    TensorOp(
        "/",
        2,
        _quiet(np.divide),
        (_quiet(lambda g, out, x, y: g / y), _quiet(lambda g, out, x, y: -g * out / y)),
        _quiet(_pairwise(np.divide)),
        "∂(a/b)/∂a = 1/b, ∂(a/b)/∂b = −a/b²",
        method="__truediv__",
        numpy=("true_divide",),
        torch="div",
    ),
    TensorOp(
        "**",
        2,
        _quiet(np.power),
        (_quiet(_pow_dx), _quiet(_pow_dy)),
        _quiet(_pairwise(np.power)),
        "∂(aᵇ)/∂a = b·aᵇ⁻¹, ∂(aᵇ)/∂b = aᵇ·ln a",
        method="__pow__",
        numpy=("power",),
        torch="pow",
    ),
    TensorOp(
        "//",
        2,
        _quiet(np.floor_divide),
        (_zero, _zero),
        _quiet(_pairwise(np.floor_divide)),
        "∂(a//b)/∂a = 0, ∂(a//b)/∂b = 0 (a step function)",
        kink=_on_a_jump,
        method="__floordiv__",
        numpy=("floor_divide",),
        torch=_torch_floordiv,
    ),
    TensorOp(
        "%",
        2,
        _quiet(np.mod),
        (_same_grad, _quiet(lambda g, out, x, y: -g * np.floor_divide(x, y))),
        _quiet(_pairwise(np.mod)),
        "∂(a mod b)/∂a = 1, ∂(a mod b)/∂b = −⌊a/b⌋",
        kink=_on_a_jump,
        method="__mod__",
        numpy=("remainder",),
        torch="remainder",
    ),
    _binary_entry(
        "maximum",
        np.maximum,
        lambda g, out, x, y: g * _share(x, y, np.greater),
        lambda g, out, x, y: g * _share(y, x, np.greater),
        "∂max(a,b)/∂a = 1 where a > b (½ at ties)",
        kink=_any_tie,
    ),
    _binary_entry(
        "minimum",
        np.minimum,
        lambda g, out, x, y: g * _share(x, y, np.less),
        lambda g, out, x, y: g * _share(y, x, np.less),
        "∂min(a,b)/∂a = 1 where a < b (½ at ties)",
        kink=_any_tie,
    ),
    TensorOp(
        "where",
        2,
        lambda x, y, cond: np.where(cond, x, y),
        (
            lambda g, out, x, y, cond: np.where(cond, g, 0.0),
            lambda g, out, x, y, cond: np.where(cond, 0.0, g),
        ),
        _where_batched,
        "∂where(c,a,b)/∂a = c, ∂where(c,a,b)/∂b = 1 − c",
        torch=lambda torch: lambda x, y, cond: torch.where(torch.as_tensor(np.asarray(cond)), x, y),
    ),
    # elementwise unary
    _unary_entry(
        "neg",
        np.negative,
        _negated_grad,
        "∂(−a)/∂a = −1",
        numpy=("negative",),
        display="−",
        method="__neg__",
    ),
    _unary_entry("exp", np.exp, lambda g, out, x: g * out, "∂eᵃ/∂a = eᵃ", method="exp"),
    _unary_entry("log", np.log, lambda g, out, x: g / x, "∂ln a/∂a = 1/a", method="log"),
    _unary_entry(
        "sqrt", np.sqrt, lambda g, out, x: g * 0.5 / out, "∂√a/∂a = 1/(2√a)", method="sqrt"
    ),
    _unary_entry(
        "tanh",
        np.tanh,
        _tanh_dx,
        "∂tanh a/∂a = 1 − tanh²a",
        method="tanh",
    ),
    _unary_entry("sin", np.sin, lambda g, out, x: g * np.cos(x), "∂sin a/∂a = cos a", method="sin"),
    _unary_entry(
        "cos", np.cos, lambda g, out, x: -g * np.sin(x), "∂cos a/∂a = −sin a", method="cos"
    ),
    _unary_entry(
        "atan",
        np.arctan,
        lambda g, out, x: g / (1.0 + x * x),
        "∂atan a/∂a = 1/(1 + a²)",
        numpy=("arctan",),
        method="atan",
    ),
    _unary_entry(
        "sigmoid",
        lambda x: 0.5 * (np.tanh(0.5 * x) + 1.0),
        lambda g, out, x: g * out * (1.0 - out),
        "∂σ(a)/∂a = σ(a)(1 − σ(a))",
        numpy=(),
        display="σ",
        method="sigmoid",
    ),
    _unary_entry(
        "relu",
        lambda x: np.maximum(x, 0.0),
        lambda g, out, x: g * (x > 0),
        "∂relu(a)/∂a = 1 if a > 0 else 0 (0 at a = 0)",
        numpy=(),
        kink=_any_zero,
        method="relu",
    ),
    _unary_entry(
        "abs",
        np.abs,
        lambda g, out, x: g * np.conj(np.sign(x)),
        "∂|a|/∂a = sign(a) (0 at a = 0; of a complex a: conj(a) / abs(a))",
        numpy=("absolute", "fabs"),
        kink=_any_zero,
        method="__abs__ abs",
    ),
    # complex numbers: gradients are d/d(real part) − i d/d(imaginary part)
    _unary_entry(
        "conj", np.conjugate, lambda g, out, x: np.conj(g), "∂conj(a): the gradient's conjugate"
    ),
    _unary_entry("real", np.real, lambda g, out, x: g, "∂Re(a)/∂a = 1", numpy=()),
    _unary_entry(
        "imag", np.imag, lambda g, out, x: -1j * g, "∂Im(a)/∂a = −i", _torch_imag, numpy=()
    ),
    _unary_entry("angle", np.angle, lambda g, out, x: -1j * g / x, "∂arg(a)/∂a = −i/a", numpy=()),
    # elementwise, one input
    _unary_entry("tan", np.tan, lambda g, out, x: g * (1.0 + out * out), "∂tan a/∂a = 1 + tan²a"),
    _unary_entry(
        "arcsin",
        np.arcsin,
        lambda g, out, x: g / np.sqrt(1.0 - x * x),
        "∂asin a/∂a = 1/√(1 − a²)",
        torch=_unit("asin"),
    ),
    _unary_entry(
        "arccos",
        np.arccos,
        lambda g, out, x: -g / np.sqrt(1.0 - x * x),
        "∂acos a/∂a = −1/√(1 − a²)",
        torch=_unit("acos"),
    ),
    _unary_entry("sinh", np.sinh, lambda g, out, x: g * np.cosh(x), "∂sinh a/∂a = cosh a"),
    _unary_entry("cosh", np.cosh, lambda g, out, x: g * np.sinh(x), "∂cosh a/∂a = sinh a"),
    _unary_entry(
        "arcsinh",
        np.arcsinh,
        lambda g, out, x: g / np.sqrt(x * x + 1.0),
        "∂asinh a/∂a = 1/√(a² + 1)",
        torch=_unit("asinh"),
    ),
    _unary_entry(
        "arccosh",
        np.arccosh,
        lambda g, out, x: g / np.sqrt(x * x - 1.0),
        "∂acosh a/∂a = 1/√(a² − 1)",
        torch=_unit("acosh"),
    ),
    _unary_entry(
        "arctanh",
        np.arctanh,
        lambda g, out, x: g / (1.0 - x * x),
        "∂atanh a/∂a = 1/(1 − a²)",
        torch=_unit("atanh"),
    ),
    _unary_entry("log2", np.log2, lambda g, out, x: g / (x * _LN2), "∂log₂ a/∂a = 1/(a ln 2)"),
    _unary_entry("log10", np.log10, lambda g, out, x: g / (x * _LN10), "∂log₁₀ a/∂a = 1/(a ln 10)"),
    _unary_entry("log1p", np.log1p, lambda g, out, x: g / (1.0 + x), "∂ln(1 + a)/∂a = 1/(1 + a)"),
    _unary_entry("expm1", np.expm1, lambda g, out, x: g * (out + 1.0), "∂(eᵃ − 1)/∂a = eᵃ"),
    _unary_entry("exp2", np.exp2, lambda g, out, x: g * out * _LN2, "∂2ᵃ/∂a = 2ᵃ ln 2"),
    _unary_entry("square", np.square, lambda g, out, x: g * 2.0 * x, "∂a²/∂a = 2a"),
    _unary_entry(
        "reciprocal", np.reciprocal, lambda g, out, x: -g * out * out, "∂(1/a)/∂a = −1/a²"
    ),
    _unary_entry(
        "cbrt",
        np.cbrt,
        lambda g, out, x: g / (3.0 * out * out),
        "∂∛a/∂a = 1/(3∛a²) (infinite at 0)",
        torch=lambda torch: lambda x: torch.sign(x) * torch.abs(x) ** (1.0 / 3.0),
        kink=_any_zero,
    ),
    _unary_entry("sinc", np.sinc, _sinc_dx, "∂sinc a/∂a = (cos πa − sinc a)/a (0 at a = 0)"),
    _unary_entry(
        "deg2rad",
        np.deg2rad,
        lambda g, out, x: g * (np.pi / 180.0),
        "∂(a·π/180)/∂a = π/180",
        numpy=("deg2rad", "radians"),
    ),
    _unary_entry(
        "rad2deg",
        np.rad2deg,
        lambda g, out, x: g * (180.0 / np.pi),
        "∂(a·180/π)/∂a = 180/π",
        numpy=("rad2deg", "degrees"),
    ),
    TensorOp(
        "nan_to_num",
        1,
        _nan_to_num,
        (lambda g, out, x, nan, posinf, neginf: g * np.isfinite(x),),
        _nan_to_num,
        "∂/∂a = 1 where a is finite, 0 where it was replaced",
        torch=_torch_nan_to_num,
    ),
    # elementwise, two inputs (numpy broadcasting)
    _binary_entry(
        "arctan2",
        np.arctan2,
        lambda g, out, y, x: g * x / (x * x + y * y),
        lambda g, out, y, x: -g * y / (x * x + y * y),
        "∂atan2(a,b)/∂a = b/(a² + b²), ∂/∂b = −a/(a² + b²)",
        torch=_unit("atan2"),
    ),
    _binary_entry(
        "hypot",
        np.hypot,
        lambda g, out, x, y: g * x / out,
        lambda g, out, x, y: g * y / out,
        "∂√(a² + b²)/∂a = a/√(a² + b²), ∂/∂b = b/√(a² + b²)",
    ),
    _binary_entry(
        "logaddexp",
        np.logaddexp,
        lambda g, out, x, y: g * np.exp(x - out),
        lambda g, out, x, y: g * np.exp(y - out),
        "∂ln(eᵃ + eᵇ)/∂a = eᵃ/(eᵃ + eᵇ), ∂/∂b = eᵇ/(eᵃ + eᵇ)",
    ),
    _binary_entry(
        "logaddexp2",
        np.logaddexp2,
        lambda g, out, x, y: g * np.exp2(x - out),
        lambda g, out, x, y: g * np.exp2(y - out),
        "∂log₂(2ᵃ + 2ᵇ)/∂a = 2ᵃ/(2ᵃ + 2ᵇ), ∂/∂b = 2ᵇ/(2ᵃ + 2ᵇ)",
    ),
    _binary_entry(
        "fmax",
        np.fmax,
        lambda g, out, x, y: g * _share(x, y, np.greater),
        lambda g, out, x, y: g * _share(y, x, np.greater),
        "∂fmax(a,b)/∂a = 1 where a > b (½ at ties; nan loses)",
        kink=_any_tie,
    ),
    _binary_entry(
        "fmin",
        np.fmin,
        lambda g, out, x, y: g * _share(x, y, np.less),
        lambda g, out, x, y: g * _share(y, x, np.less),
        "∂fmin(a,b)/∂a = 1 where a < b (½ at ties; nan loses)",
        kink=_any_tie,
    ),
    _binary_entry(
        "copysign",
        np.copysign,
        lambda g, out, x, y: g * np.where(np.signbit(x) == np.signbit(y), 1.0, -1.0),
        _zero,
        "∂copysign(a,b)/∂a = ±1 (+1 where the signs agree), ∂/∂b = 0",
        kink=lambda out, x, y: _any_zero(out, x),
    ),
]
