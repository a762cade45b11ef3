"""The timing the benchmarks share: one call timed with the cyclic GC paused, best of round-robin repeats."""

from __future__ import annotations

import gc
import math
import os
import subprocess
import sys
import time


def timed(f, clock=time.perf_counter) -> float:
    """Seconds one call of ``f()`` takes, after ``gc.collect()`` and with the cyclic GC paused
    (as ``timeit`` does: a collection walking a big live graph would dominate).

    ``clock``: wall time by default; ``time.thread_time`` counts only this thread's CPU
    time, so that on a loaded machine the time other programs take the CPU from a long call
    does not count against it more than against a short one."""
    gc.collect()
    gc.disable()
    try:
        start = clock()
        f()
        return clock() - start
    finally:
        gc.enable()


def shell(*setup: str):
    """IPython's shell with gradmagic loaded (once: quietly if loaded), each ``setup`` cell run."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("gradmagic")
    for source in setup:
        assert ip.run_cell(source).success
    return ip


def load() -> str:
    """The load averages over 1, 5 and 15 minutes, as a benchmark's title gives them."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def best(fns: dict, repeat: int, clock=time.perf_counter) -> dict:
    """Best time of each function, called round-robin ``repeat`` times."""
    fastest = dict.fromkeys(fns, math.inf)
    for _ in range(repeat):
        for name, f in fns.items():
            fastest[name] = min(fastest[name], timed(f, clock))
    return fastest


_ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread(script: str) -> int | None:
    """Run ``script`` again in a child whose BLAS runs on one thread, its output passed on,
    and return its exit status; None when this process is that child already. On a busy
    machine a multi-threaded BLAS makes a 0.1 ms product take 20 ms now and then, for every
    contender alike, which hides the rest."""
    if all(os.environ.get(name) == "1" for name in _ONE_THREAD):
        return None
    env = {**os.environ, **dict.fromkeys(_ONE_THREAD, "1")}
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True)
    print(done.stdout, end="")
    print(done.stderr, end="", file=sys.stderr)
    return done.returncode
