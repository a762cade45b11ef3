"""How a recorded PyTorch run shows: its static page and text, and the live view's payload.

A PyTorch run keeps its own module because its engine records something else than a
:class:`~gradmagic.analysis.trace.Trace`: statistics of each op's output (no value per node),
a graph laid out by ``nn.Module`` with repeated blocks folded
(:func:`gradmagic.analysis.torchgraph.layout`), and a backward pass of torch's own autograd
nodes. What is the same job as for the other runs is shared: the bundle and the live widget
(:mod:`gradmagic.views.widget`), the tables (:func:`gradmagic.views.tables.html_table`, the
live tables' shape), the static card, the answers and the graph's picture
(:mod:`gradmagic.views.render`).

Everything here reads the run's plain columns (no tensor, no torch import) and is bounded
whatever the model's size: the boxes by ``--max-nodes``, tables and lists by :data:`ROWS`,
the stepper by :data:`STEPS` nodes. What the live view does not send at first is asked for
by the browser (:func:`answer`): a module opened one level, a whole tensor (at most
:data:`SEND` numbers, numpy's summary beyond).
"""

from __future__ import annotations

import html
import math

import numpy as np

from ..analysis.torchgraph import layout, shown_name
from . import render
from .formatting import FILL, LINE
from .tables import html_table
from .tabs import _table

__all__ = ["payload", "answer", "to_dot", "html_view", "text_view", "mimebundle", "ROWS"]

ROWS = 100  # rows of a table or lines of a list before it is cut
STEPS = 1000  # backward nodes the stepper carries
SEND = 10_000  # numbers of a tensor sent when the browser asks for it whole
OPEN = 16  # modules the browser may ask to open at once
# text on white at 4.5:1 or more (WCAG AA): darker than the green and orange of the marks
PASS_TEXT, WARN_TEXT = "#166534", "#c2410c"
_GROUPS = ("module", "fold", "line")


def _g(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e4):
        return f"{x:.2e}"
    return f"{x:.4g}"


def _pct(x) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.3g}%"


def _shape(run, i) -> str:
    shape = run.shapes[i]
    return "×".join(map(str, shape)) if shape else "scalar"


def _status(run, k):
    check = (run.checks or {}).get("ops", {}).get(k)
    return check["status"] if check else None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


# ============================================================================ the graph
def to_dot(run, max_nodes: int | None = None, open=(), lay=None, ids=None) -> str:
    """DOT of the run's graph: ops as records (name, shape, value and gradient sizes),
    modules and folded blocks as boxes, parameters and inputs as leaves. ``lay``: the
    layout when the caller made it; ``ids``: box key → the DOT node's name (else the key)."""
    lay = layout(run, max_nodes or run.options.max_nodes, open) if lay is None else lay
    ids = ids or {}
    lines = [
        f"digraph torchrun {{ rankdir={run.options.rankdir or 'LR'}; "
        'node [fontname="Helvetica", fontsize=10, shape=box, style="rounded,filled", '
        'fillcolor="#ffffff"]; edge [color="#6b7280", arrowsize=0.6];'
    ]
    for key, box in lay.boxes.items():
        rows, colour, fill, width = _box(run, box)
        label = "\\n".join(render.escape_string(r) for r in rows if r)
        lines.append(
            f'"{ids.get(key, key)}" [label="{label}", color="{colour}", penwidth={width}, '
            f'fillcolor="{fill}"];'
        )
    lines += [f'"{ids.get(a, a)}" -> "{ids.get(b, b)}";' for a, b in lay.edges]
    lines.append("}")
    return "\n".join(lines)


def _box(run, box) -> tuple:
    """(rows, line colour, fill, line width) of one drawn box."""
    i = box.value
    head = shown_name(box.title)
    if box.kind == "op":
        name = run.names[i] and run.name_of(i)
        module = shown_name(run.op_modules[box.ops[0]])
        what = f"{module}: {head}" if module else head
        head = f"{name} = {what}" if name else what
    rows = [head, _shape(run, i) if i is not None else ""]
    if i is not None and not math.isnan(run.stats[i, 1]):
        rows.append(f"σ {_g(run.stats[i, 1])}  max|x| {_g(run.stats[i, 2])}")
    if i is not None and run.reached[i]:
        rows.append(f"∇ σ {_g(run.grad_stats[i, 1])}  max {_g(run.grad_stats[i, 2])}")
    if box.kind in _GROUPS:
        rows.append(f"{len(box.ops)} ops")
    statuses = [_status(run, k) for k in box.ops]
    words = list(run.health.get("marks", {}).get(i, [])) if i is not None else []
    colour, fill, width = LINE["plain"], FILL["value"], 1
    if box.kind == "leaf":
        fill = FILL["leaf"] if run.requires_grad[i] else FILL["constant"]
    elif box.kind in _GROUPS:
        fill = "#ecfdf5" if box.kind != "fold" else "#d1fae5"
    if i == run.target:
        fill = FILL["target"]
    if "fail" in statuses:
        colour, width = LINE["fail"], 3
        bad = [run.ops[k].name for k, s in zip(box.ops, statuses) if s == "fail"]
        words.insert(0, f"gradient wrong: {', '.join(dict.fromkeys(bad))}")
    elif any("nan" in w for w in words):
        colour, width = LINE["nonfinite"], 3
    elif words:
        colour, width = LINE["kink"], 2
    return rows + words[:3], colour, fill, width


def _graph_html(run, open=()) -> str:
    lay = layout(run, run.options.max_nodes, open)
    source = to_dot(run, lay=lay)
    try:
        image = render.svg(source)
    except Exception as exc:  # noqa: BLE001 - no Graphviz, or too slow: say so, keep the tables
        return render.graph_failure_html(exc, source)
    note = f"<p style='margin:2px 0'>{html.escape(lay.note)}</p>" if lay.note else ""
    return (
        note + f'<div style="overflow:auto; max-width:100%; max-height:'
        f'{render.GRAPH_HEIGHT}px"><img class="gradmagic-graph" alt="the computation '
        f'graph" style="max-width:none" src="{render.svg_data_uri(image)}"></div>'
    )


# ============================================================================ the words
def headline(run) -> str:
    how = (
        "no gradients (see the note)"
        if run.no_gradients
        else "gradients from the cell's own backward()"
        if run.backward_by_cell
        else "gradients from torch.autograd.grad (the cell's .grad left untouched)"
    )
    return (
        f"PyTorch run: target {run.name_of(run.target)} = {_g(run.value)}; "
        f"{_count(len(run.graph), 'op')}, {_count(len(run.params), 'parameter')}; {how}"
    )


def check_lines(run) -> list:
    """(status, text) lines of the numerical checks: the whole cell, then the ops."""
    if run.checks is None:
        return [("none", "Not checked (--no-check).")]
    out = [_whole_line(run.checks["whole"])]
    left = run.checks["whole"].get("left_out")
    if left:
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        out.append(
            (
                "none",
                f"Complex parameters left out of the whole-cell check: {', '.join(left[:5])}{more}.",
            )
        )
    ops = run.checks["ops"]
    counts: dict[str, int] = {}
    for r in ops.values():
        status = "alike" if "like" in r else r["status"]
        counts[status] = counts.get(status, 0) + 1
    said = ", ".join(_op_count(n, s) for s, n in sorted(counts.items()))
    out.append(
        (
            "fail" if counts.get("fail") else "pass",
            f"Each op's own gradient vs finite differences: {said}"
            if counts
            else "No op was checked on its own.",
        )
    )
    for k, r in ops.items():
        if r["status"] == "fail":
            op = run.ops[k]
            out.append(
                (
                    "fail",
                    f"line {op.line}: {op.name} -> {run.name_of(op.outputs[0])}: its backward "
                    f"gives {r['analytic']:.6g}, finite differences {r['numeric']:.6g}",
                )
            )
    return out + [("none", note) for note in run.checks.get("notes", [])]


def _whole_line(whole) -> tuple:
    if whole["status"] == "skipped":
        return ("none", f"Whole cell not checked: {whole['why']}.")
    return (
        whole["status"],
        "Whole cell, float64, one random direction: "
        f"analytic {whole['analytic']:.10g} vs numeric {whole['numeric']:.10g} "
        f"(relative error {whole['error']:.1e})",
    )


def _op_count(n: int, status: str) -> str:
    """``5 pass``, ``1 fails``, ``2 repeat an op checked``: a count of ops and what they did."""
    if status == "alike":
        return f"{n} repeat{'s' if n == 1 else ''} an op checked (and share its result)"
    if status == "fail":
        return f"{n} fail{'s' if n == 1 else ''}"
    return f"{n} {status}"


def health_lines(run) -> list:
    h, name = run.health, run.name_of
    out = []
    for what, word in (("value", "value"), ("grad", "gradient")):
        hit = h.get("nonfinite", {}).get(what)
        if hit:
            out.append(
                f"First nan/inf {word}: {hit['name']} at line {hit['line']} ({name(hit['value'])})"
            )
    for i, f in h.get("dead", {}).items():
        out.append(f"{name(i)}: {f:.0%} of its ReLU units are zero for every example")
    for i, f in h.get("saturated", {}).items():
        out.append(f"{name(i)}: {f:.0%} of its units are saturated for every example")
    for c in h.get("cuts", []):
        where = f" (line {c['line']})" if c.get("line") else ""
        out.append(f"{name(c['value'])} enters without its gradient: {c['how']}{where}")
    if h.get("unreached"):
        out.append("No gradient reached: " + ", ".join(name(i) for i in h["unreached"][:10]))
    if h.get("zero"):
        out.append("Gradient all zero: " + ", ".join(name(i) for i in h["zero"][:10]))
    if h.get("inplace"):
        out.append(f"{len(h['inplace'])} in-place write(s) in the graph")
    for k in h.get("read_written", [])[:10]:
        op = run.ops[k]
        marks = h["marks"]
        over = [
            i for i in dict.fromkeys(op.inputs) if "written over before read" in marks.get(i, [])
        ]
        out.append(
            f"{op.name} at line {op.line} read {', '.join(name(i) for i in over[:3])} "
            "after it was written over (through .data or a detached alias): the value shown "
            "for it is what its maker gave, not what this op read"
        )
    return out


def checks_html(run) -> str:
    """The checks (a wrong op's line red) and the health signals, at most :data:`ROWS` each."""
    colour = {"pass": PASS_TEXT, "fail": LINE["fail"]}
    mark = {"pass": "✓ ", "fail": "✗ "}
    lines = check_lines(run)
    parts = [
        f"<div class='gm-check gm-check-{html.escape(s)}' style='color:"
        f"{colour.get(s, '#374151')}'>{mark.get(s, '')}{render.whole_numbers(html.escape(t))}</div>"
        for s, t in lines[:ROWS]
    ]
    if len(lines) > ROWS:
        parts.append(f"<p>{len(lines) - ROWS} more lines (the Ops table marks them).</p>")
    health = health_lines(run)
    if health:
        items = "".join(f"<li>{html.escape(t)}</li>" for t in health[:ROWS])
        more = f"<p>{len(health) - ROWS} more.</p>" if len(health) > ROWS else ""
        parts.append(
            f"<p style='margin:6px 0 0 0'><b>Health</b></p><ul style='margin:0'>{items}</ul>{more}"
        )
    return "".join(parts)


# ============================================================================ the tables
OP_HEADER = (
    "line",
    "module",
    "op",
    "name",
    "shape",
    "mean",
    "std",
    "max|x|",
    "zero",
    "nan/inf",
    "sat.",
    "∇ std",
    "∇ max",
    "check",
)
PARAM_HEADER = ("parameter", "shape", "std", "∇ std", "∇/data", "update/data")


def op_rows(run) -> tuple:
    """(rows, classes): one row an op in the order they ran; class ``fail`` or ``nonfinite``."""
    rows, classes = [], []
    for k in run.graph:
        op = run.ops[k]
        i = op.outputs[0]
        s, g = run.stats[i], run.grad_stats[i]
        status = _status(run, k) or ""
        rows.append(
            (
                op.line,
                shown_name(run.op_modules[k]),
                op.name,
                run.names[i] and run.name_of(i),
                _shape(run, i),
                *map(_g, s[:3]),
                *map(_pct, s[3:6]),
                _g(g[1]) if run.reached[i] else "none",
                _g(g[2]) if run.reached[i] else "",
                status,
            )
        )
        classes.append("fail" if status == "fail" else ("nonfinite" if s[4] > 0 else ""))
    return rows, classes


def param_rows(run) -> list:
    """One row a parameter, in the order the cell first uses them: the gradient's size
    down the rows is its size along the network's depth."""
    by_value = {p["value"]: p for p in run.health.get("params", [])}
    order = [by_value[d["value"]] for d in run.health.get("depth", []) if d["value"] in by_value]
    return [
        (
            p["name"],
            _shape(run, p["value"]),
            _g(run.stats[p["value"], 1]),
            _g(run.grad_stats[p["value"], 1]),
            _g(p["grad_to_data"]),
            _g(p["update_to_data"]),
        )
        for p in order
    ]


_CLASS_FILL = {"fail": FILL["fail"], "nonfinite": "#ede9fe"}


def _ops_table(run, box_of) -> dict:
    """The ops' table, at most :data:`ROWS` rows: the ops that fail their check or hold a
    nan/inf always, the first others in the order they ran."""
    rows, marks = op_rows(run)
    marked = [n for n, c in enumerate(marks) if c][:ROWS]
    room = ROWS - len(marked)
    keep = sorted(set(marked) | set([n for n, c in enumerate(marks) if not c][:room]))
    # the check's verdict beside the op and its name, where a narrow output shows it
    # unscrolled; the line and module after it
    header = ["box", *OP_HEADER]
    first = [header.index(name) for name in ("box", "op", "name", "check", "line", "module")]
    order = first + [c for c in range(len(header)) if c not in first]
    cells = [[str(box_of.get(run.graph[n], "")), *map(str, rows[n])] for n in keep]
    return _table(
        [header[c] for c in order],
        [[row[c] for c in order] for row in cells],
        classes=[marks[n] for n in keep],
        note=f"{len(rows) - len(keep)} more ops not shown." if len(rows) > len(keep) else "",
        magnitude=[
            order.index(header.index(h)) for h in ("mean", "std", "max|x|", "∇ std", "∇ max")
        ],
        wrap=[order.index(header.index("name"))],
    )


def _params_table(run) -> dict:
    rows = param_rows(run)
    return _table(
        PARAM_HEADER,
        [list(map(str, r)) for r in rows[:ROWS]],
        head=[
            "Input side first: the gradient's size along the depth; update/data about "
            "1e-3 is healthy."
        ],
        magnitude=[2, 3, 4, 5],
        note=f"{len(rows) - ROWS} more parameters not shown." if len(rows) > ROWS else "",
    )


def _static_table(table: dict) -> str:
    """A live table as static HTML, without the live view's column of box numbers."""
    keep = [c for c, name in enumerate(table["columns"]) if name != "box"]
    rows = [[row[c] for c in keep] for row in table["rows"]]
    colours = [_CLASS_FILL.get(c, "") for c in table["classes"]]
    note = f"<p>{html.escape(table['note'])}</p>" if table["note"] else ""
    return html_table([table["columns"][c] for c in keep], rows, colours) + note


# ============================================================================ static view
def _answers(run):
    expect = getattr(run.options, "expect", None)
    return run.expect(expect) if expect else None


def html_view(run, open=(), mark_run: str = "") -> str:
    """The whole display as HTML; ``open`` names modules to draw opened
    (``["model.blocks.3"]``); ``mark_run`` marks it (``data-gm-run``) so that the live view
    shown with it can hide it."""
    tag = f' data-gm-run="{html.escape(mark_run)}"' if mark_run else ""
    parts = [
        f"<div class='gradmagic gradmagic-static gradmagic-torch'{tag} "
        f'style="{render.STATIC_CARD}">',
        render.static_style(mark_run) if mark_run else "",
        f"<p><b>{html.escape(headline(run))}</b></p>",
    ]
    parts += [f"<div style='color:{WARN_TEXT}'>{html.escape(w)}</div>" for w in run.warnings]
    report = _answers(run)
    if report is not None:
        parts.append(render.answers_html(report))
    parts.append(checks_html(run))
    if len(run.steps) > 1:  # a training loop: the loss at each backward()
        parts.append(f"<p><b>Training</b></p>{render.steps_svg(run.steps)}")
    parts.append(_graph_html(run, open))
    parts.append(
        "<details open><summary>Ops: values and gradients</summary>"
        + _static_table(_ops_table(run, {}))
        + "</details><details><summary>Parameters, input side first: gradient and update "
        "sizes (update/data about 1e-3 is healthy)</summary>"
        + _static_table(_params_table(run))
        + "</details></div>"
    )
    return "".join(parts)


def text_view(run) -> str:
    lines = [headline(run)] + [f"note: {w}" for w in run.warnings]
    lines += [
        ("✓ " if s == "pass" else "✗ " if s == "fail" else "") + t for s, t in check_lines(run)
    ]
    report = _answers(run)
    if report is not None:
        lines.append(render.answers_text(report))
    lines += ["health: " + t for t in health_lines(run)]
    if len(run.steps) > 1:
        lines.append(f"loss per step: {run.steps[0]:.4g} → {run.steps[-1]:.4g}")
    return "\n".join(lines)


def mimebundle(run, mark_run: str = "") -> dict:
    """The run's static display: HTML (graph, checks, health, tables) and text."""
    return {"text/plain": text_view(run), "text/html": html_view(run, mark_run=mark_run)}


# ============================================================================ live view
def payload(run, open=()) -> dict:
    """Everything the live view shows of ``run`` with the modules ``open`` drawn opened, in
    the live view's shape (``nodes``, ``order``, ``tabs``: see
    :func:`gradmagic.views.tabs.payload`); a module or folded box is a node ``m<n>``, which a
    click opens, the others ``v<n>``."""
    open = [str(p) for p in open][:OPEN]
    max_nodes = run.options.max_nodes
    lay = layout(run, max_nodes, open)
    boxes = list(lay.boxes.values())
    ids = {
        key: ("m" if b.kind in _GROUPS else "v") + str(n)
        for n, (key, b) in enumerate(lay.boxes.items())
    }
    number = {key: n for n, key in enumerate(lay.boxes)}
    box_of = {k: n for n, box in enumerate(boxes) for k in box.ops}
    # (a leaf's box, by its value: the box an AccumulateGrad step lights)
    leaf_box = {box.value: n for n, box in enumerate(boxes) if box.kind == "leaf"}
    parents: dict = {}
    for a, b in lay.edges:
        parents.setdefault(number[b], []).append(number[a])
    plot = {"html": render.steps_svg(run.steps)} if len(run.steps) > 1 else None
    return {
        "kind": "torch",
        "headline": headline(run),
        "notes": list(run.warnings),
        "summary": {"counts": lay.note.split(";")[0], "note": _OPENING} if lay.note else None,
        "dot": to_dot(run, max_nodes, open, lay=lay, ids=ids),
        "dots": None,
        "target": box_of.get(run.graph[-1], -1) if run.graph else -1,
        "open": open,  # what the browser asked to open (the layout opens more to fill)
        "nodes": {str(n): _node(run, box, parents.get(n, [])) for n, box in enumerate(boxes)},
        "order": list(range(len(boxes) - 1, -1, -1)),
        "tabs": [
            {"id": "graph", "title": "Graph", "kind": "torchgraph", "payload": None},
            {
                "id": "backward",
                "title": "Backward",
                "kind": "torchbackward",
                "payload": _steps(run, box_of, leaf_box),
            },
            {
                "id": "checks",
                "title": "Checks",
                "kind": "html",
                "payload": {"html": checks_html(run)},
            },
            *[{"id": "training", "title": "Training", "kind": "html", "payload": plot}]
            * bool(plot),
            {"id": "ops", "title": "Ops", "kind": "table", "payload": _ops_table(run, box_of)},
            {"id": "params", "title": "Parameters", "kind": "table", "payload": _params_table(run)},
        ],
    }


_OPENING = "Click a module's box (or a folded `Block x N`) to open it one level."


def _opens(box) -> str:
    """The module a click on ``box`` opens ('' for an op, a leaf or a line of the cell)."""
    if box.kind == "module":
        return box.key
    if box.kind == "fold":  # "fold:model.blocks.0-11" opens at model.blocks.0
        parent, _, span = box.key[5:].rpartition(".")
        first = span.split("-")[0]
        return f"{parent}.{first}" if parent else first
    return ""


def _node(run, box, parents) -> dict:
    """One drawn box as a node of the live view: its value's and gradient's statistics."""
    i = -1 if box.value is None else int(box.value)
    statuses = [_status(run, k) for k in box.ops]
    failed = [run.ops[k].name for k, s in zip(box.ops, statuses) if s == "fail"]
    flags = [f"gradient wrong: {', '.join(dict.fromkeys(failed))}"] if failed else []
    flags += [str(w) for w in run.health.get("marks", {}).get(box.value, [])][:6]
    where = []
    if box.ops:
        where.append(f"line {run.ops[box.ops[0]].line}")
        if run.op_modules[box.ops[0]]:
            where.append(f"in {shown_name(run.op_modules[box.ops[0]])}")
    if box.kind in _GROUPS:
        where.append(f"{len(box.ops)} ops; the numbers are its last op's")
    stats = _stats(run.stats[i]) if i >= 0 else None
    grad = _stats(run.grad_stats[i]) if i >= 0 and run.reached[i] else None
    return {
        "name": run.name_of(i) if box.kind in ("op", "leaf") else shown_name(box.title),
        "shape": f"{_shape(run, i)} {run.dtypes[i]}" if i >= 0 else "",
        "op": shown_name(box.title)
        if box.kind == "op"
        else ("" if box.kind == "leaf" else box.kind),
        "data": stats["std"] if stats else "–",
        "grad": grad["std"] if grad else "none",
        "dataFull": _lines(stats),
        "gradFull": _lines(grad) if grad else "no gradient reached it",
        "parents": parents,
        "leaf": True,  # (no local derivatives to list: torch's backward is not taken apart)
        "local": {"items": [], "more": 0},
        "rule": " · ".join(where),
        "incoming": {
            "items": [f"std {grad['std']}, max|x| {grad['max|x|']}"] if grad else ["none"],
            "more": 0,
        },
        "flags": flags,
        "value": i,
        "opens": _opens(box),
        "status": "fail" if failed else ("pass" if "pass" in statuses else ""),
        "kept": i in run.full,
    }


def _lines(stats) -> str:
    return "\n".join(f"{k:>9}  {v}" for k, v in stats.items()) if stats else "–"


def _stats(row) -> dict | None:
    if row is None or math.isnan(row[2]):
        return None
    names = ("mean", "std", "max|x|", "zero", "nan/inf", "saturated")
    return dict(zip(names, [*map(_g, row[:3]), *map(_pct, row[3:6])]))


def _steps(run, box_of, leaf_box) -> dict:
    """The backward pass for the stepper: each autograd node in the order it ran, the box it
    lights (an ``AccumulateGrad``: its leaf's box, where one is drawn), and the size of the
    gradient it received."""
    out = []
    for name, k, i in run.backward[:STEPS]:
        g = run.grad_stats[i] if i >= 0 and run.reached[i] else None
        out.append(
            [
                name,
                box_of.get(k, -1) if k >= 0 else leaf_box.get(i, -1),
                run.ops[k].name if k >= 0 else "",
                run.name_of(i) if i >= 0 else "",
                f"σ {_g(g[1])}  max {_g(g[2])}" if g is not None else "",
            ]
        )
    total = max(run.backward_total, len(run.backward))
    note = (
        f"The stepper covers the first {len(out):,} of {total:,} nodes." if total > len(out) else ""
    )
    return {"steps": out, "total": total, "note": note}


def answer(run, content) -> dict | None:
    """The kernel's answer to a message of the live view: ``{"type": "tensor", "value": i}``
    (the value and its gradient whole, at most :data:`SEND` numbers each) or ``{"type":
    "layout", "open": [paths]}`` (the payload with those modules opened). None for others."""
    if not isinstance(content, dict):
        return None
    kind = content.get("type")
    if kind == "layout":
        opened = content.get("open")
        return payload(run, opened if isinstance(opened, list) else ())
    if kind != "tensor":
        return None
    try:
        i = int(content.get("value", ""))  # (a missing value: not a number)
    except (TypeError, ValueError):
        return {"type": "tensor", "value": None, "error": "no such value"}
    if not 0 <= i < run.n:
        return {"type": "tensor", "value": i, "error": "no such value"}
    kept = run.full.get(i)
    if kept is None:
        return {
            "type": "tensor",
            "value": i,
            "error": f"{run.name_of(i)} ({_shape(run, i)}) was too big to be kept whole; "
            "its statistics are in the table",
        }
    data, grad = kept
    return {
        "type": "tensor",
        "value": i,
        "name": run.name_of(i),
        "size": int(np.size(data)),
        "data": _text(data),
        "grad": None if grad is None else _text(grad),
    }


def _text(a) -> str:
    """A tensor's numbers as numpy prints them: whole up to :data:`SEND`, summarised beyond."""
    a = np.asarray(a)
    return np.array2string(a, threshold=SEND, edgeitems=5, max_line_width=120, precision=6)
