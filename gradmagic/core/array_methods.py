"""The methods of :class:`~gradmagic.core.array.Array` beyond numpy's dispatch.

In-place methods (``W.sort()``, ``W.fill(0)``) write the array's memory as numpy does and
tell the graph; methods with no gradient rule (``W.take(...)``) give numpy's own result with
the cut reported; the op table's methods a plain ndarray lacks (``W.exp()``, ``W.relu()``)
make nodes; ``tolist``, ``item`` and ``float`` count the conversion. ``gradmagic.core``
imports this module, which sets them on the class.
"""

from __future__ import annotations

import numpy as np

from . import tensor as _t
from .array import (
    Array,
    Scalar64,
    _F64,
    _cut_result,
    _deep_plain,
    _link,
    _ndarray,
    _pv,
    _view,
    _write,
    tracking,
)
from .engine import state
from .tensor import TENSOR_OPS


# mutating methods: numpy's own on the memory, the graph told
def _mutator(name):
    base = getattr(np.ndarray, name)

    def method(self, *args, **kwargs):
        result = [None]

        def write():
            result[0] = base(_view(self, _ndarray), *_deep_plain(args), **_deep_plain(kwargs))

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
        result = base(_view(self, _ndarray), *_deep_plain(args), **_deep_plain(kwargs))
        if values or not tracking():
            return result
        return _cut_result(result, f".{name}()", (self,))

    method.__name__ = name
    return method


for _name in (
    "diagonal",
    "repeat",
    "take",
    "compress",
    "choose",
    "prod",
    "cumprod",
    "trace",
    "byteswap",
    "ptp",
    "getfield",
):
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
Array.softmax = lambda self, axis=-1: _t.softmax(self, axis)
Array.log_softmax = lambda self, axis=-1: _t.log_softmax(self, axis)


def _converting(name):
    base = getattr(np.ndarray, name)

    def method(self, *args):
        if tracking() and self.requires_grad:
            state.float_conversions += 1
        return base(_view(self, _ndarray), *args)

    method.__name__ = name
    return method


for _name in ("tolist", "item", "__float__"):
    setattr(Array, _name, _converting(_name))
del _op, _name, _m
