"""A bound on the memory a recorded cell may take: :func:`bounded`.

Every number a recorded cell computes is a node that stays alive until the cell ends, so a
loop that plain Python runs in constant memory grows the process by about 150 bytes an
operation under the magic: 10^8 operations would take more memory than most machines have,
and the kernel, with every variable in it, would be killed. While a cell runs, a watcher
thread reads the process's size every few hundredths of a second; once the cell has grown
it by more than :func:`limit` bytes, the watcher raises :class:`GraphMemoryError` in the
cell's thread, as Ctrl-C raises KeyboardInterrupt, and again every half second while the
cell runs on (when code between its lines swallowed it). The magic then shows it at the user's
line, and the names keep plain values. Where the process's size cannot be read (no
``/proc``, no ``resource``), cells are not bounded.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from contextlib import contextmanager

__all__ = ["GraphMemoryError", "bounded", "limit"]

# bytes a cell's run may add, at most (backward and the trace take about as much again);
# less when the machine has less free
MOST = 1 << 30
POLL = 0.05  # seconds between two readings of the process's size
LINGER = 20  # polls the watcher stays awake after a block ends (the next may begin soon)
# polls before the exception is raised again in a cell still running: code that runs
# between two lines of the cell (a gc callback, a __del__, an ``except Exception``) can
# swallow it, as it can swallow KeyboardInterrupt
AGAIN = 10


class GraphMemoryError(BaseException):
    """The graph of a recorded cell grew past the memory the magic lets it take.

    Like KeyboardInterrupt, it is not an ``Exception``: the cell's own ``except Exception``
    or ``except MemoryError`` would take the magic's stop for an error of its own code."""

    def __str__(self) -> str:
        if self.args:
            return str(self.args[0])
        return (
            f"%%autograd stopped the cell: its graph had made the process more than "
            f"{_watch.limit / 2**20:,.0f} MB bigger. Each number a recorded cell computes is "
            "kept until the cell ends; run this cell without %%autograd, or on less data, or "
            "give it more room with --max-memory GB"
        )


def _pages() -> int | None:
    """The process's resident size in bytes, or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _peak() -> int | None:
    """The process's largest resident size so far, in bytes (macOS, other Unixes)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_size = _pages if _pages() is not None else _peak
_READABLE = _size() is not None


def limit(most: float | None = None) -> int:
    """The bytes a cell's run may add now: ``most`` gigabytes when given (``--max-memory``),
    else :data:`MOST`, or a quarter of the memory the machine has free, if that is less."""
    if most is not None:
        return int(most * 2**30)
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return min(MOST, int(line.split()[1]) * 1024 // 4)
    except (OSError, ValueError, IndexError):
        pass
    return MOST


class _Watch:
    """The watcher: one daemon thread for the process, awake only while a cell runs."""

    def __init__(self):
        self.lock = threading.Lock()
        self.wake = threading.Event()
        # [the cell's thread id, the --max-memory given, what to call there instead of raising,
        # the size not to pass (read by the watcher as the block begins, not by the block)]
        self.active: list | None = None
        self.limit = MOST
        self.fired = False  # (a stop was raised in the block that runs)
        self.idle = True  # (waiting to be woken: it polls on a while after a block ends)
        self.thread: threading.Thread | None = None

    def run(self) -> None:
        while True:
            self.wake.wait()
            self.wake.clear()
            wait, quiet = 0, 0  # (polls until the exception is raised again; polls idle)
            while quiet < LINGER:  # (a block that begins meanwhile need not wake it)
                active = self.active
                if active is not None and active[3] is None:  # a block began: its bound
                    self.limit = limit(active[1])
                    active[3] = (_size() or 0) + self.limit
                time.sleep(POLL)
                with self.lock:
                    quiet = 0 if self.active is not None else quiet + 1
                    self.idle = quiet >= LINGER
                    if self.active is not active or active is None or (_size() or 0) <= active[3]:
                        continue
                    if active[2] is not None:
                        active[2](self.limit)
                        self.active = None  # (once: the recording stops itself)
                    elif wait == 0:
                        _raise_in(active[0], GraphMemoryError)
                        self.fired = True
                        wait = AGAIN
                    else:
                        wait -= 1


_watch = _Watch()
_raise_in = ctypes.pythonapi["PyThreadState_SetAsyncExc"]
_raise_in.argtypes = (ctypes.c_ulong, ctypes.py_object)


def _drain() -> None:
    """Meet here, and drop, a stop raised in a block that has ended without meeting it.

    The interpreter looks for an exception raised from another thread at a backward jump.
    Taking it back instead (``PyThreadState_SetAsyncExc`` with NULL) would leave CPython's
    eval breaker set for good, and a profiler or debugger started later would spin on it."""
    try:
        for _ in range(2):
            pass
    except GraphMemoryError:
        pass


@contextmanager
def bounded(on_limit=None, most: float | None = None):
    """Run the block with the process's growth bounded (see the module's notes); ``most``:
    the bound in gigabytes, if the user gave one.

    ``on_limit(limit)``: called (from the watcher's thread) instead of stopping the block,
    for a recording that can stop itself and let the cell run on (a PyTorch cell's)."""
    if not _READABLE:
        yield
        return
    me = threading.get_ident()
    outer = _watch.active
    with _watch.lock:
        _watch.active = [me, most, on_limit, None]
        _watch.fired = False
        idle = _watch.idle
    if _watch.thread is None:
        _watch.thread = threading.Thread(target=_watch.run, name="gradmagic-memory", daemon=True)
        _watch.thread.start()
    if idle:
        _watch.wake.set()
    try:
        yield
    finally:
        with _watch.lock:
            _watch.active = outer
            fired, _watch.fired = _watch.fired, False
        if fired and outer is None:
            _drain()
