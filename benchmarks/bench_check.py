"""How much the numerical check costs, as a multiple of one backward pass.

Issue #13's target: a check (``trace.check()`` with its defaults) costs at most
2x a backward pass of the same graph at every size, and grows linearly.

1. **micrograd's demo network** (MLP 2-16-16-1, relu, hinge loss on the points
   plus ``1e-4 * sum(p * p)``) on 1 point (1,664 nodes, 339 leaves) and on 100
   points (65,816 nodes, 537 leaves): the default check, which perturbs as many
   leaves as its budget allows (a seeded sample, and says so), and, for
   comparison, a check of every leaf (``max_leaves=None``). Such a wide graph
   is replayed a level at a time (all the nodes of one level and op in one
   numpy call).
2. **The loop cell** of ``bench_run.py``
   (``s = (s * w + x) * 0.5 - (s - w * 2.0) * 0.25 + x * w``, 13 nodes an
   iteration, two named leaves) on 10^3 … 10^5 nodes (10^6 with ``--big``):
   the check (replayed on plain floats) and its growth exponent.
3. For scale: the naive way (re-running the forward twice per leaf), scaled
   up from 20 leaves, and the display of a 100,000-node run against the run.

Times as in ``bench_run.py``: ``gc.collect()`` before each timed call, the GC
paused while it runs, the best of several calls taken alternately with the
backward pass, so background load hits both. Floor (exit status 1): the
default check at most 5x a backward pass (the issue's 2x is printed as met or
not: this shared machine swings too much to fail a run on it).

Run: ``python benchmarks/bench_check.py [--big]``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from gradmagic import Value
from gradmagic.analysis.trace import Trace
from timing import best

TARGET = 2.0
FLOOR = 5.0
BODY = "s = (s * w + x) * 0.5 - (s - w * 2.0) * 0.25 + x * w"
LOOP = "s = x\nfor i in range(N):\n    " + BODY + "\n"
PER_ITERATION = 13


def _checker(trace, **kwargs):
    """A fresh check of ``trace`` each call: ``trace.check(**kwargs)`` (its report is kept, so
    it is dropped first)."""

    def run():
        trace._report = None
        trace.check(**kwargs)

    return run


# ------------------------------------------------------------------ 1. the demo network
def _demo(points: int):
    from gradmagic import nn
    from gradmagic.data import two_moons

    X, y = two_moons(points, noise=0.1, seed=1)
    net = nn.MLP(2, [16, 16, 1], activation="relu", seed=1337)
    scores = [net([Value(a, "x0"), Value(b, "x1")]) for a, b in X]
    loss = nn.hinge_loss(scores, y) + 1e-4 * sum(p * p for p in net.parameters())
    loss.backward()
    return net, loss, Trace(loss, order=Value.topo(loss))


def demo(points: int, repeat: int) -> dict:
    net, loss, trace = _demo(points)
    report = trace.check()
    assert report.passed, report.verdict
    every = _checker(trace, max_leaves=None)
    every()  # warm up
    times = best({"backward": loss.backward, "check": _checker(trace), "every": every}, repeat)
    leaves = sum(1 for n in trace.leaves if not n.is_constant)
    return {
        "nodes": trace.n,
        "leaves": leaves,
        "checked": len(report.rows),
        "times": times,
        "net": net,
        "loss": loss,
    }


def naive_per_leaf(net, loss, eps: float = 1e-6, leaves: int = 20) -> float:
    """Re-run the forward twice per parameter (one point): seconds for one parameter."""
    from gradmagic import nn  # noqa: F401 - the network's classes

    params = net.parameters()[:leaves]
    x = [Value(0.53, "x0"), Value(-0.41, "x1")]

    def forward():
        data_loss = (1 + net(x)).relu()
        return (data_loss + 1e-4 * sum(p * p for p in net.parameters())).data

    start = time.perf_counter()
    for p in params:
        x0 = p.data
        p.data = x0 + eps
        up = forward()
        p.data = x0 - eps
        down = forward()
        p.data = x0
        (up - down) / (2 * eps)
    return (time.perf_counter() - start) / len(params)


# ------------------------------------------------------------------ 2. the loop cell
def loop(size: int, repeat: int) -> dict:
    code = compile(LOOP, "<cell>", "exec")
    ns = {"x": Value(0.3, "x"), "w": Value(0.7, "w"), "N": max(1, round(size / PER_ITERATION))}
    exec(code, ns)
    s = ns["s"]
    s.backward()
    trace = Trace(s, order=Value.topo(s))
    assert trace.check().passed
    times = best({"backward": s.backward, "check": _checker(trace)}, repeat)
    return {"nodes": trace.n, "times": times}


def exponent(sizes, times) -> float:
    """Slope of log(time) over log(size)."""
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


# ------------------------------------------------------------------ 3. the display
def big_display(n_steps: int = 33_400) -> dict:
    """Seconds to display a ~100,000-node run, beside the run itself."""
    from gradmagic.views.widget import mimebundle

    start = time.perf_counter()
    x = Value(0.5, label="x")
    total = Value(0.0, label="start")
    for i in range(n_steps):
        total = total + x * float(i % 7)
    total.backward()
    run = time.perf_counter() - start
    trace = Trace(total, bindings={"x": x, "total": total})
    start = time.perf_counter()
    bundle = mimebundle(trace)
    display = time.perf_counter() - start
    return {
        "nodes": trace.n,
        "run_s": run,
        "display_s": display,
        "html_kb": len(bundle["text/html"]) / 1024,
    }


def _verdict(ratio: float) -> str:
    return "met" if ratio <= TARGET else "NOT met"


def main(argv=None) -> bool:
    argv = sys.argv[1:] if argv is None else argv
    ok = True
    print(f"## The numerical check against one backward pass (target <= {TARGET:g}x)\n")
    print(
        "| graph | nodes | backward | default check / backward | leaves checked "
        "| every leaf / backward |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    first = None
    for points in (1, 100):
        d = demo(points, 9 if points == 1 else 3)
        first = first or d
        t = d["times"]
        ratio = t["check"] / t["backward"]
        ok &= ratio <= FLOOR
        print(
            f"| micrograd's demo, {points} point{'s' if points > 1 else ''} | {d['nodes']:,} "
            f"| {t['backward'] * 1e3:.2f} ms | **{ratio:.2f}x** ({_verdict(ratio)}) "
            f"| {d['checked']} of {d['leaves']} | {t['every'] / t['backward']:.2f}x |",
            flush=True,
        )
    sizes = (1_000, 10_000, 100_000) + ((1_000_000,) if "--big" in argv else ())
    rows = []
    for size in sizes:
        r = loop(size, 9 if size <= 10_000 else 3 if size <= 100_000 else 1)
        rows.append(r)
        t = r["times"]
        ratio = t["check"] / t["backward"]
        ok &= ratio <= FLOOR
        print(
            f"| loop cell | {r['nodes']:,} | {t['backward'] * 1e3:.2f} ms "
            f"| **{ratio:.2f}x** ({_verdict(ratio)}) | 2 of 2 | — |",
            flush=True,
        )
    slope = exponent([r["nodes"] for r in rows], [r["times"]["check"] for r in rows])
    print(
        f"\ngrowth exponent of the loop cell's check over {rows[0]['nodes']:,}…"
        f"{rows[-1]['nodes']:,} nodes: {slope:.2f} (target 0.9–1.1: "
        f"{'met' if 0.9 <= slope <= 1.1 else 'NOT met'})"
    )

    naive = naive_per_leaf(first["net"], first["loss"]) * first["leaves"]
    back = first["times"]["backward"]
    print(
        f"\nfor scale, the demo at one point checked the naive way (the forward run twice "
        f"per leaf, scaled up from 20 leaves): {naive * 1e3:.0f} ms, "
        f"{naive / back:.0f}x a backward pass"
    )
    big = big_display()
    print(
        f"display of a {big['nodes']:,}-node run: {big['display_s']:.2f} s "
        f"({big['display_s'] / big['run_s']:.2f}x the {big['run_s']:.2f} s forward + "
        f"backward; static HTML {big['html_kb']:.0f} KB)"
    )
    print(f"\nfloor: the default check <= {FLOOR:g}x a backward pass: {'ok' if ok else 'MISSED'}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
