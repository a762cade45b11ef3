"""The table of tensor operations: the sibling of :mod:`gradmagic.core.ops` for arrays.

Every operation a :class:`gradmagic.core.tensor.Tensor` knows is one
:class:`TensorOp` entry in :data:`TENSOR_OPS`:

* ``f``    -- the numpy forward: ``f(x[, y], **params)``; ``params`` are the
  op's non-differentiable arguments (an axis, a shape, an index);
* ``df``   -- one vector-Jacobian rule per input: ``d(g, out, x[, y], **params)``
  is the gradient reaching that input when ``g`` reaches the output. It may
  keep broadcast dimensions (:meth:`TensorOp.vjp` sums them away) and may be
  ``g`` itself or a view of it, but never ``x``, ``y`` or ``out``;
* ``np``   -- the same forward on inputs that carry one extra leading
  "perturbation" axis (shape ``(K, *shape)``; a scalar parent ``(K,)``), used to
  replay a recorded graph for many perturbed inputs at once;
* ``kink`` -- optional ``kink(out, x[, y], **params)``: True where the op is not
  differentiable and ``df`` used a subgradient (relu at 0, ties in a max);
* ``rule`` -- the derivative as a formula, for people.

Adding a tensor operation means adding one entry to the module of its family
(:mod:`.tensor_elementwise`, :mod:`.tensor_reductions`, :mod:`.tensor_shapes`,
:mod:`.tensor_linalg`); its ``method`` and
``numpy`` names make ``Tensor``'s method and numpy dispatch. Forwards do not
warn for numeric reasons: log of a negative number is ``nan``, division by zero
``±inf``, as for scalars.
"""

from __future__ import annotations

from . import tensor_elementwise, tensor_linalg, tensor_reductions, tensor_shapes
from .tensor_op import TensorOp

__all__ = ["TensorOp", "TENSOR_OPS"]

TENSOR_OPS: dict[str, TensorOp] = {
    op.name: op
    for family in (tensor_elementwise, tensor_reductions, tensor_shapes, tensor_linalg)
    for op in family.OPS
}
"""Operation name → :class:`TensorOp`."""
