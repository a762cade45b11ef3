"""Forward mode beside reverse mode: each input's tangent carried through the graph, node by
node, and the count of passes each mode needs (numbers from
:mod:`gradmagic.analysis.explanations`).
"""

from __future__ import annotations

import html

from ..analysis import explanations
from ..analysis.numbers import fmt
from . import render
from .teaching_parts import (
    ITEMS,
    ROWS,
    _BAD,
    _GOOD,
    _GREY,
    _draw,
    _more,
    _paragraph,
    _table,
    default_input,
    expressions,
)


# =========================================================================== forward mode
def _forward_rows(trace, exprs, tangents, input_index, which) -> list:
    """Rows of one pass for the nodes ``which``: node, op, the sum it does, tangent."""
    nodes = trace.nodes
    name = exprs[input_index]
    rows = []
    for i in which:
        node = nodes[i]
        if i == input_index:
            rows.append(
                [str(i), exprs[i], "input", f"seed ∂{name}/∂{name} = 1", fmt(tangents[i], 6)]
            )
            continue
        terms = []
        for p, d in zip(node.parents, node.local):
            if tangents.reached[p]:
                terms.append(f"{fmt(d, 4)}×{fmt(tangents[p], 4)}")
        if len(terms) > ITEMS:
            terms = terms[:ITEMS] + [f"… {len(terms) - ITEMS:,} more"]
        rows.append(
            [str(i), exprs[i], render.op_symbol(trace, i), " + ".join(terms), fmt(tangents[i], 6)]
        )
    return rows


def _pass_header(trace, exprs, i) -> str:
    others = len(explanations.inputs(trace)) - 1
    return (
        f"Forward pass for {exprs[i]}: seed ∂{exprs[i]}/∂{exprs[i]} = 1"
        + (f" and 0 for the other {others:,} input{'s' if others != 1 else ''}" if others else "")
        + "; each node, parents first, adds ∂node/∂parent × the parent's tangent. "
        "Nodes that do not depend on " + exprs[i] + " keep tangent 0 and are skipped."
    )


def _cost_lines(trace, comparison) -> list:
    c = comparison
    n = c.inputs
    lines = [
        f"Forward mode: {n:,} input{'s' if n != 1 else ''} → {n:,} pass{'es' if n != 1 else ''}"
        f" through the graph, {c.forward_operations:,} multiply-adds in all. "
        f"Reverse mode: 1 backward pass, {c.edges:,} multiply-adds (one per edge), "
        f"every input's gradient at once."
    ]
    if c.passes:
        ran = len(c.passes)
        where = "" if c.complete else f" (the first {ran:,} passes were run; the rest are counted)"
        if c.agree:
            lines.append(
                f"✓ Forward and reverse mode agree on all {ran:,} gradients{where}: "
                f"largest difference {fmt(c.worst, 3)}."
            )
        else:
            bad = sum(1 for p in c.passes if not p.agrees)
            lines.append(
                f"✗ Forward and reverse mode differ on {bad:,} of {ran:,} "
                f"gradients{where}: largest difference {fmt(c.worst, 3)}."
            )
    return lines


def _agreement_rows(trace, exprs, comparison, limit):
    target = exprs[trace.target.index]
    rows, colours = [], []
    for p in comparison.passes[:limit]:
        rows.append(
            [
                exprs[p.index],
                fmt(p.tangent, 10),
                fmt(p.grad, 10),
                fmt(p.difference, 3),
                f"{p.operations:,}",
                "✓" if p.agrees else "✗",
            ]
        )
        colours.append("" if p.agrees else render.FILL["fail"])
    header = [
        "input",
        f"forward ∂{target}/∂input",
        "reverse (grad)",
        "|difference|",
        "multiply-adds",
        "agree",
    ]
    return header, rows, colours


def forward_html(
    trace,
    input=None,
    step: int | None = None,
    *,
    cache=None,
    comparison=None,
    draw: bool = True,
    limit: int = ROWS,
    one_pass: bool = True,
) -> str:
    """Forward mode for ``input`` (a name or index; default :func:`default_input`).

    ``step`` (1-based, over the nodes the pass computes) stops the pass after that many
    nodes and highlights the last one; None shows the finished pass.
    """
    comparison = explanations.forward_vs_reverse(trace) if comparison is None else comparison
    out = ['<div class="gradmagic-forward">']
    if comparison.error is not None:
        out.append(
            _paragraph(
                "⚠ " + html.escape(comparison.error) + ". Backward (reverse mode) "
                "handles tensors; the other teaching views need scalar nodes too."
            )
        )
        return "".join(out) + "</div>"
    if comparison.inputs == 0:
        return (
            out[0]
            + _paragraph("This run has no inputs (only constants): no tangents to carry.")
            + "</div>"
        )
    exprs = expressions(trace)
    out += _comparison_parts(trace, exprs, comparison, limit)
    if not one_pass:  # the widget steps through the passes itself
        return "".join(out) + "</div>"
    i = default_input(trace) if input is None else explanations._index(trace, input)
    out += _pass_parts(trace, exprs, i, step, limit, cache, draw)
    out.append("</div>")
    return "".join(out)


def _comparison_parts(trace, exprs, comparison, limit) -> list:
    """The cost of forward against reverse mode, and their agreement on every gradient."""
    out = []
    for line in _cost_lines(trace, comparison):
        colour = _GOOD if line.startswith("✓") else _BAD if line.startswith("✗") else ""
        out.append(_paragraph(html.escape(line), colour))
    header, rows, colours = _agreement_rows(trace, exprs, comparison, limit)
    out.append(_table(header, rows, colours))
    more = _more(len(rows), comparison.inputs, "inputs")
    if more:
        out.append(_paragraph(html.escape(more)))
    return out


def _pass_parts(trace, exprs, i, step, limit, cache, draw) -> list:
    """One forward pass for input ``i``: its nodes' tangents, up to ``step``, and the drawing."""
    out = []
    t = explanations.jvp(trace, {i: 1.0})
    reached = [k for k, r in enumerate(t.reached) if r]
    upto = len(reached) if step is None else max(1, min(step, len(reached)))
    out.append(_paragraph("<b>" + html.escape(_pass_header(trace, exprs, i)) + "</b>"))
    done = reached[:upto]
    if len(done) > limit:  # the start of the pass and its current end
        head, tail = done[: limit // 2], done[-(limit - limit // 2) :]
        shown = (
            _forward_rows(trace, exprs, t, i, head)
            + [["…", f"{len(done) - limit:,} more nodes", "", "", ""]]
            + _forward_rows(trace, exprs, t, i, tail)
        )
    else:
        shown = _forward_rows(trace, exprs, t, i, done)
    if step is not None:
        last = shown[-1]
        out.append(
            _paragraph(
                html.escape(
                    f"Step {upto} of {len(reached)}: {last[1]} gets tangent {last[4]} ({last[3]})."
                )
            )
        )
    colours = [render.FILL["current"] if step is not None and r is shown[-1] else "" for r in shown]
    out.append(
        _table(
            ["#", "node", "op", "Σ ∂node/∂parent × tangent(parent)", f"tangent ∂·/∂{exprs[i]}"],
            shown,
            colours,
        )
    )
    if step is None and len(reached) < len(trace.nodes):
        out.append(
            _paragraph(
                html.escape(
                    f"The other {len(trace.nodes) - len(reached):,} nodes do not "
                    f"depend on {exprs[i]}: their tangent is 0."
                ),
                _GREY,
            )
        )
    if draw:
        done_set = set(reached[:upto])
        grad_text = [
            f"{fmt(node.grad)} · ∂/∂{exprs[i]} "
            + (fmt(t[k]) if k in done_set else ("0" if not t.reached[k] else "?"))
            for k, node in enumerate(trace.nodes)
        ]
        current = reached[upto - 1] if step is not None else None
        out.append(
            _draw(trace, cache, grad_text=grad_text, current=current, path=set(reached[:upto]))
        )
    return out


def forward_text(trace, input=None, limit: int = 20) -> str:
    """Forward mode as plain text: cost, agreement, and the chosen input's pass."""
    comparison = explanations.forward_vs_reverse(trace)
    if comparison.error is not None:
        return "Forward mode: " + comparison.error
    if comparison.inputs == 0:
        return "Forward mode: this run has no inputs."
    exprs = expressions(trace)
    lines = _cost_lines(trace, comparison)
    header, rows, _ = _agreement_rows(trace, exprs, comparison, limit)
    lines.append(render.text_table(header, rows))
    more = _more(len(rows), comparison.inputs, "inputs")
    if more:
        lines.append(more)
    i = default_input(trace) if input is None else explanations._index(trace, input)
    t = explanations.jvp(trace, {i: 1.0})
    reached = [k for k, r in enumerate(t.reached) if r]
    rows = _forward_rows(trace, exprs, t, i, reached[:limit])
    lines.append(_pass_header(trace, exprs, i))
    lines.append(render.text_table(["#", "node", "op", "sum", "tangent"], rows))
    more = _more(len(rows), len(reached), "nodes")
    if more:
        lines.append(more)
    return "\n".join(lines)
