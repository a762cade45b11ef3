"""A big graph drawn grouped by its code: time and memory from 10^3 to 10^6 nodes.

For each size a fresh process runs a cell under the magic (the run records each node's call
and line) and then makes what the view shows past ``--max-nodes``: the grouping
(``analysis.groups.Grouping``), its default view, the grouped DOT and Graphviz's ``dot``
drawing it (``views.grouped.summarise`` then ``render.svg``). Two cells:

* **loop**: ``s = s * w + x`` in a ``for`` loop (two nodes an iteration, one line);
* **mlp**: micrograd's Neuron/Layer/MLP classes written in the cell, on ``points`` examples
  (an MLP 3-15-15-1: about 690 nodes an example, 316 parameters, many nested calls).

Printed: nodes, the grouping's and the picture's time, Python's peak memory while making
them (tracemalloc), ``dot``'s time, and the SVG's size. Target: none past 5 s or 1 GB.

Run: ``python benchmarks/bench_groups.py`` (``--big`` adds 10^6 nodes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from cells_corpus import MICROGRAD_MLP  # noqa: E402

SECONDS, BYTES = 5.0, 1 << 30

MLP = (
    "\nimport math, random\nrandom.seed(1)\n"
    + MICROGRAD_MLP
    + "xs = [[math.sin(i), math.cos(i), 0.5] for i in range(POINTS)]\nys = [1.0 if i % 2 else -1.0 for i in range(POINTS)]\nloss = sum((model(x) - y) ** 2 for x, y in zip(xs, ys))\n"
)
LOOP = "w = 0.999\nx = 0.001\ns = 1.0\nfor i in range(STEPS):\n    s = s * w + x\ns\n"

CHILD = textwrap.dedent("""
    import json, sys, time, tracemalloc
    sys.path.insert(0, {root!r})
    from gradmagic import autograd
    from gradmagic.views import grouped, render
    run = autograd({source!r}, check=False)()
    trace = run.trace
    tracemalloc.start()
    start = time.perf_counter()
    summary = grouped.summarise(trace)
    made = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    start = time.perf_counter()
    image = render.svg(summary.dot)
    drawn = time.perf_counter() - start
    print(json.dumps({{"nodes": trace.n, "made": made, "peak": peak, "dot": drawn,
                      "svg": len(image), "groups": summary.dot.count('"g:') }}))
""")


def measure(source: str) -> dict:
    code = CHILD.format(root=str(ROOT), source=source)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> bool:
    argv = sys.argv[1:] if argv is None else argv
    cases = [(f"loop {n:,}", LOOP.replace("STEPS", str(n // 2))) for n in (1_000, 10_000, 100_000)]
    cases += [(f"mlp {p} points", MLP.replace("POINTS", str(p))) for p in (4, 40)]
    if "--big" in argv:
        cases.append(("loop 1,000,000", LOOP.replace("STEPS", "500000")))
    print("| cell | nodes | grouping + DOT | its peak memory | dot | SVG | |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ok = True
    for name, source in cases:
        r = measure(source)
        met = r["made"] + r["dot"] <= SECONDS and r["peak"] <= BYTES
        ok &= met
        print(
            f"| {name} | {r['nodes']:,} | {r['made'] * 1e3:,.0f} ms | {r['peak'] / 1e6:,.1f} MB"
            f" | {r['dot'] * 1e3:,.0f} ms | {r['svg'] / 1e3:,.0f} kB | {'met' if met else 'NOT met'} |"
        )
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
