"""The timing the benchmarks share: one call timed with the cyclic GC paused, best of round-robin repeats."""

from __future__ import annotations

import gc
import math
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


def best(fns: dict, repeat: int, clock=time.perf_counter) -> dict:
    """Best time of each function, called round-robin ``repeat`` times."""
    fastest = dict.fromkeys(fns, math.inf)
    for _ in range(repeat):
        for name, f in fns.items():
            fastest[name] = min(fastest[name], timed(f, clock))
    return fastest
