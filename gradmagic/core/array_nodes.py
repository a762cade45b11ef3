"""The magic's array nodes: :class:`Array` and the numpy scalar nodes (:class:`Scalar64`,
``Scalar32``, ``Scalar16``, :class:`Complex128`), and how numpy's results become nodes (a
float64 one, ``W[i, j]`` or ``W.sum()``, a number node: see :func:`_number64`).

The classes carry a tensor node's links in their instance dict and show themselves as
numpy's own (``ndarray``, ``float64``). Here too: an object's plain value (``_pv``), numpy's
result linked to its inputs with a table entry (``_link``, ``_adopt``) or kept plain with the
cut reported (``_cut_result``), number nodes and lists of nodes made array nodes
(``_lift``, ``_packed``), and numpy's warnings reissued at the user's line.
:mod:`gradmagic.core.array` gives the classes numpy's dispatch and is the import path for
all of it; :mod:`.array_methods` adds their methods.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance) changes its own
# code, as in plain Python, and not the engine's
from builtins import float, int, isinstance  # noqa: A004

import operator
import sys
import warnings
import weakref

import numpy as np

from . import fpstate as _fp
from . import number_nodes as _numbers
from .engine import SCALAR_NODES, Value, state
from .ops import Op as _Op
from .sites import cursor
from . import tensor as _t
from .tensor import Tensor, TENSOR_OPS

__all__ = ["Array", "Scalar64", "array_leaf", "scalar_leaf", "is_array_node", "plain_array"]

_F64, _C128, _F32, _F16 = np.float64, np.complex128, np.float32, np.float16
_F64_TYPE = np.dtype(_F64)
_HELD = frozenset(map(np.dtype, (_F64, _C128, _F32, _F16)))  # the dtypes an array node holds
_low_of = np.generic.__float__  # a float32's or float16's number (exact as a Python float)
_complex_of = complex.__complex__  # type: ignore[attr-defined]
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
    """A float ``ndarray`` (float64, float32, float16 or complex128) that is a tensor node of
    the graph (what the magic makes of an array).

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
    _born = 0  # the birth that made a leaf (gradmagic.notebook.runtime.born), 0: none
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

    def __copy__(self):  # numpy's order "K"; a node of the same graph while recorded
        return self.copy("K")

    def __deepcopy__(self, memo=None):
        return self.copy("K")

    def __array_wrap__(self, arr, context=None, return_scalar=False):
        arr = _view(arr, _ndarray) if isinstance(arr, _ndarray) else arr
        return arr[()] if return_scalar else arr

    # numpy's dispatch (__array_ufunc__, __array_function__) is set by core.array, the
    # methods (indexing, views, reductions, item, tolist) by core.array_methods


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
        return repr(plain_array(self))

    def __str__(self):
        return str(plain_array(self))

    def __reduce_ex__(self, protocol):
        plain = plain_array(self)
        return type(plain), (complex(plain) if isinstance(plain, complex) else float(plain),)

    def __copy__(self):  # a number is its own copy, as a plain one is
        return self

    def __deepcopy__(self, memo=None):
        return self

    def __float__(self):
        if tracking() and self.requires_grad:
            state.float_conversions += 1
        return _float_of(self)

    def item(self, *args):
        if not args and tracking() and self.requires_grad:
            return as_float(self)  # a number node of the same graph
        return plain_array(self).item(*args)

    __hash__ = np.float64.__hash__


class Complex128(np.complex128):
    """A numpy complex128 that is a tensor node (a 0-d complex result of an array node);
    named ``complex128``. Its links, ``data`` and plain copies are as :class:`Scalar64`'s."""

    _grad = None
    label = ""
    _op = _a = _b = _mark = _params = None
    _site = -1
    requires_grad = False
    __hash__ = np.complex128.__hash__

    @property
    def data(self):
        """The number as a 0-d complex128 array."""
        return np.array(_complex_of(self))


for _name in ("shape", "__repr__", "__str__", "__reduce_ex__", "__copy__", "__deepcopy__"):
    setattr(Complex128, _name, Scalar64.__dict__[_name])


class Complex(Complex128):
    """A Python complex number that is a node (an input, or Python arithmetic on one);
    named ``complex``, its arithmetic Python's own."""


def _low_float(base):
    """The node class of a numpy scalar of a lower precision (``float32``, ``float16``):
    :class:`Scalar64`'s surface, its numbers and arithmetic ``base``'s own."""
    names = ("shape", "__repr__", "__str__", "__reduce_ex__", "__copy__", "__deepcopy__", "item")
    body = {n: Scalar64.__dict__[n] for n in names}
    body.update(_grad=None, label="", _op=None, _a=None, _b=None, _mark=None, _params=None)
    body.update(_site=-1, requires_grad=False, __hash__=base.__hash__)
    body["data"] = property(lambda self: np.array(base(_low_of(self))), doc="A 0-d array.")
    return type(base.__name__, (base,), body)


Scalar32, Scalar16 = _low_float(_F32), _low_float(_F16)


def as_float(x):
    """``float(x)`` of a one-element array node ``x`` while a cell is recorded: a Python
    float that is a number node of the same graph (linked through a copy of ``x``, whose
    gradient is its own)."""
    number = np.asarray(_pv(x), dtype=_F64).item()
    link = _t._apply(_COPY, x) if x.shape == () else x.reshape(())
    return _numbers.of_tensor(number, link)


_SCALAR_ARRAYS = frozenset({Scalar64, Complex128, Complex, Scalar32, Scalar16})  # 0-d nodes
_ARRAYS = (Array, *_SCALAR_ARRAYS)
_NODE_CLASSES = frozenset({*_ARRAYS, Tensor}) | SCALAR_NODES
_TENSOR_NODES = frozenset({*_ARRAYS, Tensor})
PLAIN_TYPES = {Array: np.ndarray, Scalar64: _F64, Complex128: _C128, Complex: complex}
PLAIN_TYPES.update({Scalar32: _F32, Scalar16: _F16})
"""An array node's class → the type it stands for (what ``type(x)`` gives in a plain cell)."""

# the tensor protocol (grad, backward, parents, kink, ...) is Tensor's own
for _name in (
    "grad",
    "_zero_grad",
    "_grad_to_add_into",
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
    for _cls in _ARRAYS:
        setattr(_cls, _name, Tensor.__dict__[_name])

_named: type
for _named, _base in PLAIN_TYPES.items():  # named as numpy's (or Python's) own
    _named.__name__ = _named.__qualname__ = _base.__name__
    _named.__module__ = _base.__module__


def _scalar_binary(ufunc, name, base=np.float64, number=_float_of):
    """``s <op> other`` for a numpy scalar node: ``base``'s own arithmetic, then the link."""
    method = getattr(base, name)
    reflected = name.startswith("__r")
    plain_operator = getattr(operator, name.replace("__r", "__", 1) if reflected else name)

    def forward(self, other):
        cls = other.__class__
        if cls is Value:
            return NotImplemented
        if cls is Array or cls is Tensor:  # the array decides (broadcasting, out=)
            return ufunc(other, self) if reflected else ufunc(self, other)
        plain = _pv(other)
        if base is complex and isinstance(plain, np.generic):
            # a Python complex and a numpy number: the result's type is what Python's operator
            # gives (np.complex128 * 1j is numpy's, though this subclass's method runs first)
            pair = (plain, complex(number(self))) if reflected else (number(self), plain)
            r = _numpy(plain_operator, pair, {}, True)
        else:
            r = _numpy(method, (base(number(self)), plain), {}, True)
        if r is NotImplemented and cls in _SCALARS:  # float32 * a float64 node: numpy's ufunc
            return ufunc(other, self) if reflected else ufunc(self, other)
        if r is NotImplemented or not tracking():
            return r
        return _link_call(ufunc, r, (other, self) if reflected else (self, other))

    forward.__name__ = name
    return forward


def _scalar_unary(ufunc, name, base=np.float64, number=_float_of):
    method = getattr(base, name)

    def forward(self):
        r = _numpy(method, (base(number(self)),), {}, True)
        if not tracking():
            return r
        return _link_call(ufunc, r, (self,))

    forward.__name__ = name
    return forward


_SCALAR_KINDS = (
    (Scalar64, _F64, _float_of),
    (Complex128, _C128, _complex_of),
    (Complex, complex, _complex_of),
    (Scalar32, _F32, _low_of),
    (Scalar16, _F16, _low_of),
)
_uf: np.ufunc
for _name, _uf in (
    ("add", np.add),
    ("sub", np.subtract),
    ("mul", np.multiply),
    ("truediv", np.true_divide),
    ("floordiv", np.floor_divide),
    ("mod", np.remainder),
    ("pow", np.power),
):
    for _cls, _base, _of in _SCALAR_KINDS:
        for _m in (f"__{_name}__", f"__r{_name}__"):
            if hasattr(_base, _m):
                setattr(_cls, _m, _scalar_binary(_uf, _m, _base, _of))
for _name, _uf in (("neg", np.negative), ("pos", np.positive), ("abs", np.absolute)):
    for _cls, _base, _of in _SCALAR_KINDS:
        setattr(_cls, f"__{_name}__", _scalar_unary(_uf, f"__{_name}__", _base, _of))
for _cls, _base, _of in _SCALAR_KINDS[1:3]:  # z.real, z.imag, z.conjugate()
    _cls.conjugate = _cls.conj = _scalar_unary(np.conjugate, "conjugate", _base, _of)  # type: ignore[method-assign]
    _cls.real = property(lambda self: np.real(self))  # type: ignore[assignment]
    _cls.imag = property(lambda self: np.imag(self))  # type: ignore[assignment]
del _name, _uf, _cls, _base, _m, _named, _of


# --------------------------------------------------------------------------- plain values
def plain_array(x):
    """``x``'s plain value: an Array's plain ndarray, a Scalar64's np.float64 (a
    Complex128's np.complex128, a Complex's complex), else ``x``."""
    cls = x.__class__
    if cls is Array:
        return _view(x, _ndarray)
    if cls is Scalar64:
        return np.float64(_float_of(x))
    if cls is Complex128 or cls is Complex:
        return PLAIN_TYPES[cls](_complex_of(x))
    if cls is Scalar32 or cls is Scalar16:
        return PLAIN_TYPES[cls](_low_of(x))
    return x


def _pv(x):
    """``x`` as numpy would see it with no node: Arrays, Tensors, Values as plain numbers."""
    cls = x.__class__
    if cls is Array or cls in _SCALAR_ARRAYS:
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
            or e.__class__ in _SCALARS
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
    return x.__class__ is Array or x.__class__ in _SCALAR_ARRAYS


def _tracked(x) -> bool:
    cls = x.__class__
    if cls in _TENSOR_NODES:
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
    """A fresh leaf viewing ``x``'s memory (a float ndarray, or an Array of an earlier run)."""
    if x.__class__ is not _ndarray:
        x = _view(x, _ndarray)
    leaf = _view(x, Array)
    leaf.label = label
    leaf.requires_grad = True
    return leaf


def scalar_leaf(x, label: str = ""):
    """A fresh leaf of the number ``x``: a complex (Python's, numpy's complex128), a numpy
    float32 or float16, or a node of one."""
    leaf = _scalar_node(plain_array(x))
    leaf.label = label
    leaf.requires_grad = True
    return leaf


def array_constant(x):
    """A float array numpy made in a recorded cell, as an array node needing no gradient."""
    return _view(x, Array)


def _parent(x):
    """``x`` as a parent of a node: a node itself, or a constant for a number or array."""
    if x.__class__ in _NODE_CLASSES:
        return x
    return _operand(x)


def _operand(x):
    """``x`` as a constant parent (a complex number or array too), or None."""
    if isinstance(x, (complex, np.complexfloating)) or (
        isinstance(x, _ndarray) and x.dtype.kind == "c"
    ):
        return _t._constant(np.array(x, dtype=_C128))
    return _t._operand(x)


def _adopt(exact, node):
    """numpy's result ``exact`` as the node ``node`` (its links; ``exact``'s numbers)."""
    if node is None or node._op is None:
        return exact
    cls = exact.__class__
    if cls is Array:
        out = exact
    elif cls is _ndarray:
        if exact.dtype not in _HELD:
            return exact
        out = _view(exact, Array)
    elif cls is np.float64 or cls is _Float64:
        number = _number64(exact, node._op, node._a, node._b, node._params, -1)
        if number is not None:
            return number
        out = Scalar64(exact)
    elif cls in _SCALAR_ARRAYS:  # a node made by the rule itself (a composite): a new one
        out = cls(plain_array(exact))
    elif cls is float and (node.__class__ in SCALAR_NODES or node.data.size == 1):
        # numpy's Python float (np.real(1j))
        return _numbers.of_tensor(exact, node)
    else:
        out = _scalar_node(exact)
        if out is None:
            return exact
    if out.dtype not in _HELD:
        return exact
    out._op, out._a, out._b, out._params = node._op, node._a, node._b, node._params
    out.requires_grad = True
    _t._used(out._a, out)
    if out._b is not None:
        _t._used(out._b, out)
    return out


def _number_item(self, *args):
    """``x.item()`` of a float64 node while a cell is recorded: a Python float that is a
    number node of the same graph (``float`` of it)."""
    if not args and tracking():
        return _numbers.of_tensor(_float_of(self), self)
    return _F64(_float_of(self)).item(*args)


_NUMBER_TWIN = {t: _numbers.OPS[n] for n, t in TENSOR_OPS.items() if n in _numbers.OPS}
_NUMBER_TWIN = {t: op for t, op in _NUMBER_TWIN.items() if op.arity == t.arity}
_Float64 = _numbers.Float64
_Float64._params = None  # type: ignore[attr-defined]  # (an array op's params, if one made it)
_Float64.requires_grad = True  # type: ignore[attr-defined]  # (a number node always is one)
_Float64.item = _number_item  # type: ignore[method-assign]
_Float64.params = Tensor.params  # type: ignore[attr-defined]  # (as an array node's)
_Float64._replay = Tensor._replay  # type: ignore[attr-defined]
_new64 = np.float64.__new__


def _number64(exact, op, a, b, params, site):
    """numpy's float64 result of the tensor op ``op`` as a float64 number node: the scalar
    engine's node, cheap to make, walk, sweep and trace. Computed from an array node, its
    entry's rule pulls its gradient back (an element read adds into that element); from
    numbers only, the number engine's entry of the same name does (None without one)."""
    if op.__class__ is not _Op and a.__class__ in SCALAR_NODES:
        if b is None or b.__class__ in SCALAR_NODES:
            op = _NUMBER_TWIN.get(op)
            if op is None or params:
                return None
    out = _new64(_Float64, exact)
    out.grad = 0.0
    out.label = ""
    out._mark = None
    out._site = site
    out._op, out._a, out._b, out._params = op, a, b, params
    _t._used(a, out)
    if b is not None:
        _t._used(b, out)
    return out


def _scalar_node(exact):
    """The numpy (or Python complex) scalar ``exact`` as a fresh node, or None."""
    cls = _SCALAR_NODE_OF.get(exact.__class__)
    return None if cls is None else cls(exact)


_SCALAR_NODE_OF = {v: k for k, v in PLAIN_TYPES.items() if k is not Array}


def _link(op, exact, a, b=None, params=None, sited=True):
    """``exact`` (numpy's result of ``op`` on ``a``, ``b``) as a node linked to them
    (``sited``: marked as made at the running line, as :func:`_adopt` does not)."""
    cls = exact.__class__
    if cls is _ndarray and exact.ndim == 0 and exact.dtype is _F64_TYPE:
        exact, cls = exact[()], _F64
    if cls is _F64:
        out = _number64(exact, op, a, b, params, cursor.site if sited else -1)
        if out is not None:
            return out
        out = Scalar64(exact)
    elif cls is _ndarray:
        if exact.dtype not in _HELD:
            return exact
        out = _scalar_node(exact[()]) if exact.ndim == 0 else _view(exact, Array)
    elif cls is Array and exact.dtype in _HELD:
        out = exact
    elif cls is float:  # Python's float of a complex node (abs(z)): a number node
        return _numbers.of_tensor(exact, _link(op, _F64(exact), a, b, params, sited))
    else:
        out = _scalar_node(exact)
        if out is None:
            return exact
    out._op, out._a, out._b, out._params = op, a, b, params
    if sited:
        out._site = cursor.site
    out.requires_grad = True
    _t._used(a, out)
    if b is not None:
        _t._used(b, out)
    return out


_UFUNC_OPS = _t._UFUNC_OPS
_UFUNC_VALUES = _t._UFUNC_VALUES
_CALL_OPTIONS = frozenset({"out", "casting", "order", "subok", "signature"})


def plain_options(kwargs, allowed) -> bool:
    """Whether a ufunc's keyword arguments ask for nothing its rule does not do: a float64
    (or no) dtype, ``where=True``, no ``initial`` (where ``allowed`` has it), and otherwise
    only keys in ``allowed``."""
    for k, v in kwargs.items():
        if k == "dtype":
            if v is not None and np.dtype(v) not in _HELD:
                return False
        elif k == "where":
            if v is not True:
                return False
        elif k not in allowed or (k == "initial" and v is not _NoValue):
            return False
    return True


def _call_rule(ufunc, inputs, kwargs):
    """(op, parents) for ``ufunc(*inputs, **kwargs)``, or None if it has no rule."""
    if kwargs and not plain_options(kwargs, _CALL_OPTIONS):
        return None
    op = _UFUNC_OPS.get(ufunc)
    if op is not None:
        if len(inputs) != op.arity:
            return None
        parents = tuple(map(_node_of, inputs))
    elif ufunc is np.square:
        op, parents = _POW, (_parent(inputs[0]), _t._constant(np.array(2.0)))
    elif ufunc is np.positive:
        op, parents = _COPY, (_parent(inputs[0]),)
    elif ufunc is np.reciprocal:
        op, parents = _DIV, (_t._constant(np.array(1.0)), _parent(inputs[0]))
    else:
        return None
    for p in parents:
        if p is None:
            return None
    return op, parents


def _link_call(ufunc, exact, inputs, kwargs=None):
    """numpy's result of ``ufunc(*inputs)`` as a node, the cut reported if it has no rule."""
    if ufunc in _UFUNC_VALUES and getattr(exact, "dtype", _F64_TYPE).kind != "c":
        return exact  # piecewise constant: plain values, no gradient to lose
    rule = _call_rule(ufunc, inputs, kwargs or {})
    if rule is None:
        return _cut_result(exact, f"numpy.{ufunc.__name__}", inputs)
    kind = getattr(exact, "dtype", _F64_TYPE)
    if kind not in _HELD and kind.kind in "fc":  # float32 * x is float32, as in numpy: no node
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
            and exact.dtype in _HELD
            and not any(exact is x for x in inputs)
        ):
            exact = node = _view(exact, Array)
        elif _scalar_node(exact) is not None:
            exact = node = _scalar_node(exact)
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


_WARNS = _fp.WARNS
# numpy's C code (ufuncs, scalar arithmetic): a warning names the Python frame calling it
_C_CODE = frozenset(map(type, (np.add, np.add.__call__, np.add.reduce, _F64.__add__)))
_PACKAGE = __file__.rsplit("/core/", 1)[0] + "/"  # gradmagic's own files
_REGISTRIES: dict = {}  # file -> the registry of the warnings numpy's own code raised there


def _numpy(f, args, kwargs, pure: bool = False):
    """``f(*args, **kwargs)``, its warnings where numpy puts them in a plain cell.

    numpy names the innermost Python frame: the line that called into the array when ``f``
    is numpy's C code (here that frame is the magic's own), numpy's Python code otherwise
    (``prod`` warns in ``numpy/_core/_methods.py``), which is kept.

    ``pure``: ``f`` writes nothing it reads and warns only through numpy's error state (a
    ufunc with no ``out=``, numpy's scalar arithmetic, a reduction): it runs first with the
    warnings numpy would give made errors, and only when one is raised runs again, its
    warnings caught. A call that warns about nothing pays for no catching.
    """
    if pure:
        result = _fp.calm(f, args, kwargs)
        if result is _WARNS and f.__class__ in _C_CODE:  # numpy would warn at the caller's line
            result = _numbers.warned_at(f, args, kwargs, _caller())
        if result is not _WARNS:
            return result
        # numpy would have warned (or raised), or only numpy can: again, the careful way
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = f(*args, **kwargs)
    for w in caught:
        if str(w.filename).startswith(_PACKAGE):
            _numbers.reissue([w], _caller())
        else:
            module = str(w.filename).rsplit("/", 1)[-1].removesuffix(".py")
            registry = _REGISTRIES.setdefault(w.filename, {})
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, module, registry)
    return result


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
    return _operand(x)


def _pieces(x, out, plain, dtype):
    for e in x:
        cls = e.__class__
        if cls is list or cls is tuple:
            _pieces(e, out, plain, dtype)
        elif cls in SCALAR_NODES or (cls in _TENSOR_NODES and e.requires_grad):
            if plain:
                out.append(_t._constant(np.concatenate(plain)))
                plain.clear()
            out.append(e)
        else:
            plain.append(np.ravel(np.asarray(_pv(e), dtype=dtype)))


def _packed(x):
    """The array numpy makes of the nested list ``x``, as a node built from its nodes.

    numpy lays the list's items out in order (C order), so the array is their
    flattened numbers one after the other: a balanced tree of ``pack`` ops,
    reshaped to numpy's shape. None when numpy's array is not float64.
    """
    try:
        exact = np.asarray(_deep_plain(x))
    except ValueError:  # a ragged list: numpy makes no array of it
        return None
    if exact.dtype not in _HELD:
        return None
    pieces, plain = [], []
    _pieces(x, pieces, plain, exact.dtype)
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
