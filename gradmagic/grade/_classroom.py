"""A class in one command: every submission of a folder graded, N sandboxes at a time, into a
resumable gradebook (``gradebook.json``, ``gradebook.csv``) and one report file per student.

The assignment is test code that declares checks (``check_cell(...)``, ``check_answers(...)``,
each with ``points=`` if not 1), read, not run. Each submission is a notebook read as text,
with the modules beside it in the student's folder; nothing a student wrote runs outside the
sandbox. See ``python -m gradmagic.grade --help``.
"""

from __future__ import annotations

import concurrent.futures
import csv
import hashlib
import io
import json
import os
import re
import sys
import threading
import time

from ._judging import clean, one_line, strict
from ._notebook import MAX_BYTES, Check, NotebookError, declared_checks, read_cells

GRADEBOOK = "gradebook.json"
TABLE = "gradebook.csv"
REPORTS = "reports"
UNREADABLE = "unreadable"  # the gradebook's sha256 of a submission that could not be read


# =========================================================================== the submissions
def submissions(folder: str, notebook: str | None = None) -> dict:
    """``{student: path of the notebook}``: ``folder/STUDENT.ipynb``, or the notebook in
    ``folder/STUDENT/`` (at any depth, as nbgrader's ``submitted/STUDENT/ASSIGNMENT/``):
    the one called ``notebook``, else the first by name. Links are not followed."""
    found: dict = {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.endswith(".ipynb") and not entry.is_dir(follow_symlinks=False):
            found[entry.name[: -len(".ipynb")]] = entry.path
        elif entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
            found[entry.name] = _notebook_in(entry.path, notebook)
    return found


def _notebook_in(folder: str, notebook: str | None) -> str | None:
    paths = []
    for root, dirs, files in os.walk(folder):  # os.walk follows no link to a folder
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        paths += [os.path.join(root, f) for f in sorted(files) if f.endswith(".ipynb")]
    if notebook is not None:
        paths = [p for p in paths if os.path.basename(p) == notebook]
    return paths[0] if paths else None


def _read(path: str | None, most: int = MAX_BYTES) -> bytes:
    """A submission's bytes: a regular file no larger than ``most`` (the notebook bound),
    no link."""
    if path is None:
        raise NotebookError("no notebook was handed in")
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except OSError as exc:
        raise NotebookError(f"the notebook cannot be opened: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not os.path.isfile(path) or os.fstat(f.fileno()).st_size > most:
            raise NotebookError("the notebook is not a regular file of at most 64 MiB")
        return f.read(most + 1)


# =========================================================================== one student
def modules(path: str | None, folder: str) -> dict:
    """The student's own modules: each ``.py`` file in their notebook's folder and below
    (``engine.py``, ``cs231n/layers.py``), by its path from there, as text; none for a
    notebook handed in alone in the class's folder. Links are not followed; past
    ``MOST_FILES`` files or ``FILE_BYTES`` bytes the rest are left out."""
    from ._grading import FILE_BYTES, MOST_FILES

    home = os.path.dirname(path) if path is not None else folder
    if os.path.realpath(home) == os.path.realpath(folder):
        return {}
    found: dict = {}
    budget = FILE_BYTES
    for root, dirs, files in os.walk(home):  # os.walk follows no link to a folder
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(f for f in files if f.endswith(".py")):
            try:
                text = _read(os.path.join(root, name), budget).decode("utf-8", "replace")
            except NotebookError:
                continue
            budget -= len(text.encode())
            if budget < 0 or len(found) == MOST_FILES:
                return found
            found[os.path.relpath(os.path.join(root, name), home).replace(os.sep, "/")] = text
    return found


def grade_student(checks: list, path: str | None, defaults: dict) -> dict:
    """One submission's gradebook entry and its reports: ``{"score", "possible", "checks":
    [...], "sha256", "text", "reports"}``; never raises. ``defaults["files"]``: the
    student's modules (:func:`modules`), beside the cells in the sandbox."""
    from ._checks import run_check

    possible = sum(_points(c) for c in checks)
    digest = UNREADABLE
    try:
        raw = _read(path)
        digest = _digest_of(raw, defaults.get("files"))
        cells = read_cells(raw)
    except NotebookError as exc:
        why = f"The submission could not be graded: {exc}."
        rows = [_row(c, n, "error", False, why) for n, c in enumerate(checks, 1)]
        return {"score": 0.0, "possible": possible, "checks": rows, "sha256": digest, "text": why}
    rows, texts, reports = [], [], []
    for number, check in enumerate(checks, 1):
        options = {k: v for k, v in check.options.items() if k not in ("points", "name")}
        try:
            report = run_check(Check(check.kind, check.args, options), cells, defaults)
        except Exception as exc:  # noqa: BLE001 - never one student's failure for the class
            why = f"The grader could not grade this check: {type(exc).__name__}: {exc}"
            rows.append(_row(check, number, "crash", False, one_line(why)))
            texts.append(f"{_title(check, number)}\n{one_line(why)}")
            continue
        rows.append(_row(check, number, report.outcome, report.passed, report.verdict))
        texts.append(f"{_title(check, number)}\n{report}")
        reports.append(report.to_dict())
    score = float(sum(_points(c) for c, r in zip(checks, rows) if r["passed"]))
    text = "\n\n".join(texts)
    return {
        "score": score,
        "possible": possible,
        "checks": rows,
        "sha256": digest,
        "text": text,
        "reports": reports,
    }


def _points(check: Check) -> float:
    points = check.options.get("points", 1)
    return float(points) if type(points) in (int, float) and points >= 0 else 1.0


def _name(check: Check, number: int) -> str:
    name = check.options.get("name")
    return str(name) if type(name) is str else f"q{number}"


def _title(check: Check, number: int) -> str:
    points = _points(check)
    return f"== {_name(check, number)} ({points:g} point{'' if points == 1 else 's'})"


def _row(check: Check, number: int, outcome: str, passed: bool, verdict: str) -> dict:
    return {
        "name": _name(check, number),
        "outcome": outcome,
        "passed": passed,
        "points": _points(check),
        "verdict": verdict,
    }


# =========================================================================== the class
def read_assignment(path: str) -> list:
    """The checks an assignment file declares (read, not run); ValueError if there are none."""
    with open(path, encoding="utf-8") as f:
        checks = declared_checks(f.read())
    if not checks:
        raise ValueError(
            f"{path} declares no check_cell(...) or check_answers(...) with literal arguments"
        )
    return checks


def grade_class(
    assignment: str,
    folder: str,
    out: str,
    *,
    jobs: int = 2,
    notebook: str | None = None,
    defaults: dict | None = None,
    progress=None,
) -> dict:
    """Grade every submission in ``folder`` into ``out`` (see the module's docstring); the
    gradebook as a dict. Students already in ``out``'s gradebook with the same notebook and
    the same assignment are kept, not graded again."""
    checks = read_assignment(assignment)
    defaults = dict(defaults or {})
    stamp = hashlib.sha256(
        json.dumps([[c.key for c in checks], defaults], sort_keys=True).encode()
    ).hexdigest()
    os.makedirs(os.path.join(out, REPORTS), exist_ok=True)
    book = _load(os.path.join(out, GRADEBOOK), stamp)
    todo = {}
    for student, path in submissions(folder, notebook).items():
        files = modules(path, folder)
        kept = book["students"].get(student)
        if kept is None or kept.get("sha256") != _digest(path, files):
            todo[student] = (path, dict(defaults, files=files) if files else defaults)
    lock = threading.Lock()
    bar = progress or (lambda done, total: None)
    done = 0
    bar(done, len(todo))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(grade_student, checks, *job): s for s, job in todo.items()}
        for future in concurrent.futures.as_completed(futures):
            student = futures[future]
            entry = future.result()
            with lock:
                _store(out, book, student, entry)
                done += 1
                bar(done, len(todo))
    return book


def _digest(path: str | None, files: dict) -> str:
    try:
        return _digest_of(_read(path), files)
    except NotebookError:
        return UNREADABLE


def _digest_of(raw: bytes, files) -> str:
    """The sha256 of a notebook, and of the student's modules beside it when there are."""
    modules = json.dumps(files, sort_keys=True).encode() if files else b""
    return hashlib.sha256(raw + modules).hexdigest()


def _load(path: str, stamp: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            book = json.load(f)
    except (OSError, ValueError):
        book = None
    if type(book) is not dict or book.get("assignment") != stamp:
        return {"assignment": stamp, "students": {}}
    if type(book.get("students")) is not dict:
        book["students"] = {}
    return book


def _store(out: str, book: dict, student: str, entry: dict) -> None:
    """Write one student's report files, then the gradebook (JSON, then CSV) atomically."""
    base = os.path.join(out, REPORTS, _file_name(student))
    text, reports = entry.pop("text"), entry.pop("reports", [])
    _write(base + ".txt", clean(text) + "\n")
    _write(base + ".json", json.dumps(strict(reports), indent=1, allow_nan=False) + "\n")
    book["students"][student] = strict(entry)
    _write(os.path.join(out, GRADEBOOK), json.dumps(book, indent=1, allow_nan=False) + "\n")
    _write(os.path.join(out, TABLE), _table(book))


def _file_name(student: str) -> str:
    """A file name for a student's reports: their name's safe characters, and a hash of it
    if any were left out (two names never share a file)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", student).lstrip(".")[:80]
    if safe != student or not safe:
        safe += "-" + hashlib.sha256(student.encode("utf-8", "backslashreplace")).hexdigest()[:8]
    return safe


def _write(path: str, text: str) -> None:
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(partial, path)


def _table(book: dict) -> str:
    """The gradebook as CSV: one row per student, a score and an outcome per check."""
    rows = sorted(book["students"].items())
    names = []
    for _, entry in rows:
        for check in entry.get("checks", []):
            if check["name"] not in names:
                names.append(check["name"])
    buffer = io.StringIO()
    table = csv.writer(buffer)
    table.writerow(["student", "score", "possible"] + names)
    for student, entry in rows:
        outcomes = {c["name"]: c["outcome"] for c in entry.get("checks", [])}
        table.writerow(
            [_cell(student), entry.get("score"), entry.get("possible")]
            + [outcomes.get(n, "") for n in names]
        )
    return buffer.getvalue()


def _cell(text: str) -> str:
    """Text for a spreadsheet's cell: one line, never read as a formula."""
    text = one_line(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


# =========================================================================== the progress bar
def progress_bar(stream=None, width: int = 30):
    """``bar(done, total)``: a bar on ``stream`` (stderr) redrawn in place on a terminal,
    a line per tenth elsewhere."""
    stream = stream or sys.stderr
    live = getattr(stream, "isatty", lambda: False)()
    start, shown = time.monotonic(), [-1]

    def bar(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if not live and tenth == shown[0] and done != total:
            return
        shown[0] = tenth
        filled = width * done // max(total, 1)
        rate = done / max(time.monotonic() - start, 1e-9) * 60
        line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} ({rate:.0f}/min)"
        stream.write(("\r" + line) if live else line + "\n")
        if live and done == total:
            stream.write("\n")
        stream.flush()

    return bar
