"""What isolation costs: one isolated ``grade()`` against the same grade run in-process.

The cell is the textbook walk-through, L = (a*b + c)*f with five expected answers.
``grade(..., isolate=False)`` runs it in this process (rewrite, run, backward, Trace,
expect); the default ``grade(...)`` starts a fresh ``python -I`` process, runs it there under
the time and memory limits, and judges the plain data it sends back. The isolated run must
stay well under a second (floor: 1 s, best of 7). For scale, the bare start-up of a
``python -I`` that imports gradmagic's magic module is timed too: most of the overhead is
that start-up and its imports.

Run: ``python benchmarks/bench_grade.py``.
"""
from __future__ import annotations

import gc
import subprocess
import sys
import time

from gradmagic import grade

WALK = "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f\nL"
RIGHT = {"a": 6, "b": -4, "c": -2, "f": 4, "L.data": -8}
FLOOR_SECONDS = 1.0


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _startup():
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-I", "-c", "import gradmagic.notebook.magic"], check=True,
                   env=env)  # the child's environment: one BLAS thread


def main() -> bool:
    assert grade(WALK, RIGHT).passed and grade(WALK, RIGHT, isolate=False).passed
    inproc = _best(lambda: grade(WALK, RIGHT, isolate=False), 20)
    isolated, startup = float("inf"), float("inf")
    for _ in range(7):  # interleaved, so a burst of load on the machine hits both alike
        isolated = min(isolated, _best(lambda: grade(WALK, RIGHT), 1))
        startup = min(startup, _best(_startup, 1))
    ok = isolated < FLOOR_SECONDS
    print("| run | best time | ratio to in-process |")
    print("| --- | --- | --- |")
    print(f"| grade(isolate=False), in this process | {inproc * 1e3:.1f} ms | 1x |")
    print(f"| grade(), a fresh isolated process | {isolated * 1e3:.0f} ms | "
          f"{isolated / inproc:.0f}x |")
    print(f"| for scale: start python -I and import gradmagic | {startup * 1e3:.0f} ms | "
          f"{startup / inproc:.0f}x |")
    print(f"\nisolated grade() under {FLOOR_SECONDS:g} s: {'ok' if ok else 'MISSED'}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
