"""What a person sees: JupyterLab in headless Chromium, driven by Playwright.

Marked ``browser``: ``pytest -m browser`` runs only these, ``-m "not browser"``
skips them. They need Debian's Chromium at /usr/bin/chromium (``make test``
installs it) and the ``test`` extra (jupyterlab, playwright).
"""
from __future__ import annotations

import json
import os
import secrets
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
CHROMIUM = "/usr/bin/chromium"
TOUR = "01_backprop_tour.ipynb"
BUILD = ROOT / "build"

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("jupyterlab")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on loopback serving a copy of the demo notebooks."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "demo_notebooks", root / "nb")
    settings = root / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    log = open(root / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
         "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root / 'nb'}", f"--LabApp.user_settings_dir={root / 'settings'}",
         "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "JUPYTER_PLATFORM_DIRS": "1"})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("JupyterLab did not start:\n" + (root / "server.log").read_text()[-3000:])
            time.sleep(0.3)
    yield base, token, root / "nb"
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--disable-quic"])
        yield b
        b.close()


def _wait_idle(page, timeout: int = 90_000) -> None:
    """Wait until the status bar says the kernel is idle."""
    page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=timeout)


def _run_all(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def _visible_svg(widget) -> str:
    svg = widget.locator(".widget-tab-contents > .widget-box:not(.lm-mod-hidden) svg")
    svg.first.wait_for(state="visible", timeout=30_000)
    return svg.first.inner_html()


def test_widget_in_jupyterlab(lab, browser):
    base, token, _ = lab
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{base}/lab/tree/{TOUR}?token={token}")
    page.locator(".jp-Notebook").wait_for(timeout=90_000)
    _wait_idle(page)
    _run_all(page)

    # the walk-through L = d*f is the second %%autograd cell of the tour
    tabs = page.locator(".widget-tab")
    tabs.nth(1).wait_for(timeout=120_000)
    widget = tabs.nth(1)
    widget.scroll_into_view_if_needed()
    titles = widget.locator(".lm-TabBar-tab").all_text_contents()
    assert [t.strip() for t in titles] == ["Graph", "Gradients", "Check", "Backward"]

    # Graph: a Graphviz SVG with one record per value node
    graph = _visible_svg(widget)
    assert graph.count('class="node"') >= 7
    assert "L" in graph and "6" in graph  # a's gradient is 6

    # Gradients: the table of nodes, target first
    widget.locator(".lm-TabBar-tab", has_text="Gradients").click()
    table = widget.locator(".widget-tab-contents > .widget-box:not(.lm-mod-hidden) table").first
    table.wait_for(state="visible")
    first_row = table.locator("tr").nth(1).inner_text()
    assert "L" in first_row.split()[:2]  # (index,) label, ...: the target first

    # Check: every leaf passes
    widget.locator(".lm-TabBar-tab", has_text="Check").click()
    check = widget.locator(".widget-tab-contents > .widget-box:not(.lm-mod-hidden)").first
    check.locator("table").first.wait_for(state="visible")
    check_text = check.inner_text()
    assert "✓" in check_text and "fail" not in check_text.lower()

    # Backward: moving the slider redraws the graph with more gradients known
    widget.locator(".lm-TabBar-tab", has_text="Backward").click()
    before = _visible_svg(widget)
    handle = widget.locator(".noUi-handle:visible").first
    handle.focus()
    page.keyboard.press("ArrowRight")
    deadline = time.monotonic() + 30
    after = before
    while after == before and time.monotonic() < deadline:
        time.sleep(0.2)
        after = _visible_svg(widget)
    assert after != before, "the backward graph did not change when the slider moved"
    for _ in range(2):  # two more steps: the walk-through's d and e
        page.keyboard.press("ArrowRight")
    time.sleep(1.0)
    BUILD.mkdir(exist_ok=True)
    output = widget.locator("xpath=ancestor::div[contains(@class, 'jp-OutputArea-child')][1]")
    output.scroll_into_view_if_needed()
    output.screenshot(path=str(BUILD / "backward.png"))

    widget.locator(".lm-TabBar-tab", has_text="Graph").click()
    output.scroll_into_view_if_needed()
    output.screenshot(path=str(BUILD / "widget.png"))
    page.screenshot(path=str(BUILD / "jupyterlab.png"))
    assert not [e for e in errors if "gradmagic" in e.lower() or "widget" in e.lower()], errors
    page.close()


def test_static_fallback_in_nbconvert_html(browser, tmp_path):
    from gradmagic.demo import execute, to_html

    nb = execute(ROOT / "demo_notebooks" / TOUR)
    out = BUILD / "01_backprop_tour.html"
    BUILD.mkdir(exist_ok=True)
    out.write_text(to_html(nb), encoding="utf-8")
    page = browser.new_page()
    page.goto(out.as_uri())
    runs = page.locator(".gradmagic")
    assert runs.count() >= 5
    first = runs.first
    assert first.locator("svg").count() >= 1  # the graph, drawn by Graphviz
    text = first.inner_text()
    assert "grad" in text and "✓" in text  # the gradients table and the check
    page.screenshot(path=str(BUILD / "nbconvert.png"), full_page=False)
    page.close()
