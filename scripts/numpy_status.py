"""Write docs/numpy.md's table of numpy functions and their status from the corpus run.

Runs every case of tests/autograd_corpus.py (gradmagic, HIPS autograd and central
differences; see tests/autograd_check.py) and puts the table between the page's markers.
Usage: python scripts/numpy_status.py (HIPS autograd installed; the test extra has it).
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

from autograd_check import END, START, run_all, status_table  # noqa: E402
from autograd_corpus import all_cases  # noqa: E402


def main() -> None:
    cases = all_cases()
    table = status_table(cases, run_all(cases))
    path = os.path.join(ROOT, "docs", "numpy.md")
    with open(path) as f:
        page = f.read()
    if START not in page:
        raise SystemExit(f"{path} has no line {START!r} to put the table after")
    head, rest = page.split(START, 1)
    tail = rest.split(END, 1)[1] if END in rest else rest
    with open(path, "w") as f:
        f.write(head + table + tail)
    print(table.splitlines()[2])


if __name__ == "__main__":
    main()
