"""How a recorded PyTorch run shows: the graph in the user's names, the checks, the health
signals and the tables of values and gradients.

A pure function of a :class:`~gradmagic.analysis.torchrun.TorchRun` (its plain columns: no
tensor, no torch import here), as static HTML with the graph as an ``<img>`` of Graphviz's SVG
(it survives untrusted notebooks and exports) and as plain text. Every part is bounded: the
graph by ``--max-nodes`` boxes (:func:`gradmagic.analysis.torchgraph.layout`), the tables by
:data:`ROWS` rows, so the payload stays bounded whatever the model's size.
"""

from __future__ import annotations

import html
import math

from ..analysis.torchgraph import layout, shown_name
from . import render

__all__ = ["mimebundle", "to_dot", "html_view", "text_view", "ROWS"]

ROWS = 100  # rows of a table before it is cut
_FAIL, _NONFINITE, _WARN = "#dc2626", "#7c3aed", "#ea580c"
# text on white at 4.5:1 or more (WCAG AA): darker than the green and orange of the marks
PASS_TEXT, WARN_TEXT = "#166534", "#c2410c"


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


def _esc(text: str) -> str:
    return render.escape_string(text)


def to_dot(run, max_nodes: int | None = None, open=(), lay=None, ids=None) -> str:
    """DOT of the run's graph: ops as records (name, shape, value and gradient sizes),
    modules and folded blocks as boxes, parameters and inputs as leaves. ``lay``: the
    layout when the caller made it; ``ids``: box key → the DOT node's name (else the key)."""
    opts = run.options
    max_nodes = max_nodes or opts.max_nodes
    lay = layout(run, max_nodes, open) if lay is None else lay
    ids = ids or {}
    marks = run.health.get("marks", {})
    rankdir = opts.rankdir or "LR"
    lines = [
        f"digraph torchrun {{ rankdir={rankdir}; "
        'node [fontname="Helvetica", fontsize=10, shape=box, style="rounded,filled", '
        'fillcolor="#ffffff"]; edge [color="#6b7280", arrowsize=0.6];'
    ]
    for key, box in lay.boxes.items():
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
        if box.kind in ("module", "fold", "line"):
            rows.append(f"{len(box.ops)} ops")
        statuses = [_status(run, k) for k in box.ops]
        words = list(marks.get(i, [])) if i is not None else []
        colour, fill, width = "#4b5563", "#ffffff", 1
        if box.kind == "leaf":
            fill = "#dbeafe" if run.requires_grad[i] else "#f3f4f6"
        elif box.kind in ("module", "fold", "line"):
            fill = "#ecfdf5" if box.kind != "fold" else "#d1fae5"
        if i == run.target:
            fill = "#fde68a"
        if "fail" in statuses:
            colour, width = _FAIL, 3
            bad = [run.ops[k].name for k, s in zip(box.ops, statuses) if s == "fail"]
            words.insert(0, f"gradient wrong: {', '.join(dict.fromkeys(bad))}")
        elif any("nan" in w for w in words):
            colour, width = _NONFINITE, 3
        elif words:
            colour, width = _WARN, 2
        rows.extend(words[:3])
        label = "\\n".join(_esc(r) for r in rows if r)
        lines.append(
            f'"{ids.get(key, key)}" [label="{label}", color="{colour}", penwidth={width}, '
            f'fillcolor="{fill}"];'
        )
    for a, b in lay.edges:
        lines.append(f'"{ids.get(a, a)}" -> "{ids.get(b, b)}";')
    lines.append("}")
    return "\n".join(lines)


def _graph_html(run, open=()) -> str:
    lay_note = layout(run, run.options.max_nodes, open).note
    source = to_dot(run, open=open)
    try:
        image = render.svg(source)
    except Exception as exc:  # noqa: BLE001 - no Graphviz, or too slow: say so, keep the tables
        return render.graph_failure_html(exc, source)
    note = f"<p style='margin:2px 0'>{html.escape(lay_note)}</p>" if lay_note else ""
    return (
        note + f'<div style="overflow:auto; max-width:100%; max-height:'
        f'{render.GRAPH_HEIGHT}px"><img class="gradmagic-graph" alt="the computation '
        f'graph" style="max-width:none" src="{render.svg_data_uri(image)}"></div>'
    )


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
    out = []
    whole = run.checks["whole"]
    if whole["status"] == "skipped":
        out.append(("none", f"Whole cell not checked: {whole['why']}."))
    else:
        out.append(
            (
                whole["status"],
                "Whole cell, float64, one random direction: "
                f"analytic {whole['analytic']:.10g} vs numeric {whole['numeric']:.10g} "
                f"(relative error {whole['error']:.1e})",
            )
        )
    if whole.get("left_out"):
        out.append(
            (
                "none",
                "Complex parameters left out of the whole-cell check: "
                + ", ".join(whole["left_out"][:5])
                + (f" and {len(whole['left_out']) - 5} more" if len(whole["left_out"]) > 5 else "")
                + ".",
            )
        )
    ops = run.checks["ops"]
    counts: dict[str, int] = {}
    for r in ops.values():
        status = "alike" if "like" in r else r["status"]
        counts[status] = counts.get(status, 0) + 1
    out.append(
        (
            "pass" if not counts.get("fail") else "fail",
            "Each op's own gradient vs finite differences: "
            + ", ".join(_op_count(n, s) for s, n in sorted(counts.items()))
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
                    f"line {op.line}: {op.name} -> {run.name_of(op.outputs[0])}: "
                    f"its backward gives {r['analytic']:.6g}, finite differences "
                    f"{r['numeric']:.6g}",
                )
            )
    out.extend(("none", note) for note in run.checks.get("notes", []))
    return out


def _op_count(n: int, status: str) -> str:
    """``5 pass``, ``1 fails``, ``2 repeat an op checked``: a count of ops and what they did."""
    if status == "alike":
        return f"{n} repeat{'s' if n == 1 else ''} an op checked (and share its result)"
    if status == "fail":
        return f"{n} fail{'s' if n == 1 else ''}"
    return f"{n} {status}"


def health_lines(run) -> list:
    h = run.health
    out = []
    nf = h.get("nonfinite", {})
    for what, word in (("value", "value"), ("grad", "gradient")):
        hit = nf.get(what)
        if hit:
            out.append(
                f"First nan/inf {word}: {hit['name']} at line {hit['line']} "
                f"({run.name_of(hit['value'])})"
            )
    for i, f in h.get("dead", {}).items():
        out.append(f"{run.name_of(i)}: {f:.0%} of its ReLU units are zero for every example")
    for i, f in h.get("saturated", {}).items():
        out.append(f"{run.name_of(i)}: {f:.0%} of its units are saturated for every example")
    for c in h.get("cuts", []):
        where = f" (line {c['line']})" if c.get("line") else ""
        out.append(f"{run.name_of(c['value'])} enters without its gradient: {c['how']}{where}")
    if h.get("unreached"):
        out.append("No gradient reached: " + ", ".join(run.name_of(i) for i in h["unreached"][:10]))
    if h.get("zero"):
        out.append("Gradient all zero: " + ", ".join(run.name_of(i) for i in h["zero"][:10]))
    if h.get("inplace"):
        out.append(f"{len(h['inplace'])} in-place write(s) in the graph")
    for k in h.get("read_written", [])[:10]:
        op = run.ops[k]
        over = [
            i
            for i in dict.fromkeys(op.inputs)
            if "written over before read" in h["marks"].get(i, [])
        ]
        out.append(
            f"{op.name} at line {op.line} read {', '.join(run.name_of(i) for i in over[:3])} "
            "after it was written over (through .data or a detached alias): the value shown "
            "for it is what its maker gave, not what this op read"
        )
    return out


def _table(header, rows, colours=()) -> str:
    head = "".join(
        f"<th style='padding:1px 6px;text-align:left'>{html.escape(h)}</th>" for h in header
    )
    body = []
    for n, row in enumerate(rows[:ROWS]):
        colour = colours[n] if n < len(colours) else ""
        style = " style='background:transparent" + (f"; color:{colour}'" if colour else "'")
        body.append(
            f"<tr{style}>"
            + "".join(f"<td style='padding:1px 6px'>{html.escape(str(c))}</td>" for c in row)
            + "</tr>"
        )
    more = (
        f"<p>{len(rows) - ROWS} more rows not shown (run.stats has them all).</p>"
        if len(rows) > ROWS
        else ""
    )
    return (
        "<div style='max-height:360px;overflow:auto'><table style='border-collapse:collapse;"
        "font-size:12px; color:inherit'><thead><tr style='background:transparent'>"
        f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{more}"
    )


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


def op_rows(run) -> tuple:
    rows, colours = [], []
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
                _g(s[0]),
                _g(s[1]),
                _g(s[2]),
                _pct(s[3]),
                _pct(s[4]),
                _pct(s[5]),
                _g(g[1]) if run.reached[i] else "none",
                _g(g[2]) if run.reached[i] else "",
                status,
            )
        )
        colours.append(_FAIL if status == "fail" else (_NONFINITE if s[4] > 0 else ""))
    return rows, colours


PARAM_HEADER = ("parameter", "shape", "std", "∇ std", "∇/data", "update/data")


def param_rows(run) -> list:
    """One row a parameter, in the order the cell first uses them: the gradient's size
    down the rows is its size along the network's depth."""
    rows = []
    by_value = {p["value"]: p for p in run.health.get("params", [])}
    order = [by_value[d["value"]] for d in run.health.get("depth", []) if d["value"] in by_value]
    for p in order:
        i = p["value"]
        rows.append(
            (
                p["name"],
                _shape(run, i),
                _g(run.stats[i, 1]),
                _g(run.grad_stats[i, 1]),
                _g(p["grad_to_data"]),
                _g(p["update_to_data"]),
            )
        )
    return rows


def _answers(run):
    expect = getattr(run.options, "expect", None)
    return run.expect(expect) if expect else None


def html_view(run, open=(), mark_run: str = "") -> str:
    """The whole display as HTML; ``open`` names modules to draw opened
    (``["model.blocks.3"]``); ``mark_run`` marks it (``data-gm-run``) so that the live view
    shown with it can hide it."""
    colour = {"pass": PASS_TEXT, "fail": _FAIL, "none": "#374151"}
    mark = {"pass": "✓ ", "fail": "✗ ", "none": ""}
    tag = f' data-gm-run="{html.escape(mark_run)}"' if mark_run else ""
    parts = [
        f"<div class='gradmagic gradmagic-static gradmagic-torch'{tag} "
        f'style="{render.STATIC_CARD}">',
        render.static_style(mark_run) if mark_run else "",
        f"<p><b>{html.escape(headline(run))}</b></p>",
    ]
    parts += [f"<div style='color:{WARN_TEXT}'>{html.escape(w)}</div>" for w in run.warnings]
    for status, text in check_lines(run):
        s = status if status in colour else "none"
        parts.append(
            f"<div style='color:{colour[s]}'>{mark[s]}{render.whole_numbers(html.escape(text))}</div>"
        )
    report = _answers(run)
    if report is not None:
        parts.append(render.answers_html(report))
    health = health_lines(run)
    if health:
        parts.append(
            "<p style='margin:6px 0 0 0'><b>Health</b></p><ul style='margin:0'>"
            + "".join(f"<li>{html.escape(t)}</li>" for t in health)
            + "</ul>"
        )
    if len(run.steps) > 1:  # a training loop: the loss at each backward()
        parts.append(f"<p><b>Training</b></p>{render.steps_svg(run.steps)}")
    parts.append(_graph_html(run, open))
    rows, colours = op_rows(run)
    parts.append(
        "<details open><summary>Ops: values and gradients</summary>"
        + _table(OP_HEADER, rows, colours)
        + "</details>"
    )
    parts.append(
        "<details><summary>Parameters, input side first: gradient and update "
        "sizes (update/data about 1e-3 is healthy)</summary>"
        + _table(PARAM_HEADER, param_rows(run))
        + "</details>"
    )
    parts.append("</div>")
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


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
