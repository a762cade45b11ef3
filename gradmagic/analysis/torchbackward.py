"""The real autograd nodes of a recorded PyTorch run, in the order backward runs them.

:func:`backward_order` walks the target's ``grad_fn`` graph (``MulBackward0``,
``AccumulateGrad``: the nodes torch made, still linked after a backward) and orders them
as torch's engine does on one device: a node is ready once every node that feeds it a
gradient has run, and of the ready nodes the one with the highest sequence number (the
latest made; ``AccumulateGrad`` first) runs next. Each node is tied to the recorded value
whose gradient it received: the op output it made, or the leaf it accumulates into.

Why its own: a Trace's backward order is gradmagic's own walk (:mod:`~gradmagic.analysis.graph`);
this one is torch's engine's, read from its nodes.
This module imports torch; nothing imports it unless a cell uses torch.
"""

from __future__ import annotations

import heapq

__all__ = ["backward_order", "STEPS"]

STEPS = 2000  # nodes of the backward pass a run keeps, in order
WALK = 100_000  # nodes looked at before the walk gives up (a huge graph: the first STEPS)


def backward_order(rec, target, graph, limit: int = STEPS) -> tuple:
    """``(steps, total)``: up to ``limit`` steps ``(node name, op index or -1, value index
    or -1)`` in the order backward runs them, and how many nodes the walk found. A node torch
    made inside a composite op (``LogSoftmaxBackward0`` of ``cross_entropy``) gets the op
    of the node that fed it, and no value of its own."""
    root = getattr(target, "grad_fn", None)
    if root is None:
        return [], 0
    feeds, nexts = _feeds(root)
    made_by = _made_by(rec, graph)
    ready = [(-_sequence(root), 0, root)]
    count = 1
    steps: list = []
    inside: dict = {}  # id(node) → the op of the node that fed it (a node inside a composite op)
    while ready and len(steps) < limit:
        _, _, node = heapq.heappop(ready)
        name, k, i = _step(rec, node, made_by)
        if k < 0 and name != "AccumulateGrad":
            k = inside.get(id(node), -1)
        steps.append((name, k, i))
        for nxt in nexts.get(id(node), ()):
            key = id(nxt)
            if key not in feeds:
                continue
            inside.setdefault(key, k)
            feeds[key] -= 1
            if feeds[key] == 0:
                heapq.heappush(ready, (-_sequence(nxt), count, nxt))
                count += 1
    return steps, len(feeds) + 1


def _next(node) -> list:
    try:
        return [n for n, _ in node.next_functions if n is not None]
    except (AttributeError, RuntimeError):
        return []


def _feeds(root) -> tuple:
    """(id(node) → how many edges reach it from ``root``'s graph, id(node) → the nodes it
    feeds), over at most :data:`WALK` nodes. The second map holds the nodes, so they stay
    alive while their ids are keys."""
    feeds: dict = {}
    nexts: dict = {}
    seen, todo = {id(root)}, [root]
    while todo and len(seen) < WALK:
        node = todo.pop()
        nexts[id(node)] = after = _next(node)
        for nxt in after:
            key = id(nxt)
            feeds[key] = feeds.get(key, 0) + 1
            if key not in seen:
                seen.add(key)
                todo.append(nxt)
    return feeds, nexts


def _sequence(node) -> int:
    """The node's sequence number (``AccumulateGrad``: the largest, as in torch's engine)."""
    if type(node).__name__ == "AccumulateGrad":
        return 1 << 62
    try:
        return int(node._sequence_nr())
    except (AttributeError, RuntimeError):
        return 0


def _made_by(rec, graph) -> dict:
    """id(grad_fn) → (op index, value index) for the outputs of the ops in ``graph``."""
    out = {}
    for k in graph:
        for i in rec.ops[k].outputs:
            fn = rec.tensors[i].grad_fn
            if fn is not None and id(fn) not in out:
                out[id(fn)] = (k, i)
    return out


def _step(rec, node, made_by) -> tuple:
    name = type(node).__name__
    k, i = made_by.get(id(node), (-1, -1))
    if name == "AccumulateGrad":
        leaf = getattr(node, "variable", None)
        j = rec.index_of.get(id(leaf)) if leaf is not None else None
        i = j if j is not None else -1
    return name, k, i
