"""Run every ``bench_*.py`` in this folder, in one process (``make bench``).

Each benchmark module exposes ``main()``, which prints its own table; a
``main()`` that returns ``False`` reports a missed floor, and the run then
exits with status 1 after the others have run.

    python benchmarks/run.py            # all of them
    python benchmarks/run.py engine     # only bench_engine.py
    python benchmarks/run.py --json     # also write results/<name>.json (the docs' page)

The JSON holds what the benchmark printed, its tables as header and rows, and
the versions it ran with; the documentation's benchmarks page is made from it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def modules(names=()) -> list:
    """The benchmark files, all or those whose name (without ``bench_``) is given."""
    found = sorted(HERE.glob("bench_*.py"))
    if not names:
        return found
    picked = [p for p in found if p.stem.removeprefix("bench_") in names]
    unknown = set(names) - {p.stem.removeprefix("bench_") for p in picked}
    if unknown:
        known = ", ".join(p.stem.removeprefix("bench_") for p in found)
        raise SystemExit(f"no benchmark named {', '.join(sorted(unknown))}; there are: {known}")
    return picked


def run(path: Path) -> bool:
    """Import one benchmark file and call its ``main()``; False if it failed."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        return module.main() is not False
    except SystemExit as stop:
        return stop.code in (0, None)
    except Exception:  # one broken benchmark should not hide the others' results
        traceback.print_exc()
        return False


class _Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy."""

    def __init__(self, out):
        self.out, self.kept = out, io.StringIO()

    def write(self, text):
        self.kept.write(text)
        return self.out.write(text)

    def flush(self):
        self.out.flush()


def blocks(text: str) -> list[dict]:
    """What a benchmark printed, as Markdown tables ({"kind": "table", "header", "rows"}) and
    the text between them ({"kind": "text", "text"})."""
    out: list[dict] = []
    lines: list[str] = []

    def flush_text():
        if any(line.strip() for line in lines):
            out.append({"kind": "text", "text": "\n".join(lines).strip("\n")})
        lines.clear()

    table: list[list[str]] = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            if not table:
                flush_text()
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                table.append(cells)
            continue
        if table:
            out.append({"kind": "table", "header": table[0], "rows": table[1:]})
            table = []
        if not line.startswith("##"):
            lines.append(line)
    flush_text()
    return out


def environment() -> dict:
    import numpy

    facts = {
        "Python": platform.python_version(),
        "numpy": numpy.__version__,
        "machine": platform.machine(),
        "CPUs": os.cpu_count(),
    }
    from importlib import metadata

    for name in ("gradmagic", "micrograd", "torch"):
        try:
            facts[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return facts


def save(path: Path, printed: str, passed: bool, seconds: float) -> Path:
    """Write one benchmark's results to ``results/<name>.json``."""
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or path.stem
    title = next(
        (line.lstrip("#").strip() for line in printed.splitlines() if line.startswith("## ")),
        doc.splitlines()[0].rstrip("."),
    )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{path.stem.removeprefix('bench_')}.json"
    out.write_text(
        json.dumps(
            {
                "benchmark": path.name,
                "title": title,
                "passed": passed,
                "seconds": round(seconds, 1),
                "environment": environment(),
                "blocks": blocks(printed),
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    names = [a for a in argv if a != "--json"]
    failed = []
    for path in modules(names):
        print(f"\n=== {path.name} ===\n", flush=True)
        start = time.perf_counter()
        tee = _Tee(sys.stdout)
        with contextlib.redirect_stdout(tee):
            passed = run(path)
        if not passed:
            failed.append(path.name)
        seconds = time.perf_counter() - start
        print(f"\n({path.name}: {seconds:.0f} s)", flush=True)
        if as_json:
            print(f"wrote {save(path, tee.kept.getvalue(), passed, seconds)}")
    if failed:
        print(f"\nmissed a floor or failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
