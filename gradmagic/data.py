"""Small toy data sets made with numpy, for demos, tests and benchmarks."""

from __future__ import annotations

import numpy as np

__all__ = ["two_moons"]


def two_moons(n: int = 100, noise: float = 0.1, seed: int = 0):
    """Two interleaving half circles: ``(points, labels)`` as lists, labels -1 and +1.

    The first half of the points lies on the upper moon (label -1), the rest on
    the lower one (+1), each moved by Gaussian noise of scale ``noise``.
    """
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    upper = np.arange(n) < n // 2
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    points = np.stack([x, y], axis=1) + rng.normal(0, noise, (n, 2))
    return points.tolist(), np.where(upper, -1.0, 1.0).tolist()
