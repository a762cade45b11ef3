"""Run every ``bench_*.py`` in this folder, in one process (``make bench``).

Each benchmark module exposes ``main()``, which prints its own table; a
``main()`` that returns ``False`` reports a missed floor, and the run then
exits with status 1 after the others have run.

    python benchmarks/run.py            # all of them
    python benchmarks/run.py engine     # only bench_engine.py
"""
from __future__ import annotations

import importlib.util
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


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


def main(argv=None) -> int:
    failed = []
    for path in modules(sys.argv[1:] if argv is None else argv):
        print(f"\n=== {path.name} ===\n", flush=True)
        start = time.perf_counter()
        if not run(path):
            failed.append(path.name)
        print(f"\n({path.name}: {time.perf_counter() - start:.0f} s)", flush=True)
    if failed:
        print(f"\nmissed a floor or failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
