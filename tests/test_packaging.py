"""`python -m build` makes a wheel that installs into a clean venv and works there."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest
from building import build_wheel

pytest.importorskip("build")
ROOT = Path(__file__).resolve().parents[1]

SMOKE = """
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gradmagic")
ip.run_cell_magic("autograd", "-q", "a = 2.0\\nb = a*a + 1\\nb")
import gradmagic
assert "site-packages" in gradmagic.__file__, gradmagic.__file__
assert gradmagic.last.grads == {"a": 4.0, "b": 1.0}, gradmagic.last.grads
assert gradmagic.last.check().passed
assert {"application/vnd.jupyter.widget-view+json", "text/plain"} <= set(
    ip.display_formatter.format(gradmagic.last)[0])
from gradmagic.views.widget import STATIC
assert (STATIC / "widget.js").is_file() and (STATIC / "viz.js.gz").stat().st_size > 300_000
assert not (STATIC / "viz.js").exists()  # one copy of Graphviz in the wheel
assert "✓" in str(gradmagic.last.check())
ip.run_line_magic("unload_ext", "gradmagic")
assert "autograd" not in ip.magics_manager.magics["cell"]
report = gradmagic.grade("a = 2.0\\nb = a*a + 1\\nb", {"a": 4.0})  # the isolated child starts
assert report.passed and report.outcome == "pass", str(report)
print("wheel ok")
"""


@pytest.mark.slow
def test_wheel_installs_and_loads_in_a_clean_venv(tmp_path):
    # the sdist first, then the wheel from it: a clean tree, whatever build/ a checkout holds
    wheel = build_wheel(tmp_path, sdist_first=True)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(wheel)], check=True, capture_output=True
    )
    out = subprocess.run([str(py), "-c", SMOKE], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "wheel ok" in out.stdout
