"""The package's layers: imports go one way, with no cycles, and every module imports on its own.

Every ``import`` statement counts, including the ones inside functions (a deferred import is
still a dependency). See ARCHITECTURE.md for the picture.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gradmagic"

# layer → the layers it may import (its own modules always)
ALLOWED = {
    "core": set(),
    "data": set(),
    "analysis": {"core"},
    "nn": {"core"},
    "optim": {"nn", "core"},
    "views": {"analysis", "core"},
    "notebook": {"views", "analysis", "core"},
    "grade": {"notebook", "views", "analysis", "core"},
    "demo": set(),
    "gradmagic": {"core", "analysis", "views", "notebook", "nn", "optim", "grade", "data"},
}
IPYTHON_LAYERS = {"notebook"}  # the only code that imports IPython


def modules() -> dict[str, Path]:
    """Dotted module name → file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "gradmagic"


def imports(module: str, path: Path, known) -> tuple[set, set]:
    """(gradmagic modules imported by ``module``, top-level external packages it imports)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    inner, outer = set(), set()

    def resolve(name: str) -> str | None:
        # the longest known module that ``name`` starts with (``a.b.c`` may be ``a.b``'s attribute)
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "gradmagic":
                    inner.add(resolve(alias.name))
                else:
                    outer.add(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
                if name.split(".")[0] != "gradmagic":
                    outer.add(name.split(".")[0])
                    continue
            for alias in node.names:  # ``from . import x`` may name a module
                full = f"{name}.{alias.name}"
                inner.add(full if full in known else resolve(name))
    inner.discard(None)
    inner.discard(module)
    return inner, outer


def graph():
    known = modules()
    return known, {m: imports(m, p, known) for m, p in known.items()}


def test_the_walk_finds_deferred_imports_and_every_layer():
    known, edges = graph()
    assert {layer(m) for m in known} == set(ALLOWED)
    # a deferred import inside a function: gradmagic/__init__ imports the magic only on load
    assert "gradmagic.notebook.magic" in edges["gradmagic"][0]
    assert "gradmagic.core.engine" in edges["gradmagic.core.tensor"][0]


def test_no_import_cycles():
    known, edges = graph()
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    cycles = []

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges[m][0]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n) :] + [n])
            elif n not in state:
                visit(n, stack)
        stack.pop()
        state[m] = 2

    for m in known:
        if m not in state:
            visit(m, [])
    assert cycles == []


def test_lower_layers_never_import_higher_ones():
    known, edges = graph()
    wrong = []
    for m, (inner, outer) in edges.items():
        here = layer(m)
        for n in inner:
            there = layer(n)
            if there != here and there not in ALLOWED[here]:
                wrong.append(f"{m} imports {n}")
        if "IPython" in outer and here not in IPYTHON_LAYERS:
            wrong.append(f"{m} imports IPython")
    assert wrong == []


def _needs_torch(path: Path) -> bool:
    """A module that imports torch at its top level (one only loaded when a cell uses torch)."""
    tree = ast.parse(path.read_text(), str(path))
    return any(
        isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torch" for a in node.names)
        for node in tree.body
    )


@pytest.mark.slow
def test_every_module_imports_first_in_a_fresh_interpreter():
    names = list(modules())
    if importlib.util.find_spec("torch") is None:  # torch is an optional extra: its modules
        names = [n for n in names if not _needs_torch(modules()[n])]  # (not loaded without it)

    def run(name):
        done = subprocess.run(
            [sys.executable, "-c", f"import {name}"],
            capture_output=True,
            text=True,
            cwd=PACKAGE.parent,
        )
        return name, done.returncode, done.stderr[-500:]

    with ThreadPoolExecutor(4) as pool:
        failures = [r for r in pool.map(run, names) if r[1] != 0]
    assert failures == []
