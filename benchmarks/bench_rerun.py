"""What the numerical check costs now that it runs the user's code again.

The check of a magic cell re-runs the cell plainly at moved inputs, in a process forked when
the cell starts (see ``gradmagic/notebook/rerun.py``). Its cost is one fork of that process
plus one plain run of the cell a point. Printed for three cells, each against the recorded
run of the same cell (the cell under ``%%autograd -q``: forward, backward, the trace, and
the fork the re-runs start from) and against the plain cell, all in this process:

1. a scalar loop, 10^4 nodes (``s = s * w + x ...`` 800 times);
2. a numpy two-layer net on 256x64 data (vectorised);
3. micrograd's demo MLP step on 4 points (about 1,400 nodes, 41 parameters).

Each is the best of 7 rounds, a round being a recorded run and then its check. Target: the
check at most 2x the recorded run at 10^4 nodes and up. A fork is a fixed cost
(about 1-2 ms on a common Linux machine, more in a sandbox), so a sub-millisecond cell pays
more than 2x; the absolute time is printed beside the ratio. It runs in a child process whose
BLAS runs on one thread (see ``timing.one_blas_thread``).

PyTorch cells are checked op by op on the recorded ops (not by re-running the cell); their
cost against the plain step is printed by ``bench_torch.py``.

Run: ``python benchmarks/bench_rerun.py``.
"""

from __future__ import annotations

import math
import os

from IPython.testing import globalipapp

from gradmagic.notebook import session
from timing import best, one_blas_thread, timed

ROUNDS = 7  # each round a recorded run, then its check

CELLS = {
    "scalar loop, 10^4 nodes": (
        "w = 0.5\nx = 0.25\nN = 800",
        "s = x\nfor i in range(N):\n    s = (s * w + x) * 0.5 - (s - w * 2.0) * 0.25 + x * w\ns",
    ),
    "numpy net 256x64": (
        "import numpy as np\nrng = np.random.default_rng(0)\nX = rng.standard_normal((256, 64))\n"
        "W1 = rng.standard_normal((64, 32)) * 0.1\nW2 = rng.standard_normal((32, 1)) * 0.1\n"
        "y = rng.standard_normal((256, 1))",
        "h = np.tanh(X @ W1)\nL = np.mean((h @ W2 - y) ** 2)\nL",
    ),
    "demo MLP step": (
        "import random\nrandom.seed(1)\n"
        "class Neuron:\n"
        "    def __init__(self, n):\n"
        "        self.w = [random.uniform(-1, 1) for _ in range(n)]\n"
        "        self.b = random.uniform(-1, 1)\n"
        "    def __call__(self, x):\n"
        "        import math\n"
        "        return math.tanh(sum(wi * xi for wi, xi in zip(self.w, x)) + self.b)\n"
        "class Layer:\n"
        "    def __init__(self, a, b):\n"
        "        self.neurons = [Neuron(a) for _ in range(b)]\n"
        "    def __call__(self, x):\n"
        "        return [n(x) for n in self.neurons]\n"
        "class MLP:\n"
        "    def __init__(self, a, sizes):\n"
        "        s = [a] + sizes\n"
        "        self.layers = [Layer(s[i], s[i + 1]) for i in range(len(sizes))]\n"
        "    def __call__(self, x):\n"
        "        for layer in self.layers:\n"
        "            x = layer(x)\n"
        "        return x[0]\n"
        "n = MLP(3, [4, 4, 1])\n"
        "xs = [[2.0, 3.0, -1.0], [3.0, -1.0, 0.5], [0.5, 1.0, 1.0], [1.0, 1.0, -1.0]]\n"
        "ys = [1.0, -1.0, -1.0, 1.0]",
        "loss = sum((n(x) - y) ** 2 for x, y in zip(xs, ys))\nloss",
    ),
}


def main() -> bool:
    status = one_blas_thread(__file__)  # (see above)
    if status is not None:
        return status == 0
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "gradmagic")
    print(f"fork of this process: {1e3 * _fork_cost():.1f} ms")
    print(f"{'cell':26} {'plain':>9} {'recorded':>9} {'check':>9} {'check/rec':>9}  verdict")
    for name, (setup, cell) in CELLS.items():
        shell.run_cell(setup)

        def plain(cell=cell):
            shell.run_cell(cell, silent=True)

        def recorded(cell=cell):
            shell.run_cell("%%autograd -q\n" + cell, silent=True)

        def checked():
            session.last._report = None
            return session.last.check()

        times = best({"plain": plain}, repeat=3)
        times.update(recorded=math.inf, check=math.inf)
        for _ in range(ROUNDS):  # a fresh run (and fork) before each check
            times["recorded"] = min(times["recorded"], timed(recorded))
            times["check"] = min(times["check"], timed(checked))
        report, check = checked(), times["check"]
        print(
            f"{name:26} {1e3 * times['plain']:8.2f}m {1e3 * times['recorded']:8.2f}m "
            f"{1e3 * check:8.2f}m {check / times['recorded']:8.2f}x  "
            f"{report.oracle}: {report.verdict[:60]}"
        )
    return True


def _fork_cost() -> float:
    def fork():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    return best({"fork": fork}, repeat=5)["fork"]


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
