"""The ``--expect`` text read: ``"a=6, b=-4"`` (or the name of a mapping) to expected numbers."""

from __future__ import annotations

import ast
import numbers
import operator
import sys
from collections.abc import Mapping

import numpy as np

from ..core.engine import Value


def parse_expect(spec: str, ns) -> dict:
    """``"a=6, b=-4"`` (or the name of a mapping in ``ns``) → ``{'a': 6.0, 'b': -4.0}``.

    Keys are variable names or paths to what the cell keeps (``n.w[0]``,
    ``net.params['W1']``), optionally with ``.data`` for an expected value rather
    than a gradient; numbers may be simple arithmetic (``-4/3``) or a name or path of
    ``ns`` holding a number or an array (``x=dx``, ``W1=grads['W1']``); a mapping's
    values may also be lists or arrays (a tensor's gradient).
    Raises ValueError with a readable message.
    """
    spec = spec.strip().strip("\"'")
    if spec.isidentifier():
        if spec not in ns:
            raise ValueError(f"no variable {spec!r} (give NAME=NUMBER pairs or a dict)")
        mapping = ns[spec]
        if not isinstance(mapping, Mapping):
            raise ValueError(f"{spec!r} is a {type(mapping).__name__}, not a dict")
        items = list(mapping.items())
    else:
        items = []
        for part in _parts(spec):
            if not part.strip():
                continue
            key, eq, number = part.partition("=")
            if not eq:
                raise ValueError(f"{part.strip()!r} is not NAME=NUMBER")
            items.append((key.strip(), _named_number(number.strip(), ns)))
    expect = {}
    for key, number in items:
        canonical = _key(key) if isinstance(key, str) else None
        if canonical is None:
            raise ValueError(f"{key!r} is not a variable name (optionally with .data)")
        expect[canonical] = _expected_number(number)
    if not expect:
        raise ValueError("no NAME=NUMBER pairs given")
    return expect


def _parts(spec: str) -> list[str]:
    """``spec`` split at the commas outside brackets and quotes (``d[1, 2]=3, b=4``)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(spec):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(spec[start:i])
            start = i + 1
    return parts + [spec[start:]]


def _path(text: str):
    """``text`` parsed as a path (``a``, ``n.w[0]``, ``net.params['W1']``): the steps
    ``[name, ('.', attr) | ('[]', key)...]``, or None for anything else."""
    if len(text) > 200:
        return None
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    steps = []
    while not isinstance(node, ast.Name):
        if isinstance(node, ast.Attribute):
            steps.append((".", node.attr))
        elif isinstance(node, ast.Subscript) and _key_constant(node.slice):
            steps.append(("[]", ast.literal_eval(node.slice)))
        else:
            return None
        node = node.value
    return [node.id] + steps[::-1]


def _key_constant(node) -> bool:
    try:
        key = ast.literal_eval(node)
    except ValueError:
        return False
    return isinstance(key, (str, int, tuple))


def _key(key: str):
    """A key of ``--expect`` in the form the trace names nodes (``net.params['W1']``,
    ``.data`` kept), or None if it is no path."""
    steps = _path(key.strip())
    if steps is None:
        return None
    text = steps[0]
    for kind, k in steps[1:]:
        text += f".{k}" if kind == "." else f"[{k!r}]"
    return text


def _named_number(text: str, ns):
    """The answer ``text`` names in ``ns`` (``dx``, ``grads['W1']``, ``net.dW``), or
    ``text`` itself when it names nothing there (a number or arithmetic)."""
    steps = _path(text)
    if steps is None or steps[0] not in ns:
        return text
    value = ns[steps[0]]
    try:
        for kind, k in steps[1:]:
            value = getattr(value, k) if kind == "." else value[k]
    except Exception as e:  # noqa: BLE001 - the user's own objects
        raise ValueError(f"{text!r} cannot be read: {type(e).__name__}: {e}") from None
    return value


def _expected_number(x):
    """An expected answer as a float (or a float array, for a tensor's gradient)."""
    if isinstance(x, Value):
        return float(x.data)
    held = tensor_numbers(x)
    if held is not None:
        return held
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, (list, tuple, np.ndarray)):
        try:
            return np.asarray(x, dtype=float)
        except (TypeError, ValueError):
            pass
    if isinstance(x, str):
        if len(x) > 200:
            raise ValueError(f"{x[:20]!r}... is not a number (at most 200 characters)")
        try:
            return float(_arithmetic(ast.parse(x, mode="eval").body))
        except (
            SyntaxError,
            ValueError,
            TypeError,
            ZeroDivisionError,
            OverflowError,
            MemoryError,
            RecursionError,
        ):
            pass
    raise ValueError(f"{_short(x)} is not a number (nor a variable holding one)")


def tensor_numbers(x):
    """A torch tensor's own numbers as a float array (a copy), read without calling any
    method of a subclass of it; None for anything else. Torch is not imported here: a
    tensor exists only if it was."""
    torch = sys.modules.get("torch")
    if torch is None or not issubclass(type(x), getattr(torch, "Tensor", ())):
        return None
    from ..analysis.torchstats import tensor_numbers as read

    try:
        return np.array(read(x), dtype=float)
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:
        # (a meta, sparse or nested tensor)
        raise ValueError(f"a {type(x).__name__} whose numbers cannot be read ({e})") from None


def _short(x) -> str:
    try:
        text = repr(x)
    except Exception:  # noqa: BLE001 - an answer whose repr fails
        text = f"a {type(x).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


def _arithmetic(node):
    """The value of a tree of numbers and + - * / ** (nothing else is evaluated)."""
    ops = {
        ast.Add: operator.add,
        ast.Sub: operator.sub,
        ast.Mult: operator.mul,
        ast.Div: operator.truediv,
        ast.Pow: operator.pow,
        ast.USub: operator.neg,
        ast.UAdd: operator.pos,
    }
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)  # floats, so 9**9**9 overflows instead of running on
    if isinstance(node, ast.UnaryOp) and type(node.op) in ops:
        return ops[type(node.op)](_arithmetic(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        return ops[type(node.op)](_arithmetic(node.left), _arithmetic(node.right))
    raise ValueError("not a number")
