"""`make demo` serves copies of the demos from the scratch folder: whatever the server writes
(a notebook saved, its kernel's name, a new notebook) stays out of the checkout."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from chromium import wait_until_serving

pytest.importorskip("jupyterlab")
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(base: str, token: str, path: str, method: str = "GET", body=None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}/api/contents/{path}?token={token}", data=data, method=method
    )
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read() or b"{}")


def _checkout(tmp_path: Path) -> Path:
    """A git checkout of what `make demo` reads: the Makefile, the demos, .gitignore."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("Makefile", ".gitignore"):
        shutil.copy(ROOT / name, repo / name)
    shutil.copytree(ROOT / "demo_notebooks", repo / "demo_notebooks")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "demo"], check=True)
    return repo


@pytest.mark.slow
def test_make_demo_leaves_the_checkout_as_it_was(tmp_path):
    if shutil.which("make") is None or shutil.which("git") is None:
        pytest.fail("make and git are needed (the README's commands)")
    repo = _checkout(tmp_path)
    port, token = _free_port(), secrets.token_hex(16)
    venv = Path(sys.executable).parent.parent
    log = open(tmp_path / "demo.log", "w")
    env = {**os.environ, "JUPYTER_PLATFORM_DIRS": "1", "JUPYTER_TOKEN": token}
    server = subprocess.Popen(  # (the install step is the venv these tests run in)
        ["make", "-o", "setup-demo", "demo", f"VENV={venv}", f"PORT={port}"],
        cwd=repo,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**env, "BROWSER": "true"},
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, token, server, tmp_path / "demo.log")
        # the tour is served, and saved back as JupyterLab saves it (its kernel named anew)
        tour = _api(base, token, "01_backprop_tour.ipynb")
        tour["content"]["metadata"]["kernelspec"]["display_name"] = "Python 3 (ipykernel)"
        _api(base, token, "01_backprop_tour.ipynb", "PUT", {"type": "notebook", **tour})
        made = _api(base, token, "", "POST", {"type": "notebook"})  # the launcher's new notebook
        assert (repo / "build" / "notebooks" / made["path"]).is_file()
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
        log.close()
    status = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True
    )
    assert status.stdout == "", status.stdout
    said = (tmp_path / "demo.log").read_text()
    assert "preferred_dir" not in said, said[-2000:]  # (its deprecation warning)
