"""Optimizers for gradmagic parameters (scalar Values or tensors alike)."""
from __future__ import annotations

__all__ = ["SGD"]


class Optimizer:
    def __init__(self, params):
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimizer got no parameters")

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = p.grad * 0.0 if hasattr(p.grad, "shape") else 0.0


class SGD(Optimizer):
    """Stochastic gradient descent, with optional momentum (PyTorch's form).

    ``v = momentum * v + grad``; ``p -= lr * v``.
    """

    def __init__(self, params, lr: float = 0.01, momentum: float = 0.0):
        super().__init__(params)
        if lr <= 0:
            raise ValueError(f"lr must be positive, got {lr}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.lr, self.momentum = lr, momentum
        self._velocity = [None] * len(self.params)

    def step(self) -> None:
        for i, p in enumerate(self.params):
            g = p.grad
            if self.momentum:
                v = self._velocity[i]
                g = g if v is None else self.momentum * v + g
                self._velocity[i] = g
            p.data = p.data - self.lr * g
