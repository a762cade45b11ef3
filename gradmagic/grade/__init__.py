"""Grading hand-derived gradients without a notebook display: :func:`grade`.

``grade(source, expected)`` runs a cell's source the way ``%%autograd`` does
(the same rewrite and engine, :func:`gradmagic.notebook.magic.prepare` and
:func:`~gradmagic.notebook.magic.execute`), compares the gradients and values named in
``expected`` and returns a :class:`GradeReport` (a
:class:`~gradmagic.analysis.check.CheckReport` with an ``outcome``), with
``.passed``, ``.rows``, ``to_dict()`` and ``assert_passed()``.

Isolation. By default the source runs in a sandbox: a fresh ``python -I`` process
under bubblewrap, in namespaces of its own (PID, network, IPC; a user namespace or
a uid of its own), as an unprivileged user, seeing read-only only the Python
installation, its environment and gradmagic, with a private ``/tmp``, under limits
of wall-clock time, memory (each process, and all its processes together), number of
processes and file size. Whatever it starts ends with it. That process learns the
source, the names asked about and the target, never the expected numbers or the
tolerances; it sends back plain data (each named node's value and gradient, or the
error with its line, and the notes) over a pipe. The grader's process checks that
data and builds and judges the report itself, so nothing the student's code does
(patching gradmagic, numpy or builtins, exiting, interrupting, looping, forking)
can change how it is judged, and no submission can leave anything behind for the
next one. A student's code can still make its own process report whatever numbers
it likes, as it could by computing them; it cannot learn the expected answers from
the grader. ``docs/grading.md`` has the threat model.

Where no sandbox can be made (no bubblewrap, namespaces forbidden, not Linux),
:func:`grade` raises :class:`SandboxUnavailable`; ``sandbox=False`` runs the same
child process without the sandbox (its own process group and rlimits only: it can
read and write whatever the grader's user can), and the report says so.
``isolate=False`` runs the source in the grader's own process instead (faster, and
the ``namespace`` given is changed as a notebook's would be); it is unsafe for
untrusted code and has no time or memory limit.

It is made for autograders, which score a test cell by what it shows:

* nothing reaches stderr (nbgrader scores a cell that writes to stderr 0):
  what the cell prints is dropped, and what it writes to stderr and the
  warnings it raises become notes of the report (control characters removed);
* the report's text never reads as a bare number (nbgrader would take a
  number for partial credit) and is the same every time;
* whatever the student's code does, ``grade()`` returns a failing report that
  says why: a wrong answer, an error on the student's line, a timeout, running
  out of memory, or a crash of the process that ran it.

Mistakes of the grader's own (expected answers that are not a mapping,
negative tolerances, bad limits) raise at once, before the cell runs.
"""

from __future__ import annotations

import math

import numpy as np

from ..analysis.check import expected_pairs
from ..analysis.options import DEFAULTS, Options
from . import _sandbox
from ._sandbox import SandboxUnavailable
from ._collect import FILENAME, _cut, _run_isolated, collect
from ._judging import GradeReport, _MAX_TEXT, _judge, clean


__all__ = [
    "grade",
    "GradeReport",
    "SandboxUnavailable",
    "FILENAME",
    "TIMEOUT",
    "MEMORY",
    "PROCESSES",
    "OUTCOMES",
]


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
    expected,
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
) -> GradeReport:
    """Run ``source`` under ``%%autograd``'s rewrite and check the named answers.

    Parameters
    ----------
    source:
        The cell's code. A first line ``%%autograd ...`` is allowed (its
        ``-t NAME`` names the target unless ``target`` is given; its other
        options are ignored); line numbers in messages count it.
    expected:
        ``{"a": 6, "b": -4, "L.data": -8}``: gradients of the target by node
        name (``"a"`` or ``"a.grad"``) and values (``"L.data"``); also a list of
        (name, number) pairs or the text ``"a=6, b=-4"``. The numbers are read
        once, as floats (or float arrays), before the cell runs.
    atol, rtol:
        An answer is correct if ``|got - expected| <= atol + rtol * |expected|``
        (the defaults are ``%%autograd``'s).
    target:
        The variable to differentiate (default: the cell's last expression,
        or the name its last statement assigns, as in the magic).
    namespace:
        Names the source may read (default none, so the source must import
        what it uses). Isolated, a pickled copy is sent to the fresh process and
        the dict is not changed; with ``isolate=False`` the source runs in this
        very dict, which is changed as a notebook's would be.
    timeout:
        Wall-clock limit in seconds for the isolated run, start-up included
        (default 10 s, far more than a textbook cell needs); None for no limit.
        A cell that runs longer is stopped and fails with outcome ``"timeout"``.
    memory:
        Memory limit of the isolated run in MiB (default 1024): the address
        space of each process, and in the sandbox the memory all its processes
        hold together; None for no limit. A cell that needs more fails with
        outcome ``"memory"``.
    processes:
        How many processes (threads included) the sandbox may hold at once
        (default 32); a fork bomb gets errors, not the machine.
    isolate:
        True (default): run in a fresh child process, as described in the
        module's docstring. False: run in this process, with no time or memory
        limit; **unsafe for untrusted code** (the code can change gradmagic,
        this process and the reports of later calls).
    sandbox:
        True (default): the child runs in the bubblewrap sandbox; if none can be
        made here, :class:`SandboxUnavailable` is raised before anything runs.
        False: the child runs without it, as the grader's user, and the report's
        ``sandbox`` says so; only for code you trust.
    raise_errors:
        Re-raise an exception of the cell instead of reporting it; needs
        ``isolate=False`` (an exception cannot cross the process boundary).

    Returns
    -------
    GradeReport
        Of kind ``"expect"``; print it for the text form, or call
        ``assert_passed()`` in a test cell. It never raises for anything the
        cell does.
    """
    pairs = _expected(expected)
    Options(atol=atol, rtol=rtol, target=target)  # the magic's checks of these options
    if not isinstance(source, str):
        raise TypeError(f"source must be the cell's code as a str, got {type(source).__name__}")
    if timeout is not None and not (_number(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    if memory is not None and not (_number(memory) and memory >= 64):
        raise ValueError(f"memory must be a number of MiB >= 64 or None, got {memory!r}")
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 4:
        raise ValueError(f"processes must be a whole number >= 4, got {processes!r}")
    if namespace is not None and not isinstance(namespace, dict):
        raise TypeError(f"namespace must be a dict, got {type(namespace).__name__}")
    if sandbox not in (True, False):
        raise TypeError(f"sandbox must be True or False, got {sandbox!r}")
    names = _names(pairs)
    if isolate:
        if raise_errors:
            raise ValueError(
                "raise_errors=True needs isolate=False: an exception of the "
                "cell cannot cross from the process that runs it"
            )
        if sandbox:
            why = _sandbox.unavailable()
            if why is not None:
                raise SandboxUnavailable(
                    f"grade() cannot make a sandbox for the cell: {why}. To run it in a "
                    f"plain child process instead (no sandbox: the cell can read and write "
                    f"whatever this user can), pass sandbox=False."
                )
        data = _run_isolated(source, names, target, namespace, timeout, memory, processes, sandbox)
        how = _how(sandbox, timeout, memory)
    else:
        ns = {"__name__": "__main__"} if namespace is None else namespace
        data = collect(source, names, ns, target, raise_errors)
        how = {"sandboxed": False, "how": "in the grader's own process", "limits": {}}
    report = _judge(data, pairs, source, atol, rtol, timeout, memory, how)
    if isolate and not sandbox:
        report.notes.append("Not sandboxed (sandbox=False): the cell ran as the grader's user.")
    return report


def _how(sandbox: bool, timeout, memory) -> dict:
    """The report's ``sandbox``: how the cell ran and which limits held."""
    limits = {
        "time": timeout is not None,
        "memory_per_process": memory is not None,
        "memory_total": sandbox and memory is not None,
        "processes": sandbox,
        "file_size": True,
        "tmp_size": sandbox,
    }
    how = (
        "bubblewrap: namespaces of its own, an unprivileged user, read-only Python "
        "and gradmagic, a private /tmp"
        if sandbox
        else "a child process without a sandbox (it could reach what the grader's user can)"
    )
    return {"sandboxed": sandbox, "how": how, "limits": limits}


def _number(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def _expected(expected) -> list:
    """The grader's expected answers as (name, plain number) pairs; raises for bad input.

    Each answer becomes a float or a float array here, once, so that judging never calls
    code of the answers' own types; one that is not a number stays as its text (its row
    is an error).
    """
    if isinstance(expected, str):
        from ..notebook.magic import parse_expect

        expected = parse_expect(expected, {})
    from ..notebook.expect import tensor_numbers

    pairs = []
    for name, want in expected_pairs(expected):
        try:  # a torch tensor: its own numbers (none of a subclass's methods is called)
            numbers = tensor_numbers(want)
        except ValueError as e:
            numbers = str(e)  # (its row is an error)
        pairs.append((name, want if numbers is None else numbers))
    if not pairs:
        raise ValueError("grade() needs at least one expected answer")
    return [(_text_of(name), _plain_answer(want)) for name, want in pairs]


def _plain_answer(want):
    if isinstance(want, str):
        return clean(want)[:_MAX_TEXT]
    try:
        with np.errstate(all="ignore"):
            array = np.array(want, dtype=float)
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        # kept as text that never reads as a number (the text of 10**400 would read as inf)
        try:
            return clean(f"{type(want).__name__} {_cut(repr(want))}")
        except Exception:  # noqa: BLE001 - an answer whose repr fails
            return type(want).__name__
    return float(array) if array.ndim == 0 else array


def _text_of(name) -> str:
    return clean(str(name))[:_MAX_TEXT]


def _names(pairs) -> list:
    """The node names the run must report: each key, and each key without .data/.grad."""
    names = []
    for key, _ in pairs:
        for name in (key, key.rpartition(".")[0] if key.endswith((".data", ".grad")) else key):
            if name and name not in names:
                names.append(name)
    return names
