"""Every demo notebook runs top to bottom, shows its runs, and is saved as it runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "demo_notebooks").glob("*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"


def _autograd_cells(nb):
    """Code cells that run %%autograd and should display a run (not -q/--quiet)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        first = cell.source.splitlines()[0] if cell.source else ""
        if first.startswith("%%autograd") and not {"-q", "--quiet"} & set(first.split()):
            yield cell


def _load_script():
    spec = importlib.util.spec_from_file_location(
        "make_notebooks", ROOT / "scripts" / "make_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_four_demos_exist():
    names = {p.name for p in NOTEBOOKS}
    assert {
        "01_backprop_tour.ipynb",
        "02_training_mlp.ipynb",
        "03_homework.ipynb",
        "04_tensors.ipynb",
    } <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_with_views(path):
    from gradmagic.demo import execute

    nb = execute(path)
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors, [f"{e.ename}: {e.evalue}" for e in errors]
    stderr = [
        o.text
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "stream" and o.name == "stderr"
    ]
    assert not stderr, stderr
    runs = list(_autograd_cells(nb))
    assert runs, "a demo notebook shows at least one %%autograd run"
    for cell in runs:
        shown = [o for o in cell.outputs if o.output_type in ("execute_result", "display_data")]
        assert shown, f"no display for:\n{cell.source}"
        data = shown[-1].data  # the widget, after its static copy
        assert {WIDGET, "text/plain"} <= set(data), cell.source
        static = shown[-2].data["text/html"]
        assert "gradmagic-static" in static and "<img" in static, cell.source
    assert nb.metadata.get("widgets"), "widget state is stored"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_saved_notebook_keeps_outputs_and_widget_state(path):
    """The committed notebooks read well on GitHub: outputs and widget state are saved."""
    nb = nbformat.read(path, as_version=4)
    runs = list(_autograd_cells(nb))
    assert all(cell.outputs for cell in runs), f"{path.name} was saved without outputs"
    state = (
        nb.metadata.get("widgets", {})
        .get("application/vnd.jupyter.widget-state+json", {})
        .get("state", {})
    )
    assert state, f"{path.name} was saved without widget state"
    for cell in runs:
        # the live view's output (the static copy is a display_data of its own before it)
        views = [
            o.data
            for o in cell.outputs
            if o.output_type in ("execute_result", "display_data") and WIDGET in o.data
        ]
        assert views, f"{path.name}: a run was saved without its live view"
        assert views[0][WIDGET]["model_id"] in state
    # an untrusted notebook (as a fresh clone opens) strips inline <svg> and prints its text;
    # every saved drawing is an <img> instead
    html = [
        o.data["text/html"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "text/html" in o.get("data", {})
    ]
    assert html and not any("<svg" in h for h in html), f"{path.name} has inline <svg> output"


def test_saved_notebooks_match_their_source_script():
    """demo_notebooks/ is built by scripts/make_notebooks.py: the two never drift apart."""
    script = _load_script()
    for name, cells in script.NOTEBOOKS.items():
        nb = nbformat.read(ROOT / "demo_notebooks" / name, as_version=4)
        assert [(c.cell_type.replace("markdown", "md"), c.source) for c in nb.cells] == [
            (kind, text) for kind, text in cells
        ], name
