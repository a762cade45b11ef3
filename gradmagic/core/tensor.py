"""Tensors: numpy arrays as nodes of the same computation graph as ``Value``.

A :class:`Tensor` holds a float64 array (``data``) and, after ``backward()``,
the gradient of the target with respect to every element (``grad``, same
shape). Each operation is one numpy call, recorded with its entry in
:mod:`gradmagic.core.tensor_ops`; ``backward()`` walks the graph with the same
iterative sweep as scalars, so graphs may mix ``Value`` and ``Tensor`` nodes::

    >>> import numpy as np
    >>> X = Tensor([[1.0, 2.0], [3.0, 4.0]], label="X", requires_grad=False)
    >>> W = Tensor([[0.5], [-1.0]], label="W")
    >>> L = ((X @ W) ** 2).mean()
    >>> L.backward()
    >>> W.grad                      # 2/N · Xᵀ(X W)
    array([[ -9.],
           [-13.]])

Numpy functions keep the graph (``np.exp(T)``, ``np.sum(T, axis=0)``,
``np.maximum(T, 0)``, ``array + T``) through NEP 13/18 dispatch, and so do the
array methods a Tensor does not define itself (``T.std()``, ``T.cumsum()``):
they call the numpy function of the same name. Functions with no gradient here
raise a clear ``TypeError`` rather than silently dropping it. Comparisons give
plain boolean arrays.

The class and the making of a node are :mod:`gradmagic.core.tensor_nodes`' (the magic's
array nodes share them); this module adds what a numpy user reaches for (indexing, reshaping,
the numpy protocols, the op table's methods) and the free functions, and is the import path
for all of it. The operations and their rules are the ``tensor_*`` modules'; numpy's
functions on a Tensor (``np.sum(T)``) are :mod:`gradmagic.core.tensor_functions`'.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance, type) changes its own
# code, as in plain Python, and not the engine's
from builtins import isinstance, type  # noqa: A004

from collections.abc import Callable
from typing import Any

import numpy as np

from .engine import SCALAR_NODES, Value, state
from .tensor_ops import TENSOR_OPS

# the node helpers, also as tensor._apply, tensor._axes ... for the array and rule modules
from .tensor_nodes import (  # noqa: F401
    _ARRAY_CLASSES,
    _COPY,
    _CUMSUM,
    _FUNCTIONS,
    _F64,
    _GETITEM,
    _LOG_SOFTMAX,
    _MATMUL,
    _MAX,
    _MAXIMUM,
    _MEAN,
    _MIN,
    _MINIMUM,
    _MUL,
    _POW,
    _RESHAPE,
    _SOFTMAX,
    _SUM,
    _TRANSPOSE,
    _WHERE,
    _WRITABLE,
    Tensor,
    _apply,
    _axes,
    _binary,
    _constant,
    _deep_plain,
    _index,
    _int,
    _is_int,
    _on_plain_arrays,
    _operand,
    _plain,
    _used,
)

__all__ = ["Tensor", "tensor", "cross_entropy", "softmax", "log_softmax"]

_ARRAY_METHODS = frozenset(
    name
    for name in dir(np.ndarray)
    if not name.startswith("_")
    and callable(getattr(np.ndarray, name))
    and callable(getattr(np, name, None))
) - {"sort", "partition", "put", "resize", "compress"}
"""ndarray methods that are the numpy function of the same name on the array, so
``T.name(...)`` can be ``np.name(T, ...)``. Left out: those that change the
array in place (sort, partition, put, resize) or take it second (compress)."""


class _NumpySurface:
    """Tensor's methods a numpy user reaches for; :func:`_onto` copies them onto Tensor."""

    def softmax(self, axis: int = -1):
        return softmax(self, axis)

    def log_softmax(self, axis: int = -1):
        return log_softmax(self, axis)

    # ---------------------------------------------------------------- shapes
    def reshape(self, *shape):
        """The same elements in a new shape: ``T.reshape(2, 3)`` or ``T.reshape((2, 3))``."""
        if len(shape) == 1 and not _is_int(shape[0]):
            shape = shape[0]
        try:
            shape = tuple(_int(n) for n in shape)
        except TypeError:
            raise TypeError(f"a shape must be integers, got {shape!r}") from None
        return _apply(_RESHAPE, self, None, {"shape": shape})

    def flatten(self):
        """The elements as one axis (C order), like ``reshape(-1)``."""
        return self.reshape(-1)

    ravel = flatten

    def copy(self):
        """A new node with the same numbers whose gradient flows back to this one.

        The copy is the identity op (as ``torch.Tensor.clone``), so a cell that
        copies an array before computing with it keeps its gradients. For a
        fresh leaf that cuts the graph, make one: ``Tensor(T.data)``.
        """
        return _apply(_COPY, self)

    def astype(self, dtype, **kwargs):
        """A float64 copy (see :meth:`copy`); other dtypes would drop the gradient."""
        if kwargs or np.dtype(dtype) != _F64:
            if state.cut is not None:  # in a recorded cell: numpy's own result, cut reported
                return _on_plain_arrays("T.astype", self.data.astype, (dtype,), kwargs)
            if kwargs:
                raise TypeError(
                    f"Tensor.astype() takes no options ({', '.join(kwargs)}); "
                    "use T.data.astype(...) for a plain array (no gradient)"
                )
            raise TypeError(
                f"a Tensor holds float64 numbers and cannot become {dtype!r}; "
                f"use T.data.astype(...) for a plain array (no gradient)"
            )
        return self.copy()

    def transpose(self, *axes):
        """Axes reversed (no arguments) or permuted: ``T.transpose(1, 0, 2)``."""
        if len(axes) == 1 and (axes[0] is None or not _is_int(axes[0])):
            axes = axes[0]
        if axes is not None and len(axes) == 0:
            axes = None
        if axes is not None:
            norm = _axes(axes, self.ndim)
            if sorted(norm) != list(range(self.ndim)):
                raise ValueError(
                    f"transpose axes {tuple(axes)} are not a permutation of "
                    f"the {self.ndim} axes of shape {self.shape}"
                )
            axes = norm
        return _apply(_TRANSPOSE, self, None, {"axes": axes})

    @property
    def T(self):
        """The transpose (axes reversed)."""
        return self.transpose()

    def __getitem__(self, key):
        index, basic = _index(key)
        try:
            return _apply(_GETITEM, self, None, {"index": index, "basic": basic})
        except IndexError as e:
            raise IndexError(
                f"cannot index a tensor of shape {self.shape} with {key!r}: {e}"
            ) from None

    def __setitem__(self, key, value):
        """``T[key] = value`` on a leaf, outside a ``%%autograd`` run: writes into ``data``.

        So a plain cell can change an array that an earlier ``%%autograd`` run
        turned into a Tensor, as it could the array. A graph built earlier
        from this leaf reads its data, so it now sees the new numbers: run the
        cell again for gradients (and checks) of them. The result of an op, or
        any tensor while a cell is being recorded, cannot be changed in place:
        the graph would no longer match what the cell computed.
        """
        if self._a is not None or state.recording:
            what = "the result of an op" if self._a is not None else "a Tensor in %%autograd"
            raise TypeError(
                f"{what} cannot be changed in place (the graph would no longer "
                "match its data): build a new one, e.g. with np.where(mask, new, T)"
            )
        self.data[key] = value.data if isinstance(value, (Tensor, Value)) else value

    def __getattr__(self, name):
        """An array method a Tensor does not define (``T.std()``): the numpy function."""
        if (
            not name.startswith("_")
            and state.cut is not None
            and type(getattr(np.ndarray, name, None)).__name__ == "getset_descriptor"
        ):
            return getattr(self.data, name)  # T.flags, T.strides, T.nbytes: the array's
        if (
            not name.startswith("_")
            and name not in _ARRAY_METHODS
            and state.cut is not None
            and callable(getattr(np.ndarray, name, None))
        ):
            # in a recorded cell, any other array method (T.sort(), T.fill(0), T.tofile)
            # runs on the plain array as numpy's would, and the cut is reported
            bound = getattr(self.data, name)

            def plain_method(*args, **kwargs):
                return _on_plain_arrays(f"T.{name}", bound, args, kwargs)

            return plain_method
        if name.startswith("_") or name not in _ARRAY_METHODS:  # slots while unpickling, too
            raise AttributeError(f"'Tensor' object has no attribute {name!r}")
        function = getattr(np, name)

        def method(*args, **kwargs):
            return function(self, *args, **kwargs)

        method.__name__ = name
        return method

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # ---------------------------------------------------------------- numpy dispatch
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            what = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
            if state.cut is not None:  # in a recorded cell: as numpy would, on plain arrays
                return _on_plain_arrays(what, getattr(ufunc, method), inputs, kwargs)
            if "out" in kwargs:
                raise TypeError(
                    f"{what}(..., out=...) would write into an array in place, "
                    "which a Tensor cannot record: write T = T + ... instead"
                )
            raise TypeError(
                f"{what} with {', '.join(kwargs) or 'this method'} is not supported on Tensors"
            )
        op = _UFUNC_OPS.get(ufunc)
        if op is not None:
            if op.arity == 1:
                return _apply(op, inputs[0])
            return _binary(op, *inputs)
        special = _UFUNC_SPECIAL.get(ufunc)
        if special is not None:
            return special(*inputs)
        if ufunc in _UFUNC_VALUES:
            state.branch_events += 1
            return ufunc(*_plain(inputs))
        if state.cut is not None:
            return _on_plain_arrays(f"numpy.{ufunc.__name__}", ufunc, inputs, kwargs)
        raise TypeError(
            f"numpy.{ufunc.__name__} has no gradient rule in gradmagic, so it "
            "would cut the graph; use T.data for a plain array"
        )

    def __array_function__(self, func, types, args, kwargs):
        f = _FUNCTIONS.get(func)
        if f is not None:
            return f(*args, **kwargs)
        if func in _VALUE_FUNCTIONS or func in _SHAPE_FUNCTIONS:
            if func in _VALUE_FUNCTIONS:
                state.branch_events += 1
            return func(*_plain(args), **dict(zip(kwargs, _plain(kwargs.values()))))
        if _function_rule is not None:  # the rules the magic's arrays use (core.array)
            result = _function_rule(func, args, kwargs)
            if result is not NotImplemented:
                return result
        if state.cut is not None:
            return _on_plain_arrays(f"numpy.{func.__name__}", func, args, kwargs)
        raise TypeError(
            f"numpy.{func.__name__} has no gradient rule in gradmagic, so it "
            "would cut the graph; use T.data for a plain array"
        )


def _onto(cls, namespace) -> None:
    """The functions and properties defined in the class ``namespace``, as ``cls``'s own."""
    for name, attr in vars(namespace).items():
        if isinstance(attr, property):
            setattr(cls, name, attr)
        elif callable(attr):
            attr.__qualname__ = f"{cls.__name__}.{attr.__name__}"
            setattr(cls, name, attr)


_onto(Tensor, _NumpySurface)
del _NumpySurface


def has_rule(ufunc) -> bool:
    """True if a Tensor computes ``ufunc`` itself (with a gradient rule or as values)."""
    return ufunc in _UFUNC_OPS or ufunc in _UFUNC_SPECIAL or ufunc in _UFUNC_VALUES


def tensor(data, label: str = "", requires_grad: bool = True) -> Tensor:
    """A new leaf :class:`Tensor` (as ``torch.tensor``)."""
    return Tensor(data, label=label, requires_grad=requires_grad)


# --------------------------------------------------------------------------- free functions
def _as_tensor(x) -> Tensor:
    t = _operand(x)
    if t is None or t.__class__ in SCALAR_NODES:
        raise TypeError(f"expected a Tensor or an array, got {type(x).__name__}")
    return t


def softmax(x, axis: int = -1) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis`` (computed stably)."""
    x = _as_tensor(x)
    return _apply(_SOFTMAX, x, None, {"axis": _axes(axis, x.ndim)[0]})


def log_softmax(x, axis: int = -1) -> Tensor:
    """``log(softmax(x))`` along ``axis``, computed without overflow."""
    x = _as_tensor(x)
    return _apply(_LOG_SOFTMAX, x, None, {"axis": _axes(axis, x.ndim)[0]})


def cross_entropy(logits, targets) -> Tensor:
    """Mean negative log-likelihood of integer class ``targets`` under ``softmax(logits)``.

    ``logits`` has shape (N, C) (or (C,) for one example); ``targets`` holds N
    class indices in ``range(C)``. As ``torch.nn.functional.cross_entropy``.
    """
    logits = _as_tensor(logits)
    if isinstance(targets, Tensor):
        targets = targets.data
    t = np.asarray(targets)
    if logits.ndim not in (1, 2):
        raise ValueError(f"cross_entropy needs logits of shape (N, C) or (C,), got {logits.shape}")
    if t.dtype.kind == "f" and np.all(t == np.round(t)):
        t = t.astype(np.intp)
    if t.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy targets must be integer class indices, got {t.dtype}")
    n_classes = logits.shape[-1]
    expected = logits.shape[:-1]
    if t.shape != expected:
        raise ValueError(
            f"cross_entropy: logits of shape {logits.shape} need targets of "
            f"shape {expected}, got {t.shape}"
        )
    if t.size and (t.min() < 0 or t.max() >= n_classes):
        raise ValueError(f"cross_entropy targets must be in range({n_classes})")
    logp = log_softmax(logits, axis=-1)
    # (Tensor's indexing is put on the class when this module is imported)
    picked = logp[t] if logits.ndim == 1 else logp[np.arange(len(t)), t]  # type: ignore[index]
    return -picked.mean()


def _binary_or_raise(op, a, b, params=None):
    a2, b2 = _operand(a), _operand(b)
    if a2 is None or b2 is None:
        bad = a if a2 is None else b
        raise TypeError(f"{op.symbol} needs numbers or arrays, got {type(bad).__name__}")
    return _apply(op, a2, b2, params)


_UFUNC_OPS = {
    getattr(np, name): op
    for op in TENSOR_OPS.values()
    for name in op.numpy
    if isinstance(getattr(np, name, None), np.ufunc)
}
"""numpy ufunc → the tensor op it computes, from each entry's ``numpy`` names."""
_UFUNC_SPECIAL = {
    np.positive: lambda x: x,
    np.square: lambda x: _binary_or_raise(_POW, x, 2.0),
}
# results that depend on the numbers but carry no gradient (piecewise constant)
_UFUNC_VALUES = {
    np.greater,
    np.greater_equal,
    np.less,
    np.less_equal,
    np.equal,
    np.not_equal,
    np.isfinite,
    np.isnan,
    np.isinf,
    np.sign,
    np.signbit,
    np.floor,
    np.ceil,
    np.rint,
    np.trunc,
    np.logical_and,
    np.logical_or,
    np.logical_xor,
    np.logical_not,
    np.heaviside,
}

_VALUE_FUNCTIONS = {
    np.argmax,
    np.argmin,
    np.argsort,
    np.allclose,
    np.isclose,
    np.array_equal,
    np.count_nonzero,
    np.nonzero,
    np.any,
    np.all,
    np.round,
    np.around,
}
_SHAPE_FUNCTIONS = {np.shape, np.ndim, np.size, np.zeros_like, np.ones_like}


# --------------------------------------------------------------------------- methods from the op table
def _method(op):
    if op.arity == 1:

        def unary(self):
            return _apply(op, self)

        unary.__doc__ = f"{op.name} of this Tensor, elementwise ({op.rule})."
        return unary, None

    def forward(self, other):
        return _binary(op, self, other)

    def reflected(self, other):
        return _binary(op, other, self)

    forward.__doc__ = f"self {op.symbol} other as a new node ({op.rule})."
    reflected.__doc__ = f"other {op.symbol} self as a new node ({op.rule})."
    return forward, reflected


for _op in TENSOR_OPS.values():
    for _name in _op.method.split():
        _fwd, _rev = _method(_op)
        setattr(Tensor, _name, _fwd)
        if _rev is not None:
            setattr(Tensor, _name.replace("__", "__r", 1), _rev)
del _op, _name, _fwd, _rev

_function_rule: Callable[..., Any] | None = None
"""``core.array.tensor_function``: a numpy function of Tensors through the array rules
(NotImplemented where it has none; set by core.array)."""
