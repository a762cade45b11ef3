"""A small neural-network library on top of :class:`gradmagic.Value`.

>>> from gradmagic.nn import MLP
>>> net = MLP(2, [16, 16, 1], seed=0)
>>> score = net([0.5, -1.0])
>>> score.backward()
"""
from __future__ import annotations

import random

from .engine import Value

__all__ = ["Module", "Neuron", "Layer", "MLP", "mse_loss", "hinge_loss", "accuracy"]

ACTIVATIONS = ("tanh", "relu", "linear")


class Module:
    """Something with parameters."""

    def parameters(self) -> list:
        return []

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = p.grad * 0.0 if hasattr(p.grad, "shape") else 0.0


class Neuron(Module):
    """``activation(w · x + b)`` with ``nin`` weights."""

    def __init__(self, nin: int, activation: str = "tanh", rng: random.Random | None = None,
                 label: str = "n"):
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        rng = rng or random.Random()
        # scaled so that activations neither vanish nor blow up through layers
        scale = (1.0 / nin) ** 0.5 if activation != "relu" else (2.0 / nin) ** 0.5
        self.w = [Value(rng.uniform(-1, 1) * scale * 3 ** 0.5, label=f"{label}.w{i}")
                  for i in range(nin)]
        self.b = Value(0.0, label=f"{label}.b")
        self.activation = activation

    def __call__(self, x):
        act = self.b
        for wi, xi in zip(self.w, x):
            act = act + wi * xi
        if self.activation == "tanh":
            return act.tanh()
        if self.activation == "relu":
            return act.relu()
        return act

    def parameters(self):
        return self.w + [self.b]

    def __repr__(self):
        return f"Neuron({len(self.w)}, activation={self.activation!r})"


class Layer(Module):
    """``nout`` neurons reading the same ``nin`` inputs."""

    def __init__(self, nin: int, nout: int, activation: str = "tanh",
                 rng: random.Random | None = None, label: str = "L"):
        rng = rng or random.Random()
        self.neurons = [Neuron(nin, activation, rng, label=f"{label}.n{j}") for j in range(nout)]

    def __call__(self, x):
        out = [n(x) for n in self.neurons]
        return out[0] if len(out) == 1 else out

    def parameters(self):
        return [p for n in self.neurons for p in n.parameters()]

    def __repr__(self):
        return f"Layer({self.neurons!r})"


class MLP(Module):
    """A multi-layer perceptron: ``MLP(2, [16, 16, 1])``.

    Hidden layers use ``activation``; the last layer is linear. ``seed`` makes
    the initialisation reproducible.
    """

    def __init__(self, nin: int, nouts: list, activation: str = "relu", seed: int | None = None):
        rng = random.Random(seed)
        sizes = [nin] + list(nouts)
        self.layers = [
            Layer(sizes[i], sizes[i + 1],
                  activation if i < len(nouts) - 1 else "linear", rng, label=f"L{i}")
            for i in range(len(nouts))
        ]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    def __repr__(self):
        return f"MLP({self.layers!r})"


def _mean(terms):
    terms = list(terms)
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total * (1.0 / len(terms))


def mse_loss(predictions, targets):
    """Mean of ``(p - t)**2``."""
    return _mean((p - t) ** 2 for p, t in zip(predictions, targets))


def hinge_loss(scores, labels):
    """Mean of ``relu(1 - y * s)`` for labels ``y`` in {-1, +1} (an SVM's loss)."""
    return _mean((1 - y * s).relu() for s, y in zip(scores, labels))


def accuracy(scores, labels) -> float:
    """Share of scores whose sign matches the {-1, +1} label."""
    scores = list(scores)
    hits = sum((float(s) > 0) == (y > 0) for s, y in zip(scores, labels))
    return hits / len(scores)
