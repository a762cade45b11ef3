"""What recording a PyTorch cell costs, and how big its display gets (CPU, one thread).

1. **MLP with BatchNorm** (the makemore-style training step of ``tests/torch_cells.py``:
   batch 32, embedding 10, 64 hidden units, a hand-written BatchNorm, tanh, cross-entropy,
   ``loss.backward()`` and an SGD update in place). The reference is the cell's own code
   run plainly (compiled once, ``exec``): forward, backward and update. Against it: the
   cell recorded with its statistics, names, module groups and health signals
   (``%%autograd -q --no-check``, as :func:`gradmagic.notebook.torchcell.run` does it, with
   its parse and compile; target <= 3x), the same with the float64 checks (``-q``; the
   checks' own time over the recorded run's, target <= 2x) and the default cell (the
   checks and the display the magic shows: static copy and live view; target <= 10x).
   What a recording costs at least is timed too: under a ``TorchFunctionMode`` that does
   nothing, one that appends a tuple per call, the recorder without its end, and the least
   recording with summaries. The same step with 200 and 512 hidden units (batch 32 and
   256) shows how the ratio moves with size.
2. **GPTs** (forward and loss in the cell, the gradients computed by the recorder), against
   the plain forward + ``backward()``: 2 blocks, d 64, 4 heads, seq 32 (batch 4; targets:
   recording <= 1.5x, the default cell <= 5x), and 12 tiny blocks (307 ops, few numbers:
   the per-op cost). The line after each says what the checks covered.
3. **Payload**: the static display's HTML (graph image, tables) and the live view's JSON
   (boxes, tables, the backward stepper's nodes) for GPTs of 2 to 48 blocks: both must stop
   growing once the tables are cut, the blocks folded and the stepper full.

The targets are printed with "met" or "MISSED", not enforced (the machine is shared).
Times are the best of round-robin repeats with the GC paused (``timing.best``).
Run: ``python benchmarks/bench_torch.py`` (needs torch).
"""

from __future__ import annotations

import sys
from pathlib import Path

from timing import best

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

# the targets, over the plain step in the same process: the default cell (checks and the
# display, as the magic shows it), the recording alone (-q --no-check), the checks alone
DEFAULT = {"mlp": 10.0, "gpt": 5.0}
RECORDED = {"mlp": 3.0, "gpt": 1.5}
CHECKS = 2.0  # the checks over the recorded run (forward and backward, recorded)
SMALL_GPT = "GPT(vocab=65, block=32, d=64, heads=4, layers=2)"
GPT_BATCH = 4
GPT_TOKENS = f"({GPT_BATCH}, 32)"


def main() -> int:
    try:
        import torch
    except ImportError:
        print("bench_torch: torch is not installed; skipped")
        return 0
    import torch_cells as cells
    from gradmagic.analysis.options import Options
    from gradmagic.notebook import torchcell
    from gradmagic.views import torchview

    torch.set_num_threads(1)
    quiet = Options(no_check=True, quiet=True)
    checked = Options(quiet=True)

    # 1. the MLP step
    ns: dict = {}
    exec(cells.MLP_SETUP, ns)
    step = (
        "\n".join(line for line in cells.MLP_STEP.splitlines() if not line.startswith("log.append"))
        + "\n"
    )
    code = compile(step, "<plain>", "exec")
    from torch.overrides import TorchFunctionMode

    class Empty(TorchFunctionMode):  # what any torch-level recording costs before it records
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def empty():
        with Empty():
            exec(code, ns)

    class Append(TorchFunctionMode):  # the least a recording can do: one tuple per call
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.calls.append((func, args, kwargs, out))
            return out

    def append_only():
        mode = Append()
        mode.calls = []
        with mode:
            exec(code, ns)

    import numpy as np

    class Least(TorchFunctionMode):  # keeps each output and hooks its gradient, nothing else
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if type(out) is torch.Tensor:
                self.outs.append(out)
                if out.requires_grad:
                    out.register_hook(self.grads.append)
            return out

    def least():  # the recording the target allows for: no names, lines, groups, health
        mode = Least()
        mode.outs, mode.grads = [], []
        with mode:
            exec(code, ns)
        for tensors in (mode.outs, mode.grads):  # one numpy pass of five statistics
            x = torch.cat([t.detach().reshape(-1).double() for t in tensors]).numpy()
            sizes = np.array([t.numel() for t in tensors])
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            mean = np.add.reduceat(x, starts) / sizes
            centred = x - np.repeat(mean, sizes)
            np.add.reduceat(centred * centred, starts)
            np.maximum.reduceat(np.abs(x), starts)
            np.add.reduceat(x == 0, starts)
            np.add.reduceat(~np.isfinite(x), starts)

    import ast

    from gradmagic.analysis import torchrun

    assigns = torchrun.assigned_names(ast.parse(step))

    def watched():  # the recorder while the cell runs, without what it does at the end
        recorder = torchrun.Recorder("<plain>", ns, assigns)
        with recorder:
            exec(code, ns)
        recorder.remove_hooks()

    mlp = best(
        {
            "plain": lambda: exec(code, ns),
            "empty mode": empty,
            "append only": append_only,
            "watched": watched,
            "least": least,
            "recorded": lambda: torchcell.run(step, ns, quiet),
            "checked": lambda: torchcell.run(step, ns, checked),
            "default": lambda: _shown(torchcell.run(step, ns, Options())),
        },
        repeat=30,
    )
    run = torchcell.run(step, ns, quiet)
    print(f"MLP + BatchNorm step ({len(run.graph)} ops in the graph, {len(run.ops)} recorded):")
    print(f"  plain cell (forward, backward, update)  {mlp['plain'] * 1e3:8.2f} ms")
    for key, what in (
        ("empty mode", "under an empty TorchFunctionMode        "),
        ("append only", "... appending one tuple per call        "),
        ("watched", "under the recorder, nothing at the end  "),
        ("least", "... hooking gradients, numpy statistics "),
    ):
        print(f"  {what}{mlp[key] * 1e3:8.2f} ms  {mlp[key] / mlp['plain']:5.2f}x")
    end = mlp["recorded"] - mlp["watched"]
    print(
        f"  of which the end of the run             {end * 1e3:8.2f} ms  "
        f"{end / mlp['plain']:5.2f}x  (names, statistics, health, backward order)"
    )
    _targets(mlp, DEFAULT["mlp"], RECORDED["mlp"])
    stages = _end_stages(torchcell, torchrun, step, ns, quiet)
    print("  the end of the run by stage (median of the calls, cold as in a run):")
    for what, seconds in stages.items():
        print(f"    {what:38s} {seconds * 1e6:7.0f} us  {seconds / mlp['plain']:5.2f}x")

    # 1b. the same step at bigger sizes: the statistics grow with the numbers, the rest not
    print("  the same step, bigger (recorded + summaries / plain):")
    for hidden, rows in ((200, 32), (512, 256)):
        big: dict = {}
        exec(
            cells.MLP_SETUP.replace(
                "n_hidden, batch = 27, 3, 10, 64, 32",
                f"n_hidden, batch = 27, 3, 10, {hidden}, {rows}",
            ),
            big,
        )
        times = best(
            {
                "plain": lambda: exec(code, big),
                "recorded": lambda: torchcell.run(step, big, quiet),
            },
            repeat=10,
        )
        print(
            f"    {hidden:3d} hidden units, batch {rows:3d}: plain {times['plain'] * 1e3:6.2f} ms, "
            f"recorded {times['recorded'] * 1e3:6.2f} ms  {times['recorded'] / times['plain']:5.2f}x"
        )

    # 2. the GPTs: the small one of the targets, and 12 tiny blocks (many ops, few numbers)
    for title, model, tokens in (
        (f"GPT, 2 blocks, d 64, 4 heads, seq 32, batch {GPT_BATCH}", SMALL_GPT, GPT_TOKENS),
        ("GPT, 12 blocks, d 8, 2 heads, seq 8, batch 2", "GPT()", "(2, 8)"),
    ):
        ns = {}
        exec(
            cells.GPT_SETUP.replace("model = GPT()", f"model = {model}").replace("(2, 8)", tokens),
            ns,
        )
        gpt_code = compile(cells.GPT_CELL + "loss.backward()\n", "<plain>", "exec")

        def plain_gpt(ns=ns, gpt_code=gpt_code):
            exec(gpt_code, ns)
            ns["model"].zero_grad(set_to_none=True)

        def cell(options, ns=ns):
            return torchcell.run(cells.GPT_CELL, ns, options)

        gpt = best(
            {
                "plain": plain_gpt,
                "recorded": lambda cell=cell: cell(quiet),
                "checked": lambda cell=cell: cell(checked),
                "default": lambda cell=cell: _shown(cell(Options())),
            },
            repeat=10,
        )
        run = cell(quiet)
        print(f"{title} ({len(run.graph)} ops):")
        print(f"  plain forward + backward                {gpt['plain'] * 1e3:8.2f} ms")
        _targets(gpt, DEFAULT["gpt"], RECORDED["gpt"])
        print("  " + _sampled(cell(checked)))

    # 3. payload
    import json

    print("Display payload by model size (static HTML; the live view's JSON):")
    for layers in (2, 12, 48):
        ns = {}
        exec(cells.GPT_SETUP.replace("model = GPT()", f"model = GPT(layers={layers})"), ns)
        run = torchcell.run(cells.GPT_CELL, ns, quiet)
        page = torchview.html_view(run)
        live = json.dumps(torchview.payload(run), separators=(",", ":"))
        print(
            f"  {layers:3d} blocks, {len(run.graph):5d} ops: {len(page):8,d} bytes; "
            f"{len(live):8,d} bytes"
        )
    return None  # the target is printed, not enforced (as bench_run's)


def _shown(run) -> None:
    """The display the magic shows of ``run``: its static copy and its live view."""
    from gradmagic.views import widget

    widget.mimebundle(run, publish=lambda bundle: None)


def _verdict(ratio: float, bound: float) -> str:
    return f"target <= {bound:g}x: {'met' if ratio <= bound else 'MISSED'}"


def _targets(times: dict, default: float, recorded: float) -> None:
    """The recorded, checked and default cells against the plain step, with their targets."""
    plain = times["plain"]
    for key, what, bound in (
        ("recorded", "recorded + summaries (-q --no-check)   ", recorded),
        ("checked", "... with both float64 checks (-q)      ", None),
        ("default", "the default cell (checks, display)     ", default),
    ):
        ratio = times[key] / plain
        said = f"  ({_verdict(ratio, bound)})" if bound else ""
        print(f"  {what}{times[key] * 1e3:8.2f} ms  {ratio:5.2f}x{said}")
    checks = (times["checked"] - times["recorded"]) / times["recorded"]
    print(
        f"  the checks over the recorded run         {checks:13.2f}x  ({_verdict(checks, CHECKS)})"
    )


def _sampled(run) -> str:
    """What the checks of ``run`` covered, as their notes say."""
    notes = run.checks["notes"]
    whole = run.checks["whole"]
    said = f"whole cell: {whole['status']}; {len(run.checks['ops'])} of {len(run.graph)} ops"
    return said + (f"; {notes[0]}" if notes else "")


def _end_stages(torchcell, torchrun, step, ns, options, repeat: int = 30) -> dict:
    """Median seconds of each stage of ``torchrun.finish`` over ``repeat`` runs of the cell:
    the stages are wrapped with a timer where finish looks them up."""
    import gc
    import statistics
    import time

    names = {
        "_snapshot": "names, shapes, modules (snapshot)",
        "summarise": "statistics of values, gradients, updates",
        "keep_full": "values kept whole",
        "backward_order": "backward order (the stepper)",
        "probes": "health probes",
        "health": "health signals",
    }
    times: dict = {label: [] for label in names.values()}
    kept = {name: getattr(torchrun, name) for name in names}

    def timer(name, f):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                times[names[name]].append(time.perf_counter() - start)

        return timed

    try:
        for name, f in kept.items():
            setattr(torchrun, name, timer(name, f))
        for _ in range(repeat):
            gc.collect()
            gc.disable()
            try:
                torchcell.run(step, ns, options)
            finally:
                gc.enable()
    finally:
        for name, f in kept.items():
            setattr(torchrun, name, f)
    return {label: statistics.median(t) for label, t in times.items() if t}


if __name__ == "__main__":
    sys.exit(main())
