"""numpy's functions that move, join, split or make arrays, on array nodes.

``np.reshape``, ``np.concatenate``, ``np.split``, ``np.pad``, ``np.array`` of a list of
nodes, ...: rules as in :mod:`gradmagic.core.numpy_reductions`. Elements that only move
(flip, roll, tile, pad) share one rule, :func:`_moving_rule`, over ``tensor_shapes._moving``.
"""

from __future__ import annotations

import numpy as np

from . import tensor as _t
from .array import (
    Array,
    FUNCTION_RULES,
    _CONCAT,
    _COPY,
    _GETITEM,
    _RESHAPE,
    _TRANSPOSE,
    _adopt,
    _dtype_ok,
    _is_tensor,
    _lift,
    _link,
    _ndarray,
    _node_of,
    _packed,
    _pv,
    _quiet_graph,
    _view,
)
from .tensor import TENSOR_OPS, Tensor


def _r_reshape(exact, a, shape=None, order="C", *, newshape=None, copy=None):
    if order not in ("C", "A") or copy or not _is_tensor(a):
        return None
    if a.__class__ is Array:
        return a.reshape(exact.shape)
    return _t._apply(_RESHAPE, a, None, {"shape": np.shape(exact)})


def _r_ravel(exact, a, order="C"):
    return _r_reshape(exact, a, order=order)


def _r_transpose(exact, a, axes=None):
    if a.__class__ is Array:
        return a.transpose(axes)
    return None


def _r_copy(exact, a, order="K", subok=False):
    if not _is_tensor(a):
        return None
    return _t._apply(_COPY, a)


def _r_atleast(exact, *arys):
    if len(arys) != 1 or not _is_tensor(arys[0]) or not isinstance(exact, _ndarray):
        return None
    a = arys[0]
    if exact.shape == np.shape(a):
        return a
    if a.__class__ is Array:
        return a.reshape(exact.shape)
    return _link(_RESHAPE, exact, a, None, {"shape": exact.shape})


# --------------------------------------------------------------------------- more numpy rules
def _ints(x):
    """An int or a (nested) tuple of ints, from ints, int nodes, lists or int arrays."""
    if x is None:
        return None
    if isinstance(x, (list, tuple, _ndarray)):
        return tuple(_ints(e) for e in x)
    return _t._int(x)


def _moving_rule(name, params_of):
    op = TENSOR_OPS[name]

    def rule(exact, a, *args, **kwargs):
        node = _node_of(a)
        if node is None or not isinstance(exact, _ndarray):
            return None
        params = params_of(np.ndim(_pv(a)), *args, **kwargs)
        if params is None:
            return None
        return _link(op, exact, node, None, params)

    return rule


def _p_flip(ndim, axis=None):
    return {"axis": None if axis is None else _t._axes(axis, ndim)}


def _p_roll(ndim, shift, axis=None):
    return {"shift": _ints(shift), "axis": _ints(axis)}


def _p_tile(ndim, reps):
    return {"reps": _ints(reps)}


def _p_repeat(ndim, repeats, axis=None):
    return {"repeats": _ints(repeats), "axis": _ints(axis)}


def _p_rot90(ndim, k=1, axes=(0, 1)):
    return {"k": _t._int(k), "axes": _ints(axes)}


def _p_moveaxis(ndim, source, destination):
    return {"source": _ints(source), "destination": _ints(destination)}


def _p_broadcast_to(ndim, shape, subok=False):
    return {
        "shape": _ints(shape) if isinstance(shape, (list, tuple, _ndarray)) else (_t._int(shape),)
    }


def _p_tri(ndim, k=0):
    return {"k": _t._int(k)}


def _p_diagonal(ndim, offset=0, axis1=0, axis2=1):
    return {"offset": _t._int(offset), "axis1": _t._int(axis1), "axis2": _t._int(axis2)}


_COPYING_PADS = frozenset({"edge", "reflect", "symmetric", "wrap"})


def _p_pad(ndim, pad_width, mode="constant", **kwargs):
    if not isinstance(mode, str):
        return None
    values = kwargs.pop("constant_values", 0)
    if (
        kwargs
        or (mode == "constant" and np.any(np.asarray(_pv(values)) != 0))
        or (mode != "constant" and mode not in _COPYING_PADS)
    ):
        return None
    width = np.asarray(_pv(pad_width))
    if width.dtype.kind not in "iu":
        return None
    return {"pad_width": width.tolist(), "mode": mode}


def _r_fliplr(exact, m):
    return _moving_rule("flip", lambda ndim: {"axis": (1,)})(exact, m)


def _r_flipud(exact, m):
    return _moving_rule("flip", lambda ndim: {"axis": (0,)})(exact, m)


def _r_swapaxes(exact, a, axis1, axis2):
    node = _node_of(a)
    ndim = np.ndim(_pv(a))
    order = list(range(ndim))
    i, j = _t._int(axis1) % ndim, _t._int(axis2) % ndim
    order[i], order[j] = order[j], order[i]
    return _link(_TRANSPOSE, exact, node, None, {"axes": tuple(order)})


def _r_squeeze(exact, a, axis=None):
    node = _node_of(a)
    if node is None:
        return None
    if node.__class__ is Array:
        return node.squeeze(axis)
    return _link(_RESHAPE, exact, node, None, {"shape": np.shape(exact)})


def _r_expand_dims(exact, a, axis):
    node = _node_of(a)
    if node is None:
        return None
    if node.__class__ is Array:
        return node.reshape(exact.shape)
    return _link(_RESHAPE, exact, node, None, {"shape": np.shape(exact)})


def _fold(op, nodes, params):
    """``op`` over the nodes as a balanced tree (each op takes two)."""
    while len(nodes) > 1:
        nodes = [
            _t._apply(op, nodes[i], nodes[i + 1], params) if i + 1 < len(nodes) else nodes[i]
            for i in range(0, len(nodes), 2)
        ]
    return nodes[0]


def _rows(arrays):
    """The sequence a stacking function reads: an array node given alone is its rows."""
    if _is_tensor(arrays) and np.ndim(_pv(arrays)):
        return [arrays[i] for i in range(len(arrays))]
    return arrays


def _r_concatenate(exact, arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = _rows(arrays)
    if (
        out is not None
        or not _dtype_ok(dtype)
        or not isinstance(arrays, (list, tuple))
        or not arrays
    ):
        return None
    nodes = [_node_of(x) for x in arrays]
    if any(n is None for n in nodes):
        return None
    if axis is None:
        nodes = [_t._apply(_RESHAPE, n, None, {"shape": (-1,)}) for n in nodes]
        axis = 0
    else:
        axis = _t._axes(axis, np.ndim(exact))[0]
    if len(nodes) == 1:
        return _t._apply(_COPY, nodes[0])
    return _fold(_CONCAT, nodes, {"axis": axis})


def _r_stack(exact, arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = _rows(arrays)
    if (
        out is not None
        or not _dtype_ok(dtype)
        or not isinstance(arrays, (list, tuple))
        or not arrays
    ):
        return None
    axis = _t._axes(axis, np.ndim(exact))[0]
    nodes = []
    for x in arrays:
        n = _node_of(x)
        if n is None:
            return None
        shape = list(np.shape(_pv(x)))
        shape.insert(axis, 1)
        nodes.append(_t._apply(_RESHAPE, n, None, {"shape": tuple(shape)}))
    return nodes[0] if len(nodes) == 1 else _fold(_CONCAT, nodes, {"axis": axis})


def _reshaped(tup, shape_of) -> list | None:
    """Each array of ``tup`` as a node of the shape ``shape_of(its numbers)`` gives (None:
    as it is), or None when ``tup`` is not a sequence of arrays the graph has."""
    tup = _rows(tup)
    if not isinstance(tup, (list, tuple)) or not tup:
        return None
    nodes = []
    for x in tup:
        n = _node_of(x)
        if n is None:
            return None
        shape = shape_of(_pv(x))
        nodes.append(n if shape is None else _t._apply(_RESHAPE, n, None, {"shape": shape}))
    return nodes


def _r_hstack(exact, tup, *, dtype=None, casting="same_kind"):
    nodes = _reshaped(tup, lambda v: np.atleast_1d(v).shape)
    if nodes is None:
        return None
    axis = 0 if np.ndim(exact) == 1 else 1
    return _r_concatenate(exact, nodes, axis=axis, dtype=dtype)


def _r_vstack(exact, tup, *, dtype=None, casting="same_kind"):
    nodes = _reshaped(tup, lambda v: np.atleast_2d(v).shape)
    return None if nodes is None else _r_concatenate(exact, nodes, axis=0, dtype=dtype)


def _column(v):
    """A 1-d array (or a number) as a column; a 2-d one as it is."""
    return np.atleast_1d(v).shape + (1,) if np.ndim(v) < 2 else None


def _r_column_stack(exact, tup):
    nodes = _reshaped(tup, _column)
    return None if nodes is None else _r_concatenate(exact, nodes, axis=1)


def _r_dstack(exact, tup):
    tup = _rows(tup)
    if not isinstance(tup, (list, tuple)) or not tup:
        return None
    with _quiet_graph():
        return np.concatenate([np.atleast_3d(_lift(x)) for x in tup], axis=2)


def _r_append(exact, arr, values, axis=None):
    with _quiet_graph():
        if axis is None:
            return np.concatenate([np.ravel(_lift(arr)), np.ravel(_lift(values))])
        return np.concatenate([_lift(arr), _lift(values)], axis=axis)


def _r_split(exact, ary, indices_or_sections, axis=0):
    node = _node_of(ary)
    if node is None or not isinstance(exact, list):
        return None
    ax = _t._axes(axis, np.ndim(_pv(ary)))[0]
    parts, start = [], 0
    for piece in exact:
        stop = start + piece.shape[ax]
        index = (slice(None),) * ax + (slice(start, stop),)
        parts.append(_link(_GETITEM, piece, node, None, {"index": index, "basic": True}))
        start = stop
    return parts


def _r_split_along(axis):
    def rule(exact, ary, indices_or_sections):
        ax = 0 if axis == 1 and np.ndim(_pv(ary)) == 1 else axis
        return _r_split(exact, ary, indices_or_sections, ax)

    return rule


def _r_rollaxis(exact, a, axis, start=0):
    node = _node_of(a)
    ndim = np.ndim(_pv(a))
    axis, start = _t._int(axis) % ndim, _t._int(start)
    start = start + ndim if start < 0 else start
    order = list(range(ndim))
    if axis < start:
        start -= 1
    order.remove(axis)
    order.insert(start, axis)
    return _link(_TRANSPOSE, exact, node, None, {"axes": tuple(order)})


def _as_array_node(node):
    """An Array node for ``node`` (a Tensor or a constant made by a rule)."""
    if node.__class__ is Array or node.__class__ is Tensor:
        return node
    return (
        _adopt(np.array(node.data), _t._apply(_COPY, node))
        if node.requires_grad
        else _view(np.array(node.data), Array)
    )


def _r_linspace(
    exact, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None
):
    if retstep or not _dtype_ok(dtype) or axis != 0 or np.ndim(_pv(start)) or np.ndim(_pv(stop)):
        return None
    n = _t._int(num)
    div = (n - 1) if endpoint else n
    with _quiet_graph():
        lo, hi = _lift(start), _lift(stop)
        frac = np.arange(n) / div if div > 0 else np.zeros(n)  # num=1: [start]; 0: []
        return lo + (hi - lo) * frac


def _r_full(exact, shape, fill_value, dtype=None, order="C", *, device=None, like=None):
    node = _node_of(fill_value)
    if node is None or not _dtype_ok(dtype) or not isinstance(exact, _ndarray):
        return None
    return _link(TENSOR_OPS["broadcast_to"], exact, node, None, {"shape": exact.shape})


def _part(name):
    """The rule of ``np.real``, ``np.imag``: the op ``name`` of the node."""

    def rule(exact, val):
        node = _node_of(val)
        return None if node is None else _t._apply(TENSOR_OPS[name], node)

    return rule


def _r_real_if_close(exact, a, tol=100):
    return _part("real" if np.isrealobj(exact) else "copy")(exact, a)


def _r_angle(exact, z, deg=False):
    node = _part("angle")(exact, z)
    return np.rad2deg(node) if deg and node is not None else node


def _r_array(exact, obj, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    if not _dtype_ok(dtype) or ndmin or not isinstance(exact, _ndarray):
        return None
    if obj.__class__ is list or obj.__class__ is tuple:
        return _packed(obj)
    obj = _lift(obj)  # a number node: the 0-d array of it
    if _is_tensor(obj) and np.shape(_pv(obj)) == exact.shape:
        return _t._apply(_COPY, obj)
    return None


def _r_asarray(exact, a, dtype=None, order=None, *, device=None, copy=None, like=None):
    return _r_array(exact, a, dtype)


FUNCTION_RULES.update(
    {
        np.reshape: _r_reshape,
        np.ravel: _r_ravel,
        np.transpose: _r_transpose,
        np.copy: _r_copy,
        np.atleast_1d: _r_atleast,
        np.atleast_2d: _r_atleast,
        np.atleast_3d: _r_atleast,
        np.squeeze: _r_squeeze,
        np.expand_dims: _r_expand_dims,
        np.flip: _moving_rule("flip", _p_flip),
        np.fliplr: _r_fliplr,
        np.flipud: _r_flipud,
        np.roll: _moving_rule("roll", _p_roll),
        np.tile: _moving_rule("tile", _p_tile),
        np.repeat: _moving_rule("repeat", _p_repeat),
        np.rot90: _moving_rule("rot90", _p_rot90),
        np.moveaxis: _moving_rule("moveaxis", _p_moveaxis),
        np.swapaxes: _r_swapaxes,
        np.broadcast_to: _moving_rule("broadcast_to", _p_broadcast_to),
        np.tril: _moving_rule("tril", _p_tri),
        np.triu: _moving_rule("triu", _p_tri),
        np.diag: _moving_rule("diag", _p_tri),
        np.diagonal: _moving_rule("diagonal", _p_diagonal),
        np.pad: _moving_rule("pad", _p_pad),
        np.concatenate: _r_concatenate,
        np.stack: _r_stack,
        np.hstack: _r_hstack,
        np.vstack: _r_vstack,
        np.column_stack: _r_column_stack,
        np.dstack: _r_dstack,
        np.append: _r_append,
        np.split: _r_split,
        np.array_split: _r_split,
        np.hsplit: _r_split_along(1),
        np.vsplit: _r_split_along(0),
        np.dsplit: _r_split_along(2),
        np.rollaxis: _r_rollaxis,
        np.linspace: _r_linspace,
        np.full: _r_full,
        np.real: _part("real"),
        np.imag: _part("imag"),
        np.angle: _r_angle,
        np.real_if_close: _r_real_if_close,
        np.array: _r_array,
        np.asarray: _r_asarray,
        np.asanyarray: _r_asarray,
    }
)
if hasattr(np, "row_stack"):  # numpy < 2.4: vstack's other name
    FUNCTION_RULES[np.row_stack] = _r_vstack
