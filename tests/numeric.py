"""Finite differences the tests check gradients against."""

import numpy as np


def central(f, x, eps=1e-6):
    """Central differences of the number ``f(x)`` for each element of the array ``x``."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g
