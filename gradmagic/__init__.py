"""gradmagic: a gradient microscope for Jupyter."""
from .engine import Value, no_grad, is_grad_enabled

__version__ = "0.1.0"
__all__ = ["Value", "no_grad", "is_grad_enabled"]
