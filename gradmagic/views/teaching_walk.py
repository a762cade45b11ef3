"""The topological walk of micrograd's ``build_topo``, step by step, and the order backward
runs in (numbers from :mod:`gradmagic.analysis.explanations`).
"""

from __future__ import annotations

import html
from collections.abc import Collection

from ..analysis import explanations
from ..analysis.numbers import fmt
from . import render
from .teaching_parts import ITEMS, ROWS, _GREY, _draw, _more, _paragraph, _table, expressions


LINES = 16  # lines of the walk's printout before "… N more lines"


BUILD_TOPO = """topo, visited = [], set()
def build_topo(v):
    if v not in visited:
        visited.add(v)            # v [...]
        for child in v._prev:     # the node's inputs, in order
            build_topo(child)
        topo.append(v)            # t [...]
build_topo({target})"""


def build_topo_code(trace) -> str:
    """:data:`BUILD_TOPO` called on the run's target, by the name the cell gave it."""
    label = trace.target.label
    if label:
        return BUILD_TOPO.format(target=label)
    return BUILD_TOPO.format(target="target") + "  # the cell's last expression"


def _elide(items: list, limit: int = ITEMS) -> str:
    """A printed list, ``['f', 'd', … 12 more …, 'x']`` past ``limit`` items."""
    if len(items) <= limit:
        return "[" + ", ".join(repr(s) for s in items) + "]"
    head, tail = items[: limit // 2], items[-(limit - limit // 2) :]
    return (
        "["
        + ", ".join(repr(s) for s in head)
        + f", … {len(items) - len(head) - len(tail):,} more …, "
        + ", ".join(repr(s) for s in tail)
        + "]"
    )


# =========================================================================== the walk
def walk_lines(trace, walk=None, *, named_only: bool = True, limit: int | None = None) -> list:
    """micrograd's printout: ``v [...]`` after each visit, ``t [...]`` after each append.

    ``named_only`` prints labelled nodes only, as micrograd's lecture does (its constants and
    intermediate results have no label); otherwise every node, by its expression.
    With ``limit``, only the first ``limit - 1`` lines and the last one are made
    (each line is a list as long as the walk so far: all of them would be quadratic).
    """
    walk = explanations.walk(trace) if walk is None else walk
    labels = explanations._graph(trace).labels
    names = labels if named_only else expressions(trace)
    events = [(kind, i) for kind, i in walk.events if not named_only or labels[i]]
    keep: Collection[int] = (
        range(len(events))
        if limit is None or len(events) <= limit
        else list(range(limit - 1)) + [len(events) - 1]
    )
    keep = set(keep)
    visited: list[str] = []
    order: list[str] = []
    out = []
    for k, (kind, i) in enumerate(events):
        (visited if kind == "v" else order).append(names[i])
        if k in keep:
            out.append((kind, list(visited if kind == "v" else order)))
    return out


def _printout(trace, walk, limit: int = LINES) -> list:
    labels = explanations._graph(trace).labels
    total = sum(1 for _, i in walk.events if labels[i])
    lines = walk_lines(trace, walk, limit=limit)
    text = [f"{kind} {_elide(items)}" for kind, items in lines]
    if total > len(text):
        text = text[:-2] + [f"… {total - len(text) + 1:,} more lines …", text[-1]]
    return text


def _unreached_dot(walk) -> str:
    out = []
    for k, (name, data) in enumerate(list(walk.unreached.items())[:ITEMS]):
        label = "|".join(
            render.escape_record(f) for f in (name, f"data {fmt(data, shape=False)}", "not reached")
        )
        out.append(
            f'  u{k} [shape=record, label="{{{label}}}", style="filled,dashed", '
            f'fillcolor="#f3f4f6", color="{_GREY}", fontcolor="{_GREY}"];\n'
        )
    return "".join(out)


def _unreached_note(trace, walk) -> str:
    if not walk.unreached:
        return ""
    names = list(walk.unreached)
    shown = ", ".join(names[:ITEMS]) + (
        f" and {len(names) - ITEMS:,} more" if len(names) > ITEMS else ""
    )
    return (
        f"Not reached: {shown}. The cell computed {'them' if len(names) > 1 else 'it'}, "
        f"but {trace.target.label or 'the target'} does not depend on "
        f"{'them' if len(names) > 1 else 'it'}: the walk starts at the target and follows "
        "inputs only, so it never gets there, backward never visits "
        f"{'them' if len(names) > 1 else 'it'}, and the gradient is 0 (shown grey)."
    )


def walk_html(
    trace,
    step: int | None = None,
    *,
    cache=None,
    walk=None,
    draw: bool = True,
    limit: int = ROWS,
    every_step: bool = True,
) -> str:
    """The topological walk; ``step`` (1-based, over the walk's events) highlights one event."""
    walk = explanations.walk(trace) if walk is None else walk
    exprs = expressions(trace)
    total = len(walk.events)
    out = ['<div class="gradmagic-walk">', *_walk_intro(trace, walk)]
    if step is not None:
        out += _step_parts(trace, walk, exprs, max(1, min(step, total)), cache, draw)
    out.append(
        _paragraph(
            html.escape(
                "Backward processes the reverse of the order: "
                + " → ".join(_elide_names([exprs[k] for k in walk.backward]))
                + "."
            )
        )
    )
    note = _unreached_note(trace, walk)
    if note:
        out.append(_paragraph(html.escape(note), _GREY))
    if step is None and every_step:
        out += _every_step(trace, walk, exprs, limit, cache, draw)
    out.append("</div>")
    return "".join(out)


def _walk_intro(trace, walk) -> list:
    """micrograd's ``build_topo`` and the order it gives, printed as its lecture prints it."""
    unnamed = sum(1 for n in trace.nodes if not n.label)
    return [
        _paragraph(
            "The depth-first walk of micrograd's <code>build_topo</code>, from the target: "
            "visit a node, walk into each of its inputs, then append it to the order. "
            "Every node lands in the order after all its inputs."
        ),
        f'<pre style="margin:2px 0; font-size:11px">{html.escape(build_topo_code(trace))}</pre>',
        _paragraph(
            "<b>As micrograd's lecture prints it</b> (labelled nodes"
            + (
                f"; the {unnamed:,} unnamed constants and intermediate results are walked "
                "too, see the steps"
                if unnamed
                else ""
            )
            + "):"
        ),
        f'<pre style="margin:2px 0">{html.escape(chr(10).join(_printout(trace, walk)))}</pre>',
    ]


def _every_step(trace, walk, exprs, limit: int, cache, draw: bool) -> list:
    """The table of every event (up to ``limit``), and the drawing of what is not reached."""
    total = len(walk.events)
    rows = [
        [str(k + 1), exprs[i], "visit" if kind == "v" else "append"]
        for k, (kind, i) in enumerate(walk.events[:limit])
    ]
    out = [
        f"<details><summary>Every step ({total:,})</summary>"
        + _table(["step", "node", "event"], rows)
        + (_paragraph(html.escape(_more(len(rows), total, "steps"))) if total > limit else "")
        + "</details>"
    ]
    if draw and walk.unreached:
        out.append(_draw(trace, cache, extra_dot=_unreached_dot(walk)))
    return out


def _step_parts(trace, walk, exprs, step, cache, draw) -> list:
    """Step ``step`` of the walk: the event, the visited set and the order so far, the drawing."""
    total = len(walk.events)
    out = []
    visited, order, (kind, i) = walk.at(step)
    stack = walk.depth(step)
    what = (
        f"visit {exprs[i]} (depth {len(stack) - 1})"
        if kind == "v"
        else f"all inputs of {exprs[i]} are done: append it to the order"
    )
    out.append(_paragraph(html.escape(f"Step {step} of {total}: {what}.")))
    out.append(
        f'<pre style="margin:2px 0">{html.escape("v " + _elide([exprs[k] for k in visited]))}\n'
        f"{html.escape('t ' + _elide([exprs[k] for k in order]))}</pre>"
    )
    if draw:
        out.append(_draw(trace, cache, extra_dot=_unreached_dot(walk), path=set(stack), current=i))
    return out


def _elide_names(names: list, limit: int = ITEMS) -> list:
    if len(names) <= limit:
        return names
    return (
        names[: limit // 2] + [f"… {len(names) - limit:,} more …"] + names[-(limit - limit // 2) :]
    )


def walk_text(trace, walk=None) -> str:
    walk = explanations.walk(trace) if walk is None else walk
    exprs = expressions(trace)
    lines = ["The topological walk (micrograd's build_topo, from the target):"]
    lines += _printout(trace, walk)
    lines.append("Backward order: " + " → ".join(_elide_names([exprs[k] for k in walk.backward])))
    note = _unreached_note(trace, walk)
    if note:
        lines.append(note)
    return "\n".join(lines)
