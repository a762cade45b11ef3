"""The engine: the op tables, scalar :class:`Value` nodes, :class:`Tensor` nodes and engine state.

Imports numpy only; nothing here knows about traces, views or notebooks.
"""

# these fill in core.array: the rules of numpy functions on array nodes, the arrays' methods
# (core.tensor, imported on the way, puts Tensor's numpy surface on the class)
from . import array_methods, numpy_linalg, numpy_reductions, numpy_shapes  # noqa: F401

# this fills in core.tensor: numpy's functions on a Tensor
from . import tensor_functions  # noqa: F401
