"""A submitted notebook read as data, never run: its cells' text, the cell a question names,
the hand-derived answers a cell writes down, and the checks a teacher's test code declares.

Everything here reads text: no cell of the student's runs in this process. A notebook that is
not what nbformat 4 writes (a JSON list, cells that are not a list, a source that is a number)
raises :class:`NotebookError` with a sentence that says where.
"""

from __future__ import annotations

import ast
import json
from typing import NamedTuple

MAX_BYTES = 64 << 20  # a larger notebook is refused
MAX_ITEMS = 2_000_000  # JSON containers and items in a notebook: more is refused
MAX_CELL = 1 << 20  # characters of one cell's source


class NotebookError(ValueError):
    """The submission is not a notebook that can be read (its message says why)."""


class Cell(NamedTuple):
    """A cell as data: its type, its source, and the names it can be found by (its
    nbgrader ``grade_id``, its ``id``, its tags)."""

    kind: str
    source: str
    names: tuple


def read_cells(raw: bytes) -> list:
    """The cells of a notebook file's bytes, each a :class:`Cell`."""
    if len(raw) > MAX_BYTES:
        raise NotebookError(f"the notebook is larger than {MAX_BYTES >> 20} MiB")
    if raw.count(b"[") + raw.count(b"{") + raw.count(b",") > MAX_ITEMS:
        raise NotebookError("the notebook holds too many JSON items")
    try:
        nb = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise NotebookError(f"the notebook is not JSON text: {_short(exc)}") from None
    if type(nb) is not dict:
        raise NotebookError(f"the notebook is a JSON {_json_type(nb)}, not an object")
    cells = nb.get("cells")
    if type(cells) is not list:
        raise NotebookError(f"the notebook's cells are a JSON {_json_type(cells)}, not a list")
    return [_cell(i, c) for i, c in enumerate(cells, 1)]


def _cell(number: int, cell) -> Cell:
    if type(cell) is not dict:
        raise NotebookError(f"cell {number} is a JSON {_json_type(cell)}, not an object")
    kind = cell.get("cell_type")
    source = cell.get("source", "")
    if type(source) is list and all(type(s) is str for s in source):
        source = "".join(source)
    if type(kind) is not str or type(source) is not str:
        what = "type" if type(kind) is not str else "source"
        raise NotebookError(f"cell {number}'s {what} is not text")
    if len(source) > MAX_CELL:
        raise NotebookError(f"cell {number} is longer than {MAX_CELL} characters")
    meta = cell.get("metadata")
    meta = meta if type(meta) is dict else {}
    names = []
    nbgrader = meta.get("nbgrader")
    if type(nbgrader) is dict and type(nbgrader.get("grade_id")) is str:
        names.append(nbgrader["grade_id"])
    if type(cell.get("id")) is str:
        names.append(cell["id"])
    tags = meta.get("tags")
    if type(tags) is list:
        names += [t for t in tags if type(t) is str]
    return Cell(kind, source, tuple(names))


def _json_type(x) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(x), "number")


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 120 else text[:117] + "..."


# =========================================================================== finding cells
def find_cell(cells: list, which: str) -> str | None:
    """The source of the code cell ``which`` names, or None.

    ``which`` is a cell's nbgrader ``grade_id``, its ``id`` or one of its tags, or
    ``"autograd"`` (the first cell that starts with ``%%autograd``), ``"autograd:N"`` (the
    N-th such cell).
    """
    code = [c for c in cells if c.kind == "code"]
    if which == "autograd" or which.startswith("autograd:"):
        number = which.partition(":")[2] or "1"
        found = [c for c in code if c.source.lstrip().startswith("%%autograd")]
        n = int(number) if number.isdigit() else 0
        return found[n - 1].source if 1 <= n <= len(found) else None
    for cell in code:
        if which in cell.names:
            return cell.source
    return None


def answers_in(cells: list, name: str):
    """The hand-derived answers a code cell writes down as ``name = {"w": -4.0, ...}``: a
    dict of numbers (or lists of numbers), read from the text, never run. The last such
    assignment counts. A text saying why if there is none, or if it is not written with
    numbers (simple arithmetic of numbers is allowed: ``-2 * 2``)."""
    found = None
    for cell in cells:
        if cell.kind != "code" or name not in cell.source:
            continue
        try:
            tree = ast.parse(_python_only(cell.source))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            ):
                found = node.value
    if found is None:
        return f"no cell assigns {name!r} (a dict of the answers)"
    if not isinstance(found, ast.Dict) or None in found.keys:
        return f"{name!r} is not written as a dict of numbers"
    answers = {}
    for key, value in zip(found.keys, found.values):
        if not (isinstance(key, ast.Constant) and type(key.value) is str):
            return f"a key of {name!r} is not a text"
        try:
            answers[key.value] = _numbers(value, 0)
        except (ValueError, ArithmeticError, RecursionError):
            return f"{name!r}[{key.value!r}] is not written as a number"
    return answers or f"{name!r} is empty"


def _python_only(source: str) -> str:
    """The cell's Python: lines of the shell's own syntax (``%magic``, ``!command``) blank."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )


def _numbers(node, depth: int):
    from ..notebook.expect import _arithmetic

    if isinstance(node, (ast.List, ast.Tuple)) and depth < 8:
        return [_numbers(n, depth + 1) for n in node.elts]
    return _arithmetic(node)


# =========================================================================== checks declared
class Check(NamedTuple):
    """One check a teacher's test code declares: ``check_cell(...)`` or
    ``check_answers(...)``, with its arguments (plain data)."""

    kind: str  # "cell" or "answers"
    args: tuple
    options: dict

    @property
    def key(self) -> str:
        """The check's identity: the same declaration always gives the same key."""
        return json.dumps([self.kind, list(self.args), self.options], sort_keys=True)


KINDS = {"check_cell": "cell", "check_answers": "answers"}


def declared_checks(code: str) -> list:
    """The ``check_cell``/``check_answers`` calls in a teacher's test code, read, not run.

    Their arguments are literals, or names the code assigns a literal before (``QUESTION =
    "..."``); doctest prompts (``>>> ``, ``... ``) are allowed. Anything else in the code is
    ignored: nothing of it runs.
    """
    lines = code.splitlines()
    if any(line.lstrip().startswith(">>>") for line in lines):
        lines = [line.lstrip()[4:] for line in lines if line.lstrip().startswith((">>>", "..."))]
    try:
        tree = ast.parse(_python_only("\n".join(lines)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    known: dict = {}
    checks = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            try:
                if isinstance(target, ast.Name):
                    known[target.id] = _literal(node.value, known)
            except ValueError:
                pass
            continue
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and _is_method(call, "assert_passed"):
            call = call.func.value  # type: ignore[attr-defined]
        if not isinstance(call, ast.Call):
            continue
        name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
        if name not in KINDS:
            continue
        try:
            args = tuple(_literal(a, known) for a in call.args)
            options = {k.arg: _literal(k.value, known) for k in call.keywords if k.arg}
        except ValueError:
            continue
        checks.append(Check(KINDS[name], args, options))
    return checks


def _is_method(node, name: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
        and isinstance(node.func.value, ast.Call)
    )


def _literal(node, known: dict):
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    return ast.literal_eval(node)
