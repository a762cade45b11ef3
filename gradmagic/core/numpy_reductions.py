"""numpy's reductions and statistics on array nodes: the rules of ``np.sum``, ``np.var``, ``np.median``, ...

Each rule is ``rule(exact, *args, **kwargs)``: it gets numpy's own result and the
arguments (numbers and lists holding nodes already made array nodes) and returns the node,
made with an op entry (``_link(op, exact, parent, params=...)``) or built from other numpy
calls on nodes (``np.median`` is a sort and a mean); None where it has no rule for these
arguments (numpy's result is kept and the cut reported). See :mod:`gradmagic.core.array`.
"""

from __future__ import annotations

import numpy as np

from . import tensor as _t
from .array import (
    Array,
    FUNCTION_RULES,
    Scalar64,
    _COPY,
    _CUMSUM,
    _F64,
    _MAX,
    _MEAN,
    _MIN,
    _NoValue,
    _RESHAPE,
    _SUM,
    _adopt,
    _dtype_ok,
    _is_tensor,
    _lift,
    _link,
    _node_of,
    _parent,
    _pv,
    _quiet_graph,
)
from .tensor import TENSOR_OPS, Tensor


def _reduction(op):
    def rule(
        exact,
        a,
        axis=None,
        dtype=None,
        out=None,
        keepdims=_NoValue,
        initial=_NoValue,
        where=_NoValue,
        **extra,
    ):
        if (
            extra
            or not _is_tensor(a)
            or not _dtype_ok(dtype)
            or initial is not _NoValue
            or (where is not _NoValue and where is not True)
            or out is not None
        ):
            return None
        keep = False if keepdims is _NoValue else bool(keepdims)
        axes = None if axis is None else _t._axes(axis, a.ndim)
        params = {"axis": axes, "keepdims": keep}
        if a.__class__ is not Tensor and a.requires_grad:  # numpy's exact result is the node's
            return _link(op, exact, a, None, params)
        with _quiet_graph():  # numpy's exact result warned already
            return _t._apply(op, a, None, params)

    return rule


def _r_extreme(op):
    def rule(exact, a, axis=None, out=None, keepdims=_NoValue, initial=_NoValue, where=_NoValue):
        return _reduction(op)(exact, a, axis, None, out, keepdims, initial, where)

    return rule


def _r_mean(exact, a, axis=None, dtype=None, out=None, keepdims=_NoValue, *, where=_NoValue):
    return _reduction(_MEAN)(exact, a, axis, dtype, out, keepdims, _NoValue, where)


def _r_var(
    exact,
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims=_NoValue,
    *,
    where=_NoValue,
    mean=_NoValue,
    correction=_NoValue,
    _std=False,
):
    if (
        not _is_tensor(a)
        or not _dtype_ok(dtype)
        or out is not None
        or (where is not _NoValue and where is not True)
        or mean is not _NoValue
    ):
        return None
    if a.__class__ is Scalar64:  # one number: a 0-d array of it
        a = _adopt(np.array(_pv(a), dtype=_F64), _t._apply(_COPY, a))
    if correction is not _NoValue:
        ddof = correction
    keep = False if keepdims is _NoValue else bool(keepdims)
    axes = None if axis is None else _t._axes(axis, a.ndim)
    n = a.size if axes is None else int(np.prod([a.shape[i] for i in axes]))
    with _quiet_graph():
        d = a - np.mean(a, axis=axes, keepdims=True)
        v = np.sum(abs2(d), axis=axes, keepdims=keep) / (n - ddof)
        if _std and n == 1:  # the spread of one number is 0 wherever it is
            return v * 0.0
        return np.sqrt(v) if _std else v


def abs2(x):
    """``|x|²`` of an array node, elementwise: ``x * x``, or ``Re(x * conj(x))`` if complex."""
    return x * x if x.dtype.kind != "c" else np.real(x * np.conj(x))


def _r_std(exact, *args, **kwargs):
    return _r_var(exact, *args, _std=True, **kwargs)


def _r_cumsum(exact, a, axis=None, dtype=None, out=None):
    if not _is_tensor(a) or a.__class__ is Scalar64 or not _dtype_ok(dtype) or out is not None:
        return None
    if axis is None:
        flat = a.reshape(-1) if a.__class__ is Array else Tensor.reshape(a, -1)
        return _t._apply(_CUMSUM, flat, None, {"axis": 0})
    return _t._apply(_CUMSUM, a, None, {"axis": _t._axes(axis, a.ndim)[0]})


def _r_select(exact, condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        return None
    with _quiet_graph():
        out = _lift(default)
        for cond, choice in reversed(list(zip(condlist, choicelist))):
            out = np.where(np.asarray(_pv(cond), dtype=bool), _lift(choice), out)
        return np.broadcast_to(out, exact.shape) if np.shape(out) != exact.shape else out


def _r_where(exact, condition, x=None, y=None):
    if x is None or y is None:
        return None
    px, py = _parent(x), _parent(y)
    if px is None or py is None:
        return None
    cond = (
        np.asarray(_pv(condition)) != 0
        if _is_tensor(condition)
        else np.asarray(_pv(condition), dtype=bool)
    )
    return _link(TENSOR_OPS["where"], exact, px, py, {"cond": cond})


def _r_clip(exact, a, a_min=_NoValue, a_max=_NoValue, out=None, **kwargs):
    if out is not None or kwargs or not _is_tensor(a):
        return None
    lo = None if a_min is _NoValue else a_min
    hi = None if a_max is _NoValue else a_max
    with _quiet_graph():
        r = a
        if lo is not None:
            r = np.maximum(r, lo)
        if hi is not None:
            r = np.minimum(r, hi)
    return r if r is not a else _t._apply(_COPY, a)


def _r_sort(exact, a, axis=-1, kind=None, order=None, *, stable=None):
    node = _node_of(a)
    if node is None or order is not None:
        return None
    plain = np.asarray(_pv(a), dtype=np.result_type(_pv(a), _F64))
    if axis is None:
        plain = plain.reshape(-1)
        node = _t._apply(_RESHAPE, node, None, {"shape": (-1,)})
        axis = 0
    axis = _t._axes(axis, plain.ndim)[0]
    where = np.argsort(plain, axis=axis, kind="stable")
    return _link(TENSOR_OPS["sort"], exact, node, None, {"axis": axis, "order": where})


def _r_partition(exact, a, kth, axis=-1, kind="introselect", order=None):
    node = _node_of(a)
    if node is None or order is not None or axis is None:
        return None
    plain = np.asarray(_pv(a), dtype=np.result_type(_pv(a), _F64))
    axis = _t._axes(axis, plain.ndim)[0]
    where = np.argpartition(plain, _pv(kth), axis=axis, kind=kind)
    if not np.array_equal(np.take_along_axis(plain, where, axis), exact, equal_nan=True):
        return None
    return _link(TENSOR_OPS["sort"], exact, node, None, {"axis": axis, "order": where})


def _r_cumprod(exact, a, axis=None, dtype=None, out=None):
    node = _node_of(a)
    if node is None or not _dtype_ok(dtype) or out is not None:
        return None
    if axis is None:
        node = _t._apply(_RESHAPE, node, None, {"shape": (-1,)})
        axis = 0
    else:
        axis = _t._axes(axis, np.ndim(_pv(a)))[0]
    return _link(TENSOR_OPS["cumprod"], exact, node, None, {"axis": axis})


def _r_median(exact, a, axis=None, out=None, overwrite_input=False, keepdims=False):
    node = _node_of(a)
    if node is None or out is not None:
        return None
    with _quiet_graph():
        flat = axis is None
        s = np.sort(node, axis=None if flat else axis)
        ax = 0 if flat else _t._axes(axis, np.ndim(_pv(a)))[0]
        n = np.shape(s)[ax]
        mid = [n // 2] if n % 2 else [n // 2 - 1, n // 2]
        picked = s[(slice(None),) * ax + (np.array(mid),)]
        m = np.mean(picked, axis=ax, keepdims=True)
        return m.reshape(np.shape(exact)) if np.shape(m) != np.shape(exact) else m


def _r_diff(exact, a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    node = _node_of(a)
    if node is None:
        return None
    with _quiet_graph():
        if node.__class__ is not Array and node.__class__ is not Tensor:
            node = _adopt(np.array(_pv(a)), _t._apply(_COPY, node))
        ndim = np.ndim(_pv(a))
        ax = _t._axes(axis, ndim)[0]
        parts = [node]
        if prepend is not _NoValue:
            parts.insert(
                0,
                np.broadcast_to(_pv(prepend), _edge_shape(node, ax))
                if np.ndim(_pv(prepend)) == 0
                else prepend,
            )
        if append is not _NoValue:
            parts.append(
                np.broadcast_to(_pv(append), _edge_shape(node, ax))
                if np.ndim(_pv(append)) == 0
                else append
            )
        r = np.concatenate(parts, axis=ax) if len(parts) > 1 else node
        for _ in range(_t._int(n)):
            lo = (slice(None),) * ax + (slice(None, -1),)
            hi = (slice(None),) * ax + (slice(1, None),)
            r = r[hi] - r[lo]
        return r


def _r_gradient(exact, f, *varargs, axis=None, edge_order=1):
    """Central differences inside, one-sided at the edges (uniform spacing, edge order 1)."""
    node = _node_of(f)
    ndim = np.ndim(_pv(f))
    if (
        node is None
        or edge_order != 1
        or len(varargs) > 1
        or (varargs and np.ndim(_pv(varargs[0])))
    ):
        return None
    h = float(_pv(varargs[0])) if varargs else 1.0
    axes = tuple(range(ndim)) if axis is None else _t._axes(axis, ndim)
    parts = []
    with _quiet_graph():
        for ax in axes:

            def cut(start, stop, ax=ax):
                return node[(slice(None),) * ax + (slice(start, stop),)]

            inner = (cut(2, None) - cut(None, -2)) / (2.0 * h)
            first = (cut(1, 2) - cut(0, 1)) / h
            last = (cut(-1, None) - cut(-2, -1)) / h
            parts.append(np.concatenate([first, inner, last], axis=ax))
    if isinstance(exact, (list, tuple)):
        return type(exact)(_adopt(e, p) for e, p in zip(exact, parts))
    return parts[0]


def _edge_shape(node, ax):
    shape = list(np.shape(node))
    shape[ax] = 1
    return tuple(shape)


def _r_trace(exact, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if not _dtype_ok(dtype) or out is not None:
        return None
    with _quiet_graph():
        return np.sum(np.diagonal(_node_of(a), offset, axis1, axis2), axis=-1)


def _r_ptp(exact, a, axis=None, out=None, keepdims=False):
    if out is not None:
        return None
    node = _node_of(a)
    with _quiet_graph():
        return np.max(node, axis=axis, keepdims=keepdims) - np.min(
            node, axis=axis, keepdims=keepdims
        )


def _r_average(exact, a, axis=None, weights=None, returned=False, *, keepdims=_NoValue):
    if returned:
        return None
    node = _node_of(a)
    keep = False if keepdims is _NoValue else bool(keepdims)
    with _quiet_graph():
        if weights is None:
            return np.mean(node, axis=axis, keepdims=keep)
        w = _node_of(weights)
        if np.shape(_pv(weights)) != np.shape(_pv(a)):
            return None
        return np.sum(node * w, axis=axis, keepdims=keep) / np.sum(w, axis=axis, keepdims=keep)


def _r_nan_to_num(exact, x, copy=True, nan=0.0, posinf=None, neginf=None):
    node = _node_of(x)
    if node is None or not copy:
        return None
    return _link(
        TENSOR_OPS["nan_to_num"],
        exact,
        node,
        None,
        {
            "nan": float(_pv(nan)),
            "posinf": None if posinf is None else float(_pv(posinf)),
            "neginf": None if neginf is None else float(_pv(neginf)),
        },
    )


FUNCTION_RULES.update(
    {
        np.sum: _reduction(_SUM),
        np.mean: _r_mean,
        np.max: _r_extreme(_MAX),
        np.amax: _r_extreme(_MAX),
        np.min: _r_extreme(_MIN),
        np.amin: _r_extreme(_MIN),
        np.var: _r_var,
        np.std: _r_std,
        np.cumsum: _r_cumsum,
        np.where: _r_where,
        np.select: _r_select,
        np.clip: _r_clip,
        np.prod: _reduction(TENSOR_OPS["prod"]),
        np.cumprod: _r_cumprod,
        np.median: _r_median,
        np.diff: _r_diff,
        np.trace: _r_trace,
        np.ptp: _r_ptp,
        np.average: _r_average,
        np.gradient: _r_gradient,
        np.sort: _r_sort,
        np.partition: _r_partition,
        np.nan_to_num: _r_nan_to_num,
    }
)
