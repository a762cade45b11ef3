"""grade(): a cell's source run (in the sandbox, a plain child or this process) and judged
against the grader's expected answers, read once as plain numbers."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from ..analysis.options import DEFAULTS, Options
from . import _sandbox
from ._collect import _run_isolated, collect
from ._judging import FEEDBACK, GradeReport, _MAX_TEXT, _judge, clean
from ._sandbox import SandboxUnavailable

TIMEOUT = 10.0
"""Default wall-clock limit of one isolated run, in seconds (start-up included)."""

MEMORY = 1024
"""Default memory limit of one isolated run, in MiB (each process's address space, and in
the sandbox the memory all its processes hold together)."""

PROCESSES = 32
"""Default limit of processes (and threads) in the sandbox, the cell's own included."""

OUTCOMES = ("pass", "wrong", "error", "timeout", "memory", "crash")
"""What :attr:`GradeReport.outcome` can be."""


def grade(
    source: str,
    expected=None,
    *,
    atol: float = DEFAULTS.atol,
    rtol: float = DEFAULTS.rtol,
    target: str | None = None,
    namespace: dict | None = None,
    timeout: float | None = TIMEOUT,
    memory: int | None = MEMORY,
    processes: int = PROCESSES,
    isolate: bool = True,
    sandbox: bool = True,
    raise_errors: bool = False,
    feedback: str = "full",
    files: Mapping | None = None,
) -> GradeReport:
    """Run ``source`` under ``%%autograd``'s rewrite and judge it: a :class:`GradeReport`
    (kind ``"expect"``; print it, or call ``assert_passed()`` in a test cell). It never
    raises for anything the cell does; a mistake of the grader's raises at once.

    - ``source``: the cell's code; a first line ``%%autograd -t NAME`` may name the target
      (its other options are ignored; line numbers count it).
    - ``expected``: ``{"a": 6, "b": -4, "L.data": -8}`` (gradients by node name, ``"a"`` or
      ``"a.grad"``; values, ``"L.data"``), (name, number) pairs or ``"a=6, b=-4"``, read
      once as floats or float arrays before the cell runs. When the cell's value is an
      object of the student's own autograd engine, each ``.grad`` it left is judged too,
      against the true gradient (rows ``"a.grad"``); None grades only those.
    - ``atol``, ``rtol``: an answer is right if ``|got - expected| <= atol + rtol*|expected|``.
    - ``target``: the variable to differentiate (default: as the magic chooses).
    - ``namespace``: names the source may read (isolated: a pickled copy; else this dict).
    - ``timeout`` (seconds, 10), ``memory`` (MiB of each process and of the sandbox's
      together, 1024), ``processes`` (32): the isolated run's limits; None for none.
    - ``isolate``, ``sandbox``: a fresh child in the bubblewrap sandbox (the default;
      :class:`SandboxUnavailable` where none can be made), a plain child as the grader's
      user (``sandbox=False``), or this process (``isolate=False``: no limits, **unsafe
      for untrusted code**).
    - ``raise_errors``: re-raise the cell's exception (needs ``isolate=False``).
    - ``feedback``: ``"full"``, or ``"verdicts"`` (each answer's verdict, the expected
      values left out everywhere the report is shown).
    - ``files``: the student's own modules beside the notebook, by their paths
      (``{"engine.py": text, "cs231n/layers.py": text}``): the cell runs in a folder that
      holds them, imports them from there and follows them as the student's own code (an
      engine class of theirs is judged as one the cell defines).
    """
    pairs = [] if expected is None else _expected(expected)
    source, target = _arguments(source, target, atol, rtol, timeout, memory, processes)
    _options(namespace, feedback, sandbox, isolate, raise_errors)
    files = _files(files)
    names = _names(pairs)
    if not isolate:
        ns = {"__name__": "__main__"} if namespace is None else namespace
        data = collect(source, names, ns, target, raise_errors, files=files)
        how = {"sandboxed": False, "how": "in the grader's own process", "limits": {}}
        return _judge(data, pairs, source, atol, rtol, timeout, memory, how, feedback)
    job = (source, names, target, namespace, timeout, memory, processes, sandbox, files)
    data = _run_isolated(*job)
    how = _how(sandbox, timeout, memory)
    report = _judge(data, pairs, source, atol, rtol, timeout, memory, how, feedback)
    if not sandbox:
        report.notes.append("Not sandboxed (sandbox=False): the cell ran as the grader's user.")
    return report


def _arguments(source, target, atol, rtol, timeout, memory, processes) -> tuple:
    """Plain copies of ``source`` and ``target`` (no method of a str subclass runs in the
    grader, its pickling neither); raises for a bad argument, as the magic does."""
    if not isinstance(source, str):
        raise TypeError(f"source must be the cell's code as a str, got {_type_name(source)}")
    if target is not None and not isinstance(target, str):
        raise TypeError(f"target must be a variable's name, got {_type_name(target)}")
    target = None if target is None else str.__str__(target)
    Options(atol=atol, rtol=rtol, target=target)
    if timeout is not None and not (_number(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    if memory is not None and not (_number(memory) and memory >= 64):
        raise ValueError(f"memory must be a number of MiB >= 64 or None, got {memory!r}")
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 4:
        raise ValueError(f"processes must be a whole number >= 4, got {processes!r}")
    return str.__str__(source), target


def _options(namespace, feedback, sandbox, isolate, raise_errors) -> None:
    """Raise for a bad choice of how to run and report, or a sandbox that cannot be made."""
    if namespace is not None and not isinstance(namespace, dict):
        raise TypeError(f"namespace must be a dict, got {type(namespace).__name__}")
    if feedback not in FEEDBACK:
        raise ValueError(f"feedback must be one of {FEEDBACK}, got {feedback!r}")
    if sandbox not in (True, False):
        raise TypeError(f"sandbox must be True or False, got {sandbox!r}")
    if not isolate:
        return
    if raise_errors:
        raise ValueError(
            "raise_errors=True needs isolate=False: an exception of the "
            "cell cannot cross from the process that runs it"
        )
    why = _sandbox.unavailable() if sandbox else None
    if why is not None:
        raise SandboxUnavailable(
            f"grade() cannot make a sandbox for the cell: {why}. To run it in a plain child "
            f"process instead (no sandbox: the cell can read and write whatever this user "
            f"can), pass sandbox=False."
        )


MOST_FILES = 256
"""The most module files ``grade(files=...)`` takes, together at most ``FILE_BYTES``."""
FILE_BYTES = 16 << 20


def _files(files) -> dict:
    """``files`` as a plain ``{relative path: text}``; raises for anything else: a path that
    leaves the folder, a file that is not a ``.py`` module, too many or too large files."""
    if files is None:
        return {}
    if not isinstance(files, Mapping):
        raise TypeError(f"files must be a dict of path -> source text, got {_type_name(files)}")
    out = {}
    for path, text in dict(files).items():
        if type(path) is not str or type(text) is not str:
            raise TypeError("files must map each path (a str) to the module's text (a str)")
        parts = path.replace("\\", "/").split("/")
        if not path.endswith(".py") or path.startswith("/") or {"", ".", ".."} & set(parts):
            raise ValueError(
                f"a file of files must be a .py module inside the notebook's folder, "
                f"given by its relative path (cs231n/layers.py), got {path!r}"
            )
        out["/".join(parts)] = text
    if len(out) > MOST_FILES or sum(len(t.encode()) for t in out.values()) > FILE_BYTES:
        raise ValueError(f"files takes at most {MOST_FILES} modules of 16 MiB together")
    return out


def _how(sandbox: bool, timeout, memory) -> dict:
    """The report's ``sandbox``: how the cell ran, which limits held, and how the memory of
    all its processes together was bounded."""
    cgroup = sandbox and memory is not None and _sandbox.cgroup_parent() is not None
    limits = {
        "time": timeout is not None,
        "memory_per_process": memory is not None,
        "memory_total": sandbox and memory is not None,
        "memory_kernel_accounted": cgroup,
        "processes": sandbox,
        "file_size": True,
        "tmp_size": sandbox,
        "system_calls": sandbox and _sandbox.filter_known(),
    }
    how = (
        "bubblewrap: namespaces of its own, an unprivileged user, read-only Python "
        "and gradmagic, a private /tmp, a system-call filter"
        if sandbox
        else "a child process without a sandbox (it could reach what the grader's user can)"
    )
    if not (sandbox and memory is not None):
        total = "not bounded"
    elif cgroup:
        total = "a memory cgroup: the kernel's own accounting"
    else:
        total = (
            "sampled every 50 ms (no memory cgroup can be made here): the processes' "
            "memory and the sandbox's files, not the kernel's memory the cell causes"
        )
    return {"sandboxed": sandbox, "how": how, "limits": limits, "memory_total": total}


def _number(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def _expected(expected) -> list:
    """The grader's expected answers as (name, plain number) pairs; raises for bad input.

    Each answer becomes a float or a float array here, once, from plain data only (the
    built-in numbers, lists and tuples of them, numpy's own arrays and scalars, torch
    tensors read without their methods): no method of an object of any other type is ever
    called, so answers a student's code made cannot run code in the grader. Anything else
    stays as a text that says so (its row is an error).
    """
    if type(expected) is str:
        from ..notebook.magic import parse_expect

        expected = parse_expect(expected, {})
    if type(expected) in (dict, OrderedDict):
        items = list(dict.items(expected))
    elif type(expected) in (list, tuple):
        items = [_pair(p) for p in expected]
    elif isinstance(expected, (Mapping, list, tuple)):  # a subclass: its methods are not called
        return [("answers", f"answers given as a {_type_name(expected)}, not a plain dict")]
    else:
        raise TypeError(
            "expected answers must be a dict, (name, expected) pairs or text, "
            f"got {_type_name(expected)}"
        )
    if not items:
        raise ValueError("grade() needs at least one expected answer")
    return [(_text_of(name), _plain_answer(want)) for name, want in items]


def _pair(pair) -> tuple:
    if type(pair) not in (list, tuple) or len(pair) != 2:
        raise TypeError(
            f"expected answers as pairs need (name, expected), got a {_type_name(pair)}"
        )
    return pair[0], pair[1]


_NUMPY_SCALARS = frozenset(
    t for t in set(np.sctypeDict.values()) if issubclass(t, (np.number, np.bool_))
)


def _plain_answer(want):
    """A float, a float array, or a text (why it is not a number)."""
    if type(want) is str:
        return clean(want)[:_MAX_TEXT]
    from ..notebook.expect import tensor_numbers

    try:  # a torch tensor: its own numbers (none of a subclass's methods is called)
        numbers = tensor_numbers(want)
    except ValueError as e:
        return clean(str(e))[:_MAX_TEXT]
    if numbers is not None:
        want = numbers
    elif not _plain(want, 0):
        return f"a {_type_name(want)} is not a plain number"
    try:
        with np.errstate(all="ignore"):
            array = np.array(want, dtype=float)
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        # never a number's text alone: the text of 10**400 would read as inf
        if type(want) is int:
            return f"int {_digits(want)} (past a float's range)"
        return f"a {_type_name(want)} that is not a number or an array of them"
    return float(array) if array.ndim == 0 else array


def _digits(n: int) -> str:
    try:
        text = str(n)
    except ValueError:  # more digits than Python writes out
        return f"of {n.bit_length()} bits"
    return text if len(text) <= 24 else text[:20] + "..."


def _plain(x, depth: int) -> bool:
    """True if ``x`` is built-in numbers (in lists and tuples) or numpy's own numbers."""
    kind = type(x)
    if kind in (int, float, bool) or kind in _NUMPY_SCALARS:
        return True
    if kind is np.ndarray:
        return x.dtype.kind in "biuf"
    if kind in (list, tuple) and depth < 32 and len(x) <= 1 << 24:
        return all(_plain(v, depth + 1) for v in x)
    return False


def _type_name(x) -> str:
    """The name of ``x``'s type, read without any code of that type (or its metaclass)."""
    name = type.__dict__["__name__"].__get__(type(x))
    return clean(name)[:100]


def _text_of(name) -> str:
    if type(name) is not str:
        name = f"({_type_name(name)})" if type(name) not in (int, float) else repr(name)
    return clean(name)[:_MAX_TEXT]


def _names(pairs) -> list:
    """The node names the run must report: each key, and each key without .data/.grad."""
    names = []
    for key, _ in pairs:
        for name in (key, key.rpartition(".")[0] if key.endswith((".data", ".grad")) else key):
            if name and name not in names:
                names.append(name)
    return names
