"""Arrays that are nodes: what ``%%autograd`` makes of a float array.

A float64 array the cell reads or makes is an :class:`Array`: a subclass of
``numpy.ndarray`` (named ``ndarray``, as :class:`~gradmagic.core.number_nodes.Float`
is named ``float``) that also carries the links of a tensor node of the graph
(``_op``, ``_a``, ``_b``, ``_params``, ``grad``, ``label``), the protocol
:class:`~gradmagic.core.tensor.Tensor` has. A 0-d result (``np.sum(W)``,
``W[0]``) is a :class:`Scalar64`, a ``numpy.float64`` subclass with the same
links. So ``isinstance``, ``repr``, printing, views, ``out=``, in-place
operators and every numpy function are numpy's own.

Every operation computes numpy's own result on the plain arrays first (same
numbers, dtypes, exceptions and warnings, at the caller's line). While a cell
is recorded and an input is a node, the result then becomes a node linked to
its inputs with the operation's entry of
:data:`~gradmagic.core.tensor_ops.TENSOR_OPS` (its vector-Jacobian rules); an
operation with no entry keeps numpy's plain result and reports the cut
(``state.cut``). Outside a recording (a later plain cell using an array the
graph kept) every result is a plain ``ndarray`` or ``np.float64``.

In-place writes (``W += 1``, ``out=``, ``W[0] = 1``, ``W.sort()``) change the
array's own memory, as numpy does. In the graph, the array's previous role
(its numbers and links) moves to a snapshot node that the nodes computed from
it before the write keep using, and the array becomes the write's result:
``old + 1`` where the write has a rule, a fresh leaf (the cut reported) where
it has none.

The rules of numpy's functions live in :mod:`.numpy_reductions`, :mod:`.numpy_shapes` and
:mod:`.numpy_linalg`, the methods beyond numpy's dispatch in :mod:`.array_methods`. What stays
here is longer than a module should be because it is one knot: the classes, the ufunc and
function dispatch, the node links and the in-place writes call one another.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance) changes its own
# code, as in plain Python, and not the engine's
from builtins import float, int, isinstance  # noqa: A004

import sys
import warnings
import weakref

import numpy as np

from . import number_nodes as _numbers
from .engine import SCALAR_NODES, Value, state
from .sites import cursor
from . import tensor as _t
from .tensor import Tensor, TENSOR_OPS

__all__ = ["Array", "Scalar64", "array_leaf", "is_array_node", "plain_array"]

_F64 = np.float64
_ndarray = np.ndarray
_view = np.ndarray.view
_float_of = float.__float__
_NoValue = np._NoValue
_new_ref = weakref.ref

_SUM, _MEAN, _MAX, _MIN = _t._SUM, _t._MEAN, _t._MAX, _t._MIN
_COPY, _POW, _DIV, _CUMSUM = _t._COPY, _t._POW, TENSOR_OPS["/"], _t._CUMSUM
_RESHAPE, _TRANSPOSE, _GETITEM = _t._RESHAPE, _t._TRANSPOSE, _t._GETITEM
_MAXIMUM, _MINIMUM = _t._MAXIMUM, _t._MINIMUM


def tracking() -> bool:
    """True while a cell is recorded with gradients on: results of nodes are nodes."""
    return state.recording and state.grad_enabled


# --------------------------------------------------------------------------- the classes
class Array(np.ndarray):
    """A float64 ``ndarray`` that is a tensor node of the graph (what the magic makes of an array).

    Its type is named ``numpy.ndarray``; ``repr``, ``str``, indexing, views and
    every numpy function behave as on a plain array. ``data`` is the plain
    array (a view of the same memory), ``grad`` the gradient after
    ``backward()``. Arrays numpy makes from it outside a recorded cell are
    plain ``ndarray``s.
    """

    # the links live in the instance dict; these are the defaults (a view numpy makes
    # internally is an unlinked constant until a rule links it)
    _grad = None
    label = ""
    _op = _a = _b = _mark = _params = None
    _site = -1
    requires_grad = False
    _kids = None  # weak references to the nodes computed from this one (for in-place writes)

    @property
    def data(self):
        """The numbers as a plain ``ndarray`` (the same memory)."""
        return _view(self, _ndarray)

    def __repr__(self):
        return repr(_view(self, _ndarray))

    def __str__(self):
        return str(_view(self, _ndarray))

    def __reduce_ex__(self, protocol):  # copies and pickles are plain arrays
        return _view(self, _ndarray).__reduce_ex__(protocol)

    def __reduce__(self):
        return _view(self, _ndarray).__reduce__()

    def __copy__(self):
        return _view(self, _ndarray).copy()

    def __deepcopy__(self, memo=None):
        return _view(self, _ndarray).copy()

    def __array_wrap__(self, arr, context=None, return_scalar=False):
        arr = _view(arr, _ndarray) if isinstance(arr, _ndarray) else arr
        return arr[()] if return_scalar else arr

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _function(func, args, kwargs)

    def item(self, *args):
        if tracking() and self.requires_grad:
            _cut(".item() gives a plain Python number, which no node follows", None, "item")
        return _view(self, _ndarray).item(*args)

    def tolist(self):
        if tracking() and self.requires_grad:
            _cut(".tolist() gives plain Python numbers, which no node follows", None, "tolist")
        return _view(self, _ndarray).tolist()

    # ---------------------------------------------------------------- indexing and views
    def __getitem__(self, key):
        if not (tracking() and self.requires_grad):
            return _ndarray.__getitem__(_view(self, _ndarray), _plain_key(key))
        exact = _ndarray.__getitem__(self, _plain_key(key))
        try:
            index, basic = _t._index(key)
        except (IndexError, TypeError):
            return _cut_result(exact, "indexing with this key", (self,))
        return _adopt(exact, _t._apply(_GETITEM, self, None, {"index": index, "basic": basic}))

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
        return self.view()

    @property
    def imag(self):
        return _view(self, _ndarray).imag

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
        exact = _view(self, _ndarray).astype(dtype, order=order, casting=casting, copy=copy)
        if not (tracking() and self.requires_grad):
            return exact
        if exact.dtype != _F64:
            return _cut_result(exact, f"astype({np.dtype(dtype).name})", (self,))
        if exact is _view(self, _ndarray) or not copy:
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


class Scalar64(np.float64):
    """A numpy float64 that is a tensor node (a 0-d result of an array node); named ``float64``.

    ``data`` is the number as a 0-d array, as a tensor node's data is an array.
    Its arithmetic computes numpy's own result and, while a cell is recorded,
    links it to its operands.
    """

    # no __slots__: slots on a numpy scalar subclass overlap its data; links live in __dict__
    _grad = None
    label = ""
    _op = _a = _b = _mark = _params = None
    _site = -1
    requires_grad = False

    @property
    def data(self):
        """The number as a 0-d float64 array."""
        return np.array(_float_of(self))

    @property
    def shape(self):
        return ()

    def __repr__(self):
        return repr(np.float64(_float_of(self)))

    def __str__(self):
        return str(np.float64(_float_of(self)))

    def __reduce_ex__(self, protocol):
        return np.float64, (_float_of(self),)

    def __copy__(self):
        return np.float64(_float_of(self))

    def __deepcopy__(self, memo=None):
        return np.float64(_float_of(self))

    def __float__(self):
        if tracking() and self.requires_grad:
            state.float_conversions += 1
        return _float_of(self)

    def item(self, *args):
        if tracking() and self.requires_grad:
            _cut(".item() gives a plain Python number, which no node follows", None, "item")
        return np.float64(_float_of(self)).item(*args)

    __hash__ = np.float64.__hash__

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _function(func, args, kwargs)


_ARRAYS = (Array, Scalar64)
_NODE_CLASSES = frozenset({Array, Scalar64, Tensor}) | SCALAR_NODES
_TENSOR_NODES = frozenset({Array, Scalar64, Tensor})

# the tensor protocol (grad, backward, parents, kink, ...) is Tensor's own
for _name in (
    "grad",
    "_zero_grad",
    "_add_grad",
    "op",
    "opdef",
    "params",
    "parents",
    "is_leaf",
    "topo",
    "kink",
    "finite",
    "local_grads",
    "backward",
    "_replay",
):
    setattr(Array, _name, Tensor.__dict__[_name])
    setattr(Scalar64, _name, Tensor.__dict__[_name])

for _cls, _base in ((Array, np.ndarray), (Scalar64, np.float64)):  # named as numpy's
    _cls.__name__ = _cls.__qualname__ = _base.__name__
    _cls.__module__ = _base.__module__


def _scalar_binary(ufunc, name):
    """``s <op> other`` for a Scalar64: numpy's own scalar arithmetic, then the link."""
    method = getattr(np.float64, name)
    reflected = name.startswith("__r")

    def forward(self, other):
        cls = other.__class__
        if cls is Value:
            return NotImplemented
        if cls is Array or cls is Tensor:  # the array decides (broadcasting, out=)
            return ufunc(other, self) if reflected else ufunc(self, other)
        r = _numpy(method, (np.float64(_float_of(self)), _pv(other)), {})
        if r is NotImplemented or not tracking():
            return r
        return _link_call(ufunc, r, (other, self) if reflected else (self, other))

    forward.__name__ = name
    return forward


def _scalar_unary(ufunc, name):
    method = getattr(np.float64, name)

    def forward(self):
        r = _numpy(method, (np.float64(_float_of(self)),), {})
        if not tracking():
            return r
        return _link_call(ufunc, r, (self,))

    forward.__name__ = name
    return forward


for _name, _uf in (
    ("add", np.add),
    ("sub", np.subtract),
    ("mul", np.multiply),
    ("truediv", np.true_divide),
    ("floordiv", np.floor_divide),
    ("mod", np.remainder),
    ("pow", np.power),
):
    setattr(Scalar64, f"__{_name}__", _scalar_binary(_uf, f"__{_name}__"))
    setattr(Scalar64, f"__r{_name}__", _scalar_binary(_uf, f"__r{_name}__"))
for _name, _uf in (("neg", np.negative), ("pos", np.positive), ("abs", np.absolute)):
    setattr(Scalar64, f"__{_name}__", _scalar_unary(_uf, f"__{_name}__"))
del _name, _uf, _cls, _base


# --------------------------------------------------------------------------- plain values
def plain_array(x):
    """``x``'s plain value: an Array's plain ndarray, a Scalar64's np.float64, else ``x``."""
    cls = x.__class__
    if cls is Array:
        return _view(x, _ndarray)
    if cls is Scalar64:
        return np.float64(_float_of(x))
    return x


def _pv(x):
    """``x`` as numpy would see it with no node: Arrays, Tensors, Values as plain numbers."""
    cls = x.__class__
    if cls is Array or cls is Scalar64:
        return plain_array(x)
    if cls is Tensor or cls is Value:
        return x.data
    if cls in _SCALARS:  # a number node: its plain number (numpy would defer to it)
        return _numbers.plain(x)
    if cls is list or cls is tuple:
        return _deep_plain(x)
    return x


_SCALARS = _numbers.SCALARS


def _deep_plain(x):
    cls = x.__class__
    if cls is list or cls is tuple:
        if any(
            e.__class__ in _TENSOR_NODES
            or e.__class__ is list
            or e.__class__ is tuple
            or e.__class__ is Value
            for e in x
        ):
            return cls(_deep_plain(e) for e in x)
        return x
    if cls is dict:
        return {k: _deep_plain(v) for k, v in x.items()}
    return _pv(x)


def _plain_key(key):
    cls = key.__class__
    if cls is tuple:
        return tuple(_plain_key(k) for k in key)
    if cls is Array:
        return _view(key, _ndarray)
    return key


def is_array_node(x) -> bool:
    return x.__class__ is Array or x.__class__ is Scalar64


def _tracked(x) -> bool:
    cls = x.__class__
    if cls is Array or cls is Scalar64 or cls is Tensor:
        return x.requires_grad
    return cls in SCALAR_NODES


def _any_tracked(xs) -> bool:
    for x in xs:
        cls = x.__class__
        if cls is list or cls is tuple:
            if _any_tracked(x):
                return True
        elif _tracked(x):
            return True
    return False


# --------------------------------------------------------------------------- making nodes
def array_leaf(x, label: str = ""):
    """A fresh leaf viewing ``x``'s memory (a float64 ndarray, or an Array of an earlier run)."""
    if x.__class__ is not _ndarray:
        x = _view(x, _ndarray)
    leaf = _view(x, Array)
    leaf.label = label
    leaf.requires_grad = True
    return leaf


def array_constant(x):
    """A float64 array numpy made in a recorded cell, as an array node needing no gradient."""
    return _view(x, Array)


def _parent(x):
    """``x`` as a parent of a node: a node itself, or a constant for a number or array."""
    if x.__class__ in _NODE_CLASSES:
        return x
    return _t._operand(x)


def _adopt(exact, node):
    """numpy's result ``exact`` as the node ``node`` (its links; ``exact``'s numbers)."""
    if node is None or node._op is None:
        return exact
    cls = exact.__class__
    if cls is Array:
        out = exact
    elif cls is _ndarray:
        if exact.dtype != _F64:
            return exact
        out = _view(exact, Array)
    elif cls is np.float64:
        out = Scalar64(exact)
    elif cls is Scalar64:  # a node made by the rule itself (a composite): a new one
        out = Scalar64(_float_of(exact))
    else:
        return exact
    if out.dtype != _F64:
        return exact
    out._op, out._a, out._b, out._params = node._op, node._a, node._b, node._params
    out.requires_grad = True
    _t._used(out._a, out)
    if out._b is not None:
        _t._used(out._b, out)
    return out


def _link(op, exact, a, b=None, params=None):
    """``exact`` (numpy's result of ``op`` on ``a``, ``b``) as a node linked to them."""
    cls = exact.__class__
    if cls is _ndarray:
        if exact.dtype != _F64:
            return exact
        out = Scalar64(exact[()]) if exact.ndim == 0 and _t._ARRAY_CLASSES else _view(exact, Array)
    elif cls is np.float64:
        out = Scalar64(exact)
    elif cls is Array and exact.dtype == _F64:
        out = exact
    else:
        return exact
    out._op, out._a, out._b, out._params = op, a, b, params
    out._site = cursor.site
    out.requires_grad = True
    _t._used(a, out)
    if b is not None:
        _t._used(b, out)
    return out


_UFUNC_OPS = _t._UFUNC_OPS
_UFUNC_VALUES = _t._UFUNC_VALUES
_CALL_OPTIONS = frozenset({"out", "casting", "order", "subok", "signature"})


def _call_rule(ufunc, inputs, kwargs):
    """(op, parents) for ``ufunc(*inputs, **kwargs)``, or None if it has no rule."""
    for k, v in kwargs.items():
        if k == "dtype":
            if v is not None and np.dtype(v) != _F64:
                return None
        elif k == "where":
            if v is not True:
                return None
        elif k not in _CALL_OPTIONS:
            return None
    op = _UFUNC_OPS.get(ufunc)
    if op is not None:
        if len(inputs) != op.arity:
            return None
        parents = tuple(map(_node_of, inputs))
    elif ufunc is np.square:
        op, parents = _POW, (_parent(inputs[0]), _t._constant(np.array(2.0)))
    elif ufunc is np.positive or ufunc is np.conjugate:
        op, parents = _COPY, (_parent(inputs[0]),)
    elif ufunc is np.reciprocal:
        op, parents = _DIV, (_t._constant(np.array(1.0)), _parent(inputs[0]))
    else:
        return None
    if any(p is None for p in parents):
        return None
    return op, parents


def _link_call(ufunc, exact, inputs, kwargs=None):
    """numpy's result of ``ufunc(*inputs)`` as a node, the cut reported if it has no rule."""
    if ufunc in _UFUNC_VALUES:  # piecewise constant: plain values, no gradient to lose
        return exact
    rule = _call_rule(ufunc, inputs, kwargs or {})
    if rule is None:
        return _cut_result(exact, f"numpy.{ufunc.__name__}", inputs)
    kind = getattr(exact, "dtype", _F64)
    if kind != _F64 and kind.kind in "fc":  # float32 * x is float32, as in numpy: no node
        return _cut_result(exact, f"numpy.{ufunc.__name__} giving {kind.name}", inputs)
    op, parents = rule
    return _link(op, exact, *parents)


def _cut_result(exact, what, inputs):
    """numpy's ``exact`` result of ``what``, which has no gradient rule: the cut reported.

    A new float64 result is an array node needing no gradient, marked as made by
    the cut (so the graph shows where its numbers came from).
    """
    if tracking() and _any_tracked(inputs):
        node = None
        if (
            exact.__class__ is _ndarray
            and exact.dtype == _F64
            and not any(exact is x for x in inputs)
        ):
            exact = node = _view(exact, Array)
        elif exact.__class__ is np.float64:
            exact = node = Scalar64(exact)
        _cut(f"{what} has no gradient rule: a node entered it as plain numbers", node, what)
    return exact


def _cut(message: str, node=None, what: str = "") -> None:
    cut = state.cut
    if cut is not None:
        try:
            cut(message, node, what)
        except TypeError:  # a reporter that takes the message only
            cut(message)


# --------------------------------------------------------------------------- warnings
_INTERNAL = ("gradmagic.core.", "gradmagic.notebook.runtime", "gradmagic.notebook.math_calls")


def _caller():
    """The first frame outside gradmagic's engine (where numpy would attribute a warning)."""
    frame = sys._getframe(2)
    while frame is not None and str(frame.f_globals.get("__name__")).startswith(_INTERNAL):
        frame = frame.f_back
    return frame


def _numpy(f, args, kwargs):
    """``f(*args, **kwargs)``, its warnings attributed to the line that called into the array."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = f(*args, **kwargs)
    if caught:
        reissue(caught, _caller())
    return result


def reissue(caught, frame) -> None:
    """Warn again the warnings ``caught``, as raised at ``frame``'s line (as is, without one)."""
    if frame is None:
        for w in caught:
            warnings.warn(w.message, w.category, stacklevel=1)
        return
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    for w in caught:
        warnings.warn_explicit(
            w.message,
            w.category,
            frame.f_code.co_filename,
            frame.f_lineno,
            frame.f_globals.get("__name__"),
            registry,
        )


# --------------------------------------------------------------------------- numpy dispatch
def _ufunc(ufunc, method, inputs, kwargs):
    out = kwargs.get("out")
    args = tuple(map(_pv, inputs))
    plain_kwargs = kwargs
    if kwargs:
        plain_kwargs = {k: _pv(v) for k, v in kwargs.items()}
        if out is not None:
            plain_kwargs["out"] = tuple(map(_pv, out))
    rec = tracking()
    writes = ()
    if out is not None and rec:
        writes = [o for o in out if o.__class__ is Array]
    if writes:
        return _ufunc_into(ufunc, method, inputs, kwargs, args, plain_kwargs, out, writes)
    exact = _numpy(getattr(ufunc, method), args, plain_kwargs)
    if out is not None:
        exact = _outputs(exact, plain_kwargs["out"], out)
    if not rec or not _any_tracked(inputs):
        return exact
    if out is not None:  # written into a plain array the caller holds: it stays plain
        return _cut_result(exact, f"numpy.{ufunc.__name__}(..., out=a plain array)", inputs)
    if method == "__call__":
        rule_kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        return _link_call(ufunc, exact, inputs, rule_kwargs)
    node = _reduce_rule(ufunc, method, inputs, kwargs)
    if node is None:
        return _cut_result(exact, f"numpy.{ufunc.__name__}.{method}", inputs)
    return _adopt(exact, node)


def _outputs(exact, plain_outs, outs):
    """numpy's result with each plain ``out=`` view replaced by the caller's own array."""
    if isinstance(exact, tuple):
        return tuple(_outputs(e, plain_outs, outs) for e in exact)
    for p, o in zip(plain_outs, outs):
        if exact is p:
            return o
    return exact


def _ufunc_into(ufunc, method, inputs, kwargs, args, plain_kwargs, out, writes):
    """A ufunc writing into Arrays (``W += 1``, ``np.cos(x, out=W)``) while a cell is recorded."""
    rule = None
    if method == "__call__" and len(out) == 1 and ufunc not in _UFUNC_VALUES:
        rule = _call_rule(ufunc, inputs, {k: v for k, v in kwargs.items() if k != "out"})
    target = out[0]
    old = _before_write(target, force=rule is not None and _any_tracked(inputs))
    olds = {id(target): old}
    for o in writes[1:]:
        olds[id(o)] = _before_write(o)
    exact = _numpy(getattr(ufunc, method), args, plain_kwargs)
    result = _outputs(exact, plain_kwargs["out"], out)
    if rule is not None and target.__class__ is Array and target.dtype == _F64:
        op, parents = rule
        if old is not None:
            parents = tuple(old if p is target else p for p in parents)
        if old is None and any(p is target for p in parents):
            return result  # a leaf nobody used yet: it holds its new numbers
        target.__dict__.pop("_kids", None)
        target._op, target._a = op, parents[0]
        target._b = parents[1] if len(parents) > 1 else None
        target._params = None
        target.requires_grad = True
        _t._used(target._a, target)
        if target._b is not None:
            _t._used(target._b, target)
        _shared_write_cut(target)
        return result
    what = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    for o in writes:
        _after_write(o, olds.get(id(o)), f"{what}(..., out=...)", inputs)
    return result


def _before_write(arr, force: bool = False):
    """Before ``arr``'s memory changes: its role in the graph moves to a snapshot node.

    Returns the snapshot (a node holding the old numbers and links, which the
    nodes computed from ``arr`` now point to), or None when ``arr`` is a leaf
    no node uses yet (and not ``force``): it then simply holds its new numbers.
    """
    d = arr.__dict__
    kids = d.get("_kids")
    if arr._a is None and not kids and not force:
        return None
    if arr._a is None and not kids and not arr.requires_grad:
        return None
    old = _view(np.array(_view(arr, _ndarray), copy=True), Array)
    old._op, old._a, old._b, old._params = arr._op, arr._a, arr._b, arr._params
    old.requires_grad = arr.requires_grad
    old.label = arr.label
    if arr._a is not None:
        _t._used(arr._a, old)
        if arr._b is not None:
            _t._used(arr._b, old)
    if kids:
        for ref in kids:
            kid = ref()
            if kid is None:
                continue
            if kid._a is arr:
                kid._a = old
            if kid._b is arr:
                kid._b = old
            _t._used(old, kid)
        d["_kids"] = None
    return old


def _after_write(arr, old, what: str, inputs=()) -> None:
    """After a write with no gradient rule into ``arr``: a fresh leaf, the cut reported."""
    arr._op = arr._a = arr._b = arr._params = None
    if old is not None or _any_tracked(inputs):
        name = repr(arr.label) if arr.label else "an array"
        _cut(
            f"{what} changes {name} in place, which has no gradient rule: from here on it is "
            "a fresh leaf holding its new numbers",
            arr,
            what,
        )
        arr.requires_grad = True
    _shared_write_cut(arr)


def _shared_write_cut(arr) -> None:
    base = arr.base
    while base is not None:
        if base.__class__ is Array and (base.requires_grad or base._a is not None):
            name = repr(arr.label) if arr.label else "a view"
            _cut(
                f"a write into {name} also changes the array it views, which the gradient "
                "does not follow"
            )
            return
        base = getattr(base, "base", None)


def _write(arr, what: str, do, inputs=()) -> None:
    """Run ``do()`` (a write into ``arr``'s memory), keeping the graph honest about it."""
    if not tracking():
        do()
        return
    old = _before_write(arr)
    do()
    _after_write(arr, old, what, inputs)


def _setitem(arr, key, plain_key, value) -> None:
    """``arr[key] = value`` while a cell is recorded: the write, and ``arr`` as its node."""
    try:
        index, basic = _t._index(key)
    except (IndexError, TypeError):
        basic = False
    y = _parent(value) if basic else None
    if y is None or arr.dtype != _F64:
        _write(
            arr,
            "an assignment to its elements",
            lambda: _ndarray.__setitem__(_view(arr, _ndarray), plain_key, _pv(value)),
            inputs=(value,),
        )
        return
    old = _before_write(arr, force=True)
    if old is None:  # a constant array: its old numbers are a constant
        old = _t._constant(np.array(_view(arr, _ndarray), copy=True))
    _ndarray.__setitem__(_view(arr, _ndarray), plain_key, _pv(value))
    arr._op, arr._a, arr._b = TENSOR_OPS["setitem"], old, y
    arr._params = {"index": index, "basic": True}
    arr.requires_grad = True
    _t._used(old, arr)
    _t._used(y, arr)
    _shared_write_cut(arr)


def _reduce_rule(ufunc, method, inputs, kwargs):
    """The node of ``ufunc.reduce``/``accumulate`` where a table op computes it, else None."""
    if len(inputs) != 1 or inputs[0].__class__ not in _TENSOR_NODES:
        return None
    x = inputs[0]
    axis = kwargs.get("axis", 0)
    for k, v in kwargs.items():
        if k == "dtype":
            if v is not None and np.dtype(v) != _F64:
                return None
        elif k == "where":
            if v is not True:
                return None
        elif k == "initial":
            if v is not _NoValue:
                return None
        elif k not in ("axis", "keepdims", "out"):
            return None
    if method == "reduce":
        op = {np.add: _SUM, np.maximum: _MAX, np.minimum: _MIN}.get(ufunc)
        if op is None:
            return None
        axes = None if axis is None else _t._axes(axis, x.ndim)
        if axes is not None and x.ndim and len(axes) == x.ndim and not kwargs.get("keepdims"):
            axes = tuple(axes)
        return _t._apply(op, x, None, {"axis": axes, "keepdims": bool(kwargs.get("keepdims"))})
    if method == "accumulate" and ufunc is np.add and axis is not None and x.ndim:
        return _t._apply(_CUMSUM, x, None, {"axis": _t._axes(axis, x.ndim)[0]})
    return None


# --------------------------------------------------------------------------- numpy functions
FUNCTION_RULES: dict = {}
"""numpy function → its rule ``rule(exact, *args, **kwargs)``, filled by the modules of
rules (:mod:`.numpy_reductions`, :mod:`.numpy_shapes`, :mod:`.numpy_linalg`), which
``gradmagic.core`` imports."""


def _function(func, args, kwargs):
    rule = FUNCTION_RULES.get(func)
    if rule is None and func in _MUTATORS and args and args[0].__class__ is Array and tracking():
        target = args[0]
        _write(
            target,
            f"numpy.{func.__name__}",
            lambda: _numpy(func, _deep_plain(args), _deep_plain(kwargs)),
            args[1:],
        )
        return None
    out = kwargs.get("out")
    if out is not None and out.__class__ is Array and tracking():
        result = [None]

        def write():
            result[0] = _numpy(func, _deep_plain(args), _deep_plain(kwargs))

        _write(out, f"numpy.{func.__name__}(..., out=...)", write, args)
        return out if result[0] is _view(out, _ndarray) or result[0] is out else result[0]
    pargs, pkwargs = _deep_plain(args), _deep_plain(kwargs)
    exact = _numpy(func, pargs, pkwargs)
    if out is not None and out.__class__ is Array:
        if exact is _view(out, _ndarray) or (
            isinstance(exact, _ndarray)
            and exact.base is not None
            and exact.base is pkwargs.get("out")
        ):
            return out
    if func in _IDENTITY and args:  # np.atleast_1d(x) is x, np.ascontiguousarray(x) is x
        for a, p in zip(args, pargs):
            if exact is p and a.__class__ is Array:
                return a
    if not tracking() or not _any_tracked(args) and not _any_tracked(kwargs.values()):
        return exact
    if func in _VALUE_FUNCTIONS:
        return exact
    if rule is not None:
        if func not in _SEQUENCES:  # numbers and lists holding nodes, as array nodes
            args = tuple(map(_lift, args))
        try:
            node = rule(exact, *args, **kwargs)
        except Exception:  # noqa: BLE001 - arguments a rule does not read: numpy's result, cut
            node = None
        if node.__class__ is list or isinstance(node, tuple):
            return node  # several results (np.split, np.linalg.eigh), each its node
        if node is not None:
            if node is exact or (
                node.__class__ is Array and node.base is not None and node.base.__class__ is Array
            ):
                return node  # a view of an input node (np.atleast_2d(x).base is x)
            return _adopt(exact, node)
    return _cut_result(
        exact, f"numpy.{getattr(func, '__name__', func)}", list(args) + list(kwargs.values())
    )


def _dtype_ok(dtype) -> bool:
    return dtype is None or np.dtype(dtype) == _F64


def _is_tensor(x) -> bool:
    return x.__class__ in _TENSOR_NODES


class _quiet_graph:
    """Numpy's warnings of a composite's inner steps silenced (the exact result warns)."""

    def __enter__(self):
        self.state = np.seterr(all="ignore")

    def __exit__(self, *exc):
        np.seterr(**self.state)


# --------------------------------------------------------------------------- numbers, lists as nodes
_PACK, _CONCAT = TENSOR_OPS["pack"], TENSOR_OPS["concatenate"]
_FLOAT_NODES = frozenset({_numbers.Float, _numbers.Float64, Value})


def _float_node(x) -> bool:
    """A number node holding a float (an int node's numbers stay ints)."""
    cls = x.__class__
    return cls in _FLOAT_NODES and (cls is not Value or x.data.__class__ is not int)


def _holds_nodes(x, depth: int = 0) -> bool:
    """True for a list or tuple (at any depth up to 32) holding a tracked node."""
    for e in x:
        cls = e.__class__
        if cls is list or cls is tuple:
            if depth < 32 and _holds_nodes(e, depth + 1):
                return True
        elif cls in _TENSOR_NODES:
            if e.requires_grad:
                return True
        elif cls in SCALAR_NODES:
            return True
    return False


def _node_of(x):
    """``x`` as a parent node: a node as it is, a list holding nodes packed into one array
    node (numpy's own array of it), a number or plain array a constant; None if numpy
    would not read it as float numbers."""
    cls = x.__class__
    if cls in _NODE_CLASSES:
        return x
    if (cls is list or cls is tuple) and _holds_nodes(x):
        return _packed(x)
    return _t._operand(x)


def _pieces(x, out, plain):
    for e in x:
        cls = e.__class__
        if cls is list or cls is tuple:
            _pieces(e, out, plain)
        elif cls in SCALAR_NODES or (cls in _TENSOR_NODES and e.requires_grad):
            if plain:
                out.append(_t._constant(np.concatenate(plain)))
                plain.clear()
            out.append(e)
        else:
            plain.append(np.ravel(np.asarray(_pv(e), dtype=_F64)))


def _packed(x):
    """The array numpy makes of the nested list ``x``, as a node built from its nodes.

    numpy lays the list's items out in order (C order), so the array is their
    flattened numbers one after the other: a balanced tree of ``pack`` ops,
    reshaped to numpy's shape. None when numpy's array is not float64.
    """
    exact = np.asarray(_deep_plain(x))
    if exact.dtype != _F64:
        return None
    pieces, plain = [], []
    _pieces(x, pieces, plain)
    if plain:
        pieces.append(_t._constant(np.concatenate(plain)))
    if (
        sum(max(np.size(p.data), 1) if p.__class__ not in SCALAR_NODES else 1 for p in pieces)
        != exact.size
    ):
        return None
    while len(pieces) > 1:
        pieces = [
            _t._apply(_PACK, pieces[i], pieces[i + 1]) if i + 1 < len(pieces) else pieces[i]
            for i in range(0, len(pieces), 2)
        ]
    node = _t._apply(_RESHAPE, pieces[0], None, {"shape": exact.shape})
    return _adopt(exact, node)


def _lift(x):
    """A float number node, or a list holding nodes, as an array node (else ``x``)."""
    cls = x.__class__
    if cls is list or cls is tuple:
        if _holds_nodes(x):
            node = _packed(x)
            if node is not None:
                return node
        return x
    if _float_node(x):
        return _link(_COPY, np.float64(_pv(x)), x)
    return x


def numpy_with_nodes(f):
    """``f``, a numpy function or ufunc, for arguments that hold number nodes or lists of
    nodes (numpy would read them as plain numbers): numpy's own result, as a node."""
    if isinstance(f, np.ufunc):

        def call(*args, **kwargs):
            return _ufunc(f, "__call__", args, kwargs)
    else:

        def call(*args, **kwargs):
            return _function(f, args, kwargs)

    return call


def takes_nodes(f) -> bool:
    """True if numpy's ``f`` keeps the graph of number nodes given to it (a rule or a ufunc)."""
    try:
        return f in FUNCTION_RULES or f in _UFUNC_OPS or f in _UFUNC_EXTRA
    except TypeError:  # unhashable
        return False


_UFUNC_EXTRA = frozenset({np.positive, np.conjugate, np.reciprocal, np.square})


_VALUE_FUNCTIONS = frozenset(
    _t._VALUE_FUNCTIONS
    | _t._SHAPE_FUNCTIONS
    | {
        np.argsort,
        np.argpartition,
        np.searchsorted,
        np.flatnonzero,
        np.argwhere,
        np.sign,
        np.array2string,
        np.array_repr,
        np.array_str,
        np.iterable,
        np.ndim,
        np.shape,
        np.size,
        np.may_share_memory,
        np.shares_memory,
        np.empty_like,
        np.full_like,
        np.unique,
        np.digitize,
        np.bincount,
        np.savetxt,
        np.save,
        np.savez,
        np.isreal,
        np.iscomplex,
        np.iscomplexobj,
        np.isrealobj,
        np.isneginf,
        np.isposinf,
        np.fix,
        np.lexsort,
        np.imag,
        np.angle,
        np.array_equiv,
    }
)
_SEQUENCES = frozenset(
    {np.concatenate, np.stack, np.hstack, np.vstack, np.array, np.asarray, np.asanyarray}
)
"""Functions whose first argument is a sequence of arrays (or the list an array is made of)."""
_IDENTITY = frozenset(
    {
        np.atleast_1d,
        np.atleast_2d,
        np.atleast_3d,
        np.ascontiguousarray,
        np.asfortranarray,
        np.asanyarray,
        np.require,
        np.asarray_chkfinite,
    }
)
_MUTATORS = frozenset(
    {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis}
)


def tensor_function(func, args, kwargs):
    """numpy's ``func`` on Tensors (outside a cell) through the same rules: a Tensor node,
    or NotImplemented where no rule makes one."""
    rule = FUNCTION_RULES.get(func)
    if rule is None or kwargs.get("out") is not None:
        return NotImplemented
    exact = func(*_deep_plain(args), **_deep_plain(kwargs))
    if not state.grad_enabled:
        return _tensor_result(exact, exact, plain_ok=True)
    try:
        with _quiet_graph():
            node = rule(exact, *args, **kwargs)
    except Exception:  # noqa: BLE001 - arguments a rule does not read
        return NotImplemented
    if node is None:
        return NotImplemented
    if isinstance(node, (list, tuple)):
        parts = [_tensor_result(n, e) for n, e in zip(node, exact)]
        if any(p is NotImplemented for p in parts):
            return NotImplemented
        return (
            type(exact)(*parts)
            if isinstance(exact, tuple) and hasattr(exact, "_fields")
            else type(node)(parts)
        )
    return _tensor_result(node, exact)


def _tensor_result(node, exact, plain_ok=False):
    """The rule's ``node`` as a Tensor holding numpy's ``exact`` numbers."""
    cls = node.__class__
    if cls is Tensor:
        return node
    if cls is Array or cls is Scalar64 or plain_ok:
        data = np.asarray(_pv(exact))
        if data.dtype != _F64:
            return NotImplemented if not plain_ok else exact
        out = _t._constant(np.array(data, dtype=_F64))
        if not plain_ok and node._op is not None:
            out._op, out._a, out._b, out._params = node._op, node._a, node._b, node._params
            out.requires_grad = True
        return out
    if cls is np.float64:  # a part with no gradient (slogdet's sign)
        return exact
    return NotImplemented


_t._ARRAY_CLASSES.update(_ARRAYS)
_t._WRITABLE.add(Array)
_t._array_result = _link
_t._function_rule = tensor_function
_numbers.DEFER.add(Scalar64)


def _number_ufunc(self, ufunc, method, *inputs, **kwargs):
    """A numpy ufunc given a number node (``int_array * x``, ``np.maximum(x, 0)``).

    numpy reads a float subclass as a float64 array scalar, not as the Python float it
    stands for: ``float32_array * x`` would be float64. Here numpy computes with the
    plain numbers (``float32_array * 0.7`` is float32) and, while a cell is recorded,
    the result is linked to the node.
    """
    return _ufunc(ufunc, method, inputs, kwargs)


for _cls in (_numbers.Float, _numbers.Int, _numbers.Float64):
    _cls.__array_ufunc__ = _number_ufunc
del _cls
