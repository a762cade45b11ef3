"""The live view of a run (an anywidget drawn in the browser) and the display bundle.

:class:`TraceWidget` is an `anywidget <https://anywidget.dev>`_ whose front-end
(``static/widget.js``, built from ``js/src/widget.js``) lays the graph out with
the WebAssembly build of Graphviz (``static/viz.js.gz``, from ``@viz-js/viz``):
no system ``dot`` binary and nothing fetched at run time. It works wherever
Jupyter widgets do (JupyterLab, Notebook 7, VS Code, Colab).

The widget holds no Trace: :func:`payload` turns a run into a compact,
JSON-able description (the DOT text, the drawn nodes' short and full values,
explanations, tables and the backward steps, each capped), and everything
interactive happens in the browser:

* click a node (or pick it in the list): its path to the target is
  highlighted and the side panel shows its local derivatives and the
  gradient flowing into it; hovering a node shows its full value;
* pan (drag) and zoom (buttons, ``+``/``-``/``0`` keys, ctrl + wheel), fitted to the
  view at first but never below 10 px text;
* **Backward**: previous/next buttons, ``←``/``→`` keys and a slider step through
  the backward pass, with the running sum of each gradient;
* tables are bounded, scroll, and sort by a click on a column's header.

The tabs are a list (:data:`TAB_MAKERS`), each tab a ``{"id", "title",
"kind", "payload"}`` dict; the front-end draws kinds ``graph``, ``table``,
``html``, ``backward`` and ``steps``. Another view adds a tab by appending a maker
``(trace, report, context) -> tab | None``: :mod:`gradmagic.views.teaching` adds
**Forward**, **Walk** and **Paths** (``steps`` tabs: forward mode pass by pass,
micrograd's ``build_topo`` event by event, each path of the chain rule).

:func:`mimebundle` is what IPython shows for a Trace: the widget, and before
it a static copy (an ``<img>`` of the SVG and bounded tables, see
:func:`gradmagic.views.render.static_html`) that survives untrusted notebooks,
``nbconvert --to html`` with no network and a notebook reopened without widget
state; the live view hides it once drawn.
"""

from __future__ import annotations

import html
import json
import math
import re
import secrets
import weakref
from collections import OrderedDict
from functools import lru_cache
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from . import grouped, render, teaching
from ..analysis import torchcheck
from ..analysis.graph import backward_steps, children_of
from ..analysis.groups import Grouping

__all__ = [
    "TraceWidget",
    "mimebundle",
    "static_bundle",
    "payload",
    "TAB_MAKERS",
    "WIDGET_MIME",
    "STATIC",
]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STATIC = Path(__file__).with_name("static")
TERMS = 8  # terms of an explanation before "and N more"
STEP_LIMIT = 2000  # backward steps the stepper carries
TABLE_ROWS = 500  # rows of a live table


class SvgCache(OrderedDict):
    """DOT source → SVG, keeping the ``size`` most recently used drawings."""

    def __init__(self, size: int = 32):
        super().__init__()
        self.size = size

    def __getitem__(self, key):
        value = super().__getitem__(key)
        self.move_to_end(key)
        return value

    def get(self, key, default=None):
        return self[key] if key in self else default

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


# =========================================================================== the payload
def _capped(items: list, limit: int = TERMS) -> dict:
    """At most ``limit`` items and how many were left out ("and N more")."""
    return {"items": items[:limit], "more": max(0, len(items) - limit)}


_LETTER = re.compile(r"(?<![A-Za-z_])([ab])(?![A-Za-z_])")


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
    names = _Letters(a=operand_name(trace, parents[0], fold))
    if len(parents) == 2:
        names["b"] = operand_name(trace, parents[1], fold)
    return _template(rule).format_map(names)


class _Letters(dict):
    """The operands' names by letter; a letter with no operand stays itself."""

    def __missing__(self, key):
        return key


@lru_cache(maxsize=256)
def _template(rule: str) -> str:
    """A rule with its letters ``a`` and ``b`` as format fields (made once per rule)."""
    return _LETTER.sub(lambda m: "{" + m.group(1) + "}", rule.replace("{", "{{").replace("}", "}}"))


def _flags(node, status) -> list:
    flags = []
    if node.kink:
        flags.append("kink: a subgradient was used")
    if not node.finite:
        flags.append("nan or infinite")
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


def _node_entry(trace, i, children, fold, status, memo=None) -> dict:
    node = trace.nodes[i]
    data, grad, parents, shape = node.data, node.grad, node.parents, node.shape
    return {
        "name": node.name,
        "label": node.label,
        "op": render.op_label(trace, i, fold) if parents else "",
        "shape": render.dims(shape) if shape is not None else "",
        "data": render.figure(data),
        "grad": render.figure(grad),
        "dataFull": render.full(data),
        "gradFull": render.full(grad),
        "parents": [int(p) for p in parents if p not in fold],
        "leaf": bool(node.is_leaf),
        "rule": rule_text(trace, i, fold),
        "flags": _flags(node, status.get(i)),
        **explain(trace, i, children, fold, memo),
    }


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
    sofar = {}
    out = []
    for c in order[:limit]:
        node = nodes[c]
        local = node.local
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
                        operand_name(trace, p),
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
        out.append(
            {
                "n": int(c),
                "name": node.name,
                "op": render.op_label(trace, c, fold),
                "grad": render.fmt(node.grad),
                "tensor": local is None,
                "inputs": [operand_name(trace, p) for p in node.parents if p not in fold][:TERMS],
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


def _table(
    header, rows, *, classes=None, keys=None, note="", head=(), magnitude=(), descending=()
) -> dict:
    """A live table. The front-end sorts a column by a click on its header: by ``keys``
    (row → one key per column) where a row has them, else columns in ``magnitude`` by the
    absolute value of the number written (nan and inf largest), other columns of numbers by
    value, the rest as text; a first click sorts the columns in ``descending`` largest first."""
    return {
        "columns": list(header),
        "rows": rows,
        "classes": classes or [],
        "keys": keys or {},
        "magnitude": list(magnitude),
        "descending": list(descending),
        "note": note,
        "head": list(head),
    }


def _gradients_tab(trace, report, context) -> dict:
    total = trace.n
    target = trace.target.index
    # a big graph's table keeps the target, the inputs, then the nodes nearest the target
    leaves = trace.leaf_index
    ins = leaves[~trace.constant[leaves]][:TABLE_ROWS].tolist()
    keep = dict.fromkeys([target] + ins)
    for i in range(target, max(-1, target - 2 * TABLE_ROWS - 1), -1):
        if len(keep) >= TABLE_ROWS:
            break
        keep.setdefault(i)
    shown = sorted(list(keep)[:TABLE_ROWS], reverse=True)  # graph order: the target first
    status = render._failed(report)
    fold = context["fold"]
    # built a column at a time from the trace's columns: no Python work per cell beyond
    # the formatting (a 500-row table is most of a small run's display)
    index = np.asarray(shown, dtype=np.intp)
    names = trace.label_names
    at = shown.index(target)
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
    shapes = (
        [render.dims(tensors[i].shape) if i in tensors else "" for i in shown]
        if tensors
        else [""] * len(shown)
    )
    data = render.column_text(trace, shown, "data")
    grad = render.column_text(trace, shown, "grad")
    rows = list(
        map(
            list,
            zip(
                map(str, shown),
                labels,
                ops,
                shapes,
                data,
                grad,
                render.flags_text(trace, shown, status, _flag_words),
            ),
        )
    )
    classes = [""] * len(shown)
    classes[at] = "target"
    for k, i in enumerate(shown):
        if status.get(i) in ("fail", "error"):
            classes[k] = "fail"
    # the data and grad columns sort by magnitude: the front-end reads it from the number
    # written; an array's (its largest |element|) and an exact int's are sent with the row
    keys = {
        k: [
            None,
            None,
            None,
            None,
            _finite_key(render._magnitude(trace._data(i))),
            _finite_key(render._magnitude(trace._grad(i))),
            None,
        ]
        for k, i in enumerate(shown)
        if i in tensors or i in trace.exact
    }
    note = (
        f"and {total - len(shown):,} more nodes (gradmagic.last.nodes has them all)"
        if total > len(shown)
        else ""
    )
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
        if torch is None:
            return {
                "id": "check",
                "title": "Check",
                "kind": "html",
                "payload": {"html": f"<p>{html.escape(text)}</p>"},
            }
        return {
            "id": "check",
            "title": "Check",
            "kind": "html",
            "payload": {"html": f"<p>{html.escape(text)}</p>" + render.torch_html(torch)},
        }
    header, rows = render._report_rows(report, TABLE_ROWS, torch)
    classes = [row[-2] if row[-2] != "pass" else "" for row in rows]
    head = render._report_head(report)
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
        "payload": _table(header, rows, classes=classes, note=note, head=head),
    }


def _answers_tab(trace, report, context) -> dict | None:
    expected = context.get("expected")
    if expected is None:
        return None
    header, rows = render._answer_rows(expected, TABLE_ROWS)
    classes = ["ok" if row[0] == "✓" else "fail" for row in rows]
    return {
        "id": "answers",
        "title": "Answers",
        "kind": "table",
        "payload": _table(header, rows, classes=classes, head=render._answers_head(expected)),
    }


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
    _answers_tab,
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
DEFERRED = {_backward_tab: ("backward", "Backward", None), **teaching.DEFERRED}
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
    children = render.children_among(trace, drawn, cap=2 * TERMS)
    status = render._failed(report)
    context = _Context(trace, drawn_set, fold=fold, expected=expected, torch=torch)
    entries = {}
    memo = {}  # each drawn node's local derivatives, read once
    for i in drawn:
        entry = _node_entry(trace, i, children, fold, status, memo)
        entry["parents"] = [p for p in entry["parents"] if p in drawn_set]
        entries[str(i)] = entry
    if dot is None and summary is not None and summary.dot is not None:
        dot = summary.dot
    if dot is None:
        subset = summary.shown if summary else None
        ways = render.directions(trace, drawn)
        dots = {d: render.to_dot(trace, report, subset=subset, fold=fold, rankdir=d) for d in ways}
        dot = dots[ways[0]]
        dots = dots if len(ways) > 1 else None
    defer = defer and trace.n > EAGER_NODES
    tabs, deferred = [], {}
    for make in TAB_MAKERS:
        if defer and make in DEFERRED and (DEFERRED[make][2] is None or DEFERRED[make][2](trace)):
            ident, title, _ = DEFERRED[make]
            deferred[ident] = _deferred(make, drawn_set)
            tabs.append({"id": ident, "title": title, "kind": "deferred", "payload": None})
            continue
        tab = (
            gradients
            if make is _gradients_tab and gradients is not None
            else make(trace, report, context)
        )
        if tab:
            tabs.append(tab)
    data = {
        "run": run,
        "headline": render.headline(trace),
        "notes": render.run_notes(trace, report),
        "target": int(trace.target.index),
        "dot": dot,
        # a small graph in both directions: the front-end shows the one that fits its width
        "dots": dots,
        "summary": None
        if summary is None
        else {"counts": summary.counts, "note": summary.note, "grouped": summary.dot is not None},
        "nodes": entries,
        "order": sorted(drawn, reverse=True),  # graph order: the target first
        "tabs": tabs,
    }
    return data, deferred


def _deferred(make, drawn):
    """A deferred tab's maker: it keeps the drawn nodes, not the trace."""

    def tab(trace):
        return make(trace, None, _Context(trace, drawn))

    return tab


# =========================================================================== the widget
_BASE = None


def _classes():
    """The widget classes, made on first use (anywidget is imported only then)."""
    global _BASE
    if _BASE is None:
        import anywidget
        import ipywidgets
        import traitlets
        from ipywidgets import widget_serialization

        class VizLibrary(anywidget.AnyWidget):
            """Graphviz for the browser (``static/viz.js.gz``), sent once per kernel.

            Every TraceWidget refers to this one model, so the module is sent
            (and saved with widget state) once, not with every run; ``code`` is
            it gzipped and base64-encoded (0.6 MB instead of 3 MB as JSON).
            """

            _esm = "export default { initialize() {} };"
            code = traitlets.Unicode("").tag(sync=True)

        fixed = _fixed_traits()

        class LiveView(anywidget.AnyWidget):
            _esm = STATIC / "widget.js"
            _css = STATIC / "widget.css"
            lib = traitlets.Instance(VizLibrary).tag(sync=True, **widget_serialization)
            # the payload as one JSON string: a displayed run keeps a few hundred kB, not
            # megabytes of small Python objects (ipywidgets keeps every widget alive)
            data = traitlets.Unicode("{}").tag(sync=True)
            # the deferred tabs made so far (tab id → tab), as JSON: kept with the widget's
            # state, so a saved notebook shows the tabs that were opened
            opened = traitlets.Unicode("{}").tag(sync=True)
            selected = traitlets.Int(-1).tag(sync=True)
            step = traitlets.Int(0).tag(sync=True)
            tab = traitlets.Unicode("").tag(sync=True)

            if fixed:
                # anywidget's own synced traits, declared here once: AnyWidget.__init__ adds
                # them to each instance, which makes a new class per widget (0.3 ms of a
                # 6 ms display); __init__ below then skips it
                _esm = traitlets.Unicode((STATIC / "widget.js").read_text("utf-8")).tag(sync=True)
                _css = traitlets.Unicode((STATIC / "widget.css").read_text("utf-8")).tag(sync=True)
                _anywidget_id = traitlets.Unicode(f"{__name__}.LiveView").tag(sync=True)

            def __init__(self, *args, source=None, deferred=None, grouped_view=None, **kwargs):
                if fixed:
                    ipywidgets.DOMWidget.__init__(self, *args, **kwargs)
                else:
                    super().__init__(*args, **kwargs)
                # the run, weakly (Out[] and gradmagic.last keep it), and the makers of the
                # deferred tabs: the widget never keeps a trace alive
                self._source = source
                self._deferred = dict(deferred or {})
                self._grouped = grouped_view
                if self._deferred or grouped_view:
                    self.on_msg(self._on_msg)

            def _on_msg(self, widget, content, buffers):
                if isinstance(content, dict) and content.get("type") == "open":
                    self.open_tab(str(content.get("tab", "")))

            def open_group(self, gid: str) -> dict | None:
                """Open the group ``gid`` of a picture grouped by the code: the new picture's
                DOT and its opened groups go into ``opened["graph"]`` (kept with the widget's
                state, so a saved notebook shows the groups that were opened)."""
                trace = self._source() if self._source is not None else None
                if not self._grouped or trace is None:
                    return None
                opened = json.loads(self.opened)
                graph = opened.get("graph") or {"id": "graph", "groups": self._grouped}
                groups = set(graph["groups"])
                if gid in groups:
                    return graph
                grouping = Grouping(trace)
                try:
                    grouping.group(gid)
                except (ValueError, IndexError, KeyError):  # not a group of this run
                    return None
                groups.add(gid)
                graph = {
                    "id": "graph",
                    "groups": sorted(groups),
                    "dot": grouped.grouped_dot(trace, grouping, groups),
                }
                opened["graph"] = graph
                self.opened = json.dumps(opened, separators=(",", ":"))
                return graph

            def open_tab(self, ident: str) -> dict | None:
                """Make the deferred tab ``ident`` and add it to ``opened`` (once)."""
                if ident.startswith("group:"):
                    return self.open_group(ident[len("group:") :])
                opened = json.loads(self.opened)
                if ident in opened:
                    return opened[ident]
                make = self._deferred.get(ident)
                if make is None:
                    return None
                trace = self._source() if self._source is not None else None
                if trace is None:
                    tab = {
                        "id": ident,
                        "kind": "html",
                        "payload": {
                            "html": (
                                "<p>This run is no longer in memory (the kernel restarted, or "
                                "<code>Out</code> and <code>gradmagic.last</code> no longer hold it): "
                                "run the cell again to see this view.</p>"
                            )
                        },
                    }
                else:
                    try:
                        tab = make(trace) or {
                            "id": ident,
                            "kind": "html",
                            "payload": {
                                "html": "<p>This view has nothing to show for this run.</p>"
                            },
                        }
                    except Exception as exc:  # noqa: BLE001 - a view must not break the kernel
                        tab = {
                            "id": ident,
                            "kind": "html",
                            "payload": {
                                "html": (
                                    f"<p>This view could not be made: {html.escape(str(exc))}</p>"
                                )
                            },
                        }
                    del self._deferred[ident]
                opened[ident] = tab
                self.opened = json.dumps(opened, separators=(",", ":"))
                return tab

        _BASE = (VizLibrary, LiveView)
    return _BASE


def _fixed_traits() -> bool:
    """Whether the installed anywidget names its synced traits ``_esm``, ``_css`` and
    ``_anywidget_id`` (0.11 does), so the live view can declare them once instead of per
    instance; with any other anywidget it is made the usual way."""
    try:
        from anywidget import _util

        return (_util._ESM_KEY, _util._CSS_KEY, _util._ANYWIDGET_ID_KEY) == (
            "_esm",
            "_css",
            "_anywidget_id",
        )
    except (ImportError, AttributeError):
        return False


def _keep_open(view) -> None:
    """Keep ``view``'s comm open when a front-end other than its own closes it.

    A browser page that is connected to the same kernel but shows no widgets (Notebook 7's
    file page, after its New menu started the notebook's kernel) answers every new widget's
    comm_open with a comm_close, for a target it does not know. The kernel then dropped the
    comm, and the page that does show the view sent its messages (a deferred tab asked for,
    a node selected) into nothing. Only the kernel side closes a view's comm (``close()``).
    """
    own = getattr(view, "comm", None)
    if own is None or not hasattr(own, "on_close"):
        return
    ref = weakref.ref(view)

    def reopen(msg):
        widget = ref()
        if widget is None or widget.comm is not own:
            return
        try:
            from comm import get_comm_manager

            own._closed = False
            get_comm_manager().register_comm(own)
        except Exception:  # noqa: BLE001 - another comm implementation: leave it closed
            pass

    own.on_close(reopen)


_LIBRARY = None


def _library():
    """The kernel's one VizLibrary (made again if it was closed)."""
    global _LIBRARY
    VizLibrary, _ = _classes()
    if _LIBRARY is None or _LIBRARY.comm is None:
        import base64

        code = (STATIC / "viz.js.gz").read_bytes()  # gzipped by the build, sent as it is
        _LIBRARY = VizLibrary(code=base64.b64encode(code).decode("ascii"))
        _keep_open(_LIBRARY)
    return _LIBRARY


def TraceWidget(trace, report=None, *, expected=None, torch=None, run: str = "", **parts):
    """The live view of a run: an anywidget holding :func:`payload` as JSON (not the trace).

    ``selected`` (a node index, -1 for none), ``step`` (of the backward pass)
    and ``tab`` (the shown tab's id) follow the browser both ways. The tabs in
    :data:`DEFERRED` are made when the browser first opens them (``opened``).
    ``parts`` (``summary``, ``fold``, ``dot``, ``gradients``) are what the caller already
    computed.
    """
    _, LiveView = _classes()
    data, deferred = _payload(trace, report, expected=expected, torch=torch, run=run, **parts)
    first = data["tabs"][0]["id"] if data["tabs"] else ""
    try:
        source = weakref.ref(trace)
    except TypeError:  # a trace that takes no weak references: kept
        source = lambda: trace  # noqa: E731
    summary = parts.get("summary")
    groups = getattr(summary, "groups", None)
    view = LiveView(
        lib=_library(),
        data=json.dumps(data, separators=(",", ":")),
        tab=first,
        source=source,
        deferred=deferred,
        grouped_view=sorted(groups.opened_by_default()) if groups is not None else None,
    )
    _keep_open(view)
    return view


# =========================================================================== the bundle
def _analyses(trace):
    report, problems = None, []
    if not trace.options.no_check:
        try:
            report = trace.check()
        except Exception as exc:  # noqa: BLE001 - a display must not raise
            problems.append(f"The numerical check could not run: {exc}")
    expected = None
    mapping = trace.options.expect
    if isinstance(mapping, (Mapping, list, tuple)) and mapping:
        try:
            expected = trace.expect(mapping)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"The expected answers could not be compared: {exc}")
    torch = torchcheck.compare(trace) if trace.options.torch else None
    return report, expected, torch, problems


def static_bundle(
    trace,
    report=None,
    *,
    expected=None,
    torch=None,
    problems=(),
    run: str = "",
    cache=None,
    **parts,
) -> dict:
    """The run without a widget front-end: ``text/html`` (an SVG image, tables) and text."""
    return {
        "text/plain": "\n".join(
            [render.text(trace, report, expected=expected, torch=torch)]
            + [f"! {p}" for p in problems]
        ),
        "text/html": "".join(f"<p>⚠ {html.escape(p)}</p>" for p in problems)
        + render.static_html(
            trace,
            report,
            expected=expected,
            torch=torch,
            cache=SvgCache() if cache is None else cache,
            run=run,
            **parts,
        ),
    }


class _Drawing(SvgCache):
    """An SVG cache whose one drawing ``dot`` is making while the rest of the display is built.

    The graph is handed to the kernel's ``dot`` process (:func:`gradmagic.views.render.svg`)
    first and its answer read when the static copy needs the picture: dot's 1-15 ms run
    beside the Python work instead of after it.
    """

    def __init__(self, source: str, known=None):
        super().__init__()
        self.source = source
        if known is not None and source in known:
            self[source] = known[source]
            self._job = None
        else:
            self._job = render._DOT.submit(source)

    def get(self, key, default=None):
        if key == self.source and self._job is not None:
            job, self._job = self._job, None
            image = render._DOT.collect(job)
            if image is not None:  # else the static copy asks dot again and says why
                self[key] = image
        return super().get(key, default)


def mimebundle(trace, publish=None) -> dict:
    """The display of a run: the live view and its static copy.

    With ``publish(bundle)`` (what :mod:`gradmagic.views.display` passes: the
    shell's display publisher) the static copy (``text/html`` and the text a terminal
    prints) is shown first as its own output and the returned bundle holds the widget
    and a one-line ``text/plain`` (:func:`one_line`): that way nbconvert, an untrusted
    notebook or a notebook reopened without widget state shows the copy once, and a
    live view hides it. Without
    ``publish`` one bundle holds all three. Without anywidget the static bundle is
    returned whole and nothing is published.

    The graph's DOT is made once; ``dot`` draws the static copy's picture in its
    own process while the check runs and the live view's payload is built. The
    picture is handed to ``dot`` before the check: the check's verdicts colour a
    node only when it fails (or sits on a kink), and only then is it drawn again.
    """
    summary = grouped.summarise(trace)
    fold = render.Folded(trace)
    subset = summary.shown if summary else None
    drawn = render.drawn_nodes(trace, summary, fold)
    ways = render.directions(trace, drawn)
    known = SvgCache()
    if summary is not None and summary.dot is not None:  # grouped by the code: left to right
        dot, ways = summary.dot, ("LR",)
    elif len(ways) > 1:  # a small graph: both directions drawn (a few ms), the fitting one kept
        dot = render.choose_dot(trace, None, subset=subset, fold=fold, cache=known)
    else:
        dot = render.to_dot(trace, None, subset=subset, fold=fold, rankdir=ways[0])
    rankdir = "TB" if "rankdir=TB" in dot[:120] else "LR"
    drawing = _Drawing(dot, known)
    report, expected, torch, problems = _analyses(trace)
    marked = [i for i, status in render._failed(report).items() if status in render.MARKED]
    if marked and summary is not None and summary.groups is not None:
        opened = summary.groups.opened_by_default()
        dot = summary.dot = grouped.grouped_dot(trace, summary.groups, opened, report)
        drawing = _Drawing(dot)
    elif marked and not set(marked).isdisjoint(drawn):
        dot = render.to_dot(trace, report, subset=subset, fold=fold, rankdir=rankdir)
        drawing = _Drawing(dot)
    dots = (
        {
            d: (
                dot
                if d == rankdir
                else render.to_dot(trace, report, subset=subset, fold=fold, rankdir=d)
            )
            for d in ways
        }
        if len(ways) > 1
        else None
    )
    run = secrets.token_hex(8)
    # the Gradients table, made once for the live view and its static copy
    gradients = _gradients_tab(trace, report, {"fold": fold})
    try:
        view = TraceWidget(
            trace,
            report,
            expected=expected,
            torch=torch,
            run=run,
            summary=summary,
            fold=fold,
            dot=dot,
            dots=dots,
            gradients=gradients,
        )
    except ImportError:  # anywidget is not installed: the static view stands alone
        view = None
    static = static_bundle(
        trace,
        report,
        expected=expected,
        torch=torch,
        problems=problems,
        run=run,
        cache=drawing,
        summary=summary,
        fold=fold,
        dot=dot,
        gradients=gradients["payload"],
    )
    if view is None:
        return static
    bundle = view._repr_mimebundle_()
    bundle = dict(bundle[0] if isinstance(bundle, tuple) else bundle)
    if publish is None:
        return {**static, WIDGET_MIME: bundle[WIDGET_MIME]}
    publish(static)
    return {WIDGET_MIME: bundle[WIDGET_MIME], "text/plain": one_line(trace, report, expected)}


def one_line(trace, report=None, expected=None) -> str:
    """The live view's ``text/plain``: the run in one line (its static copy, shown just before,
    has the tables), so an export without widget state does not show the run twice."""
    words = [render.headline(trace)]
    for verdict in (expected, report):
        if verdict is not None:
            words.append(("✓ " if verdict.passed else "✗ ") + verdict.verdict)
    return "  ·  ".join(words)
