"""Time per training step of tensor MLPs, against the same networks in PyTorch (CPU).

Two networks with relu, trained with cross-entropy and plain SGD on 1,000 points
of ten Gaussian blobs: the small 2-64-64-10 and the MNIST-sized 784-256-256-10.
One step is forward, backward and the parameter update. PyTorch runs the same
network from the same weights in the same process, in float64 (gradmagic's
dtype) and, for reference, float32. The target is ``gradmagic <= 3x PyTorch
float64`` per step. Without torch installed, only gradmagic's times are printed.

Run: ``python benchmarks/bench_tensor.py``.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from gradmagic.optim import SGD
from gradmagic.core.tensor import Tensor, cross_entropy
from gradmagic.nn.tensor import Linear, ReLU, Sequential

TARGET_RATIO = 3.0
NETWORKS = ((2, 64, 64, 10), (784, 256, 256, 10))
N_POINTS = 1000
LR = 0.1


def _data(n_in: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    if n_in == 2:
        angles = 2 * np.pi * np.arange(10) / 10
        centers = 4.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    else:
        centers = rng.normal(size=(10, n_in))
    y = rng.integers(0, 10, N_POINTS)
    return centers[y] + 0.5 * rng.normal(size=(N_POINTS, n_in)), y


def _ours(X, y, sizes):
    """A step function for the gradmagic network, and its parameters."""
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(Linear(sizes[i], sizes[i + 1], seed=i))
        if i < len(sizes) - 2:
            layers.append(ReLU())
    net = Sequential(*layers)
    opt = SGD(net.parameters(), lr=LR)
    X = Tensor(X, label="X", requires_grad=False)

    def step():
        loss = cross_entropy(net(X), y)
        loss.backward()
        opt.step()
        return float(loss.data)

    return step, net.parameters()


def _theirs(torch, X, y, params, dtype):
    """The same network, weights and update in PyTorch."""
    ws = [torch.tensor(p.data, dtype=dtype, requires_grad=True) for p in params]
    X = torch.tensor(X, dtype=dtype)
    y = torch.tensor(y)
    opt = torch.optim.SGD(ws, lr=LR)
    n_layers = len(ws) // 2

    def step():
        h = X
        for i in range(n_layers):
            h = h @ ws[2 * i] + ws[2 * i + 1]
            if i < n_layers - 1:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def _time(step, repeats: int) -> list:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        out.append(time.perf_counter() - start)
    return out


def main(repeats: int = 200) -> dict:
    return {
        "-".join(map(str, sizes)): network(sizes, repeats if sizes[0] < 100 else repeats // 4)
        for sizes in NETWORKS
    }


def network(sizes, repeats: int) -> dict:
    X, y = _data(sizes[0])
    ours, params = _ours(X, y, sizes)
    steps = {"gradmagic": ours}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        # both start from the same weights: the first losses must agree
        steps["torch float64"] = _theirs(torch, X, y, params, torch.float64)
        steps["torch float32"] = _theirs(torch, X, y, params, torch.float32)
        first = ours(), steps["torch float64"]()
        assert abs(first[0] - first[1]) < 1e-9, f"losses differ: {first}"
    for step in steps.values():  # warm up
        _time(step, 5)
    times = {name: [] for name in steps}
    for _ in range(repeats // 10):  # interleaved, so background load hits all alike
        for name, step in steps.items():
            times[name] += _time(step, 10)

    result = {"points": N_POINTS, "sizes": sizes}
    for name, ts in times.items():
        result[f"{name} ms"] = statistics.median(ts) * 1e3
    print(
        f"bench_tensor: MLP {'-'.join(map(str, sizes))}, {N_POINTS} points, "
        "cross-entropy + SGD, median time per training step"
    )
    base = result["gradmagic ms"]
    print(f"  gradmagic Tensor       {base:8.3f} ms")
    for name in steps:
        if name == "gradmagic":
            continue
        ms = result[f"{name} ms"]
        result[f"ratio vs {name}"] = base / ms
        print(f"  {name:<22} {ms:8.3f} ms   gradmagic / torch = {base / ms:.2f}x")
    if torch is not None:
        result["torch threads"] = torch.get_num_threads()
        print(
            f"  (torch uses {result['torch threads']} thread(s); on a busy machine "
            "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 gives steadier numbers)"
        )
        ok = result["ratio vs torch float64"] <= TARGET_RATIO
        result["ratio"] = result["ratio vs torch float64"]
        print(f"  target: <= {TARGET_RATIO:g}x torch float64 -> {'met' if ok else 'NOT met'}")
    else:
        print("  torch is not installed: no reference rows")
    return result


if __name__ == "__main__":
    main()
