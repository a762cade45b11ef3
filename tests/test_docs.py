"""The documentation site builds from docs/ with no warning (the tutorials executed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("myst_nb")
pytest.importorskip("pydata_sphinx_theme")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "-d",
            str(tmp_path / "doctrees"),
            str(ROOT / "docs"),
            str(tmp_path / "html"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-6000:]
    html = tmp_path / "html"
    # the options table is made from the options' fields: every option is on the page
    from gradmagic.analysis.options import option_specs

    options = (html / "options.html").read_text("utf-8")
    for spec in option_specs():
        for spelling in spec.flags:
            assert spelling in options, spelling
    # every demo notebook is a tutorial, executed: its runs' static copies hold a drawn graph
    for notebook in sorted((ROOT / "demo_notebooks").glob("*.ipynb")):
        page = (html / "tutorials" / f"{notebook.stem}.html").read_text("utf-8")
        assert "<svg" in page or "data:image/svg+xml" in page, notebook.name
    # the API reference is made from the docstrings
    api = (html / "api.html").read_text("utf-8")
    assert "gradmagic.Value" in api and "backward" in api
    assert "gradmagic.notebook.api.autograd" in (html / "function.html").read_text("utf-8")
