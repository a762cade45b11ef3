"""Writes into an array node's elements (``K[i, j] = y``), in time and memory in proportion
to what they write.

The first write makes the array one ``setitem`` node over a base (a snapshot of its
numbers and role before the write, as every in-place write makes). While no node reads the
array's current numbers, each further write adds ``(index, value)`` to that node's list
instead of copying the whole array again; its backward walks the list once, from the last
write. A read of one element (``K[i, j]``) is the value last written there (or the base's
element), so a loop that reads what it wrote (a dynamic programming table) keeps adding to
the same node. Any other read, a view, or an in-place operation closes the list: the next
write starts a new node over a snapshot.

The values are linked to the node when a graph walk (or the next snapshot) needs its
parents: they become one vector, a balanced tree of ``pack`` nodes over the values, whose
numbers are slices of one buffer.
"""

from __future__ import annotations

import math
import operator
import weakref

import numpy as np

from . import tensor as _t
from .array_nodes import (
    _F64,
    _HELD,
    _SCALAR_ARRAYS,
    Array,
    _COPY,
    _adopt,
    _link,
    _ndarray,
    _pv,
    _view,
)
from .engine import SCALAR_NODES, state
from .sites import cursor
from .tensor import TENSOR_OPS, Tensor

WRITES = TENSOR_OPS["setitem"]
_PACK, _RESHAPE, _GETITEM = TENSOR_OPS["pack"], _t._RESHAPE, _t._GETITEM
_MIN_WRITES = 4096
"""A node holds at most this many writes, or the array's size if larger: a new node's
snapshot then costs at most one element per write."""


class _Open:
    """The writes of an array node not linked into the graph yet."""

    __slots__ = ("writes", "values", "size", "writer", "limit", "site")

    def __init__(self, arr):
        self.writes: list = []  # (index, start, stop, shape), the op's params
        self.values: list = []  # each write's value: a node, or a plain float array
        self.size = 0  # the values' numbers so far
        self.writer = np.full(arr.shape, -1, dtype=np.int32)  # the last write of each element
        self.limit = max(_MIN_WRITES, arr.size)
        self.site = cursor.site


def can_add(arr) -> bool:
    """Whether a write into ``arr`` can join its open node: no node read its numbers since."""
    open_ = arr.__dict__.get("_open")
    if open_ is None or len(open_.writes) >= open_.limit:
        return False
    kids = arr.__dict__.get("_kids")
    return not kids or all(ref() is None for ref in kids)


def start(arr, base) -> None:
    """Make ``arr`` a ``setitem`` node over ``base`` (its numbers before the first write)."""
    open_ = _Open(arr)
    # (its kids now are the views of its memory _before_write linked back to it, which read
    # its numbers as they change: a write with one alive must not join the open node)
    arr._op, arr._a, arr._b = WRITES, base, None
    arr._params = {"writes": open_.writes}
    arr.requires_grad = True
    arr._site = open_.site
    arr.__dict__["_open"] = open_
    _t._used(base, arr)
    state.open_writes.append(weakref.ref(arr))


def add(arr, index, y) -> None:
    """Record ``arr[index] = y`` (the value as a node), which numpy has done."""
    open_ = arr.__dict__["_open"]
    k = len(open_.writes)
    if y.__class__ in SCALAR_NODES and _element(index, arr.ndim):  # K[i, j] = a number
        open_.writes.append((index, open_.size, open_.size + 1, ()))
        open_.values.append(y)
        open_.size += 1
        open_.writer[index] = k
        return
    ndim = np.ndim(open_.writer[index])
    if y.__class__ is Array or (y.__class__ is Tensor and not y.requires_grad):
        if y.requires_grad:  # its memory may change later: the write keeps its numbers now
            # (an Array here: a Tensor that enters this branch has no requires_grad)
            y = _link(_COPY, np.array(_view(y, _ndarray)), y)  # type: ignore[arg-type, type-var]
        else:
            y = np.array(_pv(y), dtype=_F64)
    shape = np.shape(_pv(y))
    if len(shape) > ndim:  # numpy drops a value's leading ones
        shape = shape[len(shape) - ndim :]
    shape = (1,) * (ndim - len(shape)) + shape
    size = math.prod(shape)
    open_.writes.append((index, open_.size, open_.size + size, shape))
    open_.values.append(y)
    open_.size += size
    open_.writer[index] = k


def _element(index, ndim: int) -> bool:
    """Whether ``index`` (a tuple of numpy's) picks one element by ints."""
    if len(index) != ndim:
        return False
    for i in index:
        if i.__class__ is not int:
            return False
    return True


def distinct(shape, index) -> bool:
    """Whether an index with integer arrays picks each element at most once (then each
    element's new number is the value's, as with a basic index)."""
    try:
        if len(index) == len(shape) and all(
            i.__class__ is np.ndarray and i.dtype.kind in "iu" for i in index
        ):
            picked = np.ravel_multi_index(np.broadcast_arrays(*index), shape, mode="wrap")
        else:
            picked = np.arange(int(np.prod(shape))).reshape(shape)[index]
    except (IndexError, ValueError, TypeError):
        return False
    return np.unique(picked).size == picked.size


def read(arr, key):
    """``arr[key]`` for one element of an open node: the value written there last (or the
    base's element) as a node, so the node needs no snapshot; None where it cannot."""
    items = key if key.__class__ is tuple else (key,)
    if len(items) != arr.ndim:
        return None
    for k in items:
        if k.__class__ is bool or not isinstance(k, (int, np.integer)):
            return None
    plain = tuple(map(operator.index, items))
    open_ = arr.__dict__["_open"]
    try:
        k = int(open_.writer[plain])
    except IndexError:  # numpy's own error, from the plain read
        return None
    exact = _ndarray.__getitem__(_view(arr, _ndarray), plain)
    if k < 0:
        return _adopt(exact, _t._apply(_GETITEM, arr._a, None, {"index": plain, "basic": True}))
    y = open_.values[k]
    cls = y.__class__
    if cls is np.ndarray:  # a constant
        return exact
    if cls in _SCALAR_ARRAYS or cls in SCALAR_NODES:
        return _link(_COPY, exact, y)
    return None


def close(arr) -> None:
    """Link ``arr``'s open writes into the graph: its values as one vector node."""
    open_ = arr.__dict__.pop("_open", None)
    if open_ is None:
        return
    arr._params = {"writes": tuple(open_.writes)}
    if not open_.writes:  # the only write raised: the base's numbers
        arr._op, arr._params = _COPY, None
        return
    arr._b = _vector(open_.values, open_.size, open_.site)
    _t._used(arr._b, arr)


def _vector(values, size: int, site: int):
    """One 1-d node holding every value's numbers in order: runs of constants merged,
    the nodes joined by a balanced tree of ``pack`` nodes whose data are views of one
    buffer (a node's numbers are its subtree's, one after the other)."""
    pieces: list = []  # (node or None for a constant run, its plain numbers)
    plain: list = []
    for y in values:
        if y.__class__ is np.ndarray:
            plain.append(y.reshape(-1))
            continue
        if plain:
            pieces.append((None, np.concatenate(plain)))
            plain = []
        pieces.append((y, np.ravel(_pv(y))))
    if plain:
        pieces.append((None, np.concatenate(plain)))
    buffer = np.concatenate([p[1] for p in pieces]) if len(pieces) > 1 else pieces[0][1]
    if buffer.size != size or buffer.dtype not in _HELD:
        buffer = np.asarray(buffer, dtype=np.result_type(buffer, _F64)).reshape(-1)
    nodes, start = [], 0
    for y, numbers in pieces:
        stop = start + numbers.size
        if y is None:
            node = _t._constant(buffer[start:stop])
        elif len(pieces) == 1 and np.ndim(_pv(y)) != 1:  # (pack ravels its inputs)
            node = _link(
                _RESHAPE, _view(buffer[start:stop], Array), y, None, {"shape": (stop - start,)}
            )
            node._site = site
        else:
            node = y
        nodes.append((node, start, stop))
        start = stop
    while len(nodes) > 1:
        level = []
        for i in range(0, len(nodes) - 1, 2):
            (a, s, _), (b, _, e) = nodes[i], nodes[i + 1]
            node = _link(_PACK, _view(buffer[s:e], Array), a, b)
            node._site = site
            level.append((node, s, e))
        if len(nodes) % 2:
            level.append(nodes[-1])
        nodes = level
    return nodes[0][0]


state.close_writes = close
