"""The run's graph as Graphviz DOT.

The graph follows micrograd's picture: each value is a record ``label | data | grad`` and each
operation a small node between its inputs and its result. Leaves, operations and the target
have their own colours; leaves whose gradient fails the numerical check are red; kinks and
non-finite values are marked. A tensor node's record shows its shape beside its name
(``W 2×1``). Unnamed scalar constants are folded into their op's label (``**2``).
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet

import numpy as np

from ..analysis.numbers import all_finite, dims
from .formatting import FILL, LINE, column_text, figure, fmt, undefined_grad


LABEL_CHARS = 80  # a drawn line of text at most (a name can be any length)


def clip(text) -> str:
    """``text`` cut to ``LABEL_CHARS`` characters in the middle (the end of ``w[17]`` or
    ``layer.weight`` tells names apart), the cut marked with "…"."""
    text = str(text)
    if len(text) <= LABEL_CHARS:
        return text
    half = LABEL_CHARS // 2
    return text[:half] + "…" + text[len(text) - (LABEL_CHARS - half - 1) :]


def escape_record(text: str) -> str:
    """``text`` as one field of a Graphviz record label (inside a quoted string), clipped."""
    out = []
    for ch in clip(text):
        if ch in '\\{}|<>"':
            out.append("\\" + ch)
        elif ch in "\n\r\t":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def escape_string(text: str) -> str:
    """``text`` inside a quoted DOT string (not a record), clipped."""
    return (
        clip(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ").replace("\r", " ")
    )


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


def statuses(report) -> dict:
    """node index → check status, for rows that did not simply pass."""
    if report is None:
        return {}
    return {r.index: r.status for r in report.rows if r.index is not None and r.status != "pass"}


def op_symbols(trace) -> list:
    """The symbol of each of ``trace.ops`` (what :func:`op_symbol` gives), by op code."""
    return [getattr(e, "symbol", None) or e.name for e in trace.ops]


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
    """A binary op's label with its folded constant(s): ``**2``, ``*3``, ``-(-1)``,
    ``maximum(0, ·)`` (a function: its arguments in their places, ``·`` the drawn input).

    A constant of ``+`` or ``*`` is written after the symbol whichever side it was on
    (``sum()``'s start 0 reads ``+0``, not ``0+``); a negative one after a symbol is put
    in parentheses (``y - (-1.0)`` reads ``-(-1)``, not ``--1``).
    """

    def after(text):
        return f"({text})" if text.startswith(("-", "−")) else text

    if symbol[:1].isalpha():  # a function, np.maximum(0, x): maximum(0, ·), not "0maximum"
        return f"{symbol}({left or '·'}, {right or '·'})"
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
    positions, which can run for minutes on a long recurrence) stop after 4
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
    status = statuses(report)
    target = trace.target.index
    claims = getattr(trace, "claims", None)
    if grad_text is None and claims is not None:  # a learner's engine: their .grad beside
        grad_text = _claimed(nodes, shown, claims)
    # (top to bottom, ranks alternate values and ops: closer, so a small graph fits a screen)
    ranksep = 0.2 if rankdir == "TB" else 0.35
    lines = [
        "digraph gradmagic {",
        f'  graph [rankdir={rankdir}, bgcolor="transparent", nodesep=0.25, ranksep={ranksep}'
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
        if node.parents:
            lines += _op_lines(trace, node, fold, drawn, path, current)
    lines.append("}")
    return "\n".join(lines)


_ON_PATH = {"color": LINE["path"], "penwidth": "2"}


def _claimed(nodes, shown, claims) -> list:
    """The grad fields of the ``shown`` nodes, each with the ``.grad`` a learner's own
    engine left on it beside the true one, judged: ``2 · yours 1 ✗``."""
    rows = {r.index: r for r in claims.rows}
    text = [""] * len(nodes)
    for i in shown:
        text[i] = figure(nodes[i].grad)
        row = rows.get(i)
        if row is not None:
            text[i] += f" · yours {figure(row.expected)} {'✓' if row.ok else '✗'}"
    return text


def _op_lines(trace, node, fold, drawn, path, current) -> list:
    """The DOT lines of the op that made ``node``: the op, its edges, and its hidden inputs."""
    i = node.index
    op = {
        "shape": "ellipse",
        "label": escape_string(op_label(trace, i, fold)),
        "style": "filled",
        "fillcolor": FILL["op"],
        "color": LINE["plain"],
        "margin": "0.04,0.02",
        "height": "0.22",
    }
    if node.kink:
        op.update(label=op["label"] + "\\nkink", color=LINE["kink"], penwidth="2")
    # the flow runs through this op when the node and one of its inputs are on the path
    flows = i in path and any(p in path for p in node.parents)
    if flows:
        op.update(color=LINE["path"], penwidth="2.5")
    if i == current:
        op.update(fillcolor=FILL["current"], color=LINE["current"], penwidth="3")
    lines = [f"  o{i} [{_attrs(op)}];", _edge(f"o{i}", f"v{i}", _ON_PATH if flows else None)]
    hidden = 0
    for p in node.parents:
        if p in drawn:
            lines.append(_edge(f"v{p}", f"o{i}", _ON_PATH if p in path and i in path else None))
        elif p not in fold:
            hidden += 1
    if hidden:
        lines.append(
            f'  h{i} [shape=plaintext, fontcolor="#4b5563", '
            f'label="{hidden} more input{"s" if hidden > 1 else ""}"];'
        )
        lines.append(_edge(f"h{i}", f"o{i}", {"style": "dashed"}))
    return lines


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
    undefined = undefined_grad(node)
    if not node.finite or undefined:
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
    if not node.finite or undefined:
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


def own_dot(own: dict, rankdir: str = "LR") -> str:
    """The DOT of a learner's own graph (:func:`gradmagic.notebook.learner.drawing`) as their
    ``draw_dot`` draws it: a record a learner's object (its ``label``, ``data`` and ``grad``),
    its ``_op`` an ellipse between it and its inputs; the grad field holds the true gradient
    beside theirs (``grad 2 · yours 1 ✗``), a wrong one drawn red. Object ``k`` is DOT node
    ``u{k}`` (the target ``u0``), its op ``p{k}``. ``rankdir``: ``"LR"``, as draw_dot, or
    ``"TB"``, which the live view takes where that fits the output better."""
    nodes = own["nodes"]
    lines = [
        "digraph gradmagic {",
        f'  graph [rankdir={rankdir}, bgcolor="transparent", nodesep=0.25, ranksep=0.35'
        f"{layout_attrs(len(nodes))}];",
        '  node [fontname="Helvetica", fontsize=10, penwidth=1];',
        '  edge [color="#6b7280", arrowsize=0.6];',
    ]
    row = "{{{}}}" if rankdir == "LR" else "{}"  # a record's fields side by side either way
    for k, (node, inputs) in enumerate(zip(nodes, own["parents"])):
        wrong = node["ok"] is False
        grad = f"grad {figure(node['true'])} · " if node["true"] is not None else ""
        grad += f"yours {figure(node['yours'])}"
        grad += "" if node["ok"] is None else " ✓" if node["ok"] else " ✗"
        fields = [node["label"], f"data {figure(node['data'])}", grad]
        attrs = {
            "shape": "record",
            "label": row.format("|".join(escape_record(f) for f in fields)),
            "style": "filled",
            "fillcolor": FILL["fail" if wrong else "target" if k == 0 else "value"],
            "color": LINE["fail" if wrong else "plain"],
        }
        if wrong:
            attrs["penwidth"] = "2"
        lines.append(f"  u{k} [{_attrs(attrs)}];")
        head = f"u{k}"
        if node["op"]:
            op = {"shape": "ellipse", "label": escape_string(node["op"]), "style": "filled"}
            op.update(fillcolor=FILL["op"], color=LINE["plain"], margin="0.04,0.02", height="0.22")
            lines += [f"  p{k} [{_attrs(op)}];", _edge(f"p{k}", head)]
            head = f"p{k}"
        lines += [_edge(f"u{p}", head) for p in dict.fromkeys(inputs)]
    lines.append("}")
    return "\n".join(lines)


def own_note(own: dict) -> str:
    """What the learner's own graph shows, in a sentence (and how much of it is drawn)."""
    drawn, total = len(own["nodes"]), own["total"]
    part = (
        f" The first {drawn:,} of your {total:,} objects reached from the target are drawn."
        if total > drawn
        else ""
    )
    return (
        "Your objects as your draw_dot draws them: label, data and grad, each _op between an "
        "object and its inputs. A grad field holds the true gradient, then your .grad "
        f"(✗ and red where yours is wrong).{part}"
    )
