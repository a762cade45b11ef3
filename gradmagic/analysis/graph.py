"""Graph algorithms over a :class:`~gradmagic.analysis.trace.Trace`: who feeds whom,
the order backward processes the nodes, the gradients known after each step.

They read the trace only (its nodes' parents, gradients and local
derivatives), never live nodes; the views call them to draw paths and step
through backward.
"""
from __future__ import annotations

from itertools import islice

import numpy as np

__all__ = ["children_of", "backward_steps", "grads_at", "path_to_target"]


def children_of(trace) -> list:
    """For each node, the indices of the nodes computed from it (with repeats), ascending."""
    n = trace.n
    parent = np.stack([trace.parent_a, trace.parent_b], axis=1).ravel()
    child = np.repeat(np.arange(n), 2)
    keep = parent >= 0
    parent, child = parent[keep], child[keep]
    child = child[np.argsort(parent, kind="stable")].tolist()
    it = iter(child)
    return [list(islice(it, c)) for c in np.bincount(parent, minlength=n).tolist()]


def backward_steps(trace) -> list:
    """The operation nodes in the order backward processes them (target first)."""
    return np.flatnonzero(trace.parent_a >= 0)[::-1].tolist()


def grads_at(trace, step: int, steps=None, children=None):
    """The gradients known after backward has processed ``step`` operation nodes.

    Returns ``(grads, state)`` indexed like ``trace.nodes``: ``state`` is
    ``"final"`` once every node computed from it has been processed (and for
    the target), ``"partial"`` while some contributions are still to come, and
    ``"unknown"`` before any arrived. Contributions are the recorded products
    ``grad(child) × local derivative``; a node with no ``local`` (a tensor op)
    contributes nothing until its inputs' gradients are final. A final
    gradient is always the recorded one (the sum of every contribution,
    including those of tensor ops).
    """
    nodes = trace.nodes
    steps = backward_steps(trace) if steps is None else steps
    children = children_of(trace) if children is None else children
    done = set(steps[:step])
    target = trace.target.index
    grads = [None] * len(nodes)
    grads[target] = nodes[target].grad
    for c in steps[:step]:
        node = nodes[c]
        if node.local is None:
            continue
        for p, local in zip(node.parents, node.local):
            term = node.grad * local
            grads[p] = term if grads[p] is None else grads[p] + term
    state = []
    for i, node in enumerate(nodes):
        if i == target or (children[i] and all(c in done for c in children[i])):
            state.append("final")
            grads[i] = node.grad
        else:
            state.append("unknown" if grads[i] is None else "partial")
    return grads, state


def path_to_target(trace, index: int, children=None) -> set:
    """``index`` and every node on a path from it to the target."""
    children = children_of(trace) if children is None else children
    seen = {index}
    stack = [index]
    while stack:
        for c in children[stack.pop()]:
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen
