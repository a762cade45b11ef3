"""Rewrite a cell for ``%%autograd``: source text in, Python AST out.

Nothing is executed here. :func:`rewrite` parses the cell and returns a
:class:`Rewritten` whose module, run in the user's namespace, builds a graph of
:class:`~gradmagic.core.engine.Value` nodes while computing exactly the numbers
plain Python would:

* **Numeric literals** become fresh leaves, ``2.0`` → ``literal(2.0)``, except
  where plain Python needs a plain number, listed below. Float literals
  everywhere; int literals only where the cell names an input outside any
  function (``n = 3``, ``a, b = 2, 2 ** 10``): elsewhere an int is data (a
  count, an index, an argument), so integer code keeps no graph and runs at
  its own speed. A literal that is an operand of arithmetic with a
  non-literal (``x * 2.0``, ``x ** 2``) also stays plain: if ``x`` is a Value
  the engine makes the constant node itself, so loops run at engine speed.
* **Plain contexts** (literals stay plain, names met there are not lifted):
  subscripts and slices (``xs[0]``, ``xs[1:3]``), dict keys and set elements,
  operands of comparisons and of bitwise operators, default values of
  parameters, annotations and ``match`` patterns, the repeat count of
  ``"ab" * 3`` / ``[0] * n``, the right side of ``"%d" % n``, f-strings, the
  ``ndigits`` of ``round(x, 2)``, values stored into library objects
  (``B[1] = 5.0`` for an array ``B``), the arguments of display functions
  (``print``, ``str``, ``repr``, ``format``, ``display``, ``"...".format``),
  of structural builtins (``len``, ``isinstance``, ``zip``, ``dict``, ...),
  of integer builtins (``range``, ``enumerate``, ``chr``, ``int``, ...) and of
  library callables (anything reached from a module or from an object or
  function defined outside the notebook: ``np.zeros(3)``, ``random.seed(0)``,
  ``MLP(3, [4, 1])``).
* **Run-time adapters**: display arguments go through ``shown`` (a Value
  prints as its number, also inside lists), integer-builtin arguments through
  ``ints`` (an int-valued Value becomes its int), library calls through
  ``call`` (int Values become ints; numpy functions with no gradient get plain
  numbers and the cut is reported), and calls of math functions by name
  (``math.exp``, ``np.log1p``, ``from math import exp``, ``float``, ``pow``)
  through ``fn``, which maps them to graph-keeping versions when given Values.
* **Labels**: a Value assigned to a name is labelled with it (plain, tuple and
  augmented assignment, ``for`` targets, ``:=``): ``e = a*b`` labels the
  product ``e``. A number or float array produced by a library call and
  assigned to a name becomes a leaf (``W = np.random.randn(3, 2)``), unless
  the cell changes it in place (``W[0] = 1``, ``out=W``): then it is bound
  through ``changing`` (an array node follows the write; an explicit Tensor,
  which cannot be changed in place, becomes a plain array, the cut reported).
* **Reads**: the global names read in numeric contexts (and not changed in
  place) are reported, so the magic can turn numbers and arrays already in
  the namespace into fresh leaves.
* **Target**: a final expression statement is split off to be evaluated
  separately; a final assignment to one name names the target.

Rewritten code reaches its helpers through the constant :data:`RUNTIME`
(``RUNTIME.literal(2.0)``), which :mod:`gradmagic.notebook.cell` replaces in the compiled
code by the :mod:`gradmagic.notebook.runtime` module, so no helper name ever enters the
user's namespace. Every new node carries the line of the user's code it came
from, so tracebacks show the user's own lines.
"""

from __future__ import annotations

import ast
from contextlib import contextmanager
from dataclasses import dataclass

from ..core.sites import function_id
from .cell_facts import (
    MATH_NAMES,
    _Facts,
    _assigned_name,
    _constant_tuple,
    _facts,
    _is_library,
    _is_number,
    _local_names,
    _root,
    _target_names,
)
from .rewrite_calls import (
    _DISPLAY_ARGS,
    _INTS,
    _PLAIN,
    _VALUES,
    RUNTIME,
    SITE,
    _at,
    _call_kind,
    _dispatched,
    _is_text,
    _library_call,
    _runtime,
)
from .rewrite_sites import _Sites


__all__ = ["RUNTIME", "SITE", "MATH_NAMES", "Rewritten", "rewrite"]

_BITWISE = (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)


@dataclass(frozen=True)
class Rewritten:
    """The rewritten cell.

    ``module`` holds every statement but a final expression, which is
    ``final`` (an :class:`ast.Expression`, or None). ``target`` is the name a
    final assignment binds (None otherwise); ``reads`` the global names read
    as numbers.
    """

    module: ast.Module
    final: ast.Expression | None
    target: str | None
    reads: frozenset
    names: frozenset = frozenset()  # every name the cell mentions (read, bound or deleted)
    function: int = -1  # the cell's id in core.sites.FUNCTIONS (its top-level statements)
    final_site: int = 0  # the site offset of the final expression
    written: frozenset = frozenset()  # names read whose items the cell assigns (W[0] = v)
    loops: frozenset = frozenset()  # names a for statement binds (p in `for p in params`)


def rewrite(
    source: str,
    *,
    filename: str = "<cell>",
    first_line: int = 1,
    plain_names=(),
    math_names=(),
    scope: str = "",
    engine_names=(),
    method: bool = False,
    sites_kept: bool = True,
) -> Rewritten:
    """Rewrite ``source`` (see the module docstring); raises ``SyntaxError``.

    ``first_line`` is the line number of the source's first line (2 for the
    body of a ``%%autograd`` cell). ``plain_names`` are names known to refer
    to library objects (modules, functions and classes from packages), whose
    calls get plain literals; ``math_names`` are further names bound to math
    functions (``e = math.exp``). Names the cell itself imports or defines
    are found here; ``engine_names`` are names of a learner's autograd classes, whose
    calls get numbers as the cell's own functions do; ``method`` says that ``source`` is a
    method's text (code in a class: no step of training there). ``scope`` prefixes the names of the functions defined in
    ``source`` in their sites (``"Neuron."`` for a method's text); with ``sites_kept`` False the
    functions of ``source`` keep no sites of their own (their nodes count at their caller's).
    """
    tree = ast.parse("\n" * (first_line - 1) + source, filename)
    names = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))
    loops = frozenset(
        name
        for n in ast.walk(tree)
        if isinstance(n, (ast.For, ast.AsyncFor))
        for name in _target_names(n.target)
    )
    facts = _facts(tree, set(plain_names), set(math_names), engine_names)
    last = tree.body[-1] if tree.body else None
    target = _assigned_name(last)
    rw = _Rewriter(facts, method)
    tree = rw.visit(tree)
    final = None
    if isinstance(last, ast.Expr):
        final = ast.Expression(body=tree.body.pop().value)
    sites = _Sites(filename, scope)
    if sites_kept:
        tree.body = sites.block(tree.body)
    final_site = sites.line(last.lineno) if final is not None and last is not None else 0
    function = function_id("<cell>", filename, tuple(sites.lines))
    return Rewritten(
        tree,
        final,
        target,
        frozenset(rw.reads - facts.mutated),
        names,
        function,
        final_site,
        frozenset(rw.reads & facts.mutated),
        loops,
    )


def _calls_builtin(node, name: str, defined, constants: bool = True) -> bool:
    """``node`` is a call of the builtin ``name`` (not one the cell defines) without keywords,
    on literals if ``constants``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
        and name not in defined
        and not (constants and any(not isinstance(a, ast.Constant) for a in node.args))
        and not node.keywords
    )


def _singleton(node) -> bool:
    """``None``, ``True``, ``False``, ``...`` or a string: ``x is None`` stays as it is."""
    return isinstance(node, ast.Constant) and not _is_number(node)


def _literal_numbers(node) -> bool:
    """Number literals and arithmetic on them (``3``, ``-3``, ``2 ** 60 + 1``), or a
    tuple of those."""
    if isinstance(node, ast.Tuple):
        return all(_literal_numbers(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _literal_numbers(node.operand)
    if isinstance(node, ast.BinOp) and not isinstance(node.op, _BITWISE):
        return _literal_numbers(node.left) and _literal_numbers(node.right)
    return _is_number(node)


def _is_float(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is float


def _is_sequence_display(node) -> bool:
    return _is_text(node) or isinstance(node, (ast.List, ast.Tuple, ast.ListComp))


def _label(name: str, like) -> ast.stmt:
    """The statement ``RUNTIME.labelled(name, 'name')``."""
    call = _runtime("labelled", ast.Name(name, ast.Load()), ast.Constant(name), like=like)
    return _at(like, ast.Expr(call))


class _Rewriter(ast.NodeTransformer):
    """The transformation described in the module docstring."""

    def __init__(self, facts: _Facts, method: bool = False):
        self.plain, self.math = facts.plain, facts.math
        self.defined, self.mutated = facts.defined, facts.mutated
        self.classes = facts.classes
        self.engines = facts.engines
        self.imported = facts.imported
        self.reads: set[str] = set()
        self.lits_plain = False  # numeric literals stay plain here
        self.int_leaves = False  # int literals become leaves here (see visit_Constant)
        self.reading = True  # loaded names count as numeric reads here
        self.scopes: list[tuple[set[str], bool]] = []  # (local names, is a class body) of
        # enclosing scopes
        self.method = method  # the text is a method's, compiled alone

    # ---------------------------------------------------------------- contexts
    def _visit(self, node, *, plain: bool = False, read: bool = True):
        """Visit ``node`` with literals plain (``plain``) and reads counted (``read``)."""
        if node is None:
            return None
        saved = self.lits_plain, self.reading
        self.lits_plain, self.reading = self.lits_plain or plain, self.reading and read
        try:
            return self.visit(node)
        finally:
            self.lits_plain, self.reading = saved

    def _plain(self, node):
        return self._visit(node, plain=True, read=False)

    def _is_global(self, name: str) -> bool:
        for i, (names, is_class) in enumerate(reversed(self.scopes)):
            if name in names and (not is_class or i == 0):
                return False
        return True

    @contextmanager
    def _scope(self, names, is_class=False):
        """Names assigned inside a function, class, lambda or comprehension body."""
        self.scopes.append((names, is_class))
        try:
            yield
        finally:
            self.scopes.pop()

    def _scoped(self, node, names, is_class=False):
        with self._scope(names, is_class):
            return self.generic_visit(node)

    # ---------------------------------------------------------------- leaves
    def visit_Constant(self, node):
        if self.lits_plain or not _is_number(node):
            return node
        if type(node.value) is int and not self.int_leaves:
            # an int is data (a count, an index, a size, an argument) unless the cell
            # names it as an input (x = 3): ints computed from it stay plain ints, so
            # integer code runs at its own speed and keeps no graph
            return node
        return _runtime("literal", node, like=node)

    def _input_value(self, node):
        """The value of an assignment: int literals in it are leaves when it is an
        input of the cell (``x = 3``, ``a, b = 2, -1`` outside any function)."""
        saved = self.int_leaves
        self.int_leaves = not self.scopes and _literal_numbers(node)
        try:
            return self.visit(node)
        finally:
            self.int_leaves = saved

    def visit_UnaryOp(self, node):
        # -2.0 is one literal, not the negation of a leaf
        if isinstance(node.op, (ast.USub, ast.UAdd)) and _is_number(node.operand):
            value = node.operand.value
            folded = _at(node, ast.Constant(-value if isinstance(node.op, ast.USub) else value))
            return self.visit_Constant(folded)
        if isinstance(node.op, ast.Invert):
            node.operand = self._count(node.operand)
            return node
        return self.generic_visit(node)

    def visit_Name(self, node, wrap=True):
        if isinstance(node.ctx, ast.Load) and self._is_global(node.id):
            if self.reading:
                self.reads.add(node.id)
            if wrap and not self.lits_plain and node.id in self.imported:
                # a float the cell imports (from math import pi): a constant node
                return _runtime("num", node, like=node)
        return node

    def visit_Attribute(self, node, wrap=True):
        """``math.pi``: a library's float as a constant node (``num``); ``x.__class__``: as
        ``type(x)``, Python's own type."""
        node.value = self._callee(node.value)
        if not isinstance(node.ctx, ast.Load):
            return node
        if node.attr == "__class__":
            return _runtime("type_of", node.value, like=node)
        if wrap and not self.lits_plain and _is_library(node, self.plain, self.defined):
            return _runtime("num", node, like=node)
        return node

    def _callee(self, func):
        """A called expression (or one whose attribute is read): visited, but never read as a
        library constant."""
        if isinstance(func, ast.Attribute):
            return self.visit_Attribute(func, wrap=False)
        if isinstance(func, ast.Name):
            return self.visit_Name(func, wrap=False)
        return self.visit(func)

    # ---------------------------------------------------------------- expressions
    def _operand(self, node, other):
        """An arithmetic operand: a real literal stays plain beside a non-literal (Python's
        complex would compute ``1j * x`` itself, so a complex one is a leaf)."""
        folded = node
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, (ast.USub, ast.UAdd))
            and _is_number(node.operand)
        ):
            folded = node.operand
        if _is_number(folded) and not _is_number(other) and type(folded.value) is not complex:
            return self._visit(node, plain=True)
        return self.visit(node)

    def visit_BinOp(self, node):
        if isinstance(node.op, ast.Mult) and _is_sequence_display(node.left):
            node.left = self.visit(node.left)
            node.right = self._count(node.right)
        elif isinstance(node.op, ast.Mult) and _is_sequence_display(node.right):
            node.left = self._count(node.left)
            node.right = self.visit(node.right)
        elif isinstance(node.op, ast.Mod) and _is_text(node.left):
            node.left = self.visit(node.left)
            node.right = self._shown(node.right)
        elif isinstance(node.op, _BITWISE):
            node.left, node.right = self._count(node.left), self._count(node.right)
        else:
            left, right = node.left, node.right
            # a plain float on the left would compute with an int node as with an
            # int (float.__mul__ accepts ints): that literal is a node
            node.left = self.visit(left) if _is_float(left) else self._operand(left, right)
            node.right = self._operand(right, left)
        return node

    def _count(self, node):
        """A repeat count or an integer argument: plain, int Values as ints."""
        node = self._plain(node)
        if isinstance(node, ast.Constant) or (
            isinstance(node, ast.BinOp) and isinstance(node.op, _BITWISE)
        ):
            return node
        return _runtime("ints", node, like=node)

    def _shown(self, node):
        """A value about to be displayed: Values as their numbers."""
        node = self._plain(node)
        if isinstance(node, (ast.Constant, ast.JoinedStr)):
            return node
        return _runtime("shown", node, like=node)

    def visit_Compare(self, node):
        def side(n):
            if isinstance(n, ast.Name):
                return self._visit(n, read=False)
            return self._operand(n, ast.Name("_", ast.Load()))

        node.left = side(node.left)
        node.comparators = [side(c) for c in node.comparators]
        if (
            len(node.ops) == 1
            and isinstance(node.ops[0], (ast.Is, ast.IsNot))
            and not _singleton(node.left)
            and not _singleton(node.comparators[0])
        ):
            # x is y between numbers: an int node is its int (node.value is value)
            same = _runtime("same", node.left, node.comparators[0], like=node)
            return (
                same if isinstance(node.ops[0], ast.Is) else _at(node, ast.UnaryOp(ast.Not(), same))
            )
        return node

    def visit_Subscript(self, node):
        # np.r_[a, b], np.c_[a, b] join arrays: their items are read, not an index
        if isinstance(node.value, ast.Attribute) and node.value.attr in ("r_", "c_"):
            node.value = _runtime("joined", self.visit(node.value), like=node.value)
            node.slice = self.visit(node.slice)
            return node
        node.value = self.visit(node.value)
        node.slice = self._plain(node.slice)
        return node

    def visit_Dict(self, node):
        node.keys = [self._plain(k) for k in node.keys]
        node.values = [self.visit(v) for v in node.values]
        return node

    def visit_Set(self, node):
        node.elts = [self._plain(e) for e in node.elts]
        return node

    def visit_DictComp(self, node):
        return self._comprehension(node, plain="key", values="value")

    def visit_SetComp(self, node):
        return self._comprehension(node, plain="elt")

    def _comprehension(self, node, plain: str, values: str | None = None):
        """A dict or set comprehension: keys and set elements (``plain``) are plain numbers."""
        with self._scope(_local_names(node)):
            node.generators = [self.visit(g) for g in node.generators]
            setattr(node, plain, self._plain(getattr(node, plain)))
            if values is not None:
                setattr(node, values, self.visit(getattr(node, values)))
        return node

    def visit_List(self, node):
        # a tuple of constants inside a list or tuple is one constant that Python makes
        # once ([(1, 0), (1, 0)] holds one tuple twice): left as it is, its numbers plain
        node.elts = [
            e if isinstance(e, ast.Tuple) and _constant_tuple(e) else self.visit(e)
            for e in node.elts
        ]
        return node

    visit_Tuple = visit_List

    def visit_ListComp(self, node):
        return self._scoped(node, _local_names(node))

    visit_GeneratorExp = visit_ListComp

    def visit_JoinedStr(self, node):
        node.values = [self._formatted(v) for v in node.values]
        return node

    def _formatted(self, node):
        if isinstance(node, ast.FormattedValue):
            node.value = self._shown(node.value)
            if node.format_spec is not None:
                node.format_spec = self.visit(node.format_spec)
        return node

    def visit_NamedExpr(self, node):
        node.value = _runtime(
            "labelled", self.visit(node.value), ast.Constant(node.target.id), like=node.value
        )
        return node

    def visit_Lambda(self, node):
        self._defaults(node.args)
        with self._scope(_local_names(node)):
            node.body = self.visit(node.body)
        return node

    # ---------------------------------------------------------------- calls
    def visit_Call(self, node):
        kind = _call_kind(node.func, self)
        dispatch = _dispatched(node.func, self.math) and bool(node.args or node.keywords)
        node.func = self._callee(node.func)
        if kind == _VALUES and isinstance(node.func, ast.Name) and node.func.id == "round":
            # round(x, 2): x as usual, the digits a plain int
            node.args = [
                self.visit(a) if i == 0 else self._count(a) for i, a in enumerate(node.args)
            ]
            for k in node.keywords:
                k.value = self._count(k.value) if k.arg == "ndigits" else self.visit(k.value)
        elif kind == _VALUES and isinstance(node.func, ast.Name) and node.func.id in self.engines:
            # Value(2): a number written as an engine object's data is an input
            node.args = [self._input_value(a) for a in node.args]
            if not self.scopes and node.args and not isinstance(node.args[0], ast.Starred):
                node.args[0] = _runtime("engine_input", node.args[0], like=node.args[0])
            node.keywords = [self.visit(k) for k in node.keywords]
        elif kind == _VALUES:
            node.args = [self._argument(a, node.func, i) for i, a in enumerate(node.args)]
            for k in node.keywords:
                k.value = self._argument(k.value, node.func, k.arg)
        elif kind == _DISPLAY_ARGS:
            self._adapt_args(node, self._shown)
        elif kind == _INTS:
            self._adapt_args(node, self._count)
        else:  # plain and library calls: literals stay plain; names read here are lifted
            node.args = [self._visit(a, plain=True) for a in node.args]
            node.keywords = [self._visit(k, plain=True) for k in node.keywords]
            if kind != _PLAIN:  # a library call, adapted at run time
                node = _library_call(node)
            elif _is_timeit(node):  # it keeps nothing: what it times is the plain code
                node.args.insert(0, node.func)
                node.func = _runtime("unrecorded", like=node).func
            elif _calls_builtin(node, "type", (), constants=False) and len(node.args) == 1:
                # type(x) names Python's type for a number node (float, not a subclass)
                node.func = _runtime("type_of", like=node).func
        if dispatch:
            node.func = _runtime("fn", node.func, like=node.func)
        return node

    def _argument(self, arg, func, key):
        """An argument of a call: a float written at the top of the cell as the argument of
        a function (``f(3.0)``) is an input named by its parameter (``argument``)."""
        visited = self.visit(arg)
        if self.scopes or key is None or not isinstance(func, ast.Name) or not _is_float(arg):
            return visited
        callee = _at(arg, ast.Name(func.id, ast.Load()))
        return _runtime("argument", visited, callee, ast.Constant(key), like=arg)

    def _adapt_args(self, node, adapt):
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                a.value = adapt(a.value)
                args.append(a)
            else:
                args.append(adapt(a))
        node.args = args
        for k in node.keywords:
            k.value = adapt(k.value) if k.arg is not None else self._plain(k.value)

    # ---------------------------------------------------------------- statements
    def visit_Assign(self, node):
        stores = all(isinstance(t, (ast.Subscript, ast.Attribute)) for t in node.targets)
        made = False
        if stores and all(isinstance(t, ast.Attribute) and t.attr == "grad" for t in node.targets):
            # p.grad = 0.0: a gradient an engine keeps is no input, its number stays plain
            node.value = self._plain(node.value)
        elif stores and all(self._is_library_object(_root(t)) for t in node.targets):
            # B[1] = x into an array: the number only (counted as a conversion)
            node.value = _runtime("stored", self._visit(node.value, plain=True), like=node.value)
        else:
            # x = float("nan"), x = float(3): a literal the cell names, an input as x = 3.0 is
            made = not self.scopes and _calls_builtin(node.value, "float", self.defined)
            node.value = self._input_value(node.value)
        names = [n for t in node.targets for n in _target_names(t)]
        updates = [u for t in node.targets if (u := self._update(t)) is not None]
        node.targets = [self.visit(t) for t in node.targets]
        if updates:  # p.data = ...: a learner's parameter after an optimizer's step
            return [node, *updates]
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if names[0] in self.mutated:
                helper = "changing"
            elif self._from_library(node.value) or (not stores and made):
                helper = "leaf"
            else:
                helper = "labelled"
            node.value = _runtime(helper, node.value, ast.Constant(names[0]), like=node.value)
            return node
        return [node] + [_label(n, node) for n in dict.fromkeys(names)]

    def _is_library_object(self, node) -> bool:
        return isinstance(node, ast.Name) and node.id in self.plain and node.id not in self.defined

    def _from_library(self, value) -> bool:
        return (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Constant)
            and value.func.value.value == RUNTIME
            and value.func.attr == "finish_call"
        )

    def visit_AnnAssign(self, node):
        if node.value is None:
            return node
        node.value = self._input_value(node.value)
        node.target = self.visit(node.target)
        if isinstance(node.target, ast.Name):
            node.value = _runtime(
                "labelled", node.value, ast.Constant(node.target.id), like=node.value
            )
        return node

    def visit_AugAssign(self, node):
        node.value = self._operand(node.value, node.target)
        if isinstance(node.target, ast.Name):
            self.visit_Name(ast.Name(node.target.id, ast.Load()))
            return [node, _label(node.target.id, node)]
        update = self._update(node.target)
        node.target = self.visit(node.target)
        return node if update is None else [node, update]

    def _in_class(self) -> bool:
        """Inside a class (a method's body): what a learner's engine does to itself."""
        return self.method or any(is_class for _, is_class in self.scopes)

    def _update(self, target):
        """``RUNTIME.updated(p)`` after ``p.data = ...`` or ``p.data += ...`` outside a class
        (an optimizer's step on a learner's parameter), or None."""
        if (
            not isinstance(target, ast.Attribute)
            or target.attr != "data"
            or self._in_class()
            or not _reread(target.value)
        ):
            return None
        return _at(target, ast.Expr(_runtime("updated", _copy(target.value), like=target)))

    def visit_Expr(self, node):
        """``loss.backward()`` outside a class: ``RUNTIME.backward_of(loss)``, which records
        a step of a learner's engine and runs their backward on plain numbers."""
        node = self.generic_visit(node)
        call = node.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "backward"
            and not call.args
            and not call.keywords
            and not self._in_class()
        ):
            node.value = _runtime("backward_of", call.func.value, like=call)
        return node

    def visit_Import(self, node):
        """An import in the cell itself: ``RUNTIME.imported(names)`` after it, so that the
        learner's own code among them is followed as an earlier cell's import would be."""
        if self.scopes or self.method:
            return node
        names = [a.asname or a.name.partition(".")[0] for a in node.names if a.name != "*"]
        if any(a.name == "*" for a in node.names) and isinstance(node, ast.ImportFrom):
            names.append(f"*{node.module}")
        return [
            node,
            _at(node, ast.Expr(_runtime("imported", ast.Constant(tuple(names)), like=node))),
        ]

    visit_ImportFrom = visit_Import

    def visit_For(self, node):
        node = self.generic_visit(node)
        if not (
            isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Name)
            and node.iter.func.id == "range"
        ):
            labels = [_label(n, node.target) for n in _target_names(node.target)]
            node.body[:0] = labels
        return node

    visit_AsyncFor = visit_For

    def _defaults(self, args):
        args.defaults = [self._plain(d) for d in args.defaults]
        args.kw_defaults = [self._plain(d) for d in args.kw_defaults]

    def visit_FunctionDef(self, node):
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        self._defaults(node.args)
        with self._scope(_local_names(node)):
            node.body = self._statements(node.body)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        with self._scope(_local_names(node), is_class=True):
            node.body = self._statements(node.body)
        return node

    def _statements(self, stmts):
        out = []
        for s in stmts:
            r = self.visit(s)
            out.extend(r if isinstance(r, list) else [r])
        return out

    def visit_match_case(self, node):
        node.guard = self.visit(node.guard) if node.guard is not None else None
        node.body = self._statements(node.body)
        return node


def _reread(node) -> bool:
    """An expression that reads the same object again when evaluated twice: a name and
    attributes or constant subscripts of it (``p``, ``n.layers[0].w[1]``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, (ast.Constant, ast.Name)):
            return False
        node = node.value
    return isinstance(node, ast.Name)


def _copy(node):
    """A fresh load of the expression ``node`` (its names and attributes read again)."""
    new = ast.parse(ast.unparse(node), mode="eval").body
    for n in ast.walk(new):
        ast.copy_location(n, node)
        n.end_lineno, n.end_col_offset = node.end_lineno, node.end_col_offset
    return new


def _is_timeit(call) -> bool:
    """``get_ipython().run_line_magic('timeit', ...)`` (or ``run_cell_magic``): ``%timeit``."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in ("run_line_magic", "run_cell_magic")
        and bool(call.args)
        and isinstance(call.args[0], ast.Constant)
        and call.args[0].value == "timeit"
    )
