"""A snapshot of one backward run: the nodes, their values and gradients.

A :class:`Trace` is what ``%%autograd`` returns and what every view and check
reads. It copies each node's data and gradient when it is made, so later
changes to the Values (an optimizer step, another backward) do not change it;
it also keeps the graph's nodes themselves (``trace.graph``) so the numerical
check can replay the recorded operations.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.engine import Value
from .numbers import all_finite, short
from .options import Options

__all__ = ["Node", "Trace"]


_LAZY = object()  # Node._local before its first use


@dataclass(slots=True)
class Node:
    """One node of a traced graph, as it was when the trace was taken."""

    index: int  # position in Trace.nodes (topological: parents first)
    label: str  # the name it was assigned to, or '' (constants, temporaries)
    op: str  # the operation that made it, '' for a leaf
    data: Any  # float/int, or a numpy array for a tensor node
    grad: Any
    parents: tuple  # indices into Trace.nodes
    kink: bool = False  # a subgradient was used (relu/abs at 0)
    finite: bool = True  # data and grad are finite (a constant: data alone)
    shape: tuple | None = None  # None for a scalar
    requires_grad: bool = True  # False for a leaf that asked for no gradient
    # what Node.local is computed from: the scalar op entry and the trace's nodes
    _opdef: Any = field(default=None, repr=False, compare=False)
    _nodes: list | None = field(default=None, repr=False, compare=False)
    _local: Any = field(default=_LAZY, repr=False, compare=False)

    @property
    def is_leaf(self) -> bool:
        return not self.parents

    @property
    def is_constant(self) -> bool:
        """A leaf that is not an input: neither checked nor flagged.

        That is an unnamed number written in the cell (the ``2`` in ``x ** 2``)
        or a leaf that asked for no gradient (``requires_grad=False``). An
        unnamed tensor made with ``requires_grad=True`` is an input.
        """
        return not self.parents and (not self.requires_grad
                                     or (not self.label and self.shape is None))

    @property
    def local(self) -> tuple | None:
        """d node / d parent for each parent at the recorded data (``()`` for a leaf).

        None for a tensor node, whose local derivative is a Jacobian. Computed
        on first use from the snapshot (the parents' recorded data), so a trace
        nobody looks into costs no derivative evaluations.
        """
        if self._local is _LAZY:
            nodes = self._nodes
            self._local = self._opdef.local_grads(*[nodes[p].data for p in self.parents],
                                                  self.data)
        return self._local

    @property
    def name(self) -> str:
        """The label, or for an unnamed node its value (constants) or op."""
        if self.label:
            return self.label
        if self.is_leaf:
            return short(self.data)
        return f"({self.op})"


def _snapshot(x):
    return x.copy() if isinstance(x, np.ndarray) else x


class Trace:
    """One run: ``trace.value``, ``trace.grads``, ``trace.nodes``, ``trace.target``.

    Parameters
    ----------
    target:
        The node ``backward()`` was called on (its gradients must be filled).
    bindings:
        Names in the user's namespace → the node each name refers to after the
        run; these decide which node ``grads[name]`` means when a name labels
        several nodes (``x = x * 2`` in a loop).
    branch_events:
        How many times a Value's number decided control flow during the run.
    float_conversions:
        How many times a Value was turned into a float outside the graph.
    source:
        The cell's text, kept as ``trace.source``.
    options:
        Display and check settings (eps, atol, rtol, rankdir, max_nodes, ...).
    """

    def __init__(self, target, *, bindings: dict | None = None, branch_events: int = 0,
                 float_conversions: int = 0, source: str | None = None,
                 options: Options | dict | None = None, warnings: list | None = None):
        self.graph = Value.topo(target)  # the live nodes, parents first
        index = {id(v): i for i, v in enumerate(self.graph)}
        self.nodes: list[Node] = []
        nodes = self.nodes
        for i, v in enumerate(self.graph):
            data = v.data
            parents = tuple(index[id(p)] for p in v.parents)
            node = Node(i, v.label, v.op, _snapshot(data), _snapshot(v.grad), parents,
                        bool(v.kink), shape=data.shape if isinstance(data, np.ndarray) else None)
            if v.__class__ is Value and parents:
                node._opdef, node._nodes = v._op, nodes  # Node.local, computed when asked
            else:
                node._local = v.local_grads()
            if not parents:
                node.requires_grad = getattr(v, "requires_grad", True)
            node.finite = all_finite(data) if node.is_constant else v.finite
            nodes.append(node)
        self.target: Node = self.nodes[-1]
        self.target_node = target
        self.bindings = {name: index[id(v)] for name, v in (bindings or {}).items()
                         if id(v) in index}
        self.branch_events = branch_events
        self.float_conversions = float_conversions
        self.source = source
        self.options = Options.of(options)
        self.warnings: list[str] = list(warnings or [])
        self._report = None  # (settings, CheckReport) of the last check()

    # ------------------------------------------------------------------ facts
    @property
    def value(self):
        """The target's data."""
        return self.target.data

    @property
    def leaves(self) -> list[Node]:
        return [n for n in self.nodes if n.is_leaf]

    def node(self, name: str) -> Node:
        """The node a name means: the one it is bound to, else the last so labelled."""
        if name in self.bindings:
            return self.nodes[self.bindings[name]]
        for n in reversed(self.nodes):
            if n.label == name:
                return n
        raise KeyError(f"no node is labelled {name!r}; labelled nodes: "
                       f"{', '.join(sorted(self.grads)) or 'none'}")

    def _named(self) -> dict:
        """label → the node it means (as :meth:`node` chooses), for every label."""
        out = {}
        for n in self.nodes:
            if n.label:
                out[n.label] = n
        for name, i in self.bindings.items():
            if self.nodes[i].label == name:
                out[name] = self.nodes[i]
        return out

    @property
    def grads(self) -> dict:
        """label → gradient of the target, for every labelled node."""
        return {name: n.grad for name, n in self._named().items()}

    @property
    def values(self) -> dict:
        """label → data, for every labelled node (same choice of node as ``grads``)."""
        return {name: n.data for name, n in self._named().items()}

    @property
    def branch_dependent(self) -> bool:
        """True if the run's control flow depended on a Value's number."""
        return self.branch_events > 0

    # ------------------------------------------------------------------ checks
    def check(self, eps: float | None = None, atol: float | None = None,
              rtol: float | None = None):
        """The numerical check: finite differences beside each analytic gradient.

        Settings default to the run's options (``--eps/--atol/--rtol``), else
        PyTorch gradcheck's (eps 1e-6, atol 1e-5, rtol 1e-3). The report for the
        run's own settings is computed once and kept.
        """
        from .check import check
        opts = self.options
        settings = (eps if eps is not None else opts.eps,
                    atol if atol is not None else opts.atol,
                    rtol if rtol is not None else opts.rtol)
        if self._report is None or self._report[0] != settings:
            self._report = (settings, check(self, *settings))
        return self._report[1]

    def expect(self, mapping, atol: float | None = None, rtol: float | None = None):
        """Compare named gradients (and ``name.data`` values) with expected numbers."""
        from .check import expect
        opts = self.options
        return expect(self, mapping,
                      atol=atol if atol is not None else opts.atol,
                      rtol=rtol if rtol is not None else opts.rtol)

    # ------------------------------------------------------------------ display
    def __repr__(self):
        return (f"<Trace: {len(self.nodes)} nodes, {len(self.leaves)} leaves, "
                f"target {self.target.name} = {short(self.value)}>")
