"""The grader's verdict on what a run reported: each expected answer against the reported
node (:func:`_judge`), and the sentence that says what went wrong (a wrong answer, an
error on the student's line, a timeout, out of memory, a crash).
"""

from __future__ import annotations

import base64
import math
import re
import signal

import numpy as np

from ..analysis.check import CheckReport, compare_row, expect, unanswered
from ..analysis.rows import CheckRow
from ._collect import _NOTE_CHARS, _cut

_MAX_NOTES = 20  # notes kept from a run
_MAX_TEXT = 2000  # characters kept of any text the child sends
_MAX_NODES = 10_000  # nodes a report may name


FEEDBACK = ("full", "verdicts")
"""How much a report shows: everything, or each answer's verdict without the expected values."""


class GradeReport(CheckReport):
    """The report of :func:`grade`: an expect :class:`CheckReport` plus its ``outcome``.

    ``outcome`` is ``"pass"``, ``"wrong"`` (the cell ran; some answer is wrong
    or has no node), ``"error"`` (the cell does not compile, raised, or left
    nothing to differentiate; ``error`` names the student's line), ``"timeout"``,
    ``"memory"`` (out of memory) or ``"crash"`` (the process that ran it ended
    without a report). Only ``"pass"`` passes.

    ``sandbox`` says how the cell was run: ``{"sandboxed": bool, "how": str,
    "limits": {name: bool}}`` where ``limits`` says which limits held (``time``,
    ``memory_per_process``, ``memory_total``, ``processes``, ``file_size``,
    ``tmp_size``). ``feedback`` is ``"full"`` or ``"verdicts"`` (each answer's
    verdict, the expected values and the distances to them left out of the rows, the
    text, ``to_dict()`` and ``assert_passed()``). ``to_dict()`` includes all three and is
    strict JSON: a number that is not finite is the text ``"nan"``, ``"inf"`` or
    ``"-inf"``.

    Its text (``str(report)``) starts with the verdict line (``✓ 5 of 5 correct``);
    every line the cell's own text reaches starts with ``note:`` or is indented, and
    that text never holds a line break, so no message can forge a verdict line.
    """

    outcome: str = "pass"
    sandbox: dict = {}
    feedback: str = "full"

    @classmethod
    def of(
        cls, report: CheckReport, outcome: str, sandbox: dict | None = None, feedback="full"
    ) -> "GradeReport":
        new = cls.__new__(cls)
        new.__dict__.update(report.__dict__)
        new.outcome = outcome
        new.sandbox = sandbox or {}
        new.feedback = feedback
        if feedback == "verdicts":
            new.rows = [_hidden(r) for r in new.rows]
        return new

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["outcome"] = self.outcome
        d["sandbox"] = self.sandbox
        d["feedback"] = self.feedback
        return strict(d)

    def __str__(self) -> str:
        if self.feedback == "verdicts":
            return _verdicts_text(self)
        shown = CheckReport.__new__(CheckReport)
        shown.__dict__.update(self.__dict__)
        shown.notes = [f"note: {n}" for n in self.notes]
        return str(shown)

    def assert_passed(self) -> None:
        if self.feedback != "verdicts" or self.passed:
            return super().assert_passed()
        raise AssertionError(_verdicts_text(self))


def _hidden(row):
    """A row without the expected value and what would give it away (the distance, the
    tolerance's bound)."""
    return row._replace(expected=None, abs_err=None, rel_err=None, bound=None)


def _verdicts_text(report: "GradeReport") -> str:
    mark = "✓" if report.passed else "✗"
    lines = [f"{mark} {report.verdict}", "(expected values are not shown for this assignment)"]
    if report.error is not None:
        lines.append(report.error)
    lines += [f"note: {n}" for n in report.notes]
    for r in report.rows:
        what = "correct" if r.ok else "error: " + r.note if r.status == "error" else "wrong"
        lines.append(f"  {'✓' if r.ok else '✗'} {r.name}: {what}")
    return "\n".join(lines)


def strict(x):
    """``x`` as strict JSON data: arrays as lists, numbers that are not finite as the texts
    ``"nan"``, ``"inf"``, ``"-inf"``, text made safe by :func:`clean`."""
    if isinstance(x, dict):
        return {strict(k) if isinstance(k, str) else k: strict(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict(v) for v in x]
    if isinstance(x, np.ndarray):
        return strict(x.tolist())
    if isinstance(x, np.generic):
        return strict(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if x != x else "inf" if x > 0 else "-inf"
    if isinstance(x, str):
        return clean(x)
    return x


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SHOWN = {"\u2028": "\\u2028", "\u2029": "\\u2029"}  # line breaks shown, never obeyed


def clean(text: str) -> str:
    """``text`` safe to print, store and send: without control characters (escape
    sequences, carriage returns, bidi overrides), lone surrogates written as ``\\udc80``
    and the line and paragraph separators as ``\\u2028``; newlines and tabs kept. What a
    submission writes cannot move the cursor, recolour or rewrite what the grader's
    terminal or log shows, nor break a UTF-8 file."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = _CONTROL.sub("", text)
    for char, shown in _SHOWN.items():
        text = text.replace(char, shown)
    return text


def one_line(text: str) -> str:
    """:func:`clean`, with newlines shown as ``\\n``: text of the student's that can never
    start a line of the report of its own."""
    return clean(text).replace("\n", "\\n")


# =========================================================================== judging
class _Reported:
    """The nodes a run reported, shaped as :func:`~gradmagic.analysis.check.expect` reads a
    Trace: ``node(name)`` (``.index``, ``.data``, ``.grad``), ``target.name``, ``branch_dependent``."""

    class _Node:
        __slots__ = ("index", "data", "grad", "name", "disputed")

        def __init__(self, name, index, data, grad, disputed=False):
            self.name, self.index, self.data, self.grad = name, index, data, grad
            # the code, run again, refutes this gradient: the graph missed a path
            self.disputed = disputed

    def __init__(self, nodes: dict, target: str, branch_dependent: bool):
        self._nodes = nodes
        self.target = self._Node(target, None, None, None)
        self.branch_dependent = branch_dependent

    def node(self, name: str):
        try:
            return self._nodes[name]
        except KeyError:
            raise KeyError(f"no node is labelled {name!r}") from None


class _Unreadable(Exception):
    """The child's data is not what a run reports."""


def _judge(
    data: dict,
    pairs,
    source: str,
    atol,
    rtol,
    timeout,
    memory,
    how: dict | None = None,
    feedback: str = "full",
) -> GradeReport:
    """Build and judge the report in the grader's process from a run's plain data.

    Never raises for anything in ``data``: what cannot be read is a crash (a number past
    a float's range is read as an infinity).
    """
    try:
        outcome, report = _verdict(data, pairs, source, atol, rtol, timeout, memory)
    except Exception:  # noqa: BLE001 - whatever the data holds, a verdict, never a raise
        outcome = "crash"
        report = unanswered(
            pairs, "The process that ran the cell sent a report that could not be read.", atol, rtol
        )
    stderr = data.get("stderr") if isinstance(data, dict) else None
    if stderr and isinstance(stderr, str) and outcome not in ("crash",):
        report.notes.append(f"The cell wrote to stderr: {one_line(_cut(stderr))}")
    return GradeReport.of(report, outcome, how, feedback)


def _verdict(data, pairs, source: str, atol, rtol, timeout, memory) -> tuple:
    """(outcome, report) of a run's data; raises for data that is not a run's report."""
    status = data.get("status") if isinstance(data, dict) else None
    notes = _texts(data.get("notes", []))[:_MAX_NOTES] if status else []
    if status == "ran":
        return _ran(data, pairs, notes, atol, rtol)
    if status == "error":
        error = data.get("error")
        if not isinstance(error, dict):
            raise _Unreadable
        report = unanswered(pairs, _what_went_wrong(error, source, memory), atol, rtol)
        report.notes += notes
        return "memory" if error.get("kind") == "memory" else "error", report
    if status == "timeout":
        why = f"Stopped: the cell did not finish within the time limit of {timeout:g} s."
        return "timeout", unanswered(pairs, why, atol, rtol)
    if status != "crash":
        raise _Unreadable
    if data.get("memory_total") is True:
        outcome = "memory"
        why = (
            f"The cell's processes together used more than the memory limit "
            f"({memory:g} MiB); the sandbox was ended."
        )
    else:
        outcome, why = _crash(data.get("returncode"), data.get("stderr", ""), memory)
    return outcome, unanswered(pairs, why, atol, rtol)


def _ran(data: dict, pairs, notes: list, atol, rtol) -> tuple:
    """(outcome, report) of a cell that ran: the answers, then the ``.grad`` values the
    learner's own engine left, each against the true gradient."""
    reported = _Reported(
        _nodes(data.get("nodes")),
        _text(data.get("target", "")),
        data.get("branch_dependent") is True,
    )
    claimed, claim_notes = _claims(data.get("claims"), atol, rtol)
    report = _expect(reported, pairs, atol, rtol)
    report.rows += claimed
    report.notes[:0] = notes
    report.notes += claim_notes
    if report.rows:
        return "pass" if report.passed else "wrong", report
    why = (
        "your engine left no .grad to judge"
        if "claims" in data
        else "no expected answers were given, and the cell's value is not an object of "
        "an autograd engine of the student's own, whose .grad values could be judged"
    )
    report.rows = [
        CheckRow("?", None, None, math.nan, math.nan, math.nan, "error", f"nothing to grade: {why}")
    ]
    return "error", report


def _claims(claims, atol, rtol) -> tuple[list, list]:
    """The rows of the ``.grad`` values a learner's own engine left (the run's ``claims``),
    each judged as an answer is, against the true gradient; and the notes on them."""
    if claims is None:
        return [], []
    rows = claims.get("rows") if type(claims) is dict else None
    if type(rows) is not list or len(rows) > _MAX_NODES:
        raise _Unreadable
    out = []
    for claim in rows:
        if type(claim) is not dict:
            raise _Unreadable
        (node,) = _nodes({claim.get("name"): claim}).values()
        true = _number_or_array(claim.get("true"))
        with np.errstate(all="ignore"):
            row = compare_row(f"{node.name}.grad", node, "grad", true, atol, rtol)
        disputed = {node.index} if node.disputed else set()
        out.append(_undisputed(disputed, _exactly(row, true), row.name))
    notes = ["Each .grad your engine left (rows x.grad) is judged against the true gradient."]
    return out, (notes if out else []) + _texts(claims.get("notes", []))


def _undisputed(disputed: set, row, key: str):
    """``row``, an error row where the gradient it grades is one the code refutes (its
    node's index is in ``disputed``): neither the recorded graph's number nor the
    student's answer is taken on trust then."""
    if key.endswith(".data") or row.status not in ("pass", "fail") or row.index not in disputed:
        return row
    return row._replace(
        status="error",
        note="not graded: your code, run again with this input moved, disagrees with the "
        "gradient its recorded graph gives (a path the magic did not follow)",
    )


def _expect(reported, pairs, atol, rtol) -> CheckReport:
    """:func:`expect` on the reported nodes; an answer on a gradient the code refutes is
    not graded, and one that is not finite is met only by the same value."""
    with np.errstate(all="ignore"):
        report = expect(reported, pairs, atol=atol, rtol=rtol)
    disputed = {n.index for n in reported._nodes.values() if n.disputed}
    report.rows = [
        _undisputed(disputed, _exactly(row, want), key)
        for row, (key, want) in zip(report.rows, pairs)
    ]
    return report


def _exactly(row, want):
    """A passing row whose expected value is not finite passes only if got is the same value
    (a tolerance relative to an infinite value would let any number through)."""
    if row.status != "pass" or isinstance(want, str):
        return row
    w = np.asarray(want, dtype=float)
    if np.isfinite(w).all():
        return row
    g = np.asarray(row.got, dtype=float)
    if g.shape == w.shape and np.array_equal(g, w, equal_nan=True):
        return row
    return row._replace(
        status="fail", note="the expected value is not finite: only the same value passes"
    )


def _text(x) -> str:
    if type(x) is not str:
        raise _Unreadable
    return one_line(x[:_MAX_TEXT])


def _texts(xs) -> list:
    if type(xs) is not list:
        raise _Unreadable
    return [_text(x) for x in xs[:_MAX_NOTES]]


def _nodes(nodes) -> dict:
    if type(nodes) is not dict or len(nodes) > _MAX_NODES:
        raise _Unreadable
    out = {}
    for name, node in nodes.items():
        if type(node) is not dict:
            raise _Unreadable
        index = node.get("index")
        if type(index) is not int:
            raise _Unreadable
        disputed = node.get("disputed", False)
        if type(disputed) is not bool:
            raise _Unreadable
        name = _text(name)
        out[name] = _Reported._Node(
            name,
            index,
            _number_or_array(node.get("data")),
            _number_or_array(node.get("grad")),
            disputed,
        )
    return out


def _number_or_array(x):
    """A reported number as a float (an int past a float's range as ±inf) or a float array:
    ``{"shape": [...], "f64": base64 of the little-endian float64 bytes}`` (or ``"values"``,
    a flat list of numbers)."""
    if type(x) is int:
        return _float(x)
    if x is None or type(x) is float:
        return x
    if type(x) is not dict:
        raise _Unreadable
    shape = x.get("shape")
    if type(shape) is not list or not all(type(n) is int and 0 <= n for n in shape):
        raise _Unreadable
    size = math.prod(shape)
    if "f64" in x:
        raw = x["f64"]
        if type(raw) is not str or len(raw) != 4 * ((8 * size + 2) // 3):
            raise _Unreadable
        try:
            data = base64.b64decode(raw, validate=True)
        except ValueError:
            raise _Unreadable from None
        return np.frombuffer(data, dtype="<f8").astype(float).reshape(shape)
    values = x.get("values")
    if type(values) is not list or len(values) != size:
        raise _Unreadable
    if not all(type(v) in (int, float) for v in values):
        raise _Unreadable
    return np.array([_float(v) for v in values], dtype=float).reshape(shape)


def _float(x) -> float:
    """A plain int or float as a float: an int past a float's range is ±inf."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _what_went_wrong(error: dict, source: str, memory) -> str:
    """A short description of the cell's error and the line of ``source`` it happened on."""
    kind, line = error.get("kind"), error.get("line")
    kind_name, message = _text(error.get("type", "")), _text(error.get("message", ""))
    if isinstance(line, bool) or not isinstance(line, int):
        line = None
    if kind == "notarget":
        return f"Nothing to grade: {message}."
    if kind == "syntax":
        what = f"The cell has a syntax error on line {line}: {message}"
    elif kind == "memory":
        where = f" on line {line}" if line is not None else ""
        limit = f" (limit {memory:g} MiB)" if memory is not None else ""
        what = f"The cell ran out of memory{limit}{where}" + (f": {message}" if message else "")
    elif kind == "exception":
        where = f" on line {line}" if line is not None else ""
        what = f"The cell raised {kind_name}{where}" + (f": {message}" if message else "")
    else:
        raise _Unreadable
    lines = source.splitlines()
    if line is not None and 1 <= line <= len(lines):
        what += f"\n    {line} | {one_line(lines[line - 1].strip())}"
    return what


def _crash(returncode, stderr, memory) -> tuple:
    """(outcome, message) for a child that ended without a usable report."""
    stderr = stderr if isinstance(stderr, str) else ""
    if isinstance(returncode, int) and returncode < 0:
        try:
            how = f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"killed by signal {-returncode}"
        if returncode == -getattr(signal, "SIGXCPU", 0):
            return "timeout", "Stopped: the cell used up its CPU time limit."
    else:
        how = f"exit code {returncode}"
    if "MemoryError" in stderr:
        limit = f" (limit {memory:g} MiB)" if memory is not None else ""
        return "memory", f"The cell ran out of memory{limit}; the process ended ({how})."
    why = f"The process that ran the cell ended without a report ({how})."
    if stderr:
        why += f"\n    its last output on stderr: {one_line(_cut(stderr[-_NOTE_CHARS:]))}"
    return "crash", why
