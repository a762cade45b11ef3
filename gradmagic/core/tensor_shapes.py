"""Tensor operations that only move numbers: reshape, transpose, indexing, flips, pads, sort, joins.

Entries of :data:`~gradmagic.core.tensor_ops.TENSOR_OPS`; the fields are :class:`~gradmagic.core.tensor_op.TensorOp`'s.
"""

from __future__ import annotations

import numpy as np

from .engine import SCALAR_NODES
from .tensor_op import TensorOp, _same_grad, _kw_torch


# --------------------------------------------------------------------------- shape ops
def _transpose_batched(x, axes):
    n = x.ndim - 1
    rest = range(n, 0, -1) if axes is None else (a + 1 for a in axes)
    return np.transpose(x, (0, *rest))


def _bincount(pos, g, n: int):
    """``np.bincount`` of the weights ``g``, complex ones too."""
    if np.iscomplexobj(g):
        return _bincount(pos, g.real, n) + 1j * _bincount(pos, g.imag, n)
    return np.bincount(pos, weights=g, minlength=n)


def _getitem_dx(g, out, x, index, basic):
    gx = np.zeros(np.shape(x), g.dtype)  # (complex if g is)
    if basic:  # ints, slices, masks: every element is picked at most once
        gx[index] = g
    else:  # integer arrays may pick an element twice
        np.add.at(gx, index, g)
    return gx


def _getitem_scatter(gx, g, index, basic):
    if basic:
        gx[index] += g
    else:
        np.add.at(gx, index, g)


def _getitem_batched(x, index, basic):
    # where each output element comes from, as flat positions in one copy
    where = np.arange(x[0].size).reshape(x.shape[1:])[index]
    return x.reshape(x.shape[0], -1)[:, where]


# ``writes``: ``(index, start, stop, shape)`` for each write ``x[index] = v[start:stop]`` in
# order, the value's numbers in ``shape`` (its own, with as many axes as ``x[index]``)
def _writes(x, v, writes):
    out = np.array(x, dtype=np.result_type(x, v, 0.0))
    v = np.ravel(v)
    for index, start, stop, shape in writes:
        out[index] = v[start:stop].reshape(shape)
    return out


def _writes_grads(g, size: int, writes):
    """The gradients of ``x`` and of ``v``: one copy of ``g``, the writes undone from the
    last, each written region's gradient taken for its value and then zeroed (an element
    written again later no longer depends on the earlier value)."""
    gx = np.array(g, dtype=np.result_type(g, 0.0))
    gv = np.zeros(size, gx.dtype)
    for index, start, stop, shape in reversed(writes):
        if not shape:  # one element
            gv[start] = gx[index]
        else:
            part = gx[index]
            if part.shape != shape:  # a broadcast value: its share summed
                axes = tuple(i for i, n in enumerate(shape) if n == 1 and part.shape[i] != 1)
                part = part.sum(axis=axes, keepdims=True)
            gv[start:stop] = part.ravel()
        gx[index] = 0.0
    return gx, gv


def _writes_batched(x, v, writes):
    k = max(x.shape[0], v.shape[0])
    out = np.array(np.broadcast_to(x, (k,) + x.shape[1:]), dtype=np.result_type(x, v, 0.0))
    v = v.reshape(v.shape[0], -1)
    for index, start, stop, shape in writes:
        out[(slice(None),) + index] = v[:, start:stop].reshape((v.shape[0],) + shape)
    return out


def _torch_writes(torch):
    def writes(x, v, writes):
        out = x.clone()
        v = v.reshape(-1)
        for index, start, stop, shape in writes:
            out[_torch_index(torch, index)] = v[start:stop].reshape(shape)
        return out

    return writes


class _WritesOp(TensorOp):
    """``setitem``: its backward makes both gradients in one walk over the writes."""

    def vjp(self, node) -> None:
        a, b = node._a, node._b
        gx, gv = _writes_grads(node.grad, np.size(b.data), node._params["writes"])
        for parent, g in ((a, gx), (b, gv)):
            if parent.__class__ in SCALAR_NODES:
                parent.grad += float(np.sum(g).real)
            elif parent.requires_grad:
                parent._add_grad(g.reshape(np.shape(parent.data)), None)


def _torch_transpose(torch):
    return lambda x, axes: x.permute(
        tuple(reversed(range(x.ndim))) if axes is None else tuple(axes)
    )


def _torch_index(torch, i):
    """A numpy index (ints, slices, arrays, masks, tuples of them) for a torch tensor."""
    if isinstance(i, tuple):
        return tuple(_torch_index(torch, j) for j in i)
    if isinstance(i, (np.ndarray, list)):
        return torch.as_tensor(np.asarray(i))
    if isinstance(i, np.integer):
        return int(i)
    return i


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
        back = _bincount(pos.reshape(-1), g.reshape(-1), np.size(x) + 1)
        return back[1:].reshape(np.shape(x))

    def batched(x, **params):
        pos = _positions(fn, x[0], params)
        flat = x.reshape(x.shape[0], -1)
        padded = np.concatenate((np.zeros((x.shape[0], 1)), flat), axis=1)
        return padded[:, pos]

    return fn, dx, batched


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


def _sort_dx(g, out, x, axis, order):
    gx = np.zeros(np.shape(x), g.dtype)  # (complex if g is)
    np.put_along_axis(gx, order, g, axis=axis)
    return gx


def _sort_batched(x, axis, order):
    return np.take_along_axis(x, np.broadcast_to(order[None], x.shape), axis=axis + 1)


def _torch_sorted(torch):
    return lambda x, axis, order: torch.take_along_dim(x, torch.as_tensor(order), dim=axis)


# --------------------------------------------------------------------------- concatenation
def _concat_dx(g, out, x, y, axis):
    return np.take(g, np.arange(np.shape(x)[axis]), axis=axis)


def _concat_dy(g, out, x, y, axis):
    n = np.shape(x)[axis]
    return np.take(g, np.arange(n, n + np.shape(y)[axis]), axis=axis)


def _pack_dx(g, out, x, y):
    return np.reshape(g[: np.size(x)], np.shape(x))


def _pack_dy(g, out, x, y):
    return np.reshape(g[np.size(x) :], np.shape(y))


def _pack_batched(x, y):
    k = max(x.shape[0], y.shape[0])
    x = np.broadcast_to(x, (k,) + x.shape[1:]).reshape(k, -1)
    y = np.broadcast_to(y, (k,) + y.shape[1:]).reshape(k, -1)
    return np.concatenate((x, y), axis=1)


def _roll_torch(torch, x, shift, axis):
    if axis is None:
        return torch.roll(x.reshape(-1), shifts=shift).reshape(x.shape)
    return torch.roll(x, shifts=shift, dims=axis)


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


OPS = [
    # moving elements around
    TensorOp("copy", 1, np.copy, (_same_grad,), np.copy, "∂copy(a)/∂a = 1", torch="clone"),
    TensorOp(
        "reshape",
        1,
        lambda x, shape: np.reshape(x, shape),
        (lambda g, out, x, shape: np.reshape(g, np.shape(x)),),
        lambda x, shape: x.reshape(x.shape[:1] + tuple(shape)),
        "the gradient is reshaped back",
        torch=lambda torch: lambda x, shape: x.reshape(tuple(shape)),
    ),
    TensorOp(
        "transpose",
        1,
        lambda x, axes: np.transpose(x, axes),
        (lambda g, out, x, axes: np.transpose(g, None if axes is None else np.argsort(axes)),),
        _transpose_batched,
        "the gradient is transposed back",
        display="ᵀ",
        torch=_torch_transpose,
    ),
    _WritesOp(
        "setitem",
        2,
        _writes,
        (
            lambda g, out, x, v, writes: _writes_grads(g, np.size(v), writes)[0],
            lambda g, out, x, v, writes: _writes_grads(g, np.size(v), writes)[1].reshape(
                np.shape(v)
            ),
        ),
        _writes_batched,
        "a[i] = v, one write after another: ∂/∂a = 1 where no write reached, ∂/∂v = 1 at "
        "the elements each value still holds at the end (summed where it is broadcast)",
        display="[]=",
        torch=_torch_writes,
    ),
    TensorOp(
        "getitem",
        1,
        lambda x, index, basic: x[index],
        (_getitem_dx,),
        _getitem_batched,
        "the gradient goes back to the picked elements (summed where picked twice)",
        display="[]",
        torch=lambda torch: lambda x, index, basic: x[_torch_index(torch, index)],
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
        lambda x, axis, order: np.take_along_axis(x, order, axis=axis),
        (_sort_dx,),
        _sort_batched,
        "the gradient goes back to where each element was before sorting",
        kink=lambda out, x, axis, order: bool(np.any(np.diff(out, axis=axis) == 0)),
        torch=_torch_sorted,
    ),
    TensorOp(
        "concatenate",
        2,
        lambda x, y, axis: np.concatenate((x, y), axis=axis),
        (_concat_dx, _concat_dy),
        lambda x, y, axis: np.concatenate((x, y), axis=axis + 1),
        "each input gets its own part of the gradient",
        torch=_kw_torch(lambda torch, x, y, axis: torch.cat((x, y), dim=axis)),
    ),
    TensorOp(
        "pack",
        2,
        lambda x, y: np.concatenate((np.ravel(x), np.ravel(y))),
        (_pack_dx, _pack_dy),
        _pack_batched,
        "each input gets its own part of the gradient, in its own shape",
        display="[…]",
        torch=_kw_torch(lambda torch, x, y: torch.cat((x.reshape(-1), y.reshape(-1)))),
    ),
]

for _op in OPS:
    if _op.name == "getitem":
        object.__setattr__(_op, "_scatter", _getitem_scatter)
