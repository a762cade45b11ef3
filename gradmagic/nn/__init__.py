"""Layers and losses: scalar ones on :class:`gradmagic.Value`, tensor ones on :class:`gradmagic.Tensor`.

>>> from gradmagic.nn import MLP
>>> net = MLP(2, [16, 16, 1], seed=0)
>>> score = net([0.5, -1.0])
>>> score.backward()
"""

from .module import Module, zero_grads
from .scalar import MLP, Layer, Neuron, accuracy, hinge_loss, mse_loss
from ..core.tensor import cross_entropy, log_softmax, softmax
from .tensor import Linear, ReLU, Sequential, Tanh

__all__ = [
    "Module",
    "Neuron",
    "Layer",
    "MLP",
    "mse_loss",
    "hinge_loss",
    "accuracy",
    "Linear",
    "ReLU",
    "Tanh",
    "Sequential",
    "zero_grads",
    "cross_entropy",
    "softmax",
    "log_softmax",
]
