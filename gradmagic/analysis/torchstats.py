"""The statistics of a recorded PyTorch run's values and gradients, in one batched pass.

:func:`summarise` reduces every shown tensor (and its gradient, and each parameter's
in-place update) on its device and reads the numbers back with one synchronisation;
:func:`keep_full` keeps the small values and gradients whole on the host (for ``--expect``
and the full tensor on demand).

This module imports torch; nothing imports it unless a cell uses torch.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .torchhealth import SATURATED, SATURATING

__all__ = ["summarise", "keep_full", "to_numpy", "KEEP_BYTES", "KEEP_ONE", "STAT_NAMES"]

KEEP_BYTES = 16 << 20  # bytes of full values and gradients a run keeps (for --expect)
KEEP_ONE = 1 << 20  # the largest single tensor kept whole
STAT_NAMES = ("mean", "std", "absmax", "zero", "nonfinite", "saturated")


def to_numpy(x):
    """A tensor (on any device, requiring a gradient or not) as a float numpy array; anything
    else as it is."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return x


def summarise(rec, shown: list, extra=()) -> tuple:
    """Statistics of the values ``shown`` and of their gradients, in one batched pass:
    ``(stats, grad_stats, extra, host)``.

    The floating tensors are concatenated into one float64 buffer on their device; its
    pieces are reduced together (a segment sum, ``_foreach_norm`` for the sums of squares and
    the counts of non-zeros, the magnitudes' maxima) and everything, with the
    1-d tensors ``extra``, is read back in one copy to the host. ``host`` maps a row (value
    ``i``, or ``~i`` for its gradient) to its numbers on the host when the whole buffer is
    at most :data:`KEEP_BYTES` (else None). Rows of values that are not floating point
    (indices) are nan. A tensor holding a nan or an inf is summarised again without them,
    which costs a second read only then.
    """
    n = len(rec.tensors)
    stats = np.full((n, len(STAT_NAMES)), np.nan)
    grad_stats = np.full((n, len(STAT_NAMES)), np.nan)
    parts, rows, sat_kind = [], [], []
    for i in shown:
        t = rec.held(i)
        if t.is_floating_point() and t.numel():
            parts.append(t.detach().reshape(-1))
            rows.append(i)
            k = rec.producer[i]
            sat_kind.append(SATURATING.get(rec.ops[k].name, "") if k >= 0 else "")
        g = rec.grads.get(i)
        if g is not None and g.is_floating_point() and g.numel():
            parts.append(g.detach().reshape(-1))
            rows.append(~i)
            sat_kind.append("")
    if not parts:
        return stats, grad_stats, [e.detach().cpu().numpy() for e in extra], None
    device = parts[0].device
    if any(p.device != device for p in parts):
        parts = [p.to(device) for p in parts]
    sizes = [p.numel() for p in parts]
    x = torch.cat(parts).to(torch.float64)
    pieces = x.split(sizes)
    m = len(parts)
    lengths = torch.tensor(sizes, device=device)
    columns = [
        torch.segment_reduce(x, "sum", lengths=lengths),
        torch.stack(torch._foreach_norm(pieces, 2)),
        torch.stack(torch._foreach_norm(pieces, 0)),
        torch.stack(torch._foreach_norm(pieces, math.inf)),
    ]
    saturating = [r for r, kind in enumerate(sat_kind) if kind]
    for r in saturating:
        p = pieces[r]
        hit = p.abs() > SATURATED if sat_kind[r] == "tanh" else (p - 0.5).abs() > SATURATED - 0.5
        columns.append(hit.sum(dtype=torch.float64).reshape(1))
    flat = torch.cat(columns + [e.detach().to(device, torch.float64).reshape(-1) for e in extra])
    keep = x.numel() * 8 <= KEEP_BYTES
    host_all = flat.cpu().numpy()  # the one synchronisation (with the buffer, if kept)
    host_x = x.cpu().numpy() if keep else None
    s1, norm2, nonzero, absmax = host_all[: 4 * m].reshape(4, m)
    sat = np.full(m, np.nan)
    sat[saturating] = host_all[4 * m : 4 * m + len(saturating)]
    at = 4 * m + len(saturating)
    extra_host = []
    for e in extra:
        extra_host.append(host_all[at : at + e.numel()])
        at += e.numel()
    size = np.array(sizes, dtype=np.float64)
    finite_count = size.copy()
    bad = np.flatnonzero(~np.isfinite(norm2))
    if bad.size:  # nan or inf inside: the statistics of the finite entries
        again = []
        for r in bad.tolist():
            p = pieces[r]
            ok = torch.isfinite(p)
            f = torch.where(ok, p, 0.0)
            again.append(
                torch.stack(
                    [
                        ok.sum(dtype=torch.float64),
                        f.sum(),
                        torch.linalg.vector_norm(f),
                        f.abs().max(),
                    ]
                )
            )
        fixed = torch.stack(again).cpu().numpy()
        finite_count[bad], s1[bad], norm2[bad], absmax[bad] = fixed.T
    with np.errstate(all="ignore"):
        mean = s1 / finite_count
        squares = norm2 * norm2
        spread = squares - s1 * mean
        # what is left of a constant tensor's spread is rounding: 0
        spread[spread <= 4 * np.finfo(np.float64).eps * np.sqrt(finite_count) * squares] = 0
        var = spread / np.maximum(finite_count - 1, 1)
        table = np.stack(
            [
                mean,
                np.sqrt(var),
                absmax,
                1 - nonzero / size,
                (size - finite_count) / size,
                sat / size,
            ],
            axis=1,
        )
    host = {} if keep else None
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    for r, i in enumerate(rows):
        if i >= 0:
            stats[i] = table[r]
        else:
            grad_stats[~i] = table[r]
        if keep:
            host[i] = host_x[offsets[r] : offsets[r + 1]]
    return stats, grad_stats, extra_host, host


def keep_full(rec, shown: list, target: int, host) -> dict:
    """Values and gradients kept whole on the host for ``--expect`` and ``run.value``
    (value index → (value, gradient), numpy, float64 for floats): from the summaries'
    buffer when it was read back whole, else the named ones first, each at most
    :data:`KEEP_ONE` bytes, :data:`KEEP_BYTES` in all."""
    full = {}
    if host is not None:
        for i in shown:
            t = rec.held(i)
            value = host.get(i)
            if value is None:  # integers (indices), empty tensors
                if t.numel() * 8 > KEEP_ONE:
                    continue
                value = t.detach().cpu().numpy().reshape(-1)
            grad = host.get(~i)
            full[i] = (value.reshape(t.shape), None if grad is None else grad.reshape(t.shape))
        return full
    spent = 0
    order = sorted(
        shown, key=lambda i: (i != target, not rec.labels.get(i) and rec.producer[i] >= 0)
    )
    for i in order:
        t = rec.held(i)
        size = t.numel() * 8
        if size > KEEP_ONE or spent + 2 * size > KEEP_BYTES:
            continue
        g = rec.grads.get(i)
        full[i] = (
            to_numpy(t) if t.is_floating_point() else t.detach().cpu().numpy(),
            to_numpy(g) if g is not None else None,
        )
        spent += 2 * size
    return full
