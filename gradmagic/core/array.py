"""Arrays that are nodes: what ``%%autograd`` makes of a float array.

A float64 array the cell reads or makes is an :class:`Array`: a subclass of
``numpy.ndarray`` (named ``ndarray``, as :class:`~gradmagic.core.engine.Float`
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
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance) changes its own
# code, as in plain Python, and not the engine's
from builtins import float, int, isinstance  # noqa: A004

import sys
import warnings
import weakref

import numpy as np

from . import engine as _engine
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
        return _engine.plain(x)
    if cls is list or cls is tuple:
        return _deep_plain(x)
    return x


_SCALARS = _engine.SCALARS


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
_INTERNAL = ("gradmagic.core.", "gradmagic.notebook.runtime")


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
def _function(func, args, kwargs):
    rule = _FUNCTION_RULES.get(func)
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


def _no(*values) -> bool:
    """True if every value is a default (None, numpy's no-value marker, True for where)."""
    return all(v is None or v is _NoValue for v in values)


def _dtype_ok(dtype) -> bool:
    return dtype is None or np.dtype(dtype) == _F64


def _is_tensor(x) -> bool:
    return x.__class__ in _TENSOR_NODES


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
        return _t._apply(op, a, None, {"axis": axes, "keepdims": keep})

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
        or a.__class__ is Scalar64
        or not _dtype_ok(dtype)
        or out is not None
        or (where is not _NoValue and where is not True)
        or mean is not _NoValue
    ):
        return None
    if correction is not _NoValue:
        ddof = correction
    keep = False if keepdims is _NoValue else bool(keepdims)
    axes = None if axis is None else _t._axes(axis, a.ndim)
    n = a.size if axes is None else int(np.prod([a.shape[i] for i in axes]))
    with _quiet_graph():
        d = a - np.mean(a, axis=axes, keepdims=True)
        v = np.sum(d * d, axis=axes, keepdims=keep) / (n - ddof)
        return np.sqrt(v) if _std else v


def _r_std(exact, *args, **kwargs):
    return _r_var(exact, *args, _std=True, **kwargs)


class _quiet_graph:
    """Numpy's warnings of a composite's inner steps silenced (the exact result warns)."""

    def __enter__(self):
        self.state = np.seterr(all="ignore")

    def __exit__(self, *exc):
        np.seterr(**self.state)


def _r_cumsum(exact, a, axis=None, dtype=None, out=None):
    if not _is_tensor(a) or a.__class__ is Scalar64 or not _dtype_ok(dtype) or out is not None:
        return None
    if axis is None:
        flat = a.reshape(-1) if a.__class__ is Array else Tensor.reshape(a, -1)
        return _t._apply(_CUMSUM, flat, None, {"axis": 0})
    return _t._apply(_CUMSUM, a, None, {"axis": _t._axes(axis, a.ndim)[0]})


def _r_dot(exact, a, b, out=None):
    if out is not None:
        return None
    da, db = np.ndim(a), np.ndim(b)
    if da == 0 or db == 0:
        return _link_call(np.multiply, exact, (a, b))
    if da > 2 or db > 2:
        return None
    pa, pb = _parent(a), _parent(b)
    if pa is None or pb is None:
        return None
    return _link(_t._MATMUL, exact, pa, pb)


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


def _r_squeeze(exact, a, axis=None):
    if a.__class__ is Array:
        return a.squeeze(axis)
    return None


def _r_expand_dims(exact, a, axis):
    if a.__class__ is Array:
        return a.reshape(exact.shape)
    return None


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


def _r_norm(exact, x, ord=None, axis=None, keepdims=False):
    if ord is not None or axis is not None or keepdims or not _is_tensor(x):
        return None
    with _quiet_graph():
        return np.sqrt(np.sum(x * x))


_FUNCTION_RULES = {
    np.sum: _reduction(_SUM),
    np.mean: _r_mean,
    np.max: _r_extreme(_MAX),
    np.amax: _r_extreme(_MAX),
    np.min: _r_extreme(_MIN),
    np.amin: _r_extreme(_MIN),
    np.var: _r_var,
    np.std: _r_std,
    np.cumsum: _r_cumsum,
    np.dot: _r_dot,
    np.reshape: _r_reshape,
    np.ravel: _r_ravel,
    np.transpose: _r_transpose,
    np.copy: _r_copy,
    np.atleast_1d: _r_atleast,
    np.atleast_2d: _r_atleast,
    np.atleast_3d: _r_atleast,
    np.squeeze: _r_squeeze,
    np.expand_dims: _r_expand_dims,
    np.where: _r_where,
    np.clip: _r_clip,
    np.linalg.norm: _r_norm,
}
# --------------------------------------------------------------------------- numbers, lists as nodes
_PACK, _CONCAT = TENSOR_OPS["pack"], TENSOR_OPS["concatenate"]
_FLOAT_NODES = frozenset({_engine.Float, _engine.Float64, Value})


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
        return f in _FUNCTION_RULES or f in _UFUNC_OPS or f in _UFUNC_EXTRA
    except TypeError:  # unhashable
        return False


_UFUNC_EXTRA = frozenset({np.positive, np.conjugate, np.reciprocal, np.square})


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


def _r_sort(exact, a, axis=-1, kind=None, order=None, *, stable=None):
    node = _node_of(a)
    if node is None or order is not None:
        return None
    plain = np.asarray(_pv(a), dtype=_F64)
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
    plain = np.asarray(_pv(a), dtype=_F64)
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
            node = _adopt(np.array(_pv(a), dtype=_F64), _t._apply(_COPY, node))
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


def _fold(op, nodes, params):
    """``op`` over the nodes as a balanced tree (each op takes two)."""
    while len(nodes) > 1:
        nodes = [
            _t._apply(op, nodes[i], nodes[i + 1], params) if i + 1 < len(nodes) else nodes[i]
            for i in range(0, len(nodes), 2)
        ]
    return nodes[0]


def _r_concatenate(exact, arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
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


def _r_hstack(exact, tup, *, dtype=None, casting="same_kind"):
    if not isinstance(tup, (list, tuple)) or not tup:
        return None
    nodes = []
    for x in tup:
        n = _node_of(x)
        if n is None:
            return None
        nodes.append(_t._apply(_RESHAPE, n, None, {"shape": np.atleast_1d(_pv(x)).shape}))
    axis = 0 if np.ndim(exact) == 1 else 1
    return _r_concatenate(exact, nodes, axis=axis, dtype=dtype)


def _r_vstack(exact, tup, *, dtype=None, casting="same_kind"):
    if not isinstance(tup, (list, tuple)) or not tup:
        return None
    nodes = []
    for x in tup:
        n = _node_of(x)
        if n is None:
            return None
        shape = np.atleast_2d(_pv(x)).shape
        nodes.append(_t._apply(_RESHAPE, n, None, {"shape": shape}))
    return _r_concatenate(exact, nodes, axis=0, dtype=dtype)


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


def _r_cross(exact, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None or (axisa, axisb, axisc) != (-1, -1, -1):
        return None
    if np.shape(_pv(a))[-1:] != (3,) or np.shape(_pv(b))[-1:] != (3,):
        return None
    na, nb = _node_of(a), _node_of(b)
    with _quiet_graph():
        one, two = np.array([1, 2, 0]), np.array([2, 0, 1])
        ca, cb = _as_array_node(na), _as_array_node(nb)
        return ca[..., one] * cb[..., two] - ca[..., two] * cb[..., one]


def _as_array_node(node):
    """An Array node for ``node`` (a Tensor or a constant made by a rule)."""
    if node.__class__ is Array or node.__class__ is Tensor:
        return node
    return (
        _adopt(np.array(node.data, dtype=_F64), _t._apply(_COPY, node))
        if node.requires_grad
        else _view(np.array(node.data, dtype=_F64), Array)
    )


def _r_linspace(
    exact, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None
):
    if retstep or not _dtype_ok(dtype) or axis != 0 or np.ndim(_pv(start)) or np.ndim(_pv(stop)):
        return None
    n = _t._int(num)
    div = (n - 1) if endpoint else n
    if div <= 0:
        return None
    with _quiet_graph():
        lo, hi = _lift(start), _lift(stop)
        frac = np.arange(n) / div
        return lo + (hi - lo) * frac


def _r_full(exact, shape, fill_value, dtype=None, order="C", *, device=None, like=None):
    node = _node_of(fill_value)
    if node is None or not _dtype_ok(dtype) or not isinstance(exact, _ndarray):
        return None
    return _link(TENSOR_OPS["broadcast_to"], exact, node, None, {"shape": exact.shape})


def _r_real(exact, val):
    node = _node_of(val)
    return None if node is None else _t._apply(_COPY, node)


def _r_real_if_close(exact, a, tol=100):
    return _r_real(exact, a)


def _r_array(exact, obj, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    if not _dtype_ok(dtype) or ndmin or not isinstance(exact, _ndarray):
        return None
    if obj.__class__ is list or obj.__class__ is tuple:
        return _packed(obj)
    return None


def _r_asarray(exact, a, dtype=None, order=None, *, device=None, copy=None, like=None):
    return _r_array(exact, a, dtype)


# products, written as einsum
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY"


def _einsum_nodes(spec, operands):
    """The node of ``np.einsum(spec, *operands)`` (explicit output, no ellipsis)."""
    subs, out = spec.split("->")
    subs = subs.split(",")
    nodes = [_node_of(x) for x in operands]
    if any(n is None for n in nodes) or len(subs) != len(nodes):
        return None
    if len(nodes) == 1:
        return _t._apply(TENSOR_OPS["einsum1"], nodes[0], None, {"spec": spec})
    left, ls = nodes[0], subs[0]
    for i in range(1, len(nodes)):
        if i == len(nodes) - 1:
            keep = out
        else:
            later = set(out).union(*subs[i + 1 :])
            keep = "".join(c for c in dict.fromkeys(ls + subs[i]) if c in later)
        left = _t._apply(TENSOR_OPS["einsum"], left, nodes[i], {"spec": f"{ls},{subs[i]}->{keep}"})
        ls = keep
    return left


def _r_einsum(exact, *operands, out=None, optimize=False, **kwargs):
    if out is not None or kwargs or not operands or not isinstance(operands[0], str):
        return None
    spec = operands[0].replace(" ", "")
    if "." in spec:
        return None
    if "->" not in spec:
        letters = spec.replace(",", "")
        spec += "->" + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return _einsum_nodes(spec, operands[1:])


def _r_inner(exact, a, b):
    na, nb = np.ndim(_pv(a)), np.ndim(_pv(b))
    if na == 0 or nb == 0:
        return _link_call(np.multiply, exact, (a, b))
    sa = _LETTERS[: na - 1] + "z"
    sb = _LETTERS[na - 1 : na + nb - 2] + "z"
    return _einsum_nodes(f"{sa},{sb}->{sa[:-1]}{sb[:-1]}", (a, b))


def _r_outer(exact, a, b, out=None):
    if out is not None:
        return None
    na, nb = _node_of(a), _node_of(b)
    if na is None or nb is None:
        return None
    flat = [_t._apply(_RESHAPE, n, None, {"shape": (-1,)}) for n in (na, nb)]
    return _einsum_nodes("i,j->ij", flat)


def _r_vdot(exact, a, b):
    na, nb = _node_of(a), _node_of(b)
    if na is None or nb is None:
        return None
    flat = [_t._apply(_RESHAPE, n, None, {"shape": (-1,)}) for n in (na, nb)]
    return _einsum_nodes("i,i->", flat)


def _r_tensordot(exact, a, b, axes=2):
    na, nb = np.ndim(_pv(a)), np.ndim(_pv(b))
    if isinstance(axes, (list, tuple)) and len(axes) == 2:
        ia, ib = (_ints(x) for x in axes)
        ia = (ia,) if isinstance(ia, int) else ia
        ib = (ib,) if isinstance(ib, int) else ib
    else:
        n = _t._int(axes)
        ia, ib = tuple(range(na - n, na)), tuple(range(n))
    ia = [i % na for i in ia]
    ib = [i % nb for i in ib]
    sa = list(_LETTERS[:na])
    sb = list(_LETTERS[na : na + nb])
    for i, j in zip(ia, ib):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in ia] + [
        c for k, c in enumerate(sb) if k not in ib
    ]
    return _einsum_nodes(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", (a, b))


def _r_kron(exact, a, b):
    pa, pb = np.asarray(_pv(a)), np.asarray(_pv(b))
    n = max(pa.ndim, pb.ndim)
    na, nb = _node_of(a), _node_of(b)
    if na is None or nb is None:
        return None
    sa_shape = (1,) * (n - pa.ndim) + pa.shape
    sb_shape = (1,) * (n - pb.ndim) + pb.shape
    na = _t._apply(_RESHAPE, na, None, {"shape": sa_shape})
    nb = _t._apply(_RESHAPE, nb, None, {"shape": sb_shape})
    sa, sb = _LETTERS[:n], _LETTERS[n : 2 * n]
    out = "".join(x + y for x, y in zip(sa, sb))
    prod = _einsum_nodes(f"{sa},{sb}->{out}", (na, nb))
    return _t._apply(_RESHAPE, prod, None, {"shape": np.shape(exact)})


def _r_dot_any(exact, a, b, out=None):
    if out is not None:
        return None
    da, db = np.ndim(_pv(a)), np.ndim(_pv(b))
    if da <= 2 and db <= 2:
        return _r_dot(exact, _node_of(a), _node_of(b))
    return _r_tensordot(exact, a, b, axes=([-1], [-2 if db >= 2 else -1]))


# linear algebra
def _linalg_unary(name):
    op = TENSOR_OPS[name]

    def rule(exact, a, *args, **kwargs):
        if args or kwargs:
            return None
        node = _node_of(a)
        return None if node is None else _link(op, exact, node)

    return rule


def _r_slogdet(exact, a):
    node = _node_of(a)
    if node is None:
        return None
    logdet = _link(TENSOR_OPS["logdet"], exact[1], node)
    return type(exact)(exact[0], logdet)


def _r_solve(exact, a, b):
    na, nb = _node_of(a), _node_of(b)
    if na is None or nb is None:
        return None
    return _link(TENSOR_OPS["solve"], exact, na, nb, {"vec": np.ndim(_pv(b)) == 1})


def _r_cholesky(exact, a, /, *, upper=False):
    if upper:
        return None
    return _linalg_unary("cholesky")(exact, a)


def _r_eigh(exact, a, UPLO="L"):
    if UPLO != "L":
        return None
    node = _node_of(a)
    if node is None:
        return None
    w = _link(TENSOR_OPS["eigvalsh"], exact[0], node)
    v = _link(TENSOR_OPS["eigvecs"], exact[1], node)
    return type(exact)(w, v)


def _r_eigvalsh(exact, a, UPLO="L"):
    return _linalg_unary("eigvalsh")(exact, a) if UPLO == "L" else None


def _r_svd(exact, a, full_matrices=True, compute_uv=True, hermitian=False):
    if hermitian:
        return None
    node = _node_of(a)
    if node is None:
        return None
    if not compute_uv:
        return _link(TENSOR_OPS["svdvals"], exact, node)
    s = _link(TENSOR_OPS["svdvals"], exact.S, node)
    m, n = np.shape(_pv(a))[-2:]
    if full_matrices and m != n:  # U's (or Vh's) extra columns are any basis: no derivative
        u = _cut_result(exact.U, "the U of numpy.linalg.svd(full_matrices=True)", (a,))
        vh = _cut_result(exact.Vh, "the Vh of numpy.linalg.svd(full_matrices=True)", (a,))
    else:
        u = _link(TENSOR_OPS["svd_u"], exact.U, node)
        vh = _link(TENSOR_OPS["svd_vh"], exact.Vh, node)
    return type(exact)(u, s, vh)


def _r_pinv(exact, a, rcond=None, hermitian=False, *, rtol=_NoValue):
    if rcond is not None or hermitian or rtol is not _NoValue:
        return None
    return _linalg_unary("pinv")(exact, a)


def _r_norm_any(exact, x, ord=None, axis=None, keepdims=False):
    node = _node_of(x)
    if node is None:
        return None
    ndim = np.ndim(_pv(x))
    with _quiet_graph():
        if axis is None and ord is None:
            return np.sqrt(np.sum(node * node))
        axes = tuple(range(ndim)) if axis is None else _t._axes(axis, ndim)
        if len(axes) == 1:
            a = axes
            if ord is None or ord == 2:
                return np.sqrt(np.sum(node * node, axis=a, keepdims=keepdims))
            if ord == np.inf:
                return np.max(np.abs(node), axis=a, keepdims=keepdims)
            if ord == -np.inf:
                return np.min(np.abs(node), axis=a, keepdims=keepdims)
            if ord == 0:
                return None
            p = float(ord)
            return np.sum(np.abs(node) ** p, axis=a, keepdims=keepdims) ** (1.0 / p)
        if len(axes) != 2:
            return None
        r, c = axes
        if ord is None or ord == "fro":
            return np.sqrt(np.sum(node * node, axis=axes, keepdims=keepdims))
        if keepdims:
            return None
        if ord in (1, -1):
            sums = np.sum(np.abs(node), axis=r)
            c2 = c - 1 if c > r else c
            return (np.max if ord == 1 else np.min)(sums, axis=c2)
        if ord in (np.inf, -np.inf):
            sums = np.sum(np.abs(node), axis=c)
            r2 = r - 1 if r > c else r
            return (np.max if ord == np.inf else np.min)(sums, axis=r2)
        if ord in (2, -2, "nuc") and axes == (ndim - 2, ndim - 1):
            s = np.linalg.svd(node, compute_uv=False)
            if ord == "nuc":
                return np.sum(s, axis=-1)
            return (np.max if ord == 2 else np.min)(s, axis=-1)
        return None


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


_FUNCTION_RULES.update(
    {
        np.prod: _reduction(TENSOR_OPS["prod"]),
        np.cumprod: _r_cumprod,
        np.median: _r_median,
        np.diff: _r_diff,
        np.trace: _r_trace,
        np.ptp: _r_ptp,
        np.average: _r_average,
        np.gradient: _r_gradient,
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
        np.squeeze: _r_squeeze,
        np.expand_dims: _r_expand_dims,
        np.sort: _r_sort,
        np.partition: _r_partition,
        np.concatenate: _r_concatenate,
        np.stack: _r_stack,
        np.hstack: _r_hstack,
        np.vstack: _r_vstack,
        np.split: _r_split,
        np.array_split: _r_split,
        np.hsplit: _r_split_along(1),
        np.vsplit: _r_split_along(0),
        np.dsplit: _r_split_along(2),
        np.rollaxis: _r_rollaxis,
        np.cross: _r_cross,
        np.linspace: _r_linspace,
        np.full: _r_full,
        np.real: _r_real,
        np.real_if_close: _r_real_if_close,
        np.sinc: _linalg_unary("sinc"),
        np.array: _r_array,
        np.asarray: _r_asarray,
        np.asanyarray: _r_asarray,
        np.einsum: _r_einsum,
        np.inner: _r_inner,
        np.outer: _r_outer,
        np.vdot: _r_vdot,
        np.tensordot: _r_tensordot,
        np.kron: _r_kron,
        np.dot: _r_dot_any,
        np.linalg.inv: _linalg_unary("inv"),
        np.linalg.det: _linalg_unary("det"),
        np.linalg.slogdet: _r_slogdet,
        np.linalg.solve: _r_solve,
        np.linalg.cholesky: _r_cholesky,
        np.linalg.eigh: _r_eigh,
        np.linalg.eigvalsh: _r_eigvalsh,
        np.linalg.svd: _r_svd,
        np.linalg.pinv: _r_pinv,
        np.linalg.norm: _r_norm_any,
        np.nan_to_num: _r_nan_to_num,
    }
)


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


def tensor_function(func, args, kwargs):
    """numpy's ``func`` on Tensors (outside a cell) through the same rules: a Tensor node,
    or NotImplemented where no rule makes one."""
    rule = _FUNCTION_RULES.get(func)
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
_engine.DEFER.add(Scalar64)


def _number_ufunc(self, ufunc, method, *inputs, **kwargs):
    """A numpy ufunc given a number node (``int_array * x``, ``np.maximum(x, 0)``).

    numpy reads a float subclass as a float64 array scalar, not as the Python float it
    stands for: ``float32_array * x`` would be float64. Here numpy computes with the
    plain numbers (``float32_array * 0.7`` is float32) and, while a cell is recorded,
    the result is linked to the node.
    """
    return _ufunc(ufunc, method, inputs, kwargs)


for _cls in (_engine.Float, _engine.Int, _engine.Float64):
    _cls.__array_ufunc__ = _number_ufunc
del _cls
