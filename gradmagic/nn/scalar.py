"""A small neural-network library on top of :class:`gradmagic.Value`.

>>> from gradmagic.nn import MLP
>>> net = MLP(2, [16, 16, 1], seed=0)
>>> score = net([0.5, -1.0])
>>> score.backward()
"""

from __future__ import annotations

import random

from ..core.engine import Value
from .module import Module

__all__ = ["Neuron", "Layer", "MLP", "mse_loss", "hinge_loss", "accuracy"]

ACTIVATIONS = ("tanh", "relu", "linear")


class Neuron(Module):
    """``activation(w · x + b)`` with ``nin`` weights."""

    def __init__(
        self, nin: int, activation: str = "tanh", rng: random.Random | None = None, label: str = "n"
    ):
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        _check_size("nin", nin)
        rng = rng or random.Random()
        # scaled so that activations neither vanish nor blow up through layers
        scale = (1.0 / nin) ** 0.5 if activation != "relu" else (2.0 / nin) ** 0.5
        self.w = [
            Value(rng.uniform(-1, 1) * scale * 3**0.5, label=f"{label}.w{i}") for i in range(nin)
        ]
        self.b = Value(0.0, label=f"{label}.b")
        self.activation = activation

    def __call__(self, x):
        if len(x) != len(self.w):
            raise ValueError(f"this neuron takes {len(self.w)} inputs, got {len(x)}")
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

    def __init__(
        self,
        nin: int,
        nout: int,
        activation: str = "tanh",
        rng: random.Random | None = None,
        label: str = "L",
    ):
        _check_size("nout", nout)
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

    def __init__(self, nin: int, sizes: list, activation: str = "relu", seed: int | None = None):
        if not sizes:
            raise ValueError("an MLP needs at least one layer size, e.g. MLP(2, [16, 16, 1])")
        rng = random.Random(seed)
        widths = [nin] + list(sizes)
        self.layers = [
            Layer(a, b, activation if i < len(sizes) - 1 else "linear", rng, label=f"L{i}")
            for i, (a, b) in enumerate(zip(widths, widths[1:]))
        ]

    def __call__(self, x):
        for layer in self.layers:  # lists throughout, so a 1-wide hidden layer works
            x = [n(x) for n in layer.neurons]
        return x[0] if len(x) == 1 else x

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    def __repr__(self):
        return f"MLP({self.layers!r})"


def _check_size(name, n):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{name} must be a positive int, got {n!r}")


def _pairs(predictions, targets):
    """The two sequences zipped, after checking they match."""
    predictions, targets = list(predictions), list(targets)
    if not predictions or len(predictions) != len(targets):
        raise ValueError(
            f"need as many targets as predictions (at least one); got "
            f"{len(predictions)} predictions and {len(targets)} targets"
        )
    return zip(predictions, targets)


def _mean(terms):
    terms = list(terms)
    return sum(terms[1:], terms[0]) * (1.0 / len(terms))


def mse_loss(predictions, targets):
    """Mean of ``(p - t)**2``."""
    return _mean((p - t) ** 2 for p, t in _pairs(predictions, targets))


def hinge_loss(scores, labels):
    """Mean of ``relu(1 - y * s)`` for labels ``y`` in {-1, +1} (an SVM's loss)."""
    return _mean((1 - y * s).relu() for s, y in _pairs(scores, labels))


def accuracy(scores, labels) -> float:
    """Share of scores whose sign matches the {-1, +1} label."""
    pairs = list(_pairs(scores, labels))
    hits = sum((float(s) > 0) == (y > 0) for s, y in pairs)
    return hits / len(pairs)
