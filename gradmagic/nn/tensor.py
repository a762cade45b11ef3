"""Layers on tensors: ``Linear``, ``ReLU``, ``Tanh`` and ``Sequential``.

Each layer works on a whole batch at once (one matrix product per layer, not
one node per weight), with parameters as :class:`gradmagic.core.tensor.Tensor`
leaves, so ``gradmagic.optim`` optimizers update them like scalar ones::

    >>> import numpy as np
    >>> from gradmagic.nn import cross_entropy
    >>> net = Sequential(Linear(2, 16, seed=0), ReLU(), Linear(16, 3, seed=1))
    >>> logits = net(np.zeros((5, 2)))
    >>> logits.shape
    (5, 3)
    >>> cross_entropy(logits, [0, 1, 2, 0, 1]).backward()
"""

from __future__ import annotations

import numpy as np

from .module import Module
from ..core.tensor import Tensor

__all__ = ["Linear", "ReLU", "Tanh", "Sequential"]


class Linear(Module):
    """``x @ W + b`` for a batch ``x`` of shape (N, nin): W is (nin, nout), b is (nout,).

    Weights start uniform in ±1/√nin (PyTorch's default for ``nn.Linear``),
    drawn from ``numpy.random.default_rng(seed)``; biases likewise. The
    parameters are labelled ``{label}.W`` and ``{label}.b``; without a label,
    ``Sequential`` names them by position (``0.W``, ``2.b``).
    """

    def __init__(
        self,
        nin: int,
        nout: int,
        bias: bool = True,
        seed: int | None = None,
        label: str | None = None,
    ):
        if nin < 1 or nout < 1:
            raise ValueError(f"Linear needs positive sizes, got nin={nin}, nout={nout}")
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(nin)
        self.W = Tensor(rng.uniform(-bound, bound, (nin, nout)))
        self.b = Tensor(rng.uniform(-bound, bound, nout)) if bias else None
        self.named = label is not None
        self.relabel(label or "Linear")

    def relabel(self, label: str) -> None:
        """Name the parameters ``{label}.W`` and ``{label}.b``."""
        self.W.label = f"{label}.W"
        if self.b is not None:
            self.b.label = f"{label}.b"

    def __call__(self, x):
        out = x @ self.W
        return out if self.b is None else out + self.b

    def parameters(self):
        return [self.W] if self.b is None else [self.W, self.b]

    def __repr__(self):
        nin, nout = self.W.shape
        return f"Linear({nin}, {nout}, bias={self.b is not None})"


class ReLU(Module):
    """``max(x, 0)`` elementwise."""

    def __call__(self, x):
        return x.relu()

    def __repr__(self):
        return "ReLU()"


class Tanh(Module):
    """``tanh(x)`` elementwise."""

    def __call__(self, x):
        return x.tanh()

    def __repr__(self):
        return "Tanh()"


class Sequential(Module):
    """Layers applied one after another: ``Sequential(Linear(2, 8), ReLU(), Linear(8, 1))``."""

    def __init__(self, *layers):
        for layer in layers:
            if not callable(layer):
                raise TypeError(f"Sequential takes layers (callables), got {layer!r}")
        self.layers = list(layers)
        for i, layer in enumerate(self.layers):
            if isinstance(layer, Linear) and not layer.named:
                layer.relabel(str(i))

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def parameters(self):
        return [p for layer in self.layers if isinstance(layer, Module) for p in layer.parameters()]

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self):
        return len(self.layers)

    def __repr__(self):
        return f"Sequential({', '.join(map(repr, self.layers))})"
