"""One tensor operation: the :class:`TensorOp` record and the helpers every family's rules share.

The entries themselves are in :mod:`.tensor_elementwise`, :mod:`.tensor_reductions`,
:mod:`.tensor_shapes` and :mod:`.tensor_linalg`; :mod:`.tensor_ops` gathers them into
:data:`~gradmagic.core.tensor_ops.TENSOR_OPS`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .engine import SCALAR_NODES
from .fpstate import quiet
from .ops import OpBase

_NO_PARAMS: dict = {}
_NDARRAY = np.ndarray


@dataclass(frozen=True)
class TensorOp(OpBase):
    """A tensor operation: ``df`` is one vector-Jacobian rule per input.

    The other fields (``method``, ``numpy``, ``torch``, ...) are
    :class:`gradmagic.core.ops.OpBase`'s. For a tensor op ``torch`` gets the
    op's params as keyword arguments, as ``f`` does.
    """

    # ``scatter(gx, g, **params)``, for an op whose gradient lands on a few elements of
    # its input (``x[i, j]``): adds ``g`` into the input's gradient ``gx`` in place
    _scatter = None

    def vjp(self, node) -> None:
        """Add ``node``'s gradient, pulled back through this op, into its parents.

        Called by :func:`gradmagic.core.engine.backward`. A parent that does not
        need a gradient (a constant tensor) is skipped; a scalar ``Value``
        parent receives the sum of its share as a float. A few elements picked
        from a big array are added into its gradient in place: a loop reading
        ``W[i, j]`` would otherwise make and add a ``W``-sized array per read.
        """
        params = node._params or _NO_PARAMS
        a, b = node._a, node._b
        out, grad = node.data, node.grad
        if out.__class__ is float:  # a float64 number node: its number and gradient 0-d
            out, grad = np.array(out), np.array(grad)
        args = (a.data,) if b is None else (a.data, b.data)
        if (
            self._scatter is not None
            and a.__class__ not in SCALAR_NODES
            and a.requires_grad
            and out.size * 8 <= args[0].size
        ):
            into = a._grad_to_add_into()
            self._scatter(into, grad if into.dtype == grad.dtype else grad.real, **params)
            return
        for parent, x, rule in zip((a, b), args, self.df):
            if parent.__class__ in SCALAR_NODES:  # a real number: the real part of its share
                parent.grad += float(np.sum(rule(grad, out, *args, **params)).real)
            elif parent.requires_grad:
                g = rule(grad, out, *args, **params)
                if g.__class__ is not _NDARRAY or g.shape != x.shape:
                    g = _unbroadcast(g, x.shape)
                parent._add_grad(g, grad)


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


_quiet = quiet  # ``f`` with numpy's floating-point warnings silenced (results are nan/inf)


# --------------------------------------------------------------------------- batched helpers
def _lift(*xs):
    """Batched inputs padded after the leading axis to one rank, for broadcasting."""
    n = max(x.ndim for x in xs)
    return [
        x if x.ndim == n else x.reshape(x.shape[:1] + (1,) * (n - x.ndim) + x.shape[1:]) for x in xs
    ]


# --------------------------------------------------------------------------- the table
def _same_grad(g, out, *args):
    return g


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


def _kw_torch(fn):
    """``torch -> function`` for a torch spelling that takes the op's numpy params."""
    return lambda torch: lambda *xs, **p: fn(torch, *xs, **p)
