"""The numerical check: finite differences beside every analytic gradient, and its report.

:func:`check` measures ``d target / d leaf`` for each input leaf with a central difference
``(f(x + eps) - f(x - eps)) / 2 eps`` and compares it with the gradient backward computed.
It never re-runs the user's cell: :mod:`.replay` replays the recorded graph with each op's
forward, at the points :mod:`.perturb` chooses (every leaf of a small graph; of a big one a
seeded sample and all the leaves at once along a random direction, with a note saying so);
:mod:`.rows` turns what it measured into rows.

:func:`expect` compares named gradients or values with expected numbers (textbook cases,
homework) and returns the same kind of report; :func:`unanswered` is the failing report of a
graded cell that did not run.

A :class:`CheckReport` has ``.passed``, ``.rows`` (:class:`CheckRow`), ``.verdict``,
``to_dict()``, ``assert_passed()`` (its message describes each wrong row) and a text and an
HTML view. A report that compared nothing says so in its verdict, and why.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping

import numpy as np

from .numbers import all_finite, fmt
from .perturb import choose
from .replay import Replay
from .rows import FLAGGED, OK, STATUSES, CheckRow, Judge, plain, worst_first

__all__ = [
    "check",
    "expect",
    "compare_row",
    "expected_pairs",
    "unanswered",
    "CheckReport",
    "CheckRow",
    "STATUSES",
]

# an unresolved row is measured again with eps grown so that its slack is 1/_SETTLE of its
# bound, at least 10 and at most _SETTLE_MAX times
_SETTLE = 8.0
_SETTLE_MAX = 1e4
# nodes past which "auto" does not compute a graph's levels to see whether it is wide
_WIDE_MAX = 2**18
_status_of = operator.attrgetter("status")

ASSERT_ROWS = 20
"""Wrong rows an ``assert_passed()`` message describes one by one."""


class CheckReport:
    """The result of :func:`check` or :func:`expect`.

    ``kind`` is ``"check"`` (analytic gradients against finite differences) or
    ``"expect"`` (trace numbers against given answers). ``notes`` are
    report-wide remarks (branch dependence, sampling, replay problems).
    """

    def __init__(
        self,
        rows,
        *,
        kind: str = "check",
        atol: float,
        rtol: float,
        eps: float | None = None,
        notes=(),
        replay_ok: bool = True,
        target: str = "",
        replay: tuple | None = None,
        error: str | None = None,
        unchecked: str = "",
        columns: tuple | None = None,
    ):
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
        # why a check compared nothing ("" when it did, or when no reason was given)
        self.unchecked = unchecked
        self._columns = columns

    # ------------------------------------------------------------------ verdict
    @property
    def columns(self) -> tuple:
        """Names of the two compared columns."""
        if self._columns is not None:
            return self._columns
        return ("analytic", "numeric") if self.kind == "check" else ("got", "expected")

    @property
    def passed(self) -> bool:
        return self.error is None and self.replay_ok and OK.issuperset(map(_status_of, self.rows))

    @property
    def failures(self) -> list:
        """Rows that failed or could not be compared, worst first."""
        return sorted((r for r in self.rows if not r.ok), key=CheckRow.sort_key)

    @property
    def flagged(self) -> list:
        """Rows at a kink, with non-finite numbers or beyond what finite differences resolve:
        reported, not failed."""
        return [r for r in self.rows if r.status in FLAGGED]

    def worst_first(self) -> list:
        return sorted(self.rows, key=CheckRow.sort_key)

    @property
    def verdict(self) -> str:
        """One line: how many rows agree, disagree or are flagged (then, after a sample of
        the leaves, how all of them did at once)."""
        if not self.rows:  # never a plain "all 0 match": say that nothing was compared
            what = "nothing checked" if self.kind == "check" else "nothing compared"
            why = self.unchecked or (
                "no gradient to compare"
                if self.kind == "check"
                else "no expected answers were given"
            )
            return self._caveats(f"{what}: {why}")
        if self.kind == "check" and any(r.index is None for r in self.rows):
            alone = [r for r in self.rows if r.index is not None]
            text = CheckReport(alone, atol=self.atol, rtol=self.rtol).verdict if alone else ""
            for r in self.rows:
                if r.index is None:  # all the leaves at once, along a direction
                    word = (
                        "agree"
                        if r.status == "pass"
                        else "flagged: " + r.status
                        if r.ok
                        else "disagree"
                    )
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
            text = (
                f"all {n} gradients match finite differences"
                if n != 1
                else "the gradient matches finite differences"
            )
        else:
            text = f"{n - flagged} of {n} gradients match finite differences"
        if flagged:
            kinds = [k for k in FLAGGED if any(r.status == k for r in self.rows)]
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
            lines.append(
                f"tolerance: |{self.columns[0]} − {self.columns[1]}| ≤ atol "
                f"{self.atol:g} + rtol {self.rtol:g}·|{self.columns[1]}|"
            )
        for k, row in enumerate(failures[:ASSERT_ROWS]):
            lines.append(
                ("worst: " if k == 0 and self.kind == "check" else "- ")
                + _describe(row, self.columns)
            )
        if len(failures) > ASSERT_ROWS:
            lines.append(
                f"(and {len(failures) - ASSERT_ROWS} more: "
                + ", ".join(repr(r.name) for r in failures[ASSERT_ROWS : ASSERT_ROWS + 5])
                + (", ..." if len(failures) > ASSERT_ROWS + 5 else "")
                + ")"
            )
        raise AssertionError("\n".join(lines))

    # ------------------------------------------------------------------ views
    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "passed": self.passed,
            "verdict": self.verdict,
            "target": self.target,
            "eps": self.eps,
            "atol": self.atol,
            "rtol": self.rtol,
            "replay_ok": self.replay_ok,
            "notes": list(self.notes),
            "error": self.error,
            "checked": len(self.rows),
            "unchecked": self.unchecked,
            "replay": None
            if self.replay is None
            else dict(zip(("recorded", "replayed"), self.replay)),
            "rows": [r.to_dict(self.columns) for r in self.rows],
        }

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
        text = (
            f"{row.name!r}{where}: expected {_num(row.expected)} (numeric slope), "
            f"got {_num(row.got)} (analytic gradient)"
        )
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
def check(
    trace,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    *,
    max_leaves="auto",
    max_elements: int = 200,
    seed: int = 0,
) -> CheckReport:
    """Compare each leaf's analytic gradient with a central finite difference.

    Parameters
    ----------
    trace:
        A :class:`gradmagic.analysis.trace.Trace` (its graph is replayed, not re-run).
    eps, atol, rtol:
        Step and tolerance: a row passes if ``|analytic - numeric| <= atol +
        rtol * |numeric|`` (the defaults are PyTorch gradcheck's).
    max_leaves:
        How many leaves to perturb one by one: ``"auto"`` perturbs every leaf of a small
        graph and, of a big one, the named leaves first and a seeded random sample, with
        a note; ``None`` perturbs all; an int caps it. When leaves of a scalar graph are
        left out, one more row moves all of them at once along a random direction
        (``index`` None, ``count`` the leaves).
    max_elements:
        At most this many elements of each array (tensor) leaf are perturbed,
        chosen with ``seed``; its row shows the worst of them.
    """
    for name, x in (("eps", eps), ("atol", atol), ("rtol", rtol)):
        if not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    if eps == 0:
        raise ValueError("eps must be > 0")
    replay = Replay(trace)
    # a wide graph replays many points for little more than one: more leaves fit the budget
    wide = lambda: trace.n <= _WIDE_MAX and replay.grouped() is not None  # noqa: E731
    perturbation, notes = choose(trace, max_leaves, max_elements, seed, wide)
    notes = _run_notes(trace, notes)
    with np.errstate(all="ignore"):
        measured = replay.measure(perturbation, eps)
        replay_ok, note = replay.agrees(measured.f0)
    if note:
        notes.append(note)
    if not all_finite(measured.f0):
        notes.append(f"The target is {measured.f0}: no slope can be measured.")
    judge = Judge(trace, atol, rtol)
    rows = judge.rows(perturbation, measured, eps)
    rows = _settle(replay, judge, perturbation, rows, measured, eps, notes)
    return CheckReport(
        rows,
        kind="check",
        eps=eps,
        atol=atol,
        rtol=rtol,
        notes=notes,
        replay_ok=replay_ok,
        target=trace.target.name,
        replay=(plain(trace.target.data), float(measured.f0)),
        unchecked="" if len(perturbation) else _why_unchecked(trace),
    )


def _run_notes(trace, notes: list) -> list:
    """What the run itself says about the check: branches taken, numbers made plain."""
    if trace.branch_dependent:
        notes.insert(
            0,
            f"The cell's control flow depended on values "
            f"({trace.branch_events} comparison(s) or conversion(s) of a Value): "
            "this check holds for this branch only; other inputs may take "
            "another path.",
        )
    n = getattr(trace, "float_conversions", 0)
    if n:
        notes.append(
            f"A Value or Tensor was converted to plain numbers during the run "
            f"({n} time{'' if n == 1 else 's'}): if such numbers fed the result, that "
            "part is a constant in the graph, and neither backward nor this replay "
            "can see it."
        )
    return notes


def _why_unchecked(trace) -> str:
    leaves = trace.leaf_index
    if not len(leaves) or trace.parent_a[-1] < 0 and trace.constant[-1]:
        return "the target is a constant: it depends on no input"
    return (
        "the target depends on no input: every leaf is a constant (a number written in "
        "the cell, or requires_grad=False)"
    )


def _settle(replay, judge, perturbation, rows, m, eps, notes) -> list:
    """``rows`` with the unresolved ones of a scalar graph measured again with a step that
    the rounding they carry cannot hide a slope in (``_SETTLE`` times its slack over its
    bound, at most ``_SETTLE_MAX`` times eps); a row still unresolved is kept as it was.

    A sum of a few hundred products of everyday numbers (1e7) rounds by 1e-8 or so: eps
    1e-6 then measures its inputs' slopes to a few parts in 1,000, a larger eps far better.
    """
    todo = [j for j, r in enumerate(rows) if r.status == "unresolved"]
    if not todo or (perturbation.elem >= 0).any():
        return rows
    with np.errstate(all="ignore"):
        need = _SETTLE * m.slack[todo] / np.array([rows[j].bound for j in todo])
    grow = float(np.clip(np.nan_to_num(np.max(need), nan=_SETTLE_MAX), 10, _SETTLE_MAX))
    step = eps * grow
    again = perturbation.select(todo)
    with np.errstate(all="ignore"):
        again = judge.rows(again, replay.measure(again, step), step)
    settled = 0
    for j, row in zip(todo, again):  # (both in order: leaves, then directions)
        if row.status != "unresolved":
            rows[j] = row._replace(
                note=f"measured with eps {step:.3g}" + (f"; {row.note}" if row.note else "")
            )
            settled += 1
    if settled:
        notes.append(
            f"{settled} row{'s' if settled > 1 else ''} measured again with eps "
            f"{step:.3g}: at eps {eps:g} the rounding of the numbers on the way to the "
            "target hid the slope."
        )
    return rows


# =========================================================================== expect
def expect(trace, mapping, atol: float = 1e-5, rtol: float = 1e-3) -> CheckReport:
    """Compare named gradients (``"x"`` or ``"x.grad"``) and values (``"x.data"``).

    ``mapping`` is a dict or a list of (name, expected) pairs. A name with no
    node is an ``error`` row, never skipped. The verdict reads "3 of 4 correct".
    """
    rows = [_expect_row(trace, key, want, atol, rtol) for key, want in expected_pairs(mapping)]
    notes = []
    if trace.branch_dependent:
        notes.append(
            "The cell's control flow depended on values: these numbers hold for this branch."
        )
    return CheckReport(
        rows, kind="expect", atol=atol, rtol=rtol, notes=notes, target=trace.target.name
    )


def expected_pairs(mapping) -> list:
    """``mapping`` (a dict, any Mapping, or (name, expected) pairs) as a list of pairs.

    Names become strings; raises TypeError for anything else.
    """
    if isinstance(mapping, Mapping):
        return [(str(key), want) for key, want in mapping.items()]
    if isinstance(mapping, (str, bytes)) or not isinstance(mapping, Iterable):
        raise TypeError(
            "expected answers must be a dict or (name, expected) pairs, "
            f"got {type(mapping).__name__}"
        )
    pairs = []
    for pair in mapping:
        try:
            key, want = pair
        except (TypeError, ValueError):
            raise TypeError(
                f"expect() needs a dict or (name, expected) pairs, got {pair!r}"
            ) from None
        pairs.append((str(key), want))
    return pairs


def unanswered(mapping, error: str, atol: float = 1e-5, rtol: float = 1e-3) -> CheckReport:
    """The expect report when nothing could be compared: ``error`` says why.

    Every expected entry is an ``error`` row (so ``to_dict()`` lists each as
    wrong) and the report fails, e.g. when a graded cell did not run.
    """
    rows = [
        _error_row(key, want, "not compared: the cell could not be run")
        for key, want in expected_pairs(mapping)
    ]
    return CheckReport(rows, kind="expect", atol=atol, rtol=rtol, error=error)


def _expect_row(trace, key: str, want, atol, rtol) -> CheckRow:
    name, attr = key, "grad"
    for suffix in (".data", ".grad"):
        if key.endswith(suffix):
            name, attr = key[: -len(suffix)], suffix[1:]
    try:
        node = trace.node(name)
    except KeyError:
        return _error_row(key, want, f"no node named {name!r}")
    return compare_row(key, node, attr, want, atol, rtol)


def compare_row(key: str, node, attr: str, want, atol, rtol) -> CheckRow:
    """The row of ``key``: ``node``'s ``attr`` (``"grad"`` or ``"data"``) beside ``want``."""
    got = getattr(node, attr)
    try:
        w = np.asarray(want, dtype=float)
    except (TypeError, ValueError):
        return _error_row(key, want, f"expected value {want!r} is not a number", node.index)
    g = np.asarray(got, dtype=float)
    if w.shape != g.shape:
        return _error_row(
            key, want, f"{attr} has shape {g.shape}, expected shape {w.shape}", node.index, got
        )
    err, bound, close = differences(g, w, atol, rtol)
    with np.errstate(all="ignore"):
        rel = np.where(err == 0, 0.0, err / np.abs(w))
    worst = int(worst_first(err.ravel(), bound.ravel())[0]) if err.size else 0
    e, b, r = (float(err.flat[worst]), float(bound.flat[worst]), float(rel.flat[worst]))
    ok = bool(np.all(close))
    note = ""
    if g.size > 1:
        where = tuple(int(i) for i in np.unravel_index(worst, g.shape))
        note = f"worst element {where} of {g.size}"
    return CheckRow(
        key, got, want, e, r, b, "pass" if ok else "fail", note, node.index, int(g.size)
    )


def differences(got, want, atol: float, rtol: float):
    """Elementwise ``(|got − want|, atol + rtol·|want|, close)`` for numbers or arrays.

    The difference is 0 where the two are equal (infinities too) or both nan;
    ``close`` is True where it is within the bound or 0. An infinite ``want`` has a
    bound of 0: only the same infinity meets it.
    """
    g = np.asarray(got, dtype=float)
    w = np.asarray(want, dtype=float)
    with np.errstate(all="ignore"):
        err = np.where((w == g) | (np.isnan(w) & np.isnan(g)), 0.0, np.abs(g - w))
        # an infinite answer is met only by the same infinity (its bound would be inf)
        bound = np.where(np.isfinite(w), atol + rtol * np.abs(w), 0.0)
    return err, bound, (err <= bound) | (err == 0)


def _error_row(key, want, note, index=None, got=None) -> CheckRow:
    return CheckRow(key, got, want, math.nan, math.nan, math.nan, "error", note, index)
