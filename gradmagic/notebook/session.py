"""State the magic keeps between cells (no IPython import, so ``gradmagic.last`` is cheap)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..analysis.trace import Trace

last: Trace | None = None
"""The Trace of the latest ``%%autograd`` run (None before any, or after a run that made none)."""
