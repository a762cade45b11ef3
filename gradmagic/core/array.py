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

The classes, plain values and the making of nodes are :mod:`.array_nodes`'; the in-place
writes and numpy's dispatch (ufuncs, functions) are here, and this module is the import path
for all of it. The rules of numpy's functions live in :mod:`.numpy_reductions`,
:mod:`.numpy_shapes` and :mod:`.numpy_linalg`, the arrays' methods in :mod:`.array_methods`.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance) changes its own
# code, as in plain Python, and not the engine's
from builtins import isinstance  # noqa: A004

import numpy as np

from . import fpstate as _fp
from . import number_nodes as _numbers
from . import tensor as _t
from . import tensor_nodes
from . import array_writes as _writes
from .engine import state
from .tensor import Tensor

# the array nodes' helpers, also as array._pv, array._link ... for the rule modules
from .array_nodes import (  # noqa: F401
    _ARRAYS,
    _CONCAT,
    _COPY,
    _CUMSUM,
    _F64,
    _GETITEM,
    _HELD,
    _SCALAR_ARRAYS,
    _MAX,
    _MAXIMUM,
    _MEAN,
    _MIN,
    _MINIMUM,
    _NoValue,
    plain_options,
    _RESHAPE,
    _SUM,
    _TENSOR_NODES,
    _TRANSPOSE,
    _UFUNC_OPS,
    _UFUNC_VALUES,
    Array,
    Scalar64,
    Scalar32,
    Scalar16,
    Complex128,
    Complex,
    _adopt,
    _any_tracked,
    _call_rule,
    _cut,
    _cut_result,
    _deep_plain,
    _lift,
    _link,
    _link_call,
    _ndarray,
    _node_of,
    _numpy,
    _packed,
    _parent,
    _plain_key,
    _pv,
    _tracked,
    _view,
    array_constant,
    array_leaf,
    as_float,
    scalar_leaf,
    PLAIN_TYPES,
    is_array_node,
    plain_array,
    tracking,
)

__all__ = ["Array", "Scalar64", "array_leaf", "scalar_leaf", "is_array_node", "plain_array"]


# --------------------------------------------------------------------------- numpy dispatch
_PLAIN = frozenset({np.ndarray, float, int, bool, complex}) | frozenset(
    t for t in np.sctypeDict.values() if issubclass(t, (np.number, np.bool_))
)
"""Operand types a ufunc computes on in numpy's own C code (another type's
``__array_ufunc__`` may run Python code that warns, or writes, and must run once)."""


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
    pure = out is None and method != "at" and all(a.__class__ in _PLAIN for a in args)
    exact = _numpy(getattr(ufunc, method), args, plain_kwargs, pure)
    if out is not None:
        exact = _outputs(exact, plain_kwargs["out"], out)
    if not rec or not _any_tracked(inputs):
        return exact
    if out is not None:  # written into a plain array the caller holds: it stays plain
        return _cut_result(exact, f"numpy.{ufunc.__name__}(..., out=a plain array)", inputs)
    if method == "__call__":
        rule_kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        return _link_call(ufunc, exact, inputs, rule_kwargs)
    node = _reduce_rule(ufunc, method, tuple(map(_lift, inputs)), kwargs)
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
    if rule is not None and target.__class__ is Array and target.dtype in _HELD:
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
    if d.get("_open") is not None:
        _writes.close(arr)
    kids = d.get("_kids")
    if arr._a is None and not kids and not force:
        return None
    if arr._a is None and not kids and not arr.requires_grad:
        return None
    old = _view(np.array(_view(arr, _ndarray), copy=True), Array)
    old._op, old._a, old._b, old._params = arr._op, arr._a, arr._b, arr._params
    old.requires_grad = arr.requires_grad
    old.label = arr.label
    if "_born" in d:  # (the birth of a leaf, by which a re-run of the code moves it)
        old._born = d["_born"]
    if arr._a is not None:
        _t._used(arr._a, old)
        if arr._b is not None:
            _t._used(arr._b, old)
    if kids:
        d["_kids"] = None
        for ref in kids:
            kid = ref()
            if kid is None:
                continue
            if _views(kid, arr):
                _keep_view(kid, arr, old)
                continue
            if kid._a is arr:
                kid._a = old
            if kid._b is arr:
                kid._b = old
            _t._used(old, kid)
    return old


def _views(kid, arr) -> bool:
    """``kid`` is an array node whose numbers are ``arr``'s memory (``arr.T``, ``arr[0]``)."""
    return kid.__class__ is Array and np.may_share_memory(
        _view(kid, _ndarray), _view(arr, _ndarray)
    )


def _keep_view(kid, arr, old) -> None:
    """Before a write into ``arr``: ``kid`` views its memory, so its numbers change with it.

    What was computed from ``kid`` used its old numbers: a snapshot of ``kid`` (made from
    ``old``, ``arr``'s snapshot) takes its place there; ``kid`` itself stays a view of
    ``arr`` and follows the write, as numpy's view does."""
    kid_old = _before_write(kid, force=True)
    if kid_old is not None:
        if kid_old._a is arr:
            kid_old._a = old
        if kid_old._b is arr:
            kid_old._b = old
        _t._used(old, kid_old)
    _t._used(arr, kid)


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
    except (IndexError, TypeError):  # a key no rule reads: the write is a cut
        index = None
    y = None
    if index is not None and (basic or _writes.distinct(arr.shape, index)):
        y = _parent(value)
    if y is None or arr.dtype not in _HELD:
        _write(
            arr,
            "an assignment to its elements",
            lambda: _ndarray.__setitem__(_view(arr, _ndarray), plain_key, _pv(value)),
            inputs=(value,),
        )
        return
    if not _writes.can_add(arr):
        old = _before_write(arr, force=True)
        if old is None:  # a constant array: its old numbers are a constant
            old = _t._constant(np.array(_view(arr, _ndarray), copy=True))
        _writes.start(arr, old)
    _ndarray.__setitem__(_view(arr, _ndarray), plain_key, _pv(value))
    _writes.add(arr, index, y)
    _shared_write_cut(arr)


def _reduce_rule(ufunc, method, inputs, kwargs):
    """The node of ``ufunc.reduce``/``accumulate`` where a table op computes it, else None."""
    if len(inputs) != 1 or inputs[0].__class__ not in _TENSOR_NODES:
        return None
    x = inputs[0]
    axis = kwargs.get("axis", 0)
    if not plain_options(kwargs, ("axis", "keepdims", "out", "initial")):
        return None
    if method == "reduce" and ufunc is np.multiply:
        keep = bool(kwargs.get("keepdims"))
        return np.prod(x, axis=axis, keepdims=keep) if "initial" not in kwargs else None
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
_PURE = frozenset({np.sum, np.prod, np.max, np.min, np.amax, np.amin, np.dot, np.vdot, np.inner})
"""numpy functions that write nothing they read and warn about nothing but floating-point
errors (``_numpy``'s ``pure``; not ``np.mean``, whose "Mean of empty slice" comes before its
0 / 0: run again, it would be shown twice)."""

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
    exact = _numpy(func, pargs, pkwargs, out is None and func in _PURE)
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
    if func in _SAME_NUMBER and args and args[0].__class__ in _numbers.SCALARS:
        if exact == args[0] and not isinstance(exact, _ndarray):
            return args[0]  # np.real(x) of a real number node: x's own number
    other = _other_dtype(exact)
    if other is not None:  # (float32 in, complex64 out: np.fft.fft) no node holds it
        rule, func = None, f"{getattr(func, '__name__', func)} giving {other.name}"
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


def _other_dtype(exact):
    """The dtype of a float or complex part of ``exact`` that no array node holds, or None."""
    for part in exact if isinstance(exact, tuple) else (exact,):
        dtype = getattr(part, "dtype", None)
        if dtype is not None and dtype.kind in "fc" and dtype not in _HELD:
            return dtype
    return None


def _dtype_ok(dtype) -> bool:
    return dtype is None or np.dtype(dtype) in _HELD


def _is_tensor(x) -> bool:
    return x.__class__ in _TENSOR_NODES


_quiet_graph = _fp.ignoring  # a composite's inner steps silenced (the exact result warns)


def numpy_with_nodes(f):
    """``f``, a numpy function or ufunc, for arguments that hold number nodes or lists of
    nodes (numpy would read them as plain numbers): numpy's own result, as a node."""
    if isinstance(f, np.ufunc):

        def call(*args, **kwargs):
            out = kwargs.get("out")
            if out is not None and out.__class__ is not tuple:  # as numpy hands it on
                kwargs["out"] = (out,)
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
        np.array_equiv,
    }
)
_SEQUENCES = frozenset(
    {
        np.concatenate,
        np.stack,
        np.hstack,
        np.vstack,
        np.column_stack,
        np.dstack,
        np.select,
        np.array,
        np.asarray,
        np.asanyarray,
    }
    | ({np.row_stack} if hasattr(np, "row_stack") else set())
)
"""Functions whose first argument is a sequence of arrays (or the list an array is made of)."""
_SAME_NUMBER = frozenset({np.real, np.real_if_close})
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
    of_arrays = cls is _numbers.Float64 and node._op.__class__ is not _numbers.Op
    if cls is Array or cls is Scalar64 or of_arrays or plain_ok:  # (a 0-d one: a float64 node)
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
tensor_nodes._array_result = _link
_t._function_rule = tensor_function
_numbers.DEFER.update(_ARRAYS[1:])
_numbers.LIFTED.update({complex: Complex, np.float32: Scalar32, np.float16: Scalar16})


def _numpy_ufunc(self, ufunc, method, *inputs, **kwargs):
    """A numpy ufunc given an array node or a number node (``int_array * x``,
    ``np.maximum(x, 0)``).

    numpy reads a float subclass as a float64 array scalar, not as the Python float it
    stands for: ``float32_array * x`` would be float64. Here numpy computes with the
    plain numbers (``float32_array * 0.7`` is float32) and, while a cell is recorded,
    the result is linked to the node.
    """
    return _ufunc(ufunc, method, inputs, kwargs)


def _numpy_function(self, func, types, args, kwargs):
    return _function(func, args, kwargs)


# (numpy's protocols put on the classes here, where their rules are) a float node given to
# numpy's function by a name the cell's rewrite cannot see (f = np.mean; f(x)) reaches its
# rule too: numpy would read it as a plain float64
for _cls in (*_ARRAYS, _numbers.Float, _numbers.Float64):
    _cls.__array_function__ = _numpy_function
for _cls in (*_ARRAYS, _numbers.Float, _numbers.Int, _numbers.Float64):
    _cls.__array_ufunc__ = _numpy_ufunc
del _cls
