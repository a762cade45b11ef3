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

import dataclasses
import functools
import inspect
import re

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand


from . import runtime as _runtime
from . import session, torchcell
from ..analysis.options import OptionError, Options, help_text, option_specs, usage_text
from ..views import display
from .expect import parse_expect
from .cell_text import _ends_with_semicolon, _shell_syntax
from .cell import INTERNALS, NoTarget, Prepared, execute, find_target, prepare, user_traceback
from .memory import GraphMemoryError


__all__ = [
    "AutogradMagics",
    "NoTarget",
    "Prepared",
    "prepare",
    "execute",
    "find_target",
    "parse_expect",
    "parse_options",
    "Options",
    "load",
    "unload",
]


@magics_class
class AutogradMagics(Magics):
    """Magics that differentiate a cell of ordinary Python."""

    shell: InteractiveShell  # (registered with a shell: never None here)

    @no_var_expand  # the line is Python (%autograd {'a': x}['a'] * 2), as %time's is
    @line_cell_magic
    def autograd(self, line, cell=None):
        """Run a cell of plain Python with its numbers graph nodes, then backward().

        Every float is a node, and every int the cell names as an input outside
        a function (n = 3); other ints are data (counts, indices, arguments).
        The numbers are still numbers (float and int subclasses): the cell
        computes, prints and raises as plain Python; %time, !cmd and
        %matplotlib lines work. The cell's last expression (or the name its
        last statement assigns, or -t NAME) is the target. Returns a Trace of
        the run: .value, .grads, .nodes (with -q it returns None; the Trace is
        in gradmagic.last). Numbers the cell reads from the namespace enter as
        fresh leaves, those in the lists, dicts and objects it reads too; numbers
        it keeps in containers and objects are inputs named by their paths
        (gradmagic.last.grads["n.w[0]"], gradmagic.last.grads_of("n.w")).
        Names bound to the graph's float and array nodes stay bound to them, so
        x.grad works after the cell; every other number, at any depth, is plain
        again (an int, a numpy scalar). A cell whose value is not differentiable
        shows it as plain Python does, with a note. A cell whose value is an
        object of your own autograd engine (micrograd's Value, written in the
        notebook or imported) is differentiated at its .data, and each .grad your
        engine produced is judged against the true gradient
        (gradmagic.last.claims); a training loop over it shows its last step.
        Modules beside the notebook are followed as its cells are.
        A cell whose target is a PyTorch tensor runs unchanged,
        recorded with PyTorch as the engine. The display checks each input's gradient against a central finite
        difference (--eps); a big graph checks a seeded sample of its inputs one
        by one and all of them at once along a random direction, and says so.

        Cell form: %%autograd [options], the code below.
        Line form: %autograd [options] EXPRESSION
        """
        __tracebackhide__ = True
        if cell is None:
            option_text, source = _split_line(line)
            options = parse_options(option_text, self.shell.user_ns)
            if not source:
                raise UsageError(
                    "%autograd needs an expression to differentiate, "
                    f"e.g. %autograd a*b + c\n{_usage()}"
                )
            header = f"%autograd {line}".rstrip()
        else:
            options = parse_options(line, self.shell.user_ns)
            source, header = cell, f"%%autograd {line}".rstrip()
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
        ns = shell.user_ns
        if torchcell.wants_torch(python, ns):  # torch is the engine: run it plain, recorded
            make = functools.partial(
                torchcell.run,
                python,
                ns,
                options,
                filename=filename,
                first_line=first_line,
                compiler=shell.compile,
                global_ns=shell.user_global_ns,
                source_text=source,
            )
        else:
            try:
                cell = prepare(
                    python, ns, filename=filename, first_line=first_line, compiler=shell.compile
                )
                cell = dataclasses.replace(cell, source=source)  # the trace keeps the user's text
            except (SyntaxError, ValueError) as e:
                if isinstance(e, SyntaxError) and not cell_form:
                    _point_into(e, header, source)
                return self._fail(e, filename, whole_cell)
            make = functools.partial(execute, cell, ns, options, global_ns=shell.user_global_ns)
        try:
            trace = make()
        except NoTarget as e:  # the cell's value, as plain Python shows it, and a note
            if not options.quiet:
                print(f"%%autograd: {e}")
            return e.value if e.shown else None
        except (Exception, KeyboardInterrupt, GraphMemoryError) as e:  # from the user's line
            return self._fail(e, filename, whole_cell)
        session.last = trace
        return None if options.quiet else trace

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


# %%autograd? prints this: the usage, the docstring, every option (made from Options' fields)
AutogradMagics.autograd.__doc__ = help_text(inspect.cleandoc(AutogradMagics.autograd.__doc__ or ""))


def parse_options(text: str, ns=None) -> Options:
    """The :class:`Options` of an ``%%autograd`` line's option text; a UsageError if it is bad."""
    try:
        return Options.parse(text, ns)
    except OptionError as e:
        raise UsageError(f"{e}\n{_usage()}") from None


def _usage() -> str:
    """What a bad line is answered with after its reason: the usage line, as IPython's own
    magics answer (the whole help is ``%%autograd?``'s)."""
    return f"{usage_text()}\n(%%autograd? describes every option)"


def _point_into(error: SyntaxError, header: str, source: str) -> None:
    """Make a line-form syntax error point into the ``%autograd ...`` line."""
    shift = header.rfind(source)
    if error.offset is not None and shift >= 0:
        error.offset += shift
        if error.end_offset:
            error.end_offset += shift
    error.text = header


# --------------------------------------------------------------------------- option text
_TOKEN = re.compile(r"""\s*((?:[^\s"']+|"[^"]*"|'[^']*')+)""")
# the magic's options: switches take no value, the others one
_FLAGS = frozenset(flag for spec in option_specs() if spec.type is bool for flag in spec.flags)
_VALUED = frozenset(flag for spec in option_specs() for flag in spec.flags) - _FLAGS


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
