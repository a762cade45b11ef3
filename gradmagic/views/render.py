"""Views of a run as text: Graphviz DOT and SVG, HTML tables and plain text.

Everything here is a pure function of a :class:`gradmagic.analysis.trace.Trace` (and
optionally a :class:`gradmagic.analysis.check.CheckReport`) returning a string, so the
same views serve the widget, the static ``text/html`` fallback and a terminal.
Nothing here imports ipywidgets.

The graph follows micrograd's picture: each value is a record
``label | data | grad`` and each operation a small node between its inputs and
its result. Leaves, operations and the target have their own colours; leaves
whose gradient fails the numerical check are red; kinks and non-finite values
are marked. Past ``max_nodes`` nodes the graph view shows a summary instead.
A tensor node's record shows its shape beside its name (``W 2×1``).

Numbers and arrays are always one line (:func:`fmt`): small arrays in full,
large ones as shape, norm and extremes. The headline counts the run's
*inputs* (:func:`inputs`): named leaves, not the unnamed constants written in
the cell; the text, HTML and widget views share it.

An ``expect`` report is shown as *answers* (:func:`answers_html`,
:func:`answers_text`): a verdict line, then ✓/✗ for each expected entry with
the engine's number and the difference. A PyTorch comparison
(:mod:`gradmagic.analysis.torchcheck`) adds its column to the check table.
"""

from __future__ import annotations

import atexit
import html
import math
import os
import re
import select
import shutil
import subprocess
import threading
import time
from collections import Counter, deque
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np

from ..analysis.check import STATUSES
from ..analysis import numbers
from ..analysis.numbers import SMALL, all_finite, dims  # noqa: F401 - dims is part of this module's API

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
    "Summary",
    "svg",
    "fit",
    "graph_html",
    "legend_html",
    "op_label",
    "node_order",
    "op_entry",
    "op_symbol",
    "nodes_table_html",
    "table_html",
    "nodes_table_text",
    "column_text",
    "op_symbols",
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

DEFAULT_MAX_NODES = 150
NEIGHBOURHOOD = 30  # nodes nearest the target drawn in a summary
NAMED = 20  # named nodes drawn in a summary
TABLE_ROWS = 500  # rows of an HTML table before it is cut (as the live view's tables)
TEXT_ROWS = 40  # rows of a plain-text table before it is cut

MISSING_DOT = (
    "Graphviz's `dot` program was not found, so this static copy has no picture "
    "(the live view draws the graph in the browser without it); for the picture "
    "here too, install it with `apt-get install graphviz` (or `brew install "
    "graphviz`, `conda install graphviz`)."
)

FILL = {
    "leaf": "#dbeafe",
    "constant": "#f3f4f6",
    "value": "#ffffff",
    "target": "#fde68a",
    "op": "#e5e7eb",
    "fail": "#fecaca",
    "current": "#bbf7d0",
}
LINE = {
    "plain": "#4b5563",
    "fail": "#dc2626",
    "kink": "#ea580c",
    "nonfinite": "#7c3aed",
    "path": "#2563eb",
    "current": "#16a34a",
    "cut": "#db2777",
}


# =========================================================================== numbers
def _clean(x):
    """``x`` with negative zeros made positive, so no view prints "-0"."""
    if isinstance(x, float):
        return x + 0.0
    if isinstance(x, np.ndarray) and x.dtype.kind in "fc":
        return x + 0.0
    return x


def fmt(x, digits: int = 4, *, shape: bool = True) -> str:
    """A number or array on one line (:func:`gradmagic.analysis.numbers.fmt`), never "-0"."""
    return numbers.fmt(_clean(x), digits, shape=shape)


FIGURE_ELEMENTS = 3  # arrays with at most this many elements are written out in a record


def figure(x) -> str:
    """The short figure a graph record shows: a number, a tiny array, else the norm ``‖·‖ 3.2``.

    The full array is in the tables and in the live view's hover and side panel.
    """
    if isinstance(x, np.ndarray) and x.ndim and x.size > FIGURE_ELEMENTS:
        with np.errstate(all="ignore"):
            flat = np.asarray(x, dtype=float).reshape(-1)
            return "‖·‖ " + fmt(float(np.sqrt(np.sum(flat * flat))), 3)
    return fmt(x, 4, shape=False)


FULL_CHARS = 1500  # characters of a full value before it is cut


def full(x) -> str:
    """A node's whole value for the side panel and hover (big arrays elided by numpy)."""
    if isinstance(x, np.ndarray) and x.ndim:
        with np.printoptions(precision=4, threshold=120, edgeitems=3, linewidth=72, suppress=True):
            out = np.array2string(_clean(x))
    else:
        out = fmt(x, 8)
    return out if len(out) <= FULL_CHARS else out[:FULL_CHARS] + " …"


def _magnitude(x) -> float:
    """|x| for sorting (the largest |element| of an array); nan sorts as inf."""
    try:
        m = float(np.max(np.abs(x))) if isinstance(x, np.ndarray) else abs(float(x))
    except (TypeError, ValueError, OverflowError):
        return math.inf
    return math.inf if m != m else m


# =========================================================================== DOT
def escape_record(text: str) -> str:
    """``text`` as one field of a Graphviz record label (inside a quoted string)."""
    out = []
    for ch in str(text):
        if ch in '\\{}|<>"':
            out.append("\\" + ch)
        elif ch in "\n\r\t":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def escape_string(text: str) -> str:
    """``text`` inside a quoted DOT string (not a record)."""
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ").replace("\r", " ")


def op_entry(trace, index: int):
    """The op table entry (scalar or tensor) that made node ``index``, or None."""
    return trace.op_entry(index)


def op_symbol(trace, index: int) -> str:
    """How node ``index``'s op is drawn: its table symbol ('' for a leaf)."""
    entry = op_entry(trace, index)
    return getattr(entry, "symbol", None) or trace.nodes[index].op


def _attrs(attrs: dict) -> str:
    """DOT attributes; values must already be escaped for a quoted string."""
    return ", ".join(f'{k}="{v}"' for k, v in attrs.items())


def _edge(tail: str, head: str, attrs: dict | None = None) -> str:
    return f"  {tail} -> {head}" + (f" [{_attrs(attrs)}];" if attrs else ";")


def _failed(report) -> dict:
    """node index → check status, for rows that did not simply pass."""
    if report is None:
        return {}
    return {r.index: r.status for r in report.rows if r.index is not None and r.status != "pass"}


class Folded(AbstractSet):
    """The folded constants of a trace (see :func:`folded`) as a read-only set over a mask.

    Membership reads one boolean of a numpy column, so making it costs no Python
    object per constant (a 10^6-node loop has 300,000 of them).
    """

    def __init__(self, trace):
        mask = trace.constant & (trace.parent_a < 0) & (trace.label_code == 0)
        for i, arr in trace.tensor_data.items():  # a tensor constant is folded if 1 element
            if mask[i] and np.size(arr) != 1:
                mask[i] = False
        if trace.n:
            mask[trace.target.index] = False
        for i in getattr(trace, "cut_notes", ()):  # a number a cut made is drawn, marked
            mask[i] = False
        self.mask = mask

    def __contains__(self, i):
        try:
            return bool(self.mask[i]) if 0 <= i < len(self.mask) else False
        except (TypeError, IndexError):
            return False

    def __iter__(self):
        return iter(np.flatnonzero(self.mask).tolist())

    def __len__(self):
        return int(np.count_nonzero(self.mask))


def folded(trace) -> set:
    """Unnamed scalar constants (the 2 of ``x**2``): drawn inside their op's label, not as leaves.

    micrograd draws ``x**2`` as one ``**2`` node; so do we. The constants stay
    in the tables and in ``trace.nodes``. (:class:`Folded` is the same set without
    a Python int per constant.)
    """
    return set(Folded(trace))


def drawn_nodes(trace, summary=None, fold=None) -> list:
    """The value nodes the graph draws: the summary's (or every node) less the folded ones."""
    fold = Folded(trace) if fold is None else fold
    if summary is None:
        if isinstance(fold, Folded):
            return np.flatnonzero(~fold.mask).tolist()
        return [i for i in range(trace.n) if i not in fold]
    return [int(i) for i in summary.shown if i not in fold]


class Among(dict):
    """node → its first children (ascending, one entry per use); ``uses[node]`` counts them all."""

    def __init__(self):
        super().__init__()
        self.uses = {}

    def __missing__(self, key):
        return []


def children_among(trace, nodes, cap: int | None = None) -> Among:
    """node → the nodes computed from it (with repeats, ascending), for ``nodes`` only.

    One vectorised pass over the parent columns, however big the graph; with ``cap``
    each list keeps its first ``cap`` entries (``uses`` still counts every use: a leaf
    of a 10^6-node loop feeds a third of the graph).
    """
    out = Among()
    if not len(nodes):
        return out
    mark = np.zeros(trace.n + 1, dtype=bool)  # the extra slot is parent -1 (none)
    mark[np.asarray(list(nodes), dtype=np.intp)] = True
    pa, pb = trace.parent_a, trace.parent_b
    rows = np.flatnonzero(mark[pa] | mark[pb])  # children of a marked node, ascending
    parent = np.stack([pa[rows], pb[rows]], axis=1).ravel()
    child = np.repeat(rows, 2)
    keep = mark[parent]
    parent, child = parent[keep], child[keep]
    order = np.argsort(parent, kind="stable")  # by parent, each one's children ascending
    parent, child = parent[order], child[order]
    if not len(parent):
        return out
    firsts = np.flatnonzero(np.concatenate([[True], parent[1:] != parent[:-1]]))
    counts = np.diff(np.append(firsts, len(parent)))
    owners = parent[firsts].tolist()
    for p, first, count in zip(owners, firsts.tolist(), counts.tolist()):
        upto = first + (count if cap is None else min(count, cap))
        out[p] = child[first:upto].tolist()
        out.uses[p] = count
    return out


def use_count(children, i: int) -> int:
    """How many times node ``i`` is used (``children[i]`` may be capped: :class:`Among`)."""
    uses = getattr(children, "uses", None)
    return uses.get(i, 0) if uses is not None else len(children[i])


def op_label(trace, index: int, fold=frozenset()) -> str:
    """An op's label with its folded constants written in: ``**2``, ``*3``, ``2*``."""
    node = trace.nodes[index]
    symbol = op_symbol(trace, index)
    constants = [p for p in node.parents if p in fold]
    if not constants:
        return symbol
    text = [fmt(trace.nodes[p].data) if p in fold else "" for p in node.parents]
    if len(node.parents) == 2:
        return folded_label(symbol, text[0], text[1])
    return f"{symbol} " + ", ".join(t for t in text if t)


_COMMUTES = {"+", "*"}


def folded_label(symbol: str, left: str, right: str) -> str:
    """A binary op's label with its folded constant(s): ``**2``, ``*3``, ``-(-1)``.

    A constant of ``+`` or ``*`` is written after the symbol whichever side it was on
    (``sum()``'s start 0 reads ``+0``, not ``0+``); a negative one after a symbol is put
    in parentheses (``y - (-1.0)`` reads ``-(-1)``, not ``--1``).
    """

    def after(text):
        return f"({text})" if text.startswith(("-", "−")) else text

    if left and right:
        return f"{left}{symbol}{after(right)}"
    if right:
        return f"{symbol}{after(right)}"
    if left and symbol in _COMMUTES:
        return f"{symbol}{after(left)}"
    return f"{left}{symbol}"


def op_labels(trace, rows, fold) -> list:
    """:func:`op_label` of nodes ``rows`` ('' for a leaf), read from the columns."""
    rows = list(rows)
    if not isinstance(fold, Folded):
        return [op_label(trace, i, fold) if trace.op_code[i] >= 0 else "" for i in rows]
    index = np.asarray(rows, dtype=np.intp)
    codes = trace.op_code[index].tolist()
    symbols = op_symbols(trace)
    pa, pb = trace.parent_a[index], trace.parent_b[index]
    mask = fold.mask
    texts = []
    for parents in (pa, pb):
        hit = (parents >= 0) & mask[parents]
        text = [""] * len(rows)
        for k, t in zip(
            np.flatnonzero(hit).tolist(), column_text(trace, parents[hit].tolist(), "data", 4)
        ):
            text[k] = t
        texts.append(text)
    binary = (pb >= 0).tolist()
    out = []
    for k, code in enumerate(codes):
        if code < 0:
            out.append("")
            continue
        symbol, a, b = symbols[code], texts[0][k], texts[1][k]
        if not a and not b:
            out.append(symbol)
        elif binary[k]:
            out.append(folded_label(symbol, a, b))
        else:
            out.append(f"{symbol} {a}")
    return out


LAYOUT_EXACT = 40  # drawn values up to which Graphviz lays out without limits


def layout_attrs(count: int) -> str:
    """Graph attributes that bound Graphviz's work on a graph of ``count`` drawn values.

    Up to ``LAYOUT_EXACT`` values Graphviz runs unbounded (best picture). Past
    that its network simplex passes (``nslimit``, ``nslimit1``: ranking and x
    positions, which took 46 s on a 146-node tanh recurrence) stop after 4
    iterations per node, and crossing minimisation (``mclimit``) does half its
    usual passes: every graph under the default ``--max-nodes`` lays out in
    well under a second, with a slightly less tidy picture.
    """
    if count <= LAYOUT_EXACT:
        return ""
    return ", nslimit=4, nslimit1=4, mclimit=0.5"


def to_dot(
    trace,
    report=None,
    *,
    rankdir: str | None = None,
    subset=None,
    path=(),
    current: int | None = None,
    grad_text=None,
    fold=None,
) -> str:
    """The DOT source of the run's graph.

    Value ``i`` is DOT node ``v{i}`` and its operation ``o{i}`` (the live view
    finds them by these names). Unnamed scalar constants are folded into
    their op's label (:func:`folded`). ``subset`` draws only those node
    indices (a summary); ``path`` highlights nodes, and the edges and
    operations that connect them; ``current`` highlights one node (the one the
    backward pass is processing); ``grad_text`` replaces each node's grad
    field (a list of strings indexed like ``trace.nodes``); ``fold`` is
    :func:`folded` when the caller already has it.
    """
    rankdir = _rankdir(rankdir if rankdir is not None else trace.options.rankdir)
    nodes = trace.nodes
    fold = Folded(trace) if fold is None else fold
    shown = [i for i in (range(len(nodes)) if subset is None else sorted(subset)) if i not in fold]
    drawn = set(shown)
    path = set(path)
    status = _failed(report)
    target = trace.target.index
    on_path = {"color": LINE["path"], "penwidth": "2"}
    lines = [
        "digraph gradmagic {",
        f'  graph [rankdir={rankdir}, bgcolor="transparent", nodesep=0.25, ranksep=0.35'
        f"{layout_attrs(len(shown))}];",
        '  node [fontname="Helvetica", fontsize=10, penwidth=1];',
        '  edge [color="#6b7280", arrowsize=0.6];',
    ]
    for i in shown:
        node = nodes[i]
        attrs = _value_attrs(
            node, i == target, status.get(i), i in path, i == current, rankdir, grad_text
        )
        lines.append(f"  v{i} [{attrs}];")
        if not node.parents:
            continue
        op = {
            "shape": "ellipse",
            "label": escape_string(op_label(trace, i, fold)),
            "style": "filled",
            "fillcolor": FILL["op"],
            "color": LINE["plain"],
            "margin": "0.04,0.02",
            "height": "0.3",
        }
        if node.kink:
            op.update(label=op["label"] + "\\nkink", color=LINE["kink"], penwidth="2")
        # the flow runs through this op when the node and one of its inputs are on the path
        flows = i in path and any(p in path for p in node.parents)
        if flows:
            op.update(color=LINE["path"], penwidth="2.5")
        if i == current:
            op.update(fillcolor=FILL["current"], color=LINE["current"], penwidth="3")
        lines.append(f"  o{i} [{_attrs(op)}];")
        lines.append(_edge(f"o{i}", f"v{i}", on_path if flows else None))
        hidden = 0
        for p in node.parents:
            if p in drawn:
                lines.append(_edge(f"v{p}", f"o{i}", on_path if p in path and i in path else None))
            elif p not in fold:
                hidden += 1
        if hidden:
            lines.append(
                f'  h{i} [shape=plaintext, fontcolor="#4b5563", '
                f'label="{hidden} more input{"s" if hidden > 1 else ""}"];'
            )
            lines.append(_edge(f"h{i}", f"o{i}", {"style": "dashed"}))
    lines.append("}")
    return "\n".join(lines)


FIT_VALUES = 30  # drawn values up to which the view picks the direction that fits the width
FIT_WIDTH = 850  # px: a notebook's output width (JupyterLab's default layout, file browser open)
FIT_HEIGHT = 560  # px: the live view's graph height at most


def directions(trace, drawn) -> tuple:
    """The directions worth laying out for ``drawn``: ``("LR", "TB")`` when the run leaves it
    to the view (no ``--rankdir``) and the graph is small enough to be fitted whole, else the
    one direction to use."""
    asked = trace.options.rankdir
    if asked is None and len(drawn) <= FIT_VALUES:
        return ("LR", "TB")
    return (_rankdir(asked),)


_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')


def fit_scale(image: str, width: float = FIT_WIDTH, height: float = FIT_HEIGHT) -> float:
    """The scale at which a drawing (an SVG from dot, sized in points) fits ``width`` x
    ``height`` px; at 1 its 10 pt text is 10 px."""
    match = _SIZE.search(image[:400])
    if match is None:
        return 0.0
    w, h = (max(1.0, float(v)) for v in match.groups())
    return min(width / w, height / h, 4 / 3)


def best_direction(images: dict) -> str:
    """Of drawings by direction (``{"LR": svg, "TB": svg}``), the one to show: left to right
    when its text is at least 10 px at the output's width, else the one drawn larger."""
    scales = {d: fit_scale(image) for d, image in images.items()}
    if scales.get("LR", 0) >= 1 or len(scales) == 1:
        return "LR" if "LR" in scales else next(iter(scales))
    return max(scales, key=lambda d: (scales[d], d == "LR"))


def _rankdir(value) -> str:
    value = (value or "LR").upper()
    if value not in ("LR", "TB"):
        raise ValueError(f"rankdir must be 'LR' or 'TB', got {value!r}")
    return value


MARKED = ("fail", "error", "kink")  # the check's statuses a node is drawn with


def _value_attrs(node, is_target, status, on_path, is_current, rankdir, grad_text) -> str:
    data = figure(node.data)
    grad = grad_text[node.index] if grad_text is not None else figure(node.grad)
    if not node.finite:
        data = ("⚠ " + data) if not all_finite(node.data) else data
        grad = ("⚠ " + grad) if grad_text is None and not all_finite(node.grad) else grad
    name = node.label
    if node.shape is not None and len(node.shape):  # the shape beside the name: W 2×1
        name = f"{name} {dims(node.shape)}".strip()
    cut = node.cut
    if cut:  # made outside the graph: say where, so the missing gradient is seen
        name = f"{name} ✂ cut, {cut}".strip(" ,")
    fields = "|".join(escape_record(f) for f in (name, f"data {data}", f"grad {grad}"))
    attrs = {
        "shape": "record",
        "label": "{%s}" % fields if rankdir == "LR" else fields,
        "style": "filled",
        "color": LINE["plain"],
    }
    attrs["fillcolor"] = (
        FILL["target"]
        if is_target
        else FILL["constant"]
        if node.is_constant
        else FILL["leaf"]
        if node.is_leaf
        else FILL["value"]
    )
    if not node.finite:
        attrs.update(color=LINE["nonfinite"], penwidth="2")
    if cut:
        attrs.update(color=LINE["cut"], penwidth="2", style="filled,dashed")
    if status in ("fail", "error"):
        attrs.update(fillcolor=FILL["fail"], color=LINE["fail"], penwidth="2")
    elif status == "kink":
        attrs.update(color=LINE["kink"], penwidth="2")
    if on_path:
        attrs.update(color=LINE["path"], penwidth="2.5")
    if is_current:
        attrs.update(fillcolor=FILL["current"], color=LINE["current"], penwidth="3")
    return _attrs(attrs)


LEGEND = (
    ("leaf", "an input (leaf)"),
    ("constant", "a constant"),
    ("value", "a computed value"),
    ("op", "an operation"),
    ("target", "the target"),
    ("fail", "fails the numerical check"),
)
LEGEND_LINES = (
    ("kink", "kink: a subgradient was used"),
    ("nonfinite", "nan or infinite"),
    ("cut", "✂ cut: made outside the graph (no gradient flows back)"),
    ("path", "path to the target"),
)


def legend_html() -> str:
    """What the graph's colours mean, as one line of HTML."""
    items = [
        f'<span style="display:inline-block; width:12px; height:12px; background:'
        f"{FILL[key]}; border:1px solid {LINE['plain']}; vertical-align:middle; "
        f'margin:0 3px 0 8px"></span>{text}'
        for key, text in LEGEND
    ]
    items += [
        f'<span style="display:inline-block; width:12px; height:0; border-top:3px solid '
        f'{LINE[key]}; vertical-align:middle; margin:0 3px 0 8px"></span>{text}'
        for key, text in LEGEND_LINES
    ]
    return f'<p class="gradmagic-legend" style="margin:2px 0; font-size:12px">{"".join(items)}</p>'


# =========================================================================== big graphs
@dataclass
class Summary:
    """What a big graph's view draws instead of every node."""

    shown: list  # node indices drawn
    counts: str  # e.g. "100,000 nodes: 50,001 leaves, 49,999 operations (+ 49,999)"
    note: str  # why and how to see more
    dot: str | None = None  # the picture's DOT when it is not the nodes ``shown`` (grouped)
    groups: object = None  # the analysis.groups.Grouping the picture was made from


def _max_nodes(trace, max_nodes=None) -> int:
    value = max_nodes if max_nodes is not None else trace.options.max_nodes
    return DEFAULT_MAX_NODES if value is None else int(value)


DRAW_LIMIT = 1_000  # drawn values past which no graph is laid out whole
LAYOUT_LIMIT = 4_000  # places Graphviz may lay out (see layout_size): about a second of dot


def layout_size(trace, shown) -> int:
    """How many places Graphviz's ``dot`` lays out to draw the values ``shown``.

    Each value and operation is one; an edge that spans k ranks adds k - 1 (dot
    bends it through a virtual node at each rank it crosses). That is what its
    time grows with: a loop whose input is used at every step has edges from
    the first rank to every later one, so its layout grows with the square of its
    length (a 173-value loop took 2-4 s, an MLP of 600 values 0.4 s).
    """
    rank = {}
    total = 0
    pa, pb = trace.parent_a, trace.parent_b
    for i in sorted(shown):
        a = int(pa[i])
        if a < 0:
            rank[i] = 0
            total += 1
            continue
        ranks = [rank[p] for p in (a, int(pb[i])) if p in rank]
        at = max(ranks, default=0) + 1  # the op's rank; its value is one further
        total += 2 + sum(at - r - 1 for r in ranks)
        rank[i] = at + 1
    return total


def drawable(trace, shown) -> bool:
    """Whether the values ``shown`` can be drawn whole within the drawing budget."""
    return len(shown) <= DRAW_LIMIT and layout_size(trace, shown) <= LAYOUT_LIMIT


def summarise(trace, max_nodes: int | None = None) -> Summary | None:
    """The summary of a graph with more than ``max_nodes`` nodes, else None.

    A graph too big to lay out within the drawing budget (:func:`drawable`) is
    summarised too, whatever ``max_nodes`` says. The summary draws the nodes
    nearest the target (a breadth-first walk up from it), the named nodes (the names
    bound in the cell, or else each label's last node) and then the inputs.
    """
    limit = _max_nodes(trace, max_nodes)
    nodes = trace.nodes
    n = len(nodes)
    whole = None  # whether every node could be drawn (None: too many to ask)
    if n <= max(limit, DRAW_LIMIT) * 4:
        whole = drawable(trace, drawn_nodes(trace))
    if n <= limit and whole:
        return None
    limit = min(limit, DEFAULT_MAX_NODES)
    near_budget = max(1, min(NEIGHBOURHOOD, limit))
    seen = {trace.target.index}
    queue = deque([trace.target.index])
    while queue and len(seen) < near_budget:
        for p in nodes[queue.popleft()].parents:
            if p not in seen and len(seen) < near_budget:
                seen.add(p)
                queue.append(p)
    if trace.bindings:
        named = list(dict.fromkeys(trace.bindings.values()))
    else:  # each label's last node
        rows = np.flatnonzero(trace.label_code)
        named = list(dict(zip(trace.label_code[rows].tolist(), rows.tolist())).values())
    at = trace.leaf_index
    inputs = at[~trace.constant[at]][-4 * NAMED :].tolist()[::-1]  # the inputs, the last first
    extra = [i for i in dict.fromkeys(named + inputs) if i not in seen][: max(0, min(NAMED, limit))]
    leaves = len(trace.leaf_index)
    made = trace.op_code[trace.op_code >= 0]
    ops = Counter()  # op name → nodes it made, counted per op entry
    first = {}  # op name → a node it made, whose op entry gives the symbol
    counts = np.bincount(made, minlength=len(trace.ops)) if made.size else []
    for code, count in enumerate(np.asarray(counts).tolist()):
        if count:
            name = trace.ops[code].name
            ops[name] += count
            first.setdefault(name, int(np.argmax(trace.op_code == code)))
    top = ", ".join(f"{op_symbol(trace, first[op])} {count:,}" for op, count in ops.most_common(6))
    counts = f"{n:,} nodes: {leaves:,} leaves, {n - leaves:,} operations" + (
        f" ({top}{', ...' if len(ops) > 6 else ''})" if top else ""
    )
    drawn = f"the {len(seen)} nodes nearest the target" + (
        f" and {len(extra)} of the named nodes and inputs" if extra else ""
    )
    listed = (
        "lists every node"
        if n <= TABLE_ROWS
        else f"lists {TABLE_ROWS:,} (the target, the inputs, then the nodes nearest the target; "
        f"`gradmagic.last.nodes` has all {n:,})"
    )
    asked = _max_nodes(trace, max_nodes)
    why = (
        f"More than --max-nodes {asked:,}"
        if n > asked
        else f"Too big to lay out whole within {DOT_SECONDS:g} s"
    )
    more = f" `%%autograd --max-nodes {n}` draws them all." if whole else ""
    note = f"{why}: this summary draws {drawn}; the Gradients table {listed}.{more}"
    return Summary(shown=sorted(seen | set(extra)), counts=counts, note=note)


# =========================================================================== SVG
DOT_SECONDS = 5.0  # wall-clock time Graphviz's dot may take for one picture
DOT_BYTES = 1 << 30  # memory (address space) a dot process may use


class DrawError(RuntimeError):
    """Graphviz's ``dot`` could not draw a graph; ``str()`` says why in one sentence."""


def _dot_argv(dot: str) -> list:
    """The command that runs ``dot -Tsvg`` with its memory bounded to ``DOT_BYTES``.

    A POSIX shell sets the limit and execs dot (``ulimit -v``), rather than a
    ``preexec_fn``: that would run Python in the forked child of a kernel with threads,
    and make the child a copy of the kernel's memory before exec.
    """
    if os.name == "posix" and os.path.exists("/bin/sh"):
        return ["/bin/sh", "-c", f'ulimit -v {DOT_BYTES >> 10} && exec "$0" -Tsvg', dot]
    return [dot, "-Tsvg"]


class _DotServer:
    """One long-lived ``dot -Tsvg`` process that lays out graph after graph.

    Starting ``dot`` costs about 10 ms (it loads its plugins), most of a small
    graph's drawing; a process kept for the kernel's life reads each graph from
    its stdin and answers in 1-3 ms. Each graph is followed by an empty marker
    graph, so the answer's end is known (and a graph ``dot`` rejects gives only
    the marker's picture: :func:`svg` then runs ``dot`` once more to say why).
    The process is started on first use, with the ``dot`` found on ``PATH``
    then, and again if that changes, if it died, or in a forked child.
    A graph that takes longer than ``DOT_SECONDS`` ends the process (the next
    graph starts a fresh one); its memory is bounded by ``DOT_BYTES``.
    """

    TIMEOUT = DOT_SECONDS

    def __init__(self):
        self._lock = threading.Lock()
        self._proc = None
        self._key = None  # (pid, dot's path) the process was started for
        self._count = 0
        self._registered = False
        self._pending = None  # the _DotJob dot is working on

    def _start(self, dot: str):
        self._stop()
        self._proc = subprocess.Popen(
            _dot_argv(dot), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self._key = (os.getpid(), dot)
        if not self._registered:
            atexit.register(self.close)
            self._registered = True

    def close(self):
        """End the process (at exit: it ends when its input closes)."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is None or not self._key or self._key[0] != os.getpid():
                return
            try:
                proc.stdin.close()
                proc.wait(timeout=2)
            except Exception:  # noqa: BLE001
                proc.kill()
                proc.wait()
            proc.stdout.close()

    def _stop(self):
        proc, self._proc = self._proc, None
        if proc is not None and self._key and self._key[0] == os.getpid():
            try:
                proc.kill()
                proc.wait(timeout=5)
                proc.stdin.close()
                proc.stdout.close()
            except Exception:  # noqa: BLE001
                pass

    def submit(self, source: str):
        """Hand ``source`` to dot and return at once: :meth:`collect` gives its SVG.

        dot lays it out in its own process meanwhile (no thread here, so nothing
        waits for the GIL). None when this way cannot draw (no ``dot``, Windows).
        """
        dot = shutil.which("dot")
        if dot is None or not hasattr(select, "poll"):  # (Windows: no poll() on pipes)
            return None
        with self._lock:
            self._finish()  # one graph in flight at a time
            try:
                if (
                    self._proc is None
                    or self._proc.poll() is not None
                    or self._key != (os.getpid(), dot)
                ):
                    self._start(dot)
                self._count += 1
                marker = f"gm_end_{os.getpid()}_{self._count}"
                proc = self._proc
                proc.stdin.write(source.encode() + f"\ndigraph {marker} {{}}\n".encode())
                proc.stdin.flush()
            except Exception:  # noqa: BLE001 - a broken pipe: start afresh next time
                self._stop()
                return None
            job = self._pending = _DotJob(proc, marker)
            job.started = time.monotonic()
            return job

    def collect(self, job) -> str | None:
        """The SVG of a :meth:`submit`-ted graph, None if dot could not give it.

        Raises :class:`DrawError` when dot took longer than ``TIMEOUT`` (it is ended).
        """
        with self._lock:
            if self._pending is job:
                self._finish()
        if job.error is not None:
            raise DrawError(job.error)
        return job.image()

    def _finish(self):
        """Read the graph in flight (with the lock held)."""
        job, self._pending = self._pending, None
        if job is None:
            return
        try:
            job.out = self._read(job.proc, f"<!-- Title: {job.marker} ".encode(), job.started)
        except TimeoutError:
            job.error = _too_slow()
            self._stop()
        except Exception:  # noqa: BLE001 - dot died (out of memory): start afresh next time
            self._stop()

    def draw(self, source: str) -> str | None:
        """The SVG of ``source``, or None when this way cannot give it (use a one-shot ``dot``)."""
        job = self.submit(source)
        return None if job is None else self.collect(job)

    def _read(self, proc, marker: bytes, started: float) -> bytes:
        """Everything dot writes before ``marker``'s picture (then reads past that picture)."""
        fd = proc.stdout.fileno()
        poller = select.poll()  # (select() cannot wait on a descriptor past 1023)
        poller.register(fd, select.POLLIN)
        buf = bytearray()
        while True:
            at = buf.find(marker)
            if at >= 0 and buf.find(b"</svg>", at) >= 0:
                head = buf.rfind(b"<?xml", 0, at)
                return bytes(buf[: head if head >= 0 else at])
            left = started + self.TIMEOUT - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                raise TimeoutError("dot gave no answer")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError("dot ended")
            buf += chunk


class _DotJob:
    """One graph handed to :class:`_DotServer`: ``out`` is what dot wrote for it."""

    def __init__(self, proc, marker: str):
        self.proc, self.marker, self.out, self.error = proc, marker, None, None
        self.started = 0.0

    def image(self) -> str | None:
        if self.out is None:
            return None
        text = self.out.decode("utf-8", errors="replace")
        start = text.find("<svg")
        if start < 0:  # dot rejected the graph: only the marker was drawn
            return None
        # dot names a later graph's group as a page of a document ("page0,1_graph0")
        return _PAGE_ID.sub('<g id="graph0"', text[start:], count=1)


_DOT = _DotServer()
_PAGE_ID = re.compile(r'<g id="page[^"]*_graph0"')


def _too_slow() -> str:
    return f"Graphviz's dot took more than {DOT_SECONDS:g} s to lay this graph out and was stopped"


def _dot_once(source: str) -> str:
    """``dot -Tsvg`` run once for ``source``, bounded like the kept process.

    Raises ``graphviz.ExecutableNotFound`` without ``dot`` and :class:`DrawError` with a
    sentence for anything else.
    """
    dot = shutil.which("dot")
    if dot is None:
        import graphviz

        raise graphviz.ExecutableNotFound(["dot"])
    try:
        done = subprocess.run(
            _dot_argv(dot), input=source.encode(), capture_output=True, timeout=DOT_SECONDS
        )
    except subprocess.TimeoutExpired:
        raise DrawError(_too_slow()) from None
    except OSError as exc:
        raise DrawError(f"Graphviz's dot could not be started ({exc.strerror or exc})") from None
    if done.returncode == 0 and b"<svg" in done.stdout:
        out = done.stdout.decode("utf-8", errors="replace")
        return out[out.find("<svg") :]
    said = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    said = [line.strip() for line in said if line.strip()]
    if done.returncode < 0 or any("memory" in line.lower() for line in said):
        raise DrawError(
            f"Graphviz's dot ran out of its {DOT_BYTES >> 20:,} MB of memory on "
            "this graph and was stopped"
        )
    raise DrawError(
        "Graphviz's dot rejected the graph"
        + (f": {said[0][:300]}" if said else f" (exit status {done.returncode})")
    )


def svg(dot_source: str) -> str:
    """Render DOT to an ``<svg>`` element with Graphviz's ``dot`` program.

    Graphs go to one long-lived ``dot`` process (:class:`_DotServer`); when it
    cannot answer, ``dot`` is run once for this graph, which says why. Every run is
    bounded: ``DOT_SECONDS`` of time, ``DOT_BYTES`` of memory.
    Raises ``graphviz.ExecutableNotFound`` when ``dot`` is not installed and
    :class:`DrawError` (a sentence) when it cannot draw the graph.
    """
    image = _DOT.draw(dot_source)
    if image is not None:
        return image
    return _dot_once(dot_source)


def svg_data_uri(image: str) -> str:
    """An SVG as a ``data:`` URI: an ``<img>`` with it survives HTML sanitisers.

    Untrusted notebooks and GitHub strip inline ``<svg>`` (and print its text);
    they keep an image.
    """
    import base64

    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    if "xmlns=" not in image[:300]:
        image = image.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg"', 1)
    return "data:image/svg+xml;base64," + base64.b64encode((head + image).encode()).decode()


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
            f"{_md_code(summary.note)}</p>"
        )
    if dot is None and summary is not None and summary.dot is not None:
        dot = summary.dot  # a picture grouped by the code: text kept at 10 px, the rest scrolls
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
    image = cache.get(source) if cache is not None else None
    if image is None:
        try:
            image = svg(source)
        except Exception as exc:  # noqa: BLE001 - any Graphviz failure becomes a message
            return "".join(parts) + _no_graph(exc, source)
        if cache is not None:
            cache[source] = image
    parts.append(
        f'<div style="overflow:auto; max-width:100%; max-height:{GRAPH_HEIGHT}px">'
        f"{fit(image, shrink)}</div>"
    )
    parts.append(legend_html())
    return "".join(parts)


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


def _no_graph(exc, source: str) -> str:
    import graphviz

    if isinstance(exc, graphviz.ExecutableNotFound):
        message = _md_code(MISSING_DOT)
    else:
        message = html.escape(draw_failure(exc))
    return (
        f'<p style="margin:0">{message}</p>'
        f'<details><summary>DOT source</summary><pre style="max-height:20em; '
        f'overflow:auto">{html.escape(source)}</pre></details>'
    )


def draw_failure(exc) -> str:
    """What went wrong drawing a picture, as one sentence for the reader."""
    if isinstance(exc, DrawError):
        said = str(exc)
    else:
        said = f"Graphviz could not draw the graph ({type(exc).__name__}: {exc})"
        said = said if len(said) < 300 else said[:297] + "…"
    return said.rstrip(".") + "; the tables below still show the run."


def _md_code(text: str) -> str:
    """Escape text for HTML, turning `code` spans into <code>."""
    pieces = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if k % 2 else p for k, p in enumerate(pieces))


# =========================================================================== tables
SORT_KEYS = {
    "graph": "graph order (target first)",
    "grad": "|grad|, largest first",
    "data": "|data|, largest first",
    "label": "label",
}


def node_order(trace, key: str = "graph") -> list:
    """Node indices for the Gradients table: the target first, then by ``key``.

    In graph order that is every index from the last (the target) down, as a
    ``range`` (no list of a million ints for a big graph).
    """
    nodes = trace.nodes
    target = trace.target.index  # the last node
    if key == "graph":
        return range(target, -1, -1)
    rest = list(range(target - 1, -1, -1))
    if key == "grad":
        rest.sort(key=lambda i: -_magnitude(nodes[i].grad))
    elif key == "data":
        rest.sort(key=lambda i: -_magnitude(nodes[i].data))
    elif key == "label":
        rest.sort(key=lambda i: (not nodes[i].label, nodes[i].name))
    else:
        raise ValueError(f"sort key must be one of {sorted(SORT_KEYS)}, got {key!r}")
    return [target] + rest


def _flags(node, status) -> str:
    flags = []
    if node.kink:
        flags.append("kink")
    if not node.finite:
        flags.append("non-finite")
    if node.cut:
        flags.append(f"cut ({node.cut})")
    if status:
        flags.append(f"check: {status}")
    return ", ".join(flags)


_TABLE = (
    '<table style="border-collapse:collapse; font-size:12px; font-family:ui-monospace,monospace">'
)
_CELL = 'style="padding:1px 8px; text-align:{align}; border-bottom:1px solid #e5e7eb"'
# a body row's line is its own (the table collapses borders), and its cells say only padding and
# alignment: inline styles, which sanitisers keep and notebook style sheets do not override, but
# short (a 500-row table is most of a static copy's bytes)
_ROW = "border-bottom:1px solid #e5e7eb"
_TD = '<td style="padding:1px 8px;text-align:{align}">'


# columns whose cells are words, aligned left even when they look like numbers
_WORDS = {"label", "op", "flags", "name", "status", "note", "answer", ""}


def _right(column: str, cell: str) -> bool:
    return column not in _WORDS and _numeric_text(cell)


TABLE_HEIGHT = 360  # px: a table scrolls past this height


def _html_table(header, rows, colours=None) -> str:
    out = [f'<div style="max-height:{TABLE_HEIGHT}px; overflow:auto">', _TABLE, "<thead><tr>"]
    out += [f"<th {_CELL.format(align='left')}>{html.escape(h)}</th>" for h in header]
    out.append("</tr></thead><tbody>")
    left, right = _TD.format(align="left"), _TD.format(align="right")
    width = len(header)
    # a column at a time (a table has thousands of cells): words left, numbers right
    columns = list(
        zip(
            *[
                row[:width] if len(row) >= width else list(row) + [""] * (width - len(row))
                for row in rows
            ]
        )
    )
    cells = []
    for name, column in zip(header, columns):
        texts = _escape_each(column)
        if name in _WORDS:
            cells.append([left + t + "</td>" for t in texts])
        else:
            cells.append(
                [
                    (right if number else left) + t + "</td>"
                    for number, t in zip(_numbers(column), texts)
                ]
            )
    plain = f'<tr style="{_ROW}">'
    for k, row in enumerate(zip(*cells)):
        colour = colours[k] if colours else ""
        out += (f'<tr style="background:{colour};{_ROW}">' if colour else plain), *row, "</tr>"
    out.append("</tbody></table></div>")
    return "".join(out)


def _escape_each(cells: list) -> list:
    """``html.escape`` of each cell, as one call over all of them (a table has thousands)."""
    parts = html.escape("\0".join(cells)).split("\0") if cells else []
    if len(parts) != len(cells):  # a cell holds the separator itself: one at a time
        return [html.escape(cell) for cell in cells]
    return parts


def table_html(table: dict) -> str:
    """A table of the live view (``columns``, ``rows`` of texts, ``classes``, ``note``) as
    HTML; a column that is empty in every row (a scalar graph's shapes) is left out."""
    columns, rows = table["columns"], table["rows"]
    empty = [
        c
        for c, name in enumerate(columns)
        if name in ("shape", "flags") and not any(row[c] for row in rows)
    ]
    if empty:
        keep = [c for c in range(len(columns)) if c not in empty]
        columns = [columns[c] for c in keep]
        rows = [[row[c] for c in keep] for row in rows]
    colours = [
        FILL["fail"] if k == "fail" else FILL["target"] if k == "target" else ""
        for k in table.get("classes") or [""] * len(rows)
    ]
    out = _html_table(columns, rows, colours)
    if table.get("note"):
        out += f"<p>{html.escape(table['note'])}</p>"
    return out


def _numbers(cells: list) -> list:
    """:func:`_numeric_text` of each cell (a column of numbers is read in one go)."""
    try:
        list(map(float, cells))
    except (TypeError, ValueError):
        return [_numeric_text(cell) for cell in cells]
    return [True] * len(cells)


def _numeric_text(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def column_text(trace, rows, column: str = "data", digits: int = 6) -> list:
    """``fmt`` of the data (or grad) of nodes ``rows``, read from the trace's columns.

    Plain float nodes are formatted straight from the column (as :func:`fmt` writes a
    float); ints, arrays and the like go through :func:`fmt`.
    """
    rows = list(rows)
    # (+ 0.0: the table writes a negative zero as 0)
    values = (getattr(trace, column)[np.asarray(rows, dtype=np.intp)] + 0.0).tolist()
    spec = f"%.{digits}g"
    out = [spec % v for v in values]
    special = trace.tensor_data if column == "data" else trace.tensor_grad
    exact = trace.exact if column == "data" else {}
    if special or exact:
        read = trace._data if column == "data" else trace._grad
        for k, i in enumerate(rows):
            if i in special or i in exact:
                out[k] = fmt(read(i), digits)
    return out


def op_symbols(trace) -> list:
    """The symbol of each of ``trace.ops`` (what :func:`op_symbol` gives), by op code."""
    return [getattr(e, "symbol", None) or e.name for e in trace.ops]


def flags_text(trace, rows, status: dict, words=None) -> list:
    """The flags of nodes ``rows`` as text: ``words(node, status)`` (default :func:`_flags`),
    "" for the nodes with none, found from the kink, finite and cut columns (a node view is
    made only for a flagged node)."""
    words = words or _flags
    index = np.asarray(list(rows), dtype=np.intp)
    if not len(index):
        return []
    cuts, nodes = trace.cut_notes, trace.nodes
    return [
        "" if not k and f and i not in status and i not in cuts else words(nodes[i], status.get(i))
        for i, k, f in zip(index.tolist(), trace.kink[index].tolist(), trace.finite[index].tolist())
    ]


def _node_rows(trace, order, report):
    status = _failed(report)
    target = trace.target.index
    rows_at = list(order)
    index = np.asarray(rows_at, dtype=np.intp)
    names = trace.label_names
    labels = [names[c] for c in trace.label_code[index].tolist()] if rows_at else []
    symbols = op_symbols(trace)
    codes = trace.op_code[index].tolist() if rows_at else []
    data = column_text(trace, rows_at, "data")
    grad = column_text(trace, rows_at, "grad")
    flags = flags_text(trace, rows_at, status)
    rows, colours = [], []
    for k, i in enumerate(rows_at):
        rows.append(
            [
                str(i),
                labels[k] or ("(target)" if i == target else ""),
                symbols[codes[k]] if codes[k] >= 0 else "leaf",
                data[k],
                grad[k],
                flags[k],
            ]
        )
        colours.append(
            FILL["fail"]
            if status.get(i) in ("fail", "error")
            else FILL["target"]
            if i == target
            else ""
        )
    return rows, colours


def nodes_table_html(trace, order=None, report=None, limit: int = TABLE_ROWS) -> str:
    """Every node (up to ``limit``): label, op, data, grad and flags."""
    order = node_order(trace) if order is None else order
    rows, colours = _node_rows(trace, order[:limit], report)
    table = _html_table(["#", "label", "op", "data", "grad", "flags"], rows, colours)
    if len(order) > limit:
        table += (
            f"<p>Showing {limit:,} of {len(order):,} nodes; sort by |grad| to see the "
            "largest gradients first.</p>"
        )
    return table


def nodes_table_text(trace, order=None, report=None, limit: int = TEXT_ROWS) -> str:
    """The same table as plain text (columns aligned)."""
    order = node_order(trace) if order is None else order
    rows, _ = _node_rows(trace, order[:limit], report)
    out = _text_table(["#", "label", "op", "data", "grad", "flags"], rows)
    if len(order) > limit:
        out += f"\n... {len(order) - limit:,} more nodes (trace.nodes has them all)"
    return out


def _text_table(header, rows) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(
            "  ".join(
                c.rjust(w) if _right(h, c) else c.ljust(w) for h, c, w in zip(header, row, widths)
            ).rstrip()
        )
    return "\n".join(lines)


# =========================================================================== check reports
def _report_rows(report, limit, torch=None):
    """Header and rows of a check table; ``torch`` adds PyTorch's gradient and difference."""
    first, second = report.columns
    header = ["name", first, second, "abs err", "rel err", "bound", "status", "note"]
    theirs = _torch_rows(torch)
    if theirs is not None:
        header[3:3] = ["torch", "|torch − analytic|"]
    rows = []
    for r in report.worst_first()[:limit]:
        row = [
            r.name,
            fmt(r.got, 8),
            fmt(r.expected, 8),
            fmt(r.abs_err, 3),
            fmt(r.rel_err, 3),
            fmt(r.bound, 3),
            r.status,
            r.note,
        ]
        if theirs is not None:
            row[3:3] = _torch_cells(theirs.get(r.index))
        rows.append(row)
    return header, rows


def _torch_rows(torch):
    """Leaf index → TorchRow of a comparison that has rows, else None."""
    if torch is None or torch.error is not None:
        return None
    return torch.by_index


def _torch_cells(row) -> list:
    if row is None:
        return ["", ""]
    return [fmt(row.torch, 8), fmt(row.diff, 3) + ("" if row.agrees else " ✗")]


def _report_head(report) -> list:
    tol = (
        f"eps {report.eps:g}, pass if |analytic − numeric| ≤ atol + rtol·|numeric| "
        f"(atol {report.atol:g}, rtol {report.rtol:g})"
    )
    if report.replay is not None:
        recorded, replayed = report.replay
        tol += f"; replayed target {fmt(replayed, 8)} " + (
            "= recorded" if report.replay_ok else f"≠ recorded {fmt(recorded, 8)}"
        )
    seen = {r.status for r in report.rows} - {"pass"}
    legend = [f"{status}: {meaning}" for status, meaning in STATUSES.items() if status in seen]
    if legend:
        tol += "; " + "; ".join(legend)
    mark = "✗" if not report.passed else "⚠" if report.flagged or not report.rows else "✓"
    return [f"{mark} {report.verdict}", tol] + list(report.notes)


_STATUS_FILL = {
    "fail": FILL["fail"],
    "error": FILL["fail"],
    "kink": "#ffedd5",
    "nonfinite": "#ede9fe",
    "unresolved": "#f3f4f6",
}
_GOOD = "#166534"


def report_html(report, limit: int = TABLE_ROWS, *, torch=None) -> str:
    """A CheckReport as HTML: the verdict, the tolerance, notes, then rows worst first.

    An ``expect`` report is shown as answers (:func:`answers_html`). ``torch``
    (a :class:`gradmagic.analysis.torchcheck.TorchComparison`) adds PyTorch's column.
    """
    if report.kind == "expect":
        return answers_html(report, limit)
    head = _report_head(report)
    colour = (
        LINE["fail"]
        if not report.passed
        else LINE["kink"]
        if report.flagged or not report.rows
        else _GOOD
    )
    out = [
        f'<div><p style="margin:0; color:{colour}"><b>{html.escape(head[0])}</b></p>',
        f'<p style="margin:0; color:#4b5563">{html.escape(head[1])}</p>',
    ]
    out += [f'<p style="margin:2px 0">⚠ {html.escape(n)}</p>' for n in head[2:]]
    if torch is not None:
        out.append(_torch_line_html(torch))
    header, rows = _report_rows(report, limit, torch)
    colours = [_STATUS_FILL.get(row[-2], "") for row in rows]
    out.append(_html_table(header, rows, colours))
    if len(report.rows) > limit:
        out.append(f"<p>Showing the worst {limit:,} of {len(report.rows):,} rows.</p>")
    out.append("</div>")
    return "".join(out)


def report_text(report, limit: int = TEXT_ROWS, *, torch=None) -> str:
    """A CheckReport as plain text, rows worst first (answers for an ``expect`` report)."""
    if report.kind == "expect":
        return answers_text(report, limit)
    lines = _report_head(report)
    if torch is not None:
        lines.append(torch.verdict)
    header, rows = _report_rows(report, limit, torch)
    lines.append(_text_table(header, rows))
    if len(report.rows) > limit:
        lines.append(f"... {len(report.rows) - limit:,} more rows (report.rows has them all)")
    return "\n".join(lines)


# =========================================================================== PyTorch
def _torch_line_html(torch) -> str:
    colour = "#4b5563" if torch.error else _GOOD if torch.passed else LINE["fail"]
    return f'<p style="margin:2px 0; color:{colour}">{_md_code(torch.verdict)}</p>'


def _torch_table(torch, limit):
    header = ["name", "analytic", "torch", "|torch − analytic|"]
    rows = [[r.name, fmt(r.analytic, 8), *_torch_cells(r)] for r in torch.rows[:limit]]
    return header, rows


def torch_html(torch, limit: int = TABLE_ROWS) -> str:
    """PyTorch's second opinion on its own (when the numerical check was skipped)."""
    out = ["<div>", _torch_line_html(torch)]
    if torch.error is None:
        header, rows = _torch_table(torch, limit)
        colours = ["" if r.agrees else FILL["fail"] for r in torch.rows[:limit]]
        out.append(_html_table(header, rows, colours))
    out.append("</div>")
    return "".join(out)


def torch_text(torch, limit: int = TEXT_ROWS) -> str:
    """The same as plain text."""
    if torch.error is not None:
        return torch.verdict
    return torch.verdict + "\n" + _text_table(*_torch_table(torch, limit))


# =========================================================================== answers
def _quantity(key: str, target: str) -> str:
    """What an expected entry is, for people: ``∂L/∂a`` or ``L (value)``."""
    if key.endswith(".data"):
        return f"{key[:-5]} (value)"
    name = key[:-5] if key.endswith(".grad") else key
    return f"∂{target}/∂{name}"


def _signed_difference(row) -> str:
    """got − expected for numbers; the largest |difference| for arrays; '' for errors."""
    if row.status == "error":
        return ""
    if isinstance(row.got, np.ndarray) or isinstance(row.expected, (np.ndarray, list, tuple)):
        return fmt(row.abs_err, 3)
    try:
        return fmt(float(row.got) - float(row.expected), 3)
    except (TypeError, ValueError, OverflowError):
        return fmt(row.abs_err, 3)


def _answer_rows(report, limit):
    header = ["", "answer", "expected", "got", "got − expected", "tolerance", "note"]
    rows = []
    for r in report.rows[:limit]:
        rows.append(
            [
                "✓" if r.ok else "✗",
                _quantity(r.name, report.target or "target"),
                fmt(r.expected, 8),
                fmt(r.got, 8),
                _signed_difference(r),
                "" if r.status == "error" else fmt(r.bound, 3),
                r.note,
            ]
        )
    return header, rows


def _answers_head(report) -> list:
    mark = "✗" if not report.passed else "⚠" if not report.rows else "✓"
    lines = [
        f"{mark} {report.verdict}",
        f"correct if |got − expected| ≤ {report.atol:g} + {report.rtol:g}·|expected|",
    ]
    if report.error is not None:
        lines.append(report.error)
    return lines + list(report.notes)


def answers_html(report, limit: int = TABLE_ROWS) -> str:
    """An ``expect`` report for students: verdict on top, then ✓/✗ per expected entry.

    Rows keep the order the answers were given in; names with no node are ✗
    rows saying so.
    """
    head = _answers_head(report)
    colour = _GOOD if report.passed else LINE["fail"]
    out = [
        f'<div class="gradmagic-answers"><p style="margin:0; color:{colour}; '
        f'font-size:14px"><b>{html.escape(head[0])}</b></p>',
        f'<p style="margin:0; color:#4b5563">{html.escape(head[1])}</p>',
    ]
    if report.error is not None:
        out.append(
            f'<pre style="margin:2px 0; color:{LINE["fail"]}">{html.escape(report.error)}</pre>'
        )
    out += [f'<p style="margin:2px 0">⚠ {html.escape(n)}</p>' for n in report.notes]
    header, rows = _answer_rows(report, limit)
    colours = ["#dcfce7" if row[0] == "✓" else FILL["fail"] for row in rows]
    out.append(_html_table(header, rows, colours))
    if len(report.rows) > limit:
        out.append(f"<p>Showing {limit:,} of {len(report.rows):,} answers.</p>")
    out.append("</div>")
    return "".join(out)


def answers_text(report, limit: int = TEXT_ROWS) -> str:
    """The same as plain text: verdict line, tolerance, then one line per answer."""
    lines = _answers_head(report)
    header, rows = _answer_rows(report, limit)
    lines.append(_text_table(header, rows))
    if len(report.rows) > limit:
        lines.append(f"... {len(report.rows) - limit:,} more answers (report.rows has them all)")
    return "\n".join(lines)


# =========================================================================== whole run
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
    count = len(inputs(trace))
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


# In JupyterLab and Notebook 7 (trusted output only): the static copy hides itself once the live
# view beside it has drawn, and hides the widget's "model not found" line when there is no live view
# (a saved notebook reopened without widget state). Untrusted output drops the <style>: there the
# live view is not shown anyway.
STATIC_STYLE = (
    "<style>.jp-OutputArea-child:has(.gradmagic-static):has(+ .jp-OutputArea-child "
    ".gm-root:not(.gm-failed)){display:none}.jp-OutputArea-child:has(.gradmagic-static) + "
    ".jp-OutputArea-child:has(.jupyter-widgets):not(:has(.gm-root)){display:none}"
    "</style>"
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
        f'<div class="gradmagic gradmagic-static"{mark}>',
        STATIC_STYLE if run else "",
        f'<p style="margin:0 0 4px 0"><b>{html.escape(headline(trace))}</b></p>',
    ]
    out += [f'<p style="margin:0">⚠ {html.escape(n)}</p>' for n in run_notes(trace, report)]
    if expected is not None:
        out.append(_section("Answers", answers_html(expected)))
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
    lines.append(nodes_table_text(trace, report=report))
    if report is not None:
        lines += ["", report_text(report, limit=10, torch=torch)]
    elif torch is not None:
        lines += ["", torch_text(torch, limit=10)]
    return "\n".join(lines)
