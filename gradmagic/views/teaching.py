"""The teaching views of a run: forward mode, the topological walk, the chain rule as paths.

Each view is a pure function of a :class:`gradmagic.analysis.trace.Trace` returning HTML or
plain text (the numbers come from :mod:`gradmagic.analysis.teaching`):

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
holds the three views; the widget shows them in its own tabs.
"""

from __future__ import annotations

import html
import weakref

from ..analysis import teaching
from ..analysis.numbers import fmt
from ..core.ops import OPS
from . import render

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

ROWS = 40  # table rows before "… and N more"
LINES = 16  # lines of the walk's printout before "… N more lines"
ITEMS = 10  # items of a printed list before it is elided
WIDTH = 24  # an unnamed node's expression longer than this is written by its op and index

_GREY = "#4b5563"  # text: 7:1 on the light fill (WCAG AA asks 4.5:1)
_GOOD = "#166534"
_BAD = "#dc2626"

BUILD_TOPO = """topo, visited = [], set()
def build_topo(v):
    if v not in visited:
        visited.add(v)            # v [...]
        for child in v._prev:     # the node's inputs, in order
            build_topo(child)
        topo.append(v)            # t [...]
build_topo(f)"""

WHY_NOT_ENUMERATE = (
    "Reverse mode never lists paths: each node adds grad(child) × ∂child/∂node once per edge, "
    "so the stretch two paths share is multiplied once, and paths are summed where they meet. "
    "Its work grows with the number of edges; the number of paths can grow exponentially "
    "(each x = x + x doubles it)."
)


# =========================================================================== expressions
_SUPER = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2, "neg": 3, "**": 4}
_ATOM = 9


def _const(node):
    """The number of a constant leaf, else None."""
    if node.is_leaf and node.is_constant and node.shape is None:
        return node.data
    return None


def _wrap(text: str, prec: int, above: int) -> str:
    return f"({text})" if prec < above else text


_EXPRESSIONS = weakref.WeakKeyDictionary()  # trace → its expressions (width WIDTH)


def expressions(trace, width: int = WIDTH) -> list:
    """Each node as people write it: its label, its number, or ``3·x²`` from its parents.

    An unnamed expression longer than ``width`` is written ``(op)#i``.
    """
    if width == WIDTH:
        try:
            return _EXPRESSIONS[trace]
        except KeyError:
            pass
        except TypeError:  # a trace that takes no weak references: computed each time
            return _expressions(trace, width)
        out = _EXPRESSIONS[trace] = _expressions(trace, width)
        while len(_EXPRESSIONS) > 2:  # only the latest runs: Out[] keeps every displayed trace
            del _EXPRESSIONS[next(iter(_EXPRESSIONS))]
        return out
    return _expressions(trace, width)


def _expressions(trace, width: int) -> list:
    out, prec = [], []
    g = teaching._graph(trace)
    nodes = trace.nodes
    for i, (label, parents) in enumerate(zip(g.labels, g.parents)):
        if label:
            text, p = label, _ATOM
        elif not parents:
            text, p = fmt(nodes[i].data, 4), _ATOM
        else:
            text, p = _compose(trace, nodes[i], out, prec, width)
        out.append(text)
        prec.append(p)
    return out


def definition(trace, exprs, index: int, width: int = 40) -> str:
    """How node ``index`` was computed from its inputs (``5·y²``), '' for a leaf."""
    node = trace.nodes[index]
    if node.is_leaf:
        return ""
    prec = {}
    for p in node.parents:
        parent = trace.nodes[p]
        prec[p] = (
            _ATOM
            if parent.label or parent.is_leaf or exprs[p].startswith("(")
            else _PREC.get(parent.op, _ATOM)
        )
    return _compose(trace, node, exprs, prec, width)[0]


def _compose(trace, node, out, prec, width) -> tuple:
    """(text, precedence) of an op node from its parents' texts."""
    nodes = trace.nodes
    op = node.op
    sym = getattr(OPS.get(op), "symbol", op)
    args = [(out[p], prec[p]) for p in node.parents]
    p = _PREC.get(op, _ATOM)
    text = None
    if len(args) == 2 and op in ("+", "-"):
        text = f"{args[0][0]} {'−' if op == '-' else '+'} {_wrap(*args[1], p + 1)}"
    elif len(args) == 2 and op == "*":
        text = f"{_wrap(*args[0], p)}·{_wrap(*args[1], p)}"
    elif len(args) == 2 and op in ("/", "//", "%"):
        text = f"{_wrap(*args[0], p)}{sym}{_wrap(*args[1], p + 1)}"
    elif len(args) == 2 and op == "**":
        exponent = _const(nodes[node.parents[1]])
        base = _wrap(*args[0], p + 1)
        if (
            isinstance(exponent, (int, float))
            and float(exponent).is_integer()
            and abs(exponent) < 100
        ):
            text = base + str(int(exponent)).translate(_SUPER)
        else:
            text = f"{base}^{_wrap(*args[1], p + 1)}"
    elif len(args) == 1 and op == "neg":
        text = "−" + _wrap(*args[0], p + 1)
    elif len(args) == 1:
        text = f"{sym}({args[0][0]})"
        p = _ATOM
    if text is None or len(text) > width:
        text, p = f"({sym})#{node.index}", _ATOM
    return text, p


def _d(text: str) -> str:
    """A name inside ∂…/∂…: ``x`` or ``(x·y)``."""
    return text if _factor(text) == text else f"({text})"


def _is_name(text: str) -> bool:
    return text.isidentifier() and "·" not in text  # Python lets · continue a name


def local_text(trace, exprs, child: int, slot: int) -> str:
    """∂child/∂(its parent at ``slot``) as a formula in the nodes' names (``2x``, ``y``, ``1``).

    Falls back to the number for operations without a short formula here; the
    op's rule in words (``render.op_entry(...).rule``) is always shown beside it.
    """
    node = trace.nodes[child]
    op = node.op
    a = exprs[node.parents[0]]
    b = exprs[node.parents[1]] if len(node.parents) > 1 else None
    prec = _PREC
    number = fmt(node.local[slot], 4) if node.local is not None else "?"
    if op == "+":
        return "1"
    if op == "-":
        return "1" if slot == 0 else "−1"
    if op == "neg":
        return "−1"
    if op == "*":
        return exprs[node.parents[1 - slot]]
    if op == "/":
        return f"1/{b}" if slot == 0 else f"−{a}/{b}²"
    if op == "**" and slot == 0:
        c = _const(trace.nodes[node.parents[1]])
        if isinstance(c, (int, float)) and float(c).is_integer() and abs(c) < 100:
            c = int(c)
            if c == 1:
                return "1"
            if c == 2:
                return f"2{a}" if _is_name(a) else f"2·({a})"
            return f"{c}{a if _is_name(a) else '(' + a + ')'}" + str(c - 1).translate(_SUPER)
        return number
    if op == "exp":
        return f"exp({a})"
    if op == "log":
        return f"1/{a}"
    if op == "tanh":
        return f"1 − tanh²({a})"
    if op in ("sin", "cos"):
        return f"cos({a})" if op == "sin" else f"−sin({a})"
    del prec
    return number


def _factor(text: str) -> str:
    """A factor of a product, in parentheses unless it is a number or a name."""
    plain = text.replace(".", "").replace("−", "").replace("-", "").replace("e", "")
    return text if _is_name(text) or plain.isdigit() else f"({text})"


def default_input(trace):
    """The input the views open on: named inputs first, by name (x before y)."""
    ins = teaching.inputs(trace)
    if not ins:
        return None
    nodes = trace.nodes
    return min(ins, key=lambda i: (not nodes[i].label, nodes[i].label, i))


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


def _code(text) -> str:
    return f"<code>{html.escape(str(text))}</code>"


def _p(text: str, colour: str = "") -> str:
    style = "margin:2px 0" + (f"; color:{colour}" if colour else "")
    return f'<p style="{style}">{text}</p>'


def _more(shown: int, total: int, what: str) -> str:
    return f"… and {total - shown:,} more {what}" if total > shown else ""


def _table(header, rows, colours=None) -> str:
    return render._html_table(header, rows, colours)


def _draw(trace, cache, extra_dot: str = "", **options) -> str:
    """The run's graph (a summary past max_nodes, always keeping the highlighted nodes)."""
    summary = render.summarise(trace)
    if summary is not None:
        keep = (
            set(summary.shown)
            | set(options.get("path", ()))
            | ({options["current"]} if options.get("current") is not None else set())
        )
        options["subset"] = sorted(keep)
    source = render.to_dot(trace, **options)
    if extra_dot:
        source = source[: source.rfind("}")] + extra_dot + "}"
    image = cache.get(source) if cache is not None else None
    if image is None:
        try:
            image = render.svg(source)
        except Exception as exc:  # noqa: BLE001 - any Graphviz failure becomes a message
            return render._no_graph(exc, source)
        if cache is not None:
            cache[source] = image
    head = ""
    if summary is not None:
        head = _p(
            html.escape(
                f"{summary.counts}. Drawn: the nodes nearest the target, the "
                "named nodes and the highlighted ones."
            )
        )
    return head + f'<div style="overflow-x:auto; max-width:100%">{render.fit(image)}</div>'


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
    others = len(teaching.inputs(trace)) - 1
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
    comparison = teaching.forward_vs_reverse(trace) if comparison is None else comparison
    out = ['<div class="gradmagic-forward">']
    if comparison.error is not None:
        out.append(
            _p(
                "⚠ " + html.escape(comparison.error) + ". Backward (reverse mode) "
                "handles tensors; the other teaching views need scalar nodes too."
            )
        )
        return "".join(out) + "</div>"
    if comparison.inputs == 0:
        return (
            out[0] + _p("This run has no inputs (only constants): no tangents to carry.") + "</div>"
        )
    exprs = expressions(trace)
    for line in _cost_lines(trace, comparison):
        colour = _GOOD if line.startswith("✓") else _BAD if line.startswith("✗") else ""
        out.append(_p(html.escape(line), colour))
    header, rows, colours = _agreement_rows(trace, exprs, comparison, limit)
    out.append(_table(header, rows, colours))
    more = _more(len(rows), comparison.inputs, "inputs")
    if more:
        out.append(_p(html.escape(more)))
    if not one_pass:  # the widget steps through the passes itself
        return "".join(out) + "</div>"
    i = default_input(trace) if input is None else teaching._index(trace, input)
    t = teaching.jvp(trace, {i: 1.0})
    reached = [k for k, r in enumerate(t.reached) if r]
    upto = len(reached) if step is None else max(1, min(step, len(reached)))
    out.append(_p("<b>" + html.escape(_pass_header(trace, exprs, i)) + "</b>"))
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
            _p(
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
            _p(
                html.escape(
                    f"The other {len(trace.nodes) - len(reached):,} nodes do not "
                    f"depend on {exprs[i]}: their tangent is 0."
                ),
                _GREY,
            )
        )
    if draw:
        done = set(reached[:upto])
        grad_text = [
            f"{fmt(node.grad)} · ∂/∂{exprs[i]} "
            + (fmt(t[k]) if k in done else ("0" if not t.reached[k] else "?"))
            for k, node in enumerate(trace.nodes)
        ]
        current = reached[upto - 1] if step is not None else None
        out.append(
            _draw(trace, cache, grad_text=grad_text, current=current, path=set(reached[:upto]))
        )
    out.append("</div>")
    return "".join(out)


def forward_text(trace, input=None, limit: int = 20) -> str:
    """Forward mode as plain text: cost, agreement, and the chosen input's pass."""
    comparison = teaching.forward_vs_reverse(trace)
    if comparison.error is not None:
        return "Forward mode: " + comparison.error
    if comparison.inputs == 0:
        return "Forward mode: this run has no inputs."
    exprs = expressions(trace)
    lines = _cost_lines(trace, comparison)
    header, rows, _ = _agreement_rows(trace, exprs, comparison, limit)
    lines.append(render._text_table(header, rows))
    more = _more(len(rows), comparison.inputs, "inputs")
    if more:
        lines.append(more)
    i = default_input(trace) if input is None else teaching._index(trace, input)
    t = teaching.jvp(trace, {i: 1.0})
    reached = [k for k, r in enumerate(t.reached) if r]
    rows = _forward_rows(trace, exprs, t, i, reached[:limit])
    lines.append(_pass_header(trace, exprs, i))
    lines.append(render._text_table(["#", "node", "op", "sum", "tangent"], rows))
    more = _more(len(rows), len(reached), "nodes")
    if more:
        lines.append(more)
    return "\n".join(lines)


# =========================================================================== the walk
def walk_lines(trace, walk=None, *, named_only: bool = True, limit: int | None = None) -> list:
    """micrograd's printout: ``v [...]`` after each visit, ``t [...]`` after each append.

    ``named_only`` prints labelled nodes only, as micrograd's lecture does (its constants and
    intermediate results have no label); otherwise every node, by its expression.
    With ``limit``, only the first ``limit - 1`` lines and the last one are made
    (each line is a list as long as the walk so far: all of them would be quadratic).
    """
    walk = teaching.walk(trace) if walk is None else walk
    labels = teaching._graph(trace).labels
    names = labels if named_only else expressions(trace)
    events = [(kind, i) for kind, i in walk.events if not named_only or labels[i]]
    keep = (
        range(len(events))
        if limit is None or len(events) <= limit
        else list(range(limit - 1)) + [len(events) - 1]
    )
    keep = set(keep)
    visited, order, out = [], [], []
    for k, (kind, i) in enumerate(events):
        (visited if kind == "v" else order).append(names[i])
        if k in keep:
            out.append((kind, list(visited if kind == "v" else order)))
    return out


def _printout(trace, walk, limit: int = LINES) -> list:
    labels = teaching._graph(trace).labels
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
    walk = teaching.walk(trace) if walk is None else walk
    exprs = expressions(trace)
    nodes = trace.nodes
    total = len(walk.events)
    out = [
        '<div class="gradmagic-walk">',
        _p(
            "The depth-first walk of micrograd's <code>build_topo</code>, from the target: "
            "visit a node, walk into each of its inputs, then append it to the order. "
            "Every node lands in the order after all its inputs."
        ),
        f'<pre style="margin:2px 0; font-size:11px">{html.escape(BUILD_TOPO)}</pre>',
    ]
    unnamed = sum(1 for n in nodes if not n.label)
    out.append(
        _p(
            "<b>As micrograd's lecture prints it</b> (labelled nodes"
            + (
                f"; the {unnamed:,} unnamed constants and intermediate results are walked "
                "too, see the steps"
                if unnamed
                else ""
            )
            + "):"
        )
    )
    out.append(
        f'<pre style="margin:2px 0">{html.escape(chr(10).join(_printout(trace, walk)))}</pre>'
    )
    if step is not None:
        step = max(1, min(step, total))
        visited, order, (kind, i) = walk.at(step)
        stack = walk.depth(step)
        what = (
            f"visit {exprs[i]} (depth {len(stack) - 1})"
            if kind == "v"
            else f"all inputs of {exprs[i]} are done: append it to the order"
        )
        out.append(_p(html.escape(f"Step {step} of {total}: {what}.")))
        out.append(
            f'<pre style="margin:2px 0">{html.escape("v " + _elide([exprs[k] for k in visited]))}\n'
            f"{html.escape('t ' + _elide([exprs[k] for k in order]))}</pre>"
        )
        if draw:
            out.append(
                _draw(trace, cache, extra_dot=_unreached_dot(walk), path=set(stack), current=i)
            )
    out.append(
        _p(
            html.escape(
                "Backward processes the reverse of the order: "
                + " → ".join(_elide_names([exprs[k] for k in walk.backward]))
                + "."
            )
        )
    )
    note = _unreached_note(trace, walk)
    if note:
        out.append(_p(html.escape(note), _GREY))
    if step is None and every_step:
        rows = [
            [str(k + 1), exprs[i], "visit" if kind == "v" else "append"]
            for k, (kind, i) in enumerate(walk.events[:limit])
        ]
        out.append(
            f"<details><summary>Every step ({total:,})</summary>"
            + _table(["step", "node", "event"], rows)
            + (_p(html.escape(_more(len(rows), total, "steps"))) if total > limit else "")
            + "</details>"
        )
        if draw and walk.unreached:
            out.append(_draw(trace, cache, extra_dot=_unreached_dot(walk)))
    out.append("</div>")
    return "".join(out)


def _elide_names(names: list, limit: int = ITEMS) -> list:
    if len(names) <= limit:
        return names
    return (
        names[: limit // 2] + [f"… {len(names) - limit:,} more …"] + names[-(limit - limit // 2) :]
    )


def walk_text(trace, walk=None) -> str:
    walk = teaching.walk(trace) if walk is None else walk
    exprs = expressions(trace)
    lines = ["The topological walk (micrograd's build_topo, from the target):"]
    lines += _printout(trace, walk)
    lines.append("Backward order: " + " → ".join(_elide_names([exprs[k] for k in walk.backward])))
    note = _unreached_note(trace, walk)
    if note:
        lines.append(note)
    return "\n".join(lines)


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


def _rules(trace, path) -> list:
    out = []
    for c, *_ in path.steps:
        entry = OPS.get(trace.nodes[c].op)
        if entry is not None and entry.rule not in out:
            out.append(entry.rule)
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
            f"{teaching.TOP} best partial paths at each node, without listing them all. "
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
            f"path, its share ∂{_d(exprs[child])}/∂{_d(exprs[parent])} · "
            f"∂{_d(exprs[parent])}/∂{x} = {_factor(local)} · 0 = 0"
        )
    more = _more(min(limit, len(result.zero_terms)), len(result.zero_terms), "branches")
    return out + ([more] if more else [])


def paths_html(trace, input=None, *, cache=None, draw: bool = True) -> str:
    """The chain rule as a sum over paths for ``input`` (default :func:`default_input`)."""
    out = ['<div class="gradmagic-paths">']
    i = default_input(trace) if input is None else teaching._index(trace, input)
    if i is None:
        return out[0] + _p("This run has no inputs (only constants): no paths.") + "</div>"
    result = teaching.paths(trace, i)
    if result.error is not None:
        return out[0] + _p("⚠ " + html.escape(result.error) + ".") + "</div>"
    exprs = expressions(trace)
    head = _paths_head(trace, exprs, result)
    ok = result.grad == result.total or abs(result.total - result.grad) <= 1e-9 * max(
        1.0, abs(result.grad)
    )
    for k, line in enumerate(head):
        out.append(
            _p(
                ("<b>" + html.escape(line) + "</b>") if k == 0 else html.escape(line),
                (_GOOD if ok else _BAD) if k == 1 else "",
            )
        )
    if result.paths:
        rows = [[str(k + 1)] + _path_cells(trace, exprs, p) for k, p in enumerate(result.paths)]
        out.append(_table(["#", "path", "local derivatives", "numbers", "product"], rows))
        if result.complete and len(result.paths) > 1:
            out.append(
                _p(html.escape(" + ".join(r[4] for r in rows) + " = " + fmt(result.listed_sum, 10)))
            )
        rules = _rules(trace, result.paths[0])
        if rules:
            out.append(
                _p(
                    "<small>Rules used on path 1: " + html.escape("; ".join(rules)) + "</small>",
                    _GREY,
                )
            )
    zero = _zero_lines(trace, exprs, result)
    if zero:
        out.append(
            _p(
                "Branches that do not depend on "
                + html.escape(exprs[i])
                + ":<br>"
                + "<br>".join(html.escape(z) for z in zero),
                _GREY,
            )
        )
    if draw and result.paths:
        out.append(_draw(trace, cache, path=set(result.paths[0].nodes), current=i))
    out.append("</div>")
    return "".join(out)


def paths_text(trace, input=None) -> str:
    i = default_input(trace) if input is None else teaching._index(trace, input)
    if i is None:
        return "Paths: this run has no inputs."
    result = teaching.paths(trace, i)
    if result.error is not None:
        return "Paths: " + result.error
    exprs = expressions(trace)
    lines = _paths_head(trace, exprs, result)
    if result.paths:
        rows = [[str(k + 1)] + _path_cells(trace, exprs, p) for k, p in enumerate(result.paths)]
        lines.append(
            render._text_table(["#", "path", "local derivatives", "numbers", "product"], rows)
        )
    lines += _zero_lines(trace, exprs, result)
    return "\n".join(lines)


# =========================================================================== static display
STATIC_NODES = 20_000  # past this many nodes the static display only says how to see the views


def static_section(trace, cache=None) -> str:
    """The three views for the static display: tables and text, no extra drawings.

    Past ``STATIC_NODES`` nodes it gives the counts and the calls that show the
    views, so a huge run's display stays fast (the views take a second or more there).
    """
    if len(trace.nodes) > STATIC_NODES:
        ins, edges = len(teaching.inputs(trace)), teaching.edge_count(trace)
        return _p(
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
        return _p(html.escape(f"The teaching views could not be made: {exc}"))
    return "".join(f'<h4 style="margin:6px 0 2px 0">{title}</h4>{body}' for title, body in parts)


def _static_teaching(trace, cache=None) -> str:
    """The static copy's teaching section: the three views when the graph is drawn in full.

    Past ``--max-nodes`` (the graph is drawn as a summary) the views would cost many
    times the run itself (every node's tangent, the walk, the best paths, each a pass of
    Python over the graph), so the copy gives the counts and where to see them: the live
    view's Forward, Walk and Paths tabs (made when opened) or ``teaching.forward(...)``.
    """
    limit = render._max_nodes(trace)
    if len(trace.nodes) <= limit:
        return static_section(trace, cache)
    ins, edges = len(teaching.inputs(trace)), teaching.edge_count(trace)
    return _p(
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
    ins = teaching.inputs(trace)
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
    comparison = teaching.forward_vs_reverse(trace)
    head = forward_html(trace, comparison=comparison, draw=False, limit=12, one_pass=False)
    if comparison.error is not None or comparison.inputs == 0:
        return {"id": "forward", "title": "Forward", "kind": "html", "payload": {"html": head}}
    drawn = _drawn(context, trace)
    exprs = expressions(trace)
    nodes = trace.nodes
    frames = []
    stepped = _stepped_inputs(trace)
    for k, i in enumerate(stepped):
        t = teaching.jvp(trace, {i: 1.0})
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
                        f"<b>Pass {k + 1} of {comparison.inputs:,}</b> (∂/∂{_esc(x)}), node "
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
    return {
        "id": "forward",
        "title": "Forward",
        "kind": "steps",
        "payload": {
            "head": head,
            "frames": frames,
            "total": len(frames),
            "note": note,
            "legend": "grad fields show each node's tangent: ? not yet computed",
        },
    }


def walk_tab(trace, report=None, context=None) -> dict | None:
    """The Walk tab: micrograd's build_topo event by event, then the backward order."""
    if _too_big(trace):
        return None
    walk = teaching.walk(trace)
    drawn = _drawn(context, trace)
    exprs = expressions(trace)
    head = walk_html(trace, walk=walk, draw=False, every_step=False)
    frames = []
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
    return {
        "id": "walk",
        "title": "Walk",
        "kind": "steps",
        "payload": {
            "head": head,
            "frames": frames,
            "total": len(frames),
            "note": note,
            "legend": "green: the node the walk is at; blue: the recursion stack",
        },
    }


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
        result = teaching.paths(trace, i)
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
    return {
        "id": "paths",
        "title": "Paths",
        "kind": "steps",
        "payload": {
            "head": "".join(heads),
            "frames": frames,
            "total": len(frames),
            "note": "",
            "legend": "blue: the path; green: the input",
        },
    }


TABS = [forward_tab, walk_tab, paths_tab]
"""The widget's teaching tabs, makers ``(trace, report, context) -> tab``."""


def _deferrable(trace) -> bool:
    return not _too_big(trace)  # past STATIC_NODES: one short "Teaching" tab, made at once


DEFERRED = {
    forward_tab: ("forward", "Forward", _deferrable),
    walk_tab: ("walk", "Walk", _deferrable),
    paths_tab: ("paths", "Paths", _deferrable),
}
"""The teaching tabs the live view makes when they are opened (``tabs.DEFERRED``)."""
