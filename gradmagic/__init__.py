"""gradmagic: a gradient microscope for Jupyter."""
from .engine import Value, no_grad, is_grad_enabled

__version__ = "0.1.0"
__all__ = ["Value", "no_grad", "is_grad_enabled"]

last = None
"""The Trace of the latest ``%%autograd`` run (None before any, or after a run that made none)."""


def load_ipython_extension(ipython):
    """``%load_ext gradmagic``: register the ``%%autograd`` magic."""
    from .magic import load
    load(ipython)


def unload_ipython_extension(ipython):
    """``%unload_ext gradmagic``: remove what loading registered."""
    from .magic import unload
    unload(ipython)
