"""A class in one command: ``python -m gradmagic.grade`` over generated submissions (right,
wrong, crashing, hostile, crafted), two sandboxes at a time, with the gradebook checked."""

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gradmagic.grade import _classroom
from gradmagic.grade.__main__ import main

ROOT = Path(__file__).resolve().parents[1]

ASSIGNMENT = """from gradmagic.grade import check_answers, check_cell

QUESTION = "w = 0.5\\nb = -1.0\\nx = 2.0\\ny = 1.0\\nL = (w*x + b - y)**2\\nL"
check_cell("autograd", {"w": -4.0, "b": -2.0, "L.data": 1.0}, points=2, name="code")
check_answers("answers", QUESTION, name="answers")
"""
CODE = "w = 0.5\nb = -1.0\nx = 2.0\ny = 1.0\nL = (w*x + b - y)**2\nL"
HALF = CODE.replace("**2", "**2 / 2")
RIGHT = 'answers = {"w": -4.0, "b": -2.0}'
WRONG = 'answers = {"w": -2.0, "b": -2.0}'
FORGE = "\u2028✓ 3 of 3 correct\n✓ 2 of 2 correct\r\x1b[2K"
# the worker's shared memory, found by the cell and filled with a report of its own
FAKE_REPORT = (
    "import gc, json, mmap, os\n"
    "fake = json.dumps({'status': 'ran', 'target': 'L', 'branch_dependent': False, 'nodes': "
    "{'w': {'index': 0, 'data': 0.5, 'grad': {'shape': [1], 'values': [10**400]}}}, "
    "'notes': ['\\u2028✓ 3 of 3 correct\\n✓ 3 of 3 correct', '\\udc80']}).encode()\n"
    "for o in gc.get_objects():\n"
    "    if isinstance(o, mmap.mmap):\n"
    "        o[8:8 + len(fake)] = fake\n        o[:8] = len(fake).to_bytes(8, 'big')\n"
    "os._exit(0)\n"
)

# student -> (answers cell, code cell, expected score out of 3)
STUDENTS = {}
for i in range(10):
    STUDENTS[f"right{i}"] = (RIGHT if i % 2 else 'answers = {"w": -2 * 2.0, "b": -2.0}', CODE, 3)
for i in range(7):
    STUDENTS[f"wrong{i}"] = (WRONG, HALF, 0)
for i in range(4):
    STUDENTS[f"half{i}"] = (RIGHT, HALF, 1)
STUDENTS.update(
    {
        "raises": (RIGHT, CODE + f"\nraise ValueError({FORGE!r} + chr(0xdc80))", 1),
        "syntax": (RIGHT, "L = (", 1),
        "exits": (RIGHT, "import os\nos._exit(0)", 1),
        "loops": (RIGHT, "while True:\n    pass", 1),
        "answers run": ("import json\nanswers = dict(w=-4.0, b=-2.0)", HALF, 0),
        "forged report": (WRONG, FAKE_REPORT + HALF, 0),
        "signals pid 1": (
            WRONG,
            "import os, signal\nfor s in (2, 1, 3, 10, 12, 14, 15):\n    os.kill(1, s)\n" + HALF,
            0,
        ),
        "reads files": (
            WRONG,
            "import glob\nfound = glob.glob('/**/assignment.py', recursive=True)\n"
            "assert not found, found\n" + HALF,
            0,
        ),
        "stderr flood": (WRONG, f"import sys\nsys.stderr.write({FORGE!r} * 1000)\n" + HALF, 0),
    }
)
CRAFTED = {
    "a list": "[1, 2]",
    "cells an object": '{"cells": {"0": {"cell_type": "code", "source": "L = 1"}}}',
    "source a number": '{"cells": [{"cell_type": "code", "source": 5}]}',
    "source a list of numbers": '{"cells": [{"cell_type": "code", "source": [1, "x"]}]}',
    "not json": "%%autograd\nL = 1",
    "a cell a string": '{"cells": ["L = 1"]}',
    "surrogates": '{"cells": [{"cell_type": "code", "source": "\\udc80"}]}',
}


def notebook(answers: str, code: str) -> str:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "# A neuron"},
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": answers},
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": "%%autograd\n" + code},
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def make_class(folder: Path) -> None:
    for n, (student, (answers, code, _)) in enumerate(STUDENTS.items()):
        if n % 2:  # nbgrader's layout: submitted/STUDENT/ASSIGNMENT/NOTEBOOK
            (folder / student / "ps1").mkdir(parents=True)
            (folder / student / "ps1" / "neuron.ipynb").write_text(notebook(answers, code))
        else:
            (folder / f"{student}.ipynb").write_text(notebook(answers, code))
    for student, text in CRAFTED.items():
        (folder / f"{student}.ipynb").write_text(text)
    (folder / "mallory" / "gradmagic").mkdir(parents=True)  # a package beside the notebook
    (folder / "mallory" / "gradmagic" / "__init__.py").write_text("check_cell = print\n")
    (folder / "mallory" / "neuron.ipynb").write_text(notebook(WRONG, HALF))
    (folder / "empty").mkdir()  # handed in nothing
    (folder / "linked.ipynb").symlink_to(folder / "right0.ipynb")  # a link is not followed


def strict_json(text: str):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.slow
def test_the_class_command_grades_every_submission(tmp_path, monkeypatch):
    subs, out = tmp_path / "submitted", tmp_path / "out"
    subs.mkdir()
    make_class(subs)
    (tmp_path / "assignment.py").write_text(ASSIGNMENT)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = ["assignment.py", "submitted", "-o", "out", "-j", "2", "--timeout", "4"]
    done = subprocess.run(
        [sys.executable, "-m", "gradmagic.grade", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    students = len(STUDENTS) + len(CRAFTED) + 3
    assert students == 40
    assert f"{students} students graded" in done.stdout and f"{students}/{students}" in done.stderr

    book = strict_json((out / "gradebook.json").read_text(encoding="utf-8"))["students"]
    want = {s: float(score) for s, (_, _, score) in STUDENTS.items()}
    want.update({s: 0.0 for s in list(CRAFTED) + ["mallory", "empty", "linked"]})
    assert {s: e["score"] for s, e in book.items()} == want
    assert all(e["possible"] == 3.0 for e in book.values())
    outcomes = {s: [c["outcome"] for c in e["checks"]] for s, e in book.items()}
    assert outcomes["loops"] == ["timeout", "pass"] and outcomes["syntax"] == ["error", "pass"]
    assert outcomes["exits"] == ["crash", "pass"] and outcomes["wrong0"] == ["wrong", "wrong"]
    assert outcomes["answers run"][1] == "error" and outcomes["a list"] == ["error", "error"]

    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert {s: float(r["score"]) for s, r in rows.items()} == want
    assert rows["half0"]["code"] == "wrong" and rows["half0"]["answers"] == "pass"

    verdict = re.compile(r"^[✓✗⚠] \d+ of \d+ correct")
    for student in want:
        text = (out / "reports" / (_classroom._file_name(student) + ".txt")).read_text("utf-8")
        strict_json((out / "reports" / (_classroom._file_name(student) + ".json")).read_text())
        sections = text.count("\n== ") + text.startswith("== ")
        assert sum(bool(verdict.match(line)) for line in text.splitlines()) == sections
        assert "\u2028" not in text and "\x1b" not in text and "\r" not in text
    (crafted,) = (out / "reports").glob("source_a_number*.txt")
    assert "cell 1's source is not text" in crafted.read_text()
    assert "no notebook was handed in" in (out / "reports" / "empty.txt").read_text()

    # run again: nothing changed, nothing graded; one changed notebook is graded again
    (subs / "wrong0.ipynb").write_text(notebook(RIGHT, CODE))
    monkeypatch.chdir(tmp_path)
    totals = []
    bar = _classroom.progress_bar
    monkeypatch.setattr(_classroom, "progress_bar", lambda: lambda d, t: totals.append(t))
    assert main(args) == 0
    assert totals[0] == 1  # wrong0 alone
    monkeypatch.setattr(_classroom, "progress_bar", bar)
    book = strict_json((out / "gradebook.json").read_text(encoding="utf-8"))["students"]
    assert book["wrong0"]["score"] == 3.0 and len(book) == students


@pytest.mark.parametrize("expected", [None, {"w": -4.0}])
def test_a_missing_cell_is_a_failing_report_with_or_without_answers(expected):
    """``check_cell(cell)`` with no answers grades a learner's own engine; the cell missing
    from a submission is an error row saying so, never a raised TypeError."""
    from gradmagic.grade._checks import run_check
    from gradmagic.grade._notebook import Check

    report = run_check(Check("cell", ("q9", expected), {}), [])
    assert report.outcome == "error" and not report.passed
    assert "no code cell 'q9'" in str(report)


def test_the_modules_beside_a_students_notebook_are_graded_with_it(tmp_path):
    """A learner's engine kept in ``engine.py`` beside the notebook is judged in the sandbox
    as one the cell defines; a notebook handed in alone has no modules of its own."""
    from learner_engines import SCALAR, buggy

    cell = "%%autograd\nfrom engine import Num\na = Num(0.5, label='a')\nb = (a + a).tanh() * a\n"
    cell += "b.backward()\nb"
    subs = tmp_path / "submitted"
    for student, engine in {"right": SCALAR, "equals": buggy("add_overwrites")}.items():
        (subs / student / "ps1").mkdir(parents=True)
        (subs / student / "ps1" / "neuron.ipynb").write_text(notebook(RIGHT, cell[11:]))
        (subs / student / "ps1" / "engine.py").write_text(engine)
    (subs / "alone.ipynb").write_text(notebook(RIGHT, cell[11:]))
    (subs / "engine.py").write_text(SCALAR)  # the class's folder: nobody's own
    assert _classroom.modules(str(subs / "alone.ipynb"), str(subs)) == {}
    assert _classroom.modules(str(subs / "right" / "ps1" / "neuron.ipynb"), str(subs)) == {
        "engine.py": SCALAR
    }
    (tmp_path / "assignment.py").write_text(
        "from gradmagic.grade import check_cell\ncheck_cell('autograd', None, name='engine')\n"
    )
    book = _classroom.grade_class(str(tmp_path / "assignment.py"), str(subs), str(tmp_path / "o"))
    outcomes = {s: e["checks"][0]["outcome"] for s, e in book["students"].items()}
    assert outcomes == {"right": "pass", "equals": "wrong", "alone": "error"}, outcomes
    report = (tmp_path / "o" / "reports" / "equals.txt").read_text()
    assert "✗" in report and "look at that backward" in report
