"""Checks a teacher declares in test code: :func:`check_cell` (grade the student's
``%%autograd`` cell against expected answers) and :func:`check_answers` (grade the student's
hand-derived answers against the teacher's code).

The graders' integrations (:mod:`gradmagic.grade.nbgrader`, :mod:`gradmagic.grade.otter`, the
class command ``python -m gradmagic.grade``) read these calls from the test code as data and
grade the submitted notebook's text in the sandbox (:func:`run_check`): nothing of the
student's runs in the grader's process or in a kernel. Called in a live kernel (a teacher
trying the source notebook), they grade that kernel's own cells instead.
"""

from __future__ import annotations

import sys

from ._judging import GradeReport
from ._notebook import Check, answers_in, find_cell

_PRELOADED: dict = {}  # key of a check -> (passed, text): results an integration graded


def check_cell(cell: str, expected, **options) -> None:
    """Grade the student's cell ``cell`` (an nbgrader ``grade_id``, a cell id or tag, or
    ``"autograd"``: the first ``%%autograd`` cell) against ``expected``, as
    :func:`~gradmagic.grade.grade` does; raises AssertionError unless it passes, and shows
    nothing if it does (a doctest's expected output is none).

    ``options`` are :func:`~gradmagic.grade.grade`'s (``atol``, ``rtol``, ``target``,
    ``timeout``, ``memory``, ``feedback``). In a live kernel it grades the kernel's latest
    ``%%autograd`` cell (``gradmagic.last``).
    """
    key = Check("cell", (cell, expected), options).key
    if key in _PRELOADED:
        return _shown(key)
    from ..notebook import session
    from ._grading import grade

    source = (session.last.source if session.last is not None else None) or ""
    grade(source, expected, **options).assert_passed()


def check_answers(name: str, source: str, **options) -> None:
    """Grade the student's hand-derived answers, the dict the notebook assigns to ``name``,
    against the teacher's code ``source``; raises AssertionError unless they pass.

    Under an integration the answers are read from the cell's text (numbers, not run); in
    a live kernel, from the kernel's variable ``name``.
    """
    key = Check("answers", (name, source), options).key
    if key in _PRELOADED:
        return _shown(key)
    from ._grading import grade

    answers = sys._getframe(1).f_globals.get(name)
    grade(source, answers if answers is not None else {name: "missing"}, **options).assert_passed()


def failure_text(report: GradeReport) -> str:
    """What ``assert_passed()`` says of a failing report: each wrong answer, and why."""
    try:
        report.assert_passed()
    except AssertionError as exc:
        return str(exc)
    return str(report)


def _shown(key: str) -> None:
    passed, text = _PRELOADED[key]
    if not passed:
        raise AssertionError(text)


def preload(results: dict) -> None:
    """Results an integration graded outside the kernel, by check key: ``{key: [passed,
    text]}``; the kernel's :func:`check_cell` and :func:`check_answers` then report them."""
    _PRELOADED.clear()
    _PRELOADED.update({k: (v[0] is True, str(v[1])) for k, v in results.items()})


# =========================================================================== outside a kernel
def run_check(check: Check, cells: list, defaults: dict | None = None) -> GradeReport:
    """Grade the check ``check`` on a submitted notebook's cells (:func:`read_cells`), in
    the sandbox; never raises for anything in the notebook. A declaration of the teacher's
    that cannot be followed (bad arguments) raises TypeError or ValueError."""
    from ._grading import grade

    options = dict(defaults or {}, **check.options)
    if check.kind == "cell":
        which, expected = _two(check)
        source = find_cell(cells, str(which))
        if source is None:
            return _nothing(expected, f"the notebook has no code cell {which!r}", options)
        return grade(source, expected, **options)
    name, teacher_source = _two(check)
    answers = answers_in(cells, str(name))
    if isinstance(answers, str):
        return _nothing({str(name): 0.0}, answers, options)
    report = grade(teacher_source, answers, **options)
    if report.feedback == "verdicts":  # here "got" is the teacher's value: the right answer
        report.rows = [r._replace(got=None) for r in report.rows]
    return report


def _two(check: Check) -> tuple:
    if len(check.args) != 2:
        raise TypeError(f"check_{check.kind}() takes two arguments, got {len(check.args)}")
    return check.args


def _nothing(expected, why: str, options: dict) -> GradeReport:
    """A failing report for a question with nothing to run."""
    from ._grading import MEMORY, TIMEOUT, _expected, _how
    from ._judging import _judge

    pairs = [] if expected is None else _expected(expected)  # None: a learner's engine
    data = {"status": "error", "error": {"kind": "notarget", "message": why}}
    sandbox = options.get("sandbox", True)
    how = _how(sandbox, options.get("timeout", TIMEOUT), options.get("memory", MEMORY))
    feedback = options.get("feedback", "full")
    atol, rtol = options.get("atol", 1e-5), options.get("rtol", 1e-3)
    return _judge(data, pairs, "", atol, rtol, None, None, how, feedback)
