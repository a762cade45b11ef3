"""gradmagic.autograd's view in marimo: a marimo notebook served by marimo, driven in Chromium.

Marked ``browser`` (Debian's Chromium at /usr/bin/chromium, Playwright); skipped without the
``marimo`` extra. The server runs with Graphviz's ``dot`` hidden: the view lays the graph out in
the browser.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
from chromium import CHROMIUM, CUT_AT_LEFT, launch, stop

NOTEBOOK = ROOT / "examples" / "marimo_autograd.py"

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("marimo")
pytest.importorskip("anywidget")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _path_without_dot() -> str:
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "dot").exists()
    ]
    return os.pathsep.join([str(Path(sys.executable).parent)] + keep)


@pytest.fixture(scope="module")
def marimo_app(tmp_path_factory):
    root = tmp_path_factory.mktemp("marimo")
    yield from _serve(NOTEBOOK, root)


def _serve(notebook: Path, root: Path):
    """``marimo run`` of ``notebook`` on loopback, without ``dot``: yields its address."""
    port = _free_port()
    log = open(root / "server.log", "w")
    env = {
        **os.environ,
        "PATH": _path_without_dot(),
        "MARIMO_SKIP_UPDATE_CHECK": "1",
        "HOME": str(root),
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "marimo",
            "run",
            str(notebook),
            "--headless",
            "--no-token",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-sandbox",
            "--no-check",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=root,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{base}/health", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                log.close()
                pytest.fail("marimo did not start:\n" + (root / "server.log").read_text()[-3000:])
            time.sleep(0.3)
    yield base
    stop(server, log)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = launch(pw)
        yield b
        b.close()


def _docs_shot(page, top, bottom, name: str) -> None:
    """With GRADMAGIC_DOCS_SHOTS=1, the smallest part of the page holding ``top`` and
    ``bottom`` (the app's column) in docs/img/``name``."""
    if os.environ.get("GRADMAGIC_DOCS_SHOTS") != "1":
        return
    both = top.evaluate_handle(
        "(a, b) => { let p = a; while (!p.contains(b)) p = p.parentElement; return p; }",
        bottom.element_handle(),
    )
    page.mouse.move(0, 0)  # (no hover box in the picture)
    both.as_element().screenshot(path=str(ROOT / "docs" / "img" / name))


def test_the_view_draws_in_marimo_and_a_click_shows_the_path(marimo_app, browser):
    expect = sync_api.expect
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(marimo_app)
    # the view draws its graph (Graphviz in the browser: no dot on the server's PATH); marimo
    # puts it in a shadow root, which Playwright's locators pierce
    view = page.locator(".gm-root[data-drawn]").first
    view.wait_for(timeout=120_000)
    tabs = [t.strip() for t in view.locator(".gm-tab").all_text_contents()]
    assert tabs[:4] == ["Graph", "Gradients", "Check", "Backward"]
    assert "loss = 0.25" in view.inner_text()
    graph = view.locator(".gm-page[data-tab=graph]")
    values = graph.locator("svg g.node[data-kind=v]")
    assert values.count() >= 5
    # the input w: brought into view from the list, then clicked in the graph
    picker = view.locator(".gm-picker")
    option = picker.locator("option").filter(has_text="w ").first
    picker.select_option(option.get_attribute("value"))
    w_node = values.filter(has_text="data 0.5").first
    w_node.click()
    expect(view).not_to_have_attribute("data-selected", "-1")
    info = view.locator(".gm-info").inner_text()
    assert "w" in info and "incoming gradient" in info
    # its path to the target (w, its products, tanh, ..., loss) is highlighted
    assert graph.locator("svg g.gm-path").count() >= 6
    verdict = page.get_by_text("check: all 2 gradients match finite differences")
    expect(verdict).to_be_visible()
    _docs_shot(page, page.get_by_text("gradmagic in marimo").first, verdict, "marimo.png")
    # the check is there: its tab lists each input against a finite difference, all passing
    view.locator(".gm-tab", has_text="Check").click()
    check = view.locator(".gm-page[data-tab=check]")
    expect(check).to_be_visible()
    text = check.inner_text()
    assert "w" in text and "b" in text and "pass" in text and "fail" not in text
    # and the notebook's own line, from run.check()
    expect(page.get_by_text("check: all 2 gradients match finite differences")).to_be_visible()
    build = ROOT / "build"
    build.mkdir(exist_ok=True)
    page.screenshot(path=str(build / "marimo.png"), full_page=True)
    assert not errors, errors


# a PyTorch function given to gradmagic.autograd in marimo: recorded as the magic records a
# PyTorch cell, its view the PyTorch view
TORCH_APP = """import marimo

app = marimo.App()


@app.cell
def _():
    import marimo as mo
    import torch

    import gradmagic

    return gradmagic, mo, torch


@app.cell
def _(gradmagic, torch):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    X = torch.randn(16, 3)
    y = torch.randn(16, 1)

    def mse(net, X, y):
        out = net(X)
        return ((out - y) ** 2).mean()

    run = gradmagic.autograd(mse)(net, X, y)
    return (run,)


@app.cell
def _(mo, run):
    mo.ui.anywidget(run.view())
    return


@app.cell
def _(mo, run):
    mo.md(f"whole-cell check: {run.checks['whole']['status']}")
    return


if __name__ == "__main__":
    app.run()
"""


def test_a_pytorch_function_in_marimo_shows_the_pytorch_view(tmp_path, browser):
    pytest.importorskip("torch")
    notebook = tmp_path / "torch_app.py"
    notebook.write_text(TORCH_APP)
    serving = _serve(notebook, tmp_path)
    base = next(serving)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base)
        view = page.locator(".gm-root[data-drawn]").first
        view.wait_for(timeout=180_000)
        assert "PyTorch run: target mse" in view.locator(".gm-headline").inner_text()
        tabs = [t.strip() for t in view.locator(".gm-tab").all_text_contents()]
        assert tabs[:3] == ["Graph", "Backward", "Checks"]
        drawn = " ".join(view.locator(".gm-page[data-tab=graph] svg text").all_text_contents())
        assert "net.0" in drawn and "net.2" in drawn  # the modules by their paths
        # opened at the target, the picture starts past the boxes it would cut in half
        assert view.locator(".gm-page[data-tab=graph]").evaluate(CUT_AT_LEFT) == []
        sync_api.expect(page.get_by_text("whole-cell check: pass")).to_be_visible()
        view.locator(".gm-tab", has_text="Checks").click()
        checks = view.locator(".gm-page[data-tab=checks]")
        sync_api.expect(checks).to_contain_text("Whole cell")
        view.locator(".gm-tab", has_text="Graph").click()
        build = ROOT / "build"
        build.mkdir(exist_ok=True)
        page.mouse.move(0, 0)
        view.screenshot(path=str(build / "marimo-torch.png"))
        if os.environ.get("GRADMAGIC_DOCS_SHOTS") == "1":
            shutil.copyfile(build / "marimo-torch.png", ROOT / "docs" / "img" / "marimo-torch.png")
        assert not errors, errors
        page.close()
    finally:
        serving.close()
