"""Grading hand-derived gradients without a notebook display: :func:`grade`.

``grade(source, expected)`` runs a cell's source the way ``%%autograd`` does
(the same rewrite and engine, :func:`gradmagic.notebook.magic.prepare` and
:func:`~gradmagic.notebook.magic.execute`), compares the gradients and values named in
``expected`` and returns the :class:`~gradmagic.analysis.check.CheckReport`, with
``.passed``, ``.rows``, ``to_dict()`` and ``assert_passed()``.

It is made for autograders, which score a test cell by what it shows:

* nothing reaches stderr (nbgrader scores a cell that writes to stderr 0):
  what the cell prints is dropped, and what it writes to stderr and the
  warnings it raises become notes of the report;
* the report's text never reads as a bare number (nbgrader would take a
  number for partial credit) and is the same every time;
* a student's cell that does not compile or raises gives a failing report
  saying what went wrong on which line, instead of crashing the grader
  (unless ``raise_errors=True``).

Mistakes of the grader's own (expected answers that are not a mapping,
negative tolerances) raise at once, before the cell runs.
"""
from __future__ import annotations

import contextlib
import io
import math
import warnings

from ..analysis.check import CheckReport, expect, expected_pairs, unanswered

__all__ = ["grade", "FILENAME"]

FILENAME = "<graded cell>"
"""The file name the graded source is compiled under (it shows in tracebacks)."""

_NOTE_CHARS = 300  # at most this much of the cell's stderr in a note


def grade(source: str, expected, *, atol: float = 1e-5, rtol: float = 1e-3,
          target: str | None = None, namespace: dict | None = None,
          raise_errors: bool = False) -> CheckReport:
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
        The dict to run in (it is changed, as a notebook's would be); default
        a fresh one, so the source must import what it uses.
    raise_errors:
        Re-raise an exception of the cell instead of reporting it.

    Returns the report of kind ``"expect"``; print it for the text form, or
    call ``assert_passed()`` in a test cell.
    """
    pairs = _expected(expected)
    for name, x in (("atol", atol), ("rtol", rtol)):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    if not isinstance(source, str):
        raise TypeError(f"source must be the cell's code as a str, got {type(source).__name__}")
    ns = {"__name__": "__main__"} if namespace is None else namespace
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = _run(source, pairs, ns, atol, rtol, target, raise_errors)
    report.notes += _output_notes(err.getvalue(), caught)
    return report


def _expected(expected) -> list:
    """The grader's expected answers as (name, number) pairs; raises for bad input."""
    if isinstance(expected, str):
        from ..notebook.magic import parse_expect
        expected = parse_expect(expected, {})
    pairs = expected_pairs(expected)
    if not pairs:
        raise ValueError("grade() needs at least one expected answer")
    return pairs


def _run(source, pairs, ns, atol, rtol, target, raise_errors) -> CheckReport:
    from ..notebook.magic import NoTarget, execute, prepare
    try:
        body, first_line, line_target = _split_magic(source)
        cell = prepare(body, ns, filename=FILENAME, first_line=first_line)
        options = {"target": target or line_target, "atol": atol, "rtol": rtol,
                   "expect": dict(pairs)}
        trace = execute(cell, ns, options)
    except NoTarget as exc:
        if raise_errors:
            raise
        return unanswered(pairs, f"Nothing to grade: {exc}.", atol, rtol)
    except (Exception, SystemExit) as exc:  # the student's code failed: report, don't crash
        if raise_errors:
            raise
        return unanswered(pairs, _what_went_wrong(exc, source), atol, rtol)
    report = expect(trace, pairs, atol=atol, rtol=rtol)
    report.notes[:0] = trace.warnings
    return report


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


def _what_went_wrong(exc: BaseException, source: str) -> str:
    """A short description of the cell's error and the line of ``source`` it happened on."""
    if isinstance(exc, SyntaxError):
        line = exc.lineno
        what = f"The cell has a syntax error on line {line}: {exc.msg}"
    else:
        line = _line_of(exc)
        where = f" on line {line}" if line is not None else ""
        message = str(exc).strip()
        what = f"The cell raised {type(exc).__name__}{where}" + (f": {message}" if message else "")
    lines = source.splitlines()
    if line is not None and 1 <= line <= len(lines):
        what += f"\n    {line} | {lines[line - 1].strip()}"
    return what


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
        cut = text if len(text) <= _NOTE_CHARS else text[:_NOTE_CHARS] + " ..."
        notes.append(f"The cell wrote to stderr: {cut}")
    seen = set()
    for w in caught:
        where = f" on line {w.lineno}" if w.filename == FILENAME else ""
        note = f"Warning{where}: {w.category.__name__}: {w.message}"
        if note not in seen:
            seen.add(note)
            notes.append(note)
    return notes
