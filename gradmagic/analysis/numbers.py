"""Numbers and arrays as the analysis and the views write them: finiteness and short forms."""

from __future__ import annotations

import math

import numpy as np

from ..core.fpstate import quiet

__all__ = ["all_finite", "fmt", "dims", "short", "SMALL"]

_quiet_sum = quiet(np.add.reduce)  # (inf - inf and overflows are not warned about)


def all_finite(x) -> bool:
    """True when ``x`` (a number or an array) has no nan or infinity.

    An int too big for a float, or something that is not a number, is not finite.
    """
    try:
        if isinstance(x, (float, int)):
            return math.isfinite(x)
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            if x.ndim == 0:
                return math.isfinite(x.item())  # (a loop's 0-d nodes: np.all costs 20x more)
            # a finite sum has no nan or infinity in it (one pass, nothing allocated); an
            # infinite one may be an overflow of finite numbers: then each is tested
            return math.isfinite(_quiet_sum(x, None)) or bool(np.isfinite(x).all())
        return bool(np.all(np.isfinite(x)))
    except (TypeError, OverflowError):
        return False


def short(x) -> str:
    if isinstance(x, np.ndarray):
        return f"{x.item():.4g}" if x.ndim == 0 else "×".join(map(str, x.shape)) + " array"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


SMALL = 6  # arrays with at most this many elements are shown in full


def fmt(x, digits: int = 4, *, shape: bool = True) -> str:
    """A short, one-line form of a node's number (or array) for graphs and tables.

    Numbers keep ``digits`` significant digits, and so does a 0-d array. An
    array of at most ``SMALL`` elements is shown in full on one line
    (``[[0.5], [-0.3]]``); a larger one as its shape, norm and extremes
    (``50×1 ‖·‖=3.2 min -1.1 max 2``). ``shape=False`` leaves the shape out
    (the graph's records show it beside the label).
    """
    if x is None:
        return ""
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            return fmt(x.item(), digits)
        if x.size <= SMALL:
            return _nested(x.tolist(), digits)
        with np.errstate(all="ignore"):
            flat = np.asarray(x, dtype=float).reshape(-1)
            summary = (
                f"‖·‖={fmt(float(np.sqrt(np.sum(flat * flat))), digits)} "
                f"min {fmt(float(flat.min()), digits)} max {fmt(float(flat.max()), digits)}"
            )
        return f"{dims(x.shape)} {summary}" if shape else summary
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, (float, np.floating)):
        return f"{x:.{digits}g}"
    return str(x)


def dims(shape) -> str:
    """A shape as people write it: ``50×1``; ``(10,)`` for a vector, ``()`` for a 0-d array."""
    return "×".join(str(n) for n in shape) if len(shape) > 1 else str(tuple(shape))


def _nested(items, digits: int) -> str:
    """A (nested) list of numbers on one line."""
    if isinstance(items, list):
        return "[" + ", ".join(_nested(item, digits) for item in items) + "]"
    return fmt(items, digits)
