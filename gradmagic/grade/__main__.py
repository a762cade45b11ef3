"""``python -m gradmagic.grade ASSIGNMENT SUBMISSIONS``: grade a class (see ``--help``)."""

from __future__ import annotations

import argparse
import sys

from . import FEEDBACK, MEMORY, TIMEOUT, SandboxUnavailable, _sandbox
from . import _classroom
from ._classroom import GRADEBOOK, REPORTS, TABLE, grade_class

DESCRIPTION = f"""Grade every submitted notebook in SUBMISSIONS against the checks that
ASSIGNMENT declares (lines such as check_cell("autograd", {{"w": -4.0}}, points=2) or
check_answers("answers", QUESTION); the file is read, not run). Each submission is
SUBMISSIONS/STUDENT.ipynb or a notebook under SUBMISSIONS/STUDENT/ (the .py modules in its
folder come with it). Its cells are read as text and each check runs in gradmagic's
sandbox, JOBS at a time. Results go to OUT:
{GRADEBOOK} and {TABLE} (one row per student, written after each one), and
{REPORTS}/STUDENT.txt and .json (the reports to hand back). Run again, it grades only the
students whose notebook or modules changed since."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradmagic.grade", description=DESCRIPTION)
    parser.add_argument("assignment", help="the file that declares the checks")
    parser.add_argument("submissions", help="the folder of submissions")
    parser.add_argument("-o", "--out", default="gradebook", help="output folder (./gradebook)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="sandboxes at a time (2)")
    parser.add_argument("--notebook", help="the notebook's file name in a student's folder")
    parser.add_argument("--feedback", choices=FEEDBACK, default="full", help="what reports show")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per check")
    parser.add_argument("--memory", type=int, default=MEMORY, help="MiB per check")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    why = _sandbox.unavailable()
    if why is not None:
        print(f"gradmagic.grade: {SandboxUnavailable.__name__}: {why}", file=sys.stderr)
        return 2
    defaults = {"feedback": args.feedback, "timeout": args.timeout, "memory": args.memory}
    try:
        book = grade_class(
            args.assignment,
            args.submissions,
            args.out,
            jobs=args.jobs,
            notebook=args.notebook,
            defaults=defaults,
            progress=None if args.quiet else _classroom.progress_bar(),
        )
    except (OSError, ValueError) as exc:
        print(f"gradmagic.grade: {exc}", file=sys.stderr)
        return 2
    students = book["students"]
    full = sum(1 for e in students.values() if e["score"] == e["possible"])
    print(f"{len(students)} students graded, {full} with full marks: {args.out}/{TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
