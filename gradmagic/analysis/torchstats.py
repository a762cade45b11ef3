"""The statistics of a recorded PyTorch run's values and gradients, in one batched pass.

:func:`summarise` reduces every shown tensor (and its gradient, and each parameter's
in-place update) on its device and reads the numbers back with one synchronisation;
:func:`keep_full` keeps the small values and gradients whole on the host (for ``--expect``
and the full tensor on demand).

Why its own: a Trace's numbers are read one by one on the host; a PyTorch run may hold
billions of them on a GPU, so only these summaries (and the small tensors) come back.
This module imports torch; nothing imports it unless a cell uses torch.
"""

from __future__ import annotations

from collections.abc import Mapping
import bisect
from itertools import accumulate

import numpy as np
import torch

from .torchhealth import _NUMPY_FLOATS, SATURATED, SATURATING

__all__ = [
    "summarise",
    "keep_full",
    "Kept",
    "to_numpy",
    "tensor_numbers",
    "KEEP_BYTES",
    "KEEP_ONE",
    "STAT_NAMES",
]

KEEP_BYTES = 16 << 20  # bytes of full values and gradients a run keeps (for --expect)
KEEP_ONE = 1 << 20  # the largest single tensor kept whole
BIG = 1 << 14  # numbers in a CPU tensor reduced where it lies once the buffer is full
CHUNK = 1 << 16  # numbers squared at a time (in a scratch array the cache holds)
STAT_NAMES = ("mean", "std", "absmax", "zero", "nonfinite", "saturated")


def to_numpy(x):
    """A tensor (on any device, requiring a gradient or not) as a float numpy array; anything
    else as it is."""
    if isinstance(x, torch.Tensor):
        return tensor_numbers(x)
    return x


def tensor_numbers(t) -> np.ndarray:
    """The numbers tensor ``t`` holds, as a float64 numpy array, read by torch's own methods:
    nothing of a subclass's (``__torch_function__``, ``detach``, ``numpy``, ``__array__``,
    ``__float__``) runs, so a subclass cannot make them other than they are."""
    with torch._C.DisableTorchFunctionSubclass():
        t = torch.Tensor.detach(t)
        if type(t) is not torch.Tensor:
            t = torch.Tensor.as_subclass(t, torch.Tensor)
        return torch.Tensor.numpy(torch.Tensor.to(t, "cpu", torch.float64))


def summarise(rec, shown: list, extra=()) -> tuple:
    """Statistics of the values ``shown``, of their gradients and of the parameters' in-place
    updates, in one batched pass: ``(stats, grad_stats, extra, host, updates)``.

    The floating tensors are concatenated into one buffer on their device; its pieces are
    reduced together (segment sums of the numbers and their squares in float64, counts of
    the non-zeros, segment maxima and minima) and everything, with the
    1-d tensors ``extra``, is read back in one copy to the host. ``host`` maps a row (value
    ``i``, or ``~i`` for its gradient) to its numbers on the host (1-d, float64) when the whole buffer is at most :data:`KEEP_BYTES` (else None).
    ``updates`` maps a parameter's value index to (the std of its first update, the std of
    its value before). Rows of values that are not floating point (indices) are nan. A
    tensor holding a nan or an inf is summarised again without them, which costs a second
    read only then.
    """
    n = len(rec.tensors)
    stats, grad_stats = np.full((2, n, len(STAT_NAMES)), np.nan)
    parts, rows, sat_kind = _pieces(rec, shown)
    if not parts:
        return stats, grad_stats, [np.asarray(_plain(e)) for e in extra], None, {}
    with np.errstate(all="ignore"):  # (once: a nan's statistics are nan, by design)
        table, extra_host, host = _reduce(parts, sat_kind, extra)
    by_row = {}
    for r, key in enumerate(rows):
        if type(key) is tuple:
            by_row[key] = r
        elif key >= 0:
            stats[key] = table[r]
        else:
            grad_stats[~key] = table[r]
    updates = {i: table[[by_row[("update", i)], by_row[("old", i)]], 1] for i in rec.updates}
    if host is not None:
        host = {
            key: value
            for key, value in zip(rows, host)
            if type(key) is not tuple and value is not None
        }
    return stats, grad_stats, extra_host, host, updates


def _pieces(rec, shown) -> tuple:
    """The tensors to summarise (as they are: flattened with the others in one call), their
    rows (``i``, ``~i``, ``("update", i)``, ``("old", i)``) and which saturation each value
    is measured for."""
    parts, rows, sat_kind = [], [], []
    held, grads, producer, ops = rec.held, rec.grads, rec.producer, rec.ops
    for i in shown:
        t = held(i)
        if t.is_floating_point() and t.numel():
            k = producer[i]
            parts.append(t)
            rows.append(i)
            sat_kind.append(SATURATING.get(ops[k].name, "") if k >= 0 else "")
        g = grads.get(i)
        if g is not None and g.is_floating_point() and g.numel():
            parts.append(g)
            rows.append(~i)
            sat_kind.append("")
    for i, (p, old, update) in rec.updates.items():
        with torch.no_grad():
            parts.append(update if update is not None else p.detach() - old)
        parts.append(old)
        rows.extend((("update", i), ("old", i)))
        sat_kind.extend(("", ""))
    return parts, rows, sat_kind


def _reduce(parts, sat_kind, extra) -> tuple:
    """(a row of statistics per part, the ``extra`` tensors on the host, each part's numbers
    on the host or None): the device's work and the one read back.

    On the CPU the buffer (float64, kept as the values' host copy) holds at most
    :data:`KEEP_BYTES`: a part of :data:`BIG` numbers or more that would not fit is reduced
    where it lies (:func:`_alone`)."""
    device = parts[0].device
    if any(p.device != device for p in parts):
        parts = [p.detach().to(device) for p in parts]
    m = len(parts)
    sizes = [p.numel() for p in parts]
    big = []
    if device.type == "cpu":
        room = KEEP_BYTES // 8 - sum(n for n in sizes if n < BIG)
        for r in range(m):
            if sizes[r] >= BIG:
                room -= sizes[r]
                if room < 0:
                    big.append(r)
    small = sorted(set(range(m)) - set(big))
    columns = np.full((5, m), np.nan)  # per part: mean, variance, max |x|, non-zeros, saturated
    host, extra_host = None, None
    if small:
        extra_host, x, offsets = _reduce_small(parts, small, sat_kind, extra, columns)
        if x is not None:
            host = [None] * m
            for q, r in enumerate(small):
                host[r] = x[offsets[q] : offsets[q + 1]]
    if big:
        columns[:, big] = _alone([parts[r] for r in big], [sat_kind[r] for r in big]).T
    if extra_host is None:
        extra_host = [np.asarray(_plain(e), dtype=np.float64).reshape(-1) for e in extra]
    return _table(columns, np.array(sizes, dtype=np.float64), parts), extra_host, host


def _reduce_small(parts, small, sat_kind, extra, columns) -> tuple:
    """Reduce the parts ``small`` in one buffer, filling their ``columns``: (the ``extra``
    tensors on the host, the buffer on the host or None, the parts' offsets in it)."""
    sub = [parts[r] for r in small]
    sizes = [p.numel() for p in sub]
    offsets = list(accumulate(sizes, initial=0))
    kinds = [sat_kind[r] for r in small]
    saturating = [q for q, kind in enumerate(kinds) if kind]
    reduce = _on_host if sub[0].device.type == "cpu" else _on_device
    sums, extra_host, x = reduce(sub, sizes, offsets, saturating, kinds, extra)
    s1, norm2, nonzero, absmax = sums[:4]
    columns[0, small], columns[1, small] = _moments(s1, norm2, np.array(sizes, float))
    columns[2, small], columns[3, small] = absmax, nonzero
    columns[4, [small[q] for q in saturating]] = sums[4][: len(saturating)]
    return extra_host, x, offsets


def _table(columns, size, parts) -> np.ndarray:
    """The statistics (see :data:`STAT_NAMES`) from the reduced ``columns``; a part holding
    a nan or an inf is summarised again over its finite entries."""
    mean, var, absmax, nonzero, sat = columns
    finite_count = size.copy()
    bad = np.flatnonzero(~np.isfinite(var))
    if bad.size:  # nan or inf inside: the statistics of the finite entries
        finite_count[bad], s1, norm2, absmax[bad] = _finite_only(parts, bad).T
        mean[bad], var[bad] = _moments(s1, norm2, finite_count[bad])
    return np.stack(
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


def _moments(s1, norm2, count) -> tuple:
    """(mean, variance) from sums and square roots of the sums of squares (float64; under
    the caller's ``np.errstate``: an empty or all-nan piece's are nan)."""
    mean = s1 / count
    squares = norm2 * norm2
    spread = squares - s1 * mean
    # what is left of a constant tensor's spread is rounding: 0
    spread[spread <= 4 * np.finfo(np.float64).eps * np.sqrt(count) * squares] = 0
    return mean, spread / np.maximum(count - 1, 1)


def _alone(parts, sat_kind) -> np.ndarray:
    """(mean, variance, max |x|, non-zeros, saturated) of each big CPU tensor, reduced where
    it lies: the variance about the mean (no cancellation), the counts by numpy on the
    tensor's own memory (torch's comparisons into booleans cost more here)."""
    out = np.full((len(parts), 5), np.nan)
    with torch.no_grad():
        for r, (p, kind) in enumerate(zip(parts, sat_kind)):
            p = p.detach()
            if p.dtype not in (torch.float32, torch.float64):
                p = p.float()
            n = p.numel()
            mean = p.sum(dtype=torch.float64) / n
            d = p - mean.to(p.dtype)
            centred = d.sum()
            lo, hi = torch.aminmax(p)
            # (torch's sum adds in a cascade: float32 squares keep about 7 digits)
            var = ((d * d).sum() - centred * centred / n) / max(n - 1, 1)
            a = p.numpy(force=True)  # (a view of its memory; a copy only for a neg view)
            out[r, :4] = (
                float(mean),
                float(var),
                max(float(hi), -float(lo)),
                np.count_nonzero(a != 0),
            )
            if kind:
                far = np.abs(a) if kind == "tanh" else np.abs(a - 0.5) + 0.5
                out[r, 4] = np.count_nonzero(far > SATURATED)
    return out


def _flat(parts, dtype=None):
    """The tensors' numbers, one after the other, in one 1-d tensor (``dtype``: converted
    in the same copy)."""
    with torch.no_grad():
        flat = torch.cat([p.flatten() for p in parts])
        return flat if dtype is None or flat.dtype == dtype else flat.to(dtype)


def _on_host(parts, sizes, offsets, saturating, sat_kind, extra) -> tuple:
    """The reductions of tensors in the CPU's memory: one float64 buffer filled in one call,
    then numpy's ``reduceat`` over it, where torch would pay a dispatch per piece."""
    x = np.empty(offsets[-1])
    with torch.no_grad():
        torch.cat([p.flatten() for p in parts], out=torch.from_numpy(x))
    starts = np.array(offsets[:-1], dtype=np.intp)
    sums = [
        np.add.reduceat(x, starts),
        *_squares_nonzeros(x, offsets),
        # max |x| without a pass making |x|
        np.maximum(np.maximum.reduceat(x, starts), -np.minimum.reduceat(x, starts)),
    ]
    hits = []
    for r in saturating:
        piece = x[offsets[r] : offsets[r + 1]]
        far = np.abs(piece) if sat_kind[r] == "tanh" else np.abs(piece - 0.5) + 0.5
        hits.append(np.count_nonzero(far > SATURATED))
    sums.append(np.array(hits, dtype=np.float64))
    extra_host = [np.asarray(_plain(e), dtype=np.float64).reshape(-1) for e in extra]
    return sums, extra_host, (x if x.nbytes <= KEEP_BYTES else None)


def _squares_nonzeros(x, offsets) -> tuple:
    """(the square root of each piece's sum of squares, its count of non-zeros), a chunk
    of :data:`CHUNK` numbers at a time in one scratch array (a fresh array the size of
    ``x`` costs more in page faults than the arithmetic)."""
    m = len(offsets) - 1
    squares, nonzero = np.zeros(m), np.zeros(m)
    scratch = np.empty(min(CHUNK, x.size))
    flags = np.empty(scratch.size, dtype=bool)
    r = 0
    while r < m:
        lo = offsets[r]
        end = bisect.bisect_right(offsets, lo + CHUNK, r + 1) - 1  # (the pieces that fit)
        if end == r:  # a piece bigger than a chunk: its chunks one by one
            for a in range(lo, offsets[r + 1], CHUNK):
                part = x[a : min(a + CHUNK, offsets[r + 1])]
                squares[r] += np.multiply(part, part, out=scratch[: part.size]).sum()
                nonzero[r] += np.count_nonzero(part)
            r += 1
            continue
        n, at = offsets[end] - lo, np.array(offsets[r:end], dtype=np.intp) - lo
        part = x[lo : offsets[end]]
        squares[r:end] = np.add.reduceat(np.multiply(part, part, out=scratch[:n]), at)
        nonzero[r:end] = np.add.reduceat(np.not_equal(part, 0, out=flags[:n]), at, dtype=np.intp)
        r = end
    return np.sqrt(squares), nonzero


def _plain(e):
    """One of the ``extra`` numbers: a tensor as numpy, a function's answer, numpy as it is."""
    if isinstance(e, torch.Tensor):
        return _numpy(e.detach())
    return e() if callable(e) else e


def _numpy(t) -> np.ndarray:
    """A CPU tensor's numbers without a copy (bfloat16, which numpy lacks: as float64)."""
    return (t if t.dtype in _NUMPY_FLOATS else t.to(torch.float64)).numpy()


def _on_device(parts, sizes, offsets, saturating, sat_kind, extra) -> tuple:
    """The reductions on the tensors' device (a GPU): segment reductions over one buffer,
    read back with one synchronisation."""
    device = parts[0].device
    x = _flat(parts, torch.float64)
    pieces = x.split(sizes)
    lengths = torch.tensor(sizes, device=device)
    columns = [
        torch.segment_reduce(x, "sum", lengths=lengths),
        torch.segment_reduce(x * x, "sum", lengths=lengths).sqrt(),
        torch.segment_reduce((x != 0).to(x.dtype), "sum", lengths=lengths),
        torch.segment_reduce(x.abs(), "max", lengths=lengths),
    ]
    for r in saturating:
        p = pieces[r]
        far = p.abs() if sat_kind[r] == "tanh" else (p - 0.5).abs() + 0.5
        columns.append((far > SATURATED).sum(dtype=torch.float64).reshape(1))
    m = len(sizes)
    extra = [torch.as_tensor(e() if callable(e) else e, device=device) for e in extra]
    flat = torch.cat(columns + [e.detach().to(device, torch.float64).reshape(-1) for e in extra])
    keep = x.numel() * 8 <= KEEP_BYTES
    host_all = flat.cpu().numpy()  # the one synchronisation (with the buffer, if kept)
    sums = list(host_all[: 4 * m].reshape(4, m)) + [host_all[4 * m : 4 * m + len(saturating)]]
    at = 4 * m + len(saturating)
    extra_host = []
    for e in extra:
        extra_host.append(host_all[at : at + e.numel()])
        at += e.numel()
    return sums, extra_host, (x.cpu().numpy() if keep else None)


def _finite_only(parts, bad) -> np.ndarray:
    """(count, sum, norm, max |x|) of the finite entries of each part in ``bad``."""
    again = []
    for r in bad.tolist():
        p = parts[r].detach()
        ok = torch.isfinite(p)
        f = torch.where(ok, p, 0.0)
        again.append(
            torch.stack(
                [
                    ok.sum(dtype=torch.float64),
                    f.sum(dtype=torch.float64),
                    torch.linalg.vector_norm(f, dtype=torch.float64),
                    f.abs().max().to(torch.float64),
                ]
            )
        )
    return torch.stack(again).cpu().numpy()


def keep_full(rec, shown: list, target: int, host) -> Mapping:
    """Values and gradients kept whole for ``--expect`` and ``run.value`` (value index →
    (value, gradient), numpy, float64 for floats, made when first asked for). Those in the
    summaries' host buffer cost nothing more; the others are copied as they are now, the
    target first, then the named values and the leaves, each at most :data:`KEEP_ONE`
    bytes, :data:`KEEP_BYTES` in all; a big unnamed value (:data:`BIG` numbers or more) is
    not kept."""
    host = host or {}
    shapes, copies, spent = {}, {}, 0
    labels, producer = rec.labels, rec.producer
    order = sorted(shown, key=lambda i: (i != target, not labels.get(i) and producer[i] >= 0))
    for i in order:
        t = rec.held(i)
        if i in host:
            shapes[i] = t.shape
            continue
        named = i == target or labels.get(i) or producer[i] < 0
        size = t.numel() * 8
        if size > KEEP_ONE or spent + 2 * size > KEEP_BYTES or (t.numel() >= BIG and not named):
            continue
        g = rec.grads.get(i) if t.is_floating_point() else None
        with torch.no_grad():
            copies[i] = (t.detach().clone(), None if g is None else g.detach().clone())
        spent += 2 * size
    return Kept(host, shapes, copies)


class Kept(Mapping):
    """value index → (value, gradient) as numpy arrays, made when first asked for: from the
    summaries' host buffer (a view of it, shaped) or from a copy of the tensors."""

    def __init__(self, host: dict, shapes: dict, copies: dict):
        self._host, self._shapes, self._copies = host, shapes, copies
        self._made: dict = {}

    def __getitem__(self, i):
        made = self._made.get(i)
        if made is not None:
            return made
        copy = self._copies.get(i)
        if copy is not None:
            t, g = copy
            value = to_numpy(t) if t.is_floating_point() else t.cpu().numpy()
            made = (value, None if g is None else to_numpy(g))
        else:
            shape = self._shapes[i]  # (KeyError: not kept)
            grad = self._host.get(~i)
            made = (
                _float64(self._host[i]).reshape(shape),
                None if grad is None else _float64(grad).reshape(shape),
            )
        self._made[i] = made
        return made

    def __contains__(self, i):
        return i in self._shapes or i in self._copies

    def __iter__(self):
        yield from self._copies
        yield from self._shapes

    def __len__(self):
        return len(self._shapes) + len(self._copies)


def _float64(x: np.ndarray) -> np.ndarray:
    return x if x.dtype == np.float64 else x.astype(np.float64)
