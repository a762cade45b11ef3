"""Optimizers for gradmagic parameters (scalar Values or tensors alike).

A parameter is anything with ``.data`` and ``.grad`` of the same kind: floats
for a :class:`gradmagic.Value`, numpy arrays for an array-valued tensor. The
updates use only arithmetic that both support, and assign a new ``.data``
rather than changing it in place.

>>> from gradmagic.nn import MLP
>>> net = MLP(2, [4, 1], seed=0)
>>> opt = Adam(net.parameters(), lr=0.01)
>>> loss = (net([1.0, -1.0]) - 0.5) ** 2
>>> loss.backward()
>>> opt.step()
"""

from __future__ import annotations

from .nn.module import zero_grads

__all__ = ["Optimizer", "SGD", "Adam"]


class Optimizer:
    """Holds the parameters; subclasses define ``step()``."""

    def __init__(self, params, lr: float):
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimizer got no parameters")
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr}")
        self.lr = lr

    def zero_grad(self) -> None:
        """Set every parameter's gradient to zero (not needed before ``backward()``,
        which starts from zero; useful when gradients are summed by hand)."""
        zero_grads(self.params)

    def step(self) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent, with optional momentum (PyTorch's form).

    ``v = momentum * v + grad``; ``p -= lr * v``.
    """

    def __init__(self, params, lr: float = 0.01, momentum: float = 0.0):
        super().__init__(params, lr)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.momentum = momentum
        self._velocity = [None] * len(self.params)

    def step(self) -> None:
        for i, p in enumerate(self.params):
            g = p.grad
            if self.momentum:
                v = self._velocity[i]
                g = g if v is None else self.momentum * v + g
                self._velocity[i] = g
            p.data = p.data - self.lr * g


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015), as ``torch.optim.Adam`` computes it.

    With ``t`` the step count, ``m = b1·m + (1−b1)·g`` and
    ``v = b2·v + (1−b2)·g²`` are running averages of the gradient and its
    square; the step is ``lr · m̂ / (√v̂ + eps)`` with ``m̂ = m / (1 − b1ᵗ)``,
    ``v̂ = v / (1 − b2ᵗ)`` (correcting the averages' start at zero).
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, lr)
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {betas}")
        if not eps >= 0:
            raise ValueError(f"eps must be >= 0, got {eps}")
        self.betas, self.eps = tuple(betas), eps
        self.t = 0
        n = len(self.params)
        self._m, self._v = [0.0] * n, [0.0] * n

    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        fix1, fix2 = 1.0 - b1**self.t, 1.0 - b2**self.t
        for i, p in enumerate(self.params):
            g = p.grad
            m = self._m[i] = b1 * self._m[i] + (1.0 - b1) * g
            v = self._v[i] = b2 * self._v[i] + (1.0 - b2) * (g * g)
            p.data = p.data - self.lr * (m / fix1) / ((v / fix2) ** 0.5 + self.eps)
