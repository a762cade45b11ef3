"""numpy's functions on a Tensor (``np.sum(T, axis=0)``, ``np.linalg.norm(T)``): NEP 18
dispatch, each one numpy's signature over the op it computes.

Importing this module (``gradmagic.core`` does) fills :data:`gradmagic.core.tensor._FUNCTIONS`,
which ``Tensor.__array_function__`` reads.
"""

from __future__ import annotations

# bound here, as in core.tensor: a cell that rebinds builtins changes its own code only
from builtins import isinstance  # noqa: A004

import numpy as np

from . import tensor as _t
from .tensor import _MATMUL, _WHERE, Tensor, _as_tensor, _binary_or_raise, _plain


def _np_sum(a, axis=None, dtype=None, out=None, keepdims=False):
    _no_dtype_out("sum", dtype, out)
    return _as_tensor(a).sum(axis, keepdims)


def _np_mean(a, axis=None, dtype=None, out=None, keepdims=False):
    _no_dtype_out("mean", dtype, out)
    return _as_tensor(a).mean(axis, keepdims)


def _np_max(a, axis=None, out=None, keepdims=False):
    _no_dtype_out("max", None, out)
    return _as_tensor(a).max(axis, keepdims)


def _np_min(a, axis=None, out=None, keepdims=False):
    _no_dtype_out("min", None, out)
    return _as_tensor(a).min(axis, keepdims)


def _np_reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise TypeError("Tensors reshape in C order only")
    return _as_tensor(a).reshape(shape if shape is not None else newshape)


def _np_copy(a, order="K", subok=False):
    return _as_tensor(a).copy()


def _np_transpose(a, axes=None):
    return _as_tensor(a).transpose(axes)


def _np_ravel(a, order="C"):
    if order != "C":
        raise TypeError("Tensors reshape in C order only")
    return _as_tensor(a).reshape(-1)


def _np_dot(a, b, out=None):
    _no_dtype_out("dot", None, out)
    if np.ndim(_plain([a])[0]) > 2 or np.ndim(_plain([b])[0]) > 2:
        rule = _t._function_rule  # set by core.array
        if rule is not None:  # n-d dot: the array rules (core.array)
            result = rule(np.dot, (a, b), {})
            if result is not NotImplemented:
                return result
        raise TypeError("numpy.dot of Tensors is supported up to 2-D; use @ (matmul)")
    return _binary_or_raise(_MATMUL, a, b)


def _np_cumsum(a, axis=None, dtype=None, out=None):
    _no_dtype_out("cumsum", dtype, out)
    return _as_tensor(a).cumsum(axis)


def _np_var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    _no_dtype_out("var", dtype, out)
    return _as_tensor(a).var(axis, ddof, keepdims)


def _np_std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    _no_dtype_out("std", dtype, out)
    return _as_tensor(a).std(axis, ddof, keepdims)


def _np_where(condition, x=None, y=None):
    if x is None or y is None:
        raise TypeError("numpy.where(condition) on a Tensor: use np.nonzero(T.data)")
    if isinstance(condition, Tensor):
        condition = condition.data != 0
    return _binary_or_raise(_WHERE, x, y, {"cond": np.asarray(condition, dtype=bool)})


def _np_norm(x, ord=None, axis=None, keepdims=False):
    if ord is not None or axis is not None or keepdims:
        rule = _t._function_rule  # set by core.array
        if rule is not None:  # the other norms: the array rules (core.array)
            result = rule(np.linalg.norm, (x, ord, axis, keepdims), {})
            if result is not NotImplemented:
                return result
        raise TypeError(
            "numpy.linalg.norm of a Tensor supports the default "
            "(Frobenius/2-norm of all elements) only"
        )
    x = _as_tensor(x)
    return (x * x).sum().sqrt()


def _no_dtype_out(name, dtype, out):
    if dtype is not None or out is not None:
        raise TypeError(f"numpy.{name} of a Tensor does not take dtype= or out=")


_t._FUNCTIONS.update(
    {
        np.sum: _np_sum,
        np.mean: _np_mean,
        np.max: _np_max,
        np.amax: _np_max,
        np.min: _np_min,
        np.amin: _np_min,
        np.reshape: _np_reshape,
        np.ravel: _np_ravel,
        np.transpose: _np_transpose,
        np.dot: _np_dot,
        np.where: _np_where,
        np.linalg.norm: _np_norm,
        np.copy: _np_copy,
        np.cumsum: _np_cumsum,
        np.var: _np_var,
        np.std: _np_std,
    }
)
