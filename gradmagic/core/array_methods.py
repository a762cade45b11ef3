"""The methods of :class:`~gradmagic.core.array.Array` beyond numpy's dispatch.

Indexing, views and reductions give numpy's own result and, while a cell is recorded, link it
to the array with the op table's entry (``W[0]``, ``W.T``, ``W.reshape(2, 3)``, ``W.sum()``).
In-place methods (``W.sort()``, ``W.fill(0)``) write the array's memory as numpy does and
tell the graph; methods that are numpy's functions of the array (``W.prod(1)``, ``W.trace()``)
take the function's rule; methods with no gradient rule (``W.compress(...)``) give numpy's
own result with the cut reported; the op table's methods a plain ndarray lacks (``W.exp()``,
``W.relu()``) make nodes; ``item()`` of one element is a number node of the graph;
``tolist`` and ``float`` count the conversion. ``gradmagic.core`` imports this module, which
sets them on the class.
"""

from __future__ import annotations

import numpy as np

from . import array_writes as _writes
from . import tensor as _t
from .number_nodes import Float64
from .array import (
    FUNCTION_RULES,
    _COPY,
    as_float,
    _F64,
    _GETITEM,
    _HELD,
    _RESHAPE,
    Array,
    Complex,
    Scalar64,
    _SCALAR_ARRAYS,
    _adopt,
    _cut_result,
    _deep_plain,
    _link,
    _ndarray,
    _NoValue,
    _numpy,
    _plain_key,
    _pv,
    _setitem,
    _tracked,
    _view,
    _write,
    tracking,
)
from .engine import state
from .tensor import TENSOR_OPS, Tensor


def _element(key, ndim: int):
    """``key`` as a tuple of ``ndim`` plain ints, if it is one element's (else None)."""
    if key.__class__ is int:
        return (key,) if ndim == 1 else None
    if key.__class__ is not tuple or len(key) != ndim:
        return None
    for k in key:
        if k.__class__ is not int:
            return None
    return key


class _ArraySurface:
    """Array's indexing, views and reductions as numpy has them; copied onto Array below."""

    # ---------------------------------------------------------------- indexing and views
    def __getitem__(self, key):
        if not (tracking() and self.requires_grad):
            return _ndarray.__getitem__(_view(self, _ndarray), _plain_key(key))
        if self.__dict__.get("_open") is not None:
            node = _writes.read(self, key)
            if node is not None:
                return node
        index = _element(key, self.ndim)
        if index is not None:  # one element (a loop's W[i, j]): a number node of it
            exact = _ndarray.__getitem__(self, index)
            return _link(_GETITEM, exact, self, None, {"index": index, "basic": True}, False)
        exact = _ndarray.__getitem__(self, _plain_key(key))
        try:
            index, basic = _t._index(key)
        except (IndexError, TypeError):
            return _cut_result(exact, "indexing with this key", (self,))
        # numpy's own result is the node: the picked numbers are not computed again
        return _link(_GETITEM, exact, self, None, {"index": index, "basic": basic}, False)

    def __setitem__(self, key, value):
        plain_key = _plain_key(key)
        if not tracking() or not (self.requires_grad or self._a is not None or _tracked(value)):
            _ndarray.__setitem__(_view(self, _ndarray), plain_key, _pv(value))
            return
        _setitem(self, key, plain_key, value)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        if not (tracking() and self.requires_grad):
            return iter(_view(self, _ndarray))
        return (self[i] for i in range(len(self)))

    @property
    def flat(self):
        return _view(self, _ndarray).flat

    @flat.setter
    def flat(self, value):
        def write():
            _view(self, _ndarray).flat = _deep_plain(value)

        _write(self, "an assignment to .flat", write)

    @property
    def T(self):
        return self.transpose()

    @property
    def mT(self):
        return np.matrix_transpose(self)

    @property
    def real(self):
        return np.real(self) if self.dtype.kind == "c" else self.view()

    @property
    def imag(self):
        return np.imag(self) if self.dtype.kind == "c" else _view(self, _ndarray).imag

    def view(self, *args, **kwargs):
        if not args and not kwargs:
            if tracking() and self.requires_grad:
                return _adopt(
                    _ndarray.view(self), _t._apply(_RESHAPE, self, None, {"shape": self.shape})
                )
            return _view(self, _ndarray).view()
        return _view(self, _ndarray).view(*args, **kwargs)

    def reshape(self, *shape, order="C", copy=None):
        plain = _view(self, _ndarray)
        if not (tracking() and self.requires_grad) or order not in ("C", "A") or copy:
            exact = plain.reshape(*shape, order=order, copy=copy)
            return _cut_result(exact, "reshape in this order", (self,)) if tracking() else exact
        exact = plain.reshape(*shape)
        if np.may_share_memory(exact, plain):
            exact = _ndarray.reshape(self, *shape)
        return _adopt(exact, _t._apply(_RESHAPE, self, None, {"shape": exact.shape}))

    def ravel(self, order="C"):
        return (
            self.reshape(-1, order=order)
            if order in ("C", "A")
            else _cut_result(_view(self, _ndarray).ravel(order), "ravel in this order", (self,))
        )

    def flatten(self, order="C"):
        if not (tracking() and self.requires_grad) or order not in ("C", "A"):
            return _cut_result(_view(self, _ndarray).flatten(order), "flatten", (self,))
        return self.copy().reshape(-1)

    def squeeze(self, axis=None):
        exact = _view(self, _ndarray).squeeze(axis)
        if not (tracking() and self.requires_grad):
            return exact
        return _adopt(
            _ndarray.reshape(self, exact.shape),
            _t._apply(_RESHAPE, self, None, {"shape": exact.shape}),
        )

    def transpose(self, *axes):
        plain = _view(self, _ndarray)
        if not (tracking() and self.requires_grad):
            return plain.transpose(*axes)
        exact = _ndarray.transpose(self, *axes)
        node = Tensor.transpose(self, *axes)
        return _adopt(exact, node)

    def swapaxes(self, axis1, axis2):
        exact = _view(self, _ndarray).swapaxes(axis1, axis2)
        if not (tracking() and self.requires_grad):
            return exact
        order = list(range(self.ndim))
        a, b = _t._axes((axis1, axis2), self.ndim) if axis1 != axis2 else (0, 0)
        order[a], order[b] = order[b], order[a]
        return self.transpose(order)

    def copy(self, order="C"):
        exact = _view(self, _ndarray).copy(order)
        if not (tracking() and self.requires_grad):
            return exact
        return _adopt(exact, _t._apply(_COPY, self))

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        exact = _numpy(
            _ndarray.astype,
            (_view(self, _ndarray), dtype),
            {"order": order, "casting": casting, "copy": copy},
        )
        if not (tracking() and self.requires_grad):
            return exact
        if exact.dtype not in _HELD:
            return _cut_result(exact, f"astype({np.dtype(dtype).name})", (self,))
        if not copy and exact.dtype == self.dtype:  # numpy gives the array itself
            return self
        return _adopt(exact, _t._apply(_COPY, self))

    # ---------------------------------------------------------------- reductions
    def sum(self, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True):
        return np.sum(
            self, axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial, where=where
        )

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
        return np.mean(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims, where=where)

    def var(
        self,
        axis=None,
        dtype=None,
        out=None,
        ddof=0,
        keepdims=False,
        *,
        where=True,
        mean=_NoValue,
        correction=_NoValue,
    ):
        return np.var(
            self,
            axis=axis,
            dtype=dtype,
            out=out,
            ddof=ddof,
            keepdims=keepdims,
            where=where,
            mean=mean,
            correction=correction,
        )

    def std(
        self,
        axis=None,
        dtype=None,
        out=None,
        ddof=0,
        keepdims=False,
        *,
        where=True,
        mean=_NoValue,
        correction=_NoValue,
    ):
        return np.std(
            self,
            axis=axis,
            dtype=dtype,
            out=out,
            ddof=ddof,
            keepdims=keepdims,
            where=where,
            mean=mean,
            correction=correction,
        )

    def max(self, axis=None, out=None, keepdims=False, initial=_NoValue, where=True):
        return np.max(self, axis=axis, out=out, keepdims=keepdims, initial=initial, where=where)

    def min(self, axis=None, out=None, keepdims=False, initial=_NoValue, where=True):
        return np.min(self, axis=axis, out=out, keepdims=keepdims, initial=initial, where=where)

    def cumsum(self, axis=None, dtype=None, out=None):
        return np.cumsum(self, axis=axis, dtype=dtype, out=out)

    def dot(self, b, out=None):
        return np.dot(self, b, out=out)

    def clip(self, min=None, max=None, out=None, **kwargs):
        return np.clip(self, min, max, out=out, **kwargs)


_t._onto(Array, _ArraySurface)
del _ArraySurface


# mutating methods: numpy's own on the memory, the graph told
def _mutator(name):
    base = getattr(np.ndarray, name)

    def method(self, *args, **kwargs):
        result = [None]

        def write():
            plain = self if name == "resize" else _view(self, _ndarray)
            result[0] = _numpy(base, (plain, *_deep_plain(args)), _deep_plain(kwargs))
            owner = self.base  # the user's array a leaf views, resized alike (its shape)
            if name == "resize" and owner.__class__ is _ndarray and owner.size == self.size:
                if owner.flags.c_contiguous and owner.ctypes.data == self.ctypes.data:
                    owner.shape = self.shape

        _write(self, f".{name}()", write, args)
        return result[0]

    method.__name__ = name
    return method


for _name in ("sort", "fill", "put", "partition", "resize", "setfield", "itemset"):
    if hasattr(np.ndarray, _name):
        setattr(Array, _name, _mutator(_name))


# methods with no gradient rule: numpy's own on the plain array (the cut reported)
def _plain_method(name, values: bool):
    base = getattr(np.ndarray, name)

    def method(self, *args, **kwargs):
        result = _numpy(base, (_view(self, _ndarray), *_deep_plain(args)), _deep_plain(kwargs))
        if values or not tracking():
            return result
        return _cut_result(result, f".{name}()", (self,))

    method.__name__ = name
    return method


# methods that are numpy's function of the array (a.prod(1) is np.prod(a, 1)): its rule
def _function_method(name):
    base, func = getattr(np.ndarray, name), getattr(np, name)

    def method(self, *args, **kwargs):
        result = _numpy(base, (_view(self, _ndarray), *_deep_plain(args)), _deep_plain(kwargs))
        if not (tracking() and self.requires_grad):
            return result
        try:
            node = FUNCTION_RULES[func](result, self, *args, **kwargs)
        except Exception:  # noqa: BLE001 - arguments the rule does not read: a cut
            node = None
        if node is None:
            return _cut_result(result, f".{name}()", (self,))
        return _adopt(result, node)

    method.__name__ = name
    return method


for _name in ("diagonal", "repeat", "take", "prod", "cumprod", "trace", "ptp"):
    if hasattr(np.ndarray, _name):
        setattr(Array, _name, _function_method(_name))
for _name in ("compress", "choose", "byteswap", "getfield"):
    if hasattr(np.ndarray, _name):
        setattr(Array, _name, _plain_method(_name, False))
for _name in (
    "argsort",
    "argpartition",
    "searchsorted",
    "nonzero",
    "round",
    "argmax",
    "argmin",
    "all",
    "any",
):
    if hasattr(np.ndarray, _name):
        setattr(Array, _name, _plain_method(_name, True))
del _name


# the op table's methods a plain ndarray lacks (x.exp(), x.relu(), x.softmax()): what
# gradmagic.nn and the magic's composites call; numpy's own names are numpy's
def _table_method(op, name):
    if op.arity != 1:
        return None

    def method(self):
        data = op.f(_pv(self))
        if not (tracking() and self.requires_grad):
            return data[()] if isinstance(data, _ndarray) and data.ndim == 0 else data
        return _link(op, np.asarray(data, dtype=_F64), self)

    method.__name__ = name
    method.__doc__ = f"{op.name} of this array, elementwise, as a node ({op.rule})."
    return method


for _op in TENSOR_OPS.values():
    for _name in _op.method.split():
        if not _name.startswith("__") and not hasattr(np.ndarray, _name):
            _m = _table_method(_op, _name)
            if _m is not None:
                setattr(Array, _name, _m)
                setattr(Scalar64, _name, _m)
# (methods put on the class here, as those of the table above)
Array.softmax = lambda self, axis=-1: _t.softmax(self, axis)  # type: ignore[attr-defined]
Array.log_softmax = lambda self, axis=-1: _t.log_softmax(self, axis)  # type: ignore[attr-defined]


def _converting(name):
    base = getattr(np.ndarray, name)

    def method(self, *args):
        if tracking() and self.requires_grad:
            state.float_conversions += 1
        return base(_view(self, _ndarray), *args)

    method.__name__ = name
    return method


def _item(self, *args):
    """``a.item()``, ``a.item(k)``, ``a.item(i, j)``: a number node of the same graph."""
    if not (tracking() and self.requires_grad and self.dtype.kind == "f"):
        return _converting_item(self, *args)
    _view(self, _ndarray).item(*args)  # numpy's own error for a wrong index
    if not args:
        return as_float(self)
    if len(args) == 1 and not isinstance(args[0], tuple):
        return as_float(self.reshape(-1)[args[0]])  # a flat index
    return as_float(self[args[0] if len(args) == 1 else args])


for _name in ("tolist", "item", "__float__"):
    setattr(Array, _name, _converting(_name))
_converting_item = Array.item
Array.item = _item  # type: ignore[method-assign]
del _op, _name, _m


def _scalar_astype(self, dtype, *args, **kwargs):
    """``s.astype(dtype)`` of a numpy scalar node: numpy's number, linked by a copy."""
    exact = _pv(self).astype(dtype, *args, **kwargs)
    if not (tracking() and self.requires_grad) or exact.dtype.kind not in "fc":
        return exact
    if exact.dtype not in _HELD:
        return _cut_result(exact, f"astype({exact.dtype.name})", (self,))
    return _link(_COPY, exact, self)


for _cls in (*(_SCALAR_ARRAYS - {Complex}), Float64):
    _cls.astype = _scalar_astype
