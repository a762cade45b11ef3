"""The :class:`Tensor` class and how a tensor node is made.

A Tensor holds a float64 array (``data``), its gradient (``grad``) and the links of a
node (``_op``, ``_a``, ``_b``, ``_params``). :func:`_apply` makes the node of one op: one
numpy call, linked to its parents while gradients are on. The magic's array nodes
(:mod:`gradmagic.core.array`) are made by the same helpers, so they live here, below
both classes.

The class here has what a node needs (gradient, graph facts, backward, reductions, numbers
out); :mod:`gradmagic.core.tensor` adds what a numpy user reaches for (indexing, reshaping,
numpy's protocols, the op table's methods) and is the import path for all of it.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance, type) changes its own
# code, as in plain Python, and not the engine's
from builtins import float, int, isinstance, type  # noqa: A004

import numbers
import operator
from collections.abc import Callable
from typing import Any
from weakref import ref as _weakref

import numpy as np

from . import engine
from .engine import SCALAR_NODES, Value, state
from .tensor_ops import TENSOR_OPS

__all__ = ["Tensor"]

_new = object.__new__
_F64 = np.float64
_COMPLEX = np.dtype(np.complex128)
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
        "_owned_grad",
        "_born",
        "__weakref__",
    )
    _site = -1  # where the magic made it (core.sites): the explicit engine's tensors have none
    data: np.ndarray
    _grad: np.ndarray | None
    _owned_grad: np.ndarray | None

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
        """d target / d this tensor after ``backward()`` (zeros before; same shape as data).

        For complex numbers (the magic's array nodes) it is d/d(real part) − i d/d(imaginary
        part), HIPS autograd's and JAX's convention for a real target."""
        g = self._grad
        if g is None:
            g = self._grad = np.zeros(self.data.shape, self.dtype)
        return g

    @grad.setter
    def grad(self, value):
        if value is None:  # as in torch: forget the gradient (reads as zeros)
            self._grad = None
            return
        g = np.asarray(value, dtype=self.dtype)
        if g.shape != self.data.shape:
            try:
                g = np.broadcast_to(g, self.data.shape).copy()
            except ValueError:
                raise ValueError(
                    f"a gradient for shape {self.shape} cannot have shape {g.shape}"
                ) from None
        self._grad = g

    def _zero_grad(self) -> None:
        self._grad = self._owned_grad = None

    def _grad_to_add_into(self) -> np.ndarray:
        """This node's gradient as an array of its own, to add contributions into in place
        (made, or copied, the first time: a first contribution may be another node's)."""
        g = self._grad
        owned: object = getattr(self, "_owned_grad", None)
        if g is None or g is not owned:
            kind = self.dtype
            g = np.zeros(self.data.shape, kind) if g is None else np.array(g, dtype=kind)
            self._grad = self._owned_grad = g
        return g

    def _add_grad(self, g, upstream) -> None:
        """Add one gradient contribution ``g`` (of this tensor's shape).

        Contributions are added out of place, so the first one can become
        ``grad`` as it is, even when it is the child's gradient (``upstream``)
        or a view of it, at no copy. A leaf's gradient is always its own
        writable array, since optimizers and users work on it.
        """
        old, kind = self._grad, self.dtype
        if g.dtype is not kind:  # in this node's precision (a real node: the real part)
            g = (g.real if g.dtype is _COMPLEX and kind is not _COMPLEX else g).astype(kind)
        if old is not None:
            if old.shape == g.shape and old is getattr(self, "_owned_grad", None):
                old += g  # (an array of its own, made by an earlier sum: added in place)
            else:
                new = self._grad = old + g  # (a 0-d sum is a numpy scalar: not owned)
                self._owned_grad = new if new.__class__ is np.ndarray else None
        elif self._a is None and (g is upstream or g.base is not None or not g.flags.writeable):
            self._grad = np.array(g)
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
            seed = np.ones(self.shape, self.dtype)
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


def _on_plain_arrays(what: str, func, args, kwargs):
    """``func`` on the plain arrays (a function with no gradient rule, in a recorded cell).

    numpy computes exactly what it would without the magic; the cut is reported
    through ``state.cut`` (the magic shows it with the line).
    """
    cut = state.cut
    if cut is not None:  # (callers call this in a recorded cell only, where it is set)
        cut(f"{what} has no gradient rule: a Tensor entered it as a plain array")
    return func(*_deep_plain(args), **{k: _deep_plain(v) for k, v in kwargs.items()})


def _deep_plain(x):
    """``x`` with every Tensor, also inside lists and tuples, replaced by its data."""
    cls = x.__class__
    if cls is Tensor:
        return x.data
    if cls is list or cls is tuple:
        return cls(_deep_plain(e) for e in x)
    return x


# --------------------------------------------------------------------------- building nodes
_MUL, _POW, _MATMUL = TENSOR_OPS["*"], TENSOR_OPS["**"], TENSOR_OPS["@"]
_SUM, _MEAN, _MAX, _MIN = (TENSOR_OPS[k] for k in ("sum", "mean", "max", "min"))
_RESHAPE, _TRANSPOSE, _GETITEM = (TENSOR_OPS[k] for k in ("reshape", "transpose", "getitem"))
_MAXIMUM, _MINIMUM, _WHERE = (TENSOR_OPS[k] for k in ("maximum", "minimum", "where"))
_SOFTMAX, _LOG_SOFTMAX = TENSOR_OPS["softmax"], TENSOR_OPS["log_softmax"]
_COPY, _CUMSUM = TENSOR_OPS["copy"], TENSOR_OPS["cumsum"]


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


def _no_array_nodes(*args: Any) -> Any:
    raise RuntimeError("an array node needs gradmagic.core.array imported")


_array_result: Callable[..., Any] = _no_array_nodes
"""``core.array_nodes.link``: ``(op, data, a, b, params)`` → an array node (set by
``core.array``)."""


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
    if data.__class__ is not np.ndarray:  # (a numpy scalar: a complex one stays complex)
        data = np.asarray(data, dtype=np.complex128 if isinstance(data, complex) else _F64)
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


_as_index = operator.index


def _index(key):
    """``key`` as a tuple numpy accepts, and whether it picks each element at most once."""
    items = key if isinstance(key, tuple) else (key,)
    out = []
    basic = True
    for k in items:
        if k is None or k is Ellipsis:
            out.append(k)
        elif isinstance(k, slice):
            start, stop, step = k.start, k.stop, k.step  # (each an int or None)
            out.append(
                slice(
                    None if start is None else _as_index(start),
                    None if stop is None else _as_index(stop),
                    None if step is None else _as_index(step),
                )
            )
        elif isinstance(k, Tensor):
            raise IndexError(
                "a Tensor cannot be an index (its numbers carry gradients); "
                "index with ints, slices or integer/boolean arrays"
            )
        elif isinstance(k, (list, tuple, range, np.ndarray)):
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


_FUNCTIONS: dict = {}
"""numpy function → its version on Tensors, filled by :mod:`gradmagic.core.tensor_functions`."""
