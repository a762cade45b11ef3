"""The wheel as a user gets it: built from a private copy of the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# what a checkout holds beside its sources: not copied into a private source tree
_NOT_SOURCES = shutil.ignore_patterns(
    ".git",
    ".venv",
    "node_modules",
    "build",
    "dist",
    "_build",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
)


def build_wheel(into: Path, *, sdist_first: bool = False) -> Path:
    """``python -m build`` of a private copy of the checkout; the wheel's path.

    Building in the checkout writes its build/ and egg-info, so two builds at once (the
    quick start's and the packaging test's, on two workers) clash there."""
    src = into / "src"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCES)
    only = [] if sdist_first else ["--wheel"]
    done = subprocess.run(
        [sys.executable, "-m", "build", *only, "--outdir", str(into / "dist"), str(src)],
        capture_output=True,
        text=True,
        cwd=into,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return next((into / "dist").glob("gradmagic-*.whl"))
