"""Drawing a run's graph is bounded at every size: time and peak memory at 10^3..10^6 nodes.

For each size a fresh process builds a graph -- a loop cell's (the loop of
``bench_display.py``, whose inputs feed every step: the hardest shape for Graphviz, its long
edges cross every rank) and a balanced sum of products (short edges: the biggest graph drawn
whole) -- with ``--max-nodes`` set to the whole graph, as a user asking to "draw them all"
does, and then draws what the view draws:

* **kernel**: the summary decision, the DOT, and Graphviz's ``dot`` making the static copy's
  picture (``render.graph_html``): wall time, the process's peak RSS and dot's;
* **browser**: the same DOT laid out by the WebAssembly Graphviz the live view uses
  (``static/viz.js.gz`` run by ``node``, when node is installed): time and node's peak RSS.

A size past the drawing budget is summarised, so no row may pass 5 s or 1 GB (the target,
printed as met or not met). ``python benchmarks/bench_draw.py --quick`` stops at 10^5 nodes.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (1_000, 10_000, 100_000, 1_000_000)
SECONDS, BYTES = 5.0, 1 << 30

CHILD = textwrap.dedent("""
    import json, resource, sys, time
    sys.path.insert(0, {root!r})
    from gradmagic.core.engine import Value
    from gradmagic.analysis.trace import Trace
    from gradmagic.views import render
    nodes = {nodes}
    x, w = Value(0.3, "x"), Value(0.7, "w")
    if {shape!r} == "loop":
        s = x
        for i in range(max(1, round(nodes / 13))):
            s = (s * w + x) * 0.5 - (s - w * 2.0) * 0.25 + x * w
    else:  # a balanced sum of products: short edges, the most Graphviz is given whole
        level = [Value(0.001 * i, f"x{{i}}") * w for i in range(max(1, nodes // 4))]
        while len(level) > 1:
            level = [a + b for a, b in zip(level[::2], level[1::2])] + level[len(level) // 2 * 2:]
        s = level[0]
    s.backward()
    trace = Trace(s, bindings={{"x": x, "w": w, "s": s}}, options={{"max_nodes": nodes}})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    summary = render.summarise(trace)
    dot = render.to_dot(trace, subset=summary.shown if summary else None)
    page = render.graph_html(trace, summary=summary, dot=dot)
    took = time.perf_counter() - start
    dot_rss = 0  # the kept dot process's peak (VmHWM), read before it ends
    proc = render.dot_process._proc
    if proc is not None:
        with open(f"/proc/{{proc.pid}}/status") as f:
            dot_rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM"))
    render.dot_process.close()
    with open({dot_file!r}, "w") as f:
        f.write(dot)
    print(json.dumps({{"nodes": trace.n, "drawn": len(render.drawn_nodes(trace, summary)),
                      "summary": summary is not None, "picture": "<img" in page,
                      "seconds": took,
                      "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "rss_before": before * 1024,
                      "dot_rss": dot_rss}}))
""")

NODE = """
import { instance } from %s;
import { readFileSync } from "node:fs";
const viz = await instance();
const dot = readFileSync(process.argv[2], "utf8");
const start = performance.now();
let ok = true;
try { viz.renderString(dot, { format: "svg", engine: "dot" }); } catch { ok = false; }
console.log(JSON.stringify({ seconds: (performance.now() - start) / 1000, ok,
                             rss: process.resourceUsage().maxRSS * 1024 }));
"""


def kernel_row(nodes: int, dot_file: Path, shape: str) -> dict:
    code = CHILD.format(root=str(ROOT), nodes=nodes, dot_file=str(dot_file), shape=shape)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def browser_row(dot_file: Path, work: Path) -> dict | None:
    node = shutil.which("node")
    if node is None:
        return None
    viz = work / "viz.mjs"
    if not viz.exists():
        viz.write_bytes(gzip.decompress((ROOT / "gradmagic/views/static/viz.js.gz").read_bytes()))
        (work / "layout.mjs").write_text(NODE % json.dumps(viz.as_uri()))
    out = subprocess.run(
        [node, str(work / "layout.mjs"), str(dot_file)], capture_output=True, text=True, timeout=600
    )
    if out.returncode:
        return {"seconds": float("nan"), "ok": False, "rss": 0}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> bool:
    argv = sys.argv[1:] if argv is None else argv
    sizes = [s for s in SIZES if s <= 100_000] if "--quick" in argv else SIZES
    print(
        "drawing a graph with --max-nodes = its size (the kernel: summary, DOT, dot; "
        "the browser: viz.js in node)"
    )
    print(
        f"{'shape':>5} {'nodes':>10} {'drawn':>6} {'summary':>8} {'kernel s':>9} "
        f"{'kernel MB':>10} {'dot MB':>7} {'browser s':>10} {'browser MB':>11}"
    )
    met = True
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for shape, nodes in [(shape, n) for shape in ("loop", "tree") for n in sizes]:
            dot_file = work / f"graph{nodes}.dot"
            k = kernel_row(nodes, dot_file, shape)
            b = browser_row(dot_file, work)
            bs = f"{b['seconds']:10.2f} {b['rss'] / 1e6:11.0f}" if b else f"{'-':>10} {'-':>11}"
            print(
                f"{shape:>5} {k['nodes']:>10,} {k['drawn']:>6} {'yes' if k['summary'] else 'no':>8} "
                f"{k['seconds']:9.2f} {k['rss'] / 1e6:10.0f} {k['dot_rss'] / 1e6:7.0f} {bs}"
            )
            worst_s = max(k["seconds"], b["seconds"] if b else 0)
            # the kernel's growth for drawing (its own graph is the cell's, not the drawing's)
            worst_b = max(k["rss"] - k["rss_before"], k["dot_rss"], b["rss"] if b else 0)
            met = (
                met
                and k["picture"]
                and worst_s <= SECONDS
                and worst_b <= BYTES
                and (b is None or b["ok"])
            )
    print(
        f"target: every drawing within {SECONDS:g} s and {BYTES >> 20:,} MB: "
        f"{'met' if met else 'not met'}"
    )
    return met


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
