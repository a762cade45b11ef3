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
    return [x if x.ndim == n else x.reshape(x.shape[:1] + (1,) * (n - x.ndim) + x.shape[1:])
            for x in xs]


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
    c, x, y = _lift(np.asarray(cond)[None], np.asarray(x, dtype=float),
                    np.asarray(y, dtype=float))
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
    return lambda x, axis: (torch.cumsum(x.reshape(-1), dim=0) if axis is None
                            else torch.cumsum(x, dim=axis))


def _torch_where(torch):
    return lambda x, y, cond: torch.where(torch.as_tensor(np.asarray(cond)), x, y)


def _torch_reshape(torch):
    return lambda x, shape: x.reshape(tuple(shape))


def _torch_transpose(torch):
    return lambda x, axes: x.permute(tuple(reversed(range(x.ndim))) if axes is None
                                     else tuple(axes))


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
    TensorOp("+", 2, np.add, (_g, _g), _pairwise(np.add), "∂(a+b)/∂a = 1, ∂(a+b)/∂b = 1",
             method="__add__", numpy=("add",), torch="add"),
    TensorOp("-", 2, np.subtract, (_g, _neg_g), _pairwise(np.subtract),
             "∂(a−b)/∂a = 1, ∂(a−b)/∂b = −1",
             method="__sub__", numpy=("subtract",), torch="sub"),
    TensorOp("*", 2, np.multiply,
             (lambda g, out, x, y: g * y, lambda g, out, x, y: g * x),
             _pairwise(np.multiply), "∂(a·b)/∂a = b, ∂(a·b)/∂b = a",
             method="__mul__", numpy=("multiply",), torch="mul"),
    TensorOp("/", 2, _quiet(np.divide),
             (_quiet(lambda g, out, x, y: g / y), _quiet(lambda g, out, x, y: -g * out / y)),
             _quiet(_pairwise(np.divide)), "∂(a/b)/∂a = 1/b, ∂(a/b)/∂b = −a/b²",
             method="__truediv__", numpy=("true_divide",), torch="div"),
    TensorOp("**", 2, _quiet(np.power), (_quiet(_pow_dx), _quiet(_pow_dy)),
             _quiet(_pairwise(np.power)), "∂(aᵇ)/∂a = b·aᵇ⁻¹, ∂(aᵇ)/∂b = aᵇ·ln a",
             method="__pow__", numpy=("power",), torch="pow"),
    TensorOp("//", 2, _quiet(np.floor_divide), (_zero, _zero),
             _quiet(_pairwise(np.floor_divide)),
             "∂(a//b)/∂a = 0, ∂(a//b)/∂b = 0 (a step function)", kink=_on_a_jump,
             method="__floordiv__", numpy=("floor_divide",), torch=_torch_floordiv),
    TensorOp("%", 2, _quiet(np.mod), (_g, _quiet(_mod_dy)), _quiet(_pairwise(np.mod)),
             "∂(a mod b)/∂a = 1, ∂(a mod b)/∂b = −⌊a/b⌋", kink=_on_a_jump,
             method="__mod__", numpy=("remainder",), torch="remainder"),
    TensorOp("maximum", 2, np.maximum,
             (lambda g, out, x, y: g * _share(x, y, np.greater),
              lambda g, out, x, y: g * _share(y, x, np.greater)),
             _pairwise(np.maximum), "∂max(a,b)/∂a = 1 where a > b (½ at ties)",
             kink=_any_tie,
             numpy=("maximum",), torch="maximum"),
    TensorOp("minimum", 2, np.minimum,
             (lambda g, out, x, y: g * _share(x, y, np.less),
              lambda g, out, x, y: g * _share(y, x, np.less)),
             _pairwise(np.minimum), "∂min(a,b)/∂a = 1 where a < b (½ at ties)",
             kink=_any_tie,
             numpy=("minimum",), torch="minimum"),
    TensorOp("where", 2, _where,
             (lambda g, out, x, y, cond: np.where(cond, g, 0.0),
              lambda g, out, x, y, cond: np.where(cond, 0.0, g)),
             _where_batched, "∂where(c,a,b)/∂a = c, ∂where(c,a,b)/∂b = 1 − c",
             torch=_torch_where),
    TensorOp("@", 2, np.matmul, (_mm_dx, _mm_dy), _mm_batched,
             "∂L/∂A = G·Bᵀ, ∂L/∂B = Aᵀ·G for C = A·B",
             method="__matmul__", numpy=("matmul",), torch="matmul"),
    # elementwise unary
    TensorOp("neg", 1, np.negative, (_neg_g,), np.negative, "∂(−a)/∂a = −1", display="−",
             method="__neg__", numpy=("negative",), torch="neg"),
    TensorOp("exp", 1, _quiet(np.exp), (lambda g, out, x: g * out,), _quiet(np.exp),
             "∂eᵃ/∂a = eᵃ",
             method="exp", numpy=("exp",), torch="exp"),
    TensorOp("log", 1, _quiet(np.log), (_quiet(lambda g, out, x: g / x),), _quiet(np.log),
             "∂ln a/∂a = 1/a",
             method="log", numpy=("log",), torch="log"),
    TensorOp("sqrt", 1, _quiet(np.sqrt), (_quiet(lambda g, out, x: g * 0.5 / out),),
             _quiet(np.sqrt), "∂√a/∂a = 1/(2√a)",
             method="sqrt", numpy=("sqrt",), torch="sqrt"),
    TensorOp("tanh", 1, np.tanh, (lambda g, out, x: g * (1.0 - out * out),), np.tanh,
             "∂tanh a/∂a = 1 − tanh²a",
             method="tanh", numpy=("tanh",), torch="tanh"),
    TensorOp("sin", 1, _quiet(np.sin), (lambda g, out, x: g * np.cos(x),), _quiet(np.sin),
             "∂sin a/∂a = cos a",
             method="sin", numpy=("sin",), torch="sin"),
    TensorOp("cos", 1, _quiet(np.cos), (lambda g, out, x: -g * np.sin(x),), _quiet(np.cos),
             "∂cos a/∂a = −sin a",
             method="cos", numpy=("cos",), torch="cos"),
    TensorOp("atan", 1, np.arctan, (lambda g, out, x: g / (1.0 + x * x),), np.arctan,
             "∂atan a/∂a = 1/(1 + a²)", method="atan", numpy=("arctan",), torch="atan"),
    TensorOp("sigmoid", 1, _sigmoid, (lambda g, out, x: g * out * (1.0 - out),), _sigmoid,
             "∂σ(a)/∂a = σ(a)(1 − σ(a))", display="σ",
             method="sigmoid", torch="sigmoid"),
    TensorOp("relu", 1, _relu, (lambda g, out, x: g * (x > 0),), _relu,
             "∂relu(a)/∂a = 1 if a > 0 else 0 (0 at a = 0)", kink=_any_zero,
             method="relu", torch="relu"),
    TensorOp("abs", 1, np.abs, (lambda g, out, x: g * np.sign(x),), np.abs,
             "∂|a|/∂a = sign(a) (0 at a = 0)", kink=_any_zero,
             method="__abs__ abs", numpy=("absolute",), torch="abs"),
    # reductions over axes (axis: None or a tuple of non-negative ints)
    TensorOp("sum", 1, _sum, (_sum_dx,), _sum_batched, "∂(Σa)/∂aᵢ = 1",
             torch=_torch_reduction("sum")),
    TensorOp("mean", 1, _mean, (_mean_dx,), _mean_batched, "∂mean(a)/∂aᵢ = 1/n",
             torch=_torch_reduction("mean")),
    TensorOp("max", 1, _max_f, (_max_dx,), _max_batched,
             "∂max(a)/∂aᵢ = 1 at the maximum (shared equally between ties)", kink=_max_kink,
             torch=_torch_reduction("amax")),
    TensorOp("min", 1, _min_f, (_min_dx,), _min_batched,
             "∂min(a)/∂aᵢ = 1 at the minimum (shared equally between ties)", kink=_min_kink,
             torch=_torch_reduction("amin")),
    TensorOp("cumsum", 1, lambda x, axis: np.cumsum(x, axis), (_cumsum_dx,), _cumsum_batched,
             "∂(Σ_{j≤i} a_j)/∂a_k = 1 for k ≤ i: the gradient summed from the end",
             torch=_torch_cumsum),
    TensorOp("softmax", 1, _quiet(_softmax), (_softmax_dx,), _quiet(_along(_softmax)),
             "∂L/∂a = s ⊙ (g − Σ g⊙s) for s = softmax(a)",
             torch=_torch_along("softmax")),
    TensorOp("log_softmax", 1, _quiet(_log_softmax), (_quiet(_log_softmax_dx),),
             _quiet(_along(_log_softmax)), "∂L/∂a = g − softmax(a)·Σg",
             torch=_torch_along("log_softmax")),
    # moving elements around
    TensorOp("copy", 1, np.copy, (_g,), np.copy, "∂copy(a)/∂a = 1",
             torch="clone"),
    TensorOp("reshape", 1, lambda x, shape: np.reshape(x, shape),
             (lambda g, out, x, shape: np.reshape(g, np.shape(x)),), _reshape_batched,
             "the gradient is reshaped back",
             torch=_torch_reshape),
    TensorOp("transpose", 1, lambda x, axes: np.transpose(x, axes), (_transpose_dx,),
             _transpose_batched, "the gradient is transposed back", display="ᵀ",
             torch=_torch_transpose),
    TensorOp("setitem", 2, _setitem, (_setitem_dx, _setitem_dy), _setitem_batched,
             "∂(a[i] = b)/∂a = 1 outside i, 0 at i; ∂/∂b = 1 at i (summed where b is broadcast)",
             display="[]=", torch=_torch_setitem),
    TensorOp("getitem", 1, _getitem, (_getitem_dx,), _getitem_batched,
             "the gradient goes back to the picked elements (summed where picked twice)",
             display="[]",
             torch=_torch_getitem),
]

TENSOR_OPS: dict[str, TensorOp] = {op.name: op for op in _TABLE}
"""Operation name → :class:`TensorOp`."""
