"""The run of ``%%autograd`` without the magic: for scripts, tests and marimo.

:func:`autograd` is a function transformation in the manner of ``jax.grad`` or
HIPS autograd's ``grad``: ``autograd(f)`` returns a function that takes ``f``'s
inputs and returns a :class:`Run`, the same run the magic makes of a cell that
calls ``f`` (the same rewrite, the same engine, the same trace, check and view)::

    run = autograd(loss)(w=0.5, b=-1.0)
    run.value, run.grads["w"], run.check().passed

``autograd`` also takes a cell's source instead of a function; its inputs are
then the names the cell reads::

    run = autograd("L = (a*b + 10.0) * -2.0")(a=2.0, b=-3.0)

Code that uses PyTorch (it imports torch, or reads a tensor, a module or torch itself) is
recorded as the magic records a PyTorch cell: run unchanged, with torch as the engine, its
run a :class:`~gradmagic.analysis.torchrun.TorchRun` (``run.trace``).

A :class:`Run` shows as the magic's view in Jupyter (no ``%load_ext`` needed)
and in marimo, where ``run.view()`` is the view's anywidget
(``mo.ui.anywidget(run.view())``).
"""

from __future__ import annotations

import ast
import functools
import inspect
import keyword
import linecache
import textwrap
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..analysis.options import DEFAULTS, Options
from ..analysis.trace import Trace
from . import boundary, session, torchcell
from .magic import NoTarget, execute, prepare, user_traceback

__all__ = ["autograd", "Run"]


class Run:
    """One run: its :class:`~gradmagic.analysis.trace.Trace` and the view of it.

    ``value``, ``grads``, ``values``, ``nodes``, ``node()``, ``check()``,
    ``expect()`` and ``jvp()`` are the trace's. ``view()`` is the live view
    (an anywidget); in Jupyter and marimo a Run shows as the magic's output.

    For code that uses PyTorch, ``trace`` is the
    :class:`~gradmagic.analysis.torchrun.TorchRun` the magic makes of a PyTorch cell, and
    its names are that run's: ``value``, ``grads`` (numpy arrays), ``grads_of()``,
    ``node()``, ``check()`` and ``expect()``.
    """

    __slots__ = ("trace", "__weakref__")

    def __init__(self, trace: Trace):
        self.trace = trace

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.trace, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | {n for n in dir(self.trace) if n[0] != "_"})

    def __repr__(self) -> str:
        return f"Run({self.trace!r})"

    @property
    def is_torch(self) -> bool:
        """True when the run is a PyTorch run (torch was the engine)."""
        return not isinstance(self.trace, Trace)

    def view(self):
        """The live view of this run: an anywidget (``mo.ui.anywidget(run.view())`` in marimo)."""
        from ..views.widget import live_view

        return live_view(self.trace)

    def _repr_mimebundle_(self, include=None, exclude=None):
        # the magic's display: the live view and its static copy in one bundle
        from ..views.widget import mimebundle

        return mimebundle(self.trace)

    def _display_(self):
        # marimo shows what this returns: the view's anywidget, wrapped as marimo wraps one
        import marimo as mo

        return mo.ui.anywidget(self.view())


def autograd(
    fn: Callable | str,
    *,
    target: str | None = DEFAULTS.target,
    check: bool = not DEFAULTS.no_check,
    eps: float = DEFAULTS.eps,
    atol: float = DEFAULTS.atol,
    rtol: float = DEFAULTS.rtol,
    expect: Mapping | str | None = DEFAULTS.expect,
    torch: bool = DEFAULTS.torch,
    rankdir: str | None = DEFAULTS.rankdir,
    max_nodes: int = DEFAULTS.max_nodes,
    max_memory: float | None = DEFAULTS.max_memory,
) -> Callable[..., Run]:
    """``autograd(f)(*args, **kwargs)``: run ``f`` as ``%%autograd`` runs a cell; a :class:`Run`.

    ``fn`` is a function or the source of a cell. A function's own source is rewritten as
    the magic rewrites a cell's (its literals and ``math`` calls join the graph) and called
    with the inputs; the graph's leaves are named after its parameters (``w``, ``b``) and
    after the numbers it reads from its module. Its decorators are not applied again
    (``@autograd`` above it must not be). A lambda, or a function whose source cannot be
    read (a builtin, one typed in a plain interpreter), is called as it is: its inputs are
    still nodes, its own literals are constants. A cell's source is run in a fresh namespace
    holding the keyword arguments; its last expression (or ``target``) is differentiated.

    The keywords are the magic's options (see ``%%autograd?``): ``target``
    (``-t``), ``check=False`` (``--no-check``), ``eps``, ``atol``, ``rtol``,
    ``expect`` (a mapping such as ``{"a": 6, "L.data": -8}`` or the magic's
    text ``"a=6, L.data=-8"``), ``torch``, ``rankdir``, ``max_nodes``, ``max_memory``;
    their defaults are the magic's (``rankdir=None``: the view picks the direction).

    The inputs are never changed: the run works on copies of the numbers.
    Raises what the function raises, ``ValueError`` for a bad option value (``TypeError``
    for one of the wrong type), and ``TypeError`` for inputs that do not fit the function
    or a run that leaves nothing to differentiate.

    >>> run = autograd(lambda x: x * x + 1.0)(3.0)
    >>> run.value, run.grads["x"]
    (10.0, 6.0)
    """
    if not isinstance(check, bool):
        raise TypeError(f"check must be True or False, got {type(check).__name__}")
    options = Options(
        target=target,
        no_check=not check,
        eps=eps,
        atol=atol,
        rtol=rtol,
        expect=expect,  # type: ignore[arg-type]  # a text is read as --expect's (Options' check)
        rankdir=rankdir,
        max_nodes=max_nodes,
        max_memory=max_memory,
        torch=torch,
        quiet=True,
    )
    if isinstance(fn, str):
        return _cell_runner(fn, options)
    if not callable(fn):
        raise TypeError(f"autograd needs a function or a cell's source, got {type(fn).__name__}")
    return _function_runner(fn, options)


def _cell_runner(source: str, options: Options) -> Callable[..., Run]:
    filename = _remember(source, "cell")

    def run(**inputs) -> Run:
        ns = {"__name__": "__main__", **inputs}
        return _run(source, ns, options, filename)

    return run


def _function_runner(fn: Callable, options: Options) -> Callable[..., Run]:
    signature = _signature(fn)
    name = getattr(fn, "__name__", "f")
    defined = _definition(fn)
    reads = _module_names(fn, defined)

    @functools.wraps(fn)
    def run(*args, **kwargs) -> Run:
        try:
            bound = signature.bind(*args, **kwargs) if signature else None
        except TypeError as e:
            raise TypeError(f"{name}(): {e}") from None
        if bound is not None:
            bound.apply_defaults()
            _unshared(bound.arguments)
        module = getattr(fn, "__globals__", {})
        ns = {k: module[k] for k in reads if k in module}  # a copy: the module is left as it was
        ns.update(_closure(fn))
        if (
            defined is not None
            and signature is not None
            and bound is not None
            and defined[0] not in signature.parameters
        ):
            fname, code, line, before = defined
            ns.update(_default_names(fn, code))
            ns.update(bound.arguments)
            # the value is bound to the function's name: the target is drawn as "loss = ..."
            source = f"{code}{fname} = {fname}({_call_text(signature, bound)})\n"
            filename = _remember(source, fname, before)
            return _zeros(_run(source, ns, options, filename, first_line=line), bound.arguments)
        # called as it is: the inputs are nodes, the function's own text is not rewritten
        named = name if name.isidentifier() and not keyword.iskeyword(name) else "result"
        if signature is not None and named in signature.parameters:
            named = "__gradmagic_result__"
        if signature is not None and bound is not None:
            ns.update(bound.arguments)
            call = f"{_FN}({_call_text(signature, bound)})"
        else:
            ns[_ARGS], ns[_KWARGS] = args, kwargs
            call = f"{_FN}(*{_ARGS}, **{_KWARGS})"
        ns[_FN] = fn
        source = f"{named} = {call}\n"
        run = _run(source, ns, options, _remember(source, name))
        return run if bound is None else _zeros(run, bound.arguments)

    return run


_FN, _ARGS, _KWARGS = "__gradmagic_fn__", "__gradmagic_args__", "__gradmagic_kwargs__"


def _unshared(arguments: dict) -> None:
    """Each parameter its own input, as in autograd: a number or array passed for two
    parameters (``f(a, a)``) is copied for the second, which would otherwise share the
    first's leaf (its gradient, the sum of both, shown under one name only)."""
    seen: set = set()
    for name, value in arguments.items():
        if id(value) in seen:
            if type(value) is float:
                arguments[name] = float.fromhex(value.hex())  # (a new float object)
            elif isinstance(value, (np.ndarray, np.generic)):
                arguments[name] = value.copy()
        seen.add(id(arguments[name]))


def _zeros(run: Run, arguments: dict) -> Run:
    """``run``, its gradients holding 0 for each number the arguments hold that does not
    reach the target (as autograd gives it), named by its path (``x``, ``xs[1]``)."""
    if isinstance(run.trace, Trace):
        named = run.trace._named()  # (the labels grads has, with no gradient read)
        stack = list(arguments.items())
        while stack:
            path, value = stack.pop()
            if type(value) in (list, tuple):
                stack += [(f"{path}[{i}]", v) for i, v in enumerate(value)]
            elif type(value) is dict:
                stack += [(f"{path}[{k!r}]", v) for k, v in value.items()]
            elif path not in named and _real(value):
                run.trace.zero_grads[path] = np.zeros_like(value) if np.ndim(value) else 0.0
    return run


def _real(value) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype.kind == "f"
    return type(value) is float or isinstance(value, np.floating)


def _run(source: str, ns: dict, options: Options, filename: str, first_line: int = 1) -> Run:
    __tracebackhide__ = True
    try:
        if torchcell.wants_torch(source, ns):  # torch is the engine: run as it is, recorded
            trace = torchcell.run(source, ns, options, filename=filename, first_line=first_line)
        else:
            trace = execute(
                prepare(source, ns, filename=filename, first_line=first_line), ns, options
            )
    except NoTarget as e:
        raise TypeError(f"nothing to differentiate: {e}") from None
    except Exception as e:  # the user's frames only, as the magic shows them
        raise e.with_traceback(user_traceback(e.__traceback__, filename)) from None
    session.last = trace
    return Run(trace)


def _signature(fn) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have none
        return None


def _definition(fn) -> tuple[str, str, int, list[str]] | None:
    """``fn``'s own ``def``, without its decorators: (name, text, line, the file's lines).

    ``line`` is the number of the ``def`` line in ``fn``'s file, so tracebacks and the
    places of cuts give the file's own line numbers. None for what has no ``def`` of its own
    to rewrite: a lambda, a builtin, a function whose source is not on disk.
    """
    if not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
        return None
    try:
        lines, start = inspect.getsourcelines(fn)
        file_lines = linecache.getlines(inspect.getsourcefile(fn) or "")
        text = textwrap.dedent("".join(lines))
        tree = ast.parse(text)
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__:
        return None
    start = max(start, 1)
    body = text.splitlines(True)[node.lineno - 1 :]  # from the def line: no decorators
    line = start + node.lineno - 1
    return node.name, "".join(body), line, file_lines[: line - 1]


def _default_names(fn, code: str) -> dict:
    """The defaults that are a name (``def f(x, r=red)``), by that name: the ``def`` is run
    again where the name may not be (a local of the function that made ``fn``)."""
    positional, keywords = _named_defaults(code)
    values = fn.__defaults__ or ()
    found = {name: values[k] for name, k in positional if k < len(values)}
    found.update((name, (fn.__kwdefaults__ or {}).get(arg)) for name, arg in keywords)
    return found


@functools.lru_cache(maxsize=256)
def _named_defaults(code: str) -> tuple[tuple, tuple]:
    """Of the ``def`` in ``code``: (name, position) of each positional default that is a name,
    (name, parameter) of each keyword-only one (parsed once per text)."""
    args = ast.parse(code).body[0].args  # type: ignore[attr-defined]
    positional = tuple((d.id, k) for k, d in enumerate(args.defaults) if isinstance(d, ast.Name))
    keywords = tuple(
        (d.id, a.arg) for a, d in zip(args.kwonlyargs, args.kw_defaults) if isinstance(d, ast.Name)
    )
    return positional, keywords


def _module_names(fn, defined) -> frozenset:
    """The names of its module ``fn`` can read: those of its code (and of the code inside it),
    of its ``def`` (defaults, annotations) and the module's dunder names. The run's namespace
    holds these alone, so its cost does not grow with the module's other names."""
    code = getattr(fn, "__code__", None)
    names = boundary.global_names(code) if isinstance(code, types.CodeType) else set()
    if defined is not None:
        names.update(n.id for n in ast.walk(ast.parse(defined[1])) if isinstance(n, ast.Name))
    names.update(k for k in getattr(fn, "__globals__", {}) if k.startswith("__"))
    return frozenset(names)


def _closure(fn) -> dict:
    """The values of ``fn``'s free variables, by name (empty cells left out)."""
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    out = {}
    for name, cell in zip(code.co_freevars if code else (), cells):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    return out


def _call_text(signature: inspect.Signature, bound: inspect.BoundArguments) -> str:
    parts = []
    for name, p in signature.parameters.items():
        if name not in bound.arguments:
            continue
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            parts.append(name)  # in order, before any *args
        elif p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{name}")
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{name}")
        else:
            parts.append(f"{name}={name}")
    return ", ".join(parts)


def _remember(source: str, name: str, before: list[str] | None = None) -> str:
    """A file name for ``source`` (after the lines ``before`` it) that tracebacks can show."""
    filename = f"<gradmagic.autograd {name}>"
    lines = [*(before or ()), *source.splitlines(True)]
    if linecache.cache.get(filename, ())[2:3] != (lines,):  # (a run again: its lines are there)
        linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    return filename
