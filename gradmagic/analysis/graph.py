"""Graph algorithms over a :class:`~gradmagic.analysis.trace.Trace`: who feeds whom,
the order backward processes the nodes, the gradients known after each step.

They read the trace only (its nodes' parents, gradients and local
derivatives), never live nodes; the views call them to draw paths and step
through backward.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["Children", "children_of", "backward_steps", "grads_at", "path_to_target"]


class Children(Sequence):
    """``children[i]``: the indices of the nodes computed from node ``i`` (with
    repeats, ascending), as a list; kept as two arrays, so making it costs no
    Python object per node."""

    def __init__(self, trace):
        n = trace.n
        parent = np.stack([trace.parent_a, trace.parent_b], axis=1).ravel()
        child = np.repeat(np.arange(n), 2)
        keep = parent >= 0
        parent, child = parent[keep], child[keep]
        self.indices = child[np.argsort(parent, kind="stable")]
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(parent, minlength=n))])

    def __len__(self):
        return len(self.indptr) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"node index {i} out of range")
        return self.indices[self.indptr[i] : self.indptr[i + 1]].tolist()


def children_of(trace) -> Children:
    """For each node, the indices of the nodes computed from it (with repeats, ascending)."""
    return Children(trace)


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
