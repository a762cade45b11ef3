"""The run as tables, in HTML and in plain text: the nodes, the check, PyTorch's, the answers.

An ``expect`` report is shown as *answers* (:func:`answers_html`, :func:`answers_text`): a
verdict line, then ✓/✗ for each expected entry with the engine's number and the difference.
A PyTorch comparison (:mod:`gradmagic.analysis.torchcheck`) adds its column to the check table.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from ..analysis.check import STATUSES
from .dot import op_symbols, statuses
from .formatting import (
    FILL,
    LINE,
    UNDEFINED,
    column_text,
    fmt,
    magnitude,
    md_code,
    undefined_grad,
    whole_numbers,
)

TABLE_ROWS = 500  # rows of an HTML table before it is cut (as the live view's tables)
TEXT_ROWS = 40  # rows of a plain-text table before it is cut


SORT_KEYS = {
    "graph": "graph order (target first)",
    "grad": "|grad|, largest first",
    "data": "|data|, largest first",
    "label": "label",
}


def node_order(trace, key: str = "graph") -> Sequence[int]:
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
        rest.sort(key=lambda i: -magnitude(nodes[i].grad))
    elif key == "data":
        rest.sort(key=lambda i: -magnitude(nodes[i].data))
    elif key == "label":
        rest.sort(key=lambda i: (not nodes[i].label, nodes[i].name))
    else:
        raise ValueError(f"sort key must be one of {sorted(SORT_KEYS)}, got {key!r}")
    return [target] + rest


def flag_words(node, status) -> str:
    flags = []
    if node.kink:
        flags.append("kink")
    if not node.finite:
        flags.append("non-finite")
    elif undefined_grad(node):
        flags.append(UNDEFINED)
    if node.cut:
        flags.append(f"cut ({node.cut})")
    if status:
        flags.append(f"check: {status}")
    return ", ".join(flags)


_TABLE = (
    '<table style="border-collapse:collapse; font-size:12px; font-family:ui-monospace,monospace;'
    ' color:inherit">'
)
_CELL = 'style="padding:1px 8px; text-align:{align}; border-bottom:1px solid #e5e7eb"'
# a body row's line is its own (the table collapses borders), and its cells say only padding and
# alignment: inline styles, which sanitisers keep and notebook style sheets do not override, but
# short (a 500-row table is most of a static copy's bytes)
# A row without a colour of its own is transparent: JupyterLab's style sheet bands odd rows with
# the theme's page colour, a dark band on the copy's white card in a dark theme.
_ROW = "border-bottom:1px solid #e5e7eb"
_TD = '<td style="padding:1px 8px;text-align:{align}">'


# columns whose cells are words, aligned left even when they look like numbers
_WORDS = {"label", "op", "flags", "name", "status", "note", "verdict", "answer", ""}


def _right(column: str, cell: str) -> bool:
    return column not in _WORDS and _numeric_text(cell)


TABLE_HEIGHT = 360  # px: a table scrolls past this height


def html_table(header, rows, colours=None, *, one_line: bool = False) -> str:
    """An HTML table in a box that scrolls past ``TABLE_HEIGHT``; ``one_line``: each row on
    one line (the box scrolls sideways), so that a short box shows several rows."""
    table = _TABLE.replace('">', '; white-space:nowrap">', 1) if one_line else _TABLE
    out = [f'<div style="max-height:{TABLE_HEIGHT}px; overflow:auto">', table, "<thead><tr>"]
    out += [f"<th {_CELL.format(align='left')}>{html.escape(h)}</th>" for h in header]
    out.append("</tr></thead><tbody>")
    # (a number never breaks: "5.78e-" / "10" at a narrow width)
    left, right = _TD.format(align="left"), _TD.format(align="right;white-space:nowrap")
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
            cells.append([left + whole_numbers(t) + "</td>" for t in texts])
        else:
            cells.append(
                [
                    (right if number else left) + t + "</td>"
                    for number, t in zip(_numbers(column), texts)
                ]
            )
    plain = f'<tr style="background:transparent;{_ROW}">'
    for k, row in enumerate(zip(*cells)):
        colour = colours[k] if colours else ""
        out += (f'<tr style="background:{colour};{_ROW}">' if colour else plain), *row, "</tr>"
    out.append("</tbody></table></div>")
    return "".join(out)


def _escape_each(cells: Sequence) -> list:
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
    out = html_table(columns, rows, colours)
    if table.get("note"):
        out += f"<p>{html.escape(table['note'])}</p>"
    return out


def _numbers(cells: Sequence) -> list:
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


def flags_text(trace, rows, status: dict, words=None) -> list:
    """The flags of nodes ``rows`` as text: ``words(node, status)`` (default :func:`flag_words`),
    "" for the nodes with none, found from the kink, finite and cut columns (a node view is
    made only for a flagged node)."""
    words = words or flag_words
    index = np.asarray(list(rows), dtype=np.intp)
    if not len(index):
        return []
    cuts, nodes = trace.cut_notes, trace.nodes
    # (a constant's nan gradient leaves it "finite": it is flagged on its own)
    finite = trace.finite[index] & ~(trace.constant[index] & ~np.isfinite(trace.grad[index]))
    return [
        "" if not k and f and i not in status and i not in cuts else words(nodes[i], status.get(i))
        for i, k, f in zip(index.tolist(), trace.kink[index].tolist(), finite.tolist())
    ]


def _node_rows(trace, order, report):
    status = statuses(report)
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
    table = html_table(["#", "label", "op", "data", "grad", "flags"], rows, colours)
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
    out = text_table(["#", "label", "op", "data", "grad", "flags"], rows)
    if len(order) > limit:
        out += f"\n... {len(order) - limit:,} more nodes (trace.nodes has them all)"
    return out


def text_table(header, rows) -> str:
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


def report_rows(report, limit, torch=None):
    """Header and rows of a check table as text lays it out (the note last); ``torch`` adds
    PyTorch's gradient and difference."""
    first, second = report.columns
    header = ["name", first, second, "abs err", "rel err", "bound", "status", "note"]
    theirs = _torch_rows(torch)
    if theirs is not None:
        header[3:3] = ["torch", "|torch − analytic|"]
    rows = []
    for r in report.worst_first()[:limit]:
        row = [r.name, *_figures(r), r.status, r.note]
        if theirs is not None:
            row[3:3] = _torch_cells(theirs.get(r.index))
        rows.append(row)
    return header, rows


MARKS = {
    "pass": "✓",
    "fail": "✗",
    "error": "✗",
    "kink": "⚠",
    "nonfinite": "⚠",
    "unresolved": "?",
    "graph": "–",
}


def verdict_text(status: str, note: str) -> str:
    """A row's verdict in one cell: its mark, its status and why (``✗ fail: element (1, 0)``)."""
    said = f"{MARKS.get(status, '')} {status}".strip()
    return f"{said}: {note}" if note else said


def verdict_rows(report, limit, torch=None):
    """Header, rows and statuses of a check table as a page lays it out: the verdict (mark,
    status and note in one cell, which wraps) beside the name, so that a narrow output shows
    it without scrolling sideways, the figures after it."""
    first, second = report.columns
    header = ["name", "verdict", first, second, "abs err", "rel err", "bound"]
    theirs = _torch_rows(torch)
    if theirs is not None:
        header[4:4] = ["torch", "|torch − analytic|"]
    rows, status = [], []
    for r in report.worst_first()[:limit]:
        row = [r.name, verdict_text(r.status, r.note), *_figures(r)]
        if theirs is not None:
            row[4:4] = _torch_cells(theirs.get(r.index))
        rows.append(row)
        status.append(r.status)
    return header, rows, status


def _figures(r) -> list:
    return [
        fmt(r.got, 8),
        fmt(r.expected, 8),
        fmt(r.abs_err, 3),
        fmt(r.rel_err, 3),
        fmt(r.bound, 3),
    ]


def _torch_rows(torch):
    """Leaf index → TorchRow of a comparison that has rows, else None."""
    if torch is None or torch.error is not None:
        return None
    return torch.by_index


def _torch_cells(row) -> list:
    if row is None:
        return ["", ""]
    return [fmt(row.torch, 8), fmt(row.diff, 3) + ("" if row.agrees else " ✗")]


def report_head(report) -> list:
    tol = (
        f"eps {report.eps:g}, pass if |analytic − numeric| ≤ atol + rtol·|numeric| "
        f"(atol {report.atol:g}, rtol {report.rtol:g})"
    )
    if report.replay is not None:
        recorded, replayed = report.replay
        how = "re-run" if getattr(report, "oracle", "") == "code" else "replayed"
        tol += f"; {how} target {fmt(replayed, 8)} " + (
            "= recorded" if report.replay_ok else f"≠ recorded {fmt(recorded, 8)}"
        )
    seen = {r.status for r in report.rows} - {"pass"}
    legend = [f"{status}: {meaning}" for status, meaning in STATUSES.items() if status in seen]
    if legend:
        tol += "; " + "; ".join(legend)
    return [f"{report.mark} {report.verdict}", tol] + list(report.notes)


_STATUS_FILL = {
    "fail": FILL["fail"],
    "error": FILL["fail"],
    "kink": "#ffedd5",
    "nonfinite": "#ede9fe",
    "unresolved": "#f3f4f6",
    "graph": "#f3f4f6",
}
_GOOD = "#166534"
_FLAGGED = "#c2410c"  # text: the kink orange made dark enough to read (4.5:1 on white)


def _whole(text: str) -> str:
    return whole_numbers(html.escape(text))


def report_html(report, limit: int = TABLE_ROWS, *, torch=None) -> str:
    """A CheckReport as HTML: the verdict, the tolerance, notes, then rows worst first.

    An ``expect`` report is shown as answers (:func:`answers_html`). ``torch``
    (a :class:`gradmagic.analysis.torchcheck.TorchComparison`) adds PyTorch's column.
    """
    if report.kind == "expect":
        return answers_html(report, limit)
    head = report_head(report)
    colour = {"✗": LINE["fail"], "✓": _GOOD}.get(report.mark, _FLAGGED)
    out = [
        f'<div><p style="margin:0; color:{colour}"><b>{_whole(head[0])}</b></p>',
        f'<p style="margin:0; color:#4b5563">{_whole(head[1])}</p>',
    ]
    out += [f'<p style="margin:2px 0">⚠ {_whole(n)}</p>' for n in head[2:]]
    if torch is not None:
        out.append(_torch_line_html(torch))
    header, rows, status = verdict_rows(report, limit, torch)
    colours = [_STATUS_FILL.get(st, "") for st in status]
    out.append(html_table(header, rows, colours))
    if len(report.rows) > limit:
        out.append(f"<p>Showing the worst {limit:,} of {len(report.rows):,} rows.</p>")
    out.append("</div>")
    return "".join(out)


def report_text(report, limit: int = TEXT_ROWS, *, torch=None) -> str:
    """A CheckReport as plain text, rows worst first (answers for an ``expect`` report)."""
    if report.kind == "expect":
        return answers_text(report, limit)
    lines = report_head(report)
    if torch is not None:
        lines.append(torch.verdict)
    header, rows = report_rows(report, limit, torch)
    lines.append(text_table(header, rows))
    if len(report.rows) > limit:
        lines.append(f"... {len(report.rows) - limit:,} more rows (report.rows has them all)")
    return "\n".join(lines)


# =========================================================================== PyTorch
def _torch_line_html(torch) -> str:
    colour = "#4b5563" if torch.error else _GOOD if torch.passed else LINE["fail"]
    return f'<p style="margin:2px 0; color:{colour}">{md_code(torch.verdict)}</p>'


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
        out.append(html_table(header, rows, colours))
    out.append("</div>")
    return "".join(out)


def torch_text(torch, limit: int = TEXT_ROWS) -> str:
    """The same as plain text."""
    if torch.error is not None:
        return torch.verdict
    return torch.verdict + "\n" + text_table(*_torch_table(torch, limit))


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


def answer_rows(report, limit):
    got, expected = report.columns  # (a learner's engine: "true", "your .grad")
    header = ["", "answer", expected, got, f"{got} − {expected}", "tolerance", "note"]
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


def answers_head(report) -> list:
    mark = "✗" if not report.passed else "⚠" if not report.rows else "✓"
    got, expected = report.columns
    lines = [
        f"{mark} {report.verdict}",
        f"correct if |{got} − {expected}| ≤ {report.atol:g} + {report.rtol:g}·|{expected}|",
    ]
    if report.error is not None:
        lines.append(report.error)
    return lines + list(report.notes)


def answers_html(report, limit: int = TABLE_ROWS) -> str:
    """An ``expect`` report for students: verdict on top, then ✓/✗ per expected entry.

    Rows keep the order the answers were given in; names with no node are ✗
    rows saying so.
    """
    head = answers_head(report)
    colour = LINE["fail"] if not report.passed else _GOOD if report.rows else _FLAGGED
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
    header, rows = answer_rows(report, limit)
    colours = ["#dcfce7" if row[0] == "✓" else FILL["fail"] for row in rows]
    out.append(html_table(header, rows, colours))
    if len(report.rows) > limit:
        out.append(f"<p>Showing {limit:,} of {len(report.rows):,} answers.</p>")
    out.append("</div>")
    return "".join(out)


def answers_text(report, limit: int = TEXT_ROWS) -> str:
    """The same as plain text: verdict line, tolerance, then one line per answer."""
    lines = answers_head(report)
    header, rows = answer_rows(report, limit)
    lines.append(text_table(header, rows))
    if len(report.rows) > limit:
        lines.append(f"... {len(report.rows) - limit:,} more answers (report.rows has them all)")
    return "\n".join(lines)
