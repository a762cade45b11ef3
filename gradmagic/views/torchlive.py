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

import json
import math
import secrets
import weakref

import numpy as np

from ..analysis.torchgraph import layout
from . import torchview
from .torchview import _g, _pct, _shape, _status

__all__ = ["payload", "answer", "widget", "mimebundle", "STEPS", "SEND"]

STEPS = 1000  # backward nodes the stepper carries
SEND = 10_000  # numbers of a tensor sent when the browser asks for it whole
OPEN = 16  # modules the browser may ask to open at once


def payload(run, open=()) -> dict:
    """Everything the live view shows of ``run`` with the modules ``open`` drawn opened."""
    open = [str(p) for p in open][:OPEN]
    max_nodes = getattr(run.options, "max_nodes", 150) or 150
    lay = layout(run, max_nodes, open)
    ids = {key: f"v{n}" for n, key in enumerate(lay.boxes)}
    box_of = {k: n for n, box in enumerate(lay.boxes.values()) for k in box.ops}
    boxes = [_box(run, box) for box in lay.boxes.values()]
    values = {str(b["value"]): _value(run, b["value"]) for b in boxes if b["value"] >= 0}
    rows, colours = torchview.op_rows(run)
    return {
        "kind": "torch",
        "headline": torchview.headline(run),
        "notes": list(run.warnings) + ([lay.note] if lay.note else []),
        "checks": [{"status": s, "text": t} for s, t in torchview.check_lines(run)],
        "health": torchview.health_lines(run),
        "dot": torchview.to_dot(run, max_nodes, open, lay=lay, ids=ids),
        "target": box_of.get(run.graph[-1], -1) if run.graph else -1,
        "open": open,  # what the browser asked to open (the layout opens more to fill)
        "boxes": boxes,
        "values": values,
        "ops": {
            "columns": ["box", *torchview.OP_HEADER],
            "rows": [
                [box_of.get(k, -1), *row]
                for k, row in zip(run.graph[: torchview.ROWS], rows[: torchview.ROWS])
            ],
            "bad": [n for n, c in enumerate(colours[: torchview.ROWS]) if c],
            "total": len(rows),
        },
        "params": {
            "columns": list(torchview.PARAM_HEADER),
            "rows": [list(r) for r in torchview.param_rows(run)[: torchview.ROWS]],
        },
        "steps": _steps(run, box_of),
    }


def _box(run, box) -> dict:
    """One drawn box: what it is, the value it shows, what a click opens."""
    statuses = [_status(run, k) for k in box.ops]
    opens = ""
    if box.kind == "module":
        opens = box.key
    elif box.kind == "fold":  # "fold:model.blocks.0-11" opens at model.blocks.0
        parent, _, span = box.key[5:].rpartition(".")
        opens = f"{parent}.{span.split('-')[0]}" if parent else span.split("-")[0]
    first = run.ops[box.ops[0]] if box.ops else None
    return {
        "kind": box.kind,
        "title": box.title,
        "value": -1 if box.value is None else int(box.value),
        "ops": len(box.ops),
        "opens": opens,
        "line": first.line if first is not None else None,
        "module": run.op_modules[box.ops[0]] if box.ops else "",
        "status": "fail" if "fail" in statuses else ("pass" if "pass" in statuses else ""),
        "failed": [run.ops[k].name for k, s in zip(box.ops, statuses) if s == "fail"][:8],
        "marks": list(run.health.get("marks", {}).get(box.value, []))[:6],
    }


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


def _value(run, i: int) -> dict:
    """A value's name, shape, dtype and the statistics of its numbers and its gradient."""
    return {
        "name": run.name_of(i),
        "shape": _shape(run, i),
        "dtype": run.dtypes[i],
        "stats": _stats(run.stats[i]),
        "grad": _stats(run.grad_stats[i]) if run.reached[i] else None,
        "reached": bool(run.reached[i]),
        "requires": bool(run.requires_grad[i]),
        "kept": i in run.full,
    }


def _steps(run, box_of) -> dict:
    """The backward pass for the stepper: each autograd node in the order it ran, the box it
    lights, and the size of the gradient it received."""
    out = []
    for name, k, i in run.backward[:STEPS]:
        g = run.grad_stats[i] if i >= 0 and run.reached[i] else None
        out.append(
            [
                name,
                box_of.get(k, -1) if k >= 0 else -1,
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
        i = int(content.get("value"))
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
    from .widget import _classes, _keep_open, _library

    _, LiveView = _classes()
    data = dict(payload(run), run=run_id)
    view = LiveView(
        lib=_library(),
        data=json.dumps(data, separators=(",", ":")),
        tab="graph",
        source=weakref.ref(run),
        answer=_answer_keeping(run_id),
    )
    _keep_open(view)
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
    from .widget import WIDGET_MIME

    run_id = secrets.token_hex(8)
    static = torchview.mimebundle(run, mark_run=run_id)
    try:
        view = widget(run, run_id)
    except ImportError:  # anywidget is not installed: the static view stands alone
        return static
    bundle = view._repr_mimebundle_()
    bundle = dict(bundle[0] if isinstance(bundle, tuple) else bundle)
    if publish is None:
        return {**static, WIDGET_MIME: bundle[WIDGET_MIME]}
    publish(static)
    return {WIDGET_MIME: bundle[WIDGET_MIME], "text/plain": torchview.headline(run)}
