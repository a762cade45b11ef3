"""Signs of a sick network, read from a recorded PyTorch run.

:func:`probes` lists the few reductions the signals need beyond the run's statistics (dead
ReLU units, saturated tanh units), as tensors on their device; :func:`~gradmagic.analysis.torchrun.summarise` reads them back with the statistics,
in the same synchronisation. :func:`health` then gathers, for the ops the target depends on:

- ``nonfinite``: the first op whose value holds a nan or inf (with finite inputs), and the
  first one backward reaches whose gradient does;
- ``dead``: ReLU outputs with units that are zero for every example; ``saturated``: tanh and
  sigmoid outputs with units saturated for every example;
- ``params``: each parameter's gradient-to-data ratio (std of the gradient over std of the
  data) and, when the cell updated it in place, its update-to-data ratio (about 1e-3 is
  the usual healthy size);
- ``depth``: the gradient's size along the graph, parameters in the order the cell uses them;
- ``cuts``: where a value that depends on a parameter enters the graph without its gradient
  (made under ``no_grad``, ``detach()``, ``.data``); ``unreached`` values no gradient
  reached, ``zero`` ones whose gradient is all zeros; ``inplace`` writes;
- ``read_written``: ops that read a value after it was written over through ``.data`` or a
  detached alias (the value kept and shown is what its maker gave, not what they read);
- ``marks``: value index → short words to show at its node.

Why its own: these are signals of modules, units and parameters, which only a recorded
PyTorch run has.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

__all__ = ["probes", "health", "HEALTHY_UPDATE", "SATURATING", "SATURATED", "RELU"]

SATURATING = {"tanh": "tanh", "tanh_": "tanh", "sigmoid": "sigmoid", "sigmoid_": "sigmoid"}
SATURATED = 0.97  # |tanh| (or sigmoid within 0.03 of 0 or 1) past this is saturated
RELU = frozenset({"relu", "relu_"})
HEALTHY_UPDATE = 1e-3  # update std / data std of a parameter in a well-tuned step (about)
DEAD = 0.99  # |tanh| above this for every example: a dead tanh unit


def probes(rec, graph) -> list:
    """[(key, numbers)] the signals need: for a tensor on a GPU, a tensor not yet read back
    (read with the statistics); for one in the CPU's memory, a function that gives numpy's
    answer (called with the statistics' own numpy work, which has numpy's code warm)."""
    out = []
    for k in graph:
        op = rec.ops[k]
        kind = "dead" if op.name in RELU else SATURATING.get(op.name)
        if kind is None:
            continue
        t = rec.held(op.outputs[0]).detach()
        if t.ndim < 2 or not t.is_floating_point():
            continue
        flat = t.reshape(t.shape[0], -1)
        if flat.device.type == "cpu" and flat.dtype in _NUMPY_FLOATS:
            # numpy reads it in place, when the statistics are read (see _units_hit)
            share = partial(_units_hit, flat.numpy(), kind)
        else:
            units = _hit(flat, kind).all(0)
            share = (units.sum() / units.shape[0]).to(torch.float64).reshape(1)
        out.append((("dead" if kind == "dead" else "saturated", op.outputs[0]), share))
    return out


def _hit(flat, kind):
    """Where a unit is dead (a ReLU's zero) or saturated (tanh, sigmoid), entry by entry."""
    if kind == "dead":
        return flat == 0
    if kind == "tanh":
        return abs(flat) > DEAD
    return (flat < 1 - DEAD) | (flat > DEAD)


def _units_hit(flat: np.ndarray, kind: str) -> np.ndarray:
    """The share of units (columns) hit for every example (row), as a 1-element array."""
    units = _hit(flat, kind).all(0)
    return np.array([np.count_nonzero(units) / max(units.size, 1)])  # (not .mean(): slower)


_NUMPY_FLOATS = (torch.float64, torch.float32, torch.float16)


def health(run, rec, probed: dict) -> dict:
    """The signals (see the module doc) from the run's statistics and ``probed`` (key →
    numbers read back)."""
    marks: dict = {}

    def mark(i, word):
        marks.setdefault(i, []).append(word)

    first_value, first_grad = _first_nonfinite(run, mark)
    dead, saturated = _units(run, probed, mark)
    params = _params(run, probed, mark)
    first_use: dict[int, int] = {}  # value index → the first op that read it
    for k in run.graph:
        for i in run.ops[k].inputs:
            first_use.setdefault(i, k)
    depth = [
        {"value": p["value"], "name": p["name"], "grad_std": float(run.grad_stats[p["value"], 1])}
        for p in sorted(params, key=lambda p: first_use.get(p["value"], len(run.ops)))
    ]
    cuts = _cuts(run, rec, mark)
    unreached, zero = ([], []) if run.no_gradients else _reach(run, mark)
    inplace = [k for k in run.graph if run.ops[k].inplace]
    for k in inplace:
        mark(run.ops[k].outputs[0], "written in place")
    read_written = _read_written(run, rec, mark)
    return {
        "nonfinite": {"value": first_value, "grad": first_grad},
        "dead": dead,
        "saturated": saturated,
        "params": params,
        "depth": depth,
        "cuts": cuts,
        "unreached": unreached,
        "zero": zero,
        "inplace": inplace,
        "read_written": read_written,
        "marks": marks,
    }


def _read_written(run, rec, mark) -> list:
    """The ops of the graph that read a value after it was written over out of the record's
    sight (through ``.data`` or a detached alias): what is shown of that value is its maker's
    output, not what these ops read, so both are marked."""
    found, written = [], set()
    for k in run.graph:
        over = [i for i in run.ops[k].inputs if rec.written_at.get(i, k + 1) <= k]
        if not over:
            continue
        found.append(k)
        mark(run.ops[k].outputs[0], "read a value written over")
        for i in over:
            if i not in written:
                written.add(i)
                mark(i, "written over before read")
    return found


def _first_nonfinite(run, mark) -> tuple:
    """The first op whose value holds a nan or inf (from finite inputs), and the first one
    backward reaches whose gradient does."""
    stats, grads = run.stats, run.grad_stats
    first_value = first_grad = None
    for k in run.graph:
        op = run.ops[k]
        out = op.outputs[0]
        bad_out = stats[out, 4] > 0 and not op.deliberate_inf
        bad_in = any(stats[i, 4] > 0 for i in op.inputs)
        if bad_out and not bad_in:
            first_value = {"op": k, "value": out, "line": op.line, "name": op.name}
            mark(out, "first nan/inf")
            break
    for k in reversed(run.graph):
        op = run.ops[k]
        for i in op.inputs:
            if grads[i, 4] > 0 and not grads[op.outputs[0], 4] > 0:
                first_grad = {"op": k, "value": i, "line": op.line, "name": op.name}
                mark(i, "first nan/inf gradient")
                break
        if first_grad:
            break
    return first_value, first_grad


def _units(run, probed, mark) -> tuple:
    """(dead ReLU outputs, saturated tanh/sigmoid outputs): value → the share of units."""
    dead, saturated = {}, {}
    for (kind, i), value in probed.items():
        if kind == "dead" and value[0] > 0:
            dead[i] = float(value[0])
            mark(i, f"{value[0]:.0%} dead units")
        elif kind == "saturated" and value[0] > 0:
            saturated[i] = float(value[0])
            mark(i, f"{value[0]:.0%} units saturated")
    with np.errstate(invalid="ignore"):
        mostly = np.flatnonzero(run.stats[:, 5] > 0.5)
    for i in mostly.tolist():
        if i not in saturated:
            mark(i, f"{run.stats[i, 5]:.0%} saturated")
    return dead, saturated


def _params(run, probed, mark) -> list:
    """Each parameter's gradient-to-data and update-to-data ratios."""
    params: list[dict] = []
    if not run.params:
        return params
    with np.errstate(all="ignore"):  # (a zero-spread parameter: an infinite ratio)
        ratios = run.grad_stats[run.params, 1] / run.stats[run.params, 1]
    for i, ratio in zip(run.params, ratios.tolist()):
        update = probed.get(("update", i))
        ratio_update = float(update[0] / update[1]) if update is not None and update[1] else None
        params.append(
            {
                "value": i,
                "name": run.name_of(i),
                "shape": run.shapes[i],
                "grad_to_data": float(ratio),
                "update_to_data": ratio_update,
            }
        )
        if ratio_update is not None and not (
            HEALTHY_UPDATE / 30 <= ratio_update <= HEALTHY_UPDATE * 30
        ):
            mark(i, f"update/data {ratio_update:.1e}")
    return params


def _cuts(run, rec, mark) -> list:
    """Where a value that depends on a parameter enters the graph without its gradient
    (a parameter written in place by an optimizer's step is a parameter still)."""
    in_graph, params = set(run.graph), set(run.params)
    cuts = []
    for k in run.graph:
        op = run.ops[k]
        for i in op.inputs:
            j = run.producer[i]
            if j < 0 or j in in_graph or (i in params and run.ops[j].inplace):
                continue
            found = _cut(run, j)
            if found is not None:
                how, line = found
                cuts.append({"value": i, "op": k, "how": how, "line": line})
                mark(i, f"cut: {how}")
    for i in run.leaves:  # x.data: the same numbers, without the gradient
        alias = rec.data_of.get(id(rec.tensors[i]))
        if (
            alias is not None
            and alias[0] is rec.tensors[i]
            and alias[2] == ".data"
            and alias[1].requires_grad
        ):
            cuts.append({"value": i, "op": None, "how": ".data", "line": None})
            mark(i, "cut: .data")
    return cuts


def _reach(run, mark) -> tuple:
    """(values no gradient reached, values whose gradient is all zeros)."""
    unreached, zero = [], []
    for i in sorted({i for k in run.graph for i in run.ops[k].outputs} | set(run.params)):
        if not run.requires_grad[i]:
            continue
        if not run.reached[i]:
            unreached.append(i)
            mark(i, "no gradient reached it")
        elif run.grad_stats[i, 2] == 0:
            zero.append(i)
            mark(i, "gradient all zero")
    return unreached, zero


def _cut(run, k):
    """(how, line) of the place upstream of op ``k`` (an op off the graph) where a value that
    depends on a parameter lost its gradient (``detach``, ``no_grad``), or None."""
    for j in _upstream(run, k):
        op = run.ops[j]
        if (op.name in ("detach", "detach_") or not op.grad_enabled) and any(
            run.requires_grad[i] for m in _upstream(run, j) for i in run.ops[m].inputs
        ):
            return (op.name if op.grad_enabled else "no_grad"), op.line
    return None


def _upstream(run, k, limit: int = 10000):
    """Op ``k`` and the ops it read from, through any ops (at most ``limit`` of them)."""
    todo, seen = [k], set[int]()
    while todo and len(seen) < limit:
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        yield j
        todo.extend(p for p in (run.producer[i] for i in run.ops[j].inputs) if p >= 0)
