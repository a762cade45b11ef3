"""The numerical check: finite differences beside every analytic gradient, and its report.

:func:`check` measures ``d target / d leaf`` for each input leaf with a central difference
``(f(x + eps) - f(x - eps)) / 2 eps`` and compares it with the gradient backward computed.
``f`` is the user's code run again plainly, unrecorded, at the points :mod:`.perturb`
chooses (every leaf of a small graph; of a big one a seeded sample and all the leaves at once
along a random direction, with a note saying so): a path the recording missed changes the
code's value and not the graph's, so it shows. The run supplies the re-run
(``trace.rerun``, made by :mod:`gradmagic.notebook.rerun`). Where the code cannot be run
again (it writes files, a run made without one), :mod:`.replay` replays the recorded graph
instead, and the rows that pass say "graph": compared with the graph only, no tick.
:mod:`.rows` turns what was measured into rows.

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
from collections.abc import Callable, Iterable, Mapping

from typing import Any

import numpy as np

from .numbers import all_finite, fmt
from .options import DEFAULTS
from .perturb import Perturbation, choose
from .replay import Measured, Replay, in_precision
from .rows import _ERRORS, FLAGGED, OK, STATUSES, CheckRow, Judge, plain, worst_first

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

# elements of an array leaf perturbed one by one: a re-run of the code costs a run of the
# cell a point, so fewer are sampled, beside one direction through all of them
RERUN_ELEMENTS = 8
# a scalar graph with more inputs than this gets a direction through all of them beside them
DIRECTION_FROM = 8
REPLAY_ELEMENTS = 200

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
        oracle: str = "code",
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
        # what the gradients were compared with: "code" (the code run again plainly),
        # "ops" (a graph the explicit engine built, replayed with each op's forward: the
        # graph is the program) or "graph" (the recording of code that could not be run
        # again, replayed: it cannot see a path it missed, so its rows do not pass)
        self.oracle = oracle
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
    def mark(self) -> str:
        """The verdict's sign: ✓ something independent agreed with every row, ✗ a row
        disagreed or could not be compared, – rows compared with the recorded graph only
        (nothing independent agreed), ⚠ nothing checked, or only flagged rows."""
        if self.error is not None or not self.replay_ok:
            return "✗"
        statuses = {r.status for r in self.rows}
        if statuses & {"fail", "error"}:
            return "✗"
        if "graph" in statuses:
            return "–"
        return "⚠" if self.flagged or not self.rows else "✓"

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
                        else "compared with the recorded graph only"
                        if r.status == "graph"
                        else "flagged: " + r.status
                        if r.ok
                        else "disagree"
                    )
                    text += f"{'; ' if text else ''}{r.name}: {word}"
            return self._caveats(text)
        n = len(self.rows)
        graph = sum(r.status == "graph" for r in self.rows)
        bad = sum(not r.ok for r in self.rows) - graph
        flagged = len(self.flagged)
        if self.kind == "expect":
            text = f"{n - bad} of {n} correct"
        elif graph and not bad:
            text = (
                f"{graph} of {n} gradient{'s' if n > 1 else ''} compared with the recorded "
                "graph only, not with your code run again"
            )
            if n - graph - flagged:
                text = f"{n - graph - flagged} of {n} match finite differences; " + text
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
            "oracle": self.oracle,
            "replay": None
            if self.replay is None
            else dict(zip(("recorded", "replayed"), self.replay)),
            "rows": [r.to_dict(self.columns) for r in self.rows],
        }

    text: Callable[..., str] | None = None
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
    eps: float = DEFAULTS.eps,
    atol: float = DEFAULTS.atol,
    rtol: float = DEFAULTS.rtol,
    *,
    max_leaves="auto",
    max_elements: int | None = None,
    seed: int = 0,
) -> CheckReport:
    """Compare each leaf's analytic gradient with a central finite difference.

    Parameters
    ----------
    trace:
        A :class:`gradmagic.analysis.trace.Trace`: its ``rerun`` runs the code again; a
        trace without one (built with the explicit engine) has its graph replayed.
    eps, atol, rtol:
        A row passes if ``|analytic - numeric| <= atol + rtol * |numeric|`` (defaults:
        PyTorch gradcheck's).
    max_leaves:
        How many leaves to perturb one by one: ``"auto"`` every leaf of a small graph, and
        of a big one the named leaves and a seeded random sample (with a note); ``None``
        all; an int caps it. One more row moves all leaves at once along a random
        direction when leaves of a scalar graph are left out (``index`` None, ``count``
        the leaves).
    max_elements:
        At most this many elements of each array (tensor) leaf are perturbed one by one,
        chosen with ``seed``; its row shows the worst of them. None: ``RERUN_ELEMENTS``
        where the code is run again (one more row moves every element at once), else
        ``REPLAY_ELEMENTS``.
    """
    _validate(eps=eps, atol=atol, rtol=rtol)
    eps, atol, rtol, precision = in_precision(trace, eps, atol, rtol)
    replay = Replay(trace)
    perturbation, notes = _choose(trace, replay, max_leaves, max_elements, seed)
    notes = _run_notes(trace, notes + ([precision] if precision else []))
    judge = Judge(trace, atol, rtol)
    code = _Code(trace, replay, judge, perturbation)
    perturbation = code.with_direction(perturbation, seed)
    rows, measured, perturbation, replay_ok = _measured_rows(code, perturbation, eps, notes)
    if not all_finite(measured.f0):
        notes.append(f"The target is {measured.f0}: no slope can be measured.")
    rows += code.direction(eps, seed) + code.strays(eps, seed)
    notes = _code_notes(code, rows, perturbation, notes)
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
        oracle=code.oracle,
    )


def _choose(trace, replay, max_leaves, max_elements, seed) -> tuple:
    """(the leaves and elements to move, notes on what was left out)."""
    # a wide graph replays many points for little more than one: more leaves fit the budget
    wide = lambda: trace.n <= _WIDE_MAX and replay.grouped() is not None  # noqa: E731
    if max_elements is None:
        usable = getattr(trace, "rerun", None) is not None and not trace.rerun.problem
        max_elements = RERUN_ELEMENTS if usable else REPLAY_ELEMENTS
    return choose(trace, max_leaves, max_elements, seed, wide)


def _validate(**numbers) -> None:
    for name, x in numbers.items():
        if not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    if numbers["eps"] == 0:
        raise ValueError("eps must be > 0")


def _measured_rows(code, perturbation, eps: float, notes: list) -> tuple:
    """(rows, the first part's measures, the perturbation measured, whether a replay
    reproduced the run): each part measured by whoever answers it (see ``_Code.split``)."""
    rows: list = []
    measured: Any = None
    replay_ok, parts = True, []
    for oracle, part in code.split(perturbation):
        with np.errstate(all="ignore"):
            m, part = code.measure(part, eps, oracle)
        if oracle != "code":
            with np.errstate(all="ignore"):
                ok, note = code.replay.agrees(m.f0)
            replay_ok = replay_ok and ok
            if note:
                notes.append(note)
        part_rows = code.judge.rows(part, m, eps)
        part_rows = _settle(code, code.judge, part, part_rows, m, eps, notes, oracle)
        rows += code.graph_only(part_rows, oracle)
        measured = measured or m
        parts.append(part)
    return rows, measured, _joined(parts), replay_ok


def _code_notes(code, rows: list, perturbation, notes: list) -> list:
    """``notes`` with what the re-runs of the code say: why the graph answered, what a
    disagreement means, inputs left out, a re-run under the magic."""
    if code.problem and len(perturbation):
        notes.insert(0, code.problem)
    if code.oracle != "code":
        return notes
    notes[:0] = _missing_paths(code.trace, rows)
    if code.rerun.left_out:
        notes.append(
            f"{code.rerun.left_out} input number(s) were not moved one by one: re-running "
            "the code for them would pass the check's time budget"
            + (
                " (the row that moves every input at once covers them)."
                if len(perturbation.signs)
                else "; they are not checked."
            )
        )
    if code.rerun.mode == "magic":
        notes.append(
            f"The code fails as plain Python ({code.rerun.plain_error}), so each re-run ran "
            "under the magic, with the graph it made set aside: its numbers are still the "
            "code's own."
        )
    return notes


_OUTSIDE = " outside the graph"  # (in the name of the row of the numbers the graph never met)


def _missing_paths(trace, rows) -> list:
    """What a disagreement between the graph and the code means, in words."""
    wrong = [r for r in rows if r.status == "fail"]
    if not wrong:
        return []
    named = [r for r in wrong if r.index is not None]
    names = ", ".join(f"`{r.name}`" for r in named[:4]) + (", ..." if len(named) > 4 else "")
    if any(r.index is None and _OUTSIDE in r.name for r in wrong):
        names = (names + " and " if names else "") + "inputs the graph never reached"
    names = names or "its inputs"
    places = [w for w in getattr(trace, "warnings", ()) if w][:1]
    return [
        f"Your code, run again with {names} moved, changes the target by a different amount "
        "than the recorded graph's gradient says: a path to the target is missing from the "
        "graph (code the magic does not follow: a write into a plain array, a number that "
        "left the graph and came back as plain, a library computing outside it), or an "
        "op's rule is wrong. The numeric column is the truth here."
        + (f" Where the graph was cut: {places[0]}" if places else "")
    ]


class _Code:
    """Who answers the check: the code run again plainly (``oracle`` "code"), or, where it
    cannot be (no re-run, an input it cannot move, a re-run that failed or reached outside),
    the recorded graph replayed (``oracle`` "graph", its passing rows marked so)."""

    def __init__(self, trace, replay, judge, perturbation):
        self.trace, self.replay, self.judge = trace, replay, judge
        self.rerun = getattr(trace, "rerun", None)
        self.oracle = "graph"
        self.problem = ""
        if self.rerun is None:  # a graph built with the explicit engine: the graph is the code
            self.oracle = "ops"
        elif self.rerun.problem:
            self.problem = f"The check compared with the recorded graph only: {self.rerun.problem}."
        else:
            self.oracle = "code"
            needed = set(perturbation.node.tolist()).union(perturbation.spread.tolist())
            missing = sorted(needed - set(self.rerun.handles) - self.rerun.explicit)
            if missing:  # (the explicit engine's leaves are replayed: their graph is code)
                names = ", ".join(repr(trace.nodes[i].name) for i in missing[:3])
                self.problem = (
                    f"A plain re-run of the code cannot move {names}"
                    f"{', ...' if len(missing) > 3 else ''} (made by code the magic does not "
                    "follow): those rows are compared with the recorded graph only."
                )

    def split(self, perturbation) -> list:
        """[(who answers, the part of ``perturbation`` it answers)]: the code for the inputs
        a re-run can move, the graph replayed for the others (the explicit engine's leaves
        made by a library, such as ``nn.Linear``'s weights, or numbers the re-run cannot
        reach)."""
        if self.oracle != "code":
            return [(self.oracle, perturbation)]
        handles = self.rerun.handles
        p = perturbation
        node = p.node.tolist()
        mine = [j for j, i in enumerate(node) if i in handles]
        spread = [k for k, i in enumerate(p.spread.tolist()) if i in handles]
        if len(mine) == len(node) and len(spread) == len(p.spread):
            return [("code", p)]
        rest = [j for j, i in enumerate(node) if i not in handles]
        parts = []
        if mine or (spread and len(p.signs)):
            signs = p.signs[:, spread] if len(spread) else None
            parts.append(
                ("code", Perturbation(p.node[mine], p.elem[mine], p.spread[spread], signs))
            )
        parts.append(("graph", Perturbation(p.node[rest], p.elem[rest])))
        return parts

    def measure(self, perturbation, eps, oracle=None):
        """(what :class:`~.replay.Replay` measures, the perturbation it covers), on the code
        where it can answer (within its time budget: some inputs may be left out)."""
        if (oracle or self.oracle) == "code":
            done = self.rerun.measure(self.trace, perturbation, eps)
            if done is not None:
                return done
            self.oracle = "graph"
            self.problem = f"The check compared with the recorded graph only: {self.rerun.problem}."
        if any(np.iscomplexobj(a) for a in self.trace.tensor_data.values()):
            self.problem += " Its replay computes real numbers only: this graph is not checked."
            none = np.zeros(0)
            f0 = float(np.sum(self.trace.target.data))
            return Measured(f0, none, none, none, none), perturbation.select([])
        return self.replay.measure(perturbation, eps), perturbation

    def with_direction(self, perturbation, seed: int):
        """``perturbation``, where the code answers a scalar graph, with one direction through
        every input if it has none: it covers the inputs a time budget may leave out."""
        if self.oracle != "code" or self.trace.tensor_data or len(perturbation.signs):
            return perturbation
        spread = np.array(sorted(set(perturbation.node.tolist())), dtype=np.intp)
        if len(spread) <= DIRECTION_FROM:
            return perturbation
        return Perturbation(
            perturbation.node, perturbation.elem, spread, _signs(len(spread), seed)[None, :]
        )

    def graph_only(self, rows: list, oracle: str) -> list:
        """``rows``, a passing row marked as compared with the graph alone where the code was
        not asked (but for a leaf of the explicit engine, whose graph is the code's own)."""
        if oracle == "code" and self.oracle == "code" or oracle == "ops":
            return rows
        explicit: frozenset = getattr(self.rerun, "explicit", frozenset())
        return [
            r._replace(status="graph") if r.status == "pass" and r.index not in explicit else r
            for r in rows
        ]

    def direction(self, eps: float, seed: int) -> list:
        """One more row where the code answers and the graph has arrays: every element of
        every input moved at once along a random direction (the scalar leaves' own
        directions are made by :func:`choose`)."""
        trace = self.trace
        if self.oracle != "code" or not trace.tensor_data:
            return []
        spread = sorted(self.rerun.handles)
        sizes = [
            np.asarray(trace.tensor_data[i]).size if i in trace.tensor_data else 1 for i in spread
        ]
        total = int(sum(sizes))
        if total < 2:
            return []
        signs = _signs(total, seed)[None, :]
        with np.errstate(all="ignore"):
            m = self.rerun.directions(trace, spread, signs, eps)
        if m is None:
            return []
        grads = [
            np.ravel(np.asarray(trace.tensor_grad[i], dtype=float))
            if i in trace.tensor_data
            else np.array([trace.grad[i]])
            for i in spread
        ]
        analytic = np.array([float(np.dot(np.concatenate(grads), signs[0]))])
        numbers = self.judge._compare(analytic, m)
        status = ("pass", "fail", "kink", "nonfinite", "unresolved")[int(numbers["status"][0])]
        return [
            CheckRow(
                f"all {total:,} input numbers at once",
                float(analytic[0]),
                float(m.numeric[0]),
                float(numbers["abs_err"][0]),
                float(numbers["rel_err"][0]),
                float(numbers["bound"][0]),
                status,
                "along a random direction: every input number moved by ±eps at once, the "
                "gradient times the move against the change of the target",
                None,
                total,
            )
        ]

    def strays(self, eps: float, seed: int) -> list:
        """A failing row where the code answers and moving the numbers the cell made that the
        graph does not reach (a path it missed) moves the target: their gradient is not 0.
        (Not for a training loop, whose graph is its last step on purpose.)"""
        trace = self.trace
        if self.oracle != "code" or getattr(trace, "steps", None):
            return []
        with np.errstate(all="ignore"):
            done = self.rerun.strays(trace, eps, seed)
        if done is None:
            return []
        m, count = done
        numbers = self.judge._compare(np.zeros(1), m)
        if int(numbers["status"][0]) != 1:
            return []
        names = getattr(trace, "stray_names", [])
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        name = f"{count:,} input{'s' if count > 1 else ''}{_OUTSIDE}" + (
            f" ({shown})" if shown else ""
        )
        note = (
            "each moved by ±eps at once: the graph gives them no gradient, but the code's "
            "target moves with them"
        )
        abs_err, rel_err, bound = (float(numbers[k][0]) for k in _ERRORS)
        numeric = float(m.numeric[0])
        return [CheckRow(name, 0.0, numeric, abs_err, rel_err, bound, "fail", note, None, count)]


def _signs(n: int, seed: int) -> np.ndarray:
    from .perturb import signs

    return signs(n, seed + 1)


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
    if any(np.iscomplexobj(a) for a in trace.tensor_data.values()):
        return (
            "the graph holds complex numbers: the check moves its real inputs only, and only "
            "where it can run the code again"
        )
    return (
        "the target depends on no input: every leaf is a constant (a number written in "
        "the cell, or requires_grad=False)"
    )


def _joined(parts: list):
    """The perturbations of ``parts`` as one (their elements; the first one's directions)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    return Perturbation(
        np.concatenate([p.node for p in parts]),
        np.concatenate([p.elem for p in parts]),
        first.spread,
        first.signs,
    )


def _settle(code, judge, perturbation, rows, m, eps, notes, oracle=None) -> list:
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
        measured_again, again = code.measure(again, step, oracle)
        again = judge.rows(again, measured_again, step)
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
def expect(trace, mapping, atol: float = DEFAULTS.atol, rtol: float = DEFAULTS.rtol) -> CheckReport:
    """Compare named gradients (``"x"`` or ``"x.grad"``) and values (``"x.data"``).

    ``mapping`` is a dict or a list of (name, expected) pairs. A name with no
    node is an ``error`` row, never skipped. The verdict reads "3 of 4 correct".
    """
    pairs = expected_pairs(mapping)
    truth = _code_truth(trace, pairs)
    rows = [_expect_row(trace, key, want, atol, rtol, truth) for key, want in pairs]
    notes = []
    if truth:
        notes.append(
            "Your code, run again with its inputs moved, contradicts the recorded graph for "
            + ", ".join(repr(trace.nodes[i].name) for i in truth)
            + ": those answers are judged against the code's own slopes (finite differences)."
        )
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


def unanswered(
    mapping, error: str, atol: float = DEFAULTS.atol, rtol: float = DEFAULTS.rtol
) -> CheckReport:
    """The expect report when nothing could be compared: ``error`` says why.

    Every expected entry is an ``error`` row (so ``to_dict()`` lists each as
    wrong) and the report fails, e.g. when a graded cell did not run.
    """
    rows = [
        _error_row(key, want, "not compared: the cell could not be run")
        for key, want in expected_pairs(mapping)
    ]
    return CheckReport(rows, kind="expect", atol=atol, rtol=rtol, error=error)


# the most elements of one array input measured one by one for an expected answer
TRUTH_ELEMENTS = 4096


def _code_truth(trace, pairs) -> dict:
    """Leaf position → its gradient measured on the code (central differences of a plain
    re-run), for the expected gradients whose leaf the check found the graph wrong about."""
    rerun = getattr(trace, "rerun", None)
    if rerun is None or rerun.problem or not pairs:
        return {}
    report = trace.check()
    if report.oracle != "code":
        return {}
    wrong = {r.index for r in report.rows if r.status == "fail" and r.index is not None}
    if not wrong:
        return {}
    truth = {}
    eps = report.eps or 1e-6
    for key, _ in pairs:
        if key.endswith(".data"):
            continue
        try:
            node = trace.node(key[:-5] if key.endswith(".grad") else key)
        except KeyError:
            continue
        i = node.index
        if i not in wrong or i in truth:
            continue
        size = 1 if node.shape is None else int(np.prod(node.shape))
        if size > TRUTH_ELEMENTS:
            continue
        elems = [-1] if node.shape is None else list(range(size))
        with np.errstate(all="ignore"):
            done = rerun.measure(trace, Perturbation([i] * len(elems), elems), eps, whole=True)
        if done is not None:
            m = done[0]
            truth[i] = float(m.numeric[0]) if node.shape is None else m.numeric.reshape(node.shape)
    return truth


def _expect_row(trace, key: str, want, atol, rtol, truth=None) -> CheckRow:
    name, attr = key, "grad"
    for suffix in (".data", ".grad"):
        if key.endswith(suffix):
            name, attr = key[: -len(suffix)], suffix[1:]
    try:
        node = trace.node(name)
    except KeyError:
        return _error_row(key, want, f"no node named {name!r}")
    got = None
    if attr == "grad" and truth and node.index in truth:
        got = truth[node.index]  # the code's own slope, where the graph missed a path
    return compare_row(key, node, attr, want, atol, rtol, got)


def compare_row(key: str, node, attr: str, want, atol, rtol, got=None) -> CheckRow:
    """The row of ``key``: ``node``'s ``attr`` (``"grad"`` or ``"data"``) beside ``want``
    (or ``got`` in its place)."""
    if got is None:
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
