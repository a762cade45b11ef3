"""What every scalar node shares: the engine's state, the graph protocol and ``backward``.

:data:`state` holds the process-wide switches and counters (grad mode, the recording
flag, branch events); :class:`GraphNode` is the protocol of ``Value`` and the magic's
number nodes (graph facts, ``topo()``, ``backward()``); :func:`backward` is the one
reverse sweep every kind of node shares. The node classes register themselves in
``SCALAR_NODES`` (and its parts) when their modules are imported.

``backward`` writes the commonest ops out in its loop rather than calling their rules: it
runs once per node of every graph, so it is longer than the other functions here.
"""

from __future__ import annotations

# bound here, so a cell that rebinds builtins.float changes its own code, not the engine's
from builtins import float  # noqa: A004

import math
import weakref
from array import array as _array
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from .ops import OPS, Op, real

__all__ = ["GraphNode", "state", "no_grad", "is_grad_enabled", "backward", "SCALAR_NODES"]


class _State:
    """Process-wide engine switches and counters (read by the magic and views)."""

    grad_enabled = True
    # how often a Value's number decided control flow (comparisons, bool(),
    # int(), __index__): a numerical check then holds for this branch only
    branch_events = 0
    # how often a Value was converted to a float by code that could have cut
    # the graph (float(v), math.exp(v) outside an %%autograd cell, ...)
    float_conversions = 0
    # True while the magic runs a cell (its graph is being recorded): set by
    # gradmagic.notebook.runtime.recording; a Tensor leaf then refuses in-place writes
    recording = False
    # while the magic records a cell: a function ``cut(message)`` that reports a
    # place where numbers left the graph (a numpy function with no gradient rule)
    cut: Callable[..., None] | None = None
    # graph walks mark nodes with ints, each walk's above every earlier walk's (this is the
    # last one used): ``topo`` marks a node ``entered`` while its parents are walked and
    # ``left`` after; ``engine.walk`` marks it with ``base + its position``
    last_mark = 0
    # weak references to the array nodes written element by element whose writes are not
    # linked into the graph yet (core.array_writes); every walk links them first (settle)
    open_writes: list[weakref.ref[Any]] = []
    # ``close(node)``: link one such node's writes (set by core.array_writes, which alone
    # opens them)
    close_writes: Callable[[Any], None]


state = _State()


def settle() -> None:
    """Link every array node's open element writes into the graph, before a walk reads it."""
    pending, state.open_writes = state.open_writes, []
    for ref in pending:
        node = ref()
        if node is not None:
            state.close_writes(node)


@contextmanager
def no_grad():
    """Within this block, operations on Values record no graph.

    Results are plain leaves (no parents), as in ``torch.no_grad()``; useful for
    optimizer updates and evaluation.
    """
    before = state.grad_enabled
    state.grad_enabled = False
    try:
        yield
    finally:
        state.grad_enabled = before


def is_grad_enabled() -> bool:
    return state.grad_enabled


class GraphNode:
    """The graph protocol every scalar node class shares (no state of its own).

    A node has ``data`` (its number), ``grad``, ``label``, ``_op`` (the
    :class:`~gradmagic.core.ops.Op` that made it, or None), ``_a``/``_b`` (its
    parents, None when absent) and ``_mark`` (scratch for graph walks).
    """

    __slots__ = ()
    # the slots of each node class (declared here for the type checker)
    data: Any
    grad: Any
    label: str
    _op: Op | None
    _a: GraphNode | None
    _b: GraphNode | None
    _mark: int | None
    _site = -1  # where the magic made it (core.sites); a class's own slot overrides it

    # ---------------------------------------------------------------- graph facts
    @property
    def op(self) -> str:
        """Name of the operation that made this node ('' for a leaf)."""
        return self._op.name if self._op is not None else ""

    @property
    def opdef(self) -> Op | None:
        """The :class:`gradmagic.core.ops.Op` entry that made this node, or None."""
        return self._op

    @property
    def parents(self) -> tuple:
        """The nodes this one was computed from (empty for a leaf)."""
        if self._a is None:
            return ()
        return (self._a,) if self._b is None else (self._a, self._b)

    @property
    def is_leaf(self) -> bool:
        return self._a is None

    @property
    def kink(self) -> bool:
        """True where the op is not differentiable here and a subgradient was used."""
        op = self._op
        return op is not None and op.kink is not None and op.kink(*[p.data for p in self.parents])

    @property
    def finite(self) -> bool:
        """False when data or grad is nan, infinite or an int too big for a float."""
        try:
            return math.isfinite(self.data) and math.isfinite(self.grad)
        except OverflowError:  # a huge int
            return False

    def local_grads(self) -> tuple:
        """d self / d parent for each parent, at the recorded data."""
        op = self._op
        if op is None:
            return ()
        return op.local_grads(*[p.data for p in self.parents], self.data)

    # ---------------------------------------------------------------- backward
    def topo(self) -> list[GraphNode]:
        """Every node this one depends on, itself last, parents before children.

        An iterative depth-first walk that marks the nodes it visits, so it
        needs neither recursion nor a set keyed on nodes. (:func:`walk` also
        gives each node's position and its parents' positions.)
        """
        if state.open_writes:
            settle()
        order: list[GraphNode] = []
        entered = state.last_mark + 1  # this walk's marks: above every earlier walk's
        left = state.last_mark = entered + 1
        stack = [self]
        push, pop, append = stack.append, stack.pop, order.append
        while stack:
            v = stack[-1]
            m = v._mark
            if m is entered:
                pop()
                v._mark = left  # type: ignore[misc]  # (a slot of each node class, not of GraphNode)
                append(v)
                continue
            if m is left:
                pop()
                continue
            v._mark = entered  # type: ignore[misc]  # (as above)
            a = v._a
            if a is not None:
                m = a._mark
                if m is not entered and m is not left:
                    push(a)
                b = v._b
                if b is not None:
                    m = b._mark
                    if m is not entered and m is not left:
                        push(b)
        return order

    def backward(self, grad: float = 1.0) -> None:
        """Fill ``.grad`` of every node of this graph with d self / d node.

        Idempotent: the graph's gradients are reset first, so calling it twice
        gives the same gradients (it does not accumulate across calls as
        PyTorch does). Nodes reached along several paths accumulate.
        """
        backward(self, float(grad))


# ---------------------------------------------------------------- the node classes
# engine adds Value; core.number_nodes adds its classes and its apply when it is imported
SCALARS: set = set()
"""The number classes that are nodes (what the magic makes)."""
SCALAR_NODES: set = set()
"""Every scalar node class: a node whose ``grad`` is one number."""
FLOAT_NODES: set = set()
"""The number node classes that are floats (their number is themselves)."""
INT_NODES: set = set()
"""The number node classes that are ints."""
number_apply: Callable[[Op, tuple[Any, ...]], Any]  # set by core.number_nodes
"""``number_apply(op, args)``: :func:`apply` with a number node among ``args``."""


def _zero(order) -> bool:
    """Reset the gradient of every node of ``order``; True if one is a tensor."""
    tensors = False
    scalar = SCALAR_NODES
    for v in order:
        if v.__class__ in scalar:
            v.grad = 0.0
        else:
            tensors = True
            v._zero_grad()
    return tensors


def backward(root, seed, walk_=None) -> None:
    """Reverse-mode sweep from ``root`` with d root/d root = ``seed``.

    Shared by every kind of node. A node that is not a scalar (a tensor)
    provides ``_zero_grad()`` and an op with ``vjp(node)`` that adds its
    gradient into its parents; nodes link to their parents through
    ``_a``/``_b`` and carry a ``_mark`` slot for the walks. ``walk_`` is
    ``walk(root, zero=True)`` when the caller has it: the magic walks the
    graph once, for backward and its trace. The graph's gradients are reset
    (during that walk, or after :meth:`GraphNode.topo`), then the sweep runs from
    the root in reverse order.
    """
    if walk_ is None:
        order = GraphNode.topo(root)
        tensors = _zero(order)
    else:
        order, tensors = walk_.order, walk_.tensors
        if not walk_.zeroed:
            _zero(order)
    if tensors:
        _backward_nodes(root, seed, order)
        return
    root.grad = seed
    if walk_ is not None:  # the gradients for the walk's Trace, read as they become final
        walk_.grads = _array("d")
    _backward_numbers(order, None if walk_ is None else walk_.grads)


def _backward_numbers(order, grads) -> None:
    """The sweep over a graph of numbers (see :func:`backward`), each node's gradient added
    to ``grads`` (unless None) as it becomes final."""
    keep = grads is not None
    grad_append: Any = grads.append if keep else None
    add, sub, mul, relu = _ADD, _SUB, _MUL, _RELU
    for v in reversed(order):
        g = v.grad
        if keep:
            grad_append(g)
        op = v._op
        a = v._a
        if op is None or a is None:  # a leaf, or a node an earlier cell cut from its parents
            continue
        b: Any = v._b  # (a GraphNode for every binary op below)
        try:
            # the commonest ops written out: the same products as their df, one call fewer
            if op is add:
                a.grad += g
                b.grad += g
            elif op is mul:
                da = b.data * g
                db = a.data * g
                a.grad += da
                b.grad += db
            elif op is sub:
                a.grad += g
                b.grad += -g
            elif op is relu:
                a.grad += (0.0 if a.data <= 0 else 1.0) * g
            elif b is None:
                a.grad += op.df(a.data, v.data) * g
            else:
                da, db = op.df(a.data, b.data, v.data)
                da *= g  # both products first, so neither is added twice
                db *= g  # if the second one overflows
                a.grad += da
                b.grad += db
        except OverflowError:  # an int too big for a float
            for p, d in zip(v.parents, v.local_grads()):
                p.grad += real(d) * g


def _backward_nodes(root, seed, order) -> None:
    """The sweep node by node, for a graph with tensors (see :func:`backward`); the
    gradients are reset already."""
    root.grad = seed
    for v in reversed(order):
        op = v._op
        if op is None or v._a is None:  # a leaf, or cut from its parents by an earlier cell
            continue
        if v.__class__ not in SCALAR_NODES or op.__class__ is not Op:  # a tensor entry's rule
            op.vjp(v)
            continue
        g = v.grad
        a = v._a
        b = v._b
        try:
            if b is None:
                a.grad += op.df(a.data, v.data) * g
            else:
                da, db = op.df(a.data, b.data, v.data)
                da *= g  # both products first, so neither is added twice
                db *= g  # if the second one overflows
                a.grad += da
                b.grad += db
        except OverflowError:  # an int too big for a float
            for p, d in zip(v.parents, v.local_grads()):
                p.grad += real(d) * g


_ADD, _SUB, _MUL, _RELU = OPS["+"], OPS["-"], OPS["*"], OPS["relu"]
