"""The ``%%autograd`` cell magic and its one-line form ``%autograd EXPR``.

A run: parse the options, rewrite the cell (:mod:`gradmagic.notebook.rewrite`),
compile it with the shell's caching compiler under the cell's own name (so
tracebacks show the user's lines, the ``%%autograd`` line being line 1), turn
the numbers the cell reads from the namespace into fresh leaves, execute it in
the user's namespace, call ``backward()`` on the target and return a
:class:`~gradmagic.analysis.trace.Trace` (also kept in ``gradmagic.last``).

The run without any display is :func:`prepare` (rewrite and compile) and
:func:`execute` (run, pick the target, backward, Trace); :func:`gradmagic.grade`
uses the same two functions, so a graded cell computes what the magic would.

Load it with ``%load_ext gradmagic``; ``%unload_ext gradmagic`` removes it.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import dataclasses
import inspect
import numbers
import operator
import re
import threading
import types
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring


from . import runtime as _runtime
from . import boundary, session, torchcell
from ..core import engine
from ..core.engine import Value, state
from ..core.array import Array
from ..core.sites import FUNCTIONS, cursor
from .rewrite import RUNTIME, SITE, Rewritten, rewrite
from ..analysis.options import Options, option_specs
from ..analysis.trace import Trace
from ..views import display

__all__ = [
    "AutogradMagics",
    "NoTarget",
    "Prepared",
    "prepare",
    "execute",
    "find_target",
    "parse_expect",
    "parse_options",
    "options_from",
    "Options",
    "load",
    "unload",
]


def _option_arguments(magic):
    """Add an argument to ``magic``'s parser for each field of :class:`Options`."""
    for spec in reversed(option_specs()):  # (the parser lists them in the order declared)
        if spec.type is bool:
            kwargs = {"action": "store_true"}
        else:
            kwargs = {"type": spec.type, "default": spec.default}
            kwargs.update(
                (key, value)
                for key, value in (("metavar", spec.metavar), ("choices", spec.choices))
                if value
            )
        shown = spec.default not in (None, False) and not spec.help.startswith("(default")
        text = spec.help + (f" (default {_shown(spec.default)})" if shown else "")
        magic = argument(*spec.flags, help=text, **kwargs)(magic)
    return magic


def _shown(default) -> str:
    return str(default).replace("e-0", "e-")  # 1e-6, not 1e-06


@magics_class
class AutogradMagics(Magics):
    """Magics that differentiate a cell of ordinary Python."""

    @magic_arguments()
    @_option_arguments  # the Options fields: each option is declared there once
    @argument("expression", nargs="*", help="line form only: the expression to differentiate")
    @no_var_expand  # the line is Python (%autograd {'a': x}['a'] * 2), as %time's is
    @line_cell_magic
    def autograd(self, line, cell=None):
        """Run a cell of plain Python with every number a graph node, then backward().

        The numbers are still numbers (float and int subclasses): the cell
        computes, prints and raises as plain Python; %time, !cmd and
        %matplotlib lines work. The cell's last expression (or the name its
        last statement assigns, or -t NAME) is the target. Returns a Trace of
        the run: .value, .grads, .nodes (with -q it returns None; the Trace is
        in gradmagic.last). Numbers the cell reads from the namespace enter as
        fresh leaves, those in the lists, dicts and objects it reads too; numbers
        it keeps in containers and objects are inputs named by their paths
        (gradmagic.last.grads["n.w[0]"], gradmagic.last.grads_of("n.w")).
        Names bound to the graph's nodes stay bound to them, so x.grad works
        after the cell; every other number, at any depth, is plain again. A
        cell whose value is not differentiable shows it as plain Python does,
        with a note. A cell whose target is a PyTorch tensor runs unchanged,
        recorded with PyTorch as the engine. The display checks each input's gradient against a central finite
        difference (--eps); a big graph checks a seeded sample of its inputs one
        by one and all of them at once along a random direction, and says so.

        Cell form: %%autograd [options], the code below.
        Line form: %autograd [options] EXPRESSION
        """
        __tracebackhide__ = True
        if cell is None:
            option_text, source = _split_line(line)
            args = self._parse(option_text)
            if not source:
                raise UsageError(
                    "%autograd needs an expression to differentiate, "
                    f"e.g. %autograd a*b + c\n\n{_help()}"
                )
            header = f"%autograd {line}".rstrip()
        else:
            args = self._parse(line)
            if args.expression:
                raise UsageError(
                    f"unexpected text after the options of %%autograd: "
                    f"{' '.join(args.expression)!r}\n\n{_help()}"
                )
            source, header = cell, f"%%autograd {line}".rstrip()
        options = self._options(args)
        raw = self._raw_cell()
        whole_cell = raw is not None and (
            raw.startswith("%%autograd")
            if cell is not None
            else raw.startswith("%autograd") and "\n" not in raw
        )
        if whole_cell:  # show the first line exactly as typed
            header = raw.partition("\n")[0]
        result = self._run(
            source, header, options, cell_form=cell is not None, whole_cell=whole_cell
        )
        # a cell ending with ";" shows nothing, as a plain one (IPython's own check of this
        # raises on a cell that does not tokenize)
        return None if _ends_with_semicolon(source) else result

    def _raw_cell(self):
        """The text of the cell the shell is running (stripped), or None."""
        result = self.shell.displayhook.exec_result
        raw = getattr(getattr(result, "info", None), "raw_cell", None)
        return raw.strip() if isinstance(raw, str) else None

    def _cell_number(self) -> int:
        """The number of the running cell, as its ``In[n]`` prompt shows it."""
        result = self.shell.displayhook.exec_result
        number = getattr(result, "execution_count", None)
        return self.shell.execution_count if number is None else number

    # ------------------------------------------------------------------ options
    def _parse(self, text: str):
        parsed = _PARSED.get(text)
        if parsed is None:
            try:
                parsed = parse_argstring(self.autograd, text)
            except UsageError as e:
                raise UsageError(f"{e}\n\n{_help()}") from None
            if len(_PARSED) >= 256:
                _PARSED.clear()
            _PARSED[text] = parsed
        return argparse.Namespace(**vars(parsed))  # a copy: the cached one stays as parsed

    def _options(self, args) -> Options:
        return options_from(args, self.shell.user_ns)

    # ------------------------------------------------------------------ running
    def _run(self, source: str, header: str, options: Options, cell_form: bool, whole_cell: bool):
        __tracebackhide__ = True
        session.last = None
        shell = self.shell
        text = f"{header}\n{source}" if cell_form else header
        filename = shell.compile.cache(text, self._cell_number())
        first_line, python = (2 if cell_form else 1), source
        if cell_form:
            python, skipped = _shell_syntax(shell, source)
            first_line += skipped
        if torchcell.wants_torch(python, shell.user_ns):  # torch is the engine: run it plain
            return self._run_torch(python, source, filename, first_line, options, whole_cell)
        try:
            cell = prepare(
                python,
                shell.user_ns,
                filename=filename,
                first_line=first_line,
                compiler=shell.compile,
            )
            cell = dataclasses.replace(cell, source=source)  # the trace keeps the user's text
        except (SyntaxError, ValueError) as e:
            if isinstance(e, SyntaxError) and not cell_form:
                _point_into(e, header, source)
            return self._fail(e, filename, whole_cell)
        try:
            trace = execute(cell, shell.user_ns, options, global_ns=shell.user_global_ns)
        except NoTarget as e:  # the cell's value, as plain Python shows it, and a note
            if not options.quiet:
                print(f"%%autograd: {e}")
            return e.value if e.shown else None
        except (Exception, KeyboardInterrupt) as e:  # shown from the user's line on
            return self._fail(e, filename, whole_cell)
        session.last = trace
        return None if options.quiet else trace

    def _run_torch(self, python, source, filename, first_line, options, whole_cell):
        """A PyTorch cell, run unchanged and recorded (see :mod:`gradmagic.notebook.torchcell`)."""
        __tracebackhide__ = True
        try:
            run = torchcell.run(
                python,
                self.shell.user_ns,
                options,
                filename=filename,
                first_line=first_line,
                compiler=self.shell.compile,
                global_ns=self.shell.user_global_ns,
                source_text=source,
            )
        except torchcell.NoTensorTarget as e:
            if not options.quiet:
                print(f"%%autograd: {e}")
            return None
        except Exception as e:
            return self._fail(e, filename, whole_cell)
        session.last = run
        return None if options.quiet else run

    def _fail(self, exc: BaseException, filename: str, whole_cell: bool):
        """Show ``exc`` as a plain cell would show it: the user's lines only.

        When the magic is the whole cell the shell runs, the traceback is shown
        here and the run is marked as failed (so notebooks stop, as they would
        on a plain cell). Otherwise (the line form inside a longer cell, or a
        direct call) the exception propagates, with the same shortened
        traceback below the caller's frames.
        """
        __tracebackhide__ = True
        _runtime.as_plain_error(exc, INTERNALS)
        tb = user_traceback(exc.__traceback__, filename)
        if not whole_cell:
            raise exc.with_traceback(tb)
        self.shell.showtraceback((type(exc), exc, tb), tb_offset=0)
        self.shell.displayhook.exec_result.error_in_exec = exc
        return None


# IPython's magic_arguments starts the help with a reST literal-block marker ("::");
# %%autograd? is read as plain text
AutogradMagics.autograd.__doc__ = AutogradMagics.autograd.__doc__.replace("::\n\n", "", 1)


def _ends_with_semicolon(source: str) -> bool:
    """True if the last token of ``source`` (comments aside) is ``;``."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):  # the cell's own SyntaxError is shown already
        return False
    for token in reversed(tokens):
        if token.type in (tokenize.ENDMARKER, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            continue
        return token.type == tokenize.OP and token.string == ";"
    return False


_PARSED: dict = {}  # option text -> its parsed arguments (argparse costs 50-100 us a cell)


def _shell_syntax(shell, source: str) -> tuple[str, int]:
    """``source`` with the shell's own syntax made Python, as in a plain cell.

    The shell's cell transforms (as IPython's ``%%time`` applies them) turn
    ``%time ...``, ``%matplotlib inline``, ``!ls`` and ``x?`` lines into calls
    of ``get_ipython()``, one line for one line. Leading blank lines, which the
    transforms drop, are counted instead, so the rewritten code keeps the
    user's line numbers. Returns the text and how many lines were skipped.
    """
    lines = source.splitlines(keepends=True)
    skipped = 0
    while skipped < len(lines) and not lines[skipped].strip():
        skipped += 1
    text = "".join(lines[skipped:])
    if _plain_python(shell, text):
        return text if text.endswith("\n") else text + "\n", skipped
    return shell.transform_cell(text), skipped


def _plain_python(shell, text: str) -> bool:
    """True if the shell's cell transforms would give ``text`` back unchanged (plus a newline).

    Only for IPython's own transforms (none added), a cell of several lines
    (a single line also goes through the prefilter: autocall and the like),
    not indented, with none of the characters the transforms act on: ``%``
    (magics), ``!`` (shell commands), ``?`` (help), prompts to strip (``>>>``,
    ``...``, ``In [``), the escapes at the start of a line (``,``, ``;``,
    ``/``) and lines of spaces (which they empty). Anything else takes the
    transforms, which cost 0.1-0.2 ms a cell.
    """
    if (
        _DEFAULT_TRANSFORMS is None
        or "\n" not in text.rstrip("\n")
        or text[:1].isspace()
        or any(c in text for c in "%!?")
        or ">>>" in text
        or "..." in text
        or "In [" in text
    ):
        return False
    if any(line.lstrip()[:1] in _ESCAPES for line in text.splitlines()):
        return False
    if _BLANK_WITH_SPACES.search(text):  # (the transforms empty such lines)
        return False
    manager = shell.input_transformer_manager
    if shell.input_transformers_post or type(manager) is not _DEFAULT_TRANSFORMS[0]:
        return False
    cleanup = manager.cleanup_transforms
    return (
        list(map(type, cleanup)) == _DEFAULT_TRANSFORMS[1]
        and cleanup[:2] == _DEFAULT_TRANSFORMS[2]
        and manager.line_transforms == _DEFAULT_TRANSFORMS[3]
        and manager.token_transformers == _DEFAULT_TRANSFORMS[4]
    )


_ESCAPES = frozenset(",;/")
_BLANK_WITH_SPACES = re.compile(r"^[^\S\r\n]+\r?$", re.M)


def _default_transforms():
    """(manager class, cleanup transform types, the cleanup functions, line transforms, token
    transformers) of IPython's own input transforms; None if this IPython has other ones."""
    try:
        from IPython.core import inputtransformer2 as it

        default = it.TransformerManager()
        return (
            it.TransformerManager,
            list(map(type, default.cleanup_transforms)),
            default.cleanup_transforms[:2],
            list(default.line_transforms),
            list(default.token_transformers),
        )
    except Exception:  # noqa: BLE001 - another IPython: always run its transforms
        return None


_DEFAULT_TRANSFORMS = _default_transforms()


def parse_options(text: str, ns=None) -> Options:
    """The :class:`Options` of an ``%%autograd`` line's option text; a UsageError if it is bad."""
    try:
        args = parse_argstring(AutogradMagics.autograd, text)
    except UsageError as e:
        raise UsageError(f"{e}\n\n{_help()}") from None
    return options_from(args, {} if ns is None else ns)


def options_from(args, ns) -> Options:
    """Check parsed arguments and make them :class:`Options` (``--expect NAME`` is read in ``ns``)."""
    values = {}
    for spec in option_specs():
        value = getattr(args, spec.name)
        problem = spec.check(value) if spec.check is not None and value is not None else ""
        if problem:
            raise UsageError(f"{spec.flags[-1]} {problem}\n\n{_help()}")
        values[spec.name] = value
    if values["expect"] is not None:
        try:
            values["expect"] = parse_expect(values["expect"], ns)
        except ValueError as e:
            raise UsageError(f"--expect: {e}\n\n{_help()}") from None
    return Options(**values)


def _help() -> str:
    return AutogradMagics.autograd.__doc__


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
    plain, math_names = namespace_names(ns)
    key = (
        source,
        first_line,
        frozenset(plain),
        frozenset(math_names),
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
        )
        code = _link(_compile(compiler, rw.module, filename, "exec"))
        final = rw.final and _link(_compile(compiler, rw.final, filename, "eval"))
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
_CO_COROUTINE = inspect.CO_COROUTINE


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
    if code.co_flags & _CO_COROUTINE:
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
    branches, floats = state.branch_events, state.float_conversions
    lifted = lift(ns, cell.rewritten.reads)
    before = dict(ns)  # to find the names the cell binds
    run = None
    reached: dict = {}  # the leaves made of numbers in the data the cell reads
    value = lifter = None
    reach = boundary.roots(ns, cell.rewritten.names)
    followed = follow(ns, reach)
    followed_codes = frozenset(code for _, code in followed)
    try:
        lifter = boundary.lift_reachable(ns, cell.rewritten.reads, reached, _runtime.new_leaf)
        with _runtime.recording(cell.filename) as run:
            first = cursor.start()
            cursor.enter(cell.rewritten.function)
            try:
                _run_code(cell.code, global_ns, ns)
                cursor.site = cursor.base + cell.rewritten.final_site
                value = _run_code(cell.final, global_ns, ns) if cell.final else None
            finally:
                cursor.leave()
        target = find_target(cell.rewritten, options.target, value, ns)
    except NoTarget as e:  # the names and the cell's value hold plain values
        unfollow(followed)
        outside = boundary.unrewritten_math(ns, reach, _MATH_CALLS, _runtime, followed_codes)
        if outside and e.args:
            e.args = (f"{e.args[0]}; {outside[0]}",)
        boundary.restore(lifter)
        settled = boundary.settle(
            ns,
            made=_made(run, lifted, reached),
            bound=_bound(ns, before, lifted),
            reach=reach,
            value=value,
        )
        e.value, e.shown = settled.value, cell.final is not None and options.target is None
        if run is not None and run.cuts and e.args:
            e.args = (f"{e.args[0]}; {_cuts_text(run.cuts)}",)
        raise
    except BaseException:  # an error: no graph to look at, the names hold plain values
        unfollow(followed)
        boundary.restore(lifter)
        boundary.settle(
            ns, made=_made(run, lifted, reached), bound=_bound(ns, before, lifted), reach=reach
        )
        raise
    unfollow(followed)
    relabel(ns)
    data = target.data
    # one walk of the graph, for backward and the trace (which reuses its lists)
    walk = engine.walk(target, zero=True)
    named = bindings(ns)
    lifted_named = boundary.name_lifted(lifter, walk, ns)
    boundary.restore(lifter)
    settled = boundary.settle(
        ns,
        made=_made(run, lifted, reached),
        bound=_bound(ns, before, lifted),
        reach=reach,
        walk=walk,
    )
    if settled.named or lifted_named:  # leaves named by the path that reaches them
        walk.named = sorted(set(walk.named).union(settled.named, lifted_named))
    engine.backward(target, np.ones(data.shape) if isinstance(data, np.ndarray) else 1.0, walk)
    converted = state.float_conversions - floats
    trace = Trace(
        target,
        walk=walk,
        bindings=named,
        branch_events=state.branch_events - branches,
        float_conversions=converted + len(run.cuts),
        source=cell.source,
        options=options,
        sites=(first, cursor.calls_since(first), FUNCTIONS),
        warnings=cut_warnings(run.cuts, converted)
        + boundary.unrewritten_math(ns, reach, _MATH_CALLS, _runtime, followed_codes)
        + _unsettled(settled),
    )
    trace.mark_cuts(*_runtime.cut_marks(run, walk.order))
    boundary.release(settled)
    return trace


def follow(ns, reach) -> list:
    """Run the notebook functions a plain cell compiled, which the cell can reach,
    rewritten while the cell runs, so that the graph follows them (a model whose
    class a plain cell defined, calling math.tanh). Returns what :func:`unfollow` puts
    back; a function whose source cannot be read or rewritten is left as it is."""
    followed = []
    names = None
    for name in reach:
        for f in boundary.functions_of(ns.get(name)):
            code = f.__code__
            if boundary.compiled_by_magic(code, _runtime):
                continue
            new = _FOLLOWED.get(code)
            if new is None:
                if names is None:
                    names = namespace_names(ns)
                new = _rewritten(f, *names)
                if len(_FOLLOWED) > 256:
                    _FOLLOWED.clear()
                _FOLLOWED[code] = new
            if new is not False:
                f.__code__ = new
                followed.append((f, code))
    return followed


def unfollow(followed: list) -> None:
    """Put back the code :func:`follow` replaced."""
    for f, code in followed:
        f.__code__ = code
    followed.clear()


_FOLLOWED: dict = {}  # a plain cell's function code → its rewritten code (False: none)


def _rewritten(f, plain, math_names):
    """``f``'s code rewritten as a magic cell's is, or False where that cannot be done."""
    import inspect
    import textwrap

    code = f.__code__
    if code.co_name == "<lambda>":
        return False
    try:
        source = textwrap.dedent(inspect.getsource(f))
        qualname = getattr(code, "co_qualname", code.co_name)
        rw = rewrite(
            source,
            filename=code.co_filename,
            first_line=code.co_firstlineno,
            plain_names=plain,
            math_names=math_names,
            scope=qualname[: -len(code.co_name)].replace("<locals>.", ""),
        )
        module = compile(rw.module, code.co_filename, "exec", dont_inherit=True)
    except Exception:  # no source (a file gone, exec'd text), or one the rewrite refuses
        return False
    for c in module.co_consts:
        if isinstance(c, types.CodeType) and c.co_name == code.co_name:
            if c.co_freevars != code.co_freevars or c.co_flags != code.co_flags:
                return False  # a closure or super() the standalone text cannot rebuild
            new = _link(c)
            if hasattr(code, "co_qualname"):
                new = new.replace(co_qualname=code.co_qualname)
            return new
    return False


_MATH_CALLS = frozenset(_runtime.DISPATCHED_NAMES) - {"float", "isinstance", "pow"}
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


def _made(run, lifted, reached) -> dict:
    """id(node) → (node, the object it stands for): library results, lifted names and the
    numbers the cell's data held."""
    made = dict(reached)
    if run is not None:
        made.update(run.made)
    for old, new in lifted.values():
        made[id(new)] = (new, old)
    return made


def _bound(ns, before: dict, lifted: dict) -> set:
    """The names the cell bound (or the magic lifted)."""
    missing = object()
    return {name for name, v in ns.items() if before.get(name, missing) is not v} | set(lifted)


def find_target(rw: Rewritten, name, value, ns):
    """The node to differentiate after a run; raises :class:`NoTarget` saying why there is none.

    ``name`` is ``-t NAME`` (or None), ``value`` the cell's last expression.
    """
    if name is not None:
        if name not in ns:
            raise NoTarget(f"-t {name}: no variable {name!r} after the cell ran")
        value, what = ns[name], name
    elif rw.final is not None:
        what = "the cell's value"
    elif rw.target is not None:
        value, what = ns.get(rw.target), rw.target
    else:
        raise NoTarget(
            "the cell does not end with an expression or an assignment; "
            "end it with one, or name the target with -t NAME"
        )
    if not _runtime.is_node(value):
        raise NoTarget(
            f"{what} is {_describe(value)}, not a Value, so there is nothing to differentiate"
        )
    if isinstance(value.data, np.ndarray) and value.data.size != 1:
        raise NoTarget(
            f"{what} is a tensor of shape {value.data.shape}; reduce it "
            "to one number (.sum(), .mean()) to differentiate it"
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


def namespace_names(ns) -> tuple[set, set]:
    """Names of library objects, and of math functions, in the namespace ``ns``.

    Library objects are modules and whatever comes from a package: functions,
    classes and their instances (numpy arrays, random generators, models);
    calls through them get plain literals. Scalar Values, numbers, containers
    and anything defined in the notebook itself are not library objects.
    """
    plain, math_names = set(), set()
    for name, obj in ns.items():
        if not name.startswith("_"):
            kind = _kind(obj)
            if kind == "math":
                math_names.add(name)
            elif kind == "library":
                plain.add(name)
    return plain, math_names


def _kind(obj) -> str:
    """'math', 'library' or '' (anything else) for an object of the namespace."""
    try:
        if callable(obj) and _runtime.fn(obj) is not obj:
            return "math"
        if type(obj) is Value:
            return ""
        if isinstance(obj, types.ModuleType):
            return "library"
        if isinstance(obj, type) and obj.__module__ == "__main__":
            return "library"  # the notebook's own class: its calls get plain numbers
        module = getattr(obj, "__module__", None)
        if not isinstance(module, str):
            module = type(obj).__module__
        return "" if module in ("builtins", "__main__") else "library"
    except Exception:  # an exotic object (a proxy that fails on inspection): leave it be
        return ""


def lift(ns, names) -> dict:
    """Rebind each numeric name in ``names`` to a fresh leaf; returns name → (old, leaf)."""
    lifted = {}
    arrays = {}  # id -> leaf: one array read under two names is one leaf (V is W holds)
    for name in names:
        if name in ns:
            old = ns[name]
            if type(old) is np.ndarray or type(old) is Array:
                new = arrays.get(id(old))
                if new is None:
                    new = arrays[id(old)] = _runtime.new_leaf(old, name)
            else:
                new = _runtime.new_leaf(old, name)
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
    counts = {}
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


INTERNALS = frozenset(
    f"gradmagic.{name}"
    for name in (
        "notebook.runtime",
        "core.engine",
        "core.ops",
        "core.tensor",
        "core.tensor_ops",
        "core.array",
        "notebook.torchcell",
        "analysis.torchrun",
    )
)
"""Modules whose frames a traceback leaves out: an error in a Value or Tensor op
shows the user's line and the message, as an error inside numpy does."""


def user_traceback(tb, filename: str):
    """The part of ``tb`` from the user's cell on, without the frames of :data:`INTERNALS`."""
    start = tb
    while start is not None and start.tb_frame.f_code.co_filename != filename:
        start = start.tb_next
    if start is None:
        return tb
    frames = []
    while start is not None:
        if start.tb_frame.f_globals.get("__name__") not in INTERNALS:
            frames.append(start)
        start = start.tb_next
    out = None
    for t in reversed(frames):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def _point_into(error: SyntaxError, header: str, source: str) -> None:
    """Make a line-form syntax error point into the ``%autograd ...`` line."""
    shift = header.rfind(source)
    if error.offset is not None and shift >= 0:
        error.offset += shift
        if getattr(error, "end_offset", None):
            error.end_offset += shift
    error.text = header


def _describe(value) -> str:
    if value is None:
        return "None"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"a {type(value).__name__} ({text})"


# --------------------------------------------------------------------------- option text
_TOKEN = re.compile(r"""\s*((?:[^\s"']+|"[^"]*"|'[^']*')+)""")
# the magic's options, read from its parser: flags take no value, the others one
_OPTIONS = AutogradMagics.autograd.parser._option_string_actions
_FLAGS = frozenset(name for name, action in _OPTIONS.items() if action.nargs == 0)
_VALUED = frozenset(_OPTIONS) - _FLAGS


def _split_line(line: str) -> tuple[str, str]:
    """Split a line-magic call into its options and its expression.

    ``'-q --expect "a=1" a*b'`` → ``('-q --expect "a=1"', 'a*b')``. Options
    come first; the expression starts at the first word that is not one (a
    word like ``--frobnicate`` is kept as an option, to be reported).
    """
    pos = 0
    while True:
        m = _TOKEN.match(line, pos)
        if m is None:
            break
        word = m.group(1)
        if (
            word in _FLAGS
            or (word.startswith("--") and "=" in word)
            or (word.startswith("--") and word[2:3].isalpha() and word not in _VALUED)
        ):
            pos = m.end()
        elif word in _VALUED:
            value = _TOKEN.match(line, m.end())
            pos = value.end() if value else m.end()
        else:
            break
    return line[:pos].strip(), line[pos:].strip()


_EXPECT_KEY = re.compile(r"[A-Za-z_]\w*(\.data)?\Z")


def parse_expect(spec: str, ns) -> dict:
    """``"a=6, b=-4"`` (or the name of a mapping in ``ns``) → ``{'a': 6.0, 'b': -4.0}``.

    Keys are variable names, optionally with ``.data`` for an expected value
    rather than a gradient; numbers may be simple arithmetic (``-4/3``); a
    mapping's values may also be lists or arrays (a tensor's gradient).
    Raises ValueError with a readable message.
    """
    spec = spec.strip().strip("\"'")
    if spec.isidentifier():
        if spec not in ns:
            raise ValueError(f"no variable {spec!r} (give NAME=NUMBER pairs or a dict)")
        mapping = ns[spec]
        if not isinstance(mapping, Mapping):
            raise ValueError(f"{spec!r} is a {type(mapping).__name__}, not a dict")
        items = list(mapping.items())
    else:
        items = []
        for part in spec.split(","):
            if not part.strip():
                continue
            key, eq, number = part.partition("=")
            if not eq:
                raise ValueError(f"{part.strip()!r} is not NAME=NUMBER")
            items.append((key.strip(), number.strip()))
    expect = {}
    for key, number in items:
        if not isinstance(key, str) or not _EXPECT_KEY.match(key):
            raise ValueError(f"{key!r} is not a variable name (optionally with .data)")
        expect[key] = _expected_number(number)
    if not expect:
        raise ValueError("no NAME=NUMBER pairs given")
    return expect


def _expected_number(x):
    """An expected answer as a float (or a float array, for a tensor's gradient)."""
    if isinstance(x, Value):
        return float(x.data)
    if hasattr(x, "detach") and hasattr(x, "__array__"):  # a torch tensor (torch not imported)
        x = x.detach().cpu().numpy()
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, (list, tuple, np.ndarray)):
        try:
            return np.asarray(x, dtype=float)
        except (TypeError, ValueError):
            pass
    if isinstance(x, str):
        if len(x) > 200:
            raise ValueError(f"{x[:20]!r}... is not a number (at most 200 characters)")
        try:
            return float(_arithmetic(ast.parse(x, mode="eval").body))
        except (
            SyntaxError,
            ValueError,
            TypeError,
            ZeroDivisionError,
            OverflowError,
            MemoryError,
            RecursionError,
        ):
            pass
    raise ValueError(f"{_short(x)} is not a number")


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _arithmetic(node):
    """The value of a tree of numbers and + - * / ** (nothing else is evaluated)."""
    ops = {
        ast.Add: operator.add,
        ast.Sub: operator.sub,
        ast.Mult: operator.mul,
        ast.Div: operator.truediv,
        ast.Pow: operator.pow,
        ast.USub: operator.neg,
        ast.UAdd: operator.pos,
    }
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)  # floats, so 9**9**9 overflows instead of running on
    if isinstance(node, ast.UnaryOp) and type(node.op) in ops:
        return ops[type(node.op)](_arithmetic(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        return ops[type(node.op)](_arithmetic(node.left), _arithmetic(node.right))
    raise ValueError("not a number")


# --------------------------------------------------------------------------- extension
def load(shell) -> None:
    """Register the magics (``%load_ext gradmagic``)."""
    shell.register_magics(AutogradMagics)
    display.register(shell)


def unload(shell) -> None:
    """Remove what :func:`load` registered (``%unload_ext gradmagic``)."""
    display.unregister(shell)
    manager = shell.magics_manager
    for kind in ("line", "cell"):
        f = manager.magics[kind].get("autograd")
        if isinstance(getattr(f, "__self__", None), AutogradMagics):
            del manager.magics[kind]["autograd"]
    manager.registry.pop(AutogradMagics.__name__, None)
