"""What a graph too big to draw shows instead: the nodes nearest the target, the named ones.

A graph past ``--max-nodes``, or too big for Graphviz to lay out within the drawing budget
(:func:`drawable`), is drawn as a :class:`Summary`; the tables still list every node.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass

import numpy as np

from ..analysis.options import DEFAULTS
from . import drawing
from .dot import drawn_nodes, op_symbol
from .tables import TABLE_ROWS

DEFAULT_MAX_NODES = DEFAULTS.max_nodes
NEIGHBOURHOOD = 30  # nodes nearest the target drawn in a summary
NAMED = 20  # named nodes drawn in a summary


@dataclass
class Summary:
    """What a big graph's view draws instead of every node."""

    shown: list  # node indices drawn
    counts: str  # e.g. "100,000 nodes: 50,001 leaves, 49,999 operations (+ 49,999)"
    note: str  # why and how to see more
    dot: str | None = None  # the picture's DOT when it is not the nodes ``shown`` (grouped)
    groups: object = None  # the analysis.groups.Grouping the picture was made from
    static: str | None = None  # the static copy's DOT when it draws less than ``dot`` (grouped)
    hint: str = ""  # what a click does: said by the live view only (a static picture is inert)


def node_limit(trace, max_nodes=None) -> int:
    value = max_nodes if max_nodes is not None else trace.options.max_nodes
    return DEFAULT_MAX_NODES if value is None else int(value)


DRAW_LIMIT = 1_000  # drawn values past which no graph is laid out whole
LAYOUT_LIMIT = 4_000  # places Graphviz may lay out (see layout_size) while the wait stays short


def layout_size(trace, shown) -> int:
    """How many places Graphviz's ``dot`` lays out to draw the values ``shown``.

    Each value and operation is one; an edge that spans k ranks adds k - 1 (dot
    bends it through a virtual node at each rank it crosses). That is what its
    time grows with: a loop whose input is used at every step has edges from
    the first rank to every later one, so its layout grows with the square of its
    length, while a layered network of the same size lays out quickly.
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
    limit = node_limit(trace, max_nodes)
    n = trace.n
    whole = None  # whether every node could be drawn (None: too many to ask)
    if n <= max(limit, DRAW_LIMIT) * 4:
        whole = drawable(trace, drawn_nodes(trace))
    if n <= limit and whole:
        return None
    limit = min(limit, DEFAULT_MAX_NODES)
    seen, extra = _chosen(trace, limit)
    counts = _counts(trace)
    drawn = f"the {len(seen)} nodes nearest the target" + (
        f" and {len(extra)} of the named nodes and inputs" if extra else ""
    )
    listed = (
        "lists every node"
        if n <= TABLE_ROWS
        else f"lists {TABLE_ROWS:,} (the target, the inputs, then the nodes nearest the target; "
        f"`gradmagic.last.nodes` has all {n:,})"
    )
    asked = node_limit(trace, max_nodes)
    why = (
        f"More than --max-nodes {asked:,}"
        if n > asked
        else f"Too big to lay out whole within {drawing.DOT_SECONDS:g} s"
    )
    more = f" `%%autograd --max-nodes {n}` draws them all." if whole else ""
    note = f"{why}: this summary draws {drawn}; the Gradients table {listed}.{more}"
    return Summary(shown=sorted(seen | set(extra)), counts=counts, note=note)


def _chosen(trace, limit: int) -> tuple:
    """(the nodes nearest the target, breadth first; the named nodes and inputs beyond them)."""
    nodes = trace.nodes
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
    return seen, extra


def _counts(trace) -> str:
    """The nodes, leaves and operations, with the six commonest ops and how many each made."""
    n, leaves = trace.n, len(trace.leaf_index)
    made = trace.op_code[trace.op_code >= 0]
    ops: Counter[str] = Counter()  # op name → nodes it made, counted per op entry
    first: dict[str, int] = {}  # op name → a node it made, whose op entry gives the symbol
    per_code = np.bincount(made, minlength=len(trace.ops)) if made.size else np.zeros(0, int)
    for code, count in enumerate(np.asarray(per_code).tolist()):
        if count:
            name = trace.ops[code].name
            ops[name] += count
            first.setdefault(name, int(np.argmax(trace.op_code == code)))
    top = ", ".join(f"{op_symbol(trace, first[op])} {count:,}" for op, count in ops.most_common(6))
    return f"{n:,} nodes: {leaves:,} leaves, {n - leaves:,} operations" + (
        f" ({top}{', ...' if len(ops) > 6 else ''})" if top else ""
    )
