"""The base of every layer: something with parameters."""

from __future__ import annotations

__all__ = ["Module", "zero_grads"]


class Module:
    """Something with parameters."""

    def parameters(self) -> list:
        return []

    def zero_grad(self) -> None:
        zero_grads(self.parameters())


def zero_grads(params) -> None:
    """Set each parameter's gradient to zero (zeros of its shape for an array)."""
    for p in params:
        p.grad = p.grad * 0.0 if hasattr(p.grad, "shape") else 0.0
