"""The chain rule as a sum over paths: each path from an input to the target, the product
of the local derivatives along it, and why reverse mode never lists them (numbers from
:mod:`gradmagic.analysis.explanations`).
"""

from __future__ import annotations

import html
import re

from ..analysis import explanations
from ..analysis.numbers import fmt
from ..core.ops import OPS
from . import render
from .teaching_parts import (
    ITEMS,
    _BAD,
    _GOOD,
    _GREY,
    _in_partial,
    _draw,
    _factor,
    _more,
    _paragraph,
    _table,
    default_input,
    definition,
    expressions,
    local_text,
    rule_with,
)


WHY_NOT_ENUMERATE = (
    "Reverse mode never lists paths: each node adds grad(child) × ∂child/∂node once per edge, "
    "so the stretch two paths share is multiplied once, and paths are summed where they meet. "
    "Its work grows with the number of edges; the number of paths can grow exponentially "
    "(each x = x + x doubles it)."
)


# =========================================================================== paths
def _path_cells(trace, exprs, path, limit: int = ITEMS) -> list:
    """[route, formula, numbers, product] of one path, the target first (long ones elided)."""
    steps = path.steps
    if len(steps) > limit:
        shown = list(steps[: limit // 2]) + [None] + list(steps[-(limit - limit // 2) :])
    else:
        shown = list(steps)
    gap = f"… {len(steps) - limit:,} more …"
    route = [exprs[steps[0][0]]] if steps else []
    formula, numbers = [], []
    for step in shown:
        if step is None:
            route.append(gap)
            formula.append(gap)
            numbers.append(gap)
            continue
        c, p, d, slot = step
        route.append(exprs[p])
        formula.append(_factor(local_text(trace, exprs, c, slot)))
        number = fmt(d, 4)
        numbers.append(f"({number})" if number.startswith("-") and numbers else number)
    return [" ← ".join(route), "·".join(formula), "·".join(numbers), fmt(path.product, 6)]


_OP_INDEX = re.compile(r"\(\S+\)#\d+")  # an unnamed op node written by its op: (+)#12


def _operand(trace, exprs, p: int) -> str:
    """Node ``p`` as an operand of a rule: its name, its number, ``(+)#12``, or its
    expression in parentheses (``(x·y)``: a rule's ``a^b`` then reads as written)."""
    text = exprs[p]
    node = trace.nodes[p]
    if node.label or _OP_INDEX.fullmatch(text):
        return text
    if node.is_leaf:
        return f"({text})" if text.startswith(("-", "−")) else text
    return f"({text})"


def _rules(trace, exprs, path) -> list:
    """The rules of the path's ops, each written with its own operands (the op table's
    letters ``a``, ``b`` may be other names of the cell)."""
    out = []
    for c, *_ in path.steps:
        entry = OPS.get(trace.nodes[c].op)
        parents = trace.nodes[c].parents
        if entry is None or not entry.rule or len(parents) > 2:
            continue
        rule = rule_with(entry.rule, [_operand(trace, exprs, p) for p in parents])
        if rule not in out:
            out.append(rule)
    return out


def _paths_head(trace, exprs, result) -> list:
    x, f = exprs[result.input], exprs[trace.target.index]
    n = result.count
    lines = [
        f"∂{f}/∂{x} = the sum over every path from {x} to {f} of the product of the local "
        f"derivatives along it. There {'is' if n == 1 else 'are'} {n:,} path"
        f"{'' if n == 1 else 's'}."
    ]
    if n == 0:
        lines.append(f"{f} does not depend on {x}: ∂{f}/∂{x} = 0.")
    elif result.complete:
        lines.append(
            f"Sum of the {n:,} products = {fmt(result.listed_sum, 10)}; backward's "
            f"gradient ∂{f}/∂{x} = {fmt(result.grad, 10)}."
        )
    else:
        lines.append(
            f"The {len(result.paths)} largest contributions are listed, not the other "
            f"{n - len(result.paths):,}: paths are counted (count(node) = Σ count(input),"
            f" one term per edge) and the largest found best-first, keeping the "
            f"{explanations.TOP} best partial paths at each node, without listing them all. "
            f"Their sum, computed edge by edge as forward mode does, is "
            f"{fmt(result.total, 10)}; backward's gradient is {fmt(result.grad, 10)}."
        )
        lines.append(WHY_NOT_ENUMERATE)
    return lines


def _zero_lines(trace, exprs, result, limit: int = 5) -> list:
    x = exprs[result.input]
    out = []
    for child, parent in result.zero_terms[:limit]:
        what = exprs[parent]
        made = definition(trace, exprs, parent)
        if made and made != what:
            what = f"{what} = {made}"
        local = local_text(trace, exprs, child, trace.nodes[child].parents.index(parent))
        out.append(
            f"{what} ({fmt(trace.nodes[parent].data, 6)}) does not depend on {x}: no "
            f"path, its share ∂{_in_partial(exprs[child])}/∂{_in_partial(exprs[parent])} · "
            f"∂{_in_partial(exprs[parent])}/∂{x} = {_factor(local)} · 0 = 0"
        )
    more = _more(min(limit, len(result.zero_terms)), len(result.zero_terms), "branches")
    return out + ([more] if more else [])


def paths_html(trace, input=None, *, cache=None, draw: bool = True) -> str:
    """The chain rule as a sum over paths for ``input`` (default :func:`default_input`)."""
    out = ['<div class="gradmagic-paths">']
    i = default_input(trace) if input is None else explanations._index(trace, input)
    if i is None:
        return out[0] + _paragraph("This run has no inputs (only constants): no paths.") + "</div>"
    result = explanations.paths(trace, i)
    if result.error is not None:
        return out[0] + _paragraph("⚠ " + html.escape(result.error) + ".") + "</div>"
    exprs = expressions(trace)
    head = _paths_head(trace, exprs, result)
    ok = result.grad == result.total or abs(result.total - result.grad) <= 1e-9 * max(
        1.0, abs(result.grad)
    )
    said = [
        _paragraph(
            ("<b>" + html.escape(line) + "</b>") if k == 0 else html.escape(line),
            (_GOOD if ok else _BAD) if k == 1 else "",
        )
        for k, line in enumerate(head)
    ]
    out += _listing(trace, exprs, result, i, said) if result.paths else said
    zero = _zero_lines(trace, exprs, result)
    if zero:
        lines = "<br>".join(html.escape(z) for z in zero)
        out.append(
            _paragraph(f"Branches that do not depend on {html.escape(exprs[i])}:<br>{lines}", _GREY)
        )
    if draw and result.paths:
        out.append(_draw(trace, cache, path=set(result.paths[0].nodes), current=i))
    out.append("</div>")
    return "".join(out)


def _listing(trace, exprs, result, i, said) -> list:
    """The paths as a table (a short box shows them first), then what they are and sum to,
    and the rules path 1 uses."""
    to = html.escape(exprs[trace.target.index])
    rows = [[str(k + 1)] + _path_cells(trace, exprs, p) for k, p in enumerate(result.paths)]
    out = [
        _paragraph(f"<b>The paths from {html.escape(exprs[i])} to {to}:</b>"),
        # (a row a line: a short box shows several paths, each a scroll away sideways)
        _table(["#", "path", "local derivatives", "numbers", "product"], rows, one_line=True),
        *said,
    ]
    if result.complete and len(result.paths) > 1:
        total = " + ".join(r[4] for r in rows) + " = " + fmt(result.listed_sum, 10)
        out.append(_paragraph(html.escape(total)))
    rules = _rules(trace, exprs, result.paths[0])
    if rules:  # (at the text's own size: 10 px or more wherever it is shown)
        out.append(_paragraph("Rules used on path 1: " + html.escape("; ".join(rules)), _GREY))
    return out


def paths_text(trace, input=None) -> str:
    i = default_input(trace) if input is None else explanations._index(trace, input)
    if i is None:
        return "Paths: this run has no inputs."
    result = explanations.paths(trace, i)
    if result.error is not None:
        return "Paths: " + result.error
    exprs = expressions(trace)
    lines = _paths_head(trace, exprs, result)
    if result.paths:
        rows = [[str(k + 1)] + _path_cells(trace, exprs, p) for k, p in enumerate(result.paths)]
        lines.append(
            render.text_table(["#", "path", "local derivatives", "numbers", "product"], rows)
        )
    lines += _zero_lines(trace, exprs, result)
    return "\n".join(lines)
