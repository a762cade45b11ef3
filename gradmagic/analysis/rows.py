"""The rows of a check: :class:`CheckRow`, the statuses, and how a replay's measurements
become rows (:class:`Judge`: the status of each comparison, its note, the leaf's name).

A row compares a number from the trace with what it should be; an array leaf's row shows
the worst of its perturbed elements, a direction's row all the leaves it moved at once.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple, Optional

import numpy as np

from .numbers import all_finite, short
from .perturb import Perturbation
from .replay import Measured, rounding_scale

__all__ = ["CheckRow", "STATUSES", "FLAGGED", "OK", "RANK", "Judge", "worst_first", "plain"]

STATUSES = {
    "pass": "agrees within the tolerance",
    "fail": "disagrees beyond the tolerance",
    "kink": "disagrees where the target is not smooth (kink or jump within eps)",
    "nonfinite": "a value is nan or infinite, so nothing can be compared",
    "unresolved": (
        "finite differences cannot settle it: numbers on the way to the target "
        "are so large that their rounding moves the slope by more than the "
        "difference (a larger eps may)"
    ),
    "error": "could not be compared",
    "graph": (
        "compared with the recorded graph only, not with the code run again: it cannot "
        "show a path the recording missed (the check's notes say why the code was not re-run)"
    ),
}
"""Row status → what it means. ``kink``, ``nonfinite`` and ``unresolved`` rows are flagged,
not failed."""

FLAGGED = ("kink", "nonfinite", "unresolved")
OK = frozenset({"pass", *FLAGGED})
_STATUS = ("pass", "fail", "kink", "nonfinite", "unresolved")  # the check's status codes 0..4
RANK = {"error": 0, "fail": 1, "graph": 2, "nonfinite": 3, "unresolved": 4, "kink": 5, "pass": 6}


_ERRORS = ("abs_err", "rel_err", "bound")
_ALONG = (
    "along a random direction: each leaf moved by ±eps at once, the gradient times the "
    "move against the change of the target"
)


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
    # (two fields named as tuple's methods: a row is read by its names, never as a sequence)
    index: Optional[int] = None  # type: ignore[assignment]  # the node's index in trace.nodes
    count: int = 1  # type: ignore[assignment]  # elements compared (a tensor: its worst one)

    @property
    def ok(self) -> bool:
        """True unless the row failed or could not be compared (flags are ok)."""
        return self.status in OK

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
        return (RANK[self.status], -self.excess, -err if err == err else -math.inf)

    def to_dict(self, names=("got", "expected")) -> dict:
        return {
            "name": self.name,
            "node": self.index,
            names[0]: plain(self.got),
            names[1]: plain(self.expected),
            "abs_err": self.abs_err,
            "rel_err": self.rel_err,
            "bound": self.bound,
            "status": self.status,
            "note": self.note,
            "count": self.count,
        }


# a CheckRow from a full tuple of fields: CheckRow._make without its Python call
_new_row = functools.partial(tuple.__new__, CheckRow)


def plain(x):
    """``x`` as JSON can hold it: an array as a list, a numpy scalar as a Python number."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


class Judge:
    """Turns what a replay measured into rows: statuses, notes, names."""

    def __init__(self, trace, atol: float, rtol: float):
        self.trace, self.atol, self.rtol = trace, atol, rtol
        self.scale = rounding_scale(trace)
        self.kinks = _kink_reach(trace, np.flatnonzero(trace.kink))

    def rows(self, p: Perturbation, m: Measured, eps: float) -> list:
        """One row per scalar leaf, one summary row per array leaf, one per direction."""
        analytic = self._analytic(p, m, eps)
        numbers = self._compare(analytic, m)
        if (p.elem >= 0).any():
            return self._array_rows(p, m, numbers)
        return self._scalar_rows(p, m, numbers)

    def _analytic(self, p: Perturbation, m: Measured, eps: float):
        trace = self.trace
        index = p.node.tolist()
        if (p.elem >= 0).any():
            grads = trace.tensor_grad
            analytic = np.array(
                [
                    trace.grad[i] if e < 0 else grads[i].flat[e]
                    for i, e in zip(index, p.elem.tolist())
                ],
                dtype=float,
            )
        else:
            analytic = trace.grad[p.node]
        if len(p.signs):  # along a direction: the gradient times the move, over the step
            up, down = p.moved(trace.data, eps)
            with np.errstate(all="ignore"):
                along = ((up - down) * trace.grad[p.spread]).sum(axis=1) / m.steps[len(index) :]
            analytic = np.concatenate((analytic, along))
        return analytic

    def _compare(self, analytic, m: Measured) -> dict:
        """Each row's numbers and status code (an index of ``_STATUS``)."""
        atol, rtol = self.atol, self.rtol
        numeric = m.numeric
        abs_err = np.abs(analytic - numeric)
        mag = np.abs(numeric)
        with np.errstate(all="ignore"):
            rel_err = np.where(abs_err == 0, 0.0, abs_err / mag)
            bound = atol + rtol * mag
            finite = np.isfinite(analytic) & np.isfinite(numeric)
            close = abs_err <= bound
            # within the bound once rounding on the way to the target is allowed for
            noise = m.rounding(self.scale)
            unresolved = abs_err <= bound + noise
            fwd, bwd = m.fwd, m.bwd
            jump = np.abs(fwd - bwd) > (
                atol + rtol * np.maximum(np.abs(fwd), np.abs(bwd)) + 4 * noise
            )
            # a kink explains a gradient between its one-sided slopes, no other
            jump &= np.abs(analytic - (fwd + bwd) / 2) <= np.abs(fwd - bwd) / 2 + bound + noise
        status = np.where(
            ~finite, 3, np.where(close, 0, np.where(unresolved, 4, np.where(jump, 2, 1)))
        )
        return {
            "analytic": analytic,
            "abs_err": abs_err,
            "rel_err": rel_err,
            "bound": bound,
            "status": status,
        }

    def _scalar_rows(self, p: Perturbation, m: Measured, numbers: dict) -> list:
        trace, nodes, kinks = self.trace, self.trace.nodes, self.kinks
        index = p.node.tolist()
        columns = [numbers["analytic"], m.numeric, *(numbers[k] for k in _ERRORS)]
        a_l, n_l, e_l, r_l, b_l = (x.tolist() for x in columns)
        codes = numbers["status"].tolist()
        s_l = [_STATUS[s] for s in codes]
        single = len(index)
        notes = [""] * single
        todo = set(np.flatnonzero(numbers["status"][:single]).tolist())
        todo.update(j for j, i in enumerate(index) if i in kinks)
        for j in todo:
            notes[j] = _note(codes[j], j, m, a_l[j], nodes[index[j]], kinks)
        names = _leaf_names(trace, p.node)
        rows = list(
            map(_new_row, zip(names, a_l, n_l, e_l, r_l, b_l, s_l, notes, index, [1] * single))
        )
        spread, ways = len(p.spread), len(p.signs)
        for k, j in enumerate(range(single, single + ways), 1):
            name = f"all {spread:,} leaves at once" + (f" ({k})" if ways > 1 else "")
            extra = _note(codes[j], j, m, a_l[j], None, kinks)
            note = _ALONG + (f"; {extra}" if extra else "")
            numbers_j = (a_l[j], n_l[j], e_l[j], r_l[j], b_l[j], s_l[j])
            rows.append(CheckRow(name, *numbers_j, note, None, spread))
        return rows

    def _array_rows(self, p: Perturbation, m: Measured, numbers: dict) -> list:
        nodes, status = self.trace.nodes, numbers["status"]
        index, elems = p.node.tolist(), p.elem.tolist()
        rows = []
        j = 0
        while j < len(index):
            node = nodes[index[j]]
            if elems[j] < 0:
                s = int(status[j])
                a = float(numbers["analytic"][j])
                rows.append(
                    CheckRow(
                        node.name,
                        a,
                        float(m.numeric[j]),
                        float(numbers["abs_err"][j]),
                        float(numbers["rel_err"][j]),
                        float(numbers["bound"][j]),
                        _STATUS[s],
                        _note(s, j, m, a, node, self.kinks),
                        node.index,
                    )
                )
                j += 1
                continue
            end = j
            while end < len(index) and index[end] == index[j]:
                end += 1
            rows.append(self._array_row(node, elems, j, end, m, numbers))
            j = end
        return rows

    def _array_row(self, node, elems, start, end, m: Measured, numbers: dict) -> CheckRow:
        """The worst of an array leaf's perturbed elements, as one row."""
        part = slice(start, end)
        status, abs_err = numbers["status"], numbers["abs_err"]
        rank = np.array([RANK[_STATUS[s]] for s in status[part].tolist()])
        w = start + int(worst_first(abs_err[part], numbers["bound"][part], rank)[0])
        s = int(status[w])
        where = np.unravel_index(elems[w], node.shape)
        count = end - start
        total = int(np.prod(node.shape))
        sampled = f"{count} of {total:,} elements" if count < total else f"all {count} elements"
        bad = int(np.sum(status[part] != 0))
        note = f"worst element {tuple(int(x) for x in where)} of {sampled}"
        if bad:
            note += f"; {bad} not passing"
        analytic = float(numbers["analytic"][w])
        extra = _note(s, w, m, analytic, node, self.kinks)
        if extra:
            note += "; " + extra
        return CheckRow(
            node.name,
            analytic,
            float(m.numeric[w]),
            float(abs_err[w]),
            float(numbers["rel_err"][w]),
            float(numbers["bound"][w]),
            _STATUS[s],
            note,
            node.index,
            count,
        )


def _leaf_names(trace, leaves: np.ndarray) -> list:
    """Each scalar leaf's ``Node.name``: its label, else its number."""
    label_names, exact = trace.label_names, trace.exact
    values = trace.data[leaves].tolist()
    return [
        label_names[c] if c else short(exact[i] if i in exact else x)
        for c, i, x in zip(trace.label_code[leaves].tolist(), leaves.tolist(), values)
    ]


def _note(s: int, j: int, m: Measured, analytic: float, node, kinks) -> str:
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
        return (
            f"finite differences are only good to ±{m.slack[j]:.3g} here: numbers of "
            f"{m.size[j]:.3g} on the way to the target are rounded by more than eps moves "
            "them (a larger eps may settle it)"
        )
    if node is not None:
        kink = kinks.get(node.index)
    else:  # a direction moves every leaf: any kink may be the one
        kink = next(iter(kinks.values()), "") if s == 2 else ""
    if s == 2:
        text = (
            f"one-sided slopes differ ({m.fwd[j]:.6g} from the right, {m.bwd[j]:.6g} from the left)"
        )
        return text + (f": {kink}" if kink else ": a kink or jump within eps")
    if kink:
        return ("passes " + kink) if s == 0 else kink
    return ""


def _kink_reach(trace, kinks) -> dict:
    """leaf index → description of a kink node it feeds (only leaves that do)."""
    if not len(kinks):
        return {}
    last = int(max(kinks))  # nothing after the last kink node reaches one
    kink = trace.kink[: last + 1].tolist()
    pa = trace.parent_a[: last + 1].tolist()
    pb = trace.parent_b[: last + 1].tolist()
    reach = [-1] * trace.n  # the kink node each node feeds, -1 for none
    for i in range(last, -1, -1):
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
    for i in leaves[leaves <= last].tolist():
        r = reach[i]
        if r >= 0:
            out[i] = f"{trace.op_entry(r).name} at a non-differentiable point (node #{r})"
    return out


def worst_first(err, bound, rank=None):
    """Positions of 1-d ``err`` ordered worst first: by ``rank`` (if given), then
    ``err / bound``, then ``err`` (so a zero bound, whose ratio is inf, still ranks)."""
    with np.errstate(all="ignore"):
        size = np.where(np.isnan(err), np.inf, err)
        excess = np.where(bound > 0, size / bound, np.where(size > 0, np.inf, 0.0))
    keys = (-size, -excess) if rank is None else (-size, -excess, rank)
    return np.lexsort(keys)
