"""Grading hand-derived gradients without a notebook display: :func:`grade`.

``grade(source, expected)`` runs a cell's source the way ``%%autograd`` does
(the same rewrite and engine, :func:`gradmagic.notebook.magic.prepare` and
:func:`~gradmagic.notebook.magic.execute`), compares the gradients and values named in
``expected`` and returns a :class:`GradeReport` (a
:class:`~gradmagic.analysis.check.CheckReport` with an ``outcome``), with
``.passed``, ``.rows``, ``to_dict()`` and ``assert_passed()``.

Isolation. By default the source runs in a separate, fresh Python process
(``python -I``: no user site-packages, no ``PYTHON*`` variables, a clean
environment, its own empty temporary working directory, its own process group),
under a wall-clock time limit and a memory limit. On Linux, where user namespaces
are allowed, it also runs in new user, PID and network namespaces: it cannot
signal the grader or any other process, whatever it starts ends with it, and it
has no network (elsewhere it runs without them). That process learns the
source, the names asked about and the target, never the expected numbers or
the tolerances; it sends back plain data (each named node's value and
gradient, or the error with its line, and the notes). The grader's process
checks that data and builds and judges the report itself, so nothing the
student's code does (patching gradmagic, numpy or builtins, exiting,
interrupting, looping) can change how it is judged, and no submission can leave
anything behind for the next one. A student's code can still make its own
process report whatever numbers it likes, as it could by computing them; it
cannot learn the expected answers from the grader. It runs as the grader's
user, so it can read and write what that user can: run graders under an
account (or container) that holds nothing a student should reach.

``isolate=False`` runs the source in the grader's own process instead (faster,
and the ``namespace`` given is changed as a notebook's would be); it is unsafe
for untrusted code and has no time or memory limit.

It is made for autograders, which score a test cell by what it shows:

* nothing reaches stderr (nbgrader scores a cell that writes to stderr 0):
  what the cell prints is dropped, and what it writes to stderr and the
  warnings it raises become notes of the report;
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
import json
import math
import os
import pickle
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings

import numpy as np

from ..analysis.check import CheckReport, expect, expected_pairs, unanswered

__all__ = ["grade", "GradeReport", "FILENAME", "TIMEOUT", "MEMORY", "OUTCOMES"]

FILENAME = "<graded cell>"
"""The file name the graded source is compiled under (it shows in tracebacks)."""

TIMEOUT = 10.0
"""Default wall-clock limit of one isolated run, in seconds (start-up included)."""

MEMORY = 1024
"""Default memory limit of one isolated run, in MiB of address space."""

OUTCOMES = ("pass", "wrong", "error", "timeout", "memory", "crash")
"""What :attr:`GradeReport.outcome` can be."""

_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_child.py")
_NOTE_CHARS = 300  # at most this much of the cell's stderr in a note
_MAX_NOTES = 20  # notes kept from a run
_MAX_REPORT = 64 << 20  # bytes: a larger report from the child is a crash
_MAX_TEXT = 2000  # characters kept of any text the child sends


class GradeReport(CheckReport):
    """The report of :func:`grade`: an expect :class:`CheckReport` plus its ``outcome``.

    ``outcome`` is ``"pass"``, ``"wrong"`` (the cell ran; some answer is wrong
    or has no node), ``"error"`` (the cell does not compile, raised, or left
    nothing to differentiate; ``error`` names the student's line), ``"timeout"``,
    ``"memory"`` (out of memory) or ``"crash"`` (the process that ran it ended
    without a report). Only ``"pass"`` passes. ``to_dict()`` includes it.
    """

    outcome: str = "pass"

    @classmethod
    def of(cls, report: CheckReport, outcome: str) -> "GradeReport":
        new = cls.__new__(cls)
        new.__dict__.update(report.__dict__)
        new.outcome = outcome
        return new

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["outcome"] = self.outcome
        return d


def grade(source: str, expected, *, atol: float = 1e-5, rtol: float = 1e-3,
          target: str | None = None, namespace: dict | None = None,
          timeout: float | None = TIMEOUT, memory: int | None = MEMORY,
          isolate: bool = True, raise_errors: bool = False) -> GradeReport:
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
        (name, number) pairs or the text ``"a=6, b=-4"``.
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
        Memory limit of the isolated run in MiB of address space (default
        1024); None for no limit. A cell that needs more fails with outcome
        ``"memory"``. Linux and macOS; elsewhere only the time limit applies.
    isolate:
        True (default): run in a fresh child process, as described in the
        module's docstring. False: run in this process, with no time or memory
        limit; **unsafe for untrusted code** (the code can change gradmagic,
        this process and the reports of later calls).
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
    if namespace is not None and not isinstance(namespace, dict):
        raise TypeError(f"namespace must be a dict, got {type(namespace).__name__}")
    names = _names(pairs)
    if isolate:
        if raise_errors:
            raise ValueError("raise_errors=True needs isolate=False: an exception of the "
                             "cell cannot cross from the process that runs it")
        data = _run_isolated(source, names, target, namespace, timeout, memory)
    else:
        ns = {"__name__": "__main__"} if namespace is None else namespace
        data = collect(source, names, ns, target, raise_errors)
    return _judge(data, pairs, source, atol, rtol, timeout, memory)


def _number(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def _expected(expected) -> list:
    """The grader's expected answers as (name, number) pairs; raises for bad input."""
    if isinstance(expected, str):
        from ..notebook.magic import parse_expect
        expected = parse_expect(expected, {})
    pairs = expected_pairs(expected)
    if not pairs:
        raise ValueError("grade() needs at least one expected answer")
    return pairs


def _names(pairs) -> list:
    """The node names the run must report: each key, and each key without .data/.grad."""
    names = []
    for key, _ in pairs:
        for name in (key, key.rpartition(".")[0] if key.endswith((".data", ".grad")) else key):
            if name and name not in names:
                names.append(name)
    return names


# =========================================================================== the run
def collect(source: str, names, ns: dict, target=None, raise_errors: bool = False,
            restore: bool = False) -> dict:
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
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = _collect(source, names, ns, target, raise_errors, after)
    data["notes"] = data.get("notes", []) + _output_notes(err.getvalue(), caught)
    return data


def _collect(source, names, ns, target, raise_errors, after) -> dict:
    from ..notebook.magic import NoTarget, execute, prepare
    try:
        body, first_line, line_target = _split_magic(source)
        cell = prepare(body, ns, filename=FILENAME, first_line=first_line)
        trace = execute(cell, ns, {"target": target or line_target})
    except NoTarget as exc:
        if raise_errors:
            raise
        after and after()
        return {"status": "error", "error": {"kind": "notarget", "type": "NoTarget",
                                             "message": str(exc), "line": None}}
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
    return {"status": "ran", "target": trace.target.name,
            "branch_dependent": bool(trace.branch_dependent), "nodes": nodes,
            "notes": list(trace.warnings)}


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
        return {"kind": "syntax", "type": "SyntaxError", "message": str(exc.msg),
                "line": exc.lineno}
    try:
        message = str(exc).strip()
    except Exception:  # noqa: BLE001 - a student's exception whose str() fails
        message = "(its message could not be printed)"
    kind = "memory" if isinstance(exc, MemoryError) else "exception"
    return {"kind": kind, "type": type(exc).__name__, "message": message,
            "line": _line_of(exc)}


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
    from ..notebook.magic import parse_options
    options = first.lstrip()[len("%%autograd"):]
    try:
        target = parse_options(options).target
    except Exception as exc:  # noqa: BLE001 - a UsageError: the student's line is wrong
        raise SyntaxError(f"the %%autograd line's options: {exc}",
                          (FILENAME, 1, 1, first, None, None)) from None
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
def _run_isolated(source, names, target, namespace, timeout, memory) -> dict:
    """Run the cell in a fresh ``python -I`` process; its report as plain data.

    The child (:mod:`gradmagic.grade._child`) gets the job on stdin and writes
    its report, after the cell has finished, to a file whose name holds a random
    token; stdout goes nowhere, stderr to a file. Whatever goes wrong is
    returned as ``{"status": "timeout" | "crash", ...}``.
    """
    token = secrets.token_hex(16)
    root = tempfile.mkdtemp(prefix="gradmagic-grade-")
    try:
        work = os.path.join(root, "cell")
        os.mkdir(work, 0o700)
        report_path = os.path.join(root, f"report-{token}.json")
        stderr_path = os.path.join(root, "stderr")
        ns_bytes = None
        if namespace:
            try:
                ns_bytes = pickle.dumps(namespace)
            except Exception as exc:  # noqa: BLE001 - the grader's namespace
                raise TypeError(f"an isolated grade() sends the namespace to a fresh "
                                f"process, so it must pickle: {exc}") from None
        job = pickle.dumps({"token": token, "report": report_path, "source": source,
                            "names": list(names), "target": target, "namespace": ns_bytes,
                            "memory": memory, "timeout": timeout})
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "HOME": work, "TMPDIR": work, "OPENBLAS_NUM_THREADS": "1",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        timed_out = False
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-I", _CHILD, here],
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=err, cwd=work, env=env, close_fds=True,
                                    start_new_session=hasattr(os, "setsid"))
        try:
            try:
                proc.communicate(job, timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            except (BrokenPipeError, ConnectionResetError):  # it died before reading the job
                proc.wait(timeout=timeout)
        finally:
            _kill_group(proc)
        stderr = _tail(stderr_path)
        if timed_out:
            return {"status": "timeout", "stderr": stderr}
        data = _read_report(report_path, token) if proc.returncode == 0 else None
        if data is None:
            return {"status": "crash", "returncode": proc.returncode, "stderr": stderr}
        if stderr:
            data["stderr"] = stderr
        return data
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _kill_group(proc) -> None:
    """End the child and whatever it started in its process group; reap it."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows: no process groups
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def _tail(path: str) -> str:
    """The last bit of a text file the child wrote (it may be gone)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4 * _NOTE_CHARS))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _read_report(path: str, token: str):
    """The child's report as a dict, or None if it is missing, too big, or not ours."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        import stat
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_REPORT:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(_MAX_REPORT + 1)
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("token") != token:
        return None
    return data


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


def _judge(data: dict, pairs, source: str, atol, rtol, timeout, memory) -> GradeReport:
    """Build and judge the report in the grader's process from a run's plain data."""
    try:
        status = data.get("status") if isinstance(data, dict) else None
        notes = _texts(data.get("notes", []))[:_MAX_NOTES] if status else []
        if status == "ran":
            reported = _Reported(_nodes(data.get("nodes")), _text(data.get("target", "")),
                                 data.get("branch_dependent") is True)
            report = expect(reported, pairs, atol=atol, rtol=rtol)
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
            report = unanswered(pairs, f"Stopped: the cell did not finish within the time "
                                       f"limit of {timeout:g} s.", atol, rtol)
        elif status == "crash":
            outcome, why = _crash(data.get("returncode"), data.get("stderr", ""), memory)
            report = unanswered(pairs, why, atol, rtol)
        else:
            raise _Unreadable
    except (_Unreadable, TypeError, ValueError, KeyError, AttributeError):
        outcome = "crash"
        report = unanswered(pairs, "The process that ran the cell sent a report that "
                                   "could not be read.", atol, rtol)
    stderr = data.get("stderr") if isinstance(data, dict) else None
    if stderr and isinstance(stderr, str) and outcome not in ("crash",):
        report.notes.append(f"The cell wrote to stderr: {_cut(stderr)}")
    return GradeReport.of(report, outcome)


def _text(x) -> str:
    if not isinstance(x, str):
        raise _Unreadable
    return x[:_MAX_TEXT]


def _texts(xs) -> list:
    if not isinstance(xs, list):
        raise _Unreadable
    return [_text(x) for x in xs]


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
        out[_text(name)] = _Reported._Node(name, index, _number_or_array(node.get("data")),
                                           _number_or_array(node.get("grad")))
    return out


def _number_or_array(x):
    if x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)):
        return x
    if isinstance(x, dict):
        shape, values = x.get("shape"), x.get("values")
        if (isinstance(shape, list) and isinstance(values, list)
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                        for n in shape)
                and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                        for v in values)
                and math.prod(shape) == len(values)):
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
        what += f"\n    {line} | {lines[line - 1].strip()}"
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
        why += f"\nIts last output on stderr: {_cut(stderr[-_NOTE_CHARS:])}"
    return "crash", why
