"""A learner's own autograd engine under the magic.

A learner's engine is duck-typed: an object with a ``.data`` (a number or an array), a
``.grad``, and links to the objects it was computed from (``_prev``, ``_children``,
``_parents``, ``_ctx``...), usually with a ``backward()`` that walks them in topological
order. Micrograd's ``Value`` (written in a notebook, or ``micrograd.engine``) is one; a
numpy ``Tensor`` with the same fields is another.

While a cell runs, the numbers inside such objects are the magic's own nodes, so the
arithmetic in their methods builds gradmagic's graph. When the cell's value is one of
them, :func:`collect` takes what the learner's engine says of its gradients (calling the
learner's ``backward()`` on the target if the cell did not, and putting their ``.grad``
back as it was) and :func:`judge` compares each ``.grad`` with the true gradient of the
target's ``.data`` with respect to that object's ``.data``, as ``--expect`` answers are.
"""

from __future__ import annotations

import collections
import types

import numpy as np

from ..analysis.check import CheckReport, CheckRow, compare_row, differences
from ..core.engine import Value
from ..core.tensor import Tensor
from . import boundary
from .boundary import path_text

__all__ = ["is_engine_object", "engine_class", "owner_data", "collect", "name", "judge", "drawing"]

LINKS = ("_prev", "_children", "children", "_parents", "parents", "prev", "_inputs", "_ctx")
"""Attributes in which a learner's engine keeps what an object was computed from."""
_LINKED = frozenset(LINKS)

_FOREIGN = ("torch", "jax", "tensorflow", "numpy", "gradmagic", "builtins")
_MOST = 200_000  # the most objects one search visits


def _foreign(cls) -> bool:
    module = getattr(cls, "__module__", None)
    return not isinstance(module, str) or module.partition(".")[0] in _FOREIGN


def engine_class(cls) -> bool:
    """True for a class whose instances are a learner's autograd objects: arithmetic
    written in Python (``__add__``, ``__mul__``, ``__matmul__``...) and a ``backward`` method or a
    ``grad`` its ``__init__`` sets (not PyTorch's, numpy's or gradmagic's own)."""
    try:
        return _ENGINES[cls]
    except (KeyError, TypeError):  # (not seen yet; unhashable)
        pass
    answer = _engine_class(cls)
    try:
        if len(_ENGINES) > 4096:
            _ENGINES.clear()
        _ENGINES[cls] = answer
    except TypeError:
        pass
    return answer


_ARITHMETIC = ("__add__", "__mul__", "__matmul__", "__sub__", "__truediv__", "__pow__")
_ENGINES: dict = {}  # class → engine_class (a plain dict: a weak one costs more than a look-up)


def _engine_class(cls) -> bool:
    if not isinstance(cls, type) or cls in (Value, Tensor) or _foreign(cls):
        return False
    try:
        arithmetic = any(
            isinstance(getattr(cls, op, None), types.FunctionType) for op in _ARITHMETIC
        )
        if not arithmetic:
            return False
        if callable(getattr(cls, "backward", None)):
            return True
        init = getattr(cls, "__init__", None)
        return isinstance(init, types.FunctionType) and "grad" in init.__code__.co_names
    except Exception:  # a class that refuses inspection
        return False


def is_engine_object(v) -> bool:
    """True for an instance of an :func:`engine_class` that has a ``.data`` and a ``.grad``."""
    try:
        known = _ENGINES[type(v)]  # (engine_class's cache, read without a call)
    except (KeyError, TypeError):
        known = engine_class(type(v))
    if not known:
        return False
    attributes = getattr(v, "__dict__", None)
    if type(attributes) is dict and "data" in attributes and "grad" in attributes:
        return True
    return hasattr(v, "data") and hasattr(v, "grad")  # slots, or properties of theirs


def owner_data(v, is_node):
    """``v.data`` when ``v`` is a learner's object whose ``.data`` is a node; else None."""
    if not is_engine_object(v):
        return None
    data = getattr(v, "data", None)
    return data if is_node(data) else None


def links(v) -> list:
    """The learner's objects ``v`` was computed from, as its engine links them."""
    found = []
    attributes = getattr(v, "__dict__", None)
    mine = attributes if type(attributes) is dict else None
    for attr in LINKS if mine is None else [a for a in mine if a in _LINKED]:
        if mine is not None:
            held = mine[attr]
        else:
            try:
                held = getattr(v, attr, None)
            except Exception:  # noqa: BLE001 - a property of theirs that raises
                continue
        if type(held) in _HOLDERS:  # (the common case first)
            found += [e for e in held if type(e) is type(v) or is_engine_object(e)]
            continue
        if held is None:
            continue
        if attr == "_ctx" and not isinstance(held, (list, tuple, set, frozenset)):
            held = getattr(held, "parents", getattr(held, "_parents", ()))
        if is_engine_object(held):
            found.append(held)
        elif isinstance(held, (list, tuple, set, frozenset, collections.deque)):
            found += [e for e in held if type(e) is type(v) or is_engine_object(e)]
    return found


_HOLDERS = frozenset({set, tuple, list})


def learner_graph(target, parents: dict | None = None) -> list:
    """Every learner's object the target was computed from, the target first; ``parents``,
    when given, learns each one's :func:`links` (by id)."""
    seen, stack = {id(target)}, [target]
    order: list = []
    while stack and len(order) < _MOST:
        v = stack.pop()
        order.append(v)
        found = links(v)
        if parents is not None:
            parents[id(v)] = found
        for p in found:
            if id(p) not in seen:
                seen.add(id(p))
                stack.append(p)
    return order


def paths(ns, roots, later=()) -> dict:
    """id → (object, path) of each learner's object the names ``roots`` reach, by the
    shortest path (``a``, ``n.layers[0].neurons[1].w[2]``); one search, breadth first.
    The names ``later`` (a loop's variable) name only what the others do not reach."""
    found: dict = {}
    seen: set = set()
    budget = _MOST
    for group in (set(roots) - set(later), set(roots) & set(later)):
        queue = collections.deque((ns[r], (r,)) for r in sorted(group) if r in ns)
        budget = _search(queue, seen, found, budget)
    return found


def _search(queue, seen: set, found: dict, budget: int) -> int:
    while queue and budget > 0:
        v, path = queue.popleft()
        if id(v) in seen:
            continue
        seen.add(id(v))
        budget -= 1
        if is_engine_object(v):
            found[id(v)] = (v, path)
            continue
        for key, e, kind in _items(v):
            if not isinstance(e, (str, bytes, int, float, type(None))):
                queue.append((e, (path, kind, key)))
    return budget


def _items(v):
    """(key, item, kind) of a list, tuple, dict or an instance's attributes."""
    if isinstance(v, (list, tuple)):
        return [(i, e, "[]") for i, e in enumerate(v)]
    if isinstance(v, dict):
        return [(k, e, "[]") for k, e in v.items() if isinstance(k, (str, int))]
    if isinstance(v, (type, types.ModuleType, types.FunctionType, np.ndarray)) or _foreign(type(v)):
        return []
    attributes = getattr(v, "__dict__", None)
    if type(attributes) is dict:
        return [(k, e, ".") for k, e in attributes.items() if not k.startswith("__")]
    return []


class Claims:
    """What the learner's engine said about the gradients of one target.

    ``items`` are (object, its data node, its ``.grad`` as plain numbers, its name,
    whether one of its links holds the same data node); ``notes`` say what was done
    (``backward()`` called by the magic) or could not be (it raised)."""

    def __init__(self, owner, name: str):
        self.owner = owner
        self.name = name
        self.items: list = []
        self.index: list = []  # each item's position in the graph (-1: not in it)
        self.notes: list[str] = []
        self.judged = True  # False: their backward() failed, the objects are only named
        self.links: list = []  # the first DRAWN of the target's graph: their links' positions
        self.ops: list = []  # ... and their ``_op``
        self.size = 0  # the objects in the target's graph (the first items)


def collect(owner, ns, roots, later=(), held=(), steps=(), parents=None) -> Claims:
    """The learner's gradients for the target ``owner`` (see the module docstring).

    Their ``backward()`` is called on ``owner`` when its ``.grad`` is still zero; what it
    wrote into ``.grad`` is read and then put back, so the objects hold what the cell
    left in them. ``held`` and ``parents``: the (object, data) pairs of the graph of the
    cell's last ``backward()`` (its target first), and each one's links, when known."""
    numbers = {id(v): data for v, data in held}
    if parents and held and held[0][0] is owner:  # that graph's walk, not made again
        graph, known = [v for v, _ in held], set(numbers)
    else:
        parents = {}
        graph = learner_graph(owner, parents)
        known = {id(v) for v in graph}
    reached = paths(ns, roots, later)
    objects = graph + [v for key, (v, _) in reached.items() if key not in known]
    names = {key: path_text(path) for key, (_, path) in reached.items()}
    claims = Claims(owner, names.get(id(owner)) or _label(owner) or "target")
    before = None
    if not _nonzero(getattr(owner, "grad", None)):
        before = [(v, v.__dict__.get("grad")) for v in objects if hasattr(v, "__dict__")]
        claims.judged = _call_backward(owner, claims)
        if claims.judged:
            claims.notes.append(
                f"The cell did not call {claims.name}.backward(): the magic called it, "
                "and put every .grad back as the cell left it."
            )
    if len(steps) > 1:
        claims.notes.append(
            f"The cell trained {len(steps)} steps ({claims.name}: {steps[0]:.6g} → "
            f"{steps[-1]:.6g}); this is the last step: its graph, from the numbers it started with."
        )
    drawn, claims.size = graph[:DRAWN], len(graph)  # (their graph as the views draw it)
    at = {id(v): k for k, v in enumerate(drawn)}
    claims.links = [[at[id(p)] for p in parents.get(id(v), ()) if id(p) in at] for v in drawn]
    claims.ops = [op if isinstance(op := getattr(v, "_op", ""), str) else "" for v in drawn]
    items, first, shared = claims.items, set(), set()
    try:
        for v in objects:
            data = numbers[id(v)] if id(v) in numbers else v.data
            grad = v.grad
            if id(data) in first:
                shared.add(id(data))
            first.add(id(data))
            name = names.get(id(v)) or _label(v)
            grad = grad if type(grad) is float else _numbers(grad, data)
            items.append((v, data, grad, name, False))
    finally:
        _put_back(before or ())
    if shared:
        _made_here(items, shared, numbers, parents)
    return claims


def _made_here(items: list, shared: set, numbers: dict, parents: dict) -> None:
    """Mark the items whose data one of their links holds too (a relu passing its input
    on: not the object that made it), which only a number held by several can be."""
    for k, (v, data, grad, name, _) in enumerate(items):
        if id(data) in shared:
            made_from = parents.get(id(v))
            made_from = links(v) if made_from is None else made_from
            if any([numbers.get(id(p), p.data) is data for p in made_from]):
                items[k] = (v, data, grad, name, True)


def _put_back(grads) -> None:
    for v, grad in grads:
        v.__dict__["grad"] = grad


def _call_backward(owner, claims: Claims) -> bool:
    """Call ``owner.backward()``; False (said in the notes) when there is none or it raised."""
    backward = getattr(owner, "backward", None)
    if not callable(backward):
        claims.notes.append(
            f"{claims.name} has no backward() method, and the cell did not fill its .grad: "
            "nothing of your engine's gradients to compare"
        )
        return False
    try:
        with np.errstate(all="ignore"):
            backward()
    except Exception as e:  # noqa: BLE001 - their code: said, not raised
        claims.notes.append(f"{claims.name}.backward() raised {type(e).__name__}: {e}")
        return False
    return True


def _nonzero(g) -> bool:
    if g is None:
        return False
    try:
        return bool(np.any(np.asarray(g, dtype=float) != 0))
    except (TypeError, ValueError):
        return True


def _numbers(g, data):
    """A learner's ``.grad`` as plain numbers: a float, or a float array (None: zeros)."""
    if type(g) is float:
        return g
    if g is None:
        shape = np.shape(data)
        return np.zeros(shape) if shape else 0.0
    if isinstance(g, (np.ndarray, list, tuple)):
        return np.array(g, dtype=float)
    try:
        return float(g)
    except (TypeError, ValueError):
        return np.array(g, dtype=float)


def _label(v) -> str:
    label = getattr(v, "label", "")
    return label if isinstance(label, str) else ""


def name(claims: Claims, walk, ns) -> list:
    """Find the learner's objects' data in the graph ``walk`` (kept in ``claims.index``) and
    label those nodes with the learner's names (their variables' paths, else their labels),
    unless a name of ``ns`` is bound to the node itself; returns the positions labelled."""
    named: list = []
    order, base, index = walk.order, walk.base, []
    for item in claims.items:  # (walk.index of each, inlined: the most numerous call here)
        i = getattr(item[1], "_mark", None)
        i = i - base if i.__class__ is int else -1
        index.append(i if 0 <= i < len(order) and order[i] is item[1] else -1)
    claims.index = index
    for k, ((v, data, grad, label, mine), i) in enumerate(zip(claims.items, claims.index)):
        if i < 0 or mine:
            continue
        if label and ns.get(data.label) is not data:
            data.label = label
            named.append(i)
        elif not label:  # an object with no name: called as the graph labels its number
            op = getattr(v, "_op", "")
            label = data.label or f"node {i}" + (f" ({op})" if op and isinstance(op, str) else "")
            claims.items[k] = (v, data, grad, label, mine)
    return named


def _scalar_rows(trace, scalars, atol: float, rtol: float) -> dict:
    """The rows of scalar claims, (index, name, claim, note) each, compared in one pass."""
    if not scalars:
        return {}
    index = np.array([i for i, *_ in scalars])
    got = trace.grad[index].astype(float)
    want = np.array([g for _, _, g, _ in scalars], dtype=float)
    err, bound, close = differences(got, want, atol, rtol)
    with np.errstate(all="ignore"):
        rel = np.where(err == 0, 0.0, err / np.abs(want))
    return {
        i: CheckRow(name, g, w, e, r, b, "pass" if c else "fail", note, i)
        for (i, name, _, note), g, w, e, r, b, c in zip(
            scalars,
            got.tolist(),
            want.tolist(),
            err.tolist(),
            rel.tolist(),
            bound.tolist(),
            close.tolist(),
        )
    }


def _first_wrong(rows, judged: dict, claims: Claims) -> list:
    """A note naming the wrong ``.grad`` nearest the target (the first one backward made
    wrong) and the ops that use it, whose backward is where to look."""
    wrong = [r for r in rows if not r.ok]
    if not wrong:
        return []
    first = max(wrong, key=lambda r: r.index)
    v = judged[first.index]
    ops = {
        u._op
        for u, *_ in claims.items
        if isinstance(getattr(u, "_op", None), str) and u._op and any(p is v for p in links(u))
    }
    used = f" (it is used by {', '.join(sorted(ops))}: look at that backward)" if ops else ""
    return [f"The wrong .grad nearest {claims.name} is {first.name}'s{used}."]


def judge(trace, claims: Claims, atol: float, rtol: float) -> CheckReport:
    """Each ``.grad`` the learner's engine left against the true gradient of the target's
    ``.data`` with respect to that object's ``.data`` (rows as ``--expect``'s)."""
    by_node: dict = {}
    for item, i in zip(claims.items, claims.index):
        if i >= 0 and claims.judged:
            by_node.setdefault(i, []).append(item)
    rows, judged, scalars = {}, {}, []
    for i, items in sorted(by_node.items()):
        # one number held by several objects: the one that made it (not a relu passing
        # its input on); several wrapping the same number (Value(x) at each use of x)
        # share its gradient, which is the sum of theirs
        if len(items) > 1:
            items = [it for it in items if not it[4]] or items
        v, _, grad, label, _ = items[0]
        note = ""
        if len(items) > 1:
            grad = sum(it[2] for it in items)
            label = trace.nodes[i].label or label
            note = f"the sum of the .grad of the {len(items)} objects holding it"
        judged[i] = v
        if i in trace.tensor_grad or not isinstance(grad, float):
            row = compare_row(label, trace.nodes[i], "grad", grad, atol, rtol)
            rows[i] = row._replace(note=note) if note else row
        else:
            scalars.append((i, label, grad, note))
    rows.update(_scalar_rows(trace, scalars, atol, rtol))
    ordered = [rows[i] for i in sorted(rows)]
    notes = list(claims.notes) + _first_wrong(ordered, judged, claims)
    return CheckReport(
        ordered,
        kind="expect",
        atol=atol,
        rtol=rtol,
        notes=notes,
        target=claims.name,
        columns=("true", "your .grad"),
        unchecked="your engine's objects hold no number of the graph",
    )


DRAWN = 300  # the most of the learner's objects their graph draws


def drawing(trace, claims: Claims, report: CheckReport) -> dict:
    """The learner's own graph as plain data for the views, as their ``draw_dot`` draws it:
    ``nodes`` (the target first; each its ``label``, ``op``, ``data``, their ``.grad`` as
    ``yours``, the ``true`` gradient, ``ok``: the verdict on that number, None if unjudged),
    ``parents`` (each node's inputs, by position) and ``total`` (the objects in their graph:
    past ``DRAWN``, the first ones reached from the target are drawn)."""
    rows = {r.index: r for r in report.rows}
    nodes = []
    for k, ((v, data, grad, _, _), i) in enumerate(zip(claims.items, claims.index)):
        if k >= len(claims.links):
            break
        row = rows.get(i)
        nodes.append(
            {
                "label": _label(v),
                "op": claims.ops[k],
                "data": trace._data(i) if i >= 0 else _numbers(data, data),
                "yours": grad,
                "true": trace._grad(i) if i >= 0 else None,
                "ok": None if row is None else row.ok,
            }
        )
    return {"nodes": nodes, "parents": claims.links, "total": claims.size}


boundary.is_engine_object, boundary.engine_class = is_engine_object, engine_class  # (see there)
