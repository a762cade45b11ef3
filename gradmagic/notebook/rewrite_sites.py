"""Sites for the rewritten cell: which line of the user's code made each node.

Before each statement that can make a node, the rewrite sets ``SITE.site`` to that
line's offset; each function the cell defines enters and leaves a site table of its
own (see :mod:`gradmagic.core.sites`).
"""

from __future__ import annotations

import ast

from ..core.sites import function_id
from .rewrite_calls import SITE, _at


def _cursor(attr: str, like, ctx=None) -> ast.Attribute:
    """``SITE.attr``, placed at ``like``."""
    return _at(like, ast.Attribute(_at(like, ast.Constant(SITE)), attr, ctx or ast.Load()))


def _site_set(k: int, like) -> ast.stmt:
    """``SITE.site = SITE.base + k``, placed at ``like``."""
    value = _at(like, ast.BinOp(_cursor("base", like), ast.Add(), _at(like, ast.Constant(k))))
    return _at(like, ast.Assign([_cursor("site", like, ast.Store())], value))


def _site_call(method: str, like, *args) -> ast.stmt:
    func = _cursor(method, like)
    call = ast.Call(func, [_at(like, ast.Constant(a)) for a in args], [])
    return _at(like, ast.Expr(_at(like, call)))


_NO_NODES = (ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal, ast.Import)


def _quiet(stmt) -> bool:
    """A statement that makes no node (a docstring too): no site to set before it."""
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant)
    return isinstance(stmt, _NO_NODES) or isinstance(stmt, ast.ImportFrom)


_YIELDS = (ast.Yield, ast.YieldFrom, ast.Await)  # a frame left and resumed: a generator's
_EARLY = (ast.Break, ast.Continue, ast.Return, ast.Raise, *_YIELDS)  # an iteration ended early


def _holds(body: list, kinds: tuple) -> bool:
    """A node of ``kinds`` is in ``body``, outside the functions and classes it defines."""
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, kinds):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(n))
    return False


class _Sites:
    """Sets the site before each statement of one function (or cell): see core.sites.

    Each function it meets inside gets a :class:`_Sites` of its own, and its body is
    wrapped in ``SITE.enter(id)`` / ``try: ... finally: SITE.leave()``. A generator or
    coroutine is left as it is (its nodes count at its caller's site): its frame is
    left at each ``yield``, so one enter/leave pair cannot bracket it.
    """

    def __init__(self, filename: str, scope: str = ""):
        self.filename = filename
        self.scope = scope  # "Neuron." for the methods of class Neuron
        self.lines: dict = {}  # source line → its site offset

    def line(self, lineno: int) -> int:
        return self.lines.setdefault(lineno, len(self.lines))

    def block(self, stmts: list) -> list:
        out = []
        previous = None  # the line set before the previous simple statement
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(s)
            elif isinstance(s, ast.ClassDef):
                scope, self.scope = self.scope, f"{self.scope}{s.name}."
                try:
                    s.body = self.block(s.body)
                finally:
                    self.scope = scope
            simple = not hasattr(s, "body")
            defines = isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            if not (defines or _quiet(s) or simple and s.lineno == previous):
                out.append(_site_set(self.line(s.lineno), s))
            previous = s.lineno if simple else None
            out.append(s)
            if isinstance(s, ast.For):
                self.count_runs(s)
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(s, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        setattr(s, field, self.block(inner))
            for h in getattr(s, "handlers", ()):
                h.body = self.block(h.body)
            for case in getattr(s, "cases", ()):
                case.body = self.block(case.body)
        return out

    def count_runs(self, loop: ast.For) -> None:
        """``for x in SITE.loop(ks, items)``: the statements ``ks`` its body runs once an
        item are counted (a grouped picture says how many times a line ran). Only a body
        that runs to its end each time: no break, continue, return or raise in it."""
        ks = tuple(
            dict.fromkeys(
                self.line(b.lineno)
                for b in loop.body
                if not hasattr(b, "body") and not _quiet(b) and not isinstance(b, ast.If)
            )
        )
        if not ks or _holds(loop.body, _EARLY):
            return
        func = _cursor("loop", loop.iter)
        # (compile takes a tuple constant; typeshed lists only scalar ones)
        ks_node = _at(loop.iter, ast.Constant(ks))  # type: ignore[arg-type]
        loop.iter = _at(loop.iter, ast.Call(func, [ks_node, loop.iter], []))

    def function(self, fn) -> None:
        if isinstance(fn, ast.AsyncFunctionDef) or _holds(fn.body, _YIELDS):
            return
        name = f"{self.scope}{fn.name}"
        inner = _Sites(self.filename, f"{name}.")
        body = fn.body
        doc = []
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            doc = [body[0]]  # the docstring stays first
            body = body[1:]
        if not body:
            return
        body = inner.block(body)
        k = function_id(name, self.filename, tuple(inner.lines))
        first = body[0]
        wrapped = _at(first, ast.Try(body, [], [], [_site_call("leave", first)]))
        fn.body = doc + [_site_call("enter", first, k), wrapped]
