"""What one walk over a cell finds out before the rewrite (:func:`facts`): the names of
library objects and math functions it uses, the names it defines, changes in place, binds by
import, and the classes it defines; and the names local to each of its functions.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from importlib.machinery import PathFinder

from .learner import engine_class
from .math_calls import DISPATCHED_NAMES

MATH_NAMES = DISPATCHED_NAMES
"""Function names whose calls go through the run-time dispatch (``fn``): derived from the op
table and the runtime's composites (:data:`gradmagic.notebook.math_calls.DISPATCHED_NAMES`)."""


_BUILTIN_MATH = frozenset({"float", "pow", "isinstance", "complex"})  # builtins dispatched by name


# --------------------------------------------------------------------------- static facts
@dataclass
class _Facts:
    """What one walk over the cell finds out before rewriting it."""

    plain: set  # names of library objects
    math: set  # names of math functions
    defined: set  # names the cell defines with def, class or a lambda
    mutated: set  # names of objects changed in place: z[0] = 1, out=z
    classes: set  # names of the classes the cell defines: their calls get plain numbers
    imported: set  # names the cell's from-imports bind (a float among them becomes a node)
    engines: set  # the cell's classes that are autograd engines of the learner's (Value)


_FACT_NODES = frozenset(
    getattr(ast, name)
    for name in (
        "FunctionDef AsyncFunctionDef ClassDef Import ImportFrom keyword Assign AugAssign "
        "AnnAssign Delete"
    ).split()
)


def _facts(tree, plain: set, math: set, engine_names=()) -> _Facts:
    math |= _BUILTIN_MATH
    defined, mutated, classes, imported = set[str](), set[str](), set[str](), set[str]()
    made: list = []
    engines = set(engine_names)
    for node in ast.walk(tree):
        if node.__class__ not in _FACT_NODES:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
            if isinstance(node, ast.ClassDef):
                (engines if _engine_class(node) else classes).add(node.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                plain.add(a.asname or a.name.partition(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module != "__main__":
            for a in node.names:
                if not node.level and _engine_in(node.module, a.name):
                    engines.add(a.asname or a.name)  # from micrograd.engine import Value
                elif a.name != "*":
                    (math if a.name in MATH_NAMES else plain).add(a.asname or a.name)
                    if a.name not in MATH_NAMES:
                        imported.add(a.asname or a.name)
        elif isinstance(node, ast.keyword) and node.arg == "out":
            mutated.update(n.id for n in ast.walk(node.value) if isinstance(n, ast.Name))
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                root = _root(t)
                if isinstance(t, ast.Subscript) and isinstance(root, ast.Name):
                    mutated.add(root.id)
            if isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if isinstance(node.value, ast.Lambda):
                    defined.update(names)
                elif isinstance(node.value, ast.Call):
                    made.append((names, node.value.func))
    plain -= defined
    math -= defined
    imported -= defined
    # results of library calls are library objects too: rng = np.random.default_rng()
    growing = True
    while growing:
        size = len(plain)
        for names, func in made:
            if _is_library(func, plain, defined):
                plain.update(names)
        growing = len(plain) > size
    return _Facts(plain, math, defined, mutated, classes, imported, engines)


def _engine_class(node: ast.ClassDef) -> bool:
    """A class written as an autograd engine is (micrograd's ``Value``): arithmetic methods,
    and a ``backward`` method or a ``self.grad`` its ``__init__`` sets. Its calls get
    numbers as a cell's own functions do: ``Value(2.0)`` holds an input."""
    methods = {
        f.name: f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    if "__add__" not in methods and "__mul__" not in methods:
        return False
    if "backward" in methods:
        return True
    init = methods.get("__init__")
    return init is not None and any(
        isinstance(n, ast.Attribute) and n.attr == "grad" for n in ast.walk(init)
    )


def _engine_in(module, name: str) -> bool:
    """True if the module ``module`` defines a class ``name`` written as an autograd engine,
    read from its source: found, never imported (the cell imports it, in its own time)."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return engine_class(getattr(loaded, name, None))
    try:
        spec, parts = None, module.split(".")
        for k in range(len(parts)):
            where = spec.submodule_search_locations if spec else None
            spec = PathFinder.find_spec(".".join(parts[: k + 1]), where)
            if spec is None:
                return False
        origin = str(spec.origin) if spec is not None else ""
        if not origin.endswith(".py"):  # (an extension module: no class to read)
            return False
        with open(origin, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, ValueError, SyntaxError, TypeError, AttributeError, ImportError):
        return False
    return any(
        isinstance(n, ast.ClassDef) and n.name == name and _engine_class(n) for n in tree.body
    )


def _root(node):
    """The innermost object of ``a.b[0].c(...).d``: the node ``a``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _is_library(func, plain, defined) -> bool:
    if isinstance(func, ast.Attribute) and func.attr in MATH_NAMES:
        return False
    root = _root(func)
    return isinstance(root, ast.Name) and root.id in plain and root.id not in defined


def _is_number(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, complex)


def _constant_tuple(node) -> bool:
    """True for a tuple display of constants (numbers, signed numbers, text, None, tuples
    of those), which the compiler folds into one constant."""
    for e in node.elts:
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            e = e.operand
            if not _is_number(e):
                return False
        elif isinstance(e, ast.Tuple):
            if not _constant_tuple(e):
                return False
        elif not isinstance(e, ast.Constant):
            return False
    return True


def _target_names(target) -> list:
    """The names bound by an assignment target (``a, (b, *c)`` → a, b, c)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _target_names(t)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _assigned_name(stmt):
    """The one name a final assignment binds, if it binds just one."""
    if isinstance(stmt, ast.Assign):
        target = stmt.targets[0]
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        target = stmt.target
    else:
        return None
    return target.id if isinstance(target, ast.Name) else None


def _local_names(node) -> set:
    """Names local to a function, lambda, class body or comprehension."""
    names, declared = set(), set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = node.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
            if arg is not None:
                names.add(arg.arg)
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
    elif isinstance(node, ast.ClassDef):
        body = node.body
    else:  # a comprehension: its targets
        body = [g.target for g in node.generators]
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            stack.extend(n.decorator_list)
            continue  # a nested scope
        elif isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            declared.update(n.names)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            names.add(n.name)
        stack.extend(ast.iter_child_nodes(n))
    return names - declared
