"""gradmagic: a gradient microscope for Jupyter.

``%load_ext gradmagic`` registers the ``%%autograd`` cell magic. The engine is
usable on its own: :class:`Value` (scalars), :class:`Tensor` (numpy arrays),
:mod:`gradmagic.nn` and :mod:`gradmagic.optim`. :func:`gradmagic.autograd` gives the
magic's run without the magic (scripts, tests, marimo).
"""

from .core.engine import Value, apply, is_grad_enabled, no_grad
from .grade import grade
from .core.tensor import Tensor, tensor
from .core import array as _array  # noqa: F401 - numpy functions' rules, for Tensors too
from .analysis.trace import Trace
from . import views  # noqa: F401 - sets str(report); views never import this module

__version__ = "0.1.0"
__all__ = [
    "Value",
    "Tensor",
    "tensor",
    "Trace",
    "apply",
    "no_grad",
    "is_grad_enabled",
    "grade",
    "autograd",
    "last",
]


def __getattr__(name):
    # ``gradmagic.last``: the Trace of the latest ``%%autograd`` run (None before any, or
    # after a run that made none); the magic keeps it in gradmagic.notebook.session.
    if name == "last":
        from .notebook import session

        return session.last
    if name == "autograd":  # imported on first use: it brings IPython in
        from .notebook.api import autograd

        return autograd
    raise AttributeError(f"module 'gradmagic' has no attribute {name!r}")


def load_ipython_extension(ipython):
    """``%load_ext gradmagic``: register the ``%%autograd`` magic."""
    from .notebook.magic import load

    load(ipython)


def unload_ipython_extension(ipython):
    """``%unload_ext gradmagic``: remove what loading registered."""
    from .notebook.magic import unload

    unload(ipython)
