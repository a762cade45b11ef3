"""Where in the user's code each node was made: the call and the line, as one int.

Code the magic rewrites keeps :data:`cursor` up to date: each function it rewrote
calls :meth:`Cursor.enter` on entry and :meth:`Cursor.leave` on the way out, and
each statement sets ``cursor.site = cursor.base + k`` (``k``: the statement's line,
numbered within its function). A node made while a cell is recorded keeps the
current ``cursor.site`` in its ``_site``. One int a node, one attribute store a
statement: cheaper than reading the frame each time a node is made, and it tells
two calls of the same function apart, since each call gets its own ``base``.

A site is decoded with the run's call records (:meth:`Cursor.calls_since`): the
record whose range holds it gives the function, which call it was (and so its
caller's site) and the line.
"""

from __future__ import annotations

from bisect import bisect_right

__all__ = ["Cursor", "cursor", "function_id", "FUNCTIONS", "CALL_LIMIT"]

CALL_LIMIT = 1 << 18
"""Calls a run records one by one; past it, each function's further calls share one record."""

FUNCTIONS: list = []
"""Every rewritten function (and cell), by id: ``(name, filename, lines)``; ``lines[k]``
is the source line of site ``base + k``."""
_FUNCTION_IDS: dict = {}


def function_id(name: str, filename: str, lines: tuple) -> int:
    """The id of the function ``name`` of ``filename`` whose statement lines are ``lines``."""
    key = (name, filename, lines)
    k = _FUNCTION_IDS.get(key)
    if k is None:
        k = _FUNCTION_IDS[key] = len(FUNCTIONS)
        FUNCTIONS.append(key)
    return k


class Cursor:
    """The site nodes are made at now, and the calls a run went through."""

    __slots__ = ("site", "base", "next", "stack", "calls", "shared", "runs")

    def __init__(self):
        self.site = -1  # no site: made outside rewritten code
        self.base = 0
        self.next = 0  # the next free site: sites only grow, so no run reuses another's
        self.stack = []  # (base, site) of the callers
        self.calls = []  # (base, function id, the caller's site), bases growing
        self.shared = {}  # function id → its base once a run has too many calls
        self.runs = {}  # site → how many times its statement ran in a loop (see loop())

    def enter(self, function: int) -> None:
        """A rewritten function (or cell) starts: its statements' sites get a new base."""
        self.stack.append((self.base, self.site))
        calls = self.calls
        if len(calls) < CALL_LIMIT:
            base = self.next
            self.next = base + len(FUNCTIONS[function][2])
            calls.append((base, function, self.site))
        else:
            base = self.shared.get(function)
            if base is None:
                base = self.shared[function] = self.next
                self.next = base + len(FUNCTIONS[function][2])
                calls.append((base, function, -1))
        self.base = base

    def loop(self, ks: tuple, items):
        """A ``for`` loop over ``items`` starts: each statement ``ks`` of its body will run
        once an item. Counted only where the length is known without running user code
        (a range, tuple or list); ``items`` is given back as it is."""
        if type(items) in _SIZED:
            n, runs, base = len(items), self.runs, self.base
            for k in ks:
                runs[base + k] = runs.get(base + k, 0) + n
        return items

    def leave(self) -> None:
        """The function :meth:`enter` announced returns (or raises): back at its caller."""
        stack = self.stack
        if stack:
            self.base, self.site = stack.pop()
        else:  # (rewritten code run from another thread interleaves: never fail the user's code)
            self.base, self.site = 0, -1

    def start(self) -> int:
        """A run starts: forget the calls of earlier runs. Returns the first site it can make."""
        self.calls = []
        self.shared = {}
        self.runs = {}
        return self.next

    def runs_since(self, first: int) -> dict:
        """How many times each looped statement of the run whose sites start at ``first`` ran."""
        return {site: n for site, n in self.runs.items() if site >= first}

    def calls_since(self, first: int) -> list:
        """The call records of the run whose sites start at ``first``."""
        return [c for c in self.calls if c[0] >= first]


_SIZED = (range, tuple, list)

cursor = Cursor()


def decode(calls: list, site: int):
    """The call record (index into ``calls``) and statement number of ``site``, or None."""
    if site < 0 or not calls:
        return None
    i = bisect_right(calls, (site, 1 << 62)) - 1
    if i < 0:
        return None
    base, function, _ = calls[i]
    k = site - base
    if k >= len(FUNCTIONS[function][2]):
        return None
    return i, k
