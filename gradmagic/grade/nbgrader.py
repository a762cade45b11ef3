"""nbgrader's autograde without running the student's notebook: :class:`GradeCells`.

nbgrader's ``autograde`` normally executes the submitted notebook in a Jupyter kernel of the
grader's, in the submission's folder, so the student's code (and any module they put beside
the notebook) runs as the grader. :class:`GradeCells` takes the place of nbgrader's
``Execute`` step: it reads the notebook's cells as text, finds the checks each autograded
test cell declares (:func:`~gradmagic.grade.check_cell`,
:func:`~gradmagic.grade.check_answers`; nbgrader has already put the teacher's hidden tests
back), grades them in the sandbox and writes each test cell's outputs the way nbgrader
scores them: an error output (0 points) or the report as text (full points). No cell runs
in a kernel. In ``nbgrader_config.py``::

    from gradmagic.grade.nbgrader import AUTOGRADE

    c.Autograde.autograde_preprocessors = AUTOGRADE
    c.GradeCells.feedback = "verdicts"  # or "full" (the default)

A test cell that declares no check cannot be graded without a kernel: it scores 0 and says so.
"""

from __future__ import annotations

import nbformat
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    IgnorePattern,
    LimitOutput,
    NbGraderPreprocessor,
    SaveAutoGrades,
)
from traitlets import Enum, Float, Int

from . import FEEDBACK, MEMORY, TIMEOUT, declared_checks, read_cells, run_check
from ._checks import failure_text
from ._notebook import NotebookError


class GradeCells(NbGraderPreprocessor):
    """Grade each autograded test cell's declared checks on the notebook's text, in the
    sandbox, and write the cell's outputs as nbgrader scores them."""

    feedback = Enum(FEEDBACK, "full", help="How much a report shows").tag(config=True)
    timeout = Float(TIMEOUT, help="Seconds each check may run").tag(config=True)
    memory = Int(MEMORY, help="MiB each check may use").tag(config=True)

    def preprocess(self, nb, resources):
        try:
            cells = read_cells(nbformat.writes(nb).encode("utf-8"))
        except NotebookError as exc:
            cells, broken = [], str(exc)
        else:
            broken = None
        defaults = {"feedback": self.feedback, "timeout": self.timeout, "memory": self.memory}
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            if broken is not None:
                cell.outputs = [_error(f"The notebook could not be read: {broken}")]
                continue
            cell.outputs = _outputs(declared_checks(cell.source), cells, defaults)
        return nb, resources


def _outputs(checks, cells, defaults) -> list:
    if not checks:
        return [
            _error(
                "This test cell declares no check_cell() or check_answers(): "
                "without a kernel nothing else in it is run."
            )
        ]
    texts, passed = [], True
    for check in checks:
        report = run_check(check, cells, defaults)
        passed = passed and report.passed
        texts.append(str(report) if report.passed else failure_text(report))
    text = "\n\n".join(texts)
    if passed:
        return [nbformat.v4.new_output("stream", name="stdout", text=text + "\n")]
    return [_error(text)]


def _error(text: str):
    return nbformat.v4.new_output(
        "error",
        ename="AssertionError",
        evalue=text.splitlines()[0] if text else "",
        traceback=["AssertionError: " + text.splitlines()[0]] + text.splitlines()[1:],
    )


AUTOGRADE = [
    GradeCells,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
"""nbgrader's autograde steps with :class:`GradeCells` in place of ``Execute``."""
