"""The settings of one run: what the magic's options set, read by the analysis and the views."""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

__all__ = ["Options"]


@dataclass
class Options:
    """One ``%%autograd`` line's settings (its defaults are the magic's).

    ``expect`` is a parsed mapping (name → number), never code. ``Options.of``
    accepts an Options, a mapping of some of these fields, or None.
    """

    target: str | None = None  # -t NAME
    no_check: bool = False  # --no-check
    eps: float = 1e-6  # --eps: step of the numerical check
    atol: float = 1e-5  # --atol
    rtol: float = 1e-3  # --rtol
    expect: dict | None = None  # --expect, parsed
    rankdir: str | None = None  # --rankdir (None: whichever fits the output's width)
    max_nodes: int = 150  # --max-nodes
    torch: bool = False  # --torch
    quiet: bool = False  # -q

    @classmethod
    def of(cls, value=None) -> "Options":
        if value is None:
            return cls()
        if isinstance(value, cls):
            return replace(value)
        names = {f.name for f in fields(cls)}
        unknown = set(value) - names
        if unknown:
            raise TypeError(f"unknown options: {', '.join(sorted(unknown))}")
        return cls(**value)
