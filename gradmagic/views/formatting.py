"""How the views write a value: numbers and arrays on one line, and the colours they share.

Every view (the graph's records, the tables, the text, the live view) writes numbers through
:func:`fmt`, so a number reads the same everywhere and never as "-0".
"""

from __future__ import annotations

import html
import math
import re

import numpy as np

from ..analysis import numbers

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


def _clean(x):
    """``x`` with negative zeros made positive, so no view prints "-0"."""
    if isinstance(x, float):
        return x + 0.0
    if isinstance(x, np.ndarray) and x.dtype.kind in "fc":
        return x + 0.0
    return x


def undefined_grad(node) -> bool:
    """A constant whose gradient is nan or infinite: the exponent of ``x ** 2`` at a negative
    ``x`` (``d/dc x**c`` has no real value there). Not an input, so no view says its gradient
    is wrong; every view marks it."""
    return node.is_constant and not numbers.all_finite(node.grad)


UNDEFINED = "gradient undefined here (a constant, not an input)"


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


def magnitude(x) -> float:
    """|x| for sorting (the largest |element| of an array); nan sorts as inf."""
    try:
        m = float(np.max(np.abs(x))) if isinstance(x, np.ndarray) else abs(float(x))
    except (TypeError, ValueError, OverflowError):
        return math.inf
    return math.inf if m != m else m


# a number a browser could break at its sign or exponent's hyphen ("5.78e-" / "10")
_NUMBER = re.compile(r"[-−+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?%?")


def whole_numbers(escaped: str) -> str:
    """HTML text (escaped) with each number that holds a sign or a hyphen kept on one line."""
    return _NUMBER.sub(
        lambda m: (
            f'<span style="white-space:nowrap">{m.group(0)}</span>'
            if any(c in m.group(0) for c in "-−+")
            else m.group(0)
        ),
        escaped,
    )


def md_code(text: str) -> str:
    """Escape text for HTML, turning `code` spans into <code>; numbers never break."""
    pieces = whole_numbers(html.escape(text)).split("`")
    return "".join(f"<code>{p}</code>" if k % 2 else p for k, p in enumerate(pieces))


def column_figures(trace, rows, column: str = "data", whole: bool = False) -> list:
    """:func:`figure` (``whole``: :func:`full`) of the data (or grad) of nodes ``rows``, a
    column at a time: numbers straight from the trace's columns, arrays one by one."""
    rows = list(rows)
    out = column_text(trace, rows, column, 8 if whole else 4)
    arrays = trace.tensor_data if column == "data" else trace.tensor_grad
    if arrays:
        write = full if whole else figure
        for k, i in enumerate(rows):
            if i in arrays:
                out[k] = write(arrays[i])
    return out


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
