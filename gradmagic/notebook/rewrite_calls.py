"""How the rewrite treats a call, and the nodes that reach the runtime.

A call's arguments are rewritten by the kind of its callee (:func:`_call_kind`): the
cell's own functions get Values, display functions get their arguments through
``shown``, integer builtins through ``ints``, structural builtins plain numbers,
library callables plain literals and a run-time adapter (:func:`_library_call`).
The rewritten code reaches the runtime through the placeholder constants
:data:`RUNTIME` and :data:`SITE`, which :mod:`gradmagic.notebook.cell` replaces in
the compiled code.
"""

from __future__ import annotations

import ast

from .cell_facts import MATH_NAMES, _is_library, _root


RUNTIME = "\x00gradmagic.notebook.runtime"
"""Placeholder constant standing for :mod:`gradmagic.notebook.runtime` in rewritten code."""
SITE = "\x00gradmagic.core.sites.cursor"
"""Placeholder constant standing for :data:`gradmagic.core.sites.cursor` in rewritten code."""


_DISPLAY = frozenset({"print", "repr", "str", "format", "ascii", "display"})
_INT_BUILTINS = frozenset("range enumerate chr hex oct bin slice bytes bytearray int".split())
_PLAIN_BUILTINS = frozenset(
    (
        "len isinstance issubclass getattr setattr hasattr delattr iter next zip map "
        "filter sorted reversed all any type open id hash ord bool super vars dir "
        "callable input globals locals exec eval compile object property staticmethod "
        "classmethod memoryview breakpoint dict set frozenset"
    ).split()
)

# how a call's arguments are treated
_VALUES, _DISPLAY_ARGS, _INTS, _PLAIN, _LIBRARY = range(5)


def _at(like, node):
    """``node`` placed at ``like``'s position in the user's source."""
    node.lineno, node.col_offset = like.lineno, like.col_offset
    node.end_lineno, node.end_col_offset = like.end_lineno, like.end_col_offset
    return node


def _slot(name: str, like):
    """``RUNTIME.name`` at ``like``'s position."""
    runtime = _at(like, ast.Constant(RUNTIME))
    return _at(like, ast.Attribute(value=runtime, attr=name, ctx=ast.Load()))


def _runtime(helper: str, *args, like):
    """``RUNTIME.helper(*args)``, placed (with any new argument) at ``like``'s position."""
    func = _slot(helper, like)
    placed = [a if hasattr(a, "lineno") else _at(like, a) for a in args]
    return _at(like, ast.Call(func=func, args=placed, keywords=[]))


def _is_text(node) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
    )


def _call_kind(func, names) -> int:
    """How a call of ``func`` treats its arguments (one of the kinds above); ``names`` holds
    what the cell's facts say of its names (``classes``, ``defined``, ``math``, ``plain``)."""
    if isinstance(func, ast.Name):
        name = func.id
        if name in names.classes:  # the user's own class (a Value of their own): plain numbers
            return _PLAIN
        if name in names.defined:
            return _VALUES
        if name in _DISPLAY:
            return _DISPLAY_ARGS
        if name in _INT_BUILTINS:
            return _INTS
        if name in _PLAIN_BUILTINS:
            return _PLAIN
        if name in names.math:
            return _VALUES
        return _LIBRARY if name in names.plain else _VALUES
    if isinstance(func, ast.Attribute):
        root = _root(func)
        if isinstance(root, ast.Name) and root.id == "get_ipython":
            # the shell's own syntax (%time, !ls): called as written, since line
            # magics read the caller's frame (%time defines names there)
            return _PLAIN
        if _is_text(root):
            return _DISPLAY_ARGS if func.attr in ("format", "format_map") else _LIBRARY
        if _is_library(func, names.plain, names.defined):
            return _LIBRARY
    return _VALUES


def _dispatched(func, math) -> bool:
    """A call of a math function by name, which ``RUNTIME.fn`` maps to a graph-keeping one."""
    if isinstance(func, ast.Name):
        return func.id in math
    return isinstance(func, ast.Attribute) and func.attr in MATH_NAMES


def _library_call(node):
    """``f(a, k=b)`` → ``RUNTIME.finish_call(RUNTIME.prepare_call(f, a, k=b), RUNTIME.call_function(*RUNTIME.call_args, **RUNTIME.call_kwargs))``:
    the arguments adapted by ``prepare_call``, the call made from the user's own frame."""
    prepare = _runtime("prepare_call", node.func, *node.args, like=node)
    prepare.keywords = node.keywords
    made = _at(
        node,
        ast.Call(
            func=_slot("call_function", node),
            args=[_at(node, ast.Starred(_slot("call_args", node), ast.Load()))],
            keywords=[_at(node, ast.keyword(arg=None, value=_slot("call_kwargs", node)))],
        ),
    )
    return _runtime("finish_call", prepare, made, like=node)
