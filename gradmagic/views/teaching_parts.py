"""What every teaching view shows: a node's formula, its local derivative in words, small
tables and drawings. The views themselves are in :mod:`.teaching_forward`,
:mod:`.teaching_walk` and :mod:`.teaching_paths`; :mod:`.teaching` shows them.
"""

from __future__ import annotations

import html
import re
import weakref
from functools import lru_cache
from typing import Any

from ..analysis import explanations
from ..analysis.numbers import fmt
from ..core.ops import OPS
from . import render


ROWS = 40  # table rows before "… and N more"


ITEMS = 10  # items of a printed list before it is elided
WIDTH = 24  # an unnamed node's expression longer than this is written by its op and index

_GREY = "#4b5563"  # text: 7:1 on the light fill (WCAG AA asks 4.5:1)
_GOOD = "#166534"
_BAD = "#dc2626"


# =========================================================================== rules
_LETTER = re.compile(r"(?<![A-Za-z_])([ab])(?![A-Za-z_])")
# a letter raised (aᵇ) cannot hold a name: written on the line (a^b, a^(b−1))
_RAISED = (("ᵇ⁻¹", "^(b−1)"), ("ᵃ", "^a"), ("ᵇ", "^b"))


class _Letters(dict):
    """The operands' names by letter; a letter with no operand stays itself."""

    def __missing__(self, key):
        return key


@lru_cache(maxsize=256)
def _template(rule: str) -> str:
    """A rule with its letters ``a`` and ``b`` as format fields (made once per rule)."""
    for raised, flat in _RAISED:
        rule = rule.replace(raised, flat)
    return _LETTER.sub(lambda m: "{" + m.group(1) + "}", rule.replace("{", "{{").replace("}", "}}"))


def rule_with(rule: str, names: list) -> str:
    """An op table's rule (written with ``a`` and ``b``) with its operands' ``names`` in
    their places: ``∂(x·w)/∂x = w``, never the letters, which may be other names of the cell."""
    return _template(rule).format_map(_Letters(zip("ab", names)))


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


_EXPRESSIONS: weakref.WeakKeyDictionary[Any, list] = weakref.WeakKeyDictionary()
# trace → its expressions (width WIDTH)


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
    out: list[str] = []
    prec: list[int] = []
    g = explanations._graph(trace)
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


def default_input(trace):
    """The input the views open on: named inputs first, by name (x before y)."""
    ins = explanations.inputs(trace)
    if not ins:
        return None
    nodes = trace.nodes
    return min(ins, key=lambda i: (not nodes[i].label, nodes[i].label, i))


def _paragraph(text: str, colour: str = "") -> str:
    style = "margin:2px 0" + (f"; color:{colour}" if colour else "")
    return f'<p style="{style}">{text}</p>'


def _more(shown: int, total: int, what: str) -> str:
    return f"… and {total - shown:,} more {what}" if total > shown else ""


def _table(header, rows, colours=None, *, one_line: bool = False) -> str:
    return render.html_table(header, rows, colours, one_line=one_line)


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
    try:
        image = cache.get(source) if cache is not None else None
        if image is None:
            image = render.svg(source)
            if cache is not None:
                cache[source] = image
    except Exception as exc:  # noqa: BLE001 - any Graphviz failure becomes a message
        return render.graph_failure_html(exc, source)
    head = ""
    if summary is not None:
        head = _paragraph(
            html.escape(
                f"{summary.counts}. Drawn: the nodes nearest the target, the "
                "named nodes and the highlighted ones."
            )
        )
    return head + f'<div style="overflow-x:auto; max-width:100%">{render.fit(image)}</div>'


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


def _in_partial(text: str) -> str:
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
