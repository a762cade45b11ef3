"""The numerical check: finite differences beside every analytic gradient.

:func:`check` measures ``d target / d leaf`` for every leaf with a central
difference ``(f(x + eps) - f(x - eps)) / 2 eps`` and compares it with the
gradient that backward computed. It never re-runs the user's cell (no side
effect runs twice): it *replays* the recorded graph, node by node, with each
operation's numpy forward from :mod:`gradmagic.core.ops`.

The replay reads only the trace's columns (values, op codes, parent indices),
never live nodes. Each perturbed leaf's input is a row with one column per
evaluation point -- column 0 unperturbed, then ``x + eps`` and ``x - eps`` for
every perturbed leaf -- so one pass computes every ``f(x ± eps e_i)`` at once.
A wide scalar graph (a network) replays a level at a time: every node of one
level and one op in one numpy call (:class:`_Groups`). Other graphs replay node
by node, one numpy call per node (nodes no perturbed leaf reaches stay plain
numbers, and arrays are dropped after their last use). Either way columns are
split into chunks that fit in memory. A check of at most ``_FLOAT_SLOTS``
leaves of a scalar graph replays on plain floats instead, once per evaluation
point, with the float forward the engine ran (cheaper than a numpy call per
node). By default (``max_leaves="auto"``) a check perturbs every leaf of a
small graph, and of a bigger one as many as its budget allows (about
``_BUDGET`` backward passes for a graph replayed by levels, two evaluation
pairs on floats for a deep one): the named leaves first, as a seeded sample,
with a note saying so. A sample of a scalar graph's leaves comes with one more
pair of evaluation points, every leaf moved at once by ±eps along a random
direction of signs: its row compares the gradient times the move with the
target's change, so a wrong gradient outside the sample still shows.

:func:`expect` compares named gradients or values with expected numbers (for
textbook cases and homework) and returns the same kind of report.

A :class:`CheckReport` has ``.passed``, ``.rows`` (:class:`CheckRow`),
``to_dict()``, ``assert_passed()`` (its message describes each wrong row) and a
text and an HTML view. When there was nothing to compare because a graded
cell did not run, :func:`unanswered` gives the failing report, with ``error``
saying why (see :func:`gradmagic.grade`).
"""
from __future__ import annotations

import functools
import hashlib
import math
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any, NamedTuple, Optional

import numpy as np

from .numbers import all_finite, fmt

__all__ = ["check", "expect", "expected_pairs", "unanswered", "CheckReport", "CheckRow",
           "STATUSES"]

STATUSES = {
    "pass": "agrees within the tolerance",
    "fail": "disagrees beyond the tolerance",
    "kink": "disagrees where the target is not smooth (kink or jump within eps)",
    "nonfinite": "a value is nan or infinite, so nothing can be compared",
    "unresolved": ("finite differences cannot settle it: numbers on the way to the target "
                   "are so large that their rounding moves the slope by more than the "
                   "difference (a larger eps may)"),
    "error": "could not be compared",
}
"""Row status → what it means. ``kink``, ``nonfinite`` and ``unresolved`` rows are flagged,
not failed."""

_FLAGGED = ("kink", "nonfinite", "unresolved")
_OK = frozenset({"pass", *_FLAGGED})
_STATUS = ("pass", "fail", "kink", "nonfinite", "unresolved")  # the check's status codes 0..4
_RANK = {"error": 0, "fail": 1, "nonfinite": 2, "unresolved": 3, "kink": 4, "pass": 5}
# rounding errors allowed each evaluation of the target, in float epsilons times the size of
# the numbers that carry it (see _rounding_scale): a central difference of two such values is
# off by up to 2 * _ROUNDING * eps_float * size / (2 * eps) (the row's "noise"); one-sided
# slopes by twice that
_ROUNDING = 2.0
_EPS_FLOAT = float(np.finfo(float).eps)
# an unresolved row is measured again with eps grown so that its slack is 1/_SETTLE of its
# bound, at least 10 and at most _SETTLE_MAX times (see _settle)
_SETTLE = 8.0
_SETTLE_MAX = 1e4
_status_of = operator.attrgetter("status")

# Work limits of one check, in array elements: all the columns of all the
# nodes (beyond it, leaves are sampled), and one replay chunk (memory).
_WORK = 2 ** 25
_CHUNK = 2 ** 22
# A chunk of the level-grouped replay: smaller, since every group step gathers its parents'
# rows from the whole chunk (2^21 numbers, 16 MB, replayed 1.4-1.6x faster than 2^22 on
# micrograd's demo network at 30-300 points; 2^19 and less pay the group steps too often).
_GROUP_CHUNK = 2 ** 21
# The level-grouped replay (_Groups) is used where groups average at least this many nodes.
_GROUP_MIN = 2
_PROBE = 2048  # op nodes whose groups say whether a big graph is worth the rest (see _Groups)
# What an "auto" check of a scalar graph replayed by groups may cost: _BUDGET backward
# passes. The costs below are nanoseconds measured on one machine; only their ratios
# matter (each is Python or numpy work of the same kind on any machine): a backward
# pass per node; the check per node (levels, order, report), per group step and
# chunk of columns, and per number computed (while a chunk fits in the cache, and past it).
# Measured on micrograd's demo network at 1-300 points with caches cold (gc.collect()
# before each run, as the benchmarks time it): a number costs 1-1.5 ns in a chunk under
# 2 MB and 2-2.6 ns past it, not the 0.5-1 ns an earlier, warm calibration found; with
# those the check came to 2.3-3.5 backward passes instead of 1.5. A first check also costs
# about a millisecond whatever the size (choosing, the report, numpy's calls on small
# arrays, cold caches): a graph of a few thousand nodes gets the floor of 16 leaves.
_BUDGET = 1.5
_NS_CHECK = 1_000_000.0
_NS_BACKWARD = 270.0
_NS_NODE = 180.0
_NS_STEP = 700.0
_NS_NUMBER = (1.0, 2.6)
_CACHE = 2 ** 18  # numbers in a chunk that still count as cached
_SMALL = 2 ** 15  # numbers in a whole check small enough not to count (all leaves checked)
_GROUPS_MAX = 2 ** 18  # nodes past which "auto" does not compile groups (see _auto_limit)
# At most this many perturbed elements are replayed on plain floats, one pass per
# evaluation point (a numpy call per node costs more than a few float operations).
_FLOAT_SLOTS = 3
# the slots an "auto" check of a deep graph (no groups) perturbs: one replay on floats of
# 1 + 2 * _DEEP_SLOTS points, about a backward pass (a leaf, and all leaves along a direction)
_DEEP_SLOTS = 2
# the leaves an "auto" check of a graph replayed by groups perturbs one by one, at least (and
# all of them at once along a direction: one more slot)
_LEAF_FLOOR = 16
# ... all in one pass up to this many nodes (past it, the points' lists leave the cache and a
# pass per point is quicker: 0.75x the time at 10^3-10^4 nodes, 1.1x at 10^5)
_FLOAT_TOGETHER = 2 ** 15

ASSERT_ROWS = 20
"""Wrong rows an ``assert_passed()`` message describes one by one."""


class CheckRow(NamedTuple):
    """One comparison: a number from the trace (``got``) beside what it should be.

    In a gradient check ``got`` is the analytic gradient and ``expected`` the
    numerical slope (also available as ``.analytic`` and ``.numeric``); in an
    :func:`expect` report ``expected`` is the number the caller gave.
    """

    name: str
    got: Any
    expected: Any
    abs_err: float
    rel_err: float
    bound: float  # atol + rtol * |expected|: the row passes if abs_err <= bound
    status: str  # a key of STATUSES
    note: str = ""
    index: Optional[int] = None  # the node's index in trace.nodes
    count: int = 1  # elements compared (a tensor row shows its worst element)

    @property
    def ok(self) -> bool:
        """True unless the row failed or could not be compared (flags are ok)."""
        return self.status in _OK

    @property
    def analytic(self):
        return self.got

    @property
    def numeric(self):
        return self.expected

    @property
    def excess(self) -> float:
        """abs_err / bound: above 1 means outside the tolerance."""
        err, bound = self.abs_err, self.bound
        if err != err:
            return math.inf
        if bound > 0:
            return err / bound
        return math.inf if err > 0 else 0.0

    def sort_key(self):
        """Worst first: errors, failures, flags, passes; then by excess, then by abs_err
        (which ranks rows whose bound is 0, all of excess inf)."""
        err = self.abs_err
        return (_RANK[self.status], -self.excess, -err if err == err else -math.inf)

    def to_dict(self, names=("got", "expected")) -> dict:
        return {"name": self.name, "node": self.index, names[0]: _plain(self.got),
                names[1]: _plain(self.expected), "abs_err": self.abs_err,
                "rel_err": self.rel_err, "bound": self.bound, "status": self.status,
                "note": self.note, "count": self.count}


# a CheckRow from a full tuple of fields: CheckRow._make without its Python call
_new_row = functools.partial(tuple.__new__, CheckRow)


def _plain(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


class CheckReport:
    """The result of :func:`check` or :func:`expect`.

    ``kind`` is ``"check"`` (analytic gradients against finite differences) or
    ``"expect"`` (trace numbers against given answers). ``notes`` are
    report-wide remarks (branch dependence, sampling, replay problems).
    """

    def __init__(self, rows, *, kind: str = "check", atol: float, rtol: float,
                 eps: float | None = None, notes=(), replay_ok: bool = True,
                 target: str = "", replay: tuple | None = None, error: str | None = None):
        self.rows: list[CheckRow] = list(rows)
        self.kind = kind
        self.eps, self.atol, self.rtol = eps, atol, rtol
        self.notes: list[str] = list(notes)
        self.replay_ok = replay_ok
        self.target = target
        # the sanity check of a gradient check: (recorded, replayed) target value
        self.replay = replay
        # why there is nothing to compare (the graded cell failed), or None
        self.error = error

    # ------------------------------------------------------------------ verdict
    @property
    def columns(self) -> tuple:
        """Names of the two compared columns."""
        return ("analytic", "numeric") if self.kind == "check" else ("got", "expected")

    @property
    def passed(self) -> bool:
        return (self.error is None and self.replay_ok
                and _OK.issuperset(map(_status_of, self.rows)))

    @property
    def failures(self) -> list:
        """Rows that failed or could not be compared, worst first."""
        return sorted((r for r in self.rows if not r.ok), key=CheckRow.sort_key)

    @property
    def flagged(self) -> list:
        """Rows at a kink, with non-finite numbers or beyond what finite differences resolve:
        reported, not failed."""
        return [r for r in self.rows if r.status in _FLAGGED]

    def worst_first(self) -> list:
        return sorted(self.rows, key=CheckRow.sort_key)

    @property
    def verdict(self) -> str:
        """One line: how many rows agree, disagree or are flagged (then, after a sample of
        the leaves, how all of them did at once)."""
        if self.kind == "check" and any(r.index is None for r in self.rows):
            alone = [r for r in self.rows if r.index is not None]
            text = CheckReport(alone, atol=self.atol, rtol=self.rtol).verdict if alone else ""
            for r in self.rows:
                if r.index is None:  # all the leaves at once, along a direction
                    word = ("agree" if r.status == "pass" else "flagged: " + r.status
                            if r.ok else "disagree")
                    text += f"{'; ' if text else ''}{r.name}: {word}"
            return self._caveats(text)
        n = len(self.rows)
        bad = sum(not r.ok for r in self.rows)
        flagged = len(self.flagged)
        if self.kind == "expect":
            text = f"{n - bad} of {n} correct"
        elif bad:
            text = f"{bad} of {n} gradients disagree with finite differences"
        elif not flagged:
            text = (f"all {n} gradients match finite differences" if n != 1
                    else "the gradient matches finite differences")
        else:
            text = f"{n - flagged} of {n} gradients match finite differences"
        if flagged:
            kinds = [k for k in _FLAGGED if any(r.status == k for r in self.rows)]
            text += f"; {flagged} flagged ({', '.join(kinds)}), not judged"
        return self._caveats(text)

    def _caveats(self, text: str) -> str:
        if not self.replay_ok:
            text = "replay does not reproduce the run; " + text
        if self.error is not None:
            text += "; the cell could not be run"
        return text

    def assert_passed(self) -> None:
        """Raise AssertionError unless the report passed.

        The message has the verdict, the tolerance, and one line per wrong row
        (worst first, up to ``ASSERT_ROWS``): its name, what was expected, what
        was got and the tolerance it missed, or why it could not be compared.
        """
        if self.passed:
            return
        lines = [self.verdict]
        if self.error is not None:
            lines.append(self.error)
        if not self.replay_ok:
            lines += [n for n in self.notes if n.startswith("Replay mismatch")]
        failures = self.failures
        if failures:
            lines.append(f"tolerance: |{self.columns[0]} − {self.columns[1]}| ≤ atol "
                         f"{self.atol:g} + rtol {self.rtol:g}·|{self.columns[1]}|")
        for k, row in enumerate(failures[:ASSERT_ROWS]):
            lines.append(("worst: " if k == 0 and self.kind == "check" else "- ")
                         + _describe(row, self.columns))
        if len(failures) > ASSERT_ROWS:
            lines.append(f"(and {len(failures) - ASSERT_ROWS} more: "
                         + ", ".join(repr(r.name) for r in failures[ASSERT_ROWS:ASSERT_ROWS + 5])
                         + (", ..." if len(failures) > ASSERT_ROWS + 5 else "") + ")")
        raise AssertionError("\n".join(lines))

    # ------------------------------------------------------------------ views
    def to_dict(self) -> dict:
        return {"kind": self.kind, "passed": self.passed, "verdict": self.verdict,
                "target": self.target, "eps": self.eps, "atol": self.atol, "rtol": self.rtol,
                "replay_ok": self.replay_ok, "notes": list(self.notes), "error": self.error,
                "replay": None if self.replay is None else
                dict(zip(("recorded", "replayed"), self.replay)),
                "rows": [r.to_dict(self.columns) for r in self.rows]}

    text = None
    """``report → str`` for ``str(report)``: set by :mod:`gradmagic.views` when it is imported
    (a one-way hook: the model never imports a view)."""

    def __str__(self):
        return self.text() if self.text is not None else f"{self.kind}: {self.verdict}"

    def __repr__(self):
        return f"<CheckReport: {self.verdict}>"


def _describe(row: CheckRow, columns) -> str:
    where = f" (node #{row.index})" if row.index is not None else ""
    if row.status == "error":
        return f"{row.name!r}{where}: {row.note}"
    if columns[0] == "analytic":
        text = (f"{row.name!r}{where}: expected {_num(row.expected)} (numeric slope), "
                f"got {_num(row.got)} (analytic gradient)")
    else:
        text = f"{row.name!r}{where}: expected {_num(row.expected)}, got {_num(row.got)}"
    text += f"; |difference| {_num(row.abs_err)} > tolerance {_num(row.bound)}"
    if row.note:
        text += f" [{row.note}]"
    return text


def _num(x) -> str:
    """A number or array on one line (as the views show it)."""
    return fmt(x, 6)


# =========================================================================== the check
def check(trace, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3, *,
          max_leaves="auto", max_elements: int = 200, seed: int = 0) -> CheckReport:
    """Compare each leaf's analytic gradient with a central finite difference.

    Parameters
    ----------
    trace:
        A :class:`gradmagic.analysis.trace.Trace` (its graph is replayed, not re-run).
    eps, atol, rtol:
        Step and tolerance: a row passes if ``|analytic - numeric| <= atol +
        rtol * |numeric|`` (the defaults are PyTorch gradcheck's).
    max_leaves:
        How many leaves to perturb one by one: ``"auto"`` perturbs all of them unless
        that would cost more than its budget (about 1.5 backward passes for a
        network replayed by levels, a leaf and a direction for a deep scalar graph,
        a fixed amount of work for tensors), then the named leaves first and a
        seeded random sample (of the named ones if they are too many, else of the
        rest), with a note; ``None`` perturbs all; an int caps it. When leaves of a
        scalar graph are left out, one more row moves all of them at once along a
        random direction (``index`` None, ``count`` the leaves).
    max_elements:
        At most this many elements of each array (tensor) leaf are perturbed,
        chosen with ``seed``; its row shows the worst of them.
    """
    for name, x in (("eps", eps), ("atol", atol), ("rtol", rtol)):
        if not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    if eps == 0:
        raise ValueError("eps must be > 0")
    plan = _Plan(trace)
    slots, notes = plan.choose(max_leaves, max_elements, seed)
    if trace.branch_dependent:
        notes.insert(0, f"The cell's control flow depended on values "
                        f"({trace.branch_events} comparison(s) or conversion(s) of a Value): "
                        "this check holds for this branch only; other inputs may take "
                        "another path.")
    if getattr(trace, "float_conversions", 0):
        n = trace.float_conversions
        notes.append(f"A Value or Tensor was converted to plain numbers during the run "
                     f"({n} time{'' if n == 1 else 's'}): if such numbers fed the result, that "
                     "part is a constant in the graph, and neither backward nor this replay "
                     "can see it.")
    with np.errstate(all="ignore"):
        measured = plan.measure(slots, eps)
        replay_ok, note = plan.replay_agrees(measured.f0)
    if note:
        notes.append(note)
    if not all_finite(measured.f0):
        notes.append(f"The target is {measured.f0}: no slope can be measured.")
    rows = _rows(plan, slots, measured, atol, rtol, trace, eps)
    rows = _settle(plan, slots, rows, measured, atol, rtol, trace, eps, notes)
    return CheckReport(rows, kind="check", eps=eps, atol=atol, rtol=rtol, notes=notes,
                       replay_ok=replay_ok, target=trace.target.name,
                       replay=(_plain(trace.target.data), float(measured.f0)))


def _settle(plan, slots, rows, m, atol, rtol, trace, eps, notes) -> list:
    """``rows`` with the unresolved ones of a scalar graph measured again with a step that
    the rounding they carry cannot hide a slope in (``_SETTLE`` times its slack over its
    bound, at most ``_SETTLE_MAX`` times eps); a row still unresolved is kept as it was.

    A sum of a few hundred products of everyday numbers (1e7) rounds by 1e-8 or so: eps
    1e-6 then measures its inputs' slopes to a few parts in 1,000, an eps 100 times larger
    to a few in 10^7.
    """
    todo = [j for j, r in enumerate(rows) if r.status == "unresolved"]
    if not todo or plan.array_leaves:
        return rows
    with np.errstate(all="ignore"):
        need = _SETTLE * m.slack[todo] / np.array([rows[j].bound for j in todo])
    grow = float(np.clip(np.nan_to_num(np.max(need), nan=_SETTLE_MAX), 10, _SETTLE_MAX))
    step = eps * grow
    single = len(slots.node)
    alone = [j for j in todo if j < single]
    sub = _Slots(slots.node[alone], slots.elem[alone], slots.spread,
                 slots.signs[[j - single for j in todo if j >= single]])
    with np.errstate(all="ignore"):
        again = _rows(plan, sub, plan.measure(sub, step), atol, rtol, trace, step)
    settled = 0
    for j, row in zip(todo, again):  # (both in slot order: leaves, then directions)
        if row.status != "unresolved":
            rows[j] = row._replace(note=f"measured with eps {step:.3g}" + (
                f"; {row.note}" if row.note else ""))
            settled += 1
    if settled:
        notes.append(f"{settled} row{'s' if settled > 1 else ''} measured again with eps "
                     f"{step:.3g}: at eps {eps:g} the rounding of the numbers on the way to the "
                     "target hid the slope.")
    return rows


class _Measured:
    """What one check measured, one entry per slot (perturbed element)."""

    def __init__(self, f0, plus, minus, hp, hm):
        self.f0 = f0
        self.steps = steps = hp + hm
        self.numeric = (plus - minus) / steps
        self.fwd, self.bwd = (plus - f0) / hp, (f0 - minus) / hm
        self.size = np.maximum(np.abs(f0), np.maximum(np.abs(plus), np.abs(minus)))

    def rounding(self, scale: float):
        """How far rounding may move each central slope (see ``_ROUNDING``), kept as
        ``slack``; ``size`` becomes the size of the numbers rounded (at least ``scale``,
        :func:`_rounding_scale`)."""
        self.size = np.maximum(self.size, scale)
        self.slack = (2 * _ROUNDING * _EPS_FLOAT) * self.size / self.steps
        return self.slack


def _rounding_scale(trace) -> float:
    """The size of the rounding errors the target carries, over the float epsilon.

    Each op node rounds its number by up to eps_float * |v|, which reaches the target times
    the node's gradient: the root sum of squares of ``grad * data`` over the op nodes (finite
    ones; a tensor node's elements each count). It exceeds |target| where large numbers
    cancel on the way: ``(1e12 + x) - 1e12`` is 2 but carries 1e12's rounding.
    """
    ops = trace.parent_a >= 0
    with np.errstate(all="ignore"):
        terms = (trace.grad * trace.data)[ops]
        terms = terms[np.isfinite(terms)]
        total = float(np.dot(terms, terms))
        for i, data in trace.tensor_data.items():
            grad = trace.tensor_grad.get(i)
            if ops[i] and grad is not None:
                t = np.ravel(np.asarray(grad, dtype=float) * np.asarray(data, dtype=float))
                t = t[np.isfinite(t)]
                total += float(np.dot(t, t))
    return math.sqrt(total) if math.isfinite(total) else math.inf


class _Slots:
    """The perturbations of one check ("slots"): each perturbed element (leaf node index
    and flat element, -1 for a scalar), then each random direction (a row of ``signs``, ±1
    for each of the scalar leaves ``spread``, all moved at once by ±eps times their sign)."""

    def __init__(self, node, elem, spread=None, signs=None):
        self.node = np.asarray(node, dtype=np.intp)
        self.elem = np.asarray(elem, dtype=np.intp)
        self.spread = np.zeros(0, np.intp) if spread is None else spread
        self.signs = np.zeros((0, len(self.spread))) if signs is None else signs

    def __len__(self):
        return len(self.node) + len(self.signs)

    def __getitem__(self, part: slice) -> "_Slots":
        start, stop, _ = part.indices(len(self))
        k = len(self.node)
        return _Slots(self.node[start:stop], self.elem[start:stop], self.spread,
                      self.signs[max(0, start - k):max(0, stop - k)])

    def moved(self, data, eps: float) -> tuple:
        """Each direction's leaves moved up and down: two (directions, leaves) arrays."""
        x = data[self.spread]
        return x + eps * self.signs, x - eps * self.signs


def _hashes(n: int, seed: int, start: int = 1) -> np.ndarray:
    """Seeded pseudo-random uint64s for positions ``start`` … ``start + n - 1`` (splitmix64:
    quicker to start than numpy's generators)."""
    with np.errstate(over="ignore"):
        x = np.arange(start, start + n, dtype=np.uint64) + np.uint64(seed % 2 ** 64) * np.uint64(
            0x9E3779B97F4A7C15)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def _sample(items: np.ndarray, k: int, seed: int) -> list:
    """``k`` of ``items``, a seeded random choice: the ones with the smallest hashes of
    (seed, position)."""
    if k >= len(items):
        return items.tolist()
    return items[np.argpartition(_hashes(len(items), seed), k)[:k]].tolist()


def _signs(n: int, seed: int) -> np.ndarray:
    """A seeded random direction: ``n`` signs ±1.0 (hashes of other positions than
    :func:`_sample`'s)."""
    bits = (_hashes(n, seed, start=2 ** 62) >> np.uint64(17)) & np.uint64(1)
    return np.where(bits == 1, 1.0, -1.0)


class _Groups:
    """A scalar graph compiled for the numpy replay: nodes of one level and one op at once.

    A node's level is one more than its deepest parent's (leaves: 0), so the
    nodes of a level depend only on earlier levels, and all the nodes of one
    level that share an op are computed by one numpy call on a 2-d array ``V``
    (a row per node, a column per evaluation point). Rows are numbered leaves
    first, then op nodes in the order they are computed, so each group's rows
    are one slice of ``V``; a group's parents are gathered with ``take`` (or,
    for a group of one node, read as row views). The Python work per node is
    one pass computing the levels; the numpy calls are a few per group, not per
    node. Worth it only where groups are big (a network, many points); a long
    loop has a level per few nodes, and replays node by node (or on floats).
    A chain of single nodes, each the one before it plus (times, minus) a row
    computed earlier (``sum()`` over Values), is one ``accumulate`` (:func:`_chains`).
    """

    __slots__ = ("rows", "leaves", "pos", "steps", "n_groups")

    @classmethod
    def make(cls, trace, rows, min_size: Optional[float] = None) -> Optional["_Groups"]:
        """The program of op nodes ``rows`` (ascending), or None if its calls (a group, a
        single node, a chain) average fewer than ``min_size`` nodes (default
        ``_GROUP_MIN``). ``n_groups`` is the number of calls.

        A graph whose last op nodes (a quarter of them, at most ``_PROBE``: the nodes
        nearest the target in the walk's order, a loop's last steps, a network's last
        layers, a sum's chain) are not worth groups, their parents before them taken as
        inputs, is taken for a deep one without computing the levels of the rest, which
        would cost half a backward pass or more.
        """
        n = trace.n
        pa = trace.parent_a
        least = _GROUP_MIN if min_size is None else min_size
        probe = min(_PROBE, len(rows) // 4)
        if probe >= 64 and _levels(trace, rows[-probe:], least, probe=True) is None:
            return None
        found = _levels(trace, rows, least)
        if found is None:
            return None
        key, perm, cut = found
        n_ops = len(trace.ops)
        self = cls()
        order = rows[perm]  # op nodes in the order they are computed
        leaves = np.flatnonzero(pa < 0)
        nl = len(leaves)
        pos = np.empty(n, dtype=np.intp)  # node index -> row of V
        pos[leaves] = np.arange(nl)
        pos[order] = np.arange(nl, n)
        A = pos[pa[order]]
        b = trace.parent_b[order]
        B = np.where(b >= 0, pos[np.maximum(b, 0)], -1)
        starts = np.concatenate(([0], cut))
        ends = np.concatenate((cut, [len(order)]))
        code = key[starts] % n_ops
        forwards = [entry.np for entry in trace.ops]
        is_ufunc = np.array([isinstance(f, np.ufunc) for f in forwards], dtype=bool)
        binary = B[starts] >= 0
        # kind of each group: 0 several nodes; 1 one node, a binary ufunc (written in
        # place); 2 one node, anything else. Consecutive groups of one node of the
        # same kind make one run of (fn, a row, b row or -1, row).
        single = ends - starts == 1
        kind = np.where(single, np.where(binary & is_ufunc[code], 1, 2), 0)
        new_step = np.ones(len(kind), dtype=bool)
        new_step[1:] = (kind[1:] != kind[:-1]) | (kind[1:] == 0)
        firsts = np.flatnonzero(new_step).tolist()
        lasts = firsts[1:] + [len(kind)]
        where = starts[single]
        run = list(zip(map(forwards.__getitem__, code[single].tolist()), A[where].tolist(),
                       B[where].tolist(), (where + nl).tolist()))
        taken = np.cumsum(single) - single  # singles before each group
        fns = list(map(forwards.__getitem__, code.tolist()))
        steps = []
        starts_l, ends_l, kind_l, taken_l = (starts.tolist(), ends.tolist(), kind.tolist(),
                                             taken.tolist())
        for f, g in zip(firsts, lasts):
            if kind_l[f] == 1:
                steps += _chains(run[taken_l[f]:taken_l[f] + g - f])
            elif kind_l[f]:
                steps.append((None, False, run[taken_l[f]:taken_l[f] + g - f], None, 0, 0))
            else:
                s, e = starts_l[f], ends_l[f]
                fn = fns[f]
                steps.append((fn, isinstance(fn, np.ufunc), A[s:e],
                              B[s:e] if binary[f] else None, s + nl, e + nl))
        self.n_groups = sum(len(a) if fn is None else 1 for fn, _, a, _, _, _ in steps)
        if len(rows) < least * self.n_groups:  # chains did not make up for it
            return None
        self.rows, self.leaves, self.pos, self.steps = rows, leaves, pos, steps
        return self

    def run(self, plan, slots: "_Slots", eps: float):
        """(target column, (steps up, steps down)) for the slots' evaluation points."""
        trace = plan.trace
        n_slots = len(slots)
        k = 1 + 2 * n_slots
        V = np.empty((trace.n, k))
        nl = len(self.leaves)
        V[:nl] = trace.data[self.leaves][:, None]
        rows = self.pos[slots.node]
        x = trace.data[slots.node]
        up, down = x + eps, x - eps
        single = len(slots.node)
        cols = np.arange(1, 2 * single + 1, 2)
        V[rows, cols] = up
        V[rows, cols + 1] = down
        hp, hm = up - x, x - down
        if len(slots.signs):  # each direction moves every leaf of spread in two columns
            spread = self.pos[slots.spread]
            for c, u, d in zip(range(2 * single + 1, k, 2), *slots.moved(trace.data, eps)):
                V[spread, c] = u
                V[spread, c + 1] = d
            hp = np.concatenate((hp, np.full(len(slots.signs), eps)))
            hm = np.concatenate((hm, np.full(len(slots.signs), eps)))
        take = V.take
        for fn, uf, a, b, s, e in self.steps:
            if uf is _CHAIN:  # rows s+1..e-1 each the row before it (op) another row
                take(a, axis=0, out=V[s + 1:e])
                fn(V[s:e], axis=0, out=V[s:e])
            elif fn is None:  # a run of single nodes
                if uf:
                    for f, i, j, r in a:
                        f(V[i], V[j], V[r])
                else:
                    for f, i, j, r in a:
                        V[r] = f(V[i]) if j < 0 else f(V[i], V[j])
            elif b is None:
                if uf:
                    fn(take(a, axis=0), V[s:e])
                else:
                    V[s:e] = fn(take(a, axis=0))
            elif uf:
                fn(take(a, axis=0), take(b, axis=0), V[s:e])
            else:
                V[s:e] = fn(take(a, axis=0), take(b, axis=0))
        return V[self.pos[plan.target]].copy(), (hp, hm)


def _levels(trace, rows, least, probe: bool = False):
    """(key, perm, cut) of op nodes ``rows`` (ascending): each node's level and op code as
    one sort key, the order that sorts them and where a group starts in it; None if the
    groups, counting a chain as one, average under ``least``. A ``probe`` (a few rows) takes
    parents outside ``rows`` as inputs (level 0)."""
    pa, pb = trace.parent_a, trace.parent_b
    if probe:
        got = {}
        level = got.get
        for i, a, b in zip(rows.tolist(), pa[rows].tolist(), pb[rows].tolist()):
            x = level(a, 0)
            y = level(b, 0)
            got[i] = (x if x > y else y) + 1
        levels = np.array(list(got.values()), dtype=np.int64)  # (in the order of rows)
    else:
        level = [0] * (trace.n + 1)  # level[-1] (a missing second parent) stays 0
        for i, a, b in zip(rows.tolist(), pa[rows].tolist(), pb[rows].tolist()):
            x = level[a]
            y = level[b]
            level[i] = (x if x > y else y) + 1
        levels = np.array(level, dtype=np.int64)[rows]
    n_ops = len(trace.ops)
    key = levels * n_ops + trace.op_code[rows]
    perm = np.argsort(key, kind="stable")
    key = key[perm]
    cut = np.flatnonzero(key[1:] != key[:-1]) + 1
    if len(rows) < least * (len(cut) + 1) and not _chained(key, cut, trace, rows, perm):
        return None
    return key, perm, cut


def _chained(key, cut, trace, rows, perm) -> bool:
    """Whether a graph of groups too small to pay has chains that may make up for it: most of
    its single-node groups ``+``, ``*`` or ``-`` the single node computed just before
    (``sum()`` over Values), which replay as one ``accumulate`` each (:func:`_chains`)."""
    sizes = np.diff(np.concatenate(([0], cut, [len(key)])))
    starts = np.concatenate(([0], cut))[sizes == 1]
    if len(starts) < 2 * _CHAIN_MIN:
        return False
    order = rows[perm]
    nodes = order[starts]
    chainable = np.array([getattr(e, "np", None) in _ACCUMULATE for e in trace.ops] + [False])
    op = trace.op_code[nodes]
    # node k links to node k - 1 when it is computed right after it, from it, by the same op
    prev = nodes[:-1]
    link = ((starts[1:] == starts[:-1] + 1) & (op[1:] == op[:-1]) & chainable[op[1:]]
            & ((trace.parent_a[nodes[1:]] == prev) | (trace.parent_b[nodes[1:]] == prev)))
    return 2 * int(np.count_nonzero(link)) > len(starts)


class _Programs:
    """The grouped programs (:class:`_Groups`, or None for a graph too deep for groups) of the
    last graph shapes checked, so a cell run again does not compile its graph again.

    A program depends only on the graph's shape: its parent and op-code columns and the op
    entries they number (not on any value). The key is a digest of those columns; an entry
    keeps the op entries it was made with (compared by identity when found, and kept alive,
    so their ids cannot be reused). At most ``entries`` shapes and ``nodes`` nodes in all
    (a program holds about 40 bytes a node); a bigger graph is not kept. The check's budget
    does not depend on it: a cell run again checks the same leaves, only sooner.
    """

    def __init__(self, entries: int = 8, nodes: int = 2 ** 20):
        self.entries, self.nodes = entries, nodes
        self._kept = OrderedDict()  # digest -> (op entries, n, program)

    def get(self, trace, rows) -> Optional["_Groups"]:
        digest = hashlib.blake2b(digest_size=16)
        for column in (trace.parent_a, trace.parent_b, trace.op_code):
            digest.update(np.ascontiguousarray(column).data)
            digest.update(b"|")
        key = digest.digest()
        found = self._kept.get(key)
        if found is not None and len(found[0]) == len(trace.ops) and all(
                a is b for a, b in zip(found[0], trace.ops)):
            self._kept.move_to_end(key)
            return found[2]
        program = _Groups.make(trace, rows)
        if trace.n <= self.nodes:
            self._kept[key] = (list(trace.ops), trace.n, program)
            while len(self._kept) > self.entries or sum(
                    e[1] for e in self._kept.values()) > self.nodes:
                self._kept.popitem(last=False)
        return program

    def clear(self) -> None:
        self._kept.clear()


_PROGRAMS = _Programs()


@functools.lru_cache(maxsize=None)
def _float_pass(width: int, binary: bool):
    """``run(outs, fns, As, Bs, v0, ..., v{width-1})``: one pass over a float program that
    computes node ``out = f(a, b)`` (``f(a)`` where ``b < 0``) in each of ``width`` lists of
    numbers: the loop's own work is shared by the points (a quarter less time than a pass
    per point, while the lists stay in the cache). Written out for each width (at most
    ``1 + 2 * _FLOAT_SLOTS``), as a loop over the lists would cost more than it saves.
    ``+``, ``-`` and ``*`` (``operator.add``... : the same float operations) are written as
    operators, which saves a call per node and point."""
    names = [f"v{j}" for j in range(width)]

    def assign(indent: int, expression: str) -> str:
        return "".join(f"{' ' * indent}{v}[out] = {expression.format(v=v)}\n" for v in names)

    inline = "".join(f"        {'if' if k == 0 else 'elif'} f is {name}:\n"
                     + assign(12, f"{{v}}[a] {symbol} {{v}}[b]")
                     for k, (name, symbol) in enumerate((("mul", "*"), ("add", "+"),
                                                         ("sub", "-"))))
    body = inline + (("        else:\n" + assign(12, "f({v}[a], {v}[b])")) if binary else
                     "        elif b < 0:\n" + assign(12, "f({v}[a])") + "        else:\n"
                     + assign(12, "f({v}[a], {v}[b])"))
    source = (f"def run(outs, fns, As, Bs, {', '.join(names)}):\n"
              "    mul, add, sub = _MUL, _ADD, _SUB\n"
              "    for out, f, a, b in zip(outs, fns, As, Bs):\n" + body)
    scope = {"_MUL": operator.mul, "_ADD": operator.add, "_SUB": operator.sub}
    exec(compile(source, f"<gradmagic float pass {width}>", "exec"), scope)
    return scope["run"]
_CHAIN = "chain"
# ops whose chains replay as one ``accumulate``: out[k] = out[k-1] op x[k] in order, the same
# float operations as node by node; + and * either way round (exactly commutative)
_ACCUMULATE = {np.add: True, np.multiply: True, np.subtract: False}
_CHAIN_MIN = 3  # links (nodes after the first) worth one accumulate instead of single calls


def _chains(run: list) -> list:
    """The steps of a run of single-node binary ufunc groups ``(f, a row, b row, row)``:
    its chains (each node the previous one ``f`` another row computed before the chain:
    ``sum()`` of Values, a running product) as one accumulate each, the rest as runs of
    single calls."""
    steps, singles, k, n = [], [], 0, len(run)
    while k < n:
        f, _, _, r0 = run[k]
        either = _ACCUMULATE.get(f)
        end = k + 1
        if either is not None:
            prev = r0
            for g, i, j, r in islice(run, k + 1, None):
                if g is not f or r != prev + 1:
                    break
                if not ((i == prev and j < r0) or (either and j == prev and i < r0)):
                    break
                prev = r
            end = k + 1 + prev - r0
        if end - k > _CHAIN_MIN:
            others = [j if i == r - 1 else i for _, i, j, r in run[k + 1:end]]
            singles.append(run[k])  # the chain's first node, from its two operands
            steps.append((None, True, singles, None, 0, 0))
            steps.append((f.accumulate, _CHAIN, np.array(others, dtype=np.intp), None, r0,
                          r0 + len(others) + 1))
            singles = []
            k = end
        else:
            singles.append(run[k])
            k += 1
    if singles:
        steps.append((None, True, singles, None, 0, 0))
    return steps


class _Plan:
    """The replay program of a trace: its leaves, and each op node's forward.

    ``program`` lists, in topological order, ``(node, forward, a, b, free_a,
    free_b)``: the node computed from parents ``a`` and ``b`` (``b`` is -1 for a
    unary op; -2 for a node with its own ``_replay``, whose ``a`` is the tuple
    of parents and ``free_b`` the parents to free). ``free_*`` marks a parent's
    last use, after which its array is dropped: the replay's working set then
    stays small and numpy reuses hot memory instead of growing the heap.
    """

    def __init__(self, trace):
        self.trace = trace
        self.n = n = trace.n
        self.target = n - 1
        tensors = trace.tensor_data
        pa = trace.parent_a
        leaf = pa < 0
        self.kinks = np.flatnonzero(trace.kink)[::-1].tolist()  # where a subgradient was used
        self.constants = np.flatnonzero(trace.constant)  # leaves that are not inputs
        leaves = np.flatnonzero(leaf)
        if tensors:
            is_array = np.zeros(n, dtype=bool)
            is_array[list(tensors)] = True
            self.array_leaves = leaves[is_array[leaves]].tolist()
            self.scalar_leaves = leaves[~is_array[leaves]].tolist()
        else:
            self.array_leaves = []
            self.scalar_leaves = leaves.tolist()  # node indices, ascending
        self.sizes = n + sum(max(1, a.size) - 1 for a in tensors.values())
        self._rows = np.flatnonzero(~leaf)  # the op nodes, in topological order
        # a scalar graph can replay on plain floats with each op's float forward
        self.floats_ok = not tensors and all(callable(getattr(e, "f", None)) for e in trace.ops)
        # ... and on numpy columns, node groups at a time (see _Groups)
        self.scalar_numpy = not tensors and len(self._rows) > 0
        self._program = None
        self._groups = False  # not yet made (None: the graph is too deep for groups)
        self._scale = None  # the rounding scale, made when first read

    @property
    def rounding_scale(self) -> float:
        """:func:`_rounding_scale` of the trace, computed once (a re-measure reads it again)."""
        if self._scale is None:
            self._scale = _rounding_scale(self.trace)
        return self._scale

    def groups(self) -> Optional["_Groups"]:
        """The level-grouped program of a scalar graph, or None where groups would
        be too small to pay (a deep, narrow graph: a long loop). Made once per graph
        shape: a cell run again makes a graph of the same shape (see :data:`_PROGRAMS`)."""
        if self._groups is False:
            self._groups = _PROGRAMS.get(self.trace, self._rows) if self.scalar_numpy else None
        return self._groups

    @property
    def program(self) -> list:
        """The numpy replay program (made on first use: the float replay needs none)."""
        if self._program is None:
            self._make_program()
        return self._program

    @property
    def peak(self) -> int:
        if self._program is None:
            self._make_program()
        return self._peak

    def _make_program(self) -> None:
        trace, n, target = self.trace, self.n, self.target
        tensors = trace.tensor_data
        pa, pb, codes = trace.parent_a, trace.parent_b, trace.op_code
        leaf = pa < 0
        # each op node's forward, and where a parent's last use is (its array is then freed)
        rows = self._rows
        a, b = pa[rows], pb[rows]
        last = np.full(n, -1, dtype=np.int64)
        last[a] = rows  # repeated indices: the last (largest) row wins
        has_b = b >= 0
        last_b = np.full(n, -1, dtype=np.int64)
        last_b[b[has_b]] = rows[has_b]
        last = np.maximum(last, last_b)
        last[target] = n  # never freed
        free_a = last[a] == rows
        free_b = has_b & (last[np.maximum(b, 0)] == rows) & (b != a)
        forwards = [entry.np for entry in trace.ops]
        fns = list(map(forwards.__getitem__, codes[rows].tolist()))
        program = list(zip(rows.tolist(), fns, a.tolist(), b.tolist(), free_a.tolist(),
                           free_b.tolist()))
        for k, i in enumerate(rows.tolist() if tensors else ()):
            if i in tensors:  # a tensor op: its numpy forward with the node's params
                out, fn, pa_, pb_, fa, fb = program[k]
                parents = (pa_,) if pb_ < 0 else (pa_, pb_)
                free = tuple(p for p in set(parents) if last[p] == i)
                program[k] = (out, _with_params(fn, trace.params.get(i)), parents, -2, False,
                              free)
        self._program = program
        # the most array elements alive at once in a replay, per column: a leaf lives
        # from the start, an op node from its row, each until its last use
        start = np.where(leaf, 0, np.arange(n))
        end = np.where(last < 0, start, np.minimum(last, n - 1))
        weight = np.ones(n)
        for i, arr in tensors.items():
            weight[i] = max(1, arr.size)
        alive = np.cumsum(np.bincount(start, weight, minlength=n + 1)
                          - np.bincount(end + 1, weight, minlength=n + 1))
        self._peak = max(1, int(alive.max())) if n else 1

    # ------------------------------------------------------------------ what to perturb
    def choose(self, max_leaves, max_elements: int, seed: int):
        """The slots to perturb, and notes on what was left out or sampled."""
        nodes = self.trace.nodes
        notes = []
        rng = None  # made when something is sampled
        trace = self.trace
        leaves = trace.leaf_index
        leaves = leaves[~trace.constant[leaves]].tolist()
        if self.constants.size:
            # unnamed constants are numbers written in the cell: not worth a note;
            # a named one asked for no gradient
            fixed = self.constants
            named = [nodes[i].label for i in fixed[trace.label_code[fixed] > 0].tolist()]
            if named:
                notes.append(f"{len(named)} named constant{'' if len(named) == 1 else 's'} "
                             f"(requires_grad=False: {', '.join(named[:5])}"
                             f"{', ...' if len(named) > 5 else ''}) not checked.")
        budgeted = False
        # a scalar graph whose leaves are sampled also moves them all at once, along a random
        # direction: one more pair of evaluations, which the budget counts as a leaf
        joint = not trace.tensor_data
        if max_leaves == "auto":
            limit = self._auto_limit(len(leaves))
            budgeted = limit is not None
            if limit is None:
                limit = max(50, _WORK // (2 * self.sizes))
            if joint and len(leaves) > limit > 1:
                limit -= 1
        elif max_leaves is None:
            limit = len(leaves)
        elif isinstance(max_leaves, int) and max_leaves > 0:
            limit = max_leaves
        else:
            raise ValueError(f"max_leaves must be 'auto', None or an int > 0, got {max_leaves!r}")
        spread = None
        if len(leaves) > limit:
            arr = np.asarray(leaves, dtype=np.intp)
            if joint:
                spread = arr
            labelled = self.trace.label_code[arr] > 0
            named, rest = arr[labelled], arr[~labelled]
            if len(named) >= limit:  # a sample of the named ones
                chosen = _sample(named, limit, seed)
                how = f"a random sample of the {len(named):,} named ones, seed {seed}"
            else:
                chosen = named + _sample(rest, limit - len(named), seed)
                how = f"the named ones, then a random sample with seed {seed}"
            chosen.sort()
            why = ("to keep it within about twice a backward pass" if budgeted
                   else "to keep the check fast")
            together = (f" and all {len(arr):,} at once along a random direction"
                        if spread is not None else "")
            notes.append(f"Checked {len(chosen):,} of {len(leaves):,} leaves one by one ({how})"
                         f"{together}{',' if together else ''} {why}; pass max_leaves=None to "
                         "check each of them.")
            leaves = chosen
        if not self.array_leaves:
            if spread is not None:
                return _Slots(leaves, np.full(len(leaves), -1), spread,
                              _signs(len(spread), seed)[None, :]), notes
            return _Slots(leaves, np.full(len(leaves), -1)), notes
        node, elem = [], []
        for i in leaves:
            shape = nodes[i].shape
            if shape is None:
                node.append(i)
                elem.append(-1)
                continue
            size = int(np.prod(shape))
            if size > max_elements:
                if rng is None:
                    rng = np.random.default_rng(seed)
                elems = np.sort(rng.choice(size, size=max_elements, replace=False))
                notes.append(f"{nodes[i].name}: {max_elements} of its {size:,} elements "
                             f"perturbed (random sample, seed {seed}).")
            else:
                elems = np.arange(size)
            node += [i] * len(elems)
            elem += elems.tolist()
        return _Slots(node, elem), notes

    def _auto_limit(self, n_leaves: int) -> Optional[int]:
        """How many slots an "auto" check of a scalar graph perturbs, or None for other
        graphs (the fixed work limit then applies).

        All leaves of a small graph (``_SMALL``) or of one with at most ``_DEEP_SLOTS``; in
        a deep graph (no groups), ``_DEEP_SLOTS``; in a graph replayed by groups, what a
        cost per node, per group step and per computed number allows against ``_BUDGET``
        backward passes, at least ``_LEAF_FLOOR`` and the direction. (With leaves left
        out, one of the slots moves them all at once: see :meth:`choose`.)
        """
        if not self.floats_ok:
            return None
        if n_leaves <= _DEEP_SLOTS or self.n * (2 * n_leaves + 1) <= _SMALL:
            return n_leaves  # a small graph, or few leaves: check every leaf
        # a deep graph, or one so big that compiling its groups costs a backward pass: a
        # replay on floats of a few evaluation points
        groups = self.groups() if self.n <= _GROUPS_MAX else None
        if groups is None:
            return _DEEP_SLOTS
        n = self.n
        per_chunk = max(1, (_GROUP_CHUNK // n - 1) // 2)  # slots of one chunk (as measure)
        number = _NS_NUMBER[n * min(1 + 2 * per_chunk, 2 * n_leaves + 1) > _CACHE]
        steps = _NS_STEP * groups.n_groups
        room = _BUDGET * _NS_BACKWARD * n - _NS_NODE * n - _NS_CHECK
        # each chunk computes its columns (the unperturbed one again) and takes every step
        chunk = number * n * (1 + 2 * per_chunk) + steps
        if room >= chunk:  # whole chunks
            return max(_LEAF_FLOOR + 1, int(per_chunk * room // chunk))
        return max(_LEAF_FLOOR + 1, int((room - steps - number * n) // (2 * number * n)))

    # ------------------------------------------------------------------ replay
    def measure(self, slots: _Slots, eps: float, engine: str = "auto") -> _Measured:
        """Replay the graph for every slot, in as few chunks as memory allows.

        ``engine``: ``"floats"`` (plain floats, a pass per evaluation point), ``"groups"``
        (numpy, a level's nodes of one op at once), ``"nodes"`` (numpy, node by node),
        or ``"auto"``: floats for at most ``_FLOAT_SLOTS`` slots, else groups where the
        graph is wide enough (:meth:`groups`), else nodes.
        """
        if engine == "floats" or (engine == "auto" and self.floats_ok
                                  and len(slots) <= _FLOAT_SLOTS):
            try:
                return self._measure_floats(slots, eps)
            except Exception:  # noqa: BLE001 - an op's float forward raised: use numpy's
                if engine == "floats":
                    raise
        if engine == "groups":
            grouped = _Groups.make(self.trace, self._rows, min_size=0)
        elif engine == "auto" and self.scalar_numpy:
            grouped = self.groups()
        else:
            grouped = None
        per_chunk = max(1, (_GROUP_CHUNK // self.n - 1) // 2)
        if engine == "auto" and grouped is not None:
            # each chunk of columns walks every group again: past a point (a huge
            # graph, few columns a chunk) one walk node by node costs less
            chunks = -(-max(len(slots), 1) // per_chunk)
            if 2 * chunks * grouped.n_groups > len(self._rows):
                grouped = None
        if grouped is not None:
            parts = [grouped.run(self, slots[start:start + per_chunk], eps)
                     for start in range(0, max(len(slots), 1), per_chunk)]
        else:
            per_chunk = max(1, (_CHUNK // self.peak - 1) // 2)
            parts = []
            for start in range(0, max(len(slots), 1), per_chunk):
                vals, steps = self._replay(slots[start:start + per_chunk], eps)
                parts.append((self._target_column(vals, 1 + 2 * len(steps[0])), steps))
        if len(parts) == 1:
            ((f, (hp, hm)),) = parts
            f0, f = f[0], f[1:]
        else:
            f0 = parts[0][0][0]
            f = np.concatenate([p[0][1:] for p in parts])
            hp = np.concatenate([p[1][0] for p in parts])
            hm = np.concatenate([p[1][1] for p in parts])
        return _Measured(f0, f[0::2], f[1::2], hp, hm)

    def _measure_floats(self, slots: _Slots, eps: float) -> _Measured:
        """A few slots: replays on plain floats of every evaluation point (the unperturbed
        one, then each leaf up and down), together in one pass for a small graph."""
        trace, rows, target = self.trace, self._rows, self.target
        floats = [e.f for e in trace.ops]
        outs = rows.tolist()
        fns = list(map(floats.__getitem__, trace.op_code[rows].tolist()))
        As = trace.parent_a[rows].tolist()
        Bs = trace.parent_b[rows].tolist()
        data = trace.data.tolist()
        binary = min(Bs, default=0) >= 0  # binary ops only (a loop of arithmetic)
        leaves = slots.node.tolist()
        # the unperturbed point, then each leaf up and down, then each direction's leaves:
        # (the nodes moved, their numbers)
        hp, hm, points = [], [], [((), ())]
        for leaf in leaves:
            x = data[leaf]
            up, down = x + eps, x - eps
            hp.append(up - x)
            hm.append(x - down)
            points += [((leaf,), (up,)), ((leaf,), (down,))]
        if len(slots.signs):
            spread = slots.spread.tolist()
            for up, down in zip(*(m.tolist() for m in slots.moved(trace.data, eps))):
                hp.append(eps)
                hm.append(eps)
                points += [(spread, up), (spread, down)]
        # all points in one pass while their numbers stay in the cache, else one at a time
        width = len(points) if self.n <= _FLOAT_TOGETHER else 1
        f = []
        for start in range(0, len(points), width):
            vals = []
            for point in points[start:start + width]:
                vals.append(data.copy())
                for i, x in zip(*point):
                    vals[-1][i] = x
            _float_pass(len(vals), binary)(outs, fns, As, Bs, *vals)
            f += [float(v[target]) for v in vals]
        f0, plus, minus = f[0], np.array(f[1::2], dtype=float), np.array(f[2::2], dtype=float)
        return _Measured(np.float64(f0), plus, minus, np.array(hp, dtype=float),
                         np.array(hm, dtype=float))

    def _target_column(self, vals, k: int):
        f = np.asarray(vals[self.target], dtype=float)
        if f.ndim == 0:  # no perturbed leaf in this chunk: one value for every column
            f = np.full(k, float(f))
        if f.ndim > 1:
            if f[0].size != 1:
                raise ValueError(f"the target has shape {f.shape[1:]}; the numerical check "
                                 "needs a scalar target")
            f = f.reshape(len(f))
        return f

    def _leaf_inputs(self, slots: _Slots, eps: float):
        """The leaves' column arrays, and the actual steps up and down per slot.

        Column 0 is unperturbed; slot ``j`` is perturbed by +eps in column
        ``2j + 1`` and by -eps in column ``2j + 2``. The steps are the actual
        ``(x + eps) - x`` and ``x - (x - eps)`` after float rounding.
        """
        n_slots = len(slots)
        k = 1 + 2 * n_slots
        vals = [None] * self.n
        hp = np.empty(n_slots)
        hm = np.empty(n_slots)
        plus = np.arange(1, k, 2)  # the column of slot j's x + eps
        sl = self.scalar_leaves  # one matrix, a row per leaf
        if sl and not self.trace.tensor_data:
            # a scalar graph: an unperturbed node is a plain number (numpy broadcasts
            # it), and only the leaves perturbed here get a row of k columns
            data = self.trace.data
            vals = data.tolist()
            pick = np.flatnonzero(slots.elem < 0)
            spread = slots.spread if len(slots.signs) else slots.spread[:0]
            if pick.size or spread.size:
                leaves = np.unique(np.concatenate((slots.node[pick], spread)))
                base = data[leaves]
                m = np.repeat(base[:, None], k, axis=1)
                if pick.size:
                    rows = np.searchsorted(leaves, slots.node[pick])
                    hp[pick], hm[pick] = _nudge(m, rows, plus[pick], base, eps)
                if spread.size:  # each direction moves every leaf of spread
                    rows = np.searchsorted(leaves, spread)
                    single = len(slots.node)
                    for j, (up, down) in enumerate(zip(*slots.moved(data, eps)), single):
                        m[rows, plus[j]] = up
                        m[rows, plus[j] + 1] = down
                        hp[j] = hm[j] = eps
                for leaf, row in zip(leaves.tolist(), m):
                    vals[leaf] = row
        elif sl:
            base = self.trace.data[sl]
            m = np.repeat(base[:, None], k, axis=1)
            pick = np.flatnonzero(slots.elem < 0)
            if pick.size:
                rows = np.searchsorted(sl, slots.node[pick])
                hp[pick], hm[pick] = _nudge(m, rows, plus[pick], base, eps)
            for leaf, row in zip(sl, m):
                vals[leaf] = row
        for leaf in self.array_leaves:  # (k, *shape) each
            data = np.asarray(self.trace.tensor_data[leaf], dtype=float)
            flat = data.reshape(-1)
            arr = np.repeat(flat[None, :], k, axis=0)
            pick = np.flatnonzero(slots.node == leaf)
            if pick.size:
                elems, c = slots.elem[pick], plus[pick]
                arr[c, elems] += eps
                arr[c + 1, elems] -= eps
                hp[pick] = arr[c, elems] - flat[elems]
                hm[pick] = flat[elems] - arr[c + 1, elems]
            vals[leaf] = arr.reshape((k,) + data.shape)
        return vals, (hp, hm)

    def _replay(self, slots: _Slots, eps: float, keep: bool = False):
        """One pass over the nodes: every node's column array (``keep``) or the target's."""
        vals, steps = self._leaf_inputs(slots, eps)
        if keep:
            for out, fn, a, b, _, _ in self.program:
                if b >= 0:
                    vals[out] = fn(vals[a], vals[b])
                elif b == -1:
                    vals[out] = fn(vals[a])
                else:
                    vals[out] = fn([vals[i] for i in a])
            return vals, steps
        for out, fn, a, b, free_a, free_b in self.program:
            if b >= 0:
                vals[out] = fn(vals[a], vals[b])
                if free_b:
                    vals[b] = None
            elif b == -1:
                vals[out] = fn(vals[a])
            else:
                vals[out] = fn([vals[i] for i in a])
                for i in free_b:
                    vals[i] = None
            if free_a:
                vals[a] = None
        return vals, steps

    def replay_agrees(self, f0):
        """(ok, note): does the unperturbed replay give the recorded target value?"""
        recorded = self.trace.target.data
        if _same(f0, recorded):
            return True, ""
        vals, _ = self._replay(_Slots([], []), 1.0, keep=True)
        first = ""
        for node in self.trace.nodes:
            got = np.asarray(vals[node.index])
            got = got if got.ndim == 0 else got[0]
            if not _same(got, node.data):
                first = f" (it first differs at node #{node.index} {node.name!r}"
                if node.shape is None:
                    first += f": replayed {_num(float(got))}, recorded {_num(node.data)}"
                first += ")"
                break
        return False, (f"Replay mismatch: replaying the graph gives {_num(float(f0))} but the "
                       f"run recorded {_num(recorded)}{first}. The numerical check is not "
                       "trustworthy: an op's numpy forward differs from its float forward, "
                       "or a node was changed after the run.")


def _with_params(fn, params):
    """A tensor op's replay: ``fn(*inputs, **params)`` on the list of inputs."""
    params = params or {}

    def replay(inputs):
        return fn(*inputs, **params)
    return replay


def _nudge(m, rows, cols, base, eps: float) -> tuple:
    """Move ``m[rows, cols]`` up by eps and ``m[rows, cols + 1]`` down (each row's leaf
    ``base``): the actual steps up and down, after rounding."""
    m[rows, cols] += eps
    m[rows, cols + 1] -= eps
    return m[rows, cols] - base[rows], base[rows] - m[rows, cols + 1]


def _same(a, b) -> bool:
    """Equal up to float rounding (nan equals nan)."""
    if isinstance(b, (int, float)) and not isinstance(a, np.ndarray):
        a = float(a)
        return a == b or abs(a - b) <= 1e-12 + 1e-9 * abs(b) or (a != a and b != b)
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return False
    return bool(np.all(np.isclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True)
                       | (a == b)))


def _rows(plan, slots: _Slots, m: _Measured, atol, rtol, trace, eps) -> list:
    """One row per scalar leaf, one summary row per array leaf, one row per direction."""
    nodes = trace.nodes
    index = slots.node.tolist()
    if plan.array_leaves:
        grads = trace.tensor_grad
        analytic = np.array([trace.grad[i] if e < 0 else grads[i].flat[e]
                             for i, e in zip(index, slots.elem.tolist())], dtype=float)
    else:
        analytic = trace.grad[slots.node]
    if len(slots.signs):  # along a direction: the gradient times the move, over the step
        up, down = slots.moved(trace.data, eps)
        with np.errstate(all="ignore"):
            along = (up - down) @ trace.grad[slots.spread] / m.steps[len(index):]
        analytic = np.concatenate((analytic, along))
    numeric = m.numeric
    abs_err = np.abs(analytic - numeric)
    mag = np.abs(numeric)
    with np.errstate(all="ignore"):
        rel_err = np.where(abs_err == 0, 0.0, abs_err / mag)
        bound = atol + rtol * mag
        finite = np.isfinite(analytic) & np.isfinite(numeric)
        close = abs_err <= bound
        # within the bound once rounding on the way to the target is allowed for: no verdict
        noise = m.rounding(plan.rounding_scale)
        unresolved = abs_err <= bound + noise
        fwd, bwd = m.fwd, m.bwd
        jump = np.abs(fwd - bwd) > (atol + rtol * np.maximum(np.abs(fwd), np.abs(bwd))
                                    + 4 * noise)
    status = np.where(~finite, 3, np.where(close, 0, np.where(
        unresolved, 4, np.where(jump, 2, 1))))
    kinks = _kink_reach(trace, plan.kinks)
    a_l, n_l, e_l, r_l, b_l, s_l = (analytic.tolist(), numeric.tolist(), abs_err.tolist(),
                                    rel_err.tolist(), bound.tolist(), status.tolist())
    if not plan.array_leaves:  # one row per slot
        single = len(index)
        notes = [""] * single
        todo = np.flatnonzero(status[:single]).tolist()
        if kinks:
            todo = sorted(set(todo).union(j for j, i in enumerate(index) if i in kinks))
        for j in todo:
            notes[j] = _note(s_l[j], j, m, a_l[j], nodes[index[j]], kinks)
        label_names = trace.label_names
        names = [label_names[c] if c else nodes[i].name
                 for c, i in zip(trace.label_code[slots.node].tolist(), index)]
        rows = list(map(_new_row, zip(
            names, a_l, n_l, e_l, r_l, b_l,
            [_STATUS[s] for s in s_l], notes, index, [1] * single)))
        spread, ways = len(slots.spread), len(slots.signs)
        for k, j in enumerate(range(single, single + ways), 1):
            name = f"all {spread:,} leaves at once" + (f" ({k})" if ways > 1 else "")
            note = ("along a random direction: each leaf moved by ±eps at once, the gradient "
                    "times the move against the change of the target")
            extra = _note(s_l[j], j, m, a_l[j], None, kinks)
            rows.append(CheckRow(name, a_l[j], n_l[j], e_l[j], r_l[j], b_l[j], _STATUS[s_l[j]],
                                 note + (f"; {extra}" if extra else ""), None, spread))
        return rows
    rows = []
    elems = slots.elem.tolist()
    j = 0
    while j < len(index):
        leaf = index[j]
        node = nodes[leaf]
        if elems[j] < 0:
            s = s_l[j]
            rows.append(CheckRow(node.name, a_l[j], n_l[j], e_l[j], r_l[j], b_l[j], _STATUS[s],
                                 _note(s, j, m, a_l[j], node, kinks), leaf))
            j += 1
            continue
        end = j
        while end < len(index) and index[end] == leaf:
            end += 1
        rows.append(_array_row(node, elems, j, end, status, m, analytic, abs_err, rel_err,
                               bound, kinks))
        j = end
    return rows


def _array_row(node, elems, start, end, status, m, analytic, abs_err, rel_err, bound,
               kinks) -> CheckRow:
    """The worst of an array leaf's perturbed elements, as one row."""
    part = slice(start, end)
    rank = np.array([_RANK[_STATUS[s]] for s in status[part].tolist()])
    w = start + int(_worst_first(abs_err[part], bound[part], rank)[0])
    s = int(status[w])
    shape = node.shape
    where = np.unravel_index(elems[w], shape)
    count = end - start
    total = int(np.prod(shape))
    sampled = f"{count} of {total:,} elements" if count < total else f"all {count} elements"
    bad = int(np.sum(status[part] != 0))
    note = f"worst element {tuple(int(x) for x in where)} of {sampled}"
    if bad:
        note += f"; {bad} not passing"
    extra = _note(s, w, m, float(analytic[w]), node, kinks)
    if extra:
        note += "; " + extra
    return CheckRow(node.name, float(analytic[w]), float(m.numeric[w]), float(abs_err[w]),
                    float(rel_err[w]), float(bound[w]), _STATUS[s], note, node.index, count)


def _note(s: int, j: int, m: _Measured, analytic: float, node, kinks) -> str:
    """Why a row is flagged or failed, in words (``node`` None: a direction's row)."""
    if s == 3:
        if not all_finite(m.f0):
            return "the target is not finite"
        if not math.isfinite(analytic):
            return f"analytic gradient is {analytic}"
        if m.steps[j] == 0:
            return f"eps is too small to change {node.name} = {node.data}"
        return "f(x ± eps) is not finite"
    if s == 4:
        return (f"finite differences are only good to ±{m.slack[j]:.3g} here: numbers of "
                f"{m.size[j]:.3g} on the way to the target are rounded by more than eps moves "
                "them (a larger eps may settle it)")
    if node is not None:
        kink = kinks.get(node.index)
    else:  # a direction moves every leaf: any kink may be the one
        kink = next(iter(kinks.values()), "") if s == 2 else ""
    if s == 2:
        text = (f"one-sided slopes differ ({m.fwd[j]:.6g} from the right, "
                f"{m.bwd[j]:.6g} from the left)")
        return text + (f": {kink}" if kink else ": a kink or jump within eps")
    if kink:
        return ("passes " + kink) if s == 0 else kink
    return ""


def _kink_reach(trace, kinks) -> dict:
    """leaf index → description of a kink node it feeds (only leaves that do)."""
    if not kinks:
        return {}
    n = trace.n
    first = max(kinks)  # nothing after the last kink node reaches one
    kink = trace.kink[:first + 1].tolist()
    pa = trace.parent_a[:first + 1].tolist()
    pb = trace.parent_b[:first + 1].tolist()
    reach = [-1] * n  # the kink node each node feeds, -1 for none
    for i in range(first, -1, -1):
        r = reach[i]
        if r < 0:
            if not kink[i]:
                continue
            r = reach[i] = i
        a = pa[i]
        if a >= 0:
            if reach[a] < 0:
                reach[a] = r
            b = pb[i]
            if b >= 0 and reach[b] < 0:
                reach[b] = r
    leaves = trace.leaf_index
    out = {}
    for i in leaves[leaves <= first].tolist():
        r = reach[i]
        if r >= 0:
            out[i] = f"{trace.op_entry(r).name} at a non-differentiable point (node #{r})"
    return out


# =========================================================================== expect
def expect(trace, mapping, atol: float = 1e-5, rtol: float = 1e-3) -> CheckReport:
    """Compare named gradients (``"x"`` or ``"x.grad"``) and values (``"x.data"``).

    ``mapping`` is a dict or a list of (name, expected) pairs. A name with no
    node is an ``error`` row, never skipped. The verdict reads "3 of 4 correct".
    """
    rows = [_expect_row(trace, key, want, atol, rtol) for key, want in expected_pairs(mapping)]
    notes = []
    if trace.branch_dependent:
        notes.append("The cell's control flow depended on values: these numbers hold for "
                     "this branch.")
    return CheckReport(rows, kind="expect", atol=atol, rtol=rtol, notes=notes,
                       target=trace.target.name)


def expected_pairs(mapping) -> list:
    """``mapping`` (a dict, any Mapping, or (name, expected) pairs) as a list of pairs.

    Names become strings; raises TypeError for anything else.
    """
    if isinstance(mapping, Mapping):
        return [(str(key), want) for key, want in mapping.items()]
    if isinstance(mapping, (str, bytes)) or not isinstance(mapping, Iterable):
        raise TypeError("expected answers must be a dict or (name, expected) pairs, "
                        f"got {type(mapping).__name__}")
    pairs = []
    for pair in mapping:
        try:
            key, want = pair
        except (TypeError, ValueError):
            raise TypeError(f"expect() needs a dict or (name, expected) pairs, "
                            f"got {pair!r}") from None
        pairs.append((str(key), want))
    return pairs


def unanswered(mapping, error: str, atol: float = 1e-5, rtol: float = 1e-3) -> CheckReport:
    """The expect report when nothing could be compared: ``error`` says why.

    Every expected entry is an ``error`` row (so ``to_dict()`` lists each as
    wrong) and the report fails, e.g. when a graded cell did not run.
    """
    rows = [_error_row(key, want, "not compared: the cell could not be run")
            for key, want in expected_pairs(mapping)]
    return CheckReport(rows, kind="expect", atol=atol, rtol=rtol, error=error)


def _expect_row(trace, key: str, want, atol, rtol) -> CheckRow:
    name, attr = key, "grad"
    for suffix in (".data", ".grad"):
        if key.endswith(suffix):
            name, attr = key[:-len(suffix)], suffix[1:]
    try:
        node = trace.node(name)
    except KeyError:
        return _error_row(key, want, f"no node named {name!r}")
    got = getattr(node, attr)
    try:
        w = np.asarray(want, dtype=float)
    except (TypeError, ValueError):
        return _error_row(key, want, f"expected value {want!r} is not a number", node.index)
    g = np.asarray(got, dtype=float)
    if w.shape != g.shape:
        return _error_row(key, want, f"{attr} has shape {g.shape}, expected shape {w.shape}",
                          node.index, got)
    err, bound, close = differences(g, w, atol, rtol)
    with np.errstate(all="ignore"):
        rel = np.where(err == 0, 0.0, err / np.abs(w))
    worst = int(_worst_first(err.ravel(), bound.ravel())[0]) if err.size else 0
    e, b, r = (float(err.flat[worst]), float(bound.flat[worst]), float(rel.flat[worst]))
    ok = bool(np.all(close))
    note = ""
    if g.size > 1:
        where = tuple(int(i) for i in np.unravel_index(worst, g.shape))
        note = f"worst element {where} of {g.size}"
    return CheckRow(key, got, want, e, r, b, "pass" if ok else "fail", note, node.index,
                    int(g.size))


def differences(got, want, atol: float, rtol: float):
    """Elementwise ``(|got − want|, atol + rtol·|want|, close)`` for numbers or arrays.

    The difference is 0 where the two are equal (infinities too) or both nan;
    ``close`` is True where it is within the bound or 0.
    """
    g = np.asarray(got, dtype=float)
    w = np.asarray(want, dtype=float)
    with np.errstate(all="ignore"):
        err = np.where((w == g) | (np.isnan(w) & np.isnan(g)), 0.0, np.abs(g - w))
        bound = atol + rtol * np.abs(w)
    return err, bound, (err <= bound) | (err == 0)


def _worst_first(err, bound, rank=None):
    """Positions of 1-d ``err`` ordered worst first: by ``rank`` (if given), then
    ``err / bound``, then ``err`` (so a zero bound, whose ratio is inf, still ranks)."""
    with np.errstate(all="ignore"):
        size = np.where(np.isnan(err), np.inf, err)
        excess = np.where(bound > 0, size / bound, np.where(size > 0, np.inf, 0.0))
    keys = (-size, -excess) if rank is None else (-size, -excess, rank)
    return np.lexsort(keys)


def _error_row(key, want, note, index=None, got=None) -> CheckRow:
    return CheckRow(key, got, want, math.nan, math.nan, math.nan, "error", note, index)
