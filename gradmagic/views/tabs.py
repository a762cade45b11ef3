"""What the live view shows of a run: :func:`payload`, JSON-able data with no live node.

A payload holds the graph's DOT, the drawn nodes' short and full values with their
explanations (local derivatives with the rule in the operands' names, the gradient flowing
in), and the tabs, each a ``{"id", "title", "kind", "payload"}`` dict; the front-end
(``js/src/pages.js``) draws kinds ``graph``, ``table``, ``html``, ``backward`` and
``steps``. The tabs are a list of makers (:data:`TAB_MAKERS`); another view adds a tab by
appending a maker ``(trace, report, context) -> tab | None``: :mod:`gradmagic.views.teaching`
adds **Forward**, **Walk** and **Paths**. A tab whose work grows with the graph is in
:data:`DEFERRED` too: the live view then sends only its button, and the kernel makes it
when the browser first opens it. Every list is capped (``TERMS``, ``STEP_LIMIT``,
``TABLE_ROWS``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import grouped, render, teaching
from .tables import verdict_rows
from .teaching_parts import _Letters, _template, rule_with  # noqa: F401 - widget imports them
from ..analysis.graph import backward_steps, children_of

__all__ = [
    "payload",
    "explain",
    "rule_text",
    "operand_name",
    "use_counts",
    "TAB_MAKERS",
    "DEFERRED",
]

TERMS = 8  # terms of an explanation before "and N more"
STEP_LIMIT = 2000  # backward steps the stepper carries
TABLE_ROWS = 500  # rows of a live table


def _capped(items: list, limit: int = TERMS) -> dict:
    """At most ``limit`` items and how many were left out ("and N more")."""
    return {"items": items[:limit], "more": max(0, len(items) - limit)}


def operand_name(trace, index: int, fold=()) -> str:
    """How an operand is written in a rule: its label, a folded constant's value, else #index."""
    node = trace.nodes[index]
    if node.label:
        return node.label
    if index in fold or node.is_constant:
        return render.fmt(node.data)
    return f"#{index}"


def rule_text(trace, index: int, fold=()) -> str:
    """The op's derivative rule written with the operands' own names.

    The op table writes rules with ``a`` and ``b``; a user's ``b`` may be the
    sum itself, so the letters are replaced by the operands (``∂(x·w)/∂x = w``).
    """
    rule = getattr(render.op_entry(trace, index), "rule", "") or ""
    parents = trace.nodes[index].parents
    if not rule or not parents or len(parents) > 2:
        return rule
    return rule_with(rule, [operand_name(trace, p, fold) for p in parents])


def _flags(node, status) -> list:
    flags = []
    if node.kink:
        flags.append("kink: a subgradient was used")
    if not node.finite:
        flags.append("nan or infinite")
    elif render.undefined_grad(node):
        flags.append(render.UNDEFINED)
    if node.cut:
        flags.append(f"gradient cut: made outside the graph at {node.cut}")
    if status:
        flags.append(f"check: {status}")
    return flags


def explain(trace, index: int, children, fold=(), memo=None) -> dict:
    """A node's local derivatives and incoming gradient, each capped at ``TERMS``.

    ``memo`` (a dict), shared by the calls for one display, keeps each node's local
    derivatives: a drawn node's are read again for each of its drawn parents.
    """
    nodes = trace.nodes
    node = nodes[index]
    local_lines = []
    parents = node.parents
    memo = {} if memo is None else memo

    def local_of(n):  # (computed from the snapshot when read: read once)
        i = n.index
        if i not in memo:
            memo[i] = n.local
        return memo[i]

    if parents:
        local = local_of(node)
        if local is None:
            local_lines.append(
                f"the Jacobian of {render.op_symbol(trace, index)} "
                "(tensor ops record no local derivative)"
            )
        else:
            name = node.name
            local_lines = [
                f"∂{name}/∂{operand_name(trace, p, fold)} = {render.fmt(d, 6)}"
                for p, d in zip(parents, local)
            ]
    if index == trace.target.index:
        incoming = [f"the target: its gradient is the seed {render.fmt(node.grad)}"]
    else:
        incoming = []  # the first TERMS terms; a reused node's other uses are only counted
        for c in dict.fromkeys(children[index]):
            if len(incoming) >= TERMS:
                break
            child = nodes[c]
            local = local_of(child)
            if local is None:
                incoming.append(f"from {child.name} (tensor op)")
                continue
            grad, name = render.fmt(child.grad, 6), child.name
            for p, d in zip(child.parents, local):
                if p == index:
                    incoming.append(f"{grad} × {render.fmt(d, 6)} from {name}")
        total = max(len(incoming), render.use_count(children, index))  # one term per use
        return {
            "local": _capped(local_lines),
            "incoming": {"items": incoming[:TERMS], "more": total - len(incoming[:TERMS])},
        }
    return {"local": _capped(local_lines), "incoming": _capped(incoming)}


def _flag_words(node, status) -> str:
    return ", ".join(_flags(node, status))


def _node_entry(trace, i, fold, status, numbers) -> dict:
    """A drawn node's entry, without its explanation (:func:`_explained`); ``numbers`` are
    its data and grad written short and whole (:func:`_numbers`)."""
    node = trace.nodes[i]
    parents, shape = node.parents, node.shape
    data, grad, data_full, grad_full = numbers
    return {
        "name": node.name,
        "label": node.label,
        "op": render.op_label(trace, i, fold) if parents else "",
        "shape": render.dims(shape) if shape is not None else "",
        "data": data,
        "grad": grad,
        "dataFull": data_full,
        "gradFull": grad_full,
        "parents": [int(p) for p in parents if p not in fold],
        "leaf": bool(node.is_leaf),
        "flags": _flags(node, status.get(i)),
    }


def _numbers(trace, rows) -> list:
    """Each row's (data, grad, whole data, whole grad) as the entries write them, a column
    at a time (:func:`~gradmagic.views.formatting.column_figures`)."""
    columns = [
        render.column_figures(trace, rows, c, w) for w in (False, True) for c in ("data", "grad")
    ]
    return list(zip(*columns))


def use_counts(trace) -> list:
    """How many times each node is used as an input (``a + a``: twice), from the columns."""
    parents = np.concatenate([trace.parent_a, trace.parent_b])
    return np.bincount(parents[parents >= 0], minlength=trace.n).tolist()


def _steps(trace, drawn, fold, children=None, limit=STEP_LIMIT) -> dict:
    """The backward pass, step by step, for the stepper.

    Each step names the node processed, its gradient and its terms (capped)
    ``parent += grad × local = product`` with the parent's running sum; its
    events set the grad fields of drawn nodes (``p`` partial or ``f``
    final). Running sums are the recorded products added up in order; a final
    gradient is always the recorded one. (``children``, if given, counts the uses;
    else :func:`use_counts` does.)
    """
    nodes = trace.nodes
    order = backward_steps(trace)
    remaining = use_counts(trace) if children is None else [len(c) for c in children]
    names = teaching.expressions(trace)  # an unnamed node as people write it: tanh(n), x·w
    sofar: dict[int, float] = {}  # node → the sum of the terms of its gradient so far
    out = []
    for c in order[:limit]:
        node = nodes[c]
        local = node.local
        terms, events = _step_terms(trace, node, remaining, sofar, fold, drawn, names)
        out.append(
            {
                "n": int(c),
                "name": names[c],
                "op": render.op_label(trace, c, fold),
                "grad": render.fmt(node.grad),
                "tensor": local is None,
                "inputs": [names[p] for p in node.parents if p not in fold][:TERMS],
                "rule": rule_text(trace, c, fold),
                **_capped(terms),
                "ev": events,
            }
        )
    note = (
        f"Stepping covers the first {limit:,} of {len(order):,} steps."
        if len(order) > limit
        else ""
    )
    return {"steps": out, "total": len(order), "note": note}


def _step_terms(trace, node, remaining, sofar, fold, drawn, names) -> tuple:
    """(terms, events) of one backward step: ``parent += grad × local = product`` and the
    parent's running sum, and the drawn parents' grad fields set (``p`` partial, ``f``
    final); ``remaining`` counts each node's uses still to come, ``sofar`` its sum."""
    nodes, local = trace.nodes, node.local
    terms, events = [], []
    for j, p in enumerate(node.parents):
        remaining[p] -= 1
        if p in fold:
            continue
        final = remaining[p] == 0
        if local is not None:
            term = node.grad * local[j]
            sofar[p] = term if p not in sofar else sofar[p] + term
            terms.append(
                [
                    names[p],
                    render.fmt(node.grad),
                    render.fmt(local[j]),
                    render.fmt(term),
                    render.fmt(nodes[p].grad if final else sofar[p]),
                    1 if final else 0,
                ]
            )
        if p in drawn:
            if final:
                events.append([int(p), render.figure(nodes[p].grad), "f"])
            elif local is not None:
                events.append([int(p), render.figure(sofar[p]), "p"])
    return terms, events


def _table(
    header,
    rows,
    *,
    classes=None,
    keys=None,
    note="",
    head=(),
    magnitude=(),
    descending=(),
    wrap=(),
) -> dict:
    """A live table. The front-end sorts a column by a click on its header: by ``keys``
    (row → one key per column) where a row has them, else columns in ``magnitude`` by the
    absolute value of the number written (nan and inf largest), other columns of numbers by
    value, the rest as text; a first click sorts the columns in ``descending`` largest first.
    The columns in ``wrap`` are words that wrap onto more lines rather than widen the table."""
    return {
        "wrap": list(wrap),
        "columns": list(header),
        "rows": rows,
        "classes": classes or [],
        "keys": keys or {},
        "magnitude": list(magnitude),
        "descending": list(descending),
        "note": note,
        "head": list(head),
    }


def _gradient_rows_shown(trace) -> list:
    """The nodes of the Gradients table: all of a small graph's; a big graph's target, its
    inputs, then the nodes nearest the target. In graph order, the target first."""
    target = trace.target.index
    leaves = trace.leaf_index
    ins = leaves[~trace.constant[leaves]][:TABLE_ROWS].tolist()
    keep = dict.fromkeys([target] + ins)
    for i in range(target, max(-1, target - 2 * TABLE_ROWS - 1), -1):
        if len(keep) >= TABLE_ROWS:
            break
        keep.setdefault(i)
    return sorted(list(keep)[:TABLE_ROWS], reverse=True)


def _gradient_rows(trace, shown, fold, status) -> list:
    """The table's cells, built a column at a time from the trace's columns: no Python work
    per cell beyond the formatting (a 500-row table is most of a small run's display)."""
    index = np.asarray(shown, dtype=np.intp)
    names = trace.label_names
    at = shown.index(trace.target.index)
    labels = [names[c] for c in trace.label_code[index].tolist()]
    labels[at] = labels[at] or "(target)"
    ops = [
        op if code >= 0 else "constant" if c else "leaf"
        for op, code, c in zip(
            render.op_labels(trace, shown, fold),
            trace.op_code[index].tolist(),
            trace.constant[index].tolist(),
        )
    ]
    tensors = trace.tensor_data
    shapes = [render.dims(tensors[i].shape) if i in tensors else "" for i in shown]
    columns = (
        map(str, shown),
        labels,
        ops,
        shapes,
        render.column_text(trace, shown, "data"),
        render.column_text(trace, shown, "grad"),
        render.flags_text(trace, shown, status, _flag_words),
    )
    return [list(row) for row in zip(*columns)]


def _gradients_tab(trace, report, context) -> dict:
    shown = _gradient_rows_shown(trace)
    status = render.statuses(report)
    rows = _gradient_rows(trace, shown, context["fold"], status)
    target = trace.target.index
    failed = ("fail", "error")
    classes = [
        "fail" if status.get(i) in failed else "target" if i == target else "" for i in shown
    ]
    # the data and grad columns sort by magnitude: the front-end reads it from the number
    # written; an array's (its largest |element|) and an exact int's are sent with the row
    tensors = trace.tensor_data
    keys: dict[int, list[float | None]] = {
        k: [
            None,
            None,
            None,
            None,
            _finite_key(render.magnitude(trace._data(i))),
            _finite_key(render.magnitude(trace._grad(i))),
            None,
        ]
        for k, i in enumerate(shown)
        if i in tensors or i in trace.exact
    }
    more = trace.n - len(shown)
    note = f"and {more:,} more nodes (gradmagic.last.nodes has them all)" if more > 0 else ""
    return {
        "id": "gradients",
        "title": "Gradients",
        "kind": "table",
        "payload": _table(
            ["#", "label", "op", "shape", "data", "grad", "flags"],
            rows,
            classes=classes,
            keys=keys,
            note=note,
            magnitude=(4, 5),
            descending=(0, 4, 5),
        ),
    }


def _finite_key(k: float) -> float:
    """A magnitude as JSON can carry it: inf (and nan, which ``_magnitude`` makes inf) as the
    largest double."""
    return k if math.isfinite(k) else 1e308


def _check_tab(trace, report, context) -> dict | None:
    torch = context.get("torch")
    if report is None:
        text = (
            "The numerical check was skipped (--no-check); run gradmagic.last.check() "
            "to compute it."
        )
        said = f"<p>{html.escape(text)}</p>" + ("" if torch is None else render.torch_html(torch))
        return {"id": "check", "title": "Check", "kind": "html", "payload": {"html": said}}
    header, rows, status = verdict_rows(report, TABLE_ROWS, torch)
    classes = [st if st != "pass" else "" for st in status]
    head = render.report_head(report)
    if torch is not None:
        head.append(torch.verdict)
    note = (
        f"and {len(report.rows) - TABLE_ROWS:,} more rows (report.rows has them all)"
        if len(report.rows) > TABLE_ROWS
        else ""
    )
    return {
        "id": "check",
        "title": "Check",
        "kind": "table",
        # (the name wraps too: in a narrow output both fit beside each other)
        "payload": _table(header, rows, classes=classes, note=note, head=head, wrap=[0, 1]),
    }


def _answers_tab(trace, report, context) -> dict | None:
    expected = context.get("expected")
    if expected is None:
        return None
    header, rows = render.answer_rows(expected, TABLE_ROWS)
    classes = ["ok" if row[0] == "✓" else "fail" for row in rows]
    return {
        "id": "answers",
        "title": "Answers",
        "kind": "table",
        "payload": _table(header, rows, classes=classes, head=render.answers_head(expected)),
    }


def _training_tab(trace, report, context) -> dict | None:
    steps = getattr(trace, "steps", None) or []  # a learner's training loop: loss per step
    if len(steps) < 2:
        return None
    html = render.steps_svg(steps)
    return {"id": "training", "title": "Training", "kind": "html", "payload": {"html": html}}


def _own_tab(trace, report, context) -> dict | None:
    own = getattr(trace, "own_graph", None)  # a learner's engine: their graph, as they draw it
    if not own or not own["nodes"]:
        return None
    dots = {d: render.own_dot(own, d) for d in ("LR", "TB")}
    payload = {"dot": dots["LR"], "dots": dots, "note": render.own_note(own)}
    return {"id": "yours", "title": "Your graph", "kind": "picture", "payload": payload}


def _graph_tab(trace, report, context) -> dict:
    return {"id": "graph", "title": "Graph", "kind": "graph", "payload": {}}


def _backward_tab(trace, report, context) -> dict:
    return {
        "id": "backward",
        "title": "Backward",
        "kind": "backward",
        "payload": _steps(trace, context["drawn"], context["fold"]),
    }


#: Makers of the widget's tabs, in order: ``(trace, report, context) -> tab | None``.
#: ``context`` has ``fold``, ``drawn``, ``children``, ``expected``, ``torch``.
TAB_MAKERS = [
    _own_tab,
    _answers_tab,
    _training_tab,
    _graph_tab,
    _gradients_tab,
    _check_tab,
    _backward_tab,
    *teaching.TABS,
]  # Forward, Walk, Paths (views/teaching.py)

#: Tabs the live view computes when they are first opened (maker → (id, title, when): ``when(trace)`` says whether to defer it, None: always): their cost grows
#: with the graph (every backward step, forward-mode passes, the walk, the paths), so a
#: display makes only their buttons. The view asks the kernel for one when it is opened and
#: keeps the answer in its state (``opened``), so a saved notebook keeps what was opened.
#: A run of at most ``EAGER_NODES`` nodes gets them all at once.
DEFERRED: dict[Callable[..., Any], tuple[str, str, Callable[[Any], bool] | None]] = {
    _backward_tab: ("backward", "Backward", None),
    **teaching.DEFERRED,
}
EAGER_NODES = 30  # textbook-sized runs: every tab at once (about 5-10 ms of teaching views)


class _Context(dict):
    """What the tab makers share: ``fold``, ``drawn``, ``children``, ``expected``, ``torch``.

    ``fold`` and ``children`` are made when first read (a deferred tab reads them, the
    eager ones mostly do not).
    """

    def __init__(self, trace, drawn, fold=None, **rest):
        super().__init__(drawn=drawn, **rest)
        self._trace = trace
        if fold is not None:
            self["fold"] = fold

    def __missing__(self, key):
        if key == "fold":
            value = render.Folded(self._trace)
        elif key == "children":
            value = children_of(self._trace)
        else:
            raise KeyError(key)
        self[key] = value
        return value


def payload(trace, report=None, *, expected=None, torch=None, run: str = "") -> dict:
    """Everything the front-end shows of a run, as JSON-able data (no live nodes).

    Every tab is computed (the live view defers some, see :data:`DEFERRED`).
    """
    return _payload(trace, report, expected=expected, torch=torch, run=run, defer=False)[0]


def _payload(
    trace,
    report=None,
    *,
    expected=None,
    torch=None,
    run: str = "",
    defer=True,
    summary=render._SUMMARISE,
    fold=None,
    dot=None,
    dots=None,
    gradients=None,
) -> tuple:
    """(payload, deferred): ``deferred`` maps a tab id to ``make(trace) -> tab`` for the
    tabs left out of the payload (their entries say ``"deferred": true``). ``gradients`` is
    the Gradients tab when the caller made it (the static copy shows the same table)."""
    if summary is render._SUMMARISE:
        summary = grouped.summarise(trace)
    fold = render.Folded(trace) if fold is None else fold
    drawn = render.drawn_nodes(trace, summary, fold)
    drawn_set = set(drawn)
    context = _Context(trace, drawn_set, fold=fold, expected=expected, torch=torch)
    defer = defer and trace.n > EAGER_NODES
    entries = _node_entries(trace, report, drawn, drawn_set, fold, explained=not defer)
    if dot is None and summary is not None and summary.dot is not None:
        dot = summary.dot
    if dot is None:
        subset = summary.shown if summary else None
        ways = render.directions(trace, drawn)
        dots = {d: render.to_dot(trace, report, subset=subset, fold=fold, rankdir=d) for d in ways}
        dot = dots[ways[0]]
        dots = dots if len(ways) > 1 else None
    tabs, deferred = _tabs(trace, report, context, defer, gradients)
    if defer:
        deferred["node"] = _explainer(drawn, fold)
    data = {
        "run": run,  # the static copy shown with this view hides itself (render.static_style)
        "headline": render.headline(trace),
        "notes": render.run_notes(trace, report),
        "target": int(trace.target.index),
        "dot": dot,
        # a small graph in both directions: the front-end shows the one that fits its width
        "dots": dots,
        "summary": None
        if summary is None
        else {
            "counts": summary.counts,
            "note": f"{summary.note} {summary.hint}".strip(),
            "grouped": summary.dot is not None,
        },
        "nodes": entries,
        # a grouped picture's tables: the input of each ∇ cell, in the order they are drawn
        "cells": grouped.gradient_cells(trace, summary.groups.params)
        if summary is not None and summary.groups is not None
        else None,
        "order": sorted(drawn, reverse=True),  # graph order: the target first
        "tabs": tabs,
    }
    return data, deferred


def _node_entries(trace, report, drawn, drawn_set, fold, explained=True) -> dict:
    """The drawn nodes' entries by their index (as a string), their parents among them;
    each with its explanation where ``explained`` (else the view asks for it on a click:
    :func:`_explainer`)."""
    status = render.statuses(report)
    entries = {}
    for i, numbers in zip(drawn, _numbers(trace, drawn)):
        entry = _node_entry(trace, i, fold, status, numbers)
        entry["parents"] = [p for p in entry["parents"] if p in drawn_set]
        entries[str(i)] = entry
    if explained:
        children = render.children_among(trace, drawn, cap=2 * TERMS)
        memo: dict[int, Any] = {}  # each drawn node's local derivatives, read once
        for i in drawn:
            entries[str(i)].update(_explained(trace, i, children, fold, memo))
    return entries


def _explained(trace, i, children, fold, memo=None) -> dict:
    """What the side panel says of a selected node: :func:`explain` and its rule."""
    return {"rule": rule_text(trace, i, fold), **explain(trace, i, children, fold, memo)}


def _explainer(drawn, fold):
    """What the live view asks when a node is selected: :func:`_explained`, None for a node
    not drawn."""
    drawn_set = set(drawn)

    def make(trace, node: str):
        i = int(node) if node.isdigit() else -1
        if i not in drawn_set:
            return None
        return _explained(trace, i, render.children_among(trace, [i], cap=2 * TERMS), fold)

    return make


def _tabs(trace, report, context, defer: bool, gradients) -> tuple:
    """(tabs, deferred): every tab of :data:`TAB_MAKERS`, or its button where ``defer``."""
    tabs, deferred = [], {}
    for make in TAB_MAKERS:
        ident, title, when = DEFERRED.get(make, ("", "", None))
        if defer and ident and (when is None or when(trace)):
            deferred[ident] = _deferred(make, context["drawn"])
            tabs.append({"id": ident, "title": title, "kind": "deferred", "payload": None})
            continue
        tab = (
            gradients
            if make is _gradients_tab and gradients is not None
            else make(trace, report, context)
        )
        if tab:
            tabs.append(tab)
    return tabs, deferred


def _deferred(make, drawn):
    """A deferred tab's maker: it keeps the drawn nodes, not the trace."""

    def tab(trace):
        return make(trace, None, _Context(trace, drawn))

    return tab
