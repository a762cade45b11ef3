"""How much a full numerical check costs, as a multiple of one backward pass.

The network is micrograd's demo: an MLP 2-16-16-1 with relu, a hinge loss on
one input point and an L2 penalty ``1e-4 * sum(p * p)`` (about 1,700 nodes,
340 leaves). The target is ``check <= 5x backward``.

For comparison it also times the naive way -- re-running the forward pass
twice per leaf -- on a few leaves and scales that up to all of them.

Last, the display of a 100,000-node run (check, summary graph, tables, widget)
is timed against the forward and backward pass that made it: it must take
seconds, not minutes.

Run: ``python benchmarks/bench_check.py``.
"""
from __future__ import annotations

import statistics
import time

from gradmagic import Value
from gradmagic.analysis.check import check
from gradmagic.nn import MLP
from gradmagic.analysis.trace import Trace

TARGET_RATIO = 5.0


def _demo():
    """The demo network, its input point and a function computing the loss."""
    net = MLP(2, [16, 16, 1], activation="relu", seed=1337)
    x = [Value(0.53, label="x0"), Value(-0.41, label="x1")]
    y = -1

    def loss():
        score = net(x)
        data_loss = (1 + -y * score).relu()
        reg = 1e-4 * sum(p * p for p in net.parameters())
        return data_loss + reg

    return net, loss


def _times(fn, repeats: int) -> list:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def _naive_seconds_per_leaf(net, loss, eps: float, leaves: int) -> float:
    """Re-run the forward twice per parameter: the cost for one parameter."""
    params = net.parameters()[:leaves]
    start = time.perf_counter()
    for p in params:
        x = p.data
        p.data = x + eps
        up = loss().data
        p.data = x - eps
        down = loss().data
        p.data = x
        (up - down) / (2 * eps)
    return (time.perf_counter() - start) / len(params)


def _big_display(n_steps: int = 33_400) -> dict:
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
    return {"big_nodes": len(trace.nodes), "big_run_s": run, "big_display_s": display,
            "big_display_ratio": display / run,
            "big_html_kb": len(bundle["text/html"]) / 1024}


def main(repeats: int = 60) -> dict:
    net, loss = _demo()
    target = loss()
    target.backward()
    trace = Trace(target)
    report = check(trace)
    assert report.passed, report.verdict

    backward, checking = [], []
    for _ in range(repeats):  # interleaved, so background load hits both alike
        backward += _times(target.backward, 1)
        checking += _times(lambda: check(trace).passed, 1)
    n_leaves = len(trace.leaves)
    naive = _naive_seconds_per_leaf(net, loss, 1e-6, 20) * n_leaves

    t_back = min(backward)
    t_check = min(checking)
    result = {
        "nodes": len(trace.nodes),
        "leaves": n_leaves,
        "backward_ms": t_back * 1e3,
        "check_ms": t_check * 1e3,
        "ratio": t_check / t_back,
        "ratio_median": statistics.median(checking) / statistics.median(backward),
        "naive_ratio": naive / t_back,
    }
    print(f"bench_check: {result['nodes']} nodes, {result['leaves']} leaves")
    print(f"  one backward pass        {result['backward_ms']:8.3f} ms")
    print(f"  full numerical check     {result['check_ms']:8.3f} ms   "
          f"ratio {result['ratio']:.2f}x (median {result['ratio_median']:.2f}x; "
          f"target <= {TARGET_RATIO:g}x)")
    print(f"  naive re-run, 2 per leaf {naive * 1e3:8.1f} ms   "
          f"ratio {result['naive_ratio']:.0f}x (scaled up from 20 leaves)")
    big = _big_display()
    result.update(big)
    print(f"  display of a {big['big_nodes']:,}-node run: {big['big_display_s']:.2f} s "
          f"({big['big_display_ratio']:.2f}x the {big['big_run_s']:.2f} s forward + backward; "
          f"static HTML {big['big_html_kb']:.0f} KB)")
    return result


if __name__ == "__main__":
    main()
