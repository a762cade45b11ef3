"""The DOT of a big graph grouped by its code (:mod:`gradmagic.analysis.groups`).

A group is a rounded box: its function or line, how many nodes it holds, how many values
it reads and gives, and its value and gradient when it gives one. An opened group is a
dashed frame around what it holds. The run's inputs are tables, one for each container
that holds them (``model.layers[0].neurons[1].w``: one row an element, with its value and
gradient), so a model's parameters stay readable beside its groups.

A group's DOT node is named ``"g:<id>"`` (the live view opens it when clicked), a single
value ``v<i>`` as in the whole graph, an input table ``t<k>`` with a port ``i<i>`` a row.
"""

from __future__ import annotations

import contextlib
import functools
import html
import re
import weakref

from ..analysis.groups import Grouping, View
from . import dot, render

__all__ = ["grouped_dot", "containers", "gradient_cells", "summarise"]

_STEP = re.compile(r"\.[A-Za-z_]\w*|\[[^\[\]]*\]|^[^.\[]+")
FONT = 10  # pt: the smallest text drawn
COLUMNS = 6  # columns of an input table side by side; more go in further blocks below


@functools.lru_cache(maxsize=1 << 14)  # (a run's labels are read by each picture made)
def _place(label: str) -> tuple:
    """``label`` as (table, row, column): ``model.layers[0].neurons[1].w[2]`` →
    ``("model.layers[0].neurons", "[1]", ".w[2]")``; ``xs[0][1]`` → ``("xs", "[0]", "[1]")``;
    ``ys[2]`` → ``("ys", "", "[2]")``; ``w`` → ``("w", "", "")``."""
    steps = _STEP.findall(label)
    if "".join(steps) != label or not steps:
        return label, "", ""
    for i in range(len(steps) - 2, 0, -1):
        if steps[i].startswith("[") and steps[i + 1].startswith("."):
            return "".join(steps[:i]), steps[i], "".join(steps[i + 1 :])
    if len(steps) >= 3 and steps[-1].startswith("[") and steps[-2].startswith("["):
        return "".join(steps[:-2]), steps[-2], steps[-1]
    if len(steps) >= 2 and steps[-1].startswith("["):
        return "".join(steps[:-1]), "", steps[-1]
    return label, "", ""


def containers(trace, params: list) -> dict:
    """The inputs as tables: ``table name`` → ``{row: {column: node index}}`` (see
    :func:`_place`), so that a model's weights read as a grid, a neuron a row. (Kept for the
    trace's last ``params``: the picture and the live view's cells read the same tables.)"""
    key = tuple(params)
    kept = _TABLES.get(trace)
    if kept is not None and kept[0] == key:
        return kept[1]
    out: dict = {}
    places = [(_place(trace.nodes[i].label or f"input {i}"), i) for i in params]
    for (table, row, column), i in sorted(places, key=lambda p: tuple(map(_natural, p[0]))):
        out.setdefault(table, {}).setdefault(row, {})[column] = i
    with contextlib.suppress(TypeError):  # (a trace that takes no weak reference)
        _TABLES[trace] = (key, out)
    return out


_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def gradient_cells(trace, params: list) -> list:
    """The inputs whose gradients the tables write, in the order their ``∇`` cells are
    drawn (table by table, a block of columns at a time, row by row): the live view finds
    an input's cell by it, to step its gradient through the backward pass."""
    out = []
    for rows in containers(trace, params).values():
        columns = list(dict.fromkeys(c for cells in rows.values() for c in cells))
        for a in range(0, max(len(columns), 1), COLUMNS):
            block = columns[a : a + COLUMNS]
            for cells in rows.values():
                out += [cells[c] for c in block if c in cells]
    return out


@functools.lru_cache(maxsize=1 << 14)
def _natural(text: str) -> tuple:
    """``"w[10]"`` after ``"w[9]"``: the numbers in ``text`` compared as numbers."""
    return tuple((0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"(\d+)", text))


def _cell(text: str, **attrs) -> str:
    extra = "".join(f' {k.upper()}="{v}"' for k, v in attrs.items())
    return f"<TD{extra}>{html.escape(dot.clip(text))}</TD>"


_GRAD = "#1e3a8a"  # a gradient's text: dark blue, 9:1 on the input colour


def _table(trace, name: str, rows: dict, target: int) -> str:
    """An HTML-like DOT label: the table's name, its column names, then each row's values
    over their gradients (∇)."""
    columns = list(dict.fromkeys(c for cells in rows.values() for c in cells))
    fill = render.FILL["leaf"]
    if any(i == target for cells in rows.values() for i in cells.values()):
        fill = render.FILL["target"]
    blocks = [columns[a : a + COLUMNS] for a in range(0, len(columns), COLUMNS)] or [[]]
    width = min(len(columns), COLUMNS) + (1 if any(rows) else 0)
    out = [f'<TR><TD COLSPAN="{width}" ALIGN="LEFT"><B>{html.escape(dot.clip(name))}</B></TD></TR>']
    ids = [i for cells in rows.values() for i in cells.values()]
    shown = dict(
        zip(ids, zip(render.column_figures(trace, ids), render.column_figures(trace, ids, "grad")))
    )
    for block in blocks:
        out += _rows(shown, rows, block, any(rows))
    return (
        f'<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1" '
        f'BGCOLOR="{fill}" COLOR="{render.LINE["plain"]}">{"".join(out)}</TABLE>>'
    )


def _rows(shown: dict, rows: dict, columns: list, named_rows: bool) -> list:
    """The rows of one block of columns: their names, then each row's values over its
    gradients (``shown``: each input's value and gradient written)."""
    out = []
    if any(columns):
        out.append(
            "<TR>"
            + ("<TD></TD>" if named_rows else "")
            + "".join(_cell(c) for c in columns)
            + "</TR>"
        )
    for row, cells in rows.items():
        if not any(c in cells for c in columns):
            continue
        values, grads = [], []
        for c in columns:
            i = cells.get(c)
            if i is None:
                values.append("<TD></TD>")
                grads.append("<TD></TD>")
                continue
            data, grad = shown[i]
            values.append(_cell(data, ALIGN="RIGHT"))
            grads.append(
                f'<TD ALIGN="RIGHT"><FONT COLOR="{_GRAD}">∇{html.escape(grad)}</FONT></TD>'
            )
        head = _cell(row, ROWSPAN="2", ALIGN="LEFT") if named_rows else ""
        out.append(f"<TR>{head}{''.join(values)}</TR><TR>{''.join(grads)}</TR>")
    return out


def _title(group) -> str:
    """A group's title; a line in a loop says how many times it ran (``line 6 × 400``)."""
    return f"{group.title} × {group.runs:,}" if group.runs > 1 else group.title


def _group_label(trace, group, view: View) -> str:
    lines = [_title(group)]
    where = f"line {group.line} · " if group.line is not None and group.kind != "line" else ""
    lines.append(f"{where}{group.size:,} node{'s' if group.size != 1 else ''}")
    ins, outs = view.inputs.get(group.id, []), view.outputs.get(group.id, [])
    lines.append(f"{len(ins):,} in · {len(outs):,} out")
    if len(outs) == 1:
        node = trace.nodes[outs[0]]
        lines.append(f"{render.figure(node.data)}  grad {render.figure(node.grad)}")
    return "\\n".join(render.escape_string(x) for x in lines)


def _node_id(key: str, where: dict) -> str:
    """The DOT name of a drawn key (a group id or ``n<i>``), a table port for an input."""
    if key in where:
        return where[key]
    if key.startswith("n"):
        return f"v{key[1:]}"
    return f'"g:{key}"'


STATIC_INPUTS = 24  # the most inputs a table of the static picture draws one by one


def grouped_dot(
    trace,
    grouping: Grouping | None = None,
    opened=None,
    report=None,
    view: View | None = None,
    bound: bool = False,
) -> str:
    """The DOT of ``trace`` grouped by its code, with the groups ``opened`` opened
    (None: the default view, :meth:`Grouping.opened_by_default`); ``view`` is the grouping's
    view of them when the caller has it. ``bound`` (the static copy's picture): a table of
    more than ``STATIC_INPUTS`` inputs is one box saying where its numbers are."""
    grouping = Grouping(trace) if grouping is None else grouping
    view = grouping.view(opened) if view is None else view
    target = trace.n - 1
    lines = [
        "digraph gradmagic {",
        '  graph [rankdir=LR, bgcolor="transparent", nodesep=0.2, ranksep=0.45, '
        f'fontname="Helvetica", fontsize={FONT}];',
        f'  node [fontname="Helvetica", fontsize={FONT}, penwidth=1];',
        f'  edge [color="#6b7280", arrowsize=0.6, fontname="Helvetica", fontsize={FONT}];',
    ]
    where: dict = {}  # an input's key → its table
    for k, (name, rows) in enumerate(containers(trace, view.params).items()):
        for cells in rows.values():
            for i in cells.values():
                where[f"n{i}"] = f"t{k}"
        count = sum(map(len, rows.values()))
        if bound and count > STATIC_INPUTS:
            said = (
                f"{dot.clip(name)}\n{count:,} inputs: values and gradients in the Gradients table"
            )
            box = {"shape": "box", "style": "filled", "label": render.escape_string(said)}
            box.update(fillcolor=render.FILL["leaf"], color=render.LINE["plain"])
            lines.append(f"  t{k} [{dot._attrs(box)}];")
        else:
            lines.append(f"  t{k} [shape=plaintext, label={_table(trace, name, rows, target)}];")
    body = _frame_bodies(trace, view, target, render.statuses(report))
    lines += body[None]
    lines += _frames(view, body)
    lines += _edges(trace, view, where)
    lines.append("}")
    return "\n".join(lines)


def _frame_bodies(trace, view: View, target: int, status: dict) -> dict:
    """The DOT lines of the groups and single values drawn, by the frame they sit in
    (None: none)."""
    body: dict = {None: []}
    for g in view.groups:
        fill = render.FILL["target"] if target in view.outputs.get(g.id, []) else "#ffffff"
        attrs = {
            "shape": "box",
            "style": "rounded,filled",
            "fillcolor": fill,
            "color": render.LINE["plain"],
            "label": _group_label(trace, g, view),
            "tooltip": render.escape_string(f"{g.title}: click to open"),
        }
        body.setdefault(view.frame_of.get(g.id), []).append(f'  "g:{g.id}" [{dot._attrs(attrs)}];')
    constant = trace.constant
    for i in view.nodes:
        if constant[i]:  # (folded into their op, as in the whole graph)
            continue
        node = trace.nodes[i]
        text = dot._value_attrs(node, i == target, status.get(i), False, False, "LR", None)
        op = render.op_symbol(trace, i)
        if op:  # the op that made it, in place of an empty name
            symbol = render.escape_record(op)
            if 'label="{|' in text:
                text = text.replace('label="{|', f'label="{{{symbol}|', 1)
            else:
                text = text.replace('label="{', f'label="{{{symbol}|', 1)
        body.setdefault(view.frame_of.get(f"n{i}"), []).append(f"  v{i} [{text}];")
    return body


def _frames(view: View, body: dict) -> list:
    """The opened groups as dashed clusters, nested as they are, each around its lines."""
    kids: dict = {}
    for gid, (_, parent) in view.frames.items():
        kids.setdefault(parent, []).append(gid)

    def frame(gid):
        group = view.frames[gid][0]
        title = _title(group) + (
            f" (line {group.line})" if group.kind == "call" and group.line else ""
        )
        # (the × says a click closes it: the live view finds the frame by its name)
        out = [
            f'  subgraph "cluster_{gid}" {{',
            f'    label="{render.escape_string(title)}  ×"; labeljust=l; style="dashed,rounded"; '
            f'color="{render.LINE["plain"]}"; fontcolor="#111827"; '
            f'tooltip="{render.escape_string(title)}: click to close";',
        ]
        out += ["  " + x for x in body.get(gid, [])]
        for inner in kids.get(gid, []):
            out += frame(inner)
        out.append("  }")
        return out

    lines = []
    for gid in kids.get(None, []):
        lines += frame(gid)
    return lines


def _edges(trace, view: View, where: dict) -> list:
    """The view's edges, those of one input table merged, thicker and counted when several."""
    constant = trace.constant
    edges: dict = {}
    for (a, b), count in view.edges.items():
        if a.startswith("n") and constant[int(a[1:])]:
            continue
        key = (_node_id(a, where), _node_id(b, where))
        edges[key] = edges.get(key, 0) + count
    lines = []
    for (a, b), count in edges.items():
        attrs = {"penwidth": f"{min(3.0, 1 + 0.4 * len(str(count))):.1f}"} if count > 1 else {}
        if count > 1:
            attrs["label"] = f"{count:,}"
            attrs["fontcolor"] = "#374151"
        lines.append(dot._edge(a, b, attrs or None))
    return lines


def summarise(trace, max_nodes=None, report=None):
    """:func:`render.summarise`, drawn grouped by the code when the run recorded where its
    nodes were made: the summary's ``dot`` is the grouped picture, its ``shown`` the single
    values and inputs it draws."""
    summary = render.summarise(trace, max_nodes)
    if summary is None or not trace.calls:
        return summary
    grouping = Grouping(trace)
    opened = grouping.opened_by_default()
    view = grouping.view(opened)
    summary.shown = sorted(i for i in set(view.nodes) | set(view.params) if not trace.constant[i])
    summary.dot = grouped_dot(trace, grouping, opened, report, view)
    summary.static = _static(trace, grouping, opened, report, view)
    summary.groups = grouping
    why = summary.note.split(":", 1)[0]
    summary.note = (
        f"{why}: drawn grouped by the code that made it. A box is a call of a function or a "
        "line of the cell, with how many nodes it holds; a dashed frame is a group opened. "
        f"Every input is drawn with its gradient ({len(view.params):,} of them)."
    )
    summary.hint = "Click a box to open it, a frame's title to close it."
    return summary


def _static(trace, grouping, opened=None, report=None, view=None) -> str | None:
    """The static copy's picture when it draws less than the live view's (a big input table
    as one box: no one reads hundreds of numbers in an image, and Graphviz lays each out);
    None when it draws the same."""
    view = grouping.view(opened) if view is None else view
    tables = containers(trace, view.params).values()
    if all(sum(map(len, rows.values())) <= STATIC_INPUTS for rows in tables):
        return None
    return grouped_dot(trace, grouping, opened, report, view, bound=True)
