"""The README's quick start, pasted into a fresh venv made from the built wheel.

The wheel (``python -m build``) is installed with JupyterLab into a new virtual environment;
Graphviz's ``dot`` is hidden from PATH (the live view needs none). The README's code blocks run
as they are written: the notebook cells in an IPython shell and in JupyterLab (driven in
Chromium: the graph draws), the function block as a script. A line ending in ``# <literal>``
must give that value.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import socket
import subprocess
import venv
from pathlib import Path

import pytest

pytest.importorskip("build")
ROOT = Path(__file__).resolve().parents[1]
from building import build_wheel
from chromium import CHROMIUM, launch, stop, wait_until_serving

pytestmark = pytest.mark.slow


def readme_blocks() -> list[str]:
    """The README's python code blocks, in order."""
    text = (ROOT / "README.md").read_text("utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def cells_and_script() -> tuple[list[str], str]:
    """The quick start's notebook cells (from %load_ext on) and the function API's block."""
    blocks = readme_blocks()
    start = next(i for i, b in enumerate(blocks) if b.startswith("%load_ext gradmagic"))
    cells = [b for b in blocks[start:] if "autograd(" not in b]
    script = next(b for b in blocks if "gradmagic.autograd(" in b)
    return cells, script


def checked(source: str) -> str:
    """``source`` with each line ``expr  # literal`` turned into an assertion that it holds."""
    out = []
    for line in source.splitlines():
        code, _, comment = line.partition("#")
        try:
            expected = ast.literal_eval(comment.strip()) if comment.strip() else None
        except (ValueError, SyntaxError):
            expected = None
        if expected is not None and code.strip() and "=" not in code.replace("==", ""):
            out.append(
                f"assert ({code.strip()}) == {expected!r}, ({code.strip()!r}, {code.strip()})"
            )
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def _path_without_dot() -> str:
    return os.pathsep.join(
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "dot").exists()
    )


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A venv with the built wheel and JupyterLab, as a user would have after the README."""
    root = tmp_path_factory.mktemp("quickstart")
    wheel = build_wheel(root)
    venv.create(root / "venv", with_pip=True)
    py = root / "venv" / "bin" / "python"
    out = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(wheel), "jupyterlab"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(py.parent), _path_without_dot()]),
        "JUPYTER_PLATFORM_DIRS": "1",
        "HOME": str(root),
    }
    env.pop("PYTHONPATH", None)
    return root, py, env


def test_the_quick_start_runs_in_a_fresh_venv_without_dot(fresh):
    root, py, env = fresh
    cells, script = cells_and_script()
    assert any(c.startswith("%%autograd") for c in cells)
    program = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "import shutil\nassert shutil.which('dot') is None\n"
        "ip = InteractiveShell.instance()\n"
        f"for cell in {[checked(c) for c in cells]!r}:\n"
        "    result = ip.run_cell(cell)\n"
        "    assert result.success, (cell, result.error_in_exec or result.error_before_exec)\n"
        "import gradmagic\n"
        "assert 'site-packages' in gradmagic.__file__\n"
        "data, _ = ip.display_formatter.format(gradmagic.last)\n"
        "assert 'application/vnd.jupyter.widget-view+json' in data\n"
        "print('cells ok')\n"
    )
    out = subprocess.run(
        [str(py), "-c", program], capture_output=True, text=True, env=env, cwd=root
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "cells ok" in out.stdout
    (root / "quickstart.py").write_text(checked(script) + "print('script ok')\n")
    out = subprocess.run(
        [str(py), "quickstart.py"], capture_output=True, text=True, env=env, cwd=root
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "script ok" in out.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.browser
def test_the_quick_start_draws_in_jupyterlab_from_the_wheel(fresh):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    import nbformat

    root, py, env = fresh
    cells, _ = cells_and_script()
    (root / "nb").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.rstrip("\n")) for c in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, root / "nb" / "quickstart.ipynb")
    port, token = _free_port(), secrets.token_hex(16)
    log = open(root / "server.log", "w")
    server = subprocess.Popen(
        [
            str(py),
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root / 'nb'}",
            "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, token, server, root / "server.log")
        with sync_api.sync_playwright() as pw:
            browser = launch(pw)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"{base}/lab/tree/quickstart.ipynb?token={token}")
            page.locator(".jp-Notebook").wait_for(timeout=90_000)
            accept = page.locator(".jp-Dialog .jp-mod-accept")
            try:
                accept.first.wait_for(state="visible", timeout=8_000)
                accept.first.click()
            except sync_api.TimeoutError:
                pass
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            view = page.locator(".gm-root[data-drawn]").first
            view.wait_for(timeout=180_000)
            graph = view.locator(".gm-page[data-tab=graph]")
            assert graph.locator("svg g.node[data-kind=v]").count() == 7
            page.get_by_text("(6.0, -4.0)").first.wait_for(timeout=60_000)
            browser.close()
    finally:
        stop(server, log)
