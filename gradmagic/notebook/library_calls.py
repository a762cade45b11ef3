"""Which library functions keep a cell's graph, and how a call is named in a message.

:mod:`gradmagic.notebook.runtime` asks these questions of every library call a cell
makes: does numpy's function compute with the nodes it is given (``np.sum``), make
an array of an array node (``np.asarray(W)``), or read plain numbers (``np.zeros``),
which is a cut to report under the name :func:`_describe` gives.
"""

from __future__ import annotations

# bound here, as in the runtime: a cell that rebinds builtins.type changes its own code only
from builtins import isinstance, type  # noqa: A004

import sys

import numpy as np

from ..core import array as _array
from ..core.tensor import Tensor


def _flat(xs):
    """The items of ``xs``, one level into lists and tuples."""
    for x in xs:
        if type(x) in (list, tuple):
            yield from x
        else:
            yield x


_ARRAY_MAKERS = frozenset(
    getattr(np, name)
    for name in (
        "array asarray asanyarray ascontiguousarray asfortranarray require asarray_chkfinite"
    ).split()
)
"""``np.array(T)`` gives a graph-keeping copy of a Tensor, ``np.asarray(T)`` the Tensor; on an
array node, what numpy would give (the node itself where numpy gives the array back)."""


def _made_from_array(f, args, kwargs):
    """``np.asarray(W, ...)`` and its kin on an array node: numpy's result, the node kept.

    Where numpy would return the array itself, it is the node itself (``is`` holds); a
    copy of a dtype array nodes hold (float64, float32, float16, complex128) is a copy node;
    anything else (another dtype) is numpy's plain result, with the cut reported.
    """
    node = args[0]
    plain = _array.plain_array(node)
    result = f(plain, *args[1:], **kwargs)
    if result is plain:
        return node
    if (
        type(result) is np.ndarray
        and result.dtype in _array._HELD
        and result.shape == np.shape(plain)
    ):
        if not _array.tracking():
            return result
        return _array._adopt(result, _array._t._apply(_array._COPY, node))
    return _array._cut_result(result, _describe(f), (node,))


_TENSOR_MAKERS = frozenset({np.array, np.asarray, np.asanyarray})


def _array_of_one_tensor(f, args, kwargs) -> bool:
    """True for ``np.array(T)``, ``np.asarray(T, float)``...: a maker that keeps the graph."""
    if (
        f not in _TENSOR_MAKERS
        or type(args[0]) is not Tensor
        or len(args) > 2
        or set(kwargs) - {"dtype"}
    ):
        return False
    dtype = args[1] if len(args) == 2 else kwargs.get("dtype")
    return dtype is None or np.dtype(dtype) == np.float64


_GRAPH_FUNCTIONS = frozenset(
    getattr(np, name)
    for name in (
        "sum mean prod dot inner outer vdot max min amax amin clip where cumsum cumprod "
        "average trace diff sort median"
    ).split()
)
"""Numpy functions that compute with Values (object arrays) and keep the graph."""


def _numpy_without_graph(f) -> bool:
    if isinstance(f, np.ufunc):
        return False
    try:
        if f in _GRAPH_FUNCTIONS:
            return False
    except TypeError:  # unhashable
        return False
    module = getattr(f, "__module__", None)
    if not isinstance(module, str):  # a method of a numpy object: np.random.normal
        module = type(getattr(f, "__self__", None)).__module__
    return module.partition(".")[0] == "numpy"


def _describe(f) -> str:
    module = getattr(f, "__module__", None)
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)
    if isinstance(module, str) and module not in ("builtins", "__main__"):
        top = module.partition(".")[0]
        public = sys.modules.get(top[1:]) if top.startswith("_") else None
        if public is not None and getattr(public, name, None) is f:
            top = top[1:]  # _struct.pack is struct.pack to its user
        return f"{top}.{name}"
    return name
