"""The table of tensor operations: the sibling of :mod:`gradmagic.core.ops` for arrays.

Every operation a :class:`gradmagic.core.tensor.Tensor` knows is one
:class:`TensorOp` entry in :data:`TENSOR_OPS`:

* ``f``    -- the numpy forward: ``f(x[, y], **params)``; ``params`` are the
  op's non-differentiable arguments (an axis, a shape, an index);
* ``df``   -- one vector-Jacobian rule per input: ``d(g, out, x[, y], **params)``
  is the gradient reaching that input when ``g`` reaches the output. It may
  keep broadcast dimensions (:meth:`TensorOp.vjp` sums them away) and may be
  ``g`` itself or a view of it, but never ``x``, ``y`` or ``out``;
* ``np``   -- the same forward on inputs that carry one extra leading
  "perturbation" axis (shape ``(K, *shape)``; a scalar parent ``(K,)``), used to
  replay a recorded graph for many perturbed inputs at once;
* ``kink`` -- optional ``kink(out, x[, y], **params)``: True where the op is not
  differentiable and ``df`` used a subgradient (relu at 0, ties in a max);
* ``rule`` -- the derivative as a formula, for people.

Adding a tensor operation means adding one entry here; its ``method`` and
``numpy`` names make ``Tensor``'s method and numpy dispatch. Forwards do not
warn for numeric reasons: log of a negative number is ``nan``, division by zero
``±inf``, as for scalars.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .engine import SCALAR_NODES
from .ops import OpBase, _torch_floordiv

__all__ = ["TensorOp", "TENSOR_OPS"]

_NO_PARAMS: dict = {}


@dataclass(frozen=True)
class TensorOp(OpBase):
    """A tensor operation: ``df`` is one vector-Jacobian rule per input.

    The other fields (``method``, ``numpy``, ``torch``, ...) are
    :class:`gradmagic.core.ops.OpBase`'s. For a tensor op ``torch`` gets the
    op's params as keyword arguments, as ``f`` does.
    """

    def vjp(self, node) -> None:
        """Add ``node``'s gradient, pulled back through this op, into its parents.

        Called by :func:`gradmagic.core.engine.backward`. A parent that does not
        need a gradient (a constant tensor) is skipped; a scalar ``Value``
        parent receives the sum of its share as a float.
        """
        params = node._params or _NO_PARAMS
        a, b = node._a, node._b
        args = (a.data,) if b is None else (a.data, b.data)
        for parent, rule in zip((a, b), self.df):
            if parent.__class__ in SCALAR_NODES:
                parent.grad += float(np.sum(rule(node.grad, node.data, *args, **params)))
            elif parent.requires_grad:
                g = rule(node.grad, node.data, *args, **params)
                parent._add_grad(_unbroadcast(g, parent.data.shape), node.grad)


def _unbroadcast(g, shape: tuple):
    """``g`` summed over the dimensions broadcasting added to an input of ``shape``."""
    g = np.asarray(g)
    extra = g.ndim - len(shape)
    if extra > 0:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g


def _quiet(f):
    """``f`` with numpy's floating-point warnings silenced (results are nan/inf)."""

    def g(*args, **kwargs):
        with np.errstate(all="ignore"):
            return f(*args, **kwargs)

    g.__name__ = getattr(f, "__name__", "f")
    return g


# --------------------------------------------------------------------------- batched helpers
def _lift(*xs):
    """Batched inputs padded after the leading axis to one rank, for broadcasting."""
    n = max(x.ndim for x in xs)
    return [
        x if x.ndim == n else x.reshape(x.shape[:1] + (1,) * (n - x.ndim) + x.shape[1:]) for x in xs
    ]


def _pairwise(f):
    """Elementwise binary forward ``f`` for batched inputs."""

    def g(x, y):
        x, y = _lift(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
        return f(x, y)

    g.__name__ = f"batched_{getattr(f, '__name__', 'f')}"
    return g


def _shift(axis, ndim: int):
    """``axis`` (None or a tuple of non-negative ints) for a batched input of rank ``ndim``."""
    if axis is None:
        return tuple(range(1, ndim))
    return tuple(a + 1 for a in axis)


def _expand(g, axis, keepdims: bool):
    """A reduction's output gradient with the reduced axes put back (size 1)."""
    if keepdims or axis is None:
        return g
    return np.expand_dims(g, axis)


# --------------------------------------------------------------------------- elementwise rules
def _pow_dx(g, out, x, y):
    return g * np.where(y == 0, 0.0, y * np.power(x, y - 1.0))


def _pow_dy(g, out, x, y):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    # d/dy x**y = x**y ln x; at x = 0 it is 0 for y > 0 and undefined otherwise
    return g * np.where(x == 0, np.where(y > 0, 0.0, np.nan), out * np.log(x))


def _share(x, y, pick):
    """Where ``pick(x, y)``: 1, ties: ½, else 0 -- the split of a max/min gradient."""
    return np.where(x == y, 0.5, pick(x, y).astype(float))


def _sigmoid(x):
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def _relu(x):
    return np.maximum(x, 0.0)


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


def _mod_dy(g, out, x, y):
    return -g * np.floor_divide(x, y)


# --------------------------------------------------------------------------- matmul
def _mm_grads(g, x, y):
    """Matrix-shaped views of ``g``, ``x``, ``y`` (1-D operands made 2-D, as matmul does)."""
    if y.ndim == 1:
        y = y[:, None]
        g = g[..., None]
    if x.ndim == 1:
        x = x[None, :]
        g = g[..., None, :]
    return g, x, y


def _mm_dx(g, out, x, y):
    vec = x.ndim == 1
    g, x, y = _mm_grads(np.asarray(g), x, y)
    gx = g @ np.swapaxes(y, -1, -2)
    return gx[..., 0, :] if vec else gx


def _mm_dy(g, out, x, y):
    vec = y.ndim == 1
    g, x, y = _mm_grads(np.asarray(g), x, y)
    gy = np.swapaxes(x, -1, -2) @ g
    return gy[..., 0] if vec else gy


def _mm_batched(x, y):
    xv, yv = x.ndim == 2, y.ndim == 2  # a vector plus the leading axis
    if xv:
        x = x[:, None, :]
    if yv:
        y = y[..., None]
    x, y = _lift(x, y)
    out = np.matmul(x, y)
    if yv:
        out = out[..., 0]
    if xv:
        out = out[..., 0, :] if not yv else out[..., 0]
    return out


# --------------------------------------------------------------------------- reductions
def _sum(x, axis, keepdims):
    return np.sum(x, axis=axis, keepdims=keepdims)


def _sum_dx(g, out, x, axis, keepdims):
    return np.broadcast_to(_expand(g, axis, keepdims), np.shape(x))


def _sum_batched(x, axis, keepdims):
    return np.sum(x, axis=_shift(axis, x.ndim), keepdims=keepdims)


def _mean(x, axis, keepdims):
    return np.mean(x, axis=axis, keepdims=keepdims)


def _mean_dx(g, out, x, axis, keepdims):
    count = max(np.size(x), 1) / max(np.size(out), 1)  # elements per mean
    return np.broadcast_to(_expand(g, axis, keepdims) / count, np.shape(x))


def _mean_batched(x, axis, keepdims):
    return np.mean(x, axis=_shift(axis, x.ndim), keepdims=keepdims)


def _extreme(reduce):
    """Forward, rule, batched forward and kink test of a max or min reduction."""

    def f(x, axis, keepdims):
        return reduce(x, axis=axis, keepdims=keepdims)

    def winners(out, x, axis, keepdims):
        return x == _expand(out, axis, keepdims)

    def dx(g, out, x, axis, keepdims):
        hit = winners(out, x, axis, keepdims)
        return hit * (_expand(g, axis, keepdims) / hit.sum(axis=axis, keepdims=True))

    def batched(x, axis, keepdims):
        return reduce(x, axis=_shift(axis, x.ndim), keepdims=keepdims)

    def kink(out, x, axis, keepdims):
        return bool(np.any(winners(out, x, axis, keepdims).sum(axis=axis) > 1))

    return f, dx, batched, kink


_max_f, _max_dx, _max_batched, _max_kink = _extreme(np.max)
_min_f, _min_dx, _min_batched, _min_kink = _extreme(np.min)


# --------------------------------------------------------------------------- shape ops
def _reshape_batched(x, shape):
    return x.reshape(x.shape[:1] + tuple(shape))


def _transpose_dx(g, out, x, axes):
    return np.transpose(g, None if axes is None else np.argsort(axes))


def _transpose_batched(x, axes):
    n = x.ndim - 1
    rest = range(n, 0, -1) if axes is None else (a + 1 for a in axes)
    return np.transpose(x, (0, *rest))


def _getitem(x, index, basic):
    return x[index]


def _getitem_dx(g, out, x, index, basic):
    gx = np.zeros(np.shape(x))
    if basic:  # ints, slices, masks: every element is picked at most once
        gx[index] = g
    else:  # integer arrays may pick an element twice
        np.add.at(gx, index, g)
    return gx


def _getitem_batched(x, index, basic):
    # where each output element comes from, as flat positions in one copy
    where = np.arange(x[0].size).reshape(x.shape[1:])[index]
    return x.reshape(x.shape[0], -1)[:, where]


def _setitem(x, y, index, basic):
    out = np.array(x, dtype=float)
    out[index] = y
    return out


def _setitem_dx(g, out, x, y, index, basic):
    gx = np.array(g, dtype=float)
    gx[index] = 0.0  # the overwritten elements no longer depend on x
    return gx


def _setitem_dy(g, out, x, y, index, basic):
    return np.asarray(g)[index]  # summed down to y's shape by the caller


def _setitem_batched(x, y, index, basic):
    out = np.array(x, dtype=float)
    y = np.asarray(y, dtype=float)
    part = out[(slice(None),) + index]
    if y.ndim:  # the perturbation axis first, then y's own axes aligned to the right
        y = y.reshape(y.shape[:1] + (1,) * (part.ndim - y.ndim) + y.shape[1:])
    out[(slice(None),) + index] = y
    return out


def _cumsum_dx(g, out, x, axis):
    return np.flip(np.cumsum(np.flip(g, axis), axis), axis)


def _cumsum_batched(x, axis):
    return np.cumsum(x, axis + 1)


# --------------------------------------------------------------------------- softmax
def _softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _softmax_dx(g, out, x, axis):
    return out * (g - np.sum(g * out, axis=axis, keepdims=True))


def _log_softmax(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _log_softmax_dx(g, out, x, axis):
    return g - np.exp(out) * np.sum(g, axis=axis, keepdims=True)


def _along(f):
    """A softmax-like forward for a batched input (the axis moves by one)."""

    def g(x, axis):
        return f(x, axis + 1)

    return g


# --------------------------------------------------------------------------- where
def _where(x, y, cond):
    return np.where(cond, x, y)


def _where_batched(x, y, cond):
    c, x, y = _lift(np.asarray(cond)[None], np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    return np.where(c, x, y)


# --------------------------------------------------------------------------- PyTorch
# each gets the torch module and returns the op's forward on torch tensors (params as kwargs)
def _torch_reduction(name):
    def make(torch):
        f = getattr(torch, name)

        def reduce(x, axis, keepdims):
            dims = tuple(range(x.ndim)) if axis is None else tuple(axis)
            return f(x, dim=dims, keepdim=keepdims) if dims else x

        return reduce

    return make


def _torch_along(name):
    return lambda torch: lambda x, axis: getattr(torch, name)(x, dim=axis)


def _torch_cumsum(torch):
    return lambda x, axis: (
        torch.cumsum(x.reshape(-1), dim=0) if axis is None else torch.cumsum(x, dim=axis)
    )


def _torch_where(torch):
    return lambda x, y, cond: torch.where(torch.as_tensor(np.asarray(cond)), x, y)


def _torch_reshape(torch):
    return lambda x, shape: x.reshape(tuple(shape))


def _torch_transpose(torch):
    return lambda x, axes: x.permute(
        tuple(reversed(range(x.ndim))) if axes is None else tuple(axes)
    )


def _torch_getitem(torch):
    def convert(i):
        """A numpy index (ints, slices, arrays, masks, tuples of them) for a torch tensor."""
        if isinstance(i, tuple):
            return tuple(convert(j) for j in i)
        if isinstance(i, (np.ndarray, list)):
            return torch.as_tensor(np.asarray(i))
        if isinstance(i, np.integer):
            return int(i)
        return i

    return lambda x, index, basic: x[convert(index)]


def _torch_setitem(torch):
    def setitem(x, y, index, basic):
        out = x.clone()
        out[_torch_index(torch, index)] = y
        return out

    return setitem


def _torch_index(torch, i):
    if isinstance(i, tuple):
        return tuple(_torch_index(torch, j) for j in i)
    if isinstance(i, (np.ndarray, list)):
        return torch.as_tensor(np.asarray(i))
    if isinstance(i, np.integer):
        return int(i)
    return i


# --------------------------------------------------------------------------- the table
def _g(g, out, *args):
    return g


def _neg_g(g, out, *args):
    return -g


_TABLE = [
    # elementwise binary (numpy broadcasting)
    TensorOp(
        "+",
        2,
        np.add,
        (_g, _g),
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
        (_g, _neg_g),
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
        (_g, _quiet(_mod_dy)),
        _quiet(_pairwise(np.mod)),
        "∂(a mod b)/∂a = 1, ∂(a mod b)/∂b = −⌊a/b⌋",
        kink=_on_a_jump,
        method="__mod__",
        numpy=("remainder",),
        torch="remainder",
    ),
    TensorOp(
        "maximum",
        2,
        np.maximum,
        (
            lambda g, out, x, y: g * _share(x, y, np.greater),
            lambda g, out, x, y: g * _share(y, x, np.greater),
        ),
        _pairwise(np.maximum),
        "∂max(a,b)/∂a = 1 where a > b (½ at ties)",
        kink=_any_tie,
        numpy=("maximum",),
        torch="maximum",
    ),
    TensorOp(
        "minimum",
        2,
        np.minimum,
        (
            lambda g, out, x, y: g * _share(x, y, np.less),
            lambda g, out, x, y: g * _share(y, x, np.less),
        ),
        _pairwise(np.minimum),
        "∂min(a,b)/∂a = 1 where a < b (½ at ties)",
        kink=_any_tie,
        numpy=("minimum",),
        torch="minimum",
    ),
    TensorOp(
        "where",
        2,
        _where,
        (
            lambda g, out, x, y, cond: np.where(cond, g, 0.0),
            lambda g, out, x, y, cond: np.where(cond, 0.0, g),
        ),
        _where_batched,
        "∂where(c,a,b)/∂a = c, ∂where(c,a,b)/∂b = 1 − c",
        torch=_torch_where,
    ),
    TensorOp(
        "@",
        2,
        np.matmul,
        (_mm_dx, _mm_dy),
        _mm_batched,
        "∂L/∂A = G·Bᵀ, ∂L/∂B = Aᵀ·G for C = A·B",
        method="__matmul__",
        numpy=("matmul",),
        torch="matmul",
    ),
    # elementwise unary
    TensorOp(
        "neg",
        1,
        np.negative,
        (_neg_g,),
        np.negative,
        "∂(−a)/∂a = −1",
        display="−",
        method="__neg__",
        numpy=("negative",),
        torch="neg",
    ),
    TensorOp(
        "exp",
        1,
        _quiet(np.exp),
        (lambda g, out, x: g * out,),
        _quiet(np.exp),
        "∂eᵃ/∂a = eᵃ",
        method="exp",
        numpy=("exp",),
        torch="exp",
    ),
    TensorOp(
        "log",
        1,
        _quiet(np.log),
        (_quiet(lambda g, out, x: g / x),),
        _quiet(np.log),
        "∂ln a/∂a = 1/a",
        method="log",
        numpy=("log",),
        torch="log",
    ),
    TensorOp(
        "sqrt",
        1,
        _quiet(np.sqrt),
        (_quiet(lambda g, out, x: g * 0.5 / out),),
        _quiet(np.sqrt),
        "∂√a/∂a = 1/(2√a)",
        method="sqrt",
        numpy=("sqrt",),
        torch="sqrt",
    ),
    TensorOp(
        "tanh",
        1,
        np.tanh,
        (lambda g, out, x: g * (1.0 - out * out),),
        np.tanh,
        "∂tanh a/∂a = 1 − tanh²a",
        method="tanh",
        numpy=("tanh",),
        torch="tanh",
    ),
    TensorOp(
        "sin",
        1,
        _quiet(np.sin),
        (lambda g, out, x: g * np.cos(x),),
        _quiet(np.sin),
        "∂sin a/∂a = cos a",
        method="sin",
        numpy=("sin",),
        torch="sin",
    ),
    TensorOp(
        "cos",
        1,
        _quiet(np.cos),
        (lambda g, out, x: -g * np.sin(x),),
        _quiet(np.cos),
        "∂cos a/∂a = −sin a",
        method="cos",
        numpy=("cos",),
        torch="cos",
    ),
    TensorOp(
        "atan",
        1,
        np.arctan,
        (lambda g, out, x: g / (1.0 + x * x),),
        np.arctan,
        "∂atan a/∂a = 1/(1 + a²)",
        method="atan",
        numpy=("arctan",),
        torch="atan",
    ),
    TensorOp(
        "sigmoid",
        1,
        _sigmoid,
        (lambda g, out, x: g * out * (1.0 - out),),
        _sigmoid,
        "∂σ(a)/∂a = σ(a)(1 − σ(a))",
        display="σ",
        method="sigmoid",
        torch="sigmoid",
    ),
    TensorOp(
        "relu",
        1,
        _relu,
        (lambda g, out, x: g * (x > 0),),
        _relu,
        "∂relu(a)/∂a = 1 if a > 0 else 0 (0 at a = 0)",
        kink=_any_zero,
        method="relu",
        torch="relu",
    ),
    TensorOp(
        "abs",
        1,
        np.abs,
        (lambda g, out, x: g * np.sign(x),),
        np.abs,
        "∂|a|/∂a = sign(a) (0 at a = 0)",
        kink=_any_zero,
        method="__abs__ abs",
        numpy=("absolute", "fabs"),
        torch="abs",
    ),
    # reductions over axes (axis: None or a tuple of non-negative ints)
    TensorOp(
        "sum", 1, _sum, (_sum_dx,), _sum_batched, "∂(Σa)/∂aᵢ = 1", torch=_torch_reduction("sum")
    ),
    TensorOp(
        "mean",
        1,
        _mean,
        (_mean_dx,),
        _mean_batched,
        "∂mean(a)/∂aᵢ = 1/n",
        torch=_torch_reduction("mean"),
    ),
    TensorOp(
        "max",
        1,
        _max_f,
        (_max_dx,),
        _max_batched,
        "∂max(a)/∂aᵢ = 1 at the maximum (shared equally between ties)",
        kink=_max_kink,
        torch=_torch_reduction("amax"),
    ),
    TensorOp(
        "min",
        1,
        _min_f,
        (_min_dx,),
        _min_batched,
        "∂min(a)/∂aᵢ = 1 at the minimum (shared equally between ties)",
        kink=_min_kink,
        torch=_torch_reduction("amin"),
    ),
    TensorOp(
        "cumsum",
        1,
        lambda x, axis: np.cumsum(x, axis),
        (_cumsum_dx,),
        _cumsum_batched,
        "∂(Σ_{j≤i} a_j)/∂a_k = 1 for k ≤ i: the gradient summed from the end",
        torch=_torch_cumsum,
    ),
    TensorOp(
        "softmax",
        1,
        _quiet(_softmax),
        (_softmax_dx,),
        _quiet(_along(_softmax)),
        "∂L/∂a = s ⊙ (g − Σ g⊙s) for s = softmax(a)",
        torch=_torch_along("softmax"),
    ),
    TensorOp(
        "log_softmax",
        1,
        _quiet(_log_softmax),
        (_quiet(_log_softmax_dx),),
        _quiet(_along(_log_softmax)),
        "∂L/∂a = g − softmax(a)·Σg",
        torch=_torch_along("log_softmax"),
    ),
    # moving elements around
    TensorOp("copy", 1, np.copy, (_g,), np.copy, "∂copy(a)/∂a = 1", torch="clone"),
    TensorOp(
        "reshape",
        1,
        lambda x, shape: np.reshape(x, shape),
        (lambda g, out, x, shape: np.reshape(g, np.shape(x)),),
        _reshape_batched,
        "the gradient is reshaped back",
        torch=_torch_reshape,
    ),
    TensorOp(
        "transpose",
        1,
        lambda x, axes: np.transpose(x, axes),
        (_transpose_dx,),
        _transpose_batched,
        "the gradient is transposed back",
        display="ᵀ",
        torch=_torch_transpose,
    ),
    TensorOp(
        "setitem",
        2,
        _setitem,
        (_setitem_dx, _setitem_dy),
        _setitem_batched,
        "∂(a[i] = b)/∂a = 1 outside i, 0 at i; ∂/∂b = 1 at i (summed where b is broadcast)",
        display="[]=",
        torch=_torch_setitem,
    ),
    TensorOp(
        "getitem",
        1,
        _getitem,
        (_getitem_dx,),
        _getitem_batched,
        "the gradient goes back to the picked elements (summed where picked twice)",
        display="[]",
        torch=_torch_getitem,
    ),
]


# --------------------------------------------------------------------------- more numpy: helpers
_LN2, _LN10 = float(np.log(2.0)), float(np.log(10.0))


def _unit(name):
    """``torch -> function`` for a torch function of one tensor, called as ``f(x)``."""
    return lambda torch: getattr(torch, name)


def _positions(fn, x, params):
    """Where each element of ``fn(x, **params)`` comes from: 1 + its flat position in ``x``
    (0 where the function writes a zero, as tril or pad do)."""
    shape = np.shape(x)
    pos = np.arange(1, int(np.prod(shape)) + 1, dtype=np.intp).reshape(shape)
    return np.asarray(fn(pos, **params))


def _moving(fn):
    """Rule and batched forward of a function that only moves elements (or writes zeros)."""

    def dx(g, out, x, **params):
        pos = _positions(fn, x, params)
        g = np.broadcast_to(g, pos.shape)
        back = np.bincount(pos.reshape(-1), weights=g.reshape(-1), minlength=np.size(x) + 1)
        return back[1:].reshape(np.shape(x))

    def batched(x, **params):
        pos = _positions(fn, x[0], params)
        flat = x.reshape(x.shape[0], -1)
        padded = np.concatenate((np.zeros((x.shape[0], 1)), flat), axis=1)
        return padded[:, pos]

    def forward(x, **params):
        return fn(x, **params)

    return forward, dx, batched


def _torch_moving(fn):
    """The element moves of ``fn`` as a torch gather (for functions torch spells otherwise)."""

    def make(torch):
        def gather(x, **params):
            pos = torch.as_tensor(_positions(fn, np.empty(tuple(x.shape)), params))
            padded = torch.cat((torch.zeros(1, dtype=x.dtype), x.reshape(-1)))
            return padded[pos]

        return gather

    return make


def _pad(x, pad_width, mode):
    return np.pad(x, pad_width, mode=mode)


def _sorted(x, axis, order):
    return np.take_along_axis(x, order, axis=axis)


def _sort_dx(g, out, x, axis, order):
    gx = np.zeros(np.shape(x))
    np.put_along_axis(gx, order, g, axis=axis)
    return gx


def _sort_batched(x, axis, order):
    return np.take_along_axis(x, np.broadcast_to(order[None], x.shape), axis=axis + 1)


def _sort_kink(out, x, axis, order):
    return bool(np.any(np.diff(out, axis=axis) == 0))


def _torch_sorted(torch):
    return lambda x, axis, order: torch.take_along_dim(x, torch.as_tensor(order), dim=axis)


# --------------------------------------------------------------------------- concatenation
def _concat(x, y, axis):
    return np.concatenate((x, y), axis=axis)


def _concat_dx(g, out, x, y, axis):
    return np.take(g, np.arange(np.shape(x)[axis]), axis=axis)


def _concat_dy(g, out, x, y, axis):
    n = np.shape(x)[axis]
    return np.take(g, np.arange(n, n + np.shape(y)[axis]), axis=axis)


def _concat_batched(x, y, axis):
    return np.concatenate((x, y), axis=axis + 1)


def _pack(x, y):
    return np.concatenate((np.ravel(x), np.ravel(y)))


def _pack_dx(g, out, x, y):
    return np.reshape(g[: np.size(x)], np.shape(x))


def _pack_dy(g, out, x, y):
    return np.reshape(g[np.size(x) :], np.shape(y))


def _pack_batched(x, y):
    k = max(x.shape[0], y.shape[0])
    x = np.broadcast_to(x, (k,) + x.shape[1:]).reshape(k, -1)
    y = np.broadcast_to(y, (k,) + y.shape[1:]).reshape(k, -1)
    return np.concatenate((x, y), axis=1)


# --------------------------------------------------------------------------- products: einsum
def _spec(spec):
    inputs, out = spec.split("->")
    return inputs.split(","), out


def _einsum_grad(spec, which, g, others):
    """The gradient reaching operand ``which`` of ``einsum(spec)``: ``g`` contracted with the
    other operands, put back on the operand's diagonals (a repeated letter) and spread
    along the letters only it sums over."""
    subs, out = _spec(spec)
    mine = subs[which]
    rest = [s for i, s in enumerate(subs) if i != which]
    present = set(out).union(*rest) if rest else set(out)
    letters = list(dict.fromkeys(mine))
    kept = "".join(c for c in letters if c in present)
    gk = np.einsum(",".join([out] + rest) + "->" + kept, g, *others)
    return gk, letters, kept


def _einsum_embed(gk, letters, kept, mine, shape):
    size = dict(zip(mine, shape))
    # spread along the letters only this operand sums over (size 1 in gk, then broadcast)
    full = np.broadcast_to(
        gk.reshape([size[c] if c in kept else 1 for c in letters]), [size[c] for c in letters]
    )
    if len(letters) == len(mine):
        return full
    # a repeated letter: the gradient sits on the diagonal
    gx = np.zeros(shape)
    grid = np.indices(full.shape, sparse=True)
    gx[tuple(grid[letters.index(c)] for c in mine)] = full
    return gx


def _einsum2_rule(which):
    def d(g, out, x, y, spec):
        other = y if which == 0 else x
        gk, letters, kept = _einsum_grad(spec, which, g, [other])
        mine = _spec(spec)[0][which]
        return _einsum_embed(gk, letters, kept, mine, np.shape(x if which == 0 else y))

    return d


def _einsum1_dx(g, out, x, spec):
    gk, letters, kept = _einsum_grad(spec, 0, g, [])
    return _einsum_embed(gk, letters, kept, _spec(spec)[0][0], np.shape(x))


def _batch_spec(spec):
    free = next(c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in spec)
    subs, out = _spec(spec)
    return ",".join(free + s for s in subs) + "->" + free + out


def _einsum2_batched(x, y, spec):
    return np.einsum(_batch_spec(spec), x, y)


def _einsum1_batched(x, spec):
    return np.einsum(_batch_spec(spec), x)


def _torch_einsum(torch):
    return lambda *xs, spec: torch.einsum(spec, *xs)


# --------------------------------------------------------------------------- reductions
def _all_axes(axis, ndim):
    return tuple(range(ndim)) if axis is None else tuple(axis)


def _prod(x, axis, keepdims):
    return np.prod(x, axis=axis, keepdims=keepdims)


def _others_product(x, axes):
    """For each element, the product of the other elements of its reduction group."""
    rest = [a for a in range(np.ndim(x)) if a not in axes]
    moved = np.transpose(x, rest + list(axes))
    lead = moved.shape[: len(rest)]
    flat = moved.reshape(lead + (-1,))
    ones = np.ones(lead + (1,))
    left = np.cumprod(np.concatenate((ones, flat[..., :-1]), axis=-1), axis=-1)
    right = np.flip(
        np.cumprod(np.concatenate((ones, np.flip(flat, -1)[..., :-1]), axis=-1), axis=-1), -1
    )
    both = (left * right).reshape(moved.shape)
    return np.transpose(both, np.argsort(rest + list(axes)))


def _prod_dx(g, out, x, axis, keepdims):
    axes = _all_axes(axis, np.ndim(x))
    ge = _expand(g, axis, keepdims)
    return ge * _others_product(np.asarray(x, dtype=float), axes)


def _prod_batched(x, axis, keepdims):
    return np.prod(x, axis=_shift(axis, x.ndim), keepdims=keepdims)


def _torch_prod(torch):
    def prod(x, axis, keepdims):
        axes = _all_axes(axis, x.ndim)
        if not axes:
            return x
        rest = [a for a in range(x.ndim) if a not in axes]
        moved = x.permute(rest + list(axes))
        out = moved.reshape(tuple(moved.shape[: len(rest)]) + (-1,)).prod(dim=-1)
        if keepdims:
            out = out.reshape([1 if a in axes else x.shape[a] for a in range(x.ndim)])
        return out

    return prod


def _cumprod_dx(g, out, x, axis):
    x = np.asarray(x, dtype=float)
    if not np.any(x == 0):
        return _cumsum_dx(g * out, out, x, axis) / x
    # a zero: each output's derivative by the product of the others on its way
    xm = np.moveaxis(x, axis, -1)
    gm = np.moveaxis(np.asarray(g, dtype=float), axis, -1)
    n = xm.shape[-1]
    gx = np.zeros_like(xm)
    for k in range(n):  # d out_i / d x_k for i >= k: prod_{j<=i, j!=k} x_j
        others = xm.copy()
        others[..., k] = 1.0
        part = np.cumprod(others, axis=-1)[..., k:]
        gx[..., k] = np.sum(part * gm[..., k:], axis=-1)
    return np.moveaxis(gx, -1, axis)


def _cumprod_batched(x, axis):
    return np.cumprod(x, axis + 1)


# --------------------------------------------------------------------------- linear algebra
def _mT(a):
    return np.swapaxes(a, -1, -2)


def _inv_dx(g, out, x):
    return -_mT(out) @ g @ _mT(out)


def _det_dx(g, out, x):
    # the cofactor matrix, U adj(S) Vᵀ det(U) det(V): defined for singular A too
    u, sv, vh = np.linalg.svd(x)
    sign = np.linalg.det(u) * np.linalg.det(vh)
    others = _others_product(sv, (sv.ndim - 1,))
    cof = (sign[..., None, None] * (u * others[..., None, :])) @ vh
    return np.asarray(g)[..., None, None] * cof


def _logdet(x):
    return np.linalg.slogdet(x)[1]


def _logdet_dx(g, out, x):
    try:
        inv = np.linalg.inv(x)
    except np.linalg.LinAlgError:  # ln|det| is −∞ there: no finite gradient
        inv = np.full(np.shape(x), np.nan)
    return np.asarray(g)[..., None, None] * _mT(inv)


def _solve(a, b, vec):
    return np.linalg.solve(a, b[..., None])[..., 0] if vec else np.linalg.solve(a, b)


def _solve_db(g, out, a, b, vec):
    return _solve(_mT(a), g, vec)


def _solve_da(g, out, a, b, vec):
    gb = _solve(_mT(a), g, vec)
    if vec:
        return -gb[..., :, None] * out[..., None, :]
    return -gb @ _mT(out)


def _lower_read(sym):
    """The gradient of a function that reads a symmetric matrix from its lower triangle
    (numpy's cholesky and eigh): an off-diagonal element stands for two, the upper
    triangle is not read. ``sym`` is the gradient for symmetric changes."""
    low = np.tril(sym + _mT(sym))
    return low - 0.5 * np.eye(sym.shape[-1]) * low


def _from_lower(f):
    """``torch -> function``: ``f`` of the symmetric matrix read from the lower triangle,
    as numpy's cholesky and eigh read it (torch's own take the matrix as symmetric)."""

    def make(torch):
        return lambda x: f(torch, torch.tril(x) + torch.tril(x, -1).mT)

    return make


def _cholesky_dx(g, out, x):
    # A = L Lᵀ: S = L⁻ᵀ Φ(Lᵀ Ḡ) L⁻¹ with Φ the lower triangle, its diagonal halved
    L = out
    phi = np.tril(_mT(L) @ g)
    phi = phi - 0.5 * np.eye(L.shape[-1]) * phi
    inv = np.linalg.inv(L)
    s = _mT(inv) @ phi @ inv
    return _lower_read(0.5 * (s + _mT(s)))


def _eigvalsh_dx(g, out, x):
    w, v = np.linalg.eigh(x)
    return _lower_read((v * np.asarray(g)[..., None, :]) @ _mT(v))


def _eigvecs(x):
    return np.linalg.eigh(x)[1]


def _eigvecs_dx(g, out, x):
    w, v = np.linalg.eigh(x)
    gap = w[..., None, :] - w[..., :, None]  # w_j - w_i
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(np.eye(w.shape[-1], dtype=bool), 0.0, 1.0 / gap)
    inner = f * (_mT(v) @ g)
    ga = v @ inner @ _mT(v)
    return _lower_read(0.5 * (ga + _mT(ga)))


def _eigh_kink(out, x):
    w = np.linalg.eigvalsh(x)
    return bool(np.any(np.diff(w, axis=-1) == 0))


def _svdvals(x):
    return np.linalg.svd(x, compute_uv=False)


def _svdvals_dx(g, out, x):
    u, s, vh = np.linalg.svd(x, full_matrices=False)
    return (u * np.asarray(g)[..., None, :]) @ vh


def _svd_u(x):
    return np.linalg.svd(x, full_matrices=False)[0]


def _svd_vh(x):
    return np.linalg.svd(x, full_matrices=False)[2]


def _svd_parts(x):
    u, s, vh = np.linalg.svd(x, full_matrices=False)
    s2 = s * s
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(
            np.eye(s.shape[-1], dtype=bool), 0.0, 1.0 / (s2[..., None, :] - s2[..., :, None])
        )  # 1/(s_j² − s_i²)
    return u, s, _mT(vh), f


def _svd_u_dx(g, out, x):
    u, s, v, f = _svd_parts(x)
    ut_g = _mT(u) @ g
    inner = (f * (ut_g - _mT(ut_g))) * s[..., None, :]
    outside = (g - u @ ut_g) / s[..., None, :]  # (I − UUᵀ) G S⁻¹
    return (u @ inner + outside) @ _mT(v)


def _svd_vh_dx(g, out, x):
    u, s, v, f = _svd_parts(x)
    gv = _mT(g)
    vt_g = _mT(v) @ gv
    inner = s[..., :, None] * (f * (vt_g - _mT(vt_g)))
    outside = _mT((gv - v @ vt_g) / s[..., None, :])  # S⁻¹ Gᵥᵀ (I − VVᵀ)
    return u @ (inner @ _mT(v) + outside)


def _svd_kink(out, x):
    s = np.linalg.svd(x, compute_uv=False)
    return bool(np.any(np.diff(s, axis=-1) == 0) or np.any(s == 0))


def _pinv_dx(g, out, x):
    p = out
    m, n = np.shape(x)[-2:]
    eye_m, eye_n = np.eye(m), np.eye(n)
    return (
        -_mT(p) @ g @ _mT(p)
        + (eye_m - x @ p) @ _mT(g) @ p @ _mT(p)
        + _mT(p) @ p @ _mT(g) @ (eye_n - p @ x)
    )


def _nan_to_num(x, nan, posinf, neginf):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def _torch_nan_to_num(torch):
    return lambda x, nan, posinf, neginf: torch.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def _torch_solve(torch):
    return lambda a, b, vec: (
        torch.linalg.solve(a, b.unsqueeze(-1)).squeeze(-1) if vec else torch.linalg.solve(a, b)
    )


def _kw_torch(fn):
    """``torch -> function`` for a torch spelling that takes the op's numpy params."""
    return lambda torch: lambda *xs, **p: fn(torch, *xs, **p)


def _roll_torch(torch, x, shift, axis):
    return (
        torch.roll(x, shifts=shift, dims=axis if axis is not None else None)
        if axis is not None
        else torch.roll(x.reshape(-1), shifts=shift).reshape(x.shape)
    )


def _unary_entry(name, f, d, rule, torch=None, numpy=None, kink=None, display=""):
    return TensorOp(
        name,
        1,
        _quiet(f),
        (_quiet(d),),
        _quiet(f),
        rule,
        kink=kink,
        display=display,
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


def _moving_entry(name, fn, rule, torch=None, display=""):
    f, dx, batched = _moving(fn)
    return TensorOp(
        name, 1, f, (dx,), batched, rule, display=display, torch=torch or _torch_moving(fn)
    )


def _tile_torch(torch, x, reps):
    return torch.tile(x, (reps,) if isinstance(reps, int) else tuple(reps))


def _repeat_torch(torch, x, repeats, axis):
    counts = torch.as_tensor(np.asarray(repeats))
    if axis is None:
        return x.reshape(-1).repeat_interleave(counts)
    return x.repeat_interleave(counts, dim=axis)


def _pad_torch(torch, x, pad_width, mode):
    if mode != "constant":  # torch's reflect/replicate/circular want batch axes: a gather
        return _torch_moving(_pad)(torch)(x, pad_width=pad_width, mode=mode)
    widths = np.broadcast_to(np.asarray(pad_width), (x.ndim, 2))
    return torch.nn.functional.pad(x, tuple(int(w) for pair in widths[::-1] for w in pair))


def _cbrt_torch(torch):
    return lambda x: torch.sign(x) * torch.abs(x) ** (1.0 / 3.0)


def _sinc_dx(g, out, x):
    x = np.asarray(x, dtype=float)
    px = np.pi * x
    safe = np.where(x == 0, 1.0, x)
    return g * np.where(x == 0, 0.0, (np.cos(px) - out) / safe)


def _zero_at(out, x):
    return bool(np.any(np.asarray(x) == 0))


_TABLE += [
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
        torch=_cbrt_torch,
        kink=_zero_at,
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
    # reductions
    TensorOp(
        "prod",
        1,
        _prod,
        (_prod_dx,),
        _prod_batched,
        "∂(Πa)/∂aᵢ = the product of the other elements",
        torch=_torch_prod,
    ),
    TensorOp(
        "cumprod",
        1,
        lambda x, axis: np.cumprod(x, axis),
        (_cumprod_dx,),
        _cumprod_batched,
        "∂(Π_{j≤i} a_j)/∂a_k = Π_{j≤i, j≠k} a_j for k ≤ i",
        torch=_kw_torch(lambda torch, x, axis: torch.cumprod(x, dim=axis)),
    ),
    # moving elements around (each output element is one input element, or 0)
    _moving_entry(
        "flip",
        lambda x, axis: np.flip(x, axis),
        "the gradient flipped back",
        torch=_kw_torch(
            lambda torch, x, axis: torch.flip(
                x, dims=tuple(range(x.ndim)) if axis is None else tuple(axis)
            )
        ),
    ),
    _moving_entry(
        "roll",
        lambda x, shift, axis: np.roll(x, shift, axis),
        "the gradient rolled back",
        torch=_kw_torch(_roll_torch),
    ),
    _moving_entry(
        "tile",
        lambda x, reps: np.tile(x, reps),
        "the gradient summed over the copies",
        torch=_kw_torch(_tile_torch),
    ),
    _moving_entry(
        "repeat",
        lambda x, repeats, axis: np.repeat(x, repeats, axis),
        "the gradient summed over the repeats",
        torch=_kw_torch(_repeat_torch),
    ),
    _moving_entry(
        "rot90",
        lambda x, k, axes: np.rot90(x, k, axes),
        "the gradient rotated back",
        torch=_kw_torch(lambda torch, x, k, axes: torch.rot90(x, k, list(axes))),
    ),
    _moving_entry(
        "moveaxis",
        lambda x, source, destination: np.moveaxis(x, source, destination),
        "the gradient's axes moved back",
        torch=_kw_torch(
            lambda torch, x, source, destination: torch.movedim(x, source, destination)
        ),
    ),
    _moving_entry(
        "broadcast_to",
        lambda x, shape: np.broadcast_to(x, shape),
        "the gradient summed over the broadcast copies",
        torch=_kw_torch(lambda torch, x, shape: torch.broadcast_to(x, shape)),
    ),
    _moving_entry(
        "tril",
        lambda x, k: np.tril(x, k),
        "the gradient's lower triangle",
        torch=_kw_torch(lambda torch, x, k: torch.tril(x, k)),
    ),
    _moving_entry(
        "triu",
        lambda x, k: np.triu(x, k),
        "the gradient's upper triangle",
        torch=_kw_torch(lambda torch, x, k: torch.triu(x, k)),
    ),
    _moving_entry(
        "diag",
        lambda x, k: np.diag(x, k),
        "the gradient's diagonal (or a vector's gradient put back on it)",
        torch=_kw_torch(lambda torch, x, k: torch.diag(x, k)),
    ),
    _moving_entry(
        "diagonal",
        lambda x, offset, axis1, axis2: np.diagonal(x, offset, axis1, axis2),
        "the gradient put back on the diagonal",
        torch=_kw_torch(
            lambda torch, x, offset, axis1, axis2: torch.diagonal(x, offset, axis1, axis2)
        ),
    ),
    _moving_entry(
        "pad",
        _pad,
        "the gradient of the padded array, its border taken off "
        "(summed where a mode copies an element)",
        torch=_kw_torch(_pad_torch),
    ),
    TensorOp(
        "sort",
        1,
        _sorted,
        (_sort_dx,),
        _sort_batched,
        "the gradient goes back to where each element was before sorting",
        kink=_sort_kink,
        torch=_torch_sorted,
    ),
    TensorOp(
        "concatenate",
        2,
        _concat,
        (_concat_dx, _concat_dy),
        _concat_batched,
        "each input gets its own part of the gradient",
        torch=_kw_torch(lambda torch, x, y, axis: torch.cat((x, y), dim=axis)),
    ),
    TensorOp(
        "pack",
        2,
        _pack,
        (_pack_dx, _pack_dy),
        _pack_batched,
        "each input gets its own part of the gradient, in its own shape",
        display="[…]",
        torch=_kw_torch(lambda torch, x, y: torch.cat((x.reshape(-1), y.reshape(-1)))),
    ),
    # products
    TensorOp(
        "einsum",
        2,
        lambda x, y, spec: np.einsum(spec, x, y),
        (_einsum2_rule(0), _einsum2_rule(1)),
        _einsum2_batched,
        "∂/∂A = the gradient contracted with the other operand, back to A's letters",
        torch=_torch_einsum,
    ),
    TensorOp(
        "einsum1",
        1,
        lambda x, spec: np.einsum(spec, x),
        (_einsum1_dx,),
        _einsum1_batched,
        "the gradient spread back to the operand's letters (its diagonal if repeated)",
        display="einsum",
        torch=_torch_einsum,
    ),
    # linear algebra (stacks of matrices in the last two axes)
    TensorOp(
        "inv",
        1,
        np.linalg.inv,
        (_inv_dx,),
        np.linalg.inv,
        "∂L/∂A = −A⁻ᵀ G A⁻ᵀ",
        torch=lambda torch: torch.linalg.inv,
    ),
    TensorOp(
        "det",
        1,
        np.linalg.det,
        (_det_dx,),
        np.linalg.det,
        "∂det A/∂A = det A · A⁻ᵀ (the cofactor matrix, also where A is singular)",
        torch=lambda torch: torch.linalg.det,
    ),
    TensorOp(
        "logdet",
        1,
        _logdet,
        (_logdet_dx,),
        _logdet,
        "∂ln|det A|/∂A = A⁻ᵀ (slogdet's second part; its sign has no gradient)",
        torch=lambda torch: lambda x: torch.linalg.slogdet(x)[1],
    ),
    TensorOp(
        "solve",
        2,
        _solve,
        (_solve_da, _solve_db),
        _solve,
        "for x = A⁻¹b: ∂L/∂b = A⁻ᵀ g, ∂L/∂A = −(A⁻ᵀ g) xᵀ",
        torch=_torch_solve,
    ),
    TensorOp(
        "cholesky",
        1,
        np.linalg.cholesky,
        (_cholesky_dx,),
        np.linalg.cholesky,
        "for A = L Lᵀ: S = L⁻ᵀ Φ(Lᵀ Ḡ) L⁻¹ (Φ: lower triangle, diagonal halved), "
        "∂L/∂A = (S + Sᵀ)/2 read from A's lower triangle, as numpy reads A",
        torch=_from_lower(lambda torch, a: torch.linalg.cholesky(a)),
    ),
    TensorOp(
        "eigvalsh",
        1,
        np.linalg.eigvalsh,
        (_eigvalsh_dx,),
        np.linalg.eigvalsh,
        "∂wᵢ/∂A = vᵢ vᵢᵀ (the eigenvalues of a symmetric matrix, read from its lower triangle)",
        kink=_eigh_kink,
        torch=_from_lower(lambda torch, a: torch.linalg.eigvalsh(a)),
    ),
    TensorOp(
        "eigvecs",
        1,
        _eigvecs,
        (_eigvecs_dx,),
        _eigvecs,
        "∂L/∂A = V (F ∘ VᵀḠ) Vᵀ with F_ij = 1/(w_j − w_i), read from A's lower "
        "triangle (eigh's eigenvectors; undefined at repeated eigenvalues)",
        kink=_eigh_kink,
        display="eigh V",
        torch=_from_lower(lambda torch, a: torch.linalg.eigh(a)[1]),
    ),
    TensorOp(
        "svdvals",
        1,
        _svdvals,
        (_svdvals_dx,),
        _svdvals,
        "∂sᵢ/∂A = uᵢ vᵢᵀ (the singular values)",
        torch=lambda torch: torch.linalg.svdvals,
    ),
    TensorOp(
        "svd_u",
        1,
        _svd_u,
        (_svd_u_dx,),
        _svd_u,
        "for A = U S Vᵀ: ∂L/∂A = U(F ∘ (UᵀḠ − ḠᵀU))S Vᵀ + (I − UUᵀ)ḠS⁻¹Vᵀ, "
        "F_ij = 1/(s_j² − s_i²) (undefined at repeated or zero singular values)",
        kink=_svd_kink,
        display="svd U",
        torch=lambda torch: lambda x: torch.linalg.svd(x, full_matrices=False)[0],
    ),
    TensorOp(
        "svd_vh",
        1,
        _svd_vh,
        (_svd_vh_dx,),
        _svd_vh,
        "for A = U S Vᵀ, G = ∂L/∂V: ∂L/∂A = U S(F ∘ (VᵀG − GᵀV))Vᵀ + U S⁻¹Gᵀ(I − VVᵀ)",
        kink=_svd_kink,
        display="svd Vh",
        torch=lambda torch: lambda x: torch.linalg.svd(x, full_matrices=False)[2],
    ),
    TensorOp(
        "pinv",
        1,
        np.linalg.pinv,
        (_pinv_dx,),
        np.linalg.pinv,
        "for P = A⁺: ∂L/∂A = −PᵀGPᵀ + (I − AP)GᵀPPᵀ + PᵀPGᵀ(I − PA) (constant rank)",
        torch=lambda torch: torch.linalg.pinv,
    ),
]


TENSOR_OPS: dict[str, TensorOp] = {op.name: op for op in _TABLE}
"""Operation name → :class:`TensorOp`."""
