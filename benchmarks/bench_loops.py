"""Loops over numpy scalars, where homework lives: each cell under ``%%autograd -q`` against
the same cell run plainly, through the same IPython shell.

``-q`` is the run a user waits for when nothing is drawn: the cell recorded, ``backward()``
on its value and the Trace made (the numerical check is made only when a view asks for it).
The cells, each written as a student writes it:

* **bigram loss**: makemore's negative log-likelihood, a loop over 20,000 (previous,
  next) character pairs reading ``P[ix1, ix2]`` of a softmax of a 27 x 27 parameter;
* **Gram fill**: a Gram matrix of n = 100 points filled element by element (``K[i, j] =
  np.exp(...)``), then ``slogdet`` (``tests/cells_corpus.GRAM``);
* **naive conv + max pool**: CS231n's ``conv_forward_naive`` on 4 x 3 x 16 x 16 images, 8
  filters 3 x 3, pad 1, then a naive 2 x 2 max pool and a sum of squares;
* **naive SVM loss**: CS231n's ``svm_loss_naive`` on 500 examples of 3,073 numbers and 10
  classes, with L2.

Budget: at most 15x the plain cell. Each time is the best of several calls, the plain and
the magic cell taken alternately, in the CPU time of the cell's thread (on a busy machine the
wall clock of a 10 ms cell and of a 1 s one are interrupted unequally). The run exits 1 if a
budget is missed.

Run: ``python benchmarks/bench_loops.py``.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

import numpy as np

import timing
from timing import best

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cells_corpus import GRAM  # noqa: E402 - the cell the tests check, timed here

BUDGET = 15.0

BIGRAM = """
counts = np.exp(W)
P = counts / counts.sum(1, keepdims=True)
nll = 0.0
n = 0
for ix1, ix2 in pairs:
    prob = P[ix1, ix2]
    logprob = np.log(prob)
    nll += -logprob
    n += 1
loss = nll / n
loss
"""

CONV_POOL = """
N, C, H, Wd = x.shape
F, _, HH, WW = w.shape
pad, stride = 1, 1
xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
Ho = 1 + (H + 2 * pad - HH) // stride
Wo = 1 + (Wd + 2 * pad - WW) // stride
out = np.zeros((N, F, Ho, Wo))
for n in range(N):
    for f in range(F):
        for i in range(Ho):
            for j in range(Wo):
                window = xp[n, :, i * stride:i * stride + HH, j * stride:j * stride + WW]
                out[n, f, i, j] = np.sum(window * w[f]) + b[f]
pooled = np.zeros((N, F, Ho // 2, Wo // 2))
for n in range(N):
    for f in range(F):
        for i in range(Ho // 2):
            for j in range(Wo // 2):
                pooled[n, f, i, j] = np.max(out[n, f, 2 * i:2 * i + 2, 2 * j:2 * j + 2])
loss = np.sum(pooled ** 2)
loss
"""

SVM = """
num_classes = W.shape[1]
num_train = X.shape[0]
loss = 0.0
for i in range(num_train):
    scores = X[i].dot(W)
    correct_class_score = scores[y[i]]
    for j in range(num_classes):
        if j == y[i]:
            continue
        margin = scores[j] - correct_class_score + 1
        if margin > 0:
            loss += margin
loss /= num_train
loss += reg * np.sum(W * W)
loss
"""


def _inputs() -> dict:
    """Each cell's source and the names it reads."""
    rng = np.random.default_rng(0)
    pairs = [tuple(map(int, p)) for p in rng.integers(0, 27, (20_000, 2))]
    return {
        "bigram loss, 20,000 pairs": (BIGRAM, {"W": rng.normal(size=(27, 27)), "pairs": pairs}),
        "Gram fill, n = 100": (GRAM, {"X": rng.random((100, 3)), "n": 100, "ell": 0.7}),
        "naive conv 4x3x16x16, 8 filters, + max pool": (
            CONV_POOL,
            {
                "x": rng.normal(size=(4, 3, 16, 16)),
                "w": rng.normal(size=(8, 3, 3, 3)),
                "b": rng.normal(size=8),
            },
        ),
        "naive SVM loss, 500 x 3,073, 10 classes": (
            SVM,
            {
                "X": rng.normal(size=(500, 3073)),
                "y": rng.integers(0, 10, 500),
                "W": rng.normal(size=(3073, 10)) * 1e-4,
                "reg": 5e-6,
            },
        ),
    }


def _shell():
    return timing.shell("import numpy as np")


def measure(shell, source: str, names: dict, repeat: int) -> dict:
    """Best wall time of the cell plainly and under ``%%autograd -q``; the values agree."""
    values = {}

    def run(prefix):
        def go():
            shell.user_ns.update(names)
            with contextlib.redirect_stdout(io.StringIO()):
                result = shell.run_cell(prefix + source)
            assert result.success, result.error_in_exec
            values[prefix] = float(shell.user_ns["loss" if "loss" in source else "L"])

        return go

    times = best({"plain": run(""), "magic": run("%%autograd -q\n")}, repeat, time.thread_time)
    assert np.isclose(values[""], values["%%autograd -q\n"]), values
    return times


def main() -> bool:
    load = timing.load()
    print(f"## Loops over numpy scalars under `%%autograd -q` (load average {load})\n")
    print("| cell | plain | %%autograd -q | ratio | |")
    print("| --- | --- | --- | --- | --- |")
    shell = _shell()
    ok = True
    for name, (source, names) in _inputs().items():
        t = measure(shell, source, names, 3)
        ratio = t["magic"] / t["plain"]
        ok &= ratio <= BUDGET
        print(
            f"| {name} | {t['plain'] * 1e3:.1f} ms | {t['magic'] * 1e3:.0f} ms | {ratio:.1f}x "
            f"| {'ok' if ratio <= BUDGET else 'MISSED'} |",
            flush=True,
        )
    print(f"\nbudget: at most {BUDGET:g}x the plain cell: {'ok' if ok else 'MISSED'}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
