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

This module is longer than the others: the class carries the whole surface a numpy user
reaches for (operators, methods, indexing, the numpy protocols), and the node-making helpers
the magic's array nodes share with it, which the class's methods call and which cannot move
below it without an import cycle. The operations and their rules are the ``tensor_*``
modules'; numpy's functions on a Tensor (``np.sum(T)``) are :mod:`gradmagic.core.tensor_functions`'.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance, type) changes its own
# code, as in plain Python, and not the engine's
from builtins import float, int, isinstance, type  # noqa: A004

import numbers
import operator
from weakref import ref as _weakref

import numpy as np

from . import engine
from .engine import SCALAR_NODES, Value, state
from .tensor_ops import TENSOR_OPS

__all__ = ["Tensor", "tensor", "cross_entropy", "softmax", "log_softmax"]

_new = object.__new__
_F64 = np.float64
_NO_PARAMS: dict = {}


def _array(data, what: str = "Tensor data"):
    """``data`` as a new float64 array, or a TypeError saying what was wrong."""
    if isinstance(data, Tensor):
        return data.data.copy()
    if isinstance(data, (str, bytes)) or data is None:
        raise TypeError(f"{what} must be numbers, got {type(data).__name__} {data!r}")
    if isinstance(data, (complex, np.complexfloating)) or (
        isinstance(data, np.ndarray) and data.dtype.kind == "c"
    ):
        raise TypeError(f"{what} must be real numbers, got complex values")
    try:
        return np.array(data, dtype=_F64)
    except OverflowError:
        raise ValueError(f"{what} has a number too large for a float64") from None
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{what} must be a number or a (nested) list/array of real "
            f"numbers with a regular shape: {e}"
        ) from None


class Tensor:
    """An array node of the computation graph.

    ``Tensor(data, label="", requires_grad=True)`` makes a leaf from a number,
    a nested list or a numpy array (copied, as float64). Operations on tensors
    whose inputs all have ``requires_grad=False`` (or run under
    :func:`gradmagic.no_grad`) record nothing: their results are constant
    leaves, and ``backward()`` leaves such tensors' ``grad`` at zero.
    """

    # the node protocol shared with Value (_a, _b: parents; _mark: scratch for
    # graph walks), plus the op's non-differentiable arguments; the gradient
    # is made on first use (_grad None reads as zeros), so a forward pass and
    # the reset before backward allocate nothing
    __slots__ = (
        "data",
        "_grad",
        "label",
        "_op",
        "_a",
        "_b",
        "_mark",
        "_params",
        "requires_grad",
        "__weakref__",
    )
    _site = -1  # where the magic made it (core.sites): the explicit engine's tensors have none

    def __init__(self, data, label: str = "", requires_grad: bool = True):
        if not isinstance(label, str):
            raise TypeError(f"label must be a string, got {type(label).__name__}")
        self.data = _array(data)
        self._grad = None
        self.label = label
        self.requires_grad = bool(requires_grad)
        self._op = self._a = self._b = self._mark = self._params = None

    # ---------------------------------------------------------------- gradient
    @property
    def grad(self) -> np.ndarray:
        """d target / d this tensor after ``backward()`` (zeros before; same shape as data)."""
        g = self._grad
        if g is None:
            g = self._grad = np.zeros(self.data.shape)
        return g

    @grad.setter
    def grad(self, value):
        if value is None:  # as in torch: forget the gradient (reads as zeros)
            self._grad = None
            return
        g = np.asarray(value, dtype=_F64)
        if g.shape != self.data.shape:
            try:
                g = np.broadcast_to(g, self.data.shape).copy()
            except ValueError:
                raise ValueError(
                    f"a gradient for shape {self.shape} cannot have shape {g.shape}"
                ) from None
        self._grad = g

    def _zero_grad(self) -> None:
        self._grad = None

    def _add_grad(self, g, upstream) -> None:
        """Add one gradient contribution ``g`` (of this tensor's shape).

        Contributions are added out of place, so the first one can become
        ``grad`` as it is, even when it is the child's gradient (``upstream``)
        or a view of it, at no copy. A leaf's gradient is always its own
        writable array, since optimizers and users work on it.
        """
        old = self._grad
        if old is not None:
            self._grad = old + g
        elif self._a is None and (
            g is upstream or g.base is not None or not g.flags.writeable or g.dtype != _F64
        ):
            self._grad = np.array(g, dtype=_F64)
        else:
            self._grad = g

    # ---------------------------------------------------------------- graph facts
    @property
    def op(self) -> str:
        """Name of the operation that made this node ('' for a leaf)."""
        return self._op.name if self._op is not None else ""

    @property
    def opdef(self):
        """The :class:`gradmagic.core.tensor_ops.TensorOp` that made this node, or None."""
        return self._op

    @property
    def params(self) -> dict:
        """The op's non-differentiable arguments (axis, shape, index), for views."""
        return dict(self._params or {})

    # graph links work as on a Value: the same _a/_b/_mark slots
    parents = Value.parents
    is_leaf = Value.is_leaf
    topo = Value.topo

    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def dtype(self) -> np.dtype:
        """Always float64 (the dtype of ``data`` and ``grad``)."""
        return self.data.dtype

    @property
    def nbytes(self) -> int:
        return self.data.nbytes

    @property
    def kink(self) -> bool:
        """True where the op is not differentiable here and a subgradient was used."""
        op = self._op
        if op is None or op.kink is None:
            return False
        return op.kink(self.data, *[p.data for p in self.parents], **(self._params or {}))

    @property
    def finite(self) -> bool:
        """False when any element of data or grad is nan or infinite."""
        return bool(np.isfinite(self.data).all() and np.isfinite(self.grad).all())

    def local_grads(self):
        """None: a tensor op's local derivative is a Jacobian, not shown."""
        return None

    # ---------------------------------------------------------------- backward
    def backward(self, grad=None) -> None:
        """Fill ``.grad`` of every node of this graph with d self / d node.

        A tensor with one element is seeded with 1; any other needs ``grad``,
        an array of its shape (the vector in the vector-Jacobian product). As
        for ``Value``, gradients are reset first, so calling it twice gives the
        same gradients.
        """
        if grad is None:
            if self.data.size != 1:
                raise ValueError(
                    f"backward() on a tensor of shape {self.shape} needs a gradient of that "
                    "shape to start from (backward(grad=...)), or reduce it to one number "
                    "first, e.g. T.sum() or T.mean()"
                )
            seed = np.ones(self.shape)
        else:
            seed = _array(grad, "the gradient passed to backward()")
            try:
                seed = np.broadcast_to(seed, self.shape).copy()
            except ValueError:
                raise ValueError(
                    f"backward(grad=...) needs shape {self.shape}, got {seed.shape}"
                ) from None
        engine.backward(self, seed)

    def _replay(self, inputs):
        """This node's op on its parents' data with a leading perturbation axis."""
        return self._op.np(*inputs, **(self._params or {}))

    # elementwise functions (exp, log, tanh, ...) and operators (+, @, -T, ...) are made from
    # the op table after the class: each TensorOp's ``method`` names them

    # ---------------------------------------------------------------- reductions
    def sum(self, axis=None, keepdims: bool = False):
        """Sum over ``axis`` (None: all; an int or a tuple of ints)."""
        return _reduce(_SUM, self, axis, keepdims)

    def mean(self, axis=None, keepdims: bool = False):
        """Mean over ``axis`` (None: all; an int or a tuple of ints)."""
        return _reduce(_MEAN, self, axis, keepdims)

    def max(self, axis=None, keepdims: bool = False):
        """Maximum over ``axis``; ties share the gradient equally (and set ``kink``)."""
        return _reduce(_MAX, self, axis, keepdims)

    def min(self, axis=None, keepdims: bool = False):
        """Minimum over ``axis``; ties share the gradient equally (and set ``kink``)."""
        return _reduce(_MIN, self, axis, keepdims)

    def cumsum(self, axis=None):
        """Running sums along ``axis`` (None: of the flattened elements, as numpy)."""
        if axis is None:
            return _apply(_CUMSUM, self.reshape(-1), None, {"axis": 0})
        return _apply(_CUMSUM, self, None, {"axis": _axes(axis, self.ndim)[0]})

    def var(self, axis=None, ddof=0, keepdims: bool = False):
        """Variance over ``axis``: the mean squared distance from the mean (÷ n − ddof)."""
        axes = None if axis is None else _axes(axis, self.ndim)
        d = self - self.mean(axes, keepdims=True)
        n = self.size if axes is None else int(np.prod([self.shape[a] for a in axes]))
        return (d * d).sum(axes, keepdims) / (n - _int(ddof))

    def std(self, axis=None, ddof=0, keepdims: bool = False):
        """Standard deviation over ``axis``: ``sqrt(var)``."""
        return self.var(axis, ddof, keepdims).sqrt()

    def dot(self, other):
        """``np.dot(self, other)``: matrix product of arrays up to 2-D."""
        return _FUNCTIONS[np.dot](self, other)  # core.tensor_functions

    def argmax(self, axis=None):
        """Index of the maximum, as numpy gives it (a plain int or int array: no gradient)."""
        state.branch_events += 1
        return self.data.argmax(axis=None if axis is None else _axes(axis, self.ndim)[0])

    def argmin(self, axis=None):
        """Index of the minimum, as numpy gives it (a plain int or int array: no gradient)."""
        state.branch_events += 1
        return self.data.argmin(axis=None if axis is None else _axes(axis, self.ndim)[0])

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

    # ---------------------------------------------------------------- arithmetic
    def __pos__(self):
        return self

    # comparisons read the numbers: plain boolean arrays, counted as branch events
    def __lt__(self, other):
        return _compare(np.less, self, other)

    def __le__(self, other):
        return _compare(np.less_equal, self, other)

    def __gt__(self, other):
        return _compare(np.greater, self, other)

    def __ge__(self, other):
        return _compare(np.greater_equal, self, other)

    def __eq__(self, other):
        return _compare(np.equal, self, other)

    def __ne__(self, other):
        return _compare(np.not_equal, self, other)

    __hash__ = object.__hash__  # nodes are identities, as torch tensors are

    # ---------------------------------------------------------------- numbers out
    def item(self) -> float:
        """The one element as a float (cuts the graph; counted like ``float(v)``)."""
        return float(self)

    def tolist(self):
        """The numbers as (nested) lists of floats (cuts the graph; counted like ``float(T)``)."""
        state.float_conversions += 1
        return self.data.tolist()

    def __float__(self):
        if self.data.size != 1:
            raise TypeError(
                f"only a tensor with one element converts to float, this one has shape {self.shape}"
            )
        state.float_conversions += 1
        return float(self.data.reshape(()))

    def __int__(self):
        if self.data.size != 1:
            raise TypeError(
                f"only a tensor with one element converts to int, this one has shape {self.shape}"
            )
        state.branch_events += 1
        return int(self.data.reshape(()))

    def __bool__(self):
        if self.data.size != 1:
            raise ValueError(
                f"the truth value of a tensor of shape {self.shape} is "
                "ambiguous: use (T > 0).any() or .all()"
            )
        state.branch_events += 1
        return bool(self.data.reshape(()))

    def __array__(self, dtype=None, copy=None):
        state.float_conversions += 1
        if copy is False and dtype not in (None, _F64):
            raise ValueError("cannot convert a Tensor's data without a copy")
        data = self.data if dtype is None else self.data.astype(dtype)
        return data.copy() if copy else data

    def __repr__(self):
        name = f"label={self.label!r}, " if self.label else ""
        op = f", op={self.op!r}" if self._op is not None else ""
        body = np.array2string(self.data, separator=", ", prefix="Tensor(data=")
        return f"Tensor({name}shape={self.shape}, data={body}{op})"

    def __str__(self):
        return str(self.data)

    def __format__(self, spec):
        return format(self.data, spec) if spec else str(self.data)

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


def has_rule(ufunc) -> bool:
    """True if a Tensor computes ``ufunc`` itself (with a gradient rule or as values)."""
    return ufunc in _UFUNC_OPS or ufunc in _UFUNC_SPECIAL or ufunc in _UFUNC_VALUES


def _on_plain_arrays(what: str, func, args, kwargs):
    """``func`` on the plain arrays (a function with no gradient rule, in a recorded cell).

    numpy computes exactly what it would without the magic; the cut is reported
    through ``state.cut`` (the magic shows it with the line).
    """
    state.cut(f"{what} has no gradient rule: a Tensor entered it as a plain array")
    return func(*_deep_plain(args), **{k: _deep_plain(v) for k, v in kwargs.items()})


def _deep_plain(x):
    """``x`` with every Tensor, also inside lists and tuples, replaced by its data."""
    cls = x.__class__
    if cls is Tensor:
        return x.data
    if cls is list or cls is tuple:
        return cls(_deep_plain(e) for e in x)
    return x


def tensor(data, label: str = "", requires_grad: bool = True) -> Tensor:
    """A new leaf :class:`Tensor` (as ``torch.tensor``)."""
    return Tensor(data, label=label, requires_grad=requires_grad)


# --------------------------------------------------------------------------- building nodes
_MUL, _POW, _MATMUL = TENSOR_OPS["*"], TENSOR_OPS["**"], TENSOR_OPS["@"]
_SUM, _MEAN, _MAX, _MIN = (TENSOR_OPS[k] for k in ("sum", "mean", "max", "min"))
_RESHAPE, _TRANSPOSE, _GETITEM = (TENSOR_OPS[k] for k in ("reshape", "transpose", "getitem"))
_MAXIMUM, _MINIMUM, _WHERE = (TENSOR_OPS[k] for k in ("maximum", "minimum", "where"))
_SOFTMAX, _LOG_SOFTMAX = TENSOR_OPS["softmax"], TENSOR_OPS["log_softmax"]
_COPY, _CUMSUM = TENSOR_OPS["copy"], TENSOR_OPS["cumsum"]

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


def _constant(data) -> Tensor:
    """A leaf that needs no gradient (a number or array used in an op)."""
    t = _new(Tensor)
    t.data = data
    t._grad = None
    t.label = ""
    t.requires_grad = False
    t._op = t._a = t._b = t._mark = t._params = None
    return t


_ARRAY_CLASSES: set = set()
"""The magic's array node classes (``core.array``: Array, Scalar64): nodes, not constants."""
_WRITABLE: set = set()
"""Node classes whose memory can change in place (``core.array.Array``): they keep weak
references to the nodes computed from them, so a write can move their old role aside."""


_array_result = None
"""``core.array._link``: ``(op, data, a, b, params)`` → an array node (set by core.array)."""
_function_rule = None
"""``core.array.tensor_function``: a numpy function of Tensors through the array rules
(NotImplemented where it has none; set by core.array)."""


def _used(parent, child) -> None:
    """Note that ``child`` was computed from ``parent`` (if ``parent`` can be written in place)."""
    if parent.__class__ in _WRITABLE:
        kids = parent.__dict__.get("_kids")
        if kids is None:
            kids = parent._kids = []
        kids.append(_weakref(child))


def _operand(x):
    """``x`` as a parent node for an op, or None if it is not a number or array."""
    cls = x.__class__
    if (
        cls is Tensor
        or cls in SCALAR_NODES
        or cls in _ARRAY_CLASSES
        or isinstance(x, (Tensor, Value))
    ):
        return x
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biuf":
            return None
        return _constant(np.array(x, dtype=_F64))
    if isinstance(x, (numbers.Real, list, tuple)) and not isinstance(x, (str, bytes)):
        try:
            return _constant(_array(x))
        except TypeError:
            return None
    return None


def _apply(op, a, b=None, params=None) -> Tensor:
    """The node ``op(a[, b])``: one numpy call, recorded unless nothing needs a gradient."""
    p = params or _NO_PARAMS
    try:
        if b is None:
            data = op.f(a.data, **p)
            track = a.__class__ in SCALAR_NODES or a.requires_grad
        else:
            data = op.f(a.data, b.data, **p)
            track = (
                a.__class__ in SCALAR_NODES
                or a.requires_grad
                or b.__class__ in SCALAR_NODES
                or b.requires_grad
            )
    except ValueError as e:
        shapes = " and ".join(str(np.shape(x.data)) for x in (a, b) if x is not None)
        noun = "shape" if b is None else "shapes"
        raise ValueError(f"{op.symbol} cannot be applied to {noun} {shapes}: {e}") from None
    if data.__class__ is not np.ndarray:
        data = np.asarray(data, dtype=_F64)
    if (
        _ARRAY_CLASSES
        and track
        and state.grad_enabled
        and (a.__class__ in _ARRAY_CLASSES or b.__class__ in _ARRAY_CLASSES)
    ):
        # an array node of the magic's in it: the result is one too (core.array)
        return _array_result(op, data, a, b, params)
    out = _new(Tensor)
    out.data = data
    out._grad = None
    out.label = ""
    out._mark = None
    if track and state.grad_enabled:
        out._op, out._a, out._b, out._params = op, a, b, params
        out.requires_grad = True
        if a.__class__ in _WRITABLE:
            _used(a, out)
        if b is not None and b.__class__ in _WRITABLE:
            _used(b, out)
    else:
        out._op = out._a = out._b = out._params = None
        out.requires_grad = False
    return out


def _binary(op, a, b):
    a2, b2 = _operand(a), _operand(b)
    if a2 is None or b2 is None:
        other = a if a2 is None else b
        name = op.method.split()[0] if op.method else ""
        if (
            state.cut is not None
            and name.startswith("__")
            and isinstance(other, (numbers.Number, np.ndarray))
        ):
            # in a recorded cell, a complex number or array: numpy's own result, cut reported
            return _on_plain_arrays(
                f"{op.symbol} with a {type(other).__name__}",
                getattr(operator, name[2:-2]),
                (a, b),
                {},
            )
        return NotImplemented
    return _apply(op, a2, b2)


def _compare(ufunc, a, b):
    b2 = _operand(b)
    if b2 is None:
        return NotImplemented
    state.branch_events += 1
    return ufunc(a.data, b2.data)


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) or (x.__class__ is Value and type(x.data) is int)


def _int(x) -> int:
    """``x`` (an int, a numpy integer, an int-valued Value) as an int.

    ``%%autograd`` makes the literal in ``T.reshape(4)`` or ``T.sum(axis=0)`` a
    Value; like ``range(n)``, a shape or an axis takes its int, and (as for
    ``range``) this is not counted as a branch on the number.
    """
    if x.__class__ is Value and type(x.data) is int:
        return x.data
    return operator.index(x)


def _axes(axis, ndim: int):
    """``axis`` (an int or ints, possibly negative) as a tuple of non-negative ints."""
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in items:
        try:
            a = _int(a)
        except TypeError:
            raise TypeError(f"an axis must be an integer, got {a!r}") from None
        if not -ndim <= a < ndim:
            raise ValueError(
                f"axis {a} is out of range for a tensor with {ndim} "
                f"dimension{'s' if ndim != 1 else ''}"
            )
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis!r}")
    return tuple(out)


def _reduce(op, t, axis, keepdims):
    axis = None if axis is None else _axes(axis, t.ndim)
    return _apply(op, t, None, {"axis": axis, "keepdims": bool(keepdims)})


def _index(key):
    """``key`` as a tuple numpy accepts, and whether it picks each element at most once."""
    items = key if isinstance(key, tuple) else (key,)
    out = []
    basic = True
    for k in items:
        if k is None or k is Ellipsis:
            out.append(k)
        elif isinstance(k, slice):
            out.append(
                slice(
                    *(None if s is None else operator.index(s) for s in (k.start, k.stop, k.step))
                )
            )
        elif isinstance(k, Tensor):
            raise IndexError(
                "a Tensor cannot be an index (its numbers carry gradients); "
                "index with ints, slices or integer/boolean arrays"
            )
        elif isinstance(k, (list, np.ndarray)):
            arr = np.asarray(k)
            if arr.size == 0:
                arr = arr.astype(np.intp)
            if arr.dtype.kind not in "biu":
                raise IndexError(f"index arrays must hold integers or booleans, got {arr.dtype}")
            basic = basic and arr.dtype.kind == "b"
            out.append(arr)
        else:
            try:
                out.append(operator.index(k))
            except TypeError:
                raise IndexError(
                    f"a tensor index must be an int, a slice, None, ... or an "
                    f"integer/boolean array, got {type(k).__name__} {k!r}"
                ) from None
    return tuple(out), basic


def _plain(xs):
    """The items of ``xs`` with every Tensor replaced by its data."""
    return [x.data if isinstance(x, Tensor) else x for x in xs]


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
    picked = logp[t] if logits.ndim == 1 else logp[np.arange(len(t)), t]
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
_FUNCTIONS: dict = {}
"""numpy function → its version on Tensors, filled by :mod:`gradmagic.core.tensor_functions`."""
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
