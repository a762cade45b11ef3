"""A second opinion from PyTorch: the recorded graph replayed with torch tensors.

:func:`compare` rebuilds a :class:`~gradmagic.analysis.trace.Trace`'s graph in PyTorch,
node by node, in float64: each leaf becomes a tensor that requires a gradient,
each operation the torch function of the same name (scalar ops from
:mod:`gradmagic.core.ops`, tensor ops from :mod:`gradmagic.core.tensor_ops`, with the
node's recorded parameters). ``torch.autograd.grad`` then gives the target's
gradient with respect to every leaf, which is set beside gradmagic's own.

Like the numerical check it never re-runs the user's cell. torch is imported
only when :func:`compare` is called; without it the comparison carries a
one-line message saying how to install it (:data:`INSTALL`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .check import differences
from .replay import in_precision

__all__ = ["compare", "TorchComparison", "TorchRow", "INSTALL"]

INSTALL = (
    "--torch: PyTorch is not installed, so there is no second opinion; install it with "
    "`pip install torch` (or gradmagic's extra: `pip install 'gradmagic[torch]'`)."
)


@dataclass(frozen=True)
class TorchRow:
    """One leaf: gradmagic's gradient, torch's, and the largest |difference|."""

    index: int  # the leaf's index in trace.nodes
    name: str
    analytic: Any
    torch: Any  # a float, or a numpy array for a tensor leaf
    diff: float  # max |torch - analytic| (0 where both are nan)
    agrees: bool  # diff <= atol + rtol * |torch| everywhere


@dataclass
class TorchComparison:
    """What :func:`compare` found: ``rows`` per leaf, or an ``error`` saying why not."""

    rows: list = field(default_factory=list)
    error: str | None = None
    version: str = ""  # torch.__version__
    value: Any = None  # torch's value of the target

    @property
    def by_index(self) -> dict:
        """Leaf index → :class:`TorchRow`."""
        return {r.index: r for r in self.rows}

    @property
    def passed(self) -> bool:
        return self.error is None and all(r.agrees for r in self.rows)

    @property
    def verdict(self) -> str:
        """One line, e.g. "PyTorch 2.3.0 (float64) agrees on all 4 gradients"."""
        if self.error is not None:
            return self.error
        n = len(self.rows)
        bad = sum(not r.agrees for r in self.rows)
        who = f"PyTorch {self.version} (float64)"
        if bad:
            return f"{who} disagrees on {bad} of {n} gradients"
        return f"{who} agrees on " + (f"all {n} gradients" if n != 1 else "the gradient")


def compare(trace, atol: float | None = None, rtol: float | None = None) -> TorchComparison:
    """Replay ``trace`` in PyTorch float64 and compare each leaf's gradient.

    Tolerances default to the run's options (``--atol/--rtol``), loosened as the check's
    are for a graph of float32 or float16 numbers. Never raises
    for a graph torch cannot replay: the comparison's ``error`` says why.
    """
    atol = trace.options.atol if atol is None else atol
    rtol = trace.options.rtol if rtol is None else rtol
    _, atol, rtol, _ = in_precision(trace, 0.0, atol, rtol)  # float32's rounding allowed
    try:
        import torch
    except ImportError:
        return TorchComparison(error=INSTALL)
    out = TorchComparison(version=torch.__version__.split("+")[0])
    try:
        leaves, target = _replay(torch, trace)
        grads = (
            torch.autograd.grad(target.sum(), list(leaves.values()), allow_unused=True)
            if leaves
            else ()
        )
    except _Unsupported as exc:
        out.error = f"--torch: {exc}; nothing was compared."
        return out
    except Exception as exc:  # noqa: BLE001 - torch's own complaint, shown to the user
        out.error = f"--torch: PyTorch could not replay the graph ({type(exc).__name__}: {exc})."
        return out
    out.value = _plain(target)
    nodes = trace.nodes
    for (i, leaf), g in zip(leaves.items(), grads):
        theirs = np.zeros(leaf.shape) if g is None else g.detach().numpy()
        ours = np.asarray(nodes[i].grad, dtype=float)
        diff, agrees = _difference(ours, theirs, atol, rtol)
        out.rows.append(
            TorchRow(
                i,
                nodes[i].name,
                nodes[i].grad,
                float(theirs) if theirs.ndim == 0 else theirs,
                diff,
                agrees,
            )
        )
    return out


def _plain(t):
    a = t.detach().numpy()
    return float(a) if a.size == 1 else a


def _difference(ours, theirs, atol, rtol) -> tuple[float, bool]:
    """The largest |difference| (nan if any is nan), and whether all are within tolerance."""
    err, _, close = differences(ours, theirs, atol, rtol)
    diff = float(np.max(err)) if err.size else 0.0
    return (math.nan if np.isnan(err).any() else diff), bool(np.all(close))


class _Unsupported(Exception):
    """An op with no torch counterpart here."""


def _replay(torch, trace):
    """Every node as a torch tensor: returns (leaf index → leaf tensor, target tensor)."""
    functions: dict = {}  # op code -> its torch function (the entry's ``torch``)
    tensors = trace.tensor_data
    if any(np.iscomplexobj(a) for a in tensors.values()):
        raise _Unsupported("the graph holds complex numbers, which this replay does not")
    vals = [None] * trace.n
    leaves = {}
    with torch.enable_grad():
        for node in trace.nodes:
            i = node.index
            if not node.parents:
                vals[i] = torch.tensor(
                    np.asarray(node.data, dtype=np.float64),
                    dtype=torch.float64,
                    requires_grad=node.requires_grad,
                )
                if vals[i].requires_grad:
                    leaves[i] = vals[i]
                continue
            args = [vals[p] for p in node.parents]
            params = trace.params.get(i) or {} if i in tensors else {}
            code = int(trace.op_code[i])
            if code not in functions:
                entry = trace.ops[code]
                functions[code] = (
                    entry.torch_function(torch) if hasattr(entry, "torch_function") else None
                )
            f = functions[code]
            if f is None:
                raise _Unsupported(
                    f"PyTorch has no counterpart here for the op {node.op!r} (node #{i})"
                )
            vals[i] = f(*args, **params)
    return leaves, vals[trace.target.index]
