"""The live view of a recorded PyTorch run: the payload the widget draws, and its answers.

:func:`payload` turns a :class:`~gradmagic.analysis.torchrun.TorchRun` into JSON-able data for
the same live widget as scalar runs (``kind: "torch"``): the graph grouped by ``nn.Module``
with repeated blocks folded (DOT whose nodes are named ``v0``, ``v1``... after the boxes),
each box's value and gradient statistics, the checks with the wrong op red, the health
signals, the tables and the backward pass as the real autograd nodes ran it. Everything is
bounded whatever the model's size: the boxes by ``--max-nodes``, the tables by
:data:`~gradmagic.views.torchview.ROWS` rows, the stepper by :data:`STEPS` nodes.

What is not sent at first is asked for by the browser (:func:`answer`): a module opened one
level (the payload again, with that module in ``open``) and a whole tensor, at most
:data:`SEND` numbers of it (numpy's summary beyond). The run is read, never changed; torch
is not imported here.
"""

from __future__ import annotations

import html
import json
import math
import secrets
import weakref

import numpy as np

from ..analysis.torchgraph import layout, shown_name
from . import render, torchview
from .torchview import _g, _pct, _shape, _status

__all__ = ["payload", "answer", "widget", "mimebundle", "STEPS", "SEND"]

STEPS = 1000  # backward nodes the stepper carries
SEND = 10_000  # numbers of a tensor sent when the browser asks for it whole
OPEN = 16  # modules the browser may ask to open at once


def payload(run, open=()) -> dict:
    """Everything the live view shows of ``run`` with the modules ``open`` drawn opened, in
    the live view's shape (``nodes``, ``order``, ``tabs``: see
    :func:`gradmagic.views.tabs.payload`); a module or folded box is a node ``m<n>``, which a
    click opens, the others ``v<n>``."""
    open = [str(p) for p in open][:OPEN]
    max_nodes = run.options.max_nodes
    lay = layout(run, max_nodes, open)
    keys = list(lay.boxes)
    ids = {
        key: ("m" if lay.boxes[key].kind in _GROUPS else "v") + str(n) for n, key in enumerate(keys)
    }
    number = {key: n for n, key in enumerate(keys)}
    box_of = {k: n for n, box in enumerate(lay.boxes.values()) for k in box.ops}
    # (a leaf's box, by its value: the box an AccumulateGrad step lights)
    leaf_box = {box.value: n for n, box in enumerate(lay.boxes.values()) if box.kind == "leaf"}
    parents: dict = {}
    for a, b in lay.edges:
        parents.setdefault(number[b], []).append(number[a])
    nodes = {
        str(n): _node(run, box, parents.get(n, [])) for n, box in enumerate(lay.boxes.values())
    }
    steps = _steps(run, box_of, leaf_box)
    plot = {"html": render.steps_svg(run.steps)} if len(run.steps) > 1 else None
    return {
        "kind": "torch",
        "headline": torchview.headline(run),
        "notes": list(run.warnings),
        "summary": {"counts": lay.note.split(";")[0], "note": _OPENING} if lay.note else None,
        "dot": torchview.to_dot(run, max_nodes, open, lay=lay, ids=ids),
        "dots": None,
        "target": box_of.get(run.graph[-1], -1) if run.graph else -1,
        "open": open,  # what the browser asked to open (the layout opens more to fill)
        "nodes": nodes,
        "order": list(range(len(keys) - 1, -1, -1)),
        "tabs": [
            {"id": "graph", "title": "Graph", "kind": "torchgraph", "payload": None},
            {"id": "backward", "title": "Backward", "kind": "torchbackward", "payload": steps},
            {"id": "checks", "title": "Checks", "kind": "html", "payload": _checks_html(run)},
            *[{"id": "training", "title": "Training", "kind": "html", "payload": plot}]
            * bool(plot),
            {"id": "ops", "title": "Ops", "kind": "table", "payload": _ops_table(run, box_of)},
            {"id": "params", "title": "Parameters", "kind": "table", "payload": _params(run)},
        ],
    }


_GROUPS = ("module", "fold", "line")
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
    first = run.ops[box.ops[0]] if box.ops else None
    where = []
    if first is not None:
        where.append(f"line {first.line}")
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
    if not stats:
        return "–"
    return "\n".join(f"{k:>9}  {v}" for k, v in stats.items())


def _stats(row) -> dict | None:
    if row is None or math.isnan(row[2]):
        return None
    return {
        "mean": _g(row[0]),
        "std": _g(row[1]),
        "max|x|": _g(row[2]),
        "zero": _pct(row[3]),
        "nan/inf": _pct(row[4]),
        "saturated": _pct(row[5]),
    }


def _checks_html(run) -> dict:
    """The checks (the wrong op's line red) and the health signals, as HTML."""
    colour = {"pass": torchview.PASS_TEXT, "fail": "#dc2626"}
    mark = {"pass": "✓ ", "fail": "✗ "}
    lines = torchview.check_lines(run)
    parts = [
        f"<div class='gm-check gm-check-{html.escape(s)}' style='color:"
        f"{colour.get(s, '#374151')}'>{mark.get(s, '')}{render.whole_numbers(html.escape(t))}</div>"
        for s, t in lines[: torchview.ROWS]
    ]
    if len(lines) > torchview.ROWS:
        parts.append(f"<p>{len(lines) - torchview.ROWS} more lines (the Ops table marks them).</p>")
    health = torchview.health_lines(run)
    if health:
        parts.append(
            "<p><b>Health</b></p><ul>"
            + "".join(f"<li>{html.escape(t)}</li>" for t in health[: torchview.ROWS])
            + "</ul>"
            + (
                f"<p>{len(health) - torchview.ROWS} more.</p>"
                if len(health) > torchview.ROWS
                else ""
            )
        )
    return {"html": "".join(parts)}


def _ops_table(run, box_of) -> dict:
    """The ops' table, at most :data:`~gradmagic.views.torchview.ROWS` rows: the ops that
    fail their check or hold a nan/inf always, the first others in the order they ran."""
    rows, colours = torchview.op_rows(run)
    marked = [n for n, c in enumerate(colours) if c][: torchview.ROWS]
    room = torchview.ROWS - len(marked)
    keep = sorted(set(marked) | set([n for n, c in enumerate(colours) if not c][:room]))
    classes = []
    for n in keep:
        status = _status(run, run.graph[n])
        classes.append("fail" if status == "fail" else ("nonfinite" if colours[n] else ""))
    # the check's verdict beside the op and its name, where a narrow output shows it
    # unscrolled; the line and module after it
    header = ["box", *torchview.OP_HEADER]
    first = [header.index(name) for name in ("box", "op", "name", "check", "line", "module")]
    order = first + [c for c in range(len(header)) if c not in first]
    cells = [[str(box_of.get(run.graph[n], "")), *map(str, rows[n])] for n in keep]
    return {
        "columns": [header[c] for c in order],
        "rows": [[row[c] for c in order] for row in cells],
        "classes": classes,
        "note": f"{len(rows) - len(keep)} more ops not shown." if len(rows) > len(keep) else "",
        "magnitude": [
            order.index(header.index(name)) for name in ("mean", "std", "max|x|", "∇ std", "∇ max")
        ],
        "wrap": [order.index(header.index("name"))],
    }


def _params(run) -> dict:
    rows = torchview.param_rows(run)
    return {
        "columns": list(torchview.PARAM_HEADER),
        "rows": [list(map(str, r)) for r in rows[: torchview.ROWS]],
        "head": [
            "Input side first: the gradient's size along the depth; update/data about "
            "1e-3 is healthy."
        ],
        "magnitude": [2, 3, 4, 5],
        "note": f"{len(rows) - torchview.ROWS} more parameters not shown."
        if len(rows) > torchview.ROWS
        else "",
    }


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


def widget(run, run_id: str = ""):
    """The live view of ``run``: the scalar runs' widget holding :func:`payload` as JSON, the
    run weakly, and :func:`answer` for what the browser asks later."""
    from .live import LiveView, keep_open, library

    data = dict(payload(run), run=run_id)
    view = LiveView(
        lib=library(),
        data=json.dumps(data, separators=(",", ":")),
        tab="graph",
        source=weakref.ref(run),
        answer=_answer_keeping(run_id),
    )
    keep_open(view)
    return view


def _answer_keeping(run_id: str):
    def reply(run, content):
        out = answer(run, content)
        if out is not None and "kind" in out:
            out["run"] = run_id
        return out

    return reply


def mimebundle(run, publish=None) -> dict:
    """The display of a run: the live view and its static copy (see
    :func:`gradmagic.views.widget.mimebundle`: with ``publish`` the static copy is shown
    first, on its own, and the live view hides it once drawn)."""
    run_id = secrets.token_hex(8)
    static = torchview.mimebundle(run, mark_run=run_id)
    try:
        from .widget import WIDGET_MIME

        view = widget(run, run_id)
    except ImportError:  # anywidget is not installed: the static view stands alone
        return static
    bundle = view._repr_mimebundle_()
    bundle = dict(bundle[0] if isinstance(bundle, tuple) else bundle)
    if publish is None:
        return {**static, WIDGET_MIME: bundle[WIDGET_MIME]}
    publish(static)
    return {WIDGET_MIME: bundle[WIDGET_MIME], "text/plain": torchview.headline(run)}
