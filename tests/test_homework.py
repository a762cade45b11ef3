"""The homework notebook (demo_notebooks/03_homework.ipynb) runs clean, and shows verdicts."""

from pathlib import Path

import pytest

pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "demo_notebooks" / "03_homework.ipynb"


@pytest.fixture(scope="module")
def cells():
    if not NOTEBOOK.exists():
        pytest.skip(f"{NOTEBOOK} is absent (python scripts/make_notebooks.py writes it)")
    from gradmagic.demo import execute

    nb = execute(NOTEBOOK, timeout=300)
    return [c for c in nb.cells if c.cell_type == "code"]


def output_text(cell) -> str:
    parts = []
    for out in cell.outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        elif "data" in out:
            parts.append(out.data.get("text/plain", ""))
    return "\n".join(parts)


def cell_with(cells, start: str):
    (found,) = [c for c in cells if c.source.startswith(start)]
    return found


@pytest.mark.slow
def test_no_cell_errors_or_writes_to_stderr(cells):
    for cell in cells:
        kinds = {out.output_type for out in cell.outputs}
        assert "error" not in kinds, cell.source
        assert not [o for o in cell.outputs if o.get("name") == "stderr"], cell.source


@pytest.mark.slow
def test_the_students_answers_are_checked_in_an_answers_tab(cells):
    right = cell_with(cells, "%%autograd --expect answers")
    static, shown = [o for o in right.outputs if "data" in o]  # the static copy, the widget
    assert "application/vnd.jupyter.widget-view+json" in shown.data
    assert "✓ 4 of 4 correct" in shown.data["text/plain"]
    html = static.data["text/html"]
    assert "<summary><b>Answers</b></summary>" in html and "4 of 4 correct" in html
    wrong = cell_with(cells, '%%autograd --expect "x=-2')
    copy = [o for o in wrong.outputs if "data" in o][0].data["text/plain"]  # the static copy
    assert "✗ 1 of 4 correct" in copy and copy.count("✗") == 4  # the verdict and 3 rows
    assert "✗ 1 of 4 correct" in output_text(wrong)


@pytest.mark.slow
def test_the_torch_cell_adds_pytorch_or_says_how_to_install_it(cells):
    text = output_text(cell_with(cells, "%%autograd --torch"))
    assert "PyTorch" in text and ("agrees on all" in text or "pip install torch" in text)


@pytest.mark.slow
def test_hidden_test_cell_passes_silently_and_wrong_answers_print_a_report(cells):
    hidden = cell_with(cells, "### BEGIN HIDDEN TESTS")
    assert "gradmagic.grade(" in hidden.source and ".assert_passed()" in hidden.source
    assert hidden.outputs == []
    wrong = output_text(cell_with(cells, "wrong = "))
    assert "✗ 1 of 4 correct" in wrong and "∂L/∂x" in wrong and wrong.rstrip().endswith("False")
    broken = output_text(cell_with(cells, "broken = "))
    assert "NameError on line 2" in broken and "q = x*y" in broken


@pytest.mark.slow
def test_a_students_code_is_graded_in_a_separate_process_and_misbehaviour_is_named(cells):
    cubed = output_text(cell_with(cells, "student = "))
    assert "✗ 0 of 4 correct" in cubed and "'wrong'" in cubed
    hostile = output_text(cell_with(cells, "hostile = "))
    lines = [line for line in hostile.splitlines() if line.strip()]
    assert [line.split()[0] for line in lines] == ["timeout", "crash", "memory", "error"]
    assert "time limit of 2 s" in lines[0] and "exit code 0" in lines[1]
    assert "KeyboardInterrupt on line 1" in lines[3]
