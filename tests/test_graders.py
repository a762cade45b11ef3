"""gradmagic.grade inside the real graders: nbgrader's autograde and otter-grader's `otter run`.

Each test builds a small assignment in a temporary directory (the files are in
tests/graders/), runs the grader's own command line on a right and a wrong submission, and
reads the scores the grader recorded (nbgrader's gradebook, otter's results JSON). The graders
run the notebooks in a real Jupyter kernel, so these tests also show that `%%autograd --expect`
and an isolated grade() work under them. Both graders are test-only extras (`test` in
pyproject.toml).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

HERE = Path(__file__).resolve().parent / "graders"
ROOT = Path(__file__).resolve().parents[1]

# The question: L = (w*x + b - y)**2 at w = 0.5, b = -1, x = 2, y = 1.
# z = w*x + b = 0, L = (z - y)**2 = 1, dL/dz = 2(z - y) = -2, dL/dw = -2x = -4, dL/db = -2.
RIGHT_CODE = "w = 0.5\nb = -1.0\nx = 2.0\ny = 1.0\nL = (w*x + b - y)**2\nL"
WRONG_CODE = "w = 0.5\nb = -1.0\nx = 2.0\ny = 1.0\nL = (w*x + b - y)**2 / 2\nL"  # halves all
RIGHT_ANSWERS = 'answers = {"w": -4.0, "b": -2.0}'
WRONG_ANSWERS = 'answers = {"w": -2.0, "b": -2.0}'  # forgot the factor x in dL/dw


def start(args, cwd):
    """Start a grader's command line (this venv's scripts first on PATH)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    return subprocess.Popen(
        args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def finish(proc, timeout=180):
    """Wait for a started command; its output in the failure message if it failed."""
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"{proc.args}\n{out[-3000:]}\n{err[-5000:]}"


def run(args, cwd):
    """Run a grader's command line to its end."""
    finish(start(args, cwd))


def fill(nb, cell_id: str, source: str):
    """Put a student's answer into the cell nbgrader calls ``cell_id``."""
    (cell,) = [
        c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cell_id
    ]
    first, _, _ = cell.source.partition("\n")
    cell.source = f"{first}\n{source}" if first.startswith("%%autograd") else source


# =========================================================================== nbgrader
# a package beside the notebook: in a kernel run in the submission's folder it would be the
# gradmagic the teacher's test cells import, and pass everything
FAKE_PACKAGE = (
    "class _Passing:\n    passed = True\n    def assert_passed(self):\n        pass\n"
    "def grade(*args, **kwargs):\n    return _Passing()\n"
    "check_cell = check_answers = lambda *args, **kwargs: None\n"
)
# a cell that copies the answers from the teacher's source notebook by a relative path
STEAL = (
    "import glob, json, re\nfound = ''\n"
    "for p in glob.glob('../../../**/*.ipynb', recursive=True) + glob.glob('/**/*.ipynb'):\n"
    "    found += open(p).read()\n"
    "w = 0.5\nb = -1.0\nx = 2.0\ny = 1.0\nL = (w*x + b - y)**2 / (1 if 'BEGIN HIDDEN' in found else 2)\nL"
)


@pytest.mark.slow
def test_nbgrader_autograde_scores_a_right_and_a_wrong_submission(tmp_path):
    pytest.importorskip("nbgrader")
    course = tmp_path / "course"
    shutil.copytree(HERE / "nbgrader", course)
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text().replace("COURSE_ROOT", str(course))
    )
    run([sys.executable, "-m", "nbgrader", "generate_assignment", "ps1", "--create"], course)
    release = course / "release" / "ps1" / "neuron.ipynb"
    student_nb = nbformat.read(release, as_version=4)
    text = json.dumps(student_nb)
    assert "-4.0" not in text and "BEGIN HIDDEN TESTS" not in text  # answers and tests removed
    assert "%%autograd --expect answers" in text

    subs = {
        "alice": (RIGHT_ANSWERS, RIGHT_CODE),
        "bob": (WRONG_ANSWERS, WRONG_CODE),
        "carol": (WRONG_ANSWERS, RIGHT_CODE),
        "mallory": (WRONG_ANSWERS, WRONG_CODE),  # and a gradmagic package beside it
        "trudy": ("import json\nanswers = json.load(open('answers.json'))", STEAL),
    }
    for student, (answers, code) in subs.items():
        nb = nbformat.read(release, as_version=4)
        fill(nb, "answers", answers)
        fill(nb, "code", code)
        folder = course / "submitted" / student / "ps1"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "neuron.ipynb")
    (course / "submitted" / "mallory" / "ps1" / "gradmagic").mkdir()
    (course / "submitted" / "mallory" / "ps1" / "gradmagic" / "__init__.py").write_text(
        FAKE_PACKAGE
    )
    (course / "submitted" / "trudy" / "ps1" / "answers.json").write_text('{"w": -4, "b": -2}')
    run([sys.executable, "-m", "nbgrader", "autograde", "ps1", "--create"], course)

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission("ps1", s).score for s in subs}
        by_test = {
            s: {g.name: g.score for g in gb.find_submission_notebook("neuron", "ps1", s).grades}
            for s in subs
        }
        assert gb.find_assignment("ps1").max_score == 2
    assert scores == {"alice": 2.0, "bob": 0.0, "carol": 1.0, "mallory": 0.0, "trudy": 0.0}
    assert by_test["carol"] == {"test_answers": 0.0, "test_code": 1.0}
    # the autograded notebooks show why: the failure names the wrong answer
    outputs = {}
    for student in ("alice", "bob", "trudy"):
        graded = nbformat.read(course / "autograded" / student / "ps1" / "neuron.ipynb", 4)
        for c in graded.cells:
            test = c.metadata.get("nbgrader", {}).get("grade_id", "")
            if test.startswith("test_"):
                outputs[student, test] = "\n".join(
                    "\n".join(o.get("traceback", [])) + o.get("text", "") for o in c.outputs
                )
    assert "AssertionError" in outputs["bob", "test_code"]
    assert "expected -4, got -2" in outputs["bob", "test_code"]
    assert "✓ 3 of 3 correct" in outputs["alice", "test_code"]
    assert "is not written as a dict of numbers" in outputs["trudy", "test_answers"]
    # nothing ran in a kernel: the student cells have no outputs
    graded = nbformat.read(course / "autograded" / "mallory" / "ps1" / "neuron.ipynb", 4)
    assert all(not c.get("outputs") for c in graded.cells if "test_" not in str(c.metadata))


# =========================================================================== otter-grader
@pytest.mark.slow
def test_otter_run_scores_a_right_and_a_wrong_submission(tmp_path):
    pytest.importorskip("otter")
    source = HERE / "otter"
    autograder = tmp_path / "autograder.zip"
    # what `otter generate` writes, without its requirements and setup for Gradescope's image
    with zipfile.ZipFile(autograder, "w") as z:
        z.write(source / "otter_config.json", "otter_config.json")
        for test in sorted((source / "tests").glob("*.py")):
            z.write(test, f"tests/{test.name}")
    runs = {}
    plant = (  # a cell that would put a passing gradmagic beside the notebook, if it ran
        "import os\nos.makedirs('gradmagic', exist_ok=True)\n"
        f"open('gradmagic/__init__.py', 'w').write({FAKE_PACKAGE!r})\n"
    )
    for student, (answers, code) in {
        "right": (RIGHT_ANSWERS, RIGHT_CODE),
        # and hostile: right answers if the cell ran; read as text, not a dict of numbers
        "wrong": (plant + "answers = dict(w=-4.0, b=-2.0)", WRONG_CODE),
    }.items():
        nb = nbformat.read(source / "neuron.ipynb", as_version=4)
        for cell in nb.cells:
            if cell.source == "answers = ...":
                cell.source = answers
            elif cell.source.startswith("%%autograd") and "..." in cell.source:
                cell.source = cell.source.replace("...", code)
        folder = tmp_path / student
        folder.mkdir()
        nbformat.write(nb, folder / "neuron.ipynb")
        runs[student] = (
            folder,
            start(
                [
                    sys.executable,
                    "-m",
                    "otter",
                    "run",
                    "-a",
                    str(autograder),
                    "-o",
                    str(folder),
                    "--no-logo",
                    str(folder / "neuron.ipynb"),
                ],
                tmp_path,
            ),
        )
    results = {}
    for student, (folder, proc) in runs.items():  # the two runs go side by side
        finish(proc)
        results[student] = json.loads((folder / "results.json").read_text())
    scores = {
        student: {t["name"]: t["score"] for t in r["tests"] if "score" in t}
        for student, r in results.items()
    }
    assert scores == {"right": {"q1": 1.0, "q2": 1.0}, "wrong": {"q1": 0.0, "q2": 0.0}}
    # otter shows why: the answers were not run, the code's wrong answer, expected and got
    output = {t["name"]: t["output"] for t in results["wrong"]["tests"]}
    assert "'answers' is not written as a dict of numbers" in output["q1"]
    assert "'w' (node #5): expected -4, got -2" in output["q2"]  # the student's code gives -2


# =========================================================================== the docs' class
def test_the_docs_assignment_grades_a_class(tmp_path, monkeypatch):
    """The checks in docs/grading.md, graded by the class command on three submissions
    (right, wrong, no %%autograd cell): none of the notebooks is run, one row each."""
    import csv

    from gradmagic.grade.__main__ import main

    text = (ROOT / "docs" / "grading.md").read_text()
    checks = text.split("### The checks", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "assignment.py").write_text(checks)
    for student, code in {"alice": RIGHT_CODE, "bob": WRONG_CODE, "carol": None}.items():
        nb = nbformat.v4.new_notebook()
        nb.cells.append(nbformat.v4.new_code_cell("import os\nos.remove('assignment.py')"))
        nb.cells.append(nbformat.v4.new_code_cell(RIGHT_ANSWERS))
        if code is not None:
            nb.cells.append(nbformat.v4.new_code_cell("%%autograd --expect answers\n" + code))
        folder = tmp_path / "submitted" / student
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "neuron.ipynb")
    monkeypatch.chdir(tmp_path)
    assert main(["assignment.py", "submitted", "-q"]) == 0
    with open(tmp_path / "gradebook" / "gradebook.csv", newline="") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert {s: (r["code"], r["answers"]) for s, r in rows.items()} == {
        "alice": ("pass", "pass"),
        "bob": ("wrong", "pass"),
        "carol": ("error", "pass"),
    }
    assert {s: float(r["score"]) for s, r in rows.items()} == {"alice": 3, "bob": 1, "carol": 1}
    assert (tmp_path / "assignment.py").exists()  # no cell ran
    assert "no code cell 'autograd'" in (tmp_path / "gradebook/reports/carol.txt").read_text()
    full = (tmp_path / "gradebook/reports/bob.txt").read_text()
    assert "-4" in full and "-2" in full  # what was expected, what was got
    # verdicts only: bob learns which answers are wrong, not what is right
    assert (
        main(["assignment.py", "submitted", "-q", "-o", "verdicts", "--feedback", "verdicts"]) == 0
    )
    verdicts = (tmp_path / "verdicts/reports/bob.txt").read_text()
    assert "✗ w: wrong" in verdicts and "-4" not in verdicts and "-2" not in verdicts
    report = json.loads((tmp_path / "verdicts/reports/bob.json").read_text())
    assert "-4" not in json.dumps(report) and report[0]["feedback"] == "verdicts"


def test_nbgraders_step_scores_what_the_test_cells_declare():
    """GradeCells alone: a test cell that declares no check scores 0 and says why; with
    feedback "verdicts" a failing cell's output names the wrong answer, not its value."""
    pytest.importorskip("nbgrader")
    from nbgrader.utils import determine_grade

    from gradmagic.grade.nbgrader import GradeCells

    def test_cell(source):
        meta = {"nbgrader": {"grade": True, "solution": False, "points": 1, "grade_id": "t"}}
        return nbformat.v4.new_code_cell(source, metadata=meta)

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%%autograd\n" + WRONG_CODE),
        test_cell('check_cell("autograd", {"w": -4.0, "b": -2.0})'),
        test_cell("assert answers['w'] == -4.0"),
        test_cell('check_cell("autograd", {"b": -1.0})'),
    ]
    step = GradeCells(feedback="verdicts")
    nb, _ = step.preprocess(nb, {})
    scores = [determine_grade(c)[0] for c in nb.cells[1:]]
    assert scores == [0, 0, 1.0]
    failed = "\n".join(nb.cells[1].outputs[0]["traceback"])
    assert "✗ w: wrong" in failed and "-4" not in failed and "-2" not in failed
    assert "declares no check_cell()" in nb.cells[2].outputs[0]["evalue"]
