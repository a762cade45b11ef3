"""A run's static page and its text, and the one place the other views import from.

:func:`static_html` is the whole run without widgets (headline, answers, graph, check and
gradient tables), :func:`text` the same for a terminal. Everything here is a pure function of a
:class:`gradmagic.analysis.trace.Trace` (and optionally a
:class:`gradmagic.analysis.check.CheckReport`) returning a string, so the same views serve the
widget, the static ``text/html`` fallback and a terminal. Nothing here imports ipywidgets.

The parts live in modules of their own: :mod:`.formatting` (numbers on one line, colours),
:mod:`.dot` (the graph as DOT), :mod:`.summary` (what a big graph draws instead),
:mod:`.drawing` (``dot`` run as a bounded process) and :mod:`.tables`. Their public names are
imported here too, so ``render.to_dot`` and the like keep working.

The headline counts the run's *inputs* (:func:`inputs`): named leaves, not the unnamed
constants written in the cell; the text, HTML and widget views share it.
"""

from __future__ import annotations

import html
import re

from ..analysis.numbers import SMALL, all_finite, dims  # noqa: F401 - part of this module's API
from .dot import (  # noqa: F401 - re-exported
    LAYOUT_EXACT,
    MARKED,
    Folded,
    best_direction,
    children_among,
    directions,
    drawn_nodes,
    escape_record,
    escape_string,
    folded,
    folded_label,
    layout_attrs,
    legend_html,
    op_entry,
    op_label,
    op_labels,
    op_symbol,
    own_dot,
    own_note,
    statuses,
    to_dot,
    use_count,
)
from .drawing import (  # noqa: F401 - re-exported
    MISSING_DOT,
    DrawError,
    dot_process,
    draw_failure,
    svg,
    svg_data_uri,
)
from .formatting import (  # noqa: F401 - re-exported
    FILL,
    LINE,
    UNDEFINED,
    column_figures,
    column_text,
    figure,
    fmt,
    full,
    magnitude,
    md_code,
    undefined_grad,
    whole_numbers,
)
from .summary import (  # noqa: F401 - re-exported
    DEFAULT_MAX_NODES,
    DRAW_LIMIT,
    LAYOUT_LIMIT,
    NAMED,
    NEIGHBOURHOOD,
    drawable,
    layout_size,
    node_limit,
    summarise,
)
from .tables import (  # noqa: F401 - re-exported
    SORT_KEYS,
    answer_rows,
    answers_head,
    answers_html,
    answers_text,
    flag_words,
    flags_text,
    html_table,
    node_order,
    nodes_table_html,
    nodes_table_text,
    report_head,
    report_html,
    report_text,
    table_html,
    text_table,
    torch_html,
    torch_text,
)

__all__ = [
    "fmt",
    "figure",
    "full",
    "dims",
    "folded",
    "Folded",
    "drawn_nodes",
    "children_among",
    "layout_attrs",
    "svg_data_uri",
    "escape_record",
    "escape_string",
    "to_dot",
    "summarise",
    "svg",
    "fit",
    "graph_html",
    "own_dot",
    "own_graph_html",
    "legend_html",
    "op_label",
    "node_order",
    "op_entry",
    "op_symbol",
    "nodes_table_html",
    "table_html",
    "nodes_table_text",
    "column_figures",
    "column_text",
    "op_labels",
    "flags_text",
    "cut_text",
    "report_html",
    "report_text",
    "answers_html",
    "answers_text",
    "torch_html",
    "torch_text",
    "inputs",
    "headline",
    "run_notes",
    "static_html",
    "text",
    "MISSING_DOT",
]

_SUMMARISE = object()  # graph_html's default: summarise the trace itself
GRAPH_HEIGHT = 600  # px: the static graph scrolls past this height


def graph_html(
    trace,
    report=None,
    *,
    cache: dict | None = None,
    max_nodes=None,
    summary=_SUMMARISE,
    dot: str | None = None,
    **dot_options,
) -> str:
    """The static Graph view: an ``<img>`` of the SVG scaled to the output's width.

    A small graph is drawn in the direction that fits the width (:func:`choose_dot`);
    the image shrinks to the width, at most ``SHRINK`` times, and past that its box
    scrolls, so the whole picture can always be reached. Without Graphviz's ``dot`` program
    it says so in one line (the live view draws the graph in the browser
    without it) and leaves the DOT source folded away. ``cache`` maps DOT
    source → SVG between calls. ``summary`` is the trace's :func:`summarise`
    result when the caller already has it (None: draw every node), ``dot`` the DOT
    source when the caller already made it.
    """
    if summary is _SUMMARISE:
        summary = summarise(trace, max_nodes)
    parts = []
    if summary is not None:
        dot_options.setdefault("subset", summary.shown)
        parts.append(
            f'<p style="margin:0 0 4px 0"><b>{html.escape(summary.counts)}</b><br>'
            f"{md_code(summary.note)}</p>"
        )
    if dot is None and summary is not None and summary.dot is not None:
        dot = summary.static or summary.dot  # grouped by the code: text kept at 10 px, it scrolls
        shrink = GROUPED_SHRINK
    else:
        shrink = SHRINK
    if dot is not None:
        source = dot
    elif "rankdir" in dot_options or dot_options.get("path") or dot_options.get("current"):
        source = to_dot(trace, report, **dot_options)
    else:
        cache = {} if cache is None else cache
        source = choose_dot(
            trace, report, subset=dot_options.pop("subset", None), cache=cache, **dot_options
        )
    try:  # the cache may be a drawing still being made (widget._Drawing): it can fail too
        image = cache.get(source) if cache is not None else None
        if image is None:
            image = svg(source)
            if cache is not None:
                cache[source] = image
    except Exception as exc:  # noqa: BLE001 - any Graphviz failure becomes a message
        return "".join(parts) + graph_failure_html(exc, source)
    if summary is not None and summary.static is not None and source == summary.static:
        parts.append(f'<p style="margin:0 0 4px 0">{html.escape(BOXED)}</p>')
    parts.append(
        f'<div style="overflow:auto; max-width:100%; max-height:{GRAPH_HEIGHT}px">'
        f"{fit(image, shrink)}</div>"
    )
    parts.append(legend_html())
    return "".join(parts)


BOXED = (
    "Here a table of more than 24 inputs is one box (the live view draws each): their values "
    "and gradients are in the Gradients table below."
)


def own_graph_html(own: dict, cache: dict | None = None) -> str:
    """A learner's own graph (:func:`own_dot`) as a picture, with what it shows (``cache``:
    DOT → SVG, as :func:`graph_html`'s)."""
    source = own_dot(own)
    try:
        image = cache.get(source) if cache is not None else None
        image = svg(source) if image is None else image
    except Exception as exc:  # noqa: BLE001 - any Graphviz failure becomes a message
        return graph_failure_html(exc, source)
    note = f'<p style="margin:0 0 4px 0">{html.escape(own_note(own))}</p>'
    return (
        note
        + f'<div style="overflow:auto; max-width:100%; max-height:{GRAPH_HEIGHT}px">{fit(image)}</div>'
    )


def choose_dot(trace, report=None, *, subset=None, fold=None, cache=None, **options) -> str:
    """The DOT of the run's graph in the direction that fits the output (:func:`directions`).

    With both directions open, each is drawn by ``dot`` (a small graph: a few ms) and the
    one :func:`best_direction` picks is returned, its picture left in ``cache``; without
    ``dot`` it is left to right (the live view then picks for itself).
    """
    fold = Folded(trace) if fold is None else fold
    drawn = (
        drawn_nodes(trace, None, fold) if subset is None else [i for i in subset if i not in fold]
    )
    ways = directions(trace, drawn)
    sources = {
        d: to_dot(trace, report, rankdir=d, subset=subset, fold=fold, **options) for d in ways
    }
    if len(ways) == 1:
        return sources[ways[0]]
    images = {}
    for d, source in sources.items():
        try:
            known = cache.get(source) if cache is not None else None
            images[d] = known if known is not None else svg(source)
        except Exception:  # noqa: BLE001 - the caller draws it again and says why
            return sources["LR"]
    if cache is not None:
        for d, image in images.items():
            cache[sources[d]] = image
    return sources[best_direction(images)]


SHRINK = 2.5  # an inline drawing is scaled down at most this much to fit the width
GROUPED_SHRINK = 1.3  # ... a grouped picture (10 pt text stays 10 px): it scrolls instead
_WIDTH = re.compile(r'<svg width="([\d.]+)pt"')


def fit(image: str, shrink: float = SHRINK) -> str:
    """An inline drawing as an ``<img>`` that shrinks to the output's width, at most ``SHRINK`` times.

    For the teaching views' display objects. An ``<img>`` with an SVG data URI, as the
    run's static copy uses, survives untrusted notebooks and sanitisers, where inline
    ``<svg>`` is stripped and its text printed.
    """
    match = _WIDTH.match(image)
    size = "max-width:100%"
    if match is not None:
        width = float(match.group(1))
        size = f"width:{width:.0f}pt; max-width:100%; min-width:{width / shrink:.0f}pt"
    return (
        f'<img class="gradmagic-graph" alt="the computation graph" style="{size}; '
        f'height:auto" src="{svg_data_uri(image)}">'
    )


def graph_failure_html(exc, source: str) -> str:
    import graphviz

    if isinstance(exc, graphviz.ExecutableNotFound):
        message = md_code(MISSING_DOT)
    else:
        message = html.escape(draw_failure(exc))
    return (
        f'<p style="margin:0">{message}</p>'
        f'<details><summary>DOT source</summary><pre style="max-height:20em; '
        f'overflow:auto">{html.escape(source)}</pre></details>'
    )


def inputs(trace) -> list:
    """The run's inputs: the leaves that are not constants (``Node.is_constant``).

    Unnamed numbers written in the cell (the ``2`` in ``x ** 2``, the ``1.0``
    in ``x * 1.0``, an array used in a tensor op) and leaves made with
    ``requires_grad=False`` are constants: they are leaves of the graph but not
    inputs. An unnamed tensor leaf made with ``requires_grad=True`` is an input.
    """
    leaves = trace.leaf_index
    return [trace.nodes[i] for i in leaves[~trace.constant[leaves]].tolist()]


def headline(trace) -> str:
    """One line about the run: target, value, nodes and :func:`inputs` (not constants), and
    where the gradient is cut (a function with no gradient rule: :func:`cut_text`)."""
    leaves = trace.leaf_index
    count = int((~trace.constant[leaves]).sum())  # (len(inputs(trace)), without their nodes)
    line = (
        f"{trace.target.name} = {fmt(trace.value, 6)}  ({len(trace.nodes):,} nodes, "
        f"{count:,} input{'' if count == 1 else 's'})"
    )
    cut = cut_text(trace)
    return f"{line}  ✂ {cut}" if cut else line


def cut_text(trace, limit: int = 3) -> str:
    """ "gradient cut at line 3 (statistics.mean)": where numbers left the graph, or ''."""
    places = getattr(trace, "cut_places", ())
    if not places:
        return ""
    words = [
        (f"line {line}" if line is not None else "the cell")
        + (f" ({function})" if function else "")
        for line, function in places[:limit]
    ]
    more = f" and {len(places) - limit} more" if len(places) > limit else ""
    return f"gradient cut at {', '.join(words)}{more}"


def run_notes(trace, report) -> list:
    """Remarks about the run: the trace's warnings and a skipped check."""
    notes = list(getattr(trace, "warnings", []) or [])
    if report is None and trace.options.no_check:
        notes.append("Numerical check skipped (--no-check); run trace.check() to compute it.")
    return notes


# The static copy steps aside once the live view shown with it has drawn (trusted output only:
# untrusted output drops the <style>, and there the live view is not shown anyway). In
# JupyterLab and Notebook 7 its whole output box hides, and so does the widget's "model not
# found" line when there is no live view (a saved notebook reopened without widget state).
STATIC_STYLE = (
    "<style>.jp-OutputArea-child:has(.gradmagic-static):has(+ .jp-OutputArea-child "
    ".gm-root:not(.gm-failed)){display:none}.jp-OutputArea-child:has(.gradmagic-static) + "
    ".jp-OutputArea-child:has(.jupyter-widgets):not(:has(.gm-root)){display:none}"
    "</style>"
)


# The copy is drawn on white in every theme, as the live view is: its picture (a transparent
# SVG with dark text) and its coloured table rows are made for a light page.
STATIC_CARD = (
    "background:#fff; color:#111827; color-scheme:light; padding:4px 6px; border-radius:4px"
)


def static_style(run: str) -> str:
    """:data:`STATIC_STYLE`, and for front-ends with other output boxes (VS Code, Colab) the
    copy of run ``run`` hidden while the page holds that run's live view (its root carries
    ``data-run``) and the view has not failed to draw."""
    run = html.escape(run, quote=True)
    return STATIC_STYLE + (
        f'<style>:root:has(.gm-root[data-run="{run}"]:not(.gm-failed)) '
        f'.gradmagic-static[data-gm-run="{run}"]{{display:none}}</style>'
    )


def static_html(
    trace,
    report=None,
    *,
    expected=None,
    torch=None,
    cache: dict | None = None,
    run: str | None = None,
    summary=_SUMMARISE,
    fold=None,
    dot: str | None = None,
    gradients: dict | None = None,
) -> str:
    """The whole run without widgets: headline, answers, graph, check and gradient tables.

    ``run`` marks the copy (``data-gm-run``) so the live view shown with it can hide it;
    ``summary``, ``fold`` and ``dot`` are :func:`summarise`, :class:`Folded` and the graph's
    :func:`to_dot` when the caller has them; ``gradients`` is the live view's Gradients
    table (its payload: ``columns``, ``rows``, ``classes``, ``note``), shown here as it is
    there instead of a table of the nodes in graph order.
    """
    mark = f' data-gm-run="{html.escape(run)}"' if run else ""
    out = [
        f'<div class="gradmagic gradmagic-static"{mark} style="{STATIC_CARD}">',
        static_style(run) if run else "",
        f'<p style="margin:0 0 4px 0"><b>{html.escape(headline(trace))}</b></p>',
    ]
    out += [f'<p style="margin:0">⚠ {html.escape(n)}</p>' for n in run_notes(trace, report)]
    if expected is not None:
        out.append(_section("Answers", answers_html(expected)))
    steps = getattr(trace, "steps", None) or []
    if len(steps) > 1:  # a training loop of the learner's engine: its loss per step
        out.append(_section("Training", steps_svg(steps)))
    own = getattr(trace, "own_graph", None)  # a learner's engine: their graph, as they draw it
    if own and own["nodes"]:
        out.append(_section("Your graph", own_graph_html(own, cache)))
    graph = len(out)  # made last: the picture may still be being drawn (see widget._Drawing)
    out.append("")
    if report is not None:
        out.append(_section("Check", report_html(report, torch=torch)))
    elif torch is not None:
        out.append(_section("Check", torch_html(torch)))
    out.append(
        _section(
            "Gradients",
            nodes_table_html(trace, report=report) if gradients is None else table_html(gradients),
            open=False,
        )
    )
    for title, make in STATIC_SECTIONS:
        out.append(_section(title, make(trace, cache), open=False))
    out.append("</div>")
    out[graph] = graph_html(trace, report, cache=cache, summary=summary, fold=fold, dot=dot)
    return "".join(out)


def steps_svg(values, width: int = 320, height: int = 90) -> str:
    """A training loop's loss at each step, as a small line plot (inline SVG)."""
    finite = [v for v in values if v == v and abs(v) != float("inf")]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    span = (high - low) or 1.0
    last = max(len(values) - 1, 1)
    points = " ".join(
        f"{8 + (width - 16) * k / last:.1f},{height - 14 - (height - 24) * (v - low) / span:.1f}"
        for k, v in enumerate(values)
        if v in finite
    )
    label = f"step 1: {fmt(values[0], 4)} → step {len(values)}: {fmt(values[-1], 4)}"
    return (
        f'<svg width="{width}" height="{height}" role="img" aria-label="loss per step">'
        f'<polyline fill="none" stroke="{LINE["path"]}" stroke-width="1.5" points="{points}"/>'
        f'<text x="8" y="{height - 2}" font-size="11">{html.escape(label)}</text></svg>'
    )


STATIC_SECTIONS: list = []
"""(title, function(trace, cache) → HTML): more closed sections of :func:`static_html`, added by
the view modules that make them (views/teaching.py), so this module imports none of them."""


def _section(title: str, body: str, open: bool = True) -> str:
    return f"<details{' open' if open else ''}><summary><b>{title}</b></summary>{body}</details>"


def text(trace, report=None, *, expected=None, torch=None) -> str:
    """The whole run as plain text, for terminals: answers first, then the tables."""
    lines = [headline(trace)] + [f"! {n}" for n in run_notes(trace, report)]
    if expected is not None:
        lines += ["", "Answers", answers_text(expected), ""]
    steps = getattr(trace, "steps", None) or []
    if len(steps) > 1:
        shown = ", ".join(fmt(v, 4) for v in steps[:12]) + (", ..." if len(steps) > 12 else "")
        lines += [f"loss per step ({len(steps)} steps): {shown}", ""]
    lines.append(nodes_table_text(trace, report=report))
    if report is not None:
        lines += ["", report_text(report, limit=10, torch=torch)]
    elif torch is not None:
        lines += ["", torch_text(torch, limit=10)]
    return "\n".join(lines)
