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

import contextlib
import io
import math
import pickle
import re
import signal
import sys
import warnings

import numpy as np

from ..analysis.check import CheckReport, expect, expected_pairs, unanswered
from . import _sandbox
from ._sandbox import SandboxUnavailable

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

FILENAME = "<graded cell>"
"""The file name the graded source is compiled under (it shows in tracebacks)."""

TIMEOUT = 10.0
"""Default wall-clock limit of one isolated run, in seconds (start-up included)."""

MEMORY = 1024
"""Default memory limit of one isolated run, in MiB (each process's address space, and in
the sandbox the memory all its processes hold together)."""

PROCESSES = 32
"""Default limit of processes (and threads) in the sandbox, the cell's own included."""

OUTCOMES = ("pass", "wrong", "error", "timeout", "memory", "crash")
"""What :attr:`GradeReport.outcome` can be."""

_CHILD = _sandbox.CHILD
_NOTE_CHARS = 300  # at most this much of the cell's stderr in a note
_MAX_NOTES = 20  # notes kept from a run
_MAX_TEXT = 2000  # characters kept of any text the child sends


class GradeReport(CheckReport):
    """The report of :func:`grade`: an expect :class:`CheckReport` plus its ``outcome``.

    ``outcome`` is ``"pass"``, ``"wrong"`` (the cell ran; some answer is wrong
    or has no node), ``"error"`` (the cell does not compile, raised, or left
    nothing to differentiate; ``error`` names the student's line), ``"timeout"``,
    ``"memory"`` (out of memory) or ``"crash"`` (the process that ran it ended
    without a report). Only ``"pass"`` passes.

    ``sandbox`` says how the cell was run: ``{"sandboxed": bool, "how": str,
    "limits": {name: bool}}`` where ``limits`` says which limits held (``time``,
    ``memory_per_process``, ``memory_total``, ``processes``, ``file_size``,
    ``tmp_size``). ``to_dict()`` includes both.
    """

    outcome: str = "pass"
    sandbox: dict = {}

    @classmethod
    def of(cls, report: CheckReport, outcome: str, sandbox: dict | None = None) -> "GradeReport":
        new = cls.__new__(cls)
        new.__dict__.update(report.__dict__)
        new.outcome = outcome
        new.sandbox = sandbox or {}
        return new

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["outcome"] = self.outcome
        d["sandbox"] = self.sandbox
        return d


def grade(
    source: str,
    expected,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-3,
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
        (default 10 s; a textbook cell takes about 0.3 s); None for no limit.
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
    for name, x in (("atol", atol), ("rtol", rtol)):
        if not _number(x) or x < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
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
    pairs = [
        (
            name,
            want.detach().cpu().numpy()
            if hasattr(want, "detach") and hasattr(want, "__array__")
            else want,
        )
        for name, want in expected_pairs(expected)
    ]  # a torch tensor: its numbers
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


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """``text`` without control characters (escape sequences, carriage returns, bidi
    overrides), keeping newlines and tabs: what a submission writes cannot move the
    cursor, recolour or rewrite what the grader's terminal or log shows."""
    return _CONTROL.sub("", text)


def _names(pairs) -> list:
    """The node names the run must report: each key, and each key without .data/.grad."""
    names = []
    for key, _ in pairs:
        for name in (key, key.rpartition(".")[0] if key.endswith((".data", ".grad")) else key):
            if name and name not in names:
                names.append(name)
    return names


# =========================================================================== the run
def collect(
    source: str, names, ns: dict, target=None, raise_errors: bool = False, restore: bool = False
) -> dict:
    """Run ``source`` in ``ns`` and return what happened as plain (JSON-able) data.

    ``{"status": "ran", "target": ..., "branch_dependent": ..., "nodes": {name:
    {"index", "data", "grad"}}, "notes": [...]}`` for each of ``names`` that
    is a node, or ``{"status": "error", "error": {"kind", "type", "message",
    "line"}, "notes": [...]}``. This runs in the process that runs the
    student's code (the child, or the grader's with ``isolate=False``); the
    grader judges the data with :func:`_judge`. ``restore`` (the child) puts
    back ``builtins`` and ``sys.modules`` as they were once the cell has run, so
    that the data can still be gathered after a cell that broke them.
    """
    err = io.StringIO()
    after = _snapshot() if restore else None
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(err),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        data = _collect(source, names, ns, target, raise_errors, after)
    data["notes"] = data.get("notes", []) + _output_notes(err.getvalue(), caught)
    return data


def _collect(source, names, ns, target, raise_errors, after) -> dict:
    from ..notebook import torchcell
    from ..notebook.magic import NoTarget, execute, prepare

    try:
        body, first_line, line_target = _split_magic(source)
        if torchcell.wants_torch(body, ns):  # a PyTorch cell runs as itself, recorded
            return _collect_torch(body, first_line, names, ns, target or line_target, after)
        cell = prepare(body, ns, filename=FILENAME, first_line=first_line)
        trace = execute(cell, ns, {"target": target or line_target})
    except (NoTarget, torchcell.NoTensorTarget) as exc:
        if raise_errors:
            raise
        after and after()
        return {
            "status": "error",
            "error": {"kind": "notarget", "type": "NoTarget", "message": str(exc), "line": None},
        }
    except BaseException as exc:  # the student's code failed (or exited): report, don't crash
        if raise_errors:
            raise
        after and after()
        return {"status": "error", "error": _error_data(exc)}
    after and after()
    nodes = {}
    for name in names:
        try:
            node = trace.node(name)
        except KeyError:
            continue
        nodes[name] = {"index": node.index, "data": _plain(node.data), "grad": _plain(node.grad)}
    return {
        "status": "ran",
        "target": trace.target.name,
        "branch_dependent": bool(trace.branch_dependent),
        "nodes": nodes,
        "notes": list(trace.warnings),
    }


def _collect_torch(body, first_line, names, ns, target, after) -> dict:
    """:func:`_collect` for a PyTorch cell: the recorded values and gradients by name."""
    from ..analysis.options import Options
    from ..notebook import torchcell

    run = torchcell.run(
        body,
        ns,
        Options(target=target, no_check=True, quiet=True),
        filename=FILENAME,
        first_line=first_line,
    )
    after and after()
    nodes = {}
    for name in names:
        try:
            i = run.index(name)
        except KeyError:
            continue
        kept = run.full.get(i)
        if kept is not None:
            nodes[name] = {"index": i, "data": _plain(kept[0]), "grad": _plain(kept[1])}
    return {
        "status": "ran",
        "target": run.name_of(run.target),
        "branch_dependent": False,
        "nodes": nodes,
        "notes": list(run.warnings),
    }


def _snapshot():
    """A function that puts ``builtins`` and ``sys.modules`` back as they are now."""
    import builtins

    names, modules = dict(builtins.__dict__), dict(sys.modules)
    clear, update = dict.clear, dict.update

    def restore():
        clear(builtins.__dict__)
        update(builtins.__dict__, names)
        clear(sys.modules)
        update(sys.modules, modules)

    return restore


def _error_data(exc: BaseException) -> dict:
    if isinstance(exc, SyntaxError):
        return {
            "kind": "syntax",
            "type": "SyntaxError",
            "message": str(exc.msg),
            "line": exc.lineno,
        }
    try:
        message = str(exc).strip()
    except Exception:  # noqa: BLE001 - a student's exception whose str() fails
        message = "(its message could not be printed)"
    kind = "memory" if isinstance(exc, MemoryError) else "exception"
    return {"kind": kind, "type": type(exc).__name__, "message": message, "line": _line_of(exc)}


def _plain(x):
    """A node's data or grad as JSON data: a number, None, or {"shape", "values"}."""
    if isinstance(x, np.ndarray):
        return {"shape": list(x.shape), "values": np.asarray(x, dtype=float).ravel().tolist()}
    if isinstance(x, np.generic):
        x = x.item()
    if x is None or isinstance(x, (int, float)) and not isinstance(x, bool):
        return x if type(x) in (int, float) or x is None else float(x)
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _split_magic(source: str):
    """(body, its first line number, the -t of a leading ``%%autograd`` line or None)."""
    first, newline, body = source.partition("\n")
    if not first.lstrip().startswith("%%autograd"):
        return source, 1, None
    from ..notebook import magic

    options = first.lstrip()[len("%%autograd") :]
    try:
        args = magic.parse_argstring(magic.AutogradMagics.autograd, options)
        args.expect = None  # the student's own answers (a name in their notebook) are not graded
        target = magic.options_from(args, {}).target
    except Exception as exc:  # noqa: BLE001 - a UsageError: the student's line is wrong
        raise SyntaxError(
            f"the %%autograd line's options: {exc}", (FILENAME, 1, 1, first, None, None)
        ) from None
    return body, 2, target


def _line_of(exc: BaseException):
    """The line of the graded source where ``exc`` was raised (its last frame there)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _output_notes(stderr: str, caught) -> list:
    """Notes for what the cell wrote to stderr and the warnings it raised (once each)."""
    notes = []
    text = stderr.strip()
    if text:
        notes.append(f"The cell wrote to stderr: {_cut(text)}")
    seen = set()
    for w in caught:
        where = f" on line {w.lineno}" if w.filename == FILENAME else ""
        note = f"Warning{where}: {w.category.__name__}: {w.message}"
        if note not in seen:
            seen.add(note)
            notes.append(note)
    return notes


def _cut(text: str) -> str:
    return text if len(text) <= _NOTE_CHARS else text[:_NOTE_CHARS] + " ..."


# =========================================================================== the child
def _run_isolated(source, names, target, namespace, timeout, memory, processes, sandbox) -> dict:
    """Run the cell in a fresh ``python -I`` process (in the sandbox or not); its report
    as plain data, or ``{"status": "timeout" | "crash", ...}``."""
    ns_bytes = None
    if namespace:
        try:
            ns_bytes = pickle.dumps(namespace)
        except Exception as exc:  # noqa: BLE001 - the grader's namespace
            raise TypeError(
                f"an isolated grade() sends the namespace to a fresh "
                f"process, so it must pickle: {exc}"
            ) from None
    job = {
        "source": source,
        "names": list(names),
        "target": target,
        "namespace": ns_bytes,
        "memory": memory,
        "timeout": timeout,
        "processes": processes,
    }
    return _sandbox.run(job, timeout, sandbox)


# =========================================================================== judging
class _Reported:
    """The nodes a run reported, shaped as :func:`~gradmagic.analysis.check.expect` reads a
    Trace: ``node(name)`` (``.index``, ``.data``, ``.grad``), ``target.name``, ``branch_dependent``."""

    class _Node:
        __slots__ = ("index", "data", "grad", "name")

        def __init__(self, name, index, data, grad):
            self.name, self.index, self.data, self.grad = name, index, data, grad

    def __init__(self, nodes: dict, target: str, branch_dependent: bool):
        self._nodes = nodes
        self.target = self._Node(target, None, None, None)
        self.branch_dependent = branch_dependent

    def node(self, name: str):
        try:
            return self._nodes[name]
        except KeyError:
            raise KeyError(f"no node is labelled {name!r}") from None


class _Unreadable(Exception):
    """The child's data is not what a run reports."""


def _judge(
    data: dict, pairs, source: str, atol, rtol, timeout, memory, how: dict | None = None
) -> GradeReport:
    """Build and judge the report in the grader's process from a run's plain data.

    Never raises for anything in ``data``: what cannot be read is a crash, and arithmetic
    that fails on the reported numbers (a value past a float's range) is an error row.
    """
    try:
        status = data.get("status") if isinstance(data, dict) else None
        notes = _texts(data.get("notes", []))[:_MAX_NOTES] if status else []
        if status == "ran":
            reported = _Reported(
                _nodes(data.get("nodes")),
                _text(data.get("target", "")),
                data.get("branch_dependent") is True,
            )
            report = _expect(reported, pairs, atol, rtol)
            report.notes[:0] = notes
            outcome = "pass" if report.passed else "wrong"
        elif status == "error":
            error = data.get("error")
            if not isinstance(error, dict):
                raise _Unreadable
            outcome = "memory" if error.get("kind") == "memory" else "error"
            report = unanswered(pairs, _what_went_wrong(error, source, memory), atol, rtol)
            report.notes += notes
        elif status == "timeout":
            outcome = "timeout"
            report = unanswered(
                pairs,
                f"Stopped: the cell did not finish within the time limit of {timeout:g} s.",
                atol,
                rtol,
            )
        elif status == "crash":
            if data.get("memory_total") is True:
                outcome = "memory"
                why = (
                    f"The cell's processes together used more than the memory limit "
                    f"({memory:g} MiB); the sandbox was ended."
                )
            else:
                outcome, why = _crash(data.get("returncode"), data.get("stderr", ""), memory)
            report = unanswered(pairs, why, atol, rtol)
        else:
            raise _Unreadable
    except (_Unreadable, TypeError, ValueError, KeyError, AttributeError, RecursionError):
        outcome = "crash"
        report = unanswered(
            pairs, "The process that ran the cell sent a report that could not be read.", atol, rtol
        )
    stderr = data.get("stderr") if isinstance(data, dict) else None
    if stderr and isinstance(stderr, str) and outcome not in ("crash",):
        report.notes.append(f"The cell wrote to stderr: {_cut(clean(stderr))}")
    return GradeReport.of(report, outcome, how)


def _expect(reported, pairs, atol, rtol) -> CheckReport:
    """:func:`expect`, with arithmetic that fails on a reported number made an error row."""
    try:
        with np.errstate(all="ignore"):
            report = expect(reported, pairs, atol=atol, rtol=rtol)
            report.rows = [_exactly(row, want) for row, (_, want) in zip(report.rows, pairs)]
            return report
    except ArithmeticError:
        rows = []
        for key, want in pairs:
            try:
                with np.errstate(all="ignore"):
                    rows += expect(reported, [(key, want)], atol=atol, rtol=rtol).rows
            except ArithmeticError as exc:
                (row,) = unanswered([(key, want)], "", atol, rtol).rows
                rows.append(
                    row._replace(
                        note=f"the reported number cannot be compared: "
                        f"{type(exc).__name__}: {_cut(str(exc))}"
                    )
                )
        report = CheckReport(rows, kind="expect", atol=atol, rtol=rtol, target=reported.target.name)
        if reported.branch_dependent:
            report.notes.append(
                "The cell's control flow depended on values: these numbers hold for this branch."
            )
        return report


def _exactly(row, want):
    """A passing row whose expected value is not finite passes only if got is the same value
    (a tolerance relative to an infinite value would let any number through)."""
    if row.status != "pass" or isinstance(want, str):
        return row
    w = np.asarray(want, dtype=float)
    if np.isfinite(w).all():
        return row
    g = np.asarray(row.got, dtype=float)
    if g.shape == w.shape and np.array_equal(g, w, equal_nan=True):
        return row
    return row._replace(
        status="fail", note="the expected value is not finite: only the same value passes"
    )


def _text(x) -> str:
    if not isinstance(x, str):
        raise _Unreadable
    return clean(x[:_MAX_TEXT])


def _texts(xs) -> list:
    if not isinstance(xs, list):
        raise _Unreadable
    return [_text(x) for x in xs[:_MAX_NOTES]]


def _nodes(nodes) -> dict:
    if not isinstance(nodes, dict):
        raise _Unreadable
    out = {}
    for name, node in nodes.items():
        if not isinstance(node, dict):
            raise _Unreadable
        index = node.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise _Unreadable
        name = _text(name)
        out[name] = _Reported._Node(
            name, index, _number_or_array(node.get("data")), _number_or_array(node.get("grad"))
        )
    return out


def _number_or_array(x):
    """A reported number as a float (an int past a float's range as ±inf) or a float array."""
    if isinstance(x, int) and not isinstance(x, bool):
        try:
            return float(x)
        except OverflowError:
            return math.inf if x > 0 else -math.inf
    if x is None or isinstance(x, float):
        return x
    if isinstance(x, dict):
        shape, values = x.get("shape"), x.get("values")
        if (
            isinstance(shape, list)
            and isinstance(values, list)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            and math.prod(shape) == len(values)
        ):
            return np.asarray(values, dtype=float).reshape(shape)
    raise _Unreadable


def _what_went_wrong(error: dict, source: str, memory) -> str:
    """A short description of the cell's error and the line of ``source`` it happened on."""
    kind, line = error.get("kind"), error.get("line")
    kind_name, message = _text(error.get("type", "")), _text(error.get("message", ""))
    if isinstance(line, bool) or not isinstance(line, int):
        line = None
    if kind == "notarget":
        return f"Nothing to grade: {message}."
    if kind == "syntax":
        what = f"The cell has a syntax error on line {line}: {message}"
    elif kind == "memory":
        where = f" on line {line}" if line is not None else ""
        limit = f" (limit {memory:g} MiB)" if memory is not None else ""
        what = f"The cell ran out of memory{limit}{where}" + (f": {message}" if message else "")
    elif kind == "exception":
        where = f" on line {line}" if line is not None else ""
        what = f"The cell raised {kind_name}{where}" + (f": {message}" if message else "")
    else:
        raise _Unreadable
    lines = source.splitlines()
    if line is not None and 1 <= line <= len(lines):
        what += f"\n    {line} | {clean(lines[line - 1].strip())}"
    return what


def _crash(returncode, stderr, memory) -> tuple:
    """(outcome, message) for a child that ended without a usable report."""
    stderr = stderr if isinstance(stderr, str) else ""
    if isinstance(returncode, int) and returncode < 0:
        try:
            how = f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"killed by signal {-returncode}"
        if returncode == -getattr(signal, "SIGXCPU", 0):
            return "timeout", "Stopped: the cell used up its CPU time limit."
    else:
        how = f"exit code {returncode}"
    if "MemoryError" in stderr:
        limit = f" (limit {memory:g} MiB)" if memory is not None else ""
        return "memory", f"The cell ran out of memory{limit}; the process ended ({how})."
    why = f"The process that ran the cell ended without a report ({how})."
    if stderr:
        why += f"\nIts last output on stderr: {_cut(clean(stderr[-_NOTE_CHARS:]))}"
    return "crash", why
