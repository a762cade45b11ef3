"""What a graded run reports: :func:`collect` runs the source (here, or in a child process
through :func:`_run_isolated`) and returns plain data: each named node's value and gradient,
or the error with its line, and the notes (stderr, warnings). No expected number reaches it.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import io
import pickle
import sys
import warnings

import numpy as np

from ..notebook.memory import GraphMemoryError
from . import _sandbox

FILENAME = "<graded cell>"
"""The file name the graded source is compiled under (it shows in tracebacks)."""


_NOTE_CHARS = 300  # at most this much of the cell's stderr in a note
_MOST_CLAIMS = 10_000  # the learner's .grad values a run reports (as many as nodes)


# =========================================================================== the run
def collect(
    source: str,
    names,
    ns: dict,
    target=None,
    raise_errors: bool = False,
    restore: bool = False,
    files: dict | None = None,
) -> dict:
    """Run ``source`` in ``ns`` and return what happened as plain (JSON-able) data.

    ``{"status": "ran", "target": ..., "branch_dependent": ..., "nodes": {name:
    {"index", "data", "grad"}}, "notes": [...]}`` for each of ``names`` that
    is a node (and ``"claims"`` when the cell's value is a learner's own autograd
    object: see :func:`_claims`), or ``{"status": "error", "error": {"kind", "type", "message",
    "line"}, "notes": [...]}``. This runs in the process that runs the
    student's code (the child, or the grader's with ``isolate=False``); the
    grader judges the data with :func:`_judge`. ``restore`` (the child) puts
    back ``builtins`` and ``sys.modules`` as they were once the cell has run, so
    that the data can still be gathered after a cell that broke them. ``files``: the
    student's modules (``{relative path: text}``), beside the cell in a folder of its own.
    """
    err = io.StringIO()
    after = _snapshot() if restore else None
    with (
        _beside(files or {}),
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
    disputed = _disputed(trace)  # the judge grades no answer on a gradient the code refutes
    for entry in nodes.values():
        if entry["index"] in disputed:
            entry["disputed"] = True
    data = {
        "status": "ran",
        "target": trace.target.name,
        "branch_dependent": bool(trace.branch_dependent),
        "nodes": nodes,
        "notes": list(trace.warnings),
    }
    if getattr(trace, "claims", None) is not None:
        data["claims"] = _claims(trace.claims, disputed)
    return data


def _claims(report, disputed: set) -> dict:
    """The ``.grad`` values the learner's own engine left (``trace.claims``), each beside
    the true gradient, as plain data for the judge; at most ``_MOST_CLAIMS``."""
    rows = [
        {"name": r.name, "index": r.index, "grad": _plain(r.expected), "true": _plain(r.got)}
        | ({"disputed": True} if r.index in disputed else {})
        for r in report.rows[:_MOST_CLAIMS]
    ]
    notes = list(report.notes)
    if len(report.rows) > _MOST_CLAIMS:
        notes.append(f"Only the first {_MOST_CLAIMS} of {len(report.rows)} .grad values judged.")
    return {"rows": rows, "notes": notes}


def _disputed(trace) -> set:
    """The inputs whose gradient the cell's code, run again, refutes: the recorded graph
    missed a path from them (see :mod:`gradmagic.notebook.rerun`)."""
    try:
        report = trace.check()
    except Exception:  # noqa: BLE001 - no check, no dispute: the graph's numbers stand
        return set()
    if report.oracle != "code":
        return set()
    return {r.index for r in report.rows if r.status == "fail" and r.index is not None}


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


@contextlib.contextmanager
def _beside(files: dict):
    """Run in a fresh folder that holds ``files`` (the student's modules), importable from
    it: the working folder, so the magic follows them as the student's own code. Then the
    folder, the modules imported from it and the way to them are gone."""
    if not files:
        yield
        return
    import os
    import shutil
    import tempfile

    folder, back = os.path.realpath(tempfile.mkdtemp(prefix="gradmagic-files-")), os.getcwd()
    try:
        for path, text in files.items():
            where = os.path.join(folder, *path.split("/"))
            os.makedirs(os.path.dirname(where), exist_ok=True)
            with open(where, "w", encoding="utf-8") as f:
                f.write(text)
        os.chdir(folder)
        sys.path.insert(0, folder)
        yield
    finally:
        os.chdir(back)
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
        for name, module in list(sys.modules.items()):
            if any(str(p).startswith(folder + os.sep) for p in _places(module)):
                del sys.modules[name]
        shutil.rmtree(folder, ignore_errors=True)


def _places(module) -> list:
    """Where a module was loaded from: its file, and a package's folders (``__path__``; some
    modules hold an object there that is no list of folders, or refuse to be asked)."""
    places = []
    for attribute in ("__file__", "__path__"):
        try:
            held = getattr(module, attribute, None)
            places += [held] if attribute == "__file__" else list(held or ())
        except Exception:  # noqa: BLE001
            continue
    return places


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
    out_of_memory = isinstance(exc, (MemoryError, GraphMemoryError)) or (
        isinstance(exc, OSError) and exc.errno == errno.ENOMEM
    )
    kind = "memory" if out_of_memory else "exception"
    return {"kind": kind, "type": type(exc).__name__, "message": message, "line": _line_of(exc)}


def _plain(x):
    """A node's data or grad as JSON data: a number, None, or ``{"shape", "f64"}`` (the
    float64 numbers' bytes in base64: no element of a long list to parse one by one)."""
    if isinstance(x, np.ndarray):
        numbers = np.ascontiguousarray(np.asarray(x, dtype="<f8"))
        return {"shape": list(x.shape), "f64": base64.b64encode(numbers.tobytes()).decode()}
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
    from ..analysis.options import OptionError, Options

    try:  # the student's own answers (a name in their notebook) are not graded
        target = Options.parse(first, skip=("expect",)).target
    except OptionError as exc:  # the student's line is wrong
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
def _run_isolated(
    source, names, target, namespace, timeout, memory, processes, sandbox, files=None
) -> dict:
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
        "files": files or {},
    }
    try:
        return _sandbox.run(job, timeout, sandbox)
    except Exception as exc:  # noqa: BLE001 - no process could be started, no pipe made
        return {"status": "crash", "returncode": None, "stderr": f"{type(exc).__name__}: {exc}"}
