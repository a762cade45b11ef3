"""State the magic keeps between cells (no IPython import, so ``gradmagic.last`` is cheap)."""
from __future__ import annotations

last = None
"""The Trace of the latest ``%%autograd`` run (None before any, or after a run that made none)."""
