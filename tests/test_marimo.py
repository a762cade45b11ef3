"""gradmagic.autograd's view in marimo: a marimo notebook served by marimo, driven in Chromium.

Marked ``browser`` (Debian's Chromium at /usr/bin/chromium, Playwright); skipped without the
``marimo`` extra. The server runs with Graphviz's ``dot`` hidden: the view lays the graph out in
the browser.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
from chromium import CHROMIUM, launch, stop

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
            str(NOTEBOOK),
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
