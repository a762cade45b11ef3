"""A learner's own autograd engine under ``%%autograd -q``, against the same cell run plainly
through the same IPython shell.

The engine is the micrograd lecture's ``Value`` as a learner writes it in a notebook
(``tests/learner_engines.SCALAR``, with its ``MLP``); the cell is a forward pass of an MLP
over a batch, a squared loss, their ``backward()``. Under the magic the arithmetic in their
methods builds gradmagic's graph too, their ``backward()`` runs on plain numbers, and every
``.grad`` it leaves is judged. Sizes give 10^3 to 10^4 of the learner's nodes.

Budget: at most 3x the plain cell. Each time is the best of several calls, the plain and the
magic cell taken alternately, in the CPU time of the cell's thread. The run exits 1 if a
budget is missed.

Run: ``python benchmarks/bench_learner.py``.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

import timing
from timing import best

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from learner_engines import MLP, SCALAR  # noqa: E402 - the engine the tests check

BUDGET = 3.0

SETUP = "random.seed(0)\nn = MLP(3, {sizes})\nxs = [[2.0, 3.0, -1.0], [3.0, -1.0, 0.5]] * {half}\n"
SETUP += "ys = [1.0, -1.0] * {half}"

CELL = """ypred = [n(x) for x in xs]
loss = sum((yout - ygt) ** 2 for ygt, yout in zip(ys, ypred))
for p in n.parameters():
    p.grad = 0.0
loss.backward()
loss"""

SIZES = {  # (hidden layers, examples / 2)
    "MLP 3-8-8-1, 4 examples": ([8, 8, 1], 2),
    "MLP 3-16-16-1, 8 examples": ([16, 16, 1], 4),
    "MLP 3-16-16-1, 24 examples": ([16, 16, 1], 12),
}


def _shell():
    return timing.shell(SCALAR, MLP)


def measure(shell, sizes, half: int, repeat: int) -> tuple:
    """(best times of the cell plainly and under ``%%autograd -q``, the learner's nodes)."""
    setup = SETUP.format(sizes=sizes, half=half)
    values = {}

    def run(prefix):
        def go():
            assert shell.run_cell(setup).success
            with contextlib.redirect_stdout(io.StringIO()):
                result = shell.run_cell(prefix + CELL)
            assert result.success, result.error_in_exec
            values[prefix] = float(shell.user_ns["loss"].data)

        return go

    times = best({"plain": run(""), "magic": run("%%autograd -q\n")}, repeat, time.thread_time)
    assert abs(values[""] - values["%%autograd -q\n"]) <= 1e-9 * abs(values[""]), values
    from gradmagic.notebook.learner import learner_graph

    return times, len(learner_graph(shell.user_ns["loss"]))


def main() -> bool:
    load = timing.load()
    print(f"## A learner's own engine under `%%autograd -q` (load average {load})\n")
    print("| cell | their nodes | plain | %%autograd -q | ratio | |")
    print("| --- | --- | --- | --- | --- | --- |")
    shell = _shell()
    ok = True
    for name, (sizes, half) in SIZES.items():
        t, nodes = measure(shell, sizes, half, 3)
        ratio = t["magic"] / t["plain"]
        ok &= ratio <= BUDGET
        print(
            f"| {name} | {nodes:,} | {t['plain'] * 1e3:.1f} ms | {t['magic'] * 1e3:.0f} ms "
            f"| {ratio:.1f}x | {'ok' if ratio <= BUDGET else 'MISSED'} |",
            flush=True,
        )
    print(f"\nbudget: at most {BUDGET:g}x the plain cell: {'ok' if ok else 'MISSED'}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
