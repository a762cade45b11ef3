"""The helpers that code rewritten by ``%%autograd`` calls while it runs.

:mod:`gradmagic.notebook.rewrite` turns a cell into code that calls these functions
(``literal``, ``labelled``, ``leaf``, ``changing``, ``shown``, ``ints``, ``call``,
``fn``); the
magic links that code to this module. They are small and fast, since some
run inside the user's loops. Functions and lambdas defined in an
``%%autograd`` cell keep calling them later, from any cell.

While a cell runs, :func:`recording` collects the places where a Value was
turned into a plain number by a function with no gradient rule (``math.atan``,
``np.array([a, b])``): the magic reports them instead of cutting the graph
silently.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float (or int, isinstance, type) changes its own
# code, as in plain Python, and not the engine's
from builtins import float, int, isinstance, type  # noqa: A004

from numbers import Number
import sys
from array import array as _births_array
from collections.abc import Callable
from types import FrameType
from typing import Any
from contextlib import contextmanager

import numpy as np

from ..core import engine, number_nodes
from ..core.engine import SCALAR_NODES, Value
from ..core.number_nodes import SCALARS, Float, Int, constant
from ..core import array as _array
from ..core.array import Array, Scalar64, array_leaf, scalar_leaf, PLAIN_TYPES
from ..core.tensor import Tensor
from ..core.tensor_op import TensorOp
from . import learner
from .library_calls import (
    _ARRAY_MAKERS,
    _array_of_one_tensor,
    _describe,
    _flat,
    _made_from_array,
    _numpy_without_graph,
)

__all__ = [
    "literal",
    "labelled",
    "leaf",
    "changing",
    "engine_input",
    "updated",
    "backward_of",
    "argument",
    "shown",
    "stored",
    "ints",
    "call",
    "prepare_call",
    "finish_call",
    "num",
    "fn",
    "type_of",
    "recording",
    "recording_now",
    "is_node",
    "new_leaf",
]


# --------------------------------------------------------------------------- nodes
_NODES = SCALAR_NODES | {Tensor, *PLAIN_TYPES}
_ARRAY_NODES = frozenset({Tensor, *PLAIN_TYPES})
_int_of = int.__index__
_FLOAT = float  # held here: code run under the magic may rebind builtins.float


def is_node(x) -> bool:
    """True for a node: a Value, a Tensor, a number node (Float, Int) or an array node."""
    return type(x) in _NODES


# --------------------------------------------------------------------------- births
# Every place where the run may make a leaf (a literal, a library call's result, a name or a
# container's number lent at the start) counts one birth, whether or not it made a node.
# A leaf keeps the count of its birth (``_born``), so that a plain re-run of the same code,
# which counts the same births in the same order, can move that input and no other
# (see :class:`Probe` and :mod:`gradmagic.notebook.rerun`).
births = 0


def born(node):
    """``node``, stamped with the next birth's count (see above); in a re-run under the
    magic, counted and moved instead."""
    global births
    if _probe is not None:
        return _probe.born(node)
    births += 1
    node._born = births
    if array_births is not None and isinstance(node, np.ndarray):  # what it held when born
        array_births[births] = _seen(node)  # (a write may change it)
    return node


def _input(node):
    """``born(node)``, a float written in the cell or a float or float array lent to it: an
    input the check moves (see .rerun) when the graph does not reach it."""
    node = born(node)
    if input_births is not None and (type(node) is Float or type(node) is Array):
        input_births.append(births)
    return node


# birth → (shape, sum) of the arrays born in the run, for its re-runs (None: none is kept)
array_births: dict | None = None
input_births: Any = None  # the births :func:`_input` made, for its re-runs (see .rerun)


def births_list():
    """An empty list of births (8 bytes each)."""
    return _births_array("q")


def tick() -> None:
    """Count a birth that made no node (the plain re-run counts it too)."""
    global births
    if _probe is not None:
        _probe.born(None)
        return
    births += 1


class Probe:
    """A plain re-run's inputs: ``moves`` maps a birth's count to the step added to what is
    born there (a number, or ``(flat indices, steps)`` for an array); ``watch`` lists the
    births whose plain values are kept in ``seen``, to show the re-run met the same inputs."""

    def __init__(self, moves: dict, watch=(), recorded: bool = False, strays=None):
        self.moves, self.watch = moves, frozenset(watch)
        self.seen: dict = {}
        # (sign, eps, seed, births): the inputs born there are moved too (see _stray_step):
        # the inputs the graph does not reach (see .rerun)
        self.strays = strays
        # a re-run under the magic (for a cell that only runs there: ``x.tanh()`` on a
        # number): what is born is a node, moved as one
        self.recorded = recorded
        self.changed: list = []  # (array or node, what it held): the moves made in place

    def born(self, x):
        global births
        births += 1
        k = births
        if type(x) is Array and not self.recorded:  # left a node by an earlier cell
            x = x.view(np.ndarray)  # (a plain re-run runs at plain numpy's speed)
        if k in self.watch:
            self.seen[k] = _seen(x)
        step = self.moves.get(k)
        if step is None and self.strays is not None and k in self.strays[3]:
            step = self._stray_step(x, k)
        return x if step is None else self._moved(x, step)

    def _stray_step(self, x, k: int):
        """The move of a number born outside the graph: a random step of 0.5 to 1.5 eps up or
        down for each of its numbers (a float, or a float array's elements), the same in
        both directions; random sizes, so that a number and one made from it (through a
        path the graph missed) do not cancel."""
        sign, eps, seed, _ = self.strays
        if type(x) is float or isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.size:
            rng = np.random.default_rng((k, seed))
            n = np.size(x)
            steps = sign * eps * rng.choice((-1.0, 1.0), n) * rng.uniform(0.5, 1.5, n)
            return float(steps[0]) if type(x) is float else (np.arange(n), steps)
        return None

    def _moved(self, x, step):
        """``x`` moved by ``step``: a number as a number of its own type; an array, or the
        explicit engine's Value or Tensor, changed in place (kept, for :meth:`undo`)."""
        if type(x) is Value:
            self.changed.append((x, x.data))
            x.data = x.data + step
            return x
        if type(x) is Tensor:
            self._moved(x.data, step)
            return x
        if isinstance(x, np.ndarray):
            self.changed.append((x, x.copy()))
            where, steps = step
            x.flat[where] = x.flat[where] + steps
            return x
        if type(step) is tuple:  # a numpy float32 or float16 number: its one element
            step = step[1][0]
        return x + float(step)  # (in x's precision; an int moves as a real number)

    def undo(self) -> None:
        """Put back what the moves changed in place."""
        for x, held in reversed(self.changed):
            if type(x) is Value:
                x.data = held
            else:
                x[...] = held
        self.changed.clear()


_probe: Probe | None = None


def _seen(x):
    """What a birth held, small: a number, or an array's shape and sum."""
    if type(x) is Value:
        x = x.data
    elif type(x) is Tensor:
        x = x.data
    elif isinstance(x, (np.float32, np.float16)):  # a 0-d array node's number
        x = np.asarray(x)
    if isinstance(x, np.ndarray):  # (read as plain numbers: no node of the graph, no warning)
        plain = x.view(np.ndarray)
        with np.errstate(all="ignore"):
            return (plain.shape, float(np.sum(plain.real, dtype=float)))
    try:
        return _FLOAT(x)
    except (TypeError, ValueError):
        return None


def literal(x):
    """``literal(2.0)``: a fresh leaf for a numeric literal while a cell is recorded.

    Outside a recording (a function defined in an ``%%autograd`` cell, called
    from a later plain cell) the literal is the plain number, so the function
    computes as plain Python.
    """
    if _run is None:
        return x if _probe is None else _probe.born(x)
    if x.__class__ is complex:
        return born(scalar_leaf(x))
    return _input(Float(x)) if x.__class__ is _FLOAT else born(Int(x))


def labelled(v, name: str):
    """``v``, labelled ``name`` if it is a node without a label."""
    if type(v) in _NODES and not v.label:
        v.label = name
    return v


def leaf(v, name: str):
    """A library call's result assigned to ``name``: numbers and float arrays as leaves.

    ``x = random.random()`` gives a number leaf (an int such as ``np.argmax(...)`` is data),
    ``W = np.random.randn(3, 2)`` an array leaf (:class:`~gradmagic.core.array.Array`, a
    view of the array numpy made).
    """
    if _run is None:
        return v if _probe is None else _probe.born(v)
    if type(v) is Array and not v.requires_grad and v._a is None:
        v.requires_grad = True  # a new array from a library call: a leaf
    if is_node(v):
        tick()
        return labelled(v, name)
    if type(v) is int or isinstance(v, np.integer):
        tick()
        return v  # an int (an index, a count): plain
    made = new_leaf(v, name)
    if made is None:
        tick()
        return v
    born(made)
    run = _run
    if run is not None:
        run.made[id(made)] = (made, v)
        entry = run.cut_arrays.get(id(v)) if run.cut_arrays else None
        if entry is not None and entry[0] is v:  # an array a cut made: its leaf is marked
            _mark(made, *entry[1])
    return made


def argument(v, f, key):
    """``v``, a float the cell wrote as an argument of the function ``f`` (``f(3.0)``):
    a leaf labelled with its parameter's name (``key``: a position or a keyword), so it
    is an input. Anything else is left as it is."""
    if _run is None or type(v) is not Float or v._a is not None or v.label:
        return v
    code = getattr(f, "__code__", None)
    if type(f) is not _FUNCTION or code is None:
        return v
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    if key.__class__ is int:
        if key < code.co_argcount:
            v.label = names[key]
    elif key in names[code.co_posonlyargcount :]:
        v.label = key
    return v


_FUNCTION = type(argument)


def updated(obj) -> None:
    """``obj.data`` was just set (``p.data += -0.1 * p.grad``): a learner's parameter after
    an optimizer's step. Its new number is a fresh leaf, so the graph of a later step starts
    from it (the microscope is on the last step, not on all of training)."""
    if _run is None or not learner.is_engine_object(obj):
        return
    data = obj.data
    cls = type(data)
    if cls in SCALARS and data._a is not None:
        obj.data = constant(number_nodes.plain(data))
    elif cls is Array and data._a is not None:
        obj.data = array_leaf(np.array(data.data), "")


def backward_of(obj):
    """``obj.backward()``, as the cell wrote it. On a learner's object in a recorded cell it
    is a step of training: its value is kept, and the numbers its graph holds now (what
    that backward differentiates); their backward then runs on plain numbers, as it would
    without the magic (the truth is gradmagic's own graph)."""
    run = _run
    if run is not None and type(obj) in _NODES:  # a step of training on gradmagic's nodes
        run.steps.append(_step_value(obj.data if type(obj) in (Value, Tensor) else obj))
        run.step_roots.append(id(obj))
        return obj.backward()
    if run is None or not learner.is_engine_object(obj):
        return obj.backward()
    try:
        run.steps.append(_step_value(obj.data))
    except (TypeError, ValueError):
        pass
    run.links = {}
    run.held = [(v, v.data) for v in learner.learner_graph(obj, run.links)]
    return unrecorded(obj.backward)


def imported(names: tuple) -> None:
    """The cell imported ``names`` (``*module``: all that module defines): the learner's own
    functions and classes among them are followed from here on, as if an earlier cell had
    imported them (a ``Value`` from their module keeps the graph through ``math.exp``)."""
    if _run is not None and _run.follow is not None:
        _run.follow(names)


def _step_value(data) -> float:
    """The loss of a training step: a number's (an array's sum), read without a cut."""
    if isinstance(data, np.ndarray):
        return _FLOAT(np.sum(data.view(np.ndarray)))
    return _FLOAT(number_nodes.plain(data) if type(data) in SCALARS else np.sum(data))


def engine_input(x):
    """A number or float array written as the data of a learner's autograd object
    (``Value(2.0)``, ``Tensor(np.array(...))``): an input of the run, so a leaf."""
    if _run is None:
        return x
    cls = type(x)
    if cls is Array and x._a is None:
        if not x.requires_grad:
            x.requires_grad = True
        return x
    if cls is _FLOAT or cls is int or cls is np.float64:
        return constant(x)
    if cls is np.ndarray and x.dtype == np.float64:
        return array_leaf(x, "")
    return x


def changing(v, name: str):
    """A value bound to ``name``, which the cell changes in place (``W[0] = 1``).

    An array node can be changed in place (the graph follows the write), so it
    is labelled; an explicit Tensor cannot be, so one assigned here becomes
    a plain copy of its numbers, and the cut is recorded.
    """
    if type(v) is Tensor:
        _record(
            f"{name} is changed in place in this cell, which a Tensor cannot be: it "
            "holds a plain copy of the numbers"
        )
        return v.data.copy()
    return labelled(v, name)


_EXACT_NUMBERS = frozenset({int, float, np.float64})
"""Number types that have a number node class (other numpy scalars stay plain)."""
_SCALAR_LEAVES = frozenset({complex, np.complex128, np.float32, np.float16, *PLAIN_TYPES})
_SCALAR_LEAVES -= {Array, Scalar64}
"""Numbers that become 0-d array leaves (complex numbers, numpy's lower precisions)."""


def new_leaf(x, name: str):
    """A fresh leaf labelled ``name`` holding ``x``'s number(s), or None if there is none.

    ``x`` may be a number of an exact type, a Value (its data is taken), a
    float array or an array node (an :class:`~gradmagic.core.array.Array` leaf viewing
    the same memory, so writes in the cell change the user's array as in plain numpy), or
    a Tensor (a Tensor leaf; its ``requires_grad`` is kept, so constant data stays
    constant).
    """
    cls = type(x)
    if cls is Array or (cls is np.ndarray and x.dtype in _array._HELD):
        return array_leaf(x, name)
    if cls in _SCALAR_LEAVES:
        return scalar_leaf(x, name)
    if cls is Scalar64:
        leaf = constant(np.float64(x))
        leaf.label = name
        return leaf
    if cls in _EXACT_NUMBERS or cls in SCALARS:
        leaf = constant(number_nodes.plain(x) if cls in SCALARS else x)
        leaf.label = name
        return leaf
    if cls is Value:
        return Value(x.data, label=name)
    if cls is Tensor:
        return Tensor(x.data, label=name, requires_grad=x.requires_grad)
    return None


def lent_leaf(x, name: str):
    """:func:`new_leaf` for a number lent to the cell at its start (a name it reads, a number
    in a container it reaches), counted as a birth; in a plain re-run, ``x`` itself."""
    if _probe is not None and not _probe.recorded:
        return _probe.born(x)
    made = new_leaf(x, name)
    if made is None:
        tick()
        return None
    return _input(made)


# --------------------------------------------------------------------------- plain numbers
def shown(x):
    """``x`` for display: Values (also inside lists, tuples, dicts, sets) as numbers.

    A number node is shown as its plain number; a container without Values or
    Tensors is passed as it is (it may change before it is printed).
    """
    if type(x) in SCALARS:
        return number_nodes.plain(x)
    return _shown(x, {})


def _needs_showing(x, depth=0) -> bool:
    """True if ``x`` holds a Value or Tensor (which print differently from their numbers)."""
    cls = type(x)
    if cls is Value or cls is Tensor:
        return True
    if depth > 20:
        return False
    if cls is list or cls is tuple or cls is set or cls is frozenset:
        return any(_needs_showing(e, depth + 1) for e in x)
    if cls is dict:
        return any(_needs_showing(e, depth + 1) for e in x.values())
    return False


def _shown(x, memo):
    cls = type(x)
    if cls is Value:
        return x.data
    if cls is Tensor:
        return x.data[()] if x.data.ndim == 0 else x.data
    if (cls is list or cls is dict or cls is tuple) and not _needs_showing(x):
        return x  # printed as it is (a list printed after a call that changes it)
    if cls is list or cls is dict:
        if id(x) in memo:  # a list that contains itself
            return memo[id(x)]
        out = memo[id(x)] = cls()
        if cls is list:
            out.extend(_shown(e, memo) for e in x)
        else:
            out.update((_shown(k, memo), _shown(v, memo)) for k, v in x.items())
        return out
    if cls is tuple or cls is set or cls is frozenset:
        return cls(_shown(e, memo) for e in x)
    if cls is np.ndarray and x.dtype == object and any(type(e) is Value for e in x.flat):
        return np.array([_shown(e, memo) for e in x.flat]).reshape(x.shape)
    return x


def stored(x):
    """``x``, about to be stored into a library object (``B[1] = x``): a number node
    keeps only its number there, which is counted as a conversion (not for a number an
    array op made, a 0-d array's number: stored into an array node, it keeps its graph)."""
    if type(x) in SCALAR_NODES and type(x._op) is not TensorOp:
        engine.state.float_conversions += 1
    return x


def ints(x):
    """An int-valued Value as its int (for ``range(n)``, ``"ab" * n``, ...)."""
    if type(x) is Value and type(x.data) is int:
        return x.data
    return x


def _ints_deep(x):
    """A library call's argument: an int node or an int-valued Value as its plain int.

    Containers are passed as they are (the library may change them in place: a heap, a
    list to shuffle), unless they hold an explicit int Value, which only a copy can
    turn into an int.
    """
    cls = type(x)
    if cls is Int:
        return _int_of(x)
    if cls is Value:
        return x.data if type(x.data) is int else x
    if (cls is list or cls is tuple) and _find(x, _is_int_value) is not None:
        return cls(_ints_deep(e) for e in x)
    return x


def _is_int_value(e) -> bool:
    return type(e) is Value and type(e.data) is int


def _is_float_node(e) -> bool:
    cls = type(e)
    return cls is Value or (cls in SCALARS and cls is not Int)


def _find(x, test, depth=0):
    """The first item of the list or tuple ``x``, at any depth up to 20, that passes
    ``test``; None if there is none."""
    for e in x:
        if test(e):
            return e
        cls = type(e)
        if (cls is list or cls is tuple) and depth < 20:
            found = _find(e, test, depth + 1)
            if found is not None:
                return found
    return None


# --------------------------------------------------------------------------- library calls
# A library call ``f(a, k=b)`` in a cell runs as
# ``finish_call(prepare_call(f, a, k=b), call_function(*call_args, **call_kwargs))``:
# ``prepare_call`` adapts the arguments and leaves the callable and its arguments in
# ``call_function``, ``call_args``, ``call_kwargs``, which the cell's own code then
# calls at once, so the library function runs called from the user's frame, as
# in plain Python (``namedtuple`` names its module from there, ``warnings.warn``
# names its line, ``pandas.eval`` reads its variables there).
call_function = call_args = call_kwargs = None


def prepare_call(f, /, *args, **kwargs):
    """Get the library call ``f(*args, **kwargs)`` ready (see above); a token for :func:`finish_call`.

    Int-valued Values become ints (sizes, seeds, indices). A numpy function
    that cannot keep the graph (``np.array``, ``np.zeros``, ``rng.normal``)
    gets every Value as its plain number, and the cut is recorded. The token
    lists the number nodes that went in, so that :func:`finish_call` can tell whether
    the result still depends on them.
    """
    global call_function, call_args, call_kwargs
    numpy = _numpy_without_graph(f)
    call = _answered(f, args, kwargs, numpy)
    if call is not None:
        call_function, call_args, call_kwargs = call
        return None
    if numpy and not any(type(a) is Tensor for a in args):
        args, kwargs, token = _cut_call(f, args, kwargs)
    else:
        args, kwargs, token = _ints_call(f, args, kwargs)
    call_function, call_args, call_kwargs = f, args, kwargs
    return token


def _answered(f, args, kwargs, numpy: bool):
    """``(function, args, kwargs)`` to call instead of ``f`` where the magic answers the call
    its own way, else None (``numpy``: ``f`` is a numpy function that loses the graph)."""
    if f is sys.getsizeof:  # the size of the number the cell holds, not of its node
        return f, [shown(a) for a in args], kwargs
    if (
        _run is not None
        and _array.takes_nodes(f)
        and (_has_float_node(args) or _has_float_node(kwargs.values()))
    ):
        # numpy would read number nodes (and lists of nodes) as plain numbers: numpy's own
        # result, as a node of the graph
        return _array.numpy_with_nodes(f), [_ints_deep(a) for a in args], kwargs
    if not numpy:
        return None
    if args and type(args[0]) in _MADE_FROM and f in _ARRAY_MAKERS:
        return _given, (_made_from_array(f, args, kwargs),), _NO_KWARGS
    if f in _STEPS and not kwargs.get("out"):  # piecewise constant: gradient 0
        return f, [_array._deep_plain(a) for a in args], kwargs
    if args and _array_of_one_tensor(f, args, kwargs):
        return _given, (args[0].copy() if f is np.array else args[0],), _NO_KWARGS
    return None


def _cut_call(f, args, kwargs) -> tuple:
    """``(args, kwargs, token)`` for a numpy function that cannot keep the graph: every node
    as its plain number, the cut recorded; the token says where a cut made the result."""
    name = _describe(f)
    run = _run
    before = len(run.cut_nodes) if run is not None else 0
    args = [_data(a, name) for a in args]
    kwargs = {k: _data(v, name) for k, v in kwargs.items()}
    if run is not None and len(run.cut_nodes) > before:  # its result is made by a cut
        _, line, _, function = run.cut_nodes[-1]
        return args, kwargs, (None, (), (line, function))
    return args, kwargs, None


def _ints_call(f, args, kwargs) -> tuple:
    """``(args, kwargs, token)`` for any other call: int-valued nodes as ints; the token
    lists the number nodes that went in (and an array a cut made, going in)."""
    args = [_ints_deep(a) for a in args]
    kwargs = {k: _ints_deep(v) for k, v in kwargs.items()}
    run = _run
    if run is None:
        return args, kwargs, None
    nodes = [a for a in _flat(args) if type(a) in SCALARS]
    nodes += [v for v in _flat(kwargs.values()) if type(v) in SCALARS]
    made = None  # an array a cut made, going in (np.sum(np.array([x, y])))
    if run.cut_arrays:
        for a in _flat(args):
            entry = run.cut_arrays.get(id(a))
            if entry is not None and entry[0] is a:
                made = entry[1]
                break
    return args, kwargs, (f, nodes, made) if nodes or made else None


_NO_KWARGS: dict = {}
_MADE_FROM = frozenset(PLAIN_TYPES)  # np.asarray(x) of these keeps the graph
_STEPS = frozenset({np.round, np.around, np.fix})
"""numpy functions (not ufuncs) that are piecewise constant: a number node taken as its plain
number loses no gradient."""
_FLOAT_NODES = frozenset({Float, number_nodes.Float64})


def _has_float_node(xs, depth: int = 0) -> bool:
    """True if ``xs`` holds a float number node, a tracked array node inside a list, or a
    tracked 0-d one (``np.full(3, W[0])``: numpy dispatches on no fill value)."""
    for x in xs:
        kind = type(x)
        if kind in _FLOAT_NODES:
            return True
        if (kind is list or kind is tuple) and depth < 32:
            if _has_float_node(x, depth + 1):
                return True
        elif kind in _MADE_FROM and x.requires_grad and (depth or not x.shape):
            return True
    return False


def _given(x):
    return x


def finish_call(token, result):
    """The result of a library call prepared by :func:`prepare_call`.

    If number nodes went in and the result is a number with no link to them
    (``statistics.mean`` computes with exact fractions, C functions read the
    plain number), the cut is recorded with the names that entered, and the
    result is marked as made by a cut. A plain float or numpy float64 result
    becomes a constant node while a cell is recorded (see :func:`num`).
    """
    result = _as_constant(result, call_args)
    if token is None:
        return result
    f, nodes, made = token
    kind = type(result)
    unlinked = kind in SCALARS and result._a is None and not any(result is n for n in nodes)
    if not unlinked and kind not in _NODES and kind is not bool and isinstance(result, Number):
        unlinked = True  # a number of another kind (Decimal, Fraction, np.float32)
        result_node = None
    elif kind is bytes or kind is bytearray:
        unlinked = True  # the numbers packed (struct.pack, pickle.dumps): read back plain
        result_node = None
    else:
        result_node = result
    if unlinked and isinstance(f, np.ufunc) and f in _array._UFUNC_VALUES:  # np.sign(x): a step
        unlinked = False
    if unlinked and any(type(n) is not Int for n in nodes):
        who = ", ".join(dict.fromkeys(_who(n) for n in nodes))
        _record(
            f"{_describe(f)} computes outside the graph: {who} entered it as plain numbers",
            result_node,
            _describe(f),
        )
    elif made is not None:  # computed from what a cut made: marked as made by that cut
        if unlinked or ((kind is Tensor or kind is Array) and result._a is None):
            _mark(result, *made)
        if kind is np.ndarray or kind is Array:
            _run.cut_arrays[id(result)] = (result, made)
    return result


def _mark(node, line, function) -> None:
    """Mark ``node`` as made by the cut at ``line`` (in ``function``), already recorded."""
    run = _run
    if run is not None:
        run.cut_nodes.append((node, line, "", function))


def call(f, /, *args, **kwargs):
    """``f(*args, **kwargs)`` for a library callable ``f``, as a cell's library call runs
    (:func:`prepare_call`, then :func:`finish_call`), but called from here."""
    token = prepare_call(f, *args, **kwargs)
    return finish_call(token, call_function(*call_args, **call_kwargs))


def num(x):
    """A float read from a library (``math.pi``, ``np.e``, ``from math import tau``) while a
    cell is recorded: a constant node, so that ``math.pi * n`` with ``n`` an int node keeps
    its link to ``n`` (a plain float would compute it with float's own method).

    The same float gives the same node throughout the run (``x is math.pi`` holds).
    """
    run = _run
    if run is None or (x.__class__ is not _FLOAT and x.__class__ is not np.float64):
        return x
    entry = run.constants.get(id(x))
    if entry is None or entry[0] is not x:
        entry = run.constants[id(x)] = (x, constant(x))
    return entry[1]


def _as_constant(r, args=()):
    """A float or numpy float64 result in a recorded cell: a constant node of the same type.

    ``np.float64 + x`` would otherwise be numpy's own arithmetic, which reads
    ``x`` as a plain float and drops the rest of the graph, and ``f() * n``
    float's, which drops an int node ``n``; so would ``np.ones(3) * x``: a new
    float64 array is an array node that needs no gradient (a constant), unless
    it is one of ``args`` (numpy gave it back: ``np.asarray(a) is a``).
    """
    if _run is not None:
        cls = type(r)
        if cls is np.float64 or cls is _FLOAT:
            return born(constant(r))
        if cls is np.ndarray and r.dtype in _array._HELD and not any(r is a for a in args):
            return born(_array.array_constant(r))
        if (cls is Value or cls is Tensor) and r._a is None:
            return born(r)  # a leaf of the explicit engine, made by the cell
        tick()
    elif _probe is not None:
        return _probe.born(r)
    return r


def _data(x, where: str):
    """``x`` for a numpy function that cannot keep the graph: a number node as its number,
    the cut recorded for a float one. A list or tuple holding float nodes is passed as it
    is (numpy reads them as the floats they are, and may change the list in place), the
    cut recorded; only explicit Values inside make a copy with their numbers."""
    cls = type(x)
    if cls is Value or cls in SCALARS:
        if cls is not Int and not (cls is Value and type(x.data) is int):
            _record(f"{where} took {_who(x)} as a plain number", None, where)
        return x.data
    if cls is list or cls is tuple:
        if _find(x, _is_value) is not None:
            return cls(_data(e, where) for e in x)
        if _find(x, _is_float_node) is not None:
            _record_each(x, where, 0)
    return x


def _record_each(x, where: str, depth: int) -> None:
    """Record the cut of each float node in the list or tuple ``x`` (kept as it is)."""
    for e in x:
        cls = type(e)
        if cls in SCALARS and cls is not Int:
            _record(f"{where} took {_who(e)} as a plain number", None, where)
        elif (cls is list or cls is tuple) and depth < 20:
            _record_each(e, where, depth + 1)


def _is_value(e) -> bool:
    return type(e) is Value


_SEQUENCE_DATA = SCALAR_NODES | {list, tuple}


def _who(v) -> str:
    return repr(v.label) if v.label else repr(v.data)


# --------------------------------------------------------------------------- math by name
_DISPATCH: dict = {}
"""Function → its graph-keeping version, filled by :mod:`gradmagic.notebook.math_calls`."""


no_rule: Callable[[Any], Any] | None = None
"""Wraps a math function with no gradient rule so that the cut is recorded (set by
:mod:`gradmagic.notebook.math_calls`)."""


def fn(f):
    """The graph-keeping version of the math function ``f``: ``f`` itself if it has none
    and is not a ``math`` function (one with no rule computes on numbers, the cut named)."""
    try:
        kept = _DISPATCH.get(f)
    except TypeError:  # unhashable
        return f
    if kept is None:
        if getattr(f, "__module__", None) not in ("math", "cmath") or no_rule is None:
            return f
        kept = _DISPATCH[f] = no_rule(f)
    return kept


class _Joined:
    """``np.r_`` or ``np.c_`` whose node items numpy would read as plain numbers (a number;
    a vector ``np.c_`` makes a column) are first given that shape by rules that keep the
    graph."""

    def __init__(self, concat):
        self.concat = concat

    def __getitem__(self, key):
        items = key if type(key) is tuple else (key,)
        ndmin, trans1d = self.concat.ndmin, self.concat.trans1d
        if items and isinstance(items[0], str):  # a directive: 'axis,ndmin,trans1d'
            parts = items[0].split(",")
            ndmin = int(parts[1]) if len(parts) > 1 else ndmin
            trans1d = int(parts[2]) if len(parts) > 2 else trans1d
        items = tuple(_shaped(x, ndmin, trans1d) if is_node(x) else x for x in items)
        return self.concat[items if type(key) is tuple else items[0]]


def _shaped(x, ndmin, trans1d):
    nd = np.ndim(x)
    if nd >= ndmin or ndmin > 2:
        return x
    if nd == 0:
        return np.reshape(x, (1,) * ndmin)
    return x[:, None] if trans1d == 0 else x[None, :]


def joined(concat):
    """What the rewrite puts in place of ``np.r_`` and ``np.c_`` before ``[...]``."""
    return _Joined(concat) if isinstance(concat, type(np.r_).__base__) else concat


def same(a, b) -> bool:
    """``a is b`` as plain Python answers it when an int node is one side: equal ints are
    one object where CPython shares them (-5 to 256; IPython compiles each statement
    apart, so a cell's equal literals are not shared)."""
    if a is b:
        return True
    if type(a) is not Int and type(b) is not Int:
        return False
    a, b = (
        number_nodes.plain(a) if type(a) is Int else a,
        number_nodes.plain(b) if type(b) is Int else b,
    )
    return type(a) is int and type(b) is int and a == b and -5 <= a <= 256


def type_of(*args):
    """``type(x)`` as plain Python gives it: a number node's type is Python's (``float``),
    a Tensor's numpy's (``ndarray``, ``float64`` for a 0-d one)."""
    if len(args) != 1:
        return type(*args)
    x = args[0]
    kind = type(x)
    if kind in SCALARS:
        return type(number_nodes.plain(x))
    if kind is Tensor:
        return type(x.data[()]) if x.data.ndim == 0 else type(x.data)
    return PLAIN_TYPES.get(kind, kind)


# --------------------------------------------------------------------------- errors
_RECURSION = "maximum recursion depth exceeded"


def as_plain_error(exc: BaseException, internals) -> None:
    """Make ``exc`` read as plain Python's where only the magic's own frames changed it.

    A recursion too deep for Python, found while a number node's method ran
    (called from C, so Python adds " while calling a Python object" or " in
    comparison"), is reported as plain Python reports the recursion of the
    user's functions: "maximum recursion depth exceeded". ``internals`` are the
    module names of those frames.
    """
    if not isinstance(exc, RecursionError) or len(exc.args) != 1:
        return
    message = exc.args[0]
    if not isinstance(message, str) or not message.startswith(_RECURSION + " "):
        return
    tb = exc.__traceback__
    if tb is None:
        return
    while tb.tb_next is not None:
        tb = tb.tb_next
    if tb.tb_frame.f_globals.get("__name__") in internals:
        exc.args = (_RECURSION,)


# --------------------------------------------------------------------------- recording cuts
class _Run:
    """What one run of a cell recorded: ``cuts``, a list of (line, message), and
    ``cut_nodes``, the same cuts as (node, line, message, function), with the number
    node each made (None when it made none)."""

    def __init__(self, filename: str):
        self.filename = filename
        self.cuts: list[tuple[int | None, str]] = []
        self.cut_nodes: list = []
        # id(array) -> (array, (line, function)): arrays a cut made (np.array([x, y]))
        self.cut_arrays: dict = {}
        # id(float) -> (float, its constant node): library floats read by the cell (num)
        self.constants: dict = {}
        # id(leaf) -> (leaf, the object it was made from): library results made leaves
        self.made: dict = {}
        # a learner's engine: the value at each backward() the cell called, and the
        # (object, its data) of the last one's graph, and each object's links (by id)
        self.steps: list = []
        self.held: list = []
        self.step_roots: list = []  # id() of each gradmagic node backward() was called on
        self.links: dict = {}
        self.follow: Callable | None = None  # follows the names an import in the cell bound


_run: _Run | None = None


@contextmanager
def recording(filename: str):
    """Record the cuts made by code compiled from ``filename`` while in this block."""
    global _run
    outer, _run = _run, _Run(filename)
    engine.state.recording = True
    engine.state.cut = _record
    try:
        yield _run
    finally:
        _run = outer
        engine.state.recording = outer is not None
        engine.state.cut = _record if outer is not None else None


def unrecorded(f, /, *args, **kwargs):
    """``f(*args, **kwargs)`` with nothing recorded: ``%timeit`` in a recorded cell.

    What ``%timeit`` runs binds nothing the cell keeps, so recording its thousands of
    repetitions would only slow it (and time the recording, not the user's code)."""
    was, cut = engine.state.recording, engine.state.cut
    engine.state.recording, engine.state.cut = False, None
    try:
        return f(*args, **kwargs)
    finally:
        engine.state.recording, engine.state.cut = was, cut


def recording_now() -> bool:
    """True while a cell runs under :func:`recording` (its graph is being built)."""
    return _run is not None


def _record(message: str, node=None, function: str = "") -> None:
    """Record a cut at the user's line that led here; ``node`` is the number it made."""
    run = _run
    if run is None:
        return
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != run.filename:
        frame = frame.f_back
    line = frame.f_lineno if frame is not None else None
    run.cuts.append((line, message))
    run.cut_nodes.append((node, line, message, function))


def cut_marks(run, order) -> tuple[dict, list]:
    """What :meth:`~gradmagic.analysis.trace.Trace.mark_cuts` takes, for a run's graph ``order``.

    The notes: each node of the graph a cut made (by its index in ``order``),
    with where ("line 3: statistics.mean"). The places: (line, function) of
    each cut whose number is in the graph, and of each cut that made no number
    node (an array, a changed Tensor), which may reach the target too.
    """
    if run is None or not run.cut_nodes:
        return {}, []
    wanted = {
        id(node): (line, function)
        for node, line, _, function in reversed(run.cut_nodes)
        if node is not None
    }
    notes, reached = {}, set()
    if wanted:  # one pass over the graph, only when a cut made a number
        for i, v in enumerate(order):
            where = wanted.get(id(v))
            if where is not None:
                notes[i] = _where(*where)
                reached.add(id(v))
    places = [
        (line, function)
        for node, line, _, function in run.cut_nodes
        if node is None or id(node) in reached
    ]
    return notes, places


def _where(line, function: str) -> str:
    at = f"line {line}" if line is not None else "the cell"
    return f"{at}: {function}" if function else at
