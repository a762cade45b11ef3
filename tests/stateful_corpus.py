"""A differential corpus of real code that changes state: graphs, sorted containers, heaps.

The examples are the doctests of packages no one here wrote, whose code builds and
changes data structures: networkx (graphs and graph algorithms: a Graph's nested
dicts of nodes, edges and their attributes), sortedcontainers (sorted lists, dicts
and sets in lists of lists) and the standard library's ``collections``,
``heapq``, ``bisect``, ``graphlib`` and ``dataclasses``. Each docstring's examples
run as cells in order, plainly and under ``%%autograd``, the magic run alternating
magic and plain cells (magic, plain, magic, ...), and after every example the two
runs are compared: printed text, the exception, and the deep state of every name
(:func:`fidelity_corpus.deep_state`: every number's exact type at any depth).

``python tests/stateful_corpus.py [EVERY]`` prints the rate and the differences.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import sys
import warnings

import fidelity_corpus
from fidelity_corpus import _runnable

STDLIB = ("collections", "heapq", "bisect", "graphlib", "dataclasses", "fractions", "statistics")


def docstrings(every: int = 1):
    """(name, globals, examples) of each docstring with examples; every ``every``-th one."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = []
    for name in STDLIB:
        module = importlib.import_module(name)
        found.extend((t, dict(module.__dict__)) for t in finder.find(module))
    try:
        import sortedcontainers

        for name in ("sortedlist", "sorteddict", "sortedset"):
            module = importlib.import_module(f"sortedcontainers.{name}")
            found.extend(
                (t, {"sortedcontainers": sortedcontainers, **vars(module)})
                for t in finder.find(module)
            )
    except ImportError:
        pass
    try:
        import networkx

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for info in pkgutil.walk_packages(networkx.__path__, "networkx."):
                if ".tests" in info.name or "drawing" in info.name or "readwrite" in info.name:
                    continue
                try:
                    module = importlib.import_module(info.name)
                except Exception:  # an optional dependency missing
                    continue
                found.extend((t, {"nx": networkx}) for t in finder.find(module))
    except ImportError:
        pass
    seen, tests = set(), []
    for test, globs in sorted(found, key=lambda item: item[0].name):
        if test.name not in seen and test.examples:
            seen.add(test.name)
            tests.append((test, globs))
    for i, (test, globs) in enumerate(tests):
        examples = _runnable(test.examples)
        if examples and i % every == 0:
            yield test.name, globs, examples


def run_corpus(shell, every: int = 1):
    """(examples compared, differences)."""
    return fidelity_corpus.run_corpus(shell, source=docstrings(every), mixed=True)


if __name__ == "__main__":
    from fidelity_corpus import _shell, report

    every = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    report(*run_corpus(_shell(), every))
