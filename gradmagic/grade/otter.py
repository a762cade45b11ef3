"""otter-grader without running the student's notebook: :class:`GradmagicPlugin`.

``otter run`` (and the autograder otter generates) executes the submission in a Jupyter
kernel before its tests. With this plugin listed in ``otter_config.json``::

    {"plugins": ["gradmagic.grade.otter.GradmagicPlugin"]}

(or ``{"gradmagic.grade.otter.GradmagicPlugin": {"feedback": "verdicts"}}``), otter hands
the submitted notebook to the plugin before running it. The plugin reads its cells as text,
finds the checks the test files declare (:func:`~gradmagic.grade.check_cell`,
:func:`~gradmagic.grade.check_answers` in the doctests), grades them in the sandbox, and
gives otter in the student's notebook's place one cell that holds the verdicts as data: the
tests then show those verdicts, and once otter has scored them the plugin sets each test's
score from its own verdicts. No cell of the student's runs in the kernel.
"""

from __future__ import annotations

import ast
import glob
import json
import os

import nbformat
from otter.plugins import AbstractOtterPlugin

from . import declared_checks, read_cells, run_check
from ._checks import failure_text
from ._notebook import NotebookError


class GradmagicPlugin(AbstractOtterPlugin):
    """Grade the declared checks on the submission's text; see the module's docstring."""

    def before_execution(self, submission):
        config = self.plugin_config if isinstance(self.plugin_config, dict) else {}
        defaults = {k: config[k] for k in ("feedback", "timeout", "memory") if k in config}
        self.verdicts: dict = {}
        try:
            text = submission if isinstance(submission, str) else nbformat.writes(submission)
            cells = read_cells(text.encode("utf-8"))
            why = None
        except NotebookError as exc:
            cells, why = [], f"The notebook could not be read: {exc}"
        preload = {}
        for path in sorted(glob.glob(os.path.join("tests", "*.py"))):
            name, codes = test_cases(path)
            passed = True
            for code in codes:
                for check in declared_checks(code):
                    if why is not None:
                        preload[check.key] = [False, why]
                        passed = False
                        continue
                    report = run_check(check, cells, defaults)
                    text = str(report) if report.passed else failure_text(report)
                    preload[check.key] = [report.passed, text]
                    passed = passed and report.passed
            self.verdicts[name] = passed
        nb = nbformat.v4.new_notebook()
        nb.cells.append(nbformat.v4.new_code_cell(preload_cell(preload)))
        return nb

    def after_grading(self, results):
        for name, passed in getattr(self, "verdicts", {}).items():
            if name in results.results:
                test = results.results[name]
                results.update_score(name, test.possible if passed else 0)


def test_cases(path: str) -> tuple:
    """(name, the code of each case) of an otter test file (OK format), read as data."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "test" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            spec = ast.literal_eval(node.value)
            codes = [c.get("code", "") for s in spec.get("suites", []) for c in s.get("cases", [])]
            return str(spec.get("name", os.path.basename(path)[:-3])), codes
    return os.path.basename(path)[:-3], []


def preload_cell(preload: dict) -> str:
    """The one cell otter runs: the verdicts as JSON text, given to the kernel's checks."""
    return (
        "import os, sys\n"
        "sys.path[:] = [p for p in sys.path if p not in ('', '.', os.getcwd())]\n"
        "import json\n"
        "from gradmagic.grade import _checks\n"
        f"_checks.preload(json.loads({json.dumps(preload)!r}))\n"
    )
