"""The teaching views of a run: forward mode, the topological walk, the chain rule as paths.

Each view is a pure function of a :class:`gradmagic.analysis.trace.Trace` returning HTML or
plain text (the numbers come from :mod:`gradmagic.analysis.explanations`):

* :func:`forward_html` / :func:`forward_text`: one forward-mode pass per input, every
  node's tangent for the chosen input, the cost of forward against reverse mode, and the
  agreement of the two on every gradient;
* :func:`walk_html` / :func:`walk_text`: micrograd's ``build_topo`` step by step, printed
  as micrograd's lecture prints it (``v ['f']``, ``v ['f', 'd']``, …, ``t ['x', 'a', …]``), the node
  being visited and the recursion stack highlighted in the graph, then the backward order;
* :func:`paths_html` / :func:`paths_text`: ∂target/∂input as a sum over paths, each with
  its local derivatives as numbers and as rules (``1·1·3·(2x)``).

Every list and table is capped (``… and N more``), so a 2,000-node run stays legible.
:func:`static_section` is the part of the static display (``render.static_html``) that
holds the three views; the widget shows them in its own tabs (:data:`TABS`).

The views are made in :mod:`.teaching_forward`, :mod:`.teaching_walk` and
:mod:`.teaching_paths` (over :mod:`.teaching_parts`); this module shows them: the static
section, the notebook display objects (:func:`forward`, :func:`walk_view`, :func:`paths_view`)
and the widget's tabs.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from ..analysis import explanations
from ..analysis.numbers import fmt
from . import render

from .teaching_parts import (  # noqa: F401 - the views shown here, and their names
    ITEMS,
    ROWS,
    _paragraph,
    default_input,
    definition,
    expressions,
    local_text,
)
from .teaching_forward import (  # noqa: F401 - the views shown here, and their names
    forward_html,
    forward_text,
)
from .teaching_walk import (  # noqa: F401 - the views shown here, and their names
    LINES,
    walk_html,
    walk_lines,
    walk_text,
)
from .teaching_paths import (  # noqa: F401 - the views shown here, and their names
    _path_cells,
    paths_html,
    paths_text,
)

__all__ = [
    "expressions",
    "definition",
    "local_text",
    "default_input",
    "forward_html",
    "forward_text",
    "walk_lines",
    "walk_html",
    "walk_text",
    "paths_html",
    "paths_text",
    "static_section",
    "View",
    "forward",
    "walk_view",
    "paths_view",
    "forward_tab",
    "walk_tab",
    "paths_tab",
    "TABS",
    "DEFERRED",
    "ROWS",
    "LINES",
    "ITEMS",
]


# =========================================================================== static display
STATIC_NODES = 20_000  # past this many nodes the static display only says how to see the views


def static_section(trace, cache=None) -> str:
    """The three views for the static display: tables and text, no extra drawings.

    Past ``STATIC_NODES`` nodes it gives the counts and the calls that show the
    views, so a huge run's display stays fast (the views take a second or more there).
    """
    if len(trace.nodes) > STATIC_NODES:
        ins, edges = len(explanations.inputs(trace)), explanations.edge_count(trace)
        return _paragraph(
            html.escape(
                f"{len(trace.nodes):,} nodes, {edges:,} edges, {ins:,} inputs: forward mode needs "
                f"{ins:,} pass{'es' if ins != 1 else ''} through the graph, reverse mode one. "
                "For a graph this big the teaching views are made when asked: "
                "from gradmagic.views import teaching; teaching.forward(gradmagic.last), "
                "teaching.walk_view(gradmagic.last), teaching.paths_view(gradmagic.last)."
            )
        )
    try:
        parts = [
            ("Forward mode against reverse mode", forward_html(trace, cache=cache, draw=False)),
            ("The topological walk", walk_html(trace, cache=cache, draw=False)),
            ("The chain rule as a sum over paths", paths_html(trace, cache=cache, draw=False)),
        ]
    except Exception as exc:  # noqa: BLE001 - a display must not raise
        return _paragraph(html.escape(f"The teaching views could not be made: {exc}"))
    return "".join(f'<h4 style="margin:6px 0 2px 0">{title}</h4>{body}' for title, body in parts)


def _static_teaching(trace, cache=None) -> str:
    """The static copy's teaching section: the three views when the graph is drawn in full.

    Past ``--max-nodes`` (the graph is drawn as a summary) the views would cost many
    times the run itself (every node's tangent, the walk, the best paths, each a pass of
    Python over the graph), so the copy gives the counts and where to see them: the live
    view's Forward, Walk and Paths tabs (made when opened) or ``teaching.forward(...)``.
    """
    limit = render.node_limit(trace)
    if len(trace.nodes) <= limit:
        return static_section(trace, cache)
    ins, edges = len(explanations.inputs(trace)), explanations.edge_count(trace)
    return _paragraph(
        html.escape(
            f"{len(trace.nodes):,} nodes, {edges:,} edges, {ins:,} input{'s' if ins != 1 else ''}: "
            f"forward mode needs {ins:,} pass{'es' if ins != 1 else ''} through the graph, reverse "
            f"mode one. The graph is past --max-nodes {limit:,}, so this copy does not spell the "
            "teaching views out: the live view's Forward, Walk and Paths tabs make them when "
            "opened, and so do from gradmagic.views import teaching; "
            "teaching.forward(gradmagic.last), teaching.walk_view(gradmagic.last), "
            f"teaching.paths_view(gradmagic.last) (or run the cell with --max-nodes {len(trace.nodes)})."
        )
    )


render.STATIC_SECTIONS.append(
    ("Teaching views: forward mode, the topological walk, paths", _static_teaching)
)


# =========================================================================== in a notebook
class View:
    """One teaching view as a notebook output: HTML in a browser, text in a terminal."""

    def __init__(self, html_text: str, text: str):
        self.html = html_text
        self.text = text

    def _repr_html_(self):
        return self.html

    def __repr__(self):
        return self.text


def forward(trace, input=None, step: int | None = None) -> View:
    """Forward mode against reverse mode, for a notebook cell (``forward(gradmagic.last, 'x')``)."""
    return View(forward_html(trace, input, step), forward_text(trace, input))


def walk_view(trace, step: int | None = None) -> View:
    """The topological walk, for a notebook cell; ``step`` highlights one event in the graph."""
    return View(walk_html(trace, step), walk_text(trace))


def paths_view(trace, input=None) -> View:
    """The chain rule as a sum over paths, for a notebook cell."""
    return View(paths_html(trace, input), paths_text(trace, input))


# =========================================================================== widget tabs
# Each maker returns a tab of kind "steps" for the widget's front-end: ``head`` (HTML above
# the stepper), ``frames`` (one per step: ``n`` the node highlighted, ``path`` nodes
# highlighted with it, ``html`` the step's text, ``ev`` grad-field texts set from this step
# on: [node, text, state], state "u" unknown, "p" partial, "" plain), ``total`` and ``note``.
# Only nodes in ``drawn`` (those the widget's graph shows) get events and highlights.
STEP_FRAMES = 600  # steps a tab carries
STEPPED_INPUTS = 4  # inputs the forward and paths tabs step through


def _drawn(context, trace) -> set:
    drawn = (context or {}).get("drawn")
    return set(range(len(trace.nodes))) if drawn is None else set(drawn)


def _esc(text) -> str:
    return html.escape(str(text))


def _stepped_inputs(trace) -> list:
    ins = explanations.inputs(trace)
    first = default_input(trace)
    nodes = trace.nodes
    ordered = sorted(ins, key=lambda i: (i != first, not nodes[i].label, nodes[i].label, i))
    return ordered[:STEPPED_INPUTS]


def _too_big(trace) -> bool:
    return len(trace.nodes) > STATIC_NODES


def forward_tab(trace, report=None, context=None) -> dict | None:
    """The Forward tab: cost and agreement on top, then each pass node by node.

    Past ``STATIC_NODES`` nodes the one "Teaching" tab says how to see the views instead.
    """
    if _too_big(trace):
        return {
            "id": "teaching",
            "title": "Teaching",
            "kind": "html",
            "payload": {"html": static_section(trace)},
        }
    comparison = explanations.forward_vs_reverse(trace)
    head = forward_html(trace, comparison=comparison, draw=False, limit=12, one_pass=False)
    if comparison.error is not None or comparison.inputs == 0:
        return {"id": "forward", "title": "Forward", "kind": "html", "payload": {"html": head}}
    drawn = _drawn(context, trace)
    exprs = expressions(trace)
    frames: list[dict] = []
    stepped = _stepped_inputs(trace)
    for k, i in enumerate(stepped):
        _add_pass_frames(frames, trace, exprs, drawn, comparison.inputs, k, i)
    more = comparison.inputs - len(stepped)
    note = " ".join(
        filter(
            None,
            [
                f"Stepping covers the passes of {len(stepped)} of {comparison.inputs:,} inputs."
                if more > 0
                else "",
                f"Stepping stops after {STEP_FRAMES:,} steps."
                if len(frames) >= STEP_FRAMES
                else "",
            ],
        )
    )
    return _stepped(
        "forward", head, frames, note, "grad fields show each node's tangent: ? not yet computed"
    )


def _add_pass_frames(frames, trace, exprs, drawn, inputs, k, i) -> None:
    """Add to ``frames`` the steps of the forward pass for input ``i`` (pass ``k`` of ``inputs``),
    up to ``STEP_FRAMES`` steps in all."""
    nodes = trace.nodes
    t = explanations.jvp(trace, {i: 1.0})
    x = exprs[i]
    reached = [j for j, r in enumerate(t.reached) if r]
    # the pass starts: every drawn node unknown, those not depending on x at 0
    start = [
        [j, f"∂/∂{x} " + ("?" if t.reached[j] else "0"), "u" if t.reached[j] else ""]
        for j in sorted(drawn)
    ]
    for s, j in enumerate(reached):
        if len(frames) >= STEP_FRAMES:
            break
        node = nodes[j]
        if j == i:
            what = f"seed ∂{x}/∂{x} = 1 (every other input 0)"
        else:
            terms = [
                f"{fmt(d, 4)}×{fmt(t[p], 4)}"
                for p, d in zip(node.parents, node.local)
                if t.reached[p]
            ]
            if len(terms) > ITEMS:
                terms = terms[:ITEMS] + [f"… {len(terms) - ITEMS:,} more"]
            what = f"{' + '.join(terms)} = {fmt(t[j], 6)}"
        frames.append(
            {
                "n": j if j in drawn else -1,
                "path": [p for p in node.parents if p in drawn and t.reached[p]],
                "html": (
                    f"<b>Pass {k + 1} of {inputs:,}</b> (∂/∂{_esc(x)}), node "
                    f"{s + 1} of {len(reached):,}: <code>{_esc(exprs[j])}</code> gets "
                    f"tangent {_esc(what)}"
                    + (
                        f" — the pass ends: ∂{_esc(exprs[trace.target.index])}/∂{_esc(x)}"
                        f" = {_esc(fmt(t.target, 10))}, backward gave "
                        f"{_esc(fmt(nodes[i].grad, 10))}"
                        if s == len(reached) - 1
                        else ""
                    )
                ),
                "ev": (start if s == 0 else [])
                + ([[j, f"∂/∂{x} {fmt(t[j])}", ""]] if j in drawn else []),
            }
        )


def walk_tab(trace, report=None, context=None) -> dict | None:
    """The Walk tab: micrograd's build_topo event by event, then the backward order."""
    if _too_big(trace):
        return None
    walk = explanations.walk(trace)
    drawn = _drawn(context, trace)
    exprs = expressions(trace)
    head = walk_html(trace, walk=walk, draw=False, every_step=False)
    frames: list[dict] = []
    visited = order = 0
    stack = []
    for kind, i in walk.events[:STEP_FRAMES]:
        if kind == "v":
            visited += 1
            stack.append(i)
            what = (
                f"visit <code>{_esc(exprs[i])}</code> (depth {len(stack) - 1}): "
                f"visited has {visited:,} node{'s' if visited != 1 else ''}"
            )
            ev = [[i, f"visited #{visited}", "p"]] if i in drawn else []
        else:
            order += 1
            stack.pop()
            what = (
                f"every input of <code>{_esc(exprs[i])}</code> is done: append it, "
                f"position {order:,} of the order"
            )
            ev = [[i, f"order #{order}", ""]] if i in drawn else []
        frames.append(
            {
                "n": i if i in drawn else -1,
                "path": [j for j in stack[-ITEMS:] if j in drawn],
                "html": f"<b>{'v' if kind == 'v' else 't'}</b> — {what}",
                "ev": ev,
            }
        )
    start = [[j, "not visited", "u"] for j in sorted(drawn)]
    if frames:
        frames[0]["ev"] = start + frames[0]["ev"]
    note = (
        f"Stepping covers the first {STEP_FRAMES:,} of {len(walk.events):,} events."
        if len(walk.events) > STEP_FRAMES
        else ""
    )
    return _stepped(
        "walk", head, frames, note, "green: the node the walk is at; blue: the recursion stack"
    )


def paths_tab(trace, report=None, context=None) -> dict | None:
    """The Paths tab: for each input (up to a few), each listed path highlighted in turn."""
    if _too_big(trace):
        return None
    drawn = _drawn(context, trace)
    exprs = expressions(trace)
    stepped = _stepped_inputs(trace)
    heads = [paths_html(trace, i, draw=False) for i in stepped[:1]]
    frames = []
    for i in stepped:
        result = explanations.paths(trace, i)
        if result.error is not None:
            return {
                "id": "paths",
                "title": "Paths",
                "kind": "html",
                "payload": {"html": paths_html(trace, draw=False)},
            }
        x, f = exprs[i], exprs[trace.target.index]
        for k, path in enumerate(result.paths):
            route, formula, numbers, product = _path_cells(trace, exprs, path)
            frames.append(
                {
                    "n": i if i in drawn else -1,
                    "path": [j for j in path.nodes if j in drawn],
                    "html": (
                        f"<b>∂{_esc(f)}/∂{_esc(x)}</b>, path {k + 1} of {result.count:,}"
                        f"{'' if result.complete else ' (largest first)'}: "
                        f"<code>{_esc(route)}</code><br>{_esc(formula)} = {_esc(numbers)} = "
                        f"<b>{_esc(product)}</b>"
                        + (
                            f"<br>sum of {'the' if result.count == 1 else 'all'} "
                            f"{result.count:,} path{'' if result.count == 1 else 's'} = "
                            f"{_esc(fmt(result.total, 10))} = ∂{_esc(f)}/∂{_esc(x)} (backward: "
                            f"{_esc(fmt(result.grad, 10))})"
                            if k == len(result.paths) - 1
                            else ""
                        )
                    ),
                    "ev": [],
                }
            )
    if not stepped:
        heads = [paths_html(trace, draw=False)]
    return _stepped("paths", "".join(heads), frames, "", "blue: the path; green: the input")


def _stepped(ident: str, head: str, frames: list, note: str, legend: str) -> dict:
    """A tab of kind ``steps``: its ``head`` HTML, then ``frames`` stepped through."""
    payload = {"head": head, "frames": frames, "total": len(frames), "note": note, "legend": legend}
    return {"id": ident, "title": ident.title(), "kind": "steps", "payload": payload}


TABS = [forward_tab, walk_tab, paths_tab]
"""The widget's teaching tabs, makers ``(trace, report, context) -> tab``."""


def _deferrable(trace) -> bool:
    return not _too_big(trace)  # past STATIC_NODES: one short "Teaching" tab, made at once


DEFERRED: dict[Callable[..., Any], tuple[str, str, Callable[[Any], bool] | None]] = {
    forward_tab: ("forward", "Forward", _deferrable),
    walk_tab: ("walk", "Walk", _deferrable),
    paths_tab: ("paths", "Paths", _deferrable),
}
"""The teaching tabs the live view makes when they are opened (``tabs.DEFERRED``)."""
