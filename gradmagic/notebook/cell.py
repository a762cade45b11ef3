"""A cell's run under the magic: :func:`prepare` (rewrite and compile, cached by the cell's
text) and :func:`execute` (run in the user's namespace, find the target, backward, the
trace), the namespace's names lifted into leaves, and the traceback the user sees.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import inspect
import pkgutil
import textwrap
import threading
import time
import types
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import core
from ..analysis.options import Options
from ..analysis.trace import Trace
from ..core import engine
from ..core.array import Array
from ..core.engine import Value, state
from ..core.tensor import Tensor
from ..core.sites import FUNCTIONS, cursor
from . import boundary, learner, memory, own, rerun
from . import runtime as _runtime
from .math_calls import DISPATCHED_NAMES
from .rewrite import RUNTIME, SITE, Rewritten, rewrite


# --------------------------------------------------------------------------- running a cell
class NoTarget(Exception):
    """The cell ran but left nothing to differentiate; the message says why.

    ``value`` is the cell's value as plain Python has it, and ``shown`` says whether
    plain Python would show it (the cell ends with an expression).
    """

    value = None
    shown = False


@dataclass(frozen=True)
class Prepared:
    """A cell rewritten and compiled, ready for :func:`execute`."""

    source: str
    rewritten: Rewritten
    code: types.CodeType
    final: types.CodeType | None  # the cell's last expression, evaluated separately
    filename: str


def prepare(
    source: str, ns, *, filename: str = "<cell>", first_line: int = 1, compiler=compile
) -> Prepared:
    """Rewrite ``source`` for the namespace ``ns`` and compile it.

    ``compiler`` is the shell's caching compiler in the magic (so tracebacks
    show the cell's lines) and the builtin :func:`compile` elsewhere. Raises
    ``SyntaxError`` (or ``ValueError``) for a cell that cannot be compiled.

    A cell run again (the same text, the same names of library objects and math
    functions in ``ns``, the same compiler flags) reuses its rewrite and code, with
    the code's file name made ``filename``; a cell whose compiling warned is not kept,
    so it warns again, as a plain cell does.
    """
    plain, math_names, engines = namespace_names(ns)
    key = (
        source,
        first_line,
        frozenset(plain),
        frozenset(math_names),
        frozenset(engines),
        compiler is compile,
        getattr(compiler, "flags", None),
    )
    kept = _PREPARED.get(key)
    if kept is not None:
        _PREPARED.move_to_end(key)
        rw, code, final = kept
        return Prepared(
            source, rw, _refile(code, filename), final and _refile(final, filename), filename
        )
    with warnings.catch_warnings(record=True) as caught:  # the filters in force still apply
        rw = rewrite(
            source,
            filename=filename,
            first_line=first_line,
            plain_names=plain,
            math_names=math_names,
            engine_names=engines,
        )
        code = _link(_compile(compiler, rw.module, filename, "exec"))
        final = None if rw.final is None else _link(_compile(compiler, rw.final, filename, "eval"))
    for w in caught:  # shown as they would have been
        warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
    if not caught:
        _PREPARED[key] = (rw, code, final)
        if len(_PREPARED) > _KEEP_PREPARED:
            _PREPARED.popitem(last=False)
    return Prepared(source, rw, code, final, filename)


_PREPARED: OrderedDict = OrderedDict()  # the cells prepared last (see prepare)
_KEEP_PREPARED = 64


def _refile(code: types.CodeType, filename: str) -> types.CodeType:
    """``code`` and the code inside it (functions, classes, comprehensions) as compiled from
    ``filename``: tracebacks and the runtime's recording find the cell by that name."""
    if code.co_filename == filename:
        return code
    consts = tuple(
        _refile(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


_TOP_LEVEL_AWAIT = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


def _compile(compiler, tree, filename: str, mode: str):
    """``compiler(tree, filename, mode)`` allowing top-level ``await``, as IPython's own cells do
    (code without one compiles as before)."""
    if compiler is compile:
        return compile(tree, filename, mode, _TOP_LEVEL_AWAIT)
    extra = getattr(compiler, "extra_flags", None)  # IPython's caching compiler
    if extra is None:
        return compiler(tree, filename, mode)
    with extra(_TOP_LEVEL_AWAIT):
        return compiler(tree, filename, mode)


def _run_code(code, global_ns, ns):
    """``exec`` or ``eval`` of the cell's code; a cell with top-level ``await`` is a
    coroutine, run to its end (see :func:`_await`)."""
    if code.co_flags & inspect.CO_COROUTINE:
        return _await(eval(code, global_ns, ns))
    return eval(code, global_ns, ns)


def _await(coroutine):
    """Run a cell's coroutine to its end and return its value.

    With no event loop running in this thread (a terminal IPython, a test
    shell, ``grade``), it runs on IPython's own loop, as a plain cell's
    ``await`` does. In a Jupyter kernel, whose loop is running this very
    cell, it runs on a loop of its own in a helper thread while the kernel
    waits: ``await asyncio.sleep(1)`` or an HTTP call work; an object tied to
    the kernel's loop (a task or queue made by an earlier cell) does not.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from IPython.core.async_helpers import get_asyncio_loop

        return get_asyncio_loop().run_until_complete(coroutine)
    box = {}

    def work():
        try:
            box["value"] = asyncio.run(coroutine)
        except BaseException as e:  # handed to the cell's thread
            box["error"] = e

    worker = threading.Thread(target=work, name="gradmagic-await", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        error = box.pop("error")
        try:
            raise error
        finally:
            del error
    return box["value"]


@dataclass
class _Entry:
    """What a cell's run starts from and makes: the names it reads (numbers lent as leaves),
    what they reach, the recorded run, and where its call sites begin."""

    lifted: dict
    before: dict  # the namespace before the run, to find the names the cell binds
    reached: dict  # the leaves made of numbers in the data the cell reads
    reach: set
    followed: list
    followed_codes: frozenset
    lifter: object = None
    run: _runtime._Run | None = None  # what the recording recorded (set as it starts)
    first: int = 0
    owner: list = field(default_factory=list)  # the learner's object the target is the data of
    unfollowed: list = field(default_factory=list)  # inputs no leaf is made of

    def made(self) -> dict:
        """id(node) → (node, the object it stands for): library results, lifted names and
        the numbers the cell's data held."""
        made = dict(self.reached)
        if self.run is not None:
            made.update(self.run.made)
        for old, new in self.lifted.values():
            made[id(new)] = (new, old)
        return made

    def bound(self, ns) -> set:
        """The names the cell bound (or the magic lifted)."""
        before, missing = self.before, object()
        changed = {name for name, v in ns.items() if before.get(name, missing) is not v}
        return changed | set(self.lifted)


def execute(
    cell: Prepared, ns, options: Options | Mapping | None = None, *, global_ns=None
) -> Trace:
    """Run a prepared cell in ``ns``, call ``backward()`` on its target, return the Trace.

    This is the whole run of ``%%autograd`` without any display; the magic and
    :func:`gradmagic.grade` both use it. ``options`` are the magic's (the
    ``target`` key names the target; all are kept on the Trace). Raises what
    the cell raises, after putting back the numbers it read from ``ns``, or
    :class:`NoTarget`.
    """
    __tracebackhide__ = True
    options = Options.of(options)
    global_ns = ns if global_ns is None else global_ns
    counts = state.branch_events, state.float_conversions
    # the plain re-runs of the check start from the state the cell starts from
    zygote = None
    if not options.no_check and rerun.available():
        zygote = rerun.Zygote(_PlainRun(cell, ns, global_ns, options))
    started = time.perf_counter()
    _runtime.births = 0
    _runtime.array_births = None if zygote is None else {}
    _runtime.input_births = None if zygote is None else _runtime.births_list()
    try:
        trace, (handles, explicit, inside) = _execute(
            cell, ns, global_ns, options, counts, zygote is not None
        )
    except BaseException:
        if zygote is not None:
            zygote.close()
        raise
    finally:
        arrays, _runtime.array_births = _runtime.array_births or {}, None
        strays, _runtime.input_births = _runtime.input_births or (), None
    trace.rerun = rerun.Rerun(
        zygote,
        handles,
        time.perf_counter() - started,
        problem="" if zygote is not None else _NOT_KEPT if options.no_check else _NO_FORK,
        arrays={b: arrays[b] for b in handles.values() if b in arrays},
    )
    trace.rerun.explicit = explicit
    if getattr(trace, "trained", False):
        trace.rerun.problem = _TRAINED
    trace.rerun.outside = frozenset(strays).difference(inside)
    return trace


_NO_FORK = "this system cannot fork a process to run the cell again"
_TRAINED = (
    "the cell trains (it called backward() and went on): its graph reads each step's .grad "
    "as plain numbers, as a training step does, so its gradients are the last step's, while "
    "the code's own derivative runs through every update"
)
_NOT_KEPT = "it ran with --no-check, which keeps no way to run it again"


def _execute(
    cell: Prepared, ns, global_ns, options: Options, counts, handled: bool = True
) -> tuple[Trace, tuple[dict, frozenset, frozenset]]:
    __tracebackhide__ = True
    unfollowed = boundary.unfollowed(ns, cell.rewritten.reads)
    lifted = _lift_inputs(ns, cell.rewritten)
    before = dict(ns)
    reach = boundary.roots(ns, cell.rewritten.names)
    followed = follow(ns, reach)
    entry = _Entry(lifted, before, {}, reach, followed, frozenset(c for _, c in followed))
    entry.unfollowed = unfollowed
    target = _run(cell, ns, global_ns, options, entry)
    unfollow(followed)
    relabel(ns)
    data = target.data
    claims = None
    run = entry.run
    assert run is not None  # (the recording started)
    if entry.owner:  # the target is a learner's own object: what their engine says of it
        roots = reach | entry.bound(ns)
        claims = learner.collect(
            entry.owner[0], ns, roots, cell.rewritten.loops, run.held, run.steps, run.links
        )
    # one walk of the graph, for backward and the trace (which reuses its lists)
    walk = engine.walk(target, zero=True)
    named = bindings(ns)
    inside = frozenset(b for n in walk.order if (b := getattr(n, "_born", 0)))
    # names bound to numbers born in the cell that the graph does not reach (see .rerun)
    strays = [k for k in sorted(entry.bound(ns)) if _stray(ns.get(k), inside)]
    settled = _settle(ns, walk, entry)
    if claims is not None:  # the learner's names on the nodes that hold their numbers
        walk.named = sorted(set(walk.named).union(learner.name(claims, walk, ns)))
    # the gradients' nan and inf are the trace's to show; numpy's warnings about them would
    # name code the cell never ran (the max of an array holding nan divides by zero winners)
    with np.errstate(all="ignore"):
        engine.backward(target, np.ones(data.shape) if isinstance(data, np.ndarray) else 1.0, walk)
    trace = _trace(cell, ns, options, target, walk, named, settled, entry, counts)
    if claims is not None:
        trace.claims = learner.judge(trace, claims, options.atol, options.rtol)
        trace.own_graph = learner.drawing(trace, claims, trace.claims)
    trace.steps = list(run.steps)
    # trained: backward() on another node of gradmagic's, or steps of a learner's engine
    trace.trained = any(r != id(target) for r in run.step_roots) or (
        claims is not None and len(run.steps) > 1
    )
    handles = (_handles(trace, walk.order) if handled else ({}, frozenset())) + (inside,)
    trace.stray_names = strays  # type: ignore[attr-defined]
    boundary.release(walk.order)
    return trace, handles


class _PlainRun:
    """The cell as a plain function of its inputs, for a re-run (see :mod:`.rerun`): the
    same steps as a recorded run (names lent, functions followed, the code run), with
    nothing recorded and the inputs moved where they are born."""

    def __init__(self, cell: Prepared, ns, global_ns, options: Options):
        self.cell, self.ns, self.global_ns, self.target = cell, ns, global_ns, options.target
        self.namespaces = [ns] if global_ns is ns else [ns, global_ns]
        self.lifter = None

    def __call__(self, point):
        cell, ns, rw = self.cell, self.ns, self.cell.rewritten
        probe = _runtime._probe = _runtime.Probe(*point)
        recorded = probe.recorded
        _runtime.births = 0
        _lift_inputs(ns, rw)
        follow(ns, boundary.roots(ns, rw.names))
        self.lifter = boundary.lift_reachable(
            ns, rw.reads, {}, _runtime.lent_leaf, learner.is_engine_object
        )
        if not recorded:
            _run_code(cell.code, self.global_ns, ns)
            value = _run_code(cell.final, self.global_ns, ns) if cell.final else None
            return _plain_number(rw, self.target, value, ns), probe.seen
        # the cell runs only under the magic (``x.tanh()`` on a number): its forward values
        # are still the code's own; the graph it builds is thrown away
        with _runtime.recording(cell.filename):
            cursor.start()
            value = _run_recorded(cell, self.global_ns, ns)
        target = find_target(rw, self.target, value, ns)
        return _sum(target.data), probe.seen

    def undo(self) -> None:
        """Put back the numbers the last call moved or lent (the namespace is the caller's)."""
        if _runtime._probe is not None:
            _runtime._probe.undo()
            _runtime._probe = None
        boundary.restore(self.lifter)
        self.lifter = None


def _plain_number(rw: Rewritten, name, value, ns) -> float:
    """The target of a plain run as one number (an array's sum: backward's seed is ones)."""
    if name is not None:
        value = ns[name]
    elif rw.final is None:
        value = ns.get(rw.target)
    if not isinstance(value, (np.ndarray, np.generic)) and hasattr(value, "data"):
        value = value.data  # the explicit engine's Value or Tensor
    return _sum(value)


def _sum(value) -> float:
    return float(np.sum(np.asarray(value, dtype=float)))


def _lift_inputs(ns, rw: Rewritten) -> dict:
    """:func:`lift` the names the cell reads, and the arrays it writes into: such an array
    is an input too, its leaf a view of the user's memory."""
    written = [n for n in rw.written if type(ns.get(n)) in (np.ndarray, Array)]
    return lift(ns, rw.reads.union(written))


def _run_recorded(cell: Prepared, global_ns, ns):
    """The cell's code run with the site cursor in it (the recording on); its value."""
    cursor.enter(cell.rewritten.function)
    try:
        _run_code(cell.code, global_ns, ns)
        cursor.site = cursor.base + cell.rewritten.final_site
        return _run_code(cell.final, global_ns, ns) if cell.final else None
    finally:
        cursor.leave()


def _stray(value, inside: frozenset) -> bool:
    born = getattr(value, "_born", 0) if type(value) in (_runtime.Float, Array) else 0
    return bool(born) and born not in inside


def _handles(trace: Trace, order) -> tuple[dict, frozenset]:
    """Each input leaf's position in the trace → its birth (leaves without one are left out)."""
    leaves = trace.leaf_index[~trace.constant[trace.leaf_index]]
    handles: dict = {}
    explicit = set()  # the explicit engine's leaves (a Value, a Tensor)
    for i in leaves.tolist():
        node = order[i]
        born = getattr(node, "_born", 0)
        if born and not np.iscomplexobj(trace.tensor_data.get(i, 0.0)):  # (moved: real ones)
            handles[i] = born
        if type(node) is Value or type(node) is Tensor:
            explicit.add(i)
    return handles, frozenset(explicit)


def _run(cell: Prepared, ns, global_ns, options: Options, entry: _Entry):
    """Run the cell's code, recorded, and return its target; on an error or no target, the
    names hold plain values again before it is raised."""
    __tracebackhide__ = True
    value = None
    try:
        entry.lifter = boundary.lift_reachable(
            ns, cell.rewritten.reads, entry.reached, _runtime.lent_leaf, learner.is_engine_object
        )
        with (
            _runtime.recording(cell.filename) as entry.run,
            memory.bounded(most=options.max_memory),
        ):
            entry.run.follow = functools.partial(_follow_imported, ns, entry.followed)
            entry.first = cursor.start()
            value = _run_recorded(cell, global_ns, ns)
        return find_target(cell.rewritten, options.target, value, ns, entry.owner)
    except NoTarget as e:  # the names and the cell's value hold plain values
        unfollow(entry.followed)
        if entry.unfollowed and e.args:  # an input of a dtype not followed: say which
            e.args = (f"{e.args[0]}; {'; '.join(entry.unfollowed)}",)
        _explain_no_target(
            e, cell, ns, options, entry.run, value, entry.lifter, entry.reach, entry.followed_codes
        )
        e.value = boundary.settle(
            ns, made=entry.made(), bound=entry.bound(ns), reach=entry.reach, value=value
        ).value
        raise
    except BaseException:  # an error: no graph to look at, the names hold plain values
        unfollow(entry.followed)
        boundary.restore(entry.lifter)
        boundary.settle(ns, made=entry.made(), bound=entry.bound(ns), reach=entry.reach)
        raise


def _settle(ns, walk, entry: _Entry):
    """The cell's end: leaves named by the paths that reach them, every number the names
    reach plain again (``boundary.settle``)."""
    lifted_named = boundary.name_lifted(entry.lifter, walk, ns)
    boundary.restore(entry.lifter)
    settled = boundary.settle(
        ns, made=entry.made(), bound=entry.bound(ns), reach=entry.reach, walk=walk
    )
    for module in own.own_modules():  # what the learner's modules keep is plain too
        boundary.settle_module(vars(module), entry.made())
    if settled.named or lifted_named:  # leaves named by the path that reaches them
        walk.named = sorted(set(walk.named).union(settled.named, lifted_named))
    return settled


def _trace(cell, ns, options, target, walk, named, settled, entry: _Entry, counts) -> Trace:
    """The Trace of a run after its backward pass, the cuts marked where the user looks."""
    branches, floats = counts
    run = entry.run
    if run is None:
        raise RuntimeError("a trace is made of a recorded run only")
    stale = _from_earlier_cells(walk)
    converted = state.float_conversions - floats
    trace = Trace(
        target,
        walk=walk,
        bindings=named,
        branch_events=state.branch_events - branches,
        float_conversions=converted + len(run.cuts),
        source=cell.source,
        options=options,
        sites=(
            entry.first,
            cursor.calls_since(entry.first),
            FUNCTIONS,
            cursor.runs_since(entry.first),
        ),
        warnings=entry.unfollowed
        + cut_warnings(run.cuts, converted)
        + boundary.unrewritten_math(ns, entry.reach, _MATH_CALLS, _runtime, entry.followed_codes)
        + _unsettled(settled)
        + _stale_warning(stale),
    )
    notes, places = _runtime.cut_marks(run, walk.order)
    if stale:
        notes.update(dict.fromkeys(stale, _STALE_NOTE))
        places = [*places, (None, "a value from an earlier cell")]
    trace.mark_cuts(notes, places)
    return trace


_STALE_NOTE = "the cell: a value an earlier cell computed, a constant here"


def _from_earlier_cells(walk) -> list:
    """Positions of the graph's values that an earlier cell computed: the end of that cell
    cut them from their parents, and this cell reached them where the names did not lend
    them (a ``functools.lru_cache``, a library object's state)."""
    if 255 not in walk.codes:  # (the code of an op entry on a node without parents)
        return []
    order = walk.order
    return [
        i
        for i, code in enumerate(walk.codes)
        if code == 255 and order[i]._a is None and order[i]._op is not None
    ]


def _stale_warning(stale) -> list:
    if not stale:
        return []
    return [
        f"{len(stale)} value(s) computed by an earlier cell (kept by a cache or a library "
        "object) enter this graph as constants, so no gradient flows through them to what "
        "they were computed from"
    ]


def _explain_no_target(e, cell, ns, options, run, value, lifter, reach, followed_codes) -> None:
    """Say in ``e`` why a cell that has no target computed nothing to look at (math the
    rewrite did not reach, a cut), and put back the numbers it read (``lifter``)."""
    outside = boundary.unrewritten_math(ns, reach, _MATH_CALLS, _runtime, followed_codes)
    if outside and e.args:
        e.args = (f"{e.args[0]}; {outside[0]}",)
    boundary.restore(lifter)
    e.shown = cell.final is not None and options.target is None
    if run is not None and run.cuts and e.args:
        e.args = (f"{e.args[0]}; {_cuts_text(run.cuts)}",)


def follow(ns, reach) -> list:
    """Run the learner's functions a plain cell compiled (or a module beside the notebook
    holds), which the cell can reach, rewritten while the cell runs, so that the graph
    follows them (a model whose class a plain cell defined, calling math.tanh; a layer
    of ``cs231n/layers.py``, and the functions of its module it calls). Returns what
    :func:`unfollow` puts back; a function whose source cannot be read or rewritten is
    left as it is."""
    followed = []
    names: dict = {}  # id(a namespace) -> its namespace_names
    todo = [f for name in reach for f in boundary.functions_of(ns.get(name))]
    seen: set = set()
    while todo:
        f = todo.pop()
        code = f.__code__
        if id(code) in seen or boundary.compiled_by_magic(code, _runtime):
            continue
        seen.add(id(code))
        home = f.__globals__
        if home is not ns:  # a module's function: the module's functions it calls too
            todo += [
                g for n in boundary.global_names(code) for g in boundary.functions_of(home.get(n))
            ]
        new = _FOLLOWED.get(code)
        if new is None:
            if id(home) not in names:
                names[id(home)] = namespace_names(home)
            new = _rewritten(f, *names[id(home)])
            if len(_FOLLOWED) > 256:
                _FOLLOWED.clear()
            _FOLLOWED[code] = new
        if new is not False:
            f.__code__ = new
            followed.append((f, code))
    return followed


def _follow_imported(ns, followed: list, names: tuple) -> None:
    """:func:`follow` the names an import in the cell bound (``*module``: what it defines),
    into ``followed`` (which :func:`unfollow` puts back at the cell's end)."""
    import sys

    reach: set = set()
    for name in names:
        module = sys.modules.get(name[1:]) if name.startswith("*") else None
        reach.update(vars(module) if module is not None else [name])
    followed += follow(ns, boundary.roots(ns, reach))


def unfollow(followed: list) -> None:
    """Put back the code :func:`follow` replaced."""
    for f, code in followed:
        f.__code__ = code
    followed.clear()


_FOLLOWED: dict = {}  # a plain cell's function code → its rewritten code (False: none)


def _rewritten(f, plain, math_names, engines=()):
    """``f``'s code rewritten as a magic cell's is, or False where that cannot be done."""
    code = f.__code__
    if code.co_name == "<lambda>":
        return False
    # a learner's engine's method: its nodes count at the line that called it (``a * b``)
    engine = _engine_method(f)
    try:
        source = textwrap.dedent(inspect.getsource(f))
        qualname = getattr(code, "co_qualname", code.co_name)
        rw = rewrite(
            source,
            filename=code.co_filename,
            first_line=code.co_firstlineno,
            plain_names=plain,
            math_names=math_names,
            engine_names=engines,
            scope=qualname[: -len(code.co_name)].replace("<locals>.", ""),
            method=bool(_classes_of(qualname)),
            sites_kept=not engine,
        )
        module = compile(_mangle(rw.module, qualname), code.co_filename, "exec", dont_inherit=True)
    except Exception:  # no source (a file gone, exec'd text), or one the rewrite refuses
        return False
    for c in module.co_consts:
        if isinstance(c, types.CodeType) and c.co_name == code.co_name:
            if c.co_freevars != code.co_freevars or c.co_flags != code.co_flags:
                return False  # a closure or super() the standalone text cannot rebuild
            new = _link(c)
            if hasattr(code, "co_qualname"):
                new = new.replace(co_qualname=code.co_qualname)
            return _plain_closures(new, code) if engine else new
    return False


def _engine_method(f) -> bool:
    """``f`` is a method of a learner's autograd class (:func:`.learner.engine_class`)."""
    parts = f.__qualname__.split(".")
    owner = f.__globals__.get(parts[0]) if len(parts) > 1 else None
    for part in parts[1:-1]:
        owner = getattr(owner, part, None)
    return isinstance(owner, type) and learner.engine_class(owner)


def _plain_closures(new: types.CodeType, old: types.CodeType) -> types.CodeType:
    """``new`` with the functions of no arguments its text defines (a ``_backward`` closure)
    as written: in a learner's engine they are the bookkeeping of their backward, which runs
    on plain numbers (the true gradients come from the graph of the method's own arithmetic).
    A helper the method calls with arguments stays followed."""
    mine = [
        c
        for c in old.co_consts
        if isinstance(c, types.CodeType) and c.co_name[0] != "<" and _no_arguments(c)
    ]
    by_name = {c.co_name: c for c in mine}
    if len(by_name) != len(mine):
        return new
    consts = [
        by_name[c.co_name]
        if isinstance(c, types.CodeType)
        and c.co_name in by_name
        and by_name[c.co_name].co_freevars == c.co_freevars
        else c
        for c in new.co_consts
    ]
    return new.replace(co_consts=tuple(consts))


def _no_arguments(code: types.CodeType) -> bool:
    return not (code.co_argcount or code.co_kwonlyargcount or code.co_flags & 0x0C)


def _classes_of(qualname: str) -> list:
    """The classes a qualified name lies in (``Net.forward`` → ``['Net']``)."""
    parts = qualname.split(".")
    return [p for p, after in zip(parts, parts[1:]) if after != "<locals>" and p != "<locals>"]


def _mangle(tree, qualname: str):
    """``tree`` with the private names (``self.__x``) of a method's text mangled as Python
    does inside its class (``self._Cls__x``): compiled alone, the text is outside the class."""
    classes = _classes_of(qualname)
    owner = classes[-1].lstrip("_") if classes else ""
    if not owner:
        return tree

    def private(name: str) -> bool:
        return name.startswith("__") and not name.endswith("__") and "." not in name

    top = tree.body  # the method itself keeps its name, as its code does

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            node.attr = f"_{owner}{node.attr}"
        elif isinstance(node, ast.Name) and private(node.id):
            node.id = f"_{owner}{node.id}"
        elif isinstance(node, ast.arg) and private(node.arg):
            node.arg = f"_{owner}{node.arg}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and (
            private(node.name) and node not in top
        ):
            node.name = f"_{owner}{node.name}"
    return tree


_MATH_CALLS = frozenset(DISPATCHED_NAMES) - {"float", "isinstance", "pow"}
"""Names of math functions whose call on a number node computes outside the graph unless
the magic compiled the call."""


def _unsettled(settled) -> list[str]:
    """A warning when the end-of-cell walk reached its bound before the end."""
    if not settled.unvisited:
        return []
    return [
        f"the cell reaches more than {boundary.LIMIT:,} objects: {settled.unvisited:,} were "
        "not visited, and numbers the cell left in them may still be graph nodes"
    ]


def _cuts_text(cuts) -> str:
    """Where the cell's numbers left the graph, as a clause: "numbers left the graph at
    line 3 (math.exp took 'W' as a plain number)"."""
    places = list(
        dict.fromkeys(
            (f"line {line} ({message})" if line is not None else message) for line, message in cuts
        )
    )
    more = f" and {len(places) - 3} more places" if len(places) > 3 else ""
    return "numbers left the graph at " + "; ".join(places[:3]) + more


NO_TARGET = (
    "the cell does not end with an expression or an assignment; "
    "end it with one, or name the target with -t NAME"
)


def named_target(name, value, ns, final: bool, assigned) -> tuple:
    """(the target, what to call it): the variable ``name`` (``-t``), else the cell's last
    expression's ``value`` (when it has a ``final`` one), else what its last statement
    ``assigned``; :class:`NoTarget` when there is none."""
    if name is not None:
        if name not in ns:
            raise NoTarget(f"-t {name}: no variable {name!r} after the cell ran")
        return ns[name], name
    if final:
        return value, "the cell's value"
    if assigned is not None:
        return ns.get(assigned), assigned
    raise NoTarget(NO_TARGET)


def find_target(rw: Rewritten, name, value, ns, owner: list | None = None):
    """The node to differentiate after a run; raises :class:`NoTarget` saying why there is none.

    ``name`` is ``-t NAME`` (or None), ``value`` the cell's last expression. A learner's
    own autograd object (see :mod:`gradmagic.notebook.learner`) stands for its ``.data``;
    it is appended to ``owner`` when that is a list.
    """
    value, what = named_target(name, value, ns, rw.final is not None, rw.target)
    if not _runtime.is_node(value) and learner.is_engine_object(value):
        data = learner.owner_data(value, _runtime.is_node)
        if data is None:
            raise NoTarget(
                f"{what} is {_describe(value)}, an autograd object of your own whose .data "
                "was computed from no number of the cell, so there is nothing to differentiate"
            )
        if owner is not None:
            owner.append(value)
        value = data
    if not _runtime.is_node(value):
        raise NoTarget(
            f"{what} is {_describe(value)}, not a Value, so there is nothing to differentiate"
        )
    # `n = 26`: a setting, not a function (an int here is an Int node: is_node said so)
    if isinstance(value, int) and value._op is None:  # type: ignore[attr-defined]
        raise NoTarget(
            f"{what} is {_describe(value)} the cell set and did not compute, "
            "so there is nothing to differentiate"
        )
    if isinstance(value.data, np.ndarray) and value.data.size != 1:
        raise NoTarget(
            f"{what} is a tensor of shape {value.data.shape}; reduce it "
            "to one number (.sum(), .mean()) to differentiate it"
        )
    if np.iscomplexobj(value.data):
        raise NoTarget(
            f"{what} is a complex number: a gradient is taken of a real one; differentiate "
            "its real part, imaginary part or size (np.real, np.imag, abs)"
        )
    return value


# --------------------------------------------------------------------------- steps
def _link(code: types.CodeType) -> types.CodeType:
    """``code`` with the placeholders :data:`~gradmagic.notebook.rewrite.RUNTIME` and
    :data:`~gradmagic.notebook.rewrite.SITE` made the runtime module and the site cursor."""
    consts = tuple(
        _runtime
        if type(c) is str and c == RUNTIME
        else cursor
        if type(c) is str and c == SITE
        else _link(c)
        if isinstance(c, types.CodeType)
        else c
        for c in code.co_consts
    )
    return code.replace(co_consts=consts)


def namespace_names(ns) -> tuple[set, set, set]:
    """Names of library objects, of math functions, and of a learner's autograd classes
    (:func:`gradmagic.notebook.learner.engine_class`), in the namespace ``ns``.

    Library objects are modules and whatever comes from a package: functions,
    classes and their instances (numpy arrays, random generators, models);
    calls through them get plain literals. Scalar Values, numbers, containers
    and anything defined in the notebook itself are not library objects.
    """
    kinds: dict[str, set] = {"library": set(), "math": set(), "engine": set()}
    for name, obj in ns.items():
        kind = "" if name.startswith("_") else _kind(obj)
        if kind:
            kinds[kind].add(name)
    return kinds["library"], kinds["math"], kinds["engine"]


def _kind(obj) -> str:
    """'math', 'library', 'engine' or '' (anything else) for an object of the namespace."""
    try:
        if callable(obj) and _runtime.fn(obj) is not obj:
            return "math"
        if type(obj) is Value:
            return ""
        if isinstance(obj, type) and learner.engine_class(obj):
            return "engine"  # the learner's own Value: its calls get numbers
        if isinstance(obj, types.ModuleType):
            return "" if own.own_module(obj.__name__) else "library"
        if isinstance(obj, type) and own.is_own(obj):
            return "library"  # the learner's own class: its calls get plain numbers
        module = getattr(obj, "__module__", None)
        if not isinstance(module, str):
            module = type(obj).__module__
        return "" if module == "builtins" or own.own_module(module) else "library"
    except Exception:  # an exotic object (a proxy that fails on inspection): leave it be
        return ""


def lift(ns, names) -> dict:
    """Rebind each numeric name in ``names`` to a fresh leaf; returns name → (old, leaf)."""
    lifted = {}
    # id -> leaf: one array read under two names is one leaf (V is W holds)
    arrays: dict[int, Array] = {}
    for name in sorted(names):  # (sorted: a plain re-run lends them in the same order)
        if name in ns:
            old = ns[name]
            if type(old) is np.ndarray or type(old) is Array:
                new = arrays.get(id(old))
                if new is None:
                    new = arrays[id(old)] = _runtime.lent_leaf(old, name)
            else:
                new = _runtime.lent_leaf(old, name)
            if new is not None:
                lifted[name] = (ns[name], new)
                ns[name] = new
    return lifted


def relabel(ns) -> None:
    """Label each node bound to a name with it, unless its label is a name bound to it."""
    for name, v in list(ns.items()):
        if (
            not name.startswith("_")
            and _runtime.is_node(v)
            and v.label != name
            and ns.get(v.label) is not v
        ):
            v.label = name


def bindings(ns) -> dict:
    """Name → node for every node bound in the namespace."""
    return {name: v for name, v in ns.items() if not name.startswith("_") and _runtime.is_node(v)}


def cut_warnings(cuts, converted: int) -> list[str]:
    """One line per place a Value was turned into a plain number."""
    counts: dict[tuple[int | None, str], int] = {}
    for line, message in cuts:
        counts[line, message] = counts.get((line, message), 0) + 1
    warnings = []
    for (line, message), n in counts.items():
        where = f"line {line}: " if line is not None else ""
        times = f" ({n} times)" if n > 1 else ""
        warnings.append(f"{where}{message}, so no gradient flows through it{times}")
    if converted:
        times = f" ({converted} times)" if converted > 1 else ""
        warnings.append(
            "a Value or Tensor was converted to plain numbers by code outside the graph "
            "(e.g. a library function or storing into a numpy float array), so no gradient "
            f"flows through those numbers{times}"
        )
    return warnings


CALL = "__gradmagic_call__"  # the frame that calls torch as from the user's line (torchcalls)
INTERNALS = frozenset(
    [f"gradmagic.core.{module.name}" for module in pkgutil.iter_modules(core.__path__)]
    + [
        "gradmagic.notebook.runtime",
        "gradmagic.notebook.library_calls",
        "gradmagic.notebook.math_calls",
        "gradmagic.notebook.torchcell",
        "gradmagic.analysis.torchrun",
        "gradmagic.analysis.torchrecord",
        "gradmagic.analysis.torchcalls",
    ]
)
"""Modules whose frames a traceback leaves out (every module of ``core``, and what rewritten
code calls): an error in a Value or Tensor op shows the user's line and the message, as an
error inside numpy does."""


def user_traceback(tb, filename: str):
    """The part of ``tb`` from the user's cell on, without the frames of :data:`INTERNALS`."""
    start = tb
    while start is not None and start.tb_frame.f_code.co_filename != filename:
        start = start.tb_next
    if start is None:
        return tb
    frames = []
    while start is not None:
        frame = start.tb_frame
        if frame.f_globals.get("__name__") not in INTERNALS and frame.f_code.co_name != CALL:
            frames.append(start)
        start = start.tb_next
    out = None
    for t in reversed(frames):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def _describe(value) -> str:
    if value is None:
        return "None"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    kind = type(value).__name__
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} ({text})"
