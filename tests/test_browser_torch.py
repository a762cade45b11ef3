"""A PyTorch run's live view in JupyterLab and Notebook 7, in headless Chromium: a 12-block GPT folded and
opened by a click, a box's statistics and its whole tensor asked of the kernel, the backward
pass stepped through torch's own nodes, and a wrong custom backward red at its op.

Marked ``browser`` (see tests/test_browser.py, whose server and page helpers it uses).
"""

from __future__ import annotations

import shutil
import time

import pytest

pytestmark = pytest.mark.browser

pytest.importorskip("torch")
browser_tests = pytest.importorskip("test_browser")  # (skips where Chromium is missing)

import torch_cells as cells  # noqa: E402
from chromium import launch, stop  # noqa: E402

sync_api = browser_tests.sync_api

CELLS = [
    "%load_ext gradmagic\n" + cells.GPT_SETUP + cells.BAD_FUNCTION_SETUP,
    "%%autograd\n" + cells.GPT_CELL.strip(),
    "%%autograd\n" + cells.BAD_FUNCTION_CELL.strip(),
]


def _notebook(path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, path)


@pytest.fixture(scope="module", params=["jupyterlab", "notebook"])
def lab(request, tmp_path_factory):
    app = request.param
    root = tmp_path_factory.mktemp(f"torch-{app}")
    (root / "nb").mkdir()
    _notebook(root / "nb" / "torch.ipynb")
    proc, log, base, token = browser_tests._serve(root, app)
    yield app, base, token
    stop(proc, log)
    shutil.rmtree(root, ignore_errors=True)


def test_a_pytorch_run_in_the_live_view(lab):
    app, base, token = lab
    with sync_api.sync_playwright() as pw:
        browser = launch(pw)
        try:
            _check(browser, app, base, token)
        finally:
            browser.close()


def _check(browser, app, base, token):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    browser_tests._open(page, browser_tests._url(app, base, token, "torch.ipynb"))
    browser_tests._run_all(page)
    views = browser_tests._views(page, 2)
    gpt, bad = views.nth(0), views.nth(1)
    assert "PyTorch run: target loss" in gpt.locator(".gm-headline").inner_text()
    key = gpt.locator(".gm-legend").first.inner_text()  # this graph's words, not a scalar graph's
    assert "parameter" in key and "folded" in key and "kink" not in key and "operation" not in key

    # the twelve blocks are one box; a click opens it one level (the kernel draws it again)
    fold = gpt.locator("g.node[data-kind='m']", has_text="Block x 12")
    fold.wait_for(timeout=30_000)
    assert fold.evaluate(browser_tests.IN_VIEW)  # the picture opens where the fold is
    boxes = gpt.locator("g.node").count()
    fold.click()
    page.wait_for_function(
        "() => [...[...document.querySelectorAll('.gm-root')][0]"
        ".querySelectorAll('g.node[data-kind=\"m\"]')].some(g => g.textContent.includes('Block x 11'))",
        timeout=60_000,
    )
    gpt = browser_tests._views(page, 2).nth(0)
    assert gpt.locator("g.node").count() > boxes
    assert gpt.locator("g.node", has_text="model.blocks.0.attn").count() >= 1
    # drawn again, it opens where the opened block is (the target is far from it)
    inside = gpt.locator("g.node", has_text="model.blocks.0.")
    assert any(inside.nth(k).evaluate(browser_tests.IN_VIEW) for k in range(inside.count()))
    browser_tests._shot(gpt, f"torch-view-{app}.png", docs=app == "jupyterlab")

    # a box's statistics on click, and its whole tensor from the kernel (the whole graph
    # fitted first: where a redrawn graph starts is the view's choice)
    gpt.locator("button", has_text="fit").first.click()
    gpt.locator("g.node[data-kind='v']", has_text="layer_norm").first.click()
    info = gpt.locator(".gm-info")
    assert "std" in info.inner_text() and "max|x|" in info.inner_text()
    gpt.locator(".gm-torch-whole").click()
    whole = gpt.locator(".gm-torch-tensor")
    whole.wait_for(state="visible", timeout=30_000)
    assert "numbers)" in whole.inner_text() and "gradient" in whole.inner_text()

    # the backward pass, torch's nodes in the order they ran
    gpt.locator(".gm-tab", has_text="Backward").click()
    stepper = gpt.locator(".gm-page[data-tab='backward']")
    stepper.locator(".gm-next").click()
    text = stepper.locator(".gm-steptext")
    page.wait_for_function(
        "() => document.querySelector('.gm-page[data-tab=\"backward\"] .gm-steptext')"
        "?.textContent.startsWith('Node 1 of')",
        timeout=10_000,
    )
    assert "NllLossBackward0" in text.inner_text()
    assert stepper.locator("g.gm-t-current").count() == 1
    for _ in range(3):
        stepper.locator(".gm-next").click()
    time.sleep(0.3)
    assert "Node 4 of" in text.inner_text()
    browser_tests._shot(gpt, f"torch-backward-{app}.png", docs=app == "jupyterlab")

    # the wrong custom backward: red at its box and in the checks
    red = bad.locator("g.node", has_text="gradient wrong: BadTanh")
    red.wait_for(timeout=30_000)
    assert "#dc2626" in red.inner_html()
    bad.locator(".gm-tab", has_text="Checks").click()
    fail = bad.locator(".gm-check-fail", has_text="BadTanh")
    fail.wait_for(timeout=10_000)
    assert fail.evaluate("e => getComputedStyle(e).color") == "rgb(220, 38, 38)"
    # (the front-end's own errors; Notebook 7 reports some of its own, as test_browser notes)
    assert not [e for e in errors if "gradmagic" in e.lower() or "gm-" in e], errors
    page.close()
