"""HIPS autograd's own test suite as a differential corpus (``tests/autograd_corpus.py``).

Every case is differentiated by gradmagic, by HIPS autograd and by central differences of
the plain numpy code (``tests/autograd_check.py``). A gradient gradmagic shows is right;
where it shows none, or a wrong one, it says so: no case is wrong without a mark.
``docs/numpy.md``'s table of functions is this run's (``scripts/numpy_status.py``).
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("autograd")

from autograd_check import END, START, run_all, status_table
from autograd_corpus import all_cases

CASES = all_cases()


@pytest.fixture(scope="module")
def outcomes():
    return run_all(CASES)


def _share(outcomes, complex_inputs):
    picked = [o for c, o in zip(CASES, outcomes) if c.complex == complex_inputs]
    return sum(o.status == "right" for o in picked) / len(picked), len(picked)


def _counts(outcomes) -> str:
    """The run's numbers: right, marked and wrong without a mark, real and complex apart."""
    parts = []
    for kind, is_complex in (("real", False), ("complex", True)):
        statuses = [o.status for c, o in zip(CASES, outcomes) if c.complex == is_complex]
        n = len(statuses)
        right, marked = statuses.count("right"), statuses.count("marked")
        parts.append(
            f"{kind} inputs: {right} right ({100 * right / n:.1f}%), {marked} marked, "
            f"{statuses.count('wrong')} wrong without a mark, of {n}"
        )
    return "; ".join(parts)


def test_no_case_is_wrong_without_a_mark(outcomes):
    wrong = [f"{c}: {o.detail}" for c, o in zip(CASES, outcomes) if o.status == "wrong"]
    assert not wrong, "\n".join([_counts(outcomes), *wrong])


def test_a_right_gradient_comes_with_no_warning(outcomes):
    warned = [f"{c}: {o.detail}" for c, o in zip(CASES, outcomes) if "said: " in o.detail]
    assert not warned, "\n".join(warned)


def test_real_inputs_are_right_in_99_percent_of_the_cases(outcomes):
    share, n = _share(outcomes, False)
    print(_counts(outcomes))
    marked = [f"{c}: {o.detail}" for c, o in zip(CASES, outcomes) if o.status == "marked"]
    assert n > 1000 and share >= 0.99, "\n".join([_counts(outcomes), *marked])


def test_complex_inputs_are_right_in_95_percent_of_the_cases(outcomes):
    """A complex input's gradient is HIPS autograd's: d/d(real part) − i d/d(imaginary part)."""
    share, n = _share(outcomes, True)
    marked = [
        f"{c}: {o.detail}" for c, o in zip(CASES, outcomes) if c.complex and o.status != "right"
    ]
    assert n > 150 and share >= 0.95, "\n".join([_counts(outcomes), *marked])


def test_hips_autograd_checks_most_cases(outcomes):
    """The cases HIPS autograd differentiates too are compared with its gradient as well."""
    without = [c for c, o in zip(CASES, outcomes) if "HIPS autograd gives no" in o.detail]
    assert len(without) < 0.05 * len(CASES), [str(c) for c in without]


def test_the_docs_table_is_this_runs(outcomes):
    path = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "numpy.md")
    with open(path) as f:
        page = f.read()
    assert START in page and END in page, "docs/numpy.md has no corpus table"
    shown = page[page.index(START) : page.index(END) + len(END)]
    assert shown == status_table(CASES, outcomes), "run python scripts/numpy_status.py"
