"""Tensor operations that reduce or run along an axis: sums, means, extremes, products, softmax.

Entries of :data:`~gradmagic.core.tensor_ops.TENSOR_OPS`; the fields are :class:`~gradmagic.core.tensor_op.TensorOp`'s.
"""

from __future__ import annotations

import numpy as np

from .tensor_op import TensorOp, _kw_torch, _others_product, _quiet


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


# --------------------------------------------------------------------------- reductions
def _reduction(name, reduce, dx, rule, torch, kink=None) -> TensorOp:
    """The entry of a reduction over ``axis`` that numpy's ``reduce`` computes."""

    def f(x, axis, keepdims):
        return reduce(x, axis=axis, keepdims=keepdims)

    def batched(x, axis, keepdims):
        return reduce(x, axis=_shift(axis, x.ndim), keepdims=keepdims)

    return TensorOp(name, 1, f, (dx,), batched, rule, kink=kink, torch=torch)


def _sum_dx(g, out, x, axis, keepdims):
    return np.broadcast_to(_expand(g, axis, keepdims), np.shape(x))


def _mean_dx(g, out, x, axis, keepdims):
    count = max(np.size(x), 1) / max(np.size(out), 1)  # elements per mean
    return np.broadcast_to(_expand(g, axis, keepdims) / count, np.shape(x))


def _winners(out, x, axis, keepdims):
    """Where a max or min reduction found its result."""
    return x == _expand(out, axis, keepdims)


def _extreme_dx(g, out, x, axis, keepdims):
    hit = _winners(out, x, axis, keepdims)
    return hit * (_expand(g, axis, keepdims) / hit.sum(axis=axis, keepdims=True))


def _extreme_kink(out, x, axis, keepdims):
    return bool(np.any(_winners(out, x, axis, keepdims).sum(axis=axis) > 1))


def _cumsum_dx(g, out, x, axis):
    return np.flip(np.cumsum(np.flip(g, axis), axis), axis)


# --------------------------------------------------------------------------- softmax
def _softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _along(f):
    """A softmax-like forward for a batched input (the axis moves by one)."""
    return lambda x, axis: f(x, axis + 1)


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


def _all_axes(axis, ndim):
    return tuple(range(ndim)) if axis is None else tuple(axis)


def _prod_dx(g, out, x, axis, keepdims):
    axes = _all_axes(axis, np.ndim(x))
    ge = _expand(g, axis, keepdims)
    return ge * _others_product(np.asarray(x), axes)


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
    x = np.asarray(x)
    if not np.any(x == 0):
        return _cumsum_dx(g * out, out, x, axis) / x
    # a zero: each output's derivative by the product of the others on its way
    xm = np.moveaxis(x, axis, -1)
    gm = np.moveaxis(np.asarray(g), axis, -1)
    n = xm.shape[-1]
    gx = np.zeros(xm.shape, np.result_type(xm, gm, 0.0))
    for k in range(n):  # d out_i / d x_k for i >= k: prod_{j<=i, j!=k} x_j
        others = xm.copy()
        others[..., k] = 1.0
        part = np.cumprod(others, axis=-1)[..., k:]
        gx[..., k] = np.sum(part * gm[..., k:], axis=-1)
    return np.moveaxis(gx, -1, axis)


OPS = [
    # reductions over axes (axis: None or a tuple of non-negative ints)
    _reduction("sum", np.sum, _sum_dx, "∂(Σa)/∂aᵢ = 1", _torch_reduction("sum")),
    _reduction("mean", np.mean, _mean_dx, "∂mean(a)/∂aᵢ = 1/n", _torch_reduction("mean")),
    _reduction(
        "max",
        np.max,
        _extreme_dx,
        "∂max(a)/∂aᵢ = 1 at the maximum (shared equally between ties)",
        _torch_reduction("amax"),
        _extreme_kink,
    ),
    _reduction(
        "min",
        np.min,
        _extreme_dx,
        "∂min(a)/∂aᵢ = 1 at the minimum (shared equally between ties)",
        _torch_reduction("amin"),
        _extreme_kink,
    ),
    TensorOp(
        "cumsum",
        1,
        lambda x, axis: np.cumsum(x, axis),
        (_cumsum_dx,),
        lambda x, axis: np.cumsum(x, axis + 1),
        "∂(Σ_{j≤i} a_j)/∂a_k = 1 for k ≤ i: the gradient summed from the end",
        torch=_torch_cumsum,
    ),
    TensorOp(
        "softmax",
        1,
        _quiet(_softmax),
        (lambda g, out, x, axis: out * (g - np.sum(g * out, axis=axis, keepdims=True)),),
        _quiet(_along(_softmax)),
        "∂L/∂a = s ⊙ (g − Σ g⊙s) for s = softmax(a)",
        torch=_torch_along("softmax"),
    ),
    TensorOp(
        "log_softmax",
        1,
        _quiet(_log_softmax),
        (_quiet(lambda g, out, x, axis: g - np.exp(out) * np.sum(g, axis=axis, keepdims=True)),),
        _quiet(_along(_log_softmax)),
        "∂L/∂a = g − softmax(a)·Σg",
        torch=_torch_along("log_softmax"),
    ),
    # reductions
    _reduction(
        "prod", np.prod, _prod_dx, "∂(Πa)/∂aᵢ = the product of the other elements", _torch_prod
    ),
    TensorOp(
        "cumprod",
        1,
        lambda x, axis: np.cumprod(x, axis),
        (_cumprod_dx,),
        lambda x, axis: np.cumprod(x, axis + 1),
        "∂(Π_{j≤i} a_j)/∂a_k = Π_{j≤i, j≠k} a_j for k ≤ i",
        torch=_kw_torch(lambda torch, x, axis: torch.cumprod(x, dim=axis)),
    ),
]
