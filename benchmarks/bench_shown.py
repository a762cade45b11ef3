"""What showing a big cell costs: the default cell against the same cell under ``-q``.

The cell is micrograd's Neuron/Layer/MLP written in a cell (a 3-15-15-1 model, about 690
nodes an example, ``tests/cells_corpus.MICROGRAD_MLP``), its loss over 2, 14 and 144
examples: about 10^3, 10^4 and 10^5 nodes. Each size runs through one IPython shell, with
the display published as a notebook would get it (the live view's payload and widget, the
static copy with its picture, the text):

* ``-q``: the run, ``backward()`` and the Trace, nothing shown;
* ``--no-check``: that and the display, without the numerical check;
* the default cell: that and the check (the check's own cost is measured by
  ``bench_check.py``).

Budgets: the display (``--no-check`` over ``-q``) at most 2x at 10^4 nodes and 3x at 10^5.
Times are the best of a few calls, the three cells taken alternately (wall clock).

Run: ``python benchmarks/bench_shown.py``.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import timing
from timing import best

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cells_corpus import MICROGRAD_MLP  # noqa: E402

SETUP = "import math, random\nrandom.seed(1)\n" + MICROGRAD_MLP
CELL = (
    "xs = [[math.sin(i), math.cos(i), 0.5] for i in range(POINTS)]\n"
    "ys = [1.0 if i % 2 else -1.0 for i in range(POINTS)]\n"
    "loss = sum((model(x) - y) ** 2 for x, y in zip(xs, ys))\n"
    "loss\n"
)
BUDGETS = {10_000: 2.0, 100_000: 3.0}  # nodes (about) -> display over -q


def _shell():
    shell = timing.shell()
    shell.display_pub.publish = lambda *args, **kwargs: None  # what a frontend would get
    assert shell.run_cell(SETUP).success
    return shell


def measure(shell, points: int, repeat: int) -> dict:
    cell = CELL.replace("POINTS", str(points))
    nodes = {}

    def run(options):
        def go():
            with contextlib.redirect_stdout(io.StringIO()):
                result = shell.run_cell(f"%%autograd {options}\n{cell}")
            assert result.success, result.error_in_exec
            import gradmagic

            nodes[options] = gradmagic.last.n

        return go

    times = best({"-q": run("-q"), "--no-check": run("--no-check"), "": run("")}, repeat)
    return {"nodes": nodes["-q"], **times}


def main() -> bool:
    load = timing.load()
    print(f"## A big cell shown, against the same cell under -q (load average {load})\n")
    print("| nodes | -q | --no-check | default | display / -q | default / -q | budget | |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    shell = _shell()
    ok = True
    for points, budget_at, repeat in ((2, 1_000, 5), (14, 10_000, 5), (144, 100_000, 2)):
        t = measure(shell, points, repeat)
        shown = t["--no-check"] / t["-q"]
        budget = BUDGETS.get(budget_at)
        met = budget is None or shown <= budget
        ok &= met
        print(
            f"| {t['nodes']:,} | {t['-q'] * 1e3:.0f} ms | {t['--no-check'] * 1e3:.0f} ms "
            f"| {t[''] * 1e3:.0f} ms | {shown:.2f}x | {t[''] / t['-q']:.2f}x "
            f"| {'' if budget is None else f'{budget:g}x'} "
            f"| {'' if budget is None else 'ok' if met else 'MISSED'} |",
            flush=True,
        )
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
