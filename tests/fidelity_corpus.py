"""A differential corpus: real code we did not write, run plainly and under ``%%autograd``.

The examples are the doctests of the standard library's numeric modules
(math, cmath, statistics, fractions, decimal — its examples live in the pure
Python ``_pydecimal`` —, random, heapq, bisect, itertools, operator) and the
``Examples`` sections of numpy's functions, found with
:class:`doctest.DocTestFinder`. Each docstring's examples run in order, one
cell per example, twice in fresh namespaces of the same IPython shell: once as
plain cells, once as ``%%autograd -q --no-check`` cells. After each example
the two runs are compared: the text it printed, its value (its last
expression, assigned to a name so both runs keep it), every name it bound
(``repr`` and type), and the exception it raised (type and message).

Examples their authors marked ``+SKIP`` are not run, as doctest does not run
them. Run ``python tests/fidelity_corpus.py`` for the pass rate and the list
of differing examples.
"""

from __future__ import annotations

import ast
import collections
import ctypes
import contextlib
import doctest
import hashlib
import io
import json
import os
import random
import re
import shutil
import sys
import tempfile
import types
import warnings
from dataclasses import dataclass

import numpy as np

STDLIB = (
    "math",
    "cmath",
    "statistics",
    "fractions",
    "_pydecimal",
    "random",
    "heapq",
    "bisect",
    "itertools",
    "operator",
)
VALUE = "__example_value__"  # the name an example's last expression is assigned to
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


@dataclass
class Outcome:
    printed: str
    error: str | None
    names: dict  # name -> (repr, type)
    warned: tuple = ()  # (category, message, where): the cell's line, or a library file


@dataclass
class Difference:
    where: str  # docstring name and example number
    source: str
    plain: Outcome
    magic: Outcome


def docstrings(numpy_every: int = 1):
    """The docstrings with examples: (name, globals, examples), stdlib first, then numpy.

    ``numpy_every`` takes every n-th numpy docstring (1: all of them).
    """
    finder = doctest.DocTestFinder(exclude_empty=True)
    for module_name in STDLIB:
        module = __import__(module_name)
        for test in sorted(finder.find(module), key=lambda t: t.name):
            examples = _runnable(test.examples)
            if examples:
                yield test.name, dict(module.__dict__), examples
    seen, tests = set(), []
    for name in sorted(dir(np)):
        obj = getattr(np, name)
        if not callable(obj) or id(obj) in seen:
            continue
        seen.add(id(obj))
        try:
            found = finder.find(obj, f"numpy.{name}", globs={})
        except Exception:  # an object doctest cannot inspect
            continue
        tests.extend(t for t in found if t.examples)
    tests.sort(key=lambda t: t.name)
    for i, test in enumerate(tests):
        examples = _runnable(test.examples)
        if examples and i % numpy_every == 0:
            yield test.name, {"np": np}, examples


def _runnable(examples):
    return [e for e in examples if not e.options.get(doctest.SKIP)]


def _as_cell(source: str) -> str:
    """The example with its last expression assigned to :data:`VALUE` (both runs keep it)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        lines = source.splitlines()
        end, stop = last.end_lineno - 1, last.end_col_offset  # before a trailing comment
        lines[end] = lines[end][:stop] + ")" + lines[end][stop:]
        first = last.lineno - 1
        lines[first] = (
            lines[first][: last.col_offset] + f"{VALUE} = (" + lines[first][last.col_offset :]
        )
        return "\n".join(lines) + "\n"
    return source


def _describe(value):
    try:
        text = repr(value)
    except Exception as e:  # a repr that fails
        text = f"<repr failed: {type(e).__name__}>"
    kind = type(value)
    try:
        as_json = json.dumps(value)
    except Exception as e:  # not JSON: the error's type is compared
        as_json = f"<{type(e).__name__}>"
    return (
        _ADDRESS.sub("0x?", text),
        f"{kind.__module__}.{kind.__qualname__}",
        _ADDRESS.sub("0x?", as_json),
        _ADDRESS.sub("0x?", deep_state(value)),
    )


_ATOMS = (str, bytes, bool, int, float, complex, type(None))


def _digest(v) -> str:
    """A digest of an array's numbers. A view reading its memory many times over
    (``as_strided``) is told by the memory it reads and how, not by a copy of its numbers."""
    low, high = _byte_bounds(v)
    if v.size and high - low < v.nbytes:
        memory = (ctypes.c_uint8 * (high - low)).from_address(low)
        layout = f"{v.strides}@{v.__array_interface__['data'][0] - low}:"
        return layout + hashlib.sha1(memory).hexdigest()[:16]
    data = np.ascontiguousarray(v).view(np.uint8) if v.size else b""
    return hashlib.sha1(data).hexdigest()[:16]


def _byte_bounds(v):
    try:
        from numpy.lib.array_utils import byte_bounds
    except ImportError:  # numpy 1
        byte_bounds = np.byte_bounds
    return byte_bounds(v)


def deep_state(value, limit: int = 2000) -> str:
    """The exact type and value of everything ``value`` holds, at any depth, as text.

    Lists, tuples, dicts, sets, deques, numpy arrays, the attributes (``__dict__``
    and slots) of any instance: each number is written with its exact type
    (``float:2.0``, so a float subclass is told apart from a float), each object
    once (a second visit writes ``@n``). At most ``limit`` items are written.
    """
    out, seen, budget = [], {}, [limit]

    def walk(v, depth):
        if budget[0] <= 0:
            out.append("...")
            return
        budget[0] -= 1
        cls = type(v)
        name = f"{cls.__module__}.{cls.__qualname__}"
        if cls in _ATOMS:
            out.append(f"{name}:{v!r}")
            return
        if id(v) in seen:
            out.append(f"@{seen[id(v)]}")
            return
        seen[id(v)] = len(seen)
        if depth > 30 or isinstance(
            v,
            (
                type,
                types.ModuleType,
                types.FunctionType,
                types.BuiltinFunctionType,
                types.MethodType,
            ),
        ):
            out.append(name)
            return
        out.append(f"{name}(")
        try:
            if isinstance(v, np.ndarray):
                if v.dtype != object:  # its exact bytes, by digest
                    out.append(f"{v.dtype}{v.shape}:{_digest(v)}")
                if v.dtype == object:
                    for e in v.flat:
                        walk(e, depth + 1)
            elif isinstance(v, np.generic):
                out.append(repr(v))
            elif isinstance(v, dict):
                for k, e in list(v.items()):
                    walk(k, depth + 1)
                    walk(e, depth + 1)
            elif isinstance(v, (list, tuple, collections.deque)):
                for e in list(v):
                    walk(e, depth + 1)
            elif isinstance(v, (set, frozenset)):
                for e in sorted(v, key=repr):
                    walk(e, depth + 1)
            else:
                attributes = getattr(v, "__dict__", None)
                if isinstance(attributes, dict):
                    for k in sorted(attributes, key=str):
                        out.append(f".{k}=")
                        walk(attributes[k], depth + 1)
                for klass in cls.__mro__:
                    for slot in getattr(klass, "__dict__", {}).get("__slots__", ()) or ():
                        if (
                            isinstance(slot, str)
                            and hasattr(v, slot)
                            and slot not in ("__weakref__", "__dict__")
                        ):
                            out.append(f".{slot}=")
                            walk(getattr(v, slot), depth + 1)
        except Exception as e:  # an object that refuses inspection
            out.append(f"<{type(e).__name__}>")
        out.append(")")

    walk(value, 0)
    return " ".join(out)


class Runner:
    """Runs examples in one shell, keeping a plain and a magic namespace apart."""

    def __init__(self, shell, mixed: bool = False):
        self.shell = shell
        self.baseline = dict(shell.user_ns)
        self.unstable = 0  # examples whose plain runs differ from each other
        # mixed: the magic run alternates magic and plain cells (magic, plain, magic, ...)
        self.mixed = mixed

    def run_docstring(self, name, globs, examples):
        """Run every example both ways; the list of :class:`Difference`\\ s.

        The plain run is made twice: an example whose two plain runs differ
        (an unseeded generator, a temporary file's name, ``np.empty``) is not
        deterministic and is counted in ``self.unstable`` instead of compared.
        """
        modes = ("plain", "again", "magic")
        states = {mode: dict(globs) for mode in modes}
        rngs = {}
        for mode in modes:  # the same random numbers and numpy error state for each run
            random.seed(12345)
            np.random.seed(12345)
            rngs[mode] = (random.getstate(), np.random.get_state(), _NP_ERR, None)
        differences = []
        for i, example in enumerate(examples):
            cell = _as_cell(example.source)
            outcomes = {}
            for mode in modes:
                if mode == "magic" and self.mixed and i % 2:
                    mode_run = "plain"  # a plain cell after a magic one
                else:
                    mode_run = mode
                outcomes[mode], states[mode], rngs[mode] = self._run(
                    cell, mode_run, states[mode], rngs[mode]
                )
            if outcomes["plain"] != outcomes["again"]:
                self.unstable += 1
            elif outcomes["plain"] != outcomes["magic"]:
                differences.append(
                    Difference(
                        f"{name} #{i + 1}", example.source, outcomes["plain"], outcomes["magic"]
                    )
                )
        return differences

    def _run(self, cell, mode, state, rng):
        shell, ns = self.shell, self.shell.user_ns
        ns.clear()
        ns.update(self.baseline)
        ns.update(state)
        random.setstate(rng[0])
        np.random.set_state(rng[1])
        np.seterr(**rng[2])
        np.seterrcall(rng[3])
        text = "%%autograd -q --no-check\n" + cell if mode == "magic" else cell
        printed = io.StringIO()
        shell.showtraceback = _quiet
        try:
            with contextlib.redirect_stdout(printed), warnings.catch_warnings(record=True) as ws:
                warnings.simplefilter("always")
                result = shell.run_cell(text, store_history=False)
        finally:
            del shell.showtraceback
        error = result.error_before_exec or result.error_in_exec
        state = {k: v for k, v in ns.items() if k not in self.baseline or v is not self.baseline[k]}
        # a name bound to a node of the run's graph stays a node, so that x.grad works
        # (README: documented differences): it is compared by the number it holds
        names = {
            k: _describe(_kept(v)) for k, v in state.items() if not k.startswith("__") or k == VALUE
        }
        names = {
            k: v
            for k, v in names.items()
            if not v[1].startswith(("builtins.module", "builtins.function"))
        }
        outcome = Outcome(
            _ADDRESS.sub("0x?", printed.getvalue()),
            None if error is None else _ADDRESS.sub("0x?", f"{type(error).__name__}: {error}"),
            names,
            # a ResourceWarning is the collector closing an earlier example's file: its
            # timing is the collector's, not the cell's
            tuple(_warned(w, mode == "magic") for w in ws if w.category is not ResourceWarning),
        )
        ns.pop(VALUE, None)
        state.pop(VALUE, None)
        return (
            outcome,
            state,
            (random.getstate(), np.random.get_state(), np.geterr(), np.geterrcall()),
        )


def _warned(w, magic: bool):
    """A warning as the user sees it: its category, message and the cell's line (the
    magic's own line counted out) or the file that raised it."""
    name = str(w.filename)
    where = w.lineno - magic if name.startswith("<ipython-input") else os.path.basename(name)
    return (w.category.__name__, _ADDRESS.sub("0x?", str(w.message)), where)


def _kept(v):
    from gradmagic.notebook.boundary import NUMBER_NODES, plain_of

    return plain_of(v, {}) if type(v) in NUMBER_NODES else v


_NP_ERR = np.geterr()


def _quiet(*args, **kwargs):
    pass


def run_corpus(shell, numpy_every: int = 1, *, source=None, mixed: bool = False):
    """(examples compared, differences) over the whole corpus (unstable examples left out).

    ``source`` yields the docstrings (default: :func:`docstrings` of ``numpy_every``);
    ``mixed`` runs the magic side as alternating magic and plain cells.
    """
    runner = Runner(shell, mixed=mixed)
    total, differences = 0, []
    before, cwd = np.geterr(), os.getcwd()
    scratch = tempfile.mkdtemp()  # examples write files (np.save): not into the checkout
    os.chdir(scratch)
    try:
        for name, globs, examples in docstrings(numpy_every) if source is None else source:
            differences.extend(runner.run_docstring(name, globs, examples))
            total += len(examples)
        total -= runner.unstable
    finally:
        os.chdir(cwd)
        shutil.rmtree(scratch, ignore_errors=True)
        np.seterr(**before)
        np.seterrcall(None)
        shell.user_ns.clear()
        shell.user_ns.update(runner.baseline)
    return total, differences


def _shell():
    from IPython.testing import globalipapp

    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "gradmagic")
    return shell


def main(argv):
    every = int(argv[1]) if len(argv) > 1 else 1
    report(*run_corpus(_shell(), every))


def report(total, differences):
    """Print the differing examples and the rate."""
    for d in differences:
        print(f"--- {d.where}\n{d.source.rstrip()}")
        for field in ("printed", "error", "names", "warned"):
            p, m = getattr(d.plain, field), getattr(d.magic, field)
            if p != m:
                if field == "names":
                    p = {k: v for k, v in p.items() if m.get(k) != v}
                    m = {k: v for k, v in m.items() if d.plain.names.get(k) != v}
                print(f"  {field}: plain {p!r}\n  {' ' * len(field)}  magic {m!r}")
    same = total - len(differences)
    print(f"\n{same} of {total} examples behave identically ({same / total:.2%})")


if __name__ == "__main__":
    main(sys.argv)
