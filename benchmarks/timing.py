"""The timing the benchmarks share: one call timed with the cyclic GC paused, best of round-robin repeats."""
from __future__ import annotations

import gc
import math
import time


def timed(f) -> float:
    """Seconds one call of ``f()`` takes, after ``gc.collect()`` and with the cyclic GC paused
    (as ``timeit`` does: a collection walking a big live graph would dominate)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        f()
        return time.perf_counter() - start
    finally:
        gc.enable()


def best(fns: dict, repeat: int) -> dict:
    """Best time of each function, called round-robin ``repeat`` times."""
    fastest = dict.fromkeys(fns, math.inf)
    for _ in range(repeat):
        for name, f in fns.items():
            fastest[name] = min(fastest[name], timed(f))
    return fastest
