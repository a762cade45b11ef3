"""The end of a cell: one walk over everything the user's namespace reaches.

While a cell runs under ``%%autograd`` its numbers are graph nodes, and the cell
may leave them anywhere: in lists, tuples, dicts, sets, deques, the attributes of
instances and classes, dataclass fields, function defaults and closures, the
internals of a library's objects (a heap, a graph, a sorted list). When the
cell ends, :func:`settle` walks all of it once and

* names each leaf of the target's graph by how the code reaches it
  (``n.w[0]``, ``model['layers'][1].b``): a number the code keeps is a parameter,
  so it is an input of the run, checked and drawn as one;
* puts the plain number back wherever a node is held, so a later cell finds
  Python's own types (``gradmagic.last`` keeps the values and gradients);
* keeps the names bound to float and array nodes of the graph (``x.grad`` works
  after the cell; an int or a numpy scalar is its own type again),
  cut from their parents: the trace holds the graph, no live node does, so no
  gradient can flow from one cell's graph into another's.

The walk is iterative (a linked list of any length), visits each object once,
and stops after :data:`LIMIT` objects; what it did not reach is counted in
``Settled.unvisited``.
"""

from __future__ import annotations

import cmath
import collections
import math
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core import engine, number_nodes
from ..core.array import _HELD, PLAIN_TYPES, Array, plain_array
from ..core.number_nodes import SCALARS, Float
from ..core.tensor import Tensor
from . import own

__all__ = [
    "settle",
    "release",
    "roots",
    "unrewritten_math",
    "functions_of",
    "global_names",
    "compiled_by_magic",
    "lift_reachable",
    "unfollowed",
    "name_lifted",
    "restore",
    "Settled",
    "LIMIT",
    "plain_of",
    "path_text",
]

LIMIT = 200_000
"""The most objects one cell's walk visits (a bound on its time)."""

NUMBER_NODES = SCALARS | set(PLAIN_TYPES)
"""Node classes the magic makes; never left where a later cell can find them."""
KEPT = frozenset({Float, Array, Tensor})
"""Nodes a name keeps after the cell when the graph holds them (for ``x.grad``); any other
node (an int, a numpy scalar) is its plain number again."""

_ATOMS = frozenset(
    {
        str,
        bytes,
        int,
        float,
        bool,
        complex,
        type(None),
        range,
        slice,
        bytearray,
        type(Ellipsis),
        type(NotImplemented),
    }
)
_SKIP_TYPES = (
    types.ModuleType,
    types.BuiltinFunctionType,
    types.GeneratorType,
    types.CoroutineType,
    types.AsyncGeneratorType,
    types.FrameType,
    types.CodeType,
    types.TracebackType,
    type,
)
_FOREIGN = (
    "IPython",
    "ipykernel",
    "traitlets",
    "zmq",
    "jupyter_client",
    "tornado",
    "asyncio",
    "gradmagic",
    "ipywidgets",
    "anywidget",
    "comm",
    "threading",
    "logging",
    "_io",
    "io",
    "socket",
    "ssl",
    "concurrent",
)
"""Modules whose objects are the shell's or the machinery's, never the cell's numbers."""
_SHELL_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})


_float_of = float.__float__


class Settled:
    """What :func:`settle` did: the leaves it named (graph position → name), how many
    objects it visited, and how many it left unvisited past :data:`LIMIT`."""

    __slots__ = ("named", "visited", "unvisited", "value")

    def __init__(self):
        self.named: dict[int, str] = {}  # graph position → the path it was named by
        self.value = None
        self.visited = 0
        self.unvisited = 0


def plain_of(v, made: dict):
    """The plain value a node stands for.

    A leaf the magic made from an object of the namespace (a lifted name, a
    library call's result) stands for that very object; any other node for its
    plain number or array.
    """
    entry = made.get(id(v))
    if entry is not None and entry[0] is v:
        original = entry[1]
        if (
            type(original) is np.ndarray
            and type(v) is Tensor
            and original.shape == v.data.shape
            and original.dtype == v.data.dtype
            and not np.array_equal(original, v.data, equal_nan=True)
        ):
            original[...] = v.data  # changed in place in the cell (T.sort(), T.fill(0))
        return original
    cls = type(v)
    if cls is Tensor:
        return v.data[()] if v.data.ndim == 0 else v.data
    if cls in PLAIN_TYPES:
        return plain_array(v)
    return number_nodes.plain(v)


def roots(ns, names) -> set:
    """The names of ``ns`` a cell mentioning ``names`` can reach, through the functions
    and classes of the notebook it calls (the global names their code reads, at any
    depth): what a cell can change is reachable from these, and the end-of-cell walk
    need not visit the rest of a large namespace."""
    found, todo = set(), [n for n in names if n in ns]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        v = ns.get(name)
        for code in _code_of(v):
            todo.extend(n for n in global_names(code) if n in ns and n not in found)
    return found


def unrewritten_math(ns, reach, math_names, runtime, followed=frozenset()) -> list[str]:
    """Notebook functions the cell can reach that a plain cell compiled and that call a
    math function (``math.tanh``, ``np.exp``), and that the magic could not follow
    (``followed``: the codes it ran rewritten): they compute on plain numbers. One line each, naming the function and what it calls."""
    lines = []
    for name in sorted(reach):
        for f in functions_of(ns.get(name)):
            code = f.__code__
            if code in followed or compiled_by_magic(code, runtime):
                continue
            called = sorted(_of_math(f.__globals__, global_names(code), math_names))
            if called:
                what = code.co_qualname if hasattr(code, "co_qualname") else code.co_name
                lines.append(
                    f"{what} was defined outside %%autograd and calls "
                    f"{', '.join(called[:3])}: what it computes with them is a "
                    "plain number the graph cannot follow (run its definition "
                    "under %%autograd to follow it)"
                )
    return lines


def _of_math(home, names, math_names) -> set:
    """The ``math_names`` that ``names`` (a function's globals) reach in math or cmath, which
    read a number node as a plain float; numpy's functions of those names keep its graph."""
    if any(home.get(n) is math or home.get(n) is cmath for n in names):  # math.tanh
        return names & math_names
    return {n for n in names & math_names if id(home.get(n)) in _MATH_FUNCTIONS}


_MATH_FUNCTIONS = {id(f) for m in (math, cmath) for f in vars(m).values() if callable(f)}


def compiled_by_magic(code, runtime, depth=0) -> bool:
    for c in code.co_consts:
        if c is runtime:
            return True
        if (
            isinstance(c, types.CodeType)
            and depth < 10
            and compiled_by_magic(c, runtime, depth + 1)
        ):
            return True
    return False


def functions_of(v) -> list:
    """A notebook function; a notebook class's functions (methods, static and class
    methods, property getters); those of a notebook instance's class; what a module of
    the learner's defines (all of it: a cell may call any of it as ``layers.f``)."""
    if isinstance(v, types.FunctionType):
        return [v] if own.is_own(v) else []
    if isinstance(v, types.ModuleType):  # a module of the learner's: what it defines
        if not own.own_module(v.__name__):
            return []
        mine = [x for x in vars(v).values() if getattr(x, "__module__", None) == v.__name__]
        return [
            f for x in mine if isinstance(x, (type, types.FunctionType)) for f in functions_of(x)
        ]
    cls = v if isinstance(v, type) else type(v)
    if not own.is_own(cls):
        return []
    found = []
    for klass in cls.__mro__:
        if not own.is_own(klass):
            continue
        for name, attr in vars(klass).items():
            if name == "backward" and engine_class(klass):
                continue  # a learner's engine's own backward: run plainly (see .learner)
            f = getattr(attr, "__func__", attr)
            if isinstance(f, property):
                f = f.fget
            if isinstance(f, types.FunctionType):
                found.append(f)
    return found


def _code_of(v):
    return [f.__code__ for f in functions_of(v)]


def global_names(code, depth=0):
    names = set(code.co_names)
    if depth < 10:
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                names |= global_names(c, depth + 1)
    return names


def settle(ns, *, made: dict, bound: set, walk=None, value=None, reach=None) -> Settled:
    """Walk everything ``ns`` reaches once; see the module docstring.

    ``made`` maps id(node) → (node, the object it stands for); ``bound`` holds the
    names the cell bound or lifted: a node bound to another name is an earlier
    cell's, kept as it was. ``walk`` is the target graph's
    :class:`~gradmagic.core.engine.Walk` (None after an error: no name keeps a node).
    Call :func:`release` once the trace is made. ``value`` (the cell's value, when it
    is not differentiated) is settled too, its plain stand-in left in ``Settled.value``.
    ``reach`` (see :func:`roots`) limits the walk to those names and ``bound``.
    """
    walker = _Walker(ns, made, walk)
    if value is not None:
        walker.settled.value = walker.value(value, ("_",), 0)
    names = list(ns) if reach is None else [n for n in ns if n in reach or n in bound]
    for name in names:
        if name in _SHELL_NAMES or (
            # the shell's own names (_, _i3, __builtins__), unless this cell uses one
            name.startswith("_") and name not in bound and (reach is None or name not in reach)
        ):
            continue
        v = ns[name]
        cls = type(v)
        if cls in NUMBER_NODES or cls is Tensor:
            if name not in bound:
                continue  # an earlier cell's node, or an explicit Tensor: left as it is
            if walk is None or cls not in KEPT or walk.index(v) < 0:
                ns[name] = plain_of(v, made)
            continue  # (a node of the graph stays bound, for x.grad; release cuts it)
        new = walker.value(v, (name,), 0)
        if new is not v:
            ns[name] = new
    walker.drain()
    return walker.settled


def settle_module(globals_: dict, made: dict) -> None:
    """Make every number a module's globals reach plain again, as :func:`settle` does
    for the namespace (a module keeps no node, not even one of the graph)."""
    names = {
        k
        for k, v in globals_.items()
        if not k.startswith("__") and not isinstance(v, types.ModuleType)
    }
    bound = {k for k in names if type(globals_[k]) in NUMBER_NODES}
    settle(globals_, made=made, bound=bound, reach=names)


def release(order) -> None:
    """Cut every node the magic made in ``order`` (the graph's walk) from its parents
    (call it after the trace is made).

    A node keeps its value, gradient, label and op; only the links that would carry a
    later backward pass into this cell's graph go, wherever the node is kept: by a name,
    or where the end-of-cell walk cannot see (a ``functools.lru_cache``, a C extension's
    state). The user's own Values and Tensors keep their links."""
    made: set[Any] = NUMBER_NODES
    for v in order:
        if v.__class__ in made:
            v._a = v._b = None


# a path is a tuple: (name,) for a name, (parent path, kind, key) below it
def path_text(path) -> str:
    """``('n',) .w [0]`` → ``'n.w[0]'``."""
    steps = []
    while len(path) == 3:
        path, kind, key = path
        if kind == ".":
            steps.append(f".{key}")
        else:
            text = repr(key)
            steps.append(f"[{text if len(text) <= 40 else text[:37] + '...'}]")
    steps.append(path[0])
    return "".join(reversed(steps))


def _no_engine(v: Any) -> bool:
    return False


is_engine_object: Callable[[Any], bool] = _no_engine
engine_class: Callable[[Any], bool] = _no_engine
"""Whether an object is a learner's own autograd object, and a class that of one (set by
:mod:`.learner`, which imports this module)."""


class _Walker:
    def __init__(self, ns, made, walk):
        self.engine = is_engine_object
        self.ns = ns
        self.made = made
        self.walk = walk
        self.seen: dict[int, object] = {}  # id → the object's plain stand-in (itself if none)
        self.keep_alive: list = []  # objects whose ids are in seen
        self.later: list = []  # (object, path): deep objects, walked from the top again
        self.budget = LIMIT
        self.settled = Settled()

    # ---------------------------------------------------------------- nodes
    def node(self, v, path):
        """The plain number for the node ``v``; a leaf of the graph not named by a name of
        the namespace is named by ``path``, the first way the walk reached it."""
        walk = self.walk
        if walk is not None and v._a is None:
            i = walk.index(v)
            named = self.settled.named
            if i >= 0 and i not in named and self.ns.get(v.label) is not v:
                v.label = named[i] = path_text(path)
        return plain_of(v, self.made)

    # ---------------------------------------------------------------- objects
    def value(self, v, path, depth):
        """``v`` itself, its contents settled in place; or a new object for an immutable one
        (a tuple, a frozenset) whose contents had to change."""
        cls = type(v)
        if cls in _ATOMS:
            return v
        if cls in NUMBER_NODES:
            return self.node(v, path)
        key = id(v)
        if key in self.seen:
            return self.seen[key]
        if cls is Tensor or cls is engine.Value:
            return v  # the explicit engine's nodes: the user's own objects
        self.seen[key] = v
        self.keep_alive.append(v)
        self.budget -= 1
        if self.budget < 0:
            self.settled.unvisited += 1
            return v
        self.settled.visited += 1
        if depth > 150 and not isinstance(v, (tuple, frozenset)):
            self.later.append((v, path))  # mutable: settled in place from a fresh stack
            return v
        try:
            new = self._contents(v, cls, path, depth + 1)
        except Exception:  # an object that refuses inspection: left as it is
            return v
        if new is not v:
            self.seen[key] = new
        return new

    def drain(self):
        while self.later:
            v, path = self.later.pop()
            try:
                self._contents(v, type(v), path, 0)
            except Exception:
                pass

    def _contents(self, v, cls, path, depth):
        if isinstance(v, list):
            self._sequence(v, path, depth, list.__setitem__)
        elif isinstance(v, dict):
            self._dict(v, path, depth)
        elif self.engine(v):  # a learner's autograd object: asked early, the most numerous
            self._engine(v, cls, path, depth)
        elif isinstance(v, tuple):
            return self._tuple(v, cls, path, depth)
        elif isinstance(v, (set, frozenset)):
            return self._set(v, cls, path, depth)
        elif isinstance(v, collections.deque):
            self._sequence(v, path, depth, collections.deque.__setitem__)
        elif isinstance(v, np.ndarray):
            if v.dtype == object:
                for i, e in zip(np.ndindex(v.shape), v.flat):
                    new = self.value(e, (path, "[]", i if len(i) != 1 else i[0]), depth)
                    if new is not e:
                        v[i] = new
        elif isinstance(v, _SKIP_TYPES) and not (cls is type and own.is_own(v)):
            pass
        elif isinstance(v, types.FunctionType):
            if own.is_own(v):
                self._function(v, path, depth)
        elif isinstance(v, (types.MethodType, types.BuiltinMethodType)):
            pass
        elif _foreign(cls):
            pass
        else:
            self._attributes(v, cls, path, depth)
        return v

    def _sequence(self, v, path, depth, setitem):
        kinds = set(map(type, v))
        if kinds <= _ATOMS:
            return
        for i, e in enumerate(list(v)):
            cls = type(e)
            if cls in _ATOMS or (cls is list and set(map(type, e)) <= _ATOMS):
                continue  # (a list of plain numbers: nothing to visit, the common case)
            new = self.value(e, (path, "[]", i), depth)
            if new is not e:
                setitem(v, i, new)

    def _dict(self, v, path, depth):
        rekey = False
        for k, e in list(dict.items(v)):
            if type(k) not in _ATOMS and self._holds_node(k):
                rekey = True
            cls = type(e)
            if cls in _ATOMS or (cls is list and set(map(type, e)) <= _ATOMS):
                continue
            new = self.value(e, (path, "[]", k), depth)
            if new is not e:
                dict.__setitem__(v, k, new)
        if rekey:  # a node used as a key: the same order, plain keys
            items = [(self.value(k, path, depth), e) for k, e in dict.items(v)]
            dict.clear(v)
            dict.update(v, items)

    def _holds_node(self, k) -> bool:
        cls = type(k)
        if cls in NUMBER_NODES:
            return True
        return cls is tuple and any(self._holds_node(e) for e in k)

    def _tuple(self, v, cls, path, depth):
        items = [
            e if type(e) in _ATOMS else self.value(e, (path, "[]", i), depth)
            for i, e in enumerate(v)
        ]
        if all(a is b for a, b in zip(items, v)):
            return v
        if cls is tuple:
            return tuple(items)
        make = getattr(cls, "_make", None)  # a namedtuple
        try:
            return make(items) if make is not None else cls(items)
        except Exception:
            return v

    def _set(self, v, cls, path, depth):
        if set(map(type, v)) <= _ATOMS:
            return v
        pairs = [(e, self.value(e, (path, "[]", e), depth)) for e in list(v)]
        changed = [(e, new) for e, new in pairs if new is not e]
        if not changed:
            return v
        if isinstance(v, set):
            for e, new in changed:
                set.discard(v, e)
                set.add(v, new)
            return v
        try:
            return cls(new for _, new in pairs)
        except Exception:
            return v

    def _function(self, f, path, depth):
        if f.__defaults__:
            new = self.value(f.__defaults__, (path, ".", "__defaults__"), depth)
            if new is not f.__defaults__:
                f.__defaults__ = new
        if f.__kwdefaults__:
            self._dict(f.__kwdefaults__, (path, ".", "__kwdefaults__"), depth)
        for cell in f.__closure__ or ():
            try:
                e = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if type(e) in _ATOMS:
                continue
            new = self.value(e, (path, ".", "<closure>"), depth)
            if new is not e:
                cell.cell_contents = new
        if f.__dict__:
            self._dict(f.__dict__, path, depth)

    def _engine(self, root, cls, path, depth):
        """A learner's autograd object and, without recursion, the objects of its class its
        links hold (a set, tuple or list of them and plain numbers, its ``_backward``
        closure): their graph is most of what a training cell leaves. The links themselves
        are not visited as objects of their own."""
        if type(getattr(root, "__dict__", None)) is not dict or _slots(cls):
            return self._attributes(root, cls, path, depth)
        seen, made, stack, settled = self.seen, self.made, [(root, path)], self.settled
        while stack:
            v, path = stack.pop()
            attributes = v.__dict__
            for k, e in attributes.items():  # (values replaced in place: the keys stay)
                kind = type(e)
                if kind in _ATOMS:
                    continue
                if kind is Float and e._a is not None and id(e) not in made:
                    attributes[k] = _float_of(e)  # (a result in their graph: most of them)
                    continue
                if kind in NUMBER_NODES:
                    attributes[k] = self.node(e, (path, ".", k))
                    continue
                linked = e if kind is set or kind is tuple or kind is list else _closure(e, kind)
                for x in linked or ():
                    if type(x) is not cls and type(x) not in _ATOMS:
                        linked = None  # (visited as any object: what was walked here is seen)
                        break
                if linked is None:
                    new = self.value(e, (path, ".", k), depth)
                    if new is not e:
                        attributes[k] = new
                    continue
                for x in linked:  # (kept alive by the graph being walked)
                    if type(x) is cls and id(x) not in seen:
                        seen[id(x)] = x
                        self.budget -= 1
                        if self.budget < 0:
                            settled.unvisited += 1
                            continue
                        settled.visited += 1
                        stack.append((x, (path, ".", k)))

    def _attributes(self, v, cls, path, depth):
        if isinstance(v, type):  # the notebook's class: its class attributes
            for k, e in list(vars(v).items()):
                if type(e) in _ATOMS or k.startswith("__"):
                    continue
                new = self.value(e, (path, ".", k), depth)
                if new is not e:
                    try:
                        setattr(v, k, new)
                    except (AttributeError, TypeError):
                        pass
            return
        attributes = getattr(v, "__dict__", None)
        if type(attributes) is dict:
            for k, e in list(attributes.items()):
                if type(e) in _ATOMS:
                    continue
                new = self.value(e, (path, ".", k), depth)
                if new is not e:
                    attributes[k] = new
        for slot in _slots(cls):
            try:
                e = object.__getattribute__(v, slot)
            except AttributeError:
                continue
            if type(e) in _ATOMS:
                continue
            new = self.value(e, (path, ".", slot), depth)
            if new is not e:
                try:
                    object.__setattr__(v, slot, new)
                except (AttributeError, TypeError):
                    pass


def _closure(e, kind):
    """What the closure ``e`` holds (a learner's ``_backward``); None for anything else."""
    if kind is not types.FunctionType or e.__defaults__ or e.__kwdefaults__ or e.__dict__:
        return None
    try:
        return [c.cell_contents for c in e.__closure__ or ()]
    except ValueError:  # an empty cell
        return None


_SLOTS: dict = {}  # class → the names of its instances' slots


def _slots(cls) -> list:
    names = _SLOTS.get(cls)
    if names is None:
        if len(_SLOTS) > 4096:
            _SLOTS.clear()
        names = _SLOTS[cls] = []
        for klass in cls.__mro__:
            slots = klass.__dict__.get("__slots__")
            if slots and klass.__module__ != "builtins":
                names += [slots] if isinstance(slots, str) else slots
        names[:] = [n for n in names if n not in ("__dict__", "__weakref__")]
    return names


def _foreign(cls) -> bool:
    module = getattr(cls, "__module__", None)
    if not isinstance(module, str):
        return True
    return module.partition(".")[0] in _FOREIGN


# --------------------------------------------------------------------------- the start of a cell
_LIFTED = frozenset({float, np.float64, complex, np.complex128, np.float32, np.float16})
"""The kinds of number found in the cell's data that become leaves (ints stay ints:
counts, indices and keys are not parameters)."""
DATA_SIZE = 10_000
"""A list, deque or dict with more items than this is data, not parameters: its numbers
are left as they are (lifting them would cost more than the cell)."""
LIFT_LIMIT = 50_000
"""The most numbers one cell's data lends it as leaves."""


def lift_reachable(ns, names, made: dict, new_leaf, engine=None) -> "_Lifter":
    """Make the floats and float arrays that the names ``names`` reach leaves of the run.

    Before a cell runs, the lists, dicts, deques and notebook-class instances the
    cell's names hold (at any depth) get a fresh leaf in place of each float and
    float array: a number the code keeps is a parameter the run differentiates.
    Tuples, sets, library objects and containers of more than :data:`DATA_SIZE`
    items are left as they are. ``made`` learns each leaf's original object; give the
    result to :func:`name_lifted` once the graph is walked, then to :func:`restore`.
    ``engine`` tells a learner's autograd object (of any class), whose ``data`` is lifted
    too (not its ``grad``: what their engine says, not an input).
    """
    lifter = _Lifter(made, new_leaf, engine)
    for name in names:
        v = ns.get(name)
        if type(v) is tuple:  # a tuple of arrays: a new tuple of leaves, the old one put back
            new = lifter.tuple(v, (name,))
            if new is not v:
                ns[name] = new
                lifter.names.append((ns, name, new, v))
        elif v is not None and type(v) not in _ATOMS and type(v) not in NUMBER_NODES:
            lifter.walk(v, (name,))
    return lifter


def unfollowed(ns, names) -> list[str]:
    """One warning per name in ``names`` whose value holds numbers no leaf is made of:
    numbers of another kind than float64, float32, float16 and complex128 (``complex64``)."""
    out = []
    for name in sorted(names):
        kind = _unfollowed_kind(ns.get(name), 0, [DATA_SIZE])
        if kind is not None:
            out.append(
                f"{name!r} holds {kind}: gradmagic differentiates float64, float32, float16 and "
                f"complex128 numbers only, so no gradient is shown for {name!r}"
            )
    return out


def _unfollowed_kind(v, depth, budget) -> str | None:
    budget[0] -= 1
    if budget[0] < 0 or depth > 8:
        return None
    cls = type(v)
    if isinstance(v, (np.floating, np.complexfloating)) and cls not in _LIFTED:
        return f"a {np.dtype(cls).name} number"
    if cls is np.ndarray and v.dtype.kind in "fc" and v.dtype not in _HELD:
        return f"a {v.dtype.name} array"
    if cls is list or cls is tuple:
        items = v
    elif cls is dict:
        items = v.values()
    else:
        return None
    if len(items) > DATA_SIZE:
        return None
    for e in items:
        if type(e) not in _PLAIN_ATOMS:
            kind = _unfollowed_kind(e, depth + 1, budget)
            if kind is not None:
                return kind
    return None


def name_lifted(lifter, walk, ns) -> list:
    """Name the lifted leaves the graph reached by their paths; their positions in
    ``walk`` (to add to its ``named``)."""
    named: list[int] = []
    if lifter is None or walk is None:
        return named
    for leaf, path in lifter.paths.values():
        i = walk.index(leaf)
        if i >= 0:  # by its place in the data, also where the cell bound it to a name
            leaf.label = path_text(path)
            named.append(i)
    return named


def restore(lifter) -> None:
    """Put back the numbers :func:`lift_reachable` replaced, wherever in their containers
    the leaves are now (a sort moves them), whether or not a name still reaches the
    container (``filter(f, d.items())`` holds ``d`` where no walk can see it)."""
    if lifter is None:
        return
    for ns, name, new, old in lifter.names:
        if ns.get(name) is new:
            ns[name] = old
    lifter.names = []
    made = lifter.made
    for container in lifter.containers:
        mapping = isinstance(container, dict)
        setitem = dict.__setitem__ if mapping else type(container).__setitem__
        try:
            for k, e in list(dict.items(container) if mapping else enumerate(container)):
                entry = made.get(id(e))
                if entry is not None and entry[0] is e:
                    setitem(container, k, entry[1])
        except Exception:  # a container the cell made odd (a list subclass that refuses)
            continue
    lifter.containers = []


class _Lifter:
    def __init__(self, made, new_leaf, engine=None):
        self.made, self.new_leaf = made, new_leaf
        self.engine = engine
        self.seen: set = set()
        self.arrays: dict = {}  # id(array) → its leaf: one array reached twice is one leaf
        self.paths: dict = {}  # id(leaf) → (leaf, its path)
        self.budget = LIFT_LIMIT
        self.visits = LIMIT
        self.containers: list = []  # the lists, deques and dicts that hold a leaf made here
        self.names: list = []  # (ns, name, new, old): the tuples a name held, slots' numbers

    def item(self, e, path):
        """A container's item lifted: a leaf, a tuple of leaves, or ``e`` itself."""
        return self.tuple(e, path) if type(e) is tuple else self.leaf(e, path)

    def leaf(self, e, path):
        if type(e) is np.ndarray:
            if e.dtype not in _HELD:
                return e
            new = self.arrays.get(id(e))
            if new is not None:
                return new
            new = self.arrays[id(e)] = self.new_leaf(e, "")
        else:
            new = self.new_leaf(e, "")
        self.made[id(new)] = (new, e)
        self.paths[id(new)] = (new, path)
        self.budget -= 1
        return new

    def tuple(self, t, path, depth=0):
        """``t`` with a leaf for each float and float array it holds (nested tuples
        too), ``made`` told the new tuple's original; ``t`` itself if it holds none. The
        lists and dicts it holds are walked, their numbers lifted in place."""
        if len(t) > DATA_SIZE or depth > 32:
            return t
        items = []
        for i, e in enumerate(t):
            kind = type(e)
            if (kind in _LIFTED or kind is np.ndarray) and self.budget > 0:
                e = self.leaf(e, (path, "[]", i))
            elif kind is tuple:
                e = self.tuple(e, (path, "[]", i), depth + 1)
            elif kind not in _ATOMS:
                self.walk(e, (path, "[]", i))
            items.append(e)
        if all(a is b for a, b in zip(items, t)):
            return t
        new = tuple(items)
        self.made[id(new)] = (new, t)
        return new

    def walk(self, root, path):
        stack = [(root, path)]
        while stack and self.budget > 0 and self.visits > 0:
            v, path = stack.pop()
            if id(v) in self.seen:
                continue
            self.seen.add(id(v))
            self.visits -= 1
            cls = type(v)
            if isinstance(v, (list, collections.deque)):
                if len(v) > DATA_SIZE or set(map(type, v)) <= _PLAIN_ATOMS:
                    continue
                lifted = False
                for i, e in enumerate(v):
                    kind = type(e)
                    if kind in _LIFTED or kind is np.ndarray or kind is tuple:
                        if self.budget <= 0:
                            break
                        new = self.item(e, (path, "[]", i))
                        if new is not e:
                            v[i] = new
                            lifted = True
                    elif kind not in _ATOMS:
                        stack.append((e, (path, "[]", i)))
                if lifted:
                    self.containers.append(v)
            elif isinstance(v, dict):
                if len(v) <= DATA_SIZE:
                    self._mapping(v, path, stack, "[]")
            elif self.engine is not None and self.engine(v):
                attributes = getattr(v, "__dict__", None)
                if type(attributes) is dict:
                    self._mapping(attributes, path, stack, ".", skip="grad")
                self._slots(v, cls, path, stack, skip="grad")
            elif own.is_own(cls) and not isinstance(v, (type, types.FunctionType, tuple)):
                attributes = getattr(v, "__dict__", None)
                if type(attributes) is dict:
                    self._mapping(attributes, path, stack, ".")
                self._slots(v, cls, path, stack)

    def _slots(self, v, cls, path, stack, skip=None):
        """The numbers in ``v``'s slots lifted, as an instance dict's are (put back by
        :func:`restore` through :class:`_SlotsOf`)."""
        for slot in _slots(cls):
            if slot == skip:
                continue
            try:
                e = object.__getattribute__(v, slot)
            except AttributeError:
                continue
            kind = type(e)
            if (kind in _LIFTED or kind is np.ndarray or kind is tuple) and self.budget > 0:
                new = self.item(e, (path, ".", slot))
                if new is not e:
                    object.__setattr__(v, slot, new)
                    self.names.append((_SlotsOf(v), slot, new, e))
            elif kind not in _ATOMS:
                stack.append((e, (path, ".", slot)))

    def _mapping(self, d, path, stack, kind, skip=None):
        lifted = False
        for k, e in list(dict.items(d)):
            if k == skip:
                continue
            cls = type(e)
            if cls in _LIFTED or cls is np.ndarray or cls is tuple:
                if self.budget <= 0:
                    break
                new = self.item(e, (path, kind, k))
                if new is not e:
                    dict.__setitem__(d, k, new)
                    lifted = True
            elif cls not in _ATOMS:
                stack.append((e, (path, kind, k)))
        if lifted:
            self.containers.append(d)


class _SlotsOf:
    """An object's slots read and written as a namespace is (``get``, ``[name] = ``)."""

    def __init__(self, obj):
        self.obj = obj

    def get(self, name):
        return getattr(self.obj, name, None)

    def __setitem__(self, name, value):
        object.__setattr__(self.obj, name, value)


_PLAIN_ATOMS = _ATOMS - _LIFTED
