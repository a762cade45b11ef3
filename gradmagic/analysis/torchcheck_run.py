"""The numerical checks of a recorded PyTorch run, in float64, never re-running the cell.

Both replay the recorded ops (the same functions, the same arguments, the tensors replaced by
float64 copies), so the cell's tensors, random numbers and modules are untouched:

- the **whole cell**: along one random direction ``v`` over every parameter, the analytic
  directional derivative ``sum <grad, v>`` (autograd on the replay) against the central
  difference ``(f(x + eps v) - f(x - eps v)) / 2 eps``;
- **each op** on its own: for random ``u`` (output) and ``v`` (inputs), ``<u, J v>`` from
  autograd's vector-Jacobian product against a central difference of ``<u, op(x + eps v)>``.
  A wrong backward is caught at its op.

The whole-cell check's analytic side is the gradient the run shows (what the cell's backward
gave), so it costs two float64 forward replays; where that gradient is not at hand (a random
op on the path, a low-precision gradient), autograd runs on a third replay. Both checks spend
a budget relative to the recorded step (:data:`BUDGET` times its forward and backward, at
least :data:`FLOOR` seconds): the ops are sampled within it, custom ``autograd.Function`` s
first, then one op of each kind not yet checked, then the rest, in the order they ran; the
notes say how many were checked and which kinds were left.

Ops whose result is random (dropout, a recurrent layer's dropout while training) are taken
as recorded by the whole-cell check; ops whose inputs were written over in place after they ran are not checked one by
one (what they read is gone), and say so. Every replay draws its random numbers from a seed of
its own, the same for each of an op's calls, and the cell's generators are left as they were.

Why not :mod:`~gradmagic.analysis.replay`: that replays gradmagic's own columns; here torch's
recorded calls are called again, with autograd on the replay. The results become rows of
the shared :class:`~gradmagic.analysis.check.CheckReport` (``TorchRun.check()``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .options import DEFAULTS
from .torchgraph import listed
from .torchcalls import _TENSOR, CLOCK, RANDOM, unflatten, version_of

__all__ = ["check", "replay", "rng_kept", "BUDGET", "FLOOR", "EPS"]

EPS = DEFAULTS.eps  # float64 step of both checks (unless the run says)
BUDGET = 1.5  # the checks' time over the recorded step's (its forward and backward)
FLOOR = 0.01  # seconds the checks may take whatever the step's time (a tiny cell's)
WHOLE_COST = 1  # the whole check's time over the step's: two float64 forward replays
OP_ELEMENTS = 1 << 22  # numbers in an op's tensors past which it is not checked alone
KINKS = frozenset(
    (
        "relu relu_ abs max min clamp amax amin maximum minimum hardtanh leaky_relu sort topk "
        "where round floor ceil sign max_pool2d cummax median"
    ).split()
)
_LOW_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_TO_LOW_FLOAT = frozenset({"float", "half", "bfloat16"})  # methods that cast to one of them


def _f64(t):
    t = t.detach()
    return t.to(torch.float64) if t.is_floating_point() else t


def _call(op, tensors):
    """Op ``op`` called again with ``tensors`` in place of the ones it was given (and float64
    in place of a lower float dtype argument)."""
    if op.name in _TO_LOW_FLOAT and tensors and tensors[0].is_floating_point():
        return tensors[0]  # (x.float() of a float64 replay stays float64)
    it = iter(tensors)
    leaves = [
        next(it)
        if x is _TENSOR
        else (torch.float64 if isinstance(x, torch.dtype) and x in _LOW_FLOATS else x)
        for x in op.consts
    ]
    args, kwargs = unflatten(leaves, op.spec)
    out = op.func(*args, **kwargs)
    if out is None and op.inplace and tensors:  # x[i] = v: what it made is x (the replay's copy)
        return tensors[0]
    return out


# recurrent layers take their dropout probability and then the training flag
_RECURRENT = frozenset({"lstm", "gru", "rnn_tanh", "rnn_relu"})


def _is_random(op) -> bool:
    """The op's result depends on the random generator: a random op, or a recurrent layer
    with dropout between its layers while training."""
    if op.name in RANDOM:
        return True
    if op.name not in _RECURRENT:
        return False
    c = op.consts
    return any(type(c[i]) is float and c[i] > 0 and c[i + 1] is True for i in range(len(c) - 1))


def rng_kept():
    """A context in which torch's generators (the CPU's, and each GPU's in use) may be drawn
    from: on leaving it they are as they were."""
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    return torch.random.fork_rng(devices=list(range(torch.cuda.device_count())) if cuda else [])


def _seeded(f, *args):
    """``f(*args)`` with torch's generators seeded the same way each time, so an op that
    draws random numbers draws the same ones on each call (:func:`check` leaves the
    generators as they were)."""
    # (the generators in use only: torch.manual_seed also queues a seed, with a stack
    # trace, for every GPU kind not started, which costs far more than the replay)
    torch.default_generator.manual_seed(0)
    if _CUDA and torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(0)
    return f(*args)


_CUDA = torch.cuda.is_available()


def replay(run, rec, leaf_values: dict):
    """The target's value computed again from ``leaf_values`` (value index → tensor) through
    the ops of ``run.graph``; every other input as recorded, in float64."""
    env = dict(leaf_values)
    for k in run.graph:
        op = rec.ops[k]
        if _is_random(op):
            for j in op.outputs:
                env[j] = _f64(rec.held(j))
            continue
        ins = []
        for pos, i in enumerate(op.inputs):
            x = env.get(i)
            if x is None:
                x = env[i] = _f64(rec.held(i))
            if pos == 0 and op.inplace:
                x = x.clone()
            ins.append(x)
        out = _call(op, ins)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        outs = [o for o in outs if isinstance(o, torch.Tensor)]
        for j, o in zip(op.outputs, outs):
            env[j] = o
    return env[run.target]


class _Directions:
    """Random directions for the checks (float64, on the CPU), cut from one buffer of normal
    numbers drawn in float32: drawing float64 normals one tensor at a time costs more than
    the replays of most ops."""

    POOL = 1 << 16

    def __init__(self, gen):
        self.gen, self.pool, self.at = gen, torch.empty(0, dtype=torch.float64), 0

    def like(self, t):
        n = t.numel()
        if n > self.POOL:
            return torch.randn(t.shape, generator=self.gen).to(torch.float64)
        if self.at + n > self.pool.numel():
            self.pool = torch.randn(self.POOL, generator=self.gen).to(torch.float64)
            self.at = 0
        self.at += n
        return self.pool[self.at - n : self.at].view(t.shape)


def check(run, rec, eps=None, budget: float | None = None, ran: float = 0.0) -> dict:
    """``{"whole": {...}, "ops": {op index: {...}}, "notes": [...]}`` (see the module doc).

    ``ran``: the seconds of the recorded step (its forward and backward). The checks may
    take ``budget`` seconds, by default :data:`BUDGET` times ``ran`` and at least
    :data:`FLOOR`: the whole-cell check, about :data:`WHOLE_COST` times the step, is
    skipped when it would not fit; an op is not checked when its check, predicted from its
    numbers and the checks timed so far, would not fit in what is left. An op whose tensors hold more than :data:`OP_ELEMENTS` numbers is not checked
    alone (one replay of it could outlast the budget). Torch's generators are as they were
    on return.

    Each result has ``analytic``, ``numeric``, ``error`` (relative) and ``status``:
    ``pass``, ``fail``, ``kink`` (a mismatch at an op with a kink), ``skipped`` (with
    ``why``). A pass needs ``|a - n| <= atol + rtol |n|`` with the run's tolerances.
    """
    eps = eps or run.options.eps
    if budget is None:
        budget = max(BUDGET * ran, FLOOR) if BUDGET else 0.0
    atol, rtol = run.options.atol, run.options.rtol
    # (a generator of its own: the cell's random numbers stay as they are)
    gen = _Directions(torch.Generator().manual_seed(0))
    start = CLOCK()
    with rng_kept():
        if ran * WHOLE_COST > budget:
            whole = {
                "status": "skipped",
                "why": f"the cell took {ran:.2g} s; replaying it in float64 would take about "
                f"{ran * WHOLE_COST:.2g} s, over the checks' {budget:.2g} s",
            }
        else:
            whole = _whole(run, rec, eps, atol, rtol, gen)
        ops, notes = _each_op(run, rec, (eps, atol, rtol, gen), budget, start)
    return {"whole": whole, "ops": ops, "notes": notes}


def _sample(run, rec) -> list:
    """The graph's ops in the order they are checked: custom Functions, then the first op
    of each name, then the others, each group in the order they ran."""
    seen: set = set()
    first = []
    for k in run.graph:
        name = rec.ops[k].name
        if not rec.ops[k].custom and name not in seen:
            seen.add(name)
            first.append(k)
    rank = dict.fromkeys(first, 1)
    return sorted(run.graph, key=lambda k: (0 if rec.ops[k].custom else rank.get(k, 2), k))


def _each_op(run, rec, how: tuple, budget: float, start: float) -> tuple:
    """``(op index → its result, notes)``: the ops of :func:`_sample`'s order whose check
    is predicted to fit in what is left of the budget; an op like one checked takes its
    result. A check's time is predicted from its op's numbers (:func:`_Predicted`)."""
    ops: dict[int, Any] = {}
    notes = []
    alike: dict[tuple, int] = {}  # an op's kind → the first op of that kind
    sizes = {k: _numbers(run, rec.ops[k]) for k in run.graph}
    guess = _Predicted(CLOCK() - start, sum(sizes.values()))
    left = []
    for k in _sample(run, rec):
        key = _kind(run, rec, k)
        first = alike.get(key)
        if first is not None:  # the same op on the same shapes in the same kind of module
            ops[k] = dict(ops[first], like=first)
            continue
        now = CLOCK()
        if now - start + guess(sizes[k]) >= budget:
            left.append(k)
            continue
        alike[key] = k
        ops[k] = _one(run, rec, k, *how)
        guess.timed(sizes[k], CLOCK() - now)
    if left:
        notes.append(_left(run, rec, left, ops, budget))
    same = sum(1 for r in ops.values() if "like" in r)
    if same:
        notes.append(
            f"{same} op{' repeats' if same == 1 else 's repeat'} an op already checked "
            "(the same function on the same shapes in the same kind of module, as in "
            "repeated blocks): each takes that op's result"
        )
    return ops, notes


def _numbers(run, op) -> int:
    return sum(math.prod(run.shapes[i]) for i in (*op.inputs, *op.outputs))


class _Predicted:
    """An op check's seconds from its op's numbers: a fixed part (the fastest check so far)
    and a part per number (the most any check took per number beyond the fixed part).
    Until one is timed, the whole-cell check, which ran every op twice, stands for them:
    an op check runs its op about five times (three calls and a backward)."""

    def __init__(self, whole: float, numbers: int):
        self.base, self.rate = 0.0, 2.5 * whole / max(numbers, 1)
        self.seen: list[tuple[int, float]] = []  # (numbers, seconds) of each check timed

    def __call__(self, numbers: int) -> float:
        return self.base + self.rate * numbers

    def timed(self, numbers: int, seconds: float) -> None:
        self.seen.append((numbers, seconds))
        self.base = min(t for _, t in self.seen)
        self.rate = max((t - self.base) / max(n, 1) for n, t in self.seen)


def _left(run, rec, left: list, checked: dict, budget: float) -> str:
    """What the op checks left within their ``budget``, said as a sample."""
    total = len(left) + len(checked)
    counts: dict[str, int] = {}
    for k in sorted(left):
        counts[rec.ops[k].name] = counts.get(rec.ops[k].name, 0) + 1
    named = [f"{n} x{c}" if c > 1 else n for n, c in counts.items()]
    seen = {rec.ops[k].name for k in checked}
    never = [n for n in counts if n not in seen]
    return (
        f"{len(left)} of {total} ops were not checked one by one (they would go past the "
        f"checks' budget of {budget * 1e3:.3g} ms: {BUDGET:g}x the step, at least "
        f"{FLOOR * 1e3:g} ms): the {len(checked)} checked are a sample, one op of each "
        f"function first; left: {listed(named, 8)}"
        + (
            f"; functions never checked: {listed(never, 8)}"
            if never
            else "; each of these functions was checked at another op"
        )
    )


def _kind(run, rec, k) -> tuple:
    op = rec.ops[k]
    if op.custom:
        return (k,)  # a custom Function's backward may depend on anything: each on its own
    return (
        op.name,
        tuple(run.shapes[i] for i in op.inputs),
        tuple(run.dtypes[i] for i in op.inputs),
        tuple(type(rec.modules[m]).__name__ for m in op.module),
        op.consts_key,
    )


def _verdict(a, n, atol, rtol, kinked=False) -> dict:
    if not (math.isfinite(a) and math.isfinite(n)):  # (an overflow, or inf times zero)
        return {
            "analytic": a,
            "numeric": n,
            "status": "skipped",
            "why": f"not finite in float64 (analytic {a:.6g}, numeric {n:.6g}): no verdict",
        }
    err = abs(a - n)
    ok = err <= atol + rtol * abs(n)
    rel = err / max(abs(n), abs(a), 1e-300)
    status = "pass" if ok else ("kink" if kinked else "fail")
    return {"analytic": a, "numeric": n, "error": rel, "status": status}


def _whole(run, rec, eps, atol, rtol, gen) -> dict:
    params = [i for i in run.params if rec.tensors[i].is_floating_point()]
    # (a complex parameter is not moved by a real direction: named, so that a pass is not
    # read as covering it)
    left_out = [run.name_of(i) for i in run.params if not rec.tensors[i].is_floating_point()]
    if not params:
        why = "no parameter requires a gradient"
        if left_out:
            why = f"its parameters are complex ({listed(left_out, 5)}), not moved by this check"
        return {"status": "skipped", "why": why}
    twice = [
        k for k in run.graph if rec.ops[k].name in _SCATTERS and _writes_twice(rec, rec.ops[k])
    ]
    if twice:
        return {
            "status": "skipped",
            "why": f"the scatter at line {rec.ops[twice[0]].line} writes several entries to one "
            "place, whose gradient PyTorch gives each of them: not the derivative of what ran",
        }
    out = _whole_real(run, rec, params, eps, atol, rtol, gen)
    if left_out:
        out["left_out"] = left_out
    return out


def _whole_real(run, rec, params, eps, atol, rtol, gen) -> dict:
    try:
        x0 = {i: _f64(rec.held(i)) for i in params}
        v = {i: gen.like(x0[i]) for i in params}
        shown = _shown_gradient(run, rec, params, v)
        with torch.no_grad():
            fp = float(_seeded(replay, run, rec, {i: x0[i] + eps * v[i] for i in params}).sum())
            fm = float(_seeded(replay, run, rec, {i: x0[i] - eps * v[i] for i in params}).sum())
        numeric, f0 = (fp - fm) / (2 * eps), (fp + fm) / 2  # (f0: to within eps squared)
        out = None if shown is None else _verdict(shown[0], numeric, atol + shown[1], rtol)
        if out is None or out["status"] == "fail":  # (autograd on a replay, to say which)
            analytic, f0 = _replayed_gradient(run, rec, params, x0, v)
            if analytic is None:
                return {
                    "status": "skipped",
                    "why": "the target reaches the parameters only through random ops, "
                    "taken as they came",
                }
            out = _differs(_verdict(analytic, numeric, atol, rtol), out)
    except Exception as e:  # noqa: BLE001 - an op that cannot be replayed: say which
        return {"status": "skipped", "why": f"the replay failed: {type(e).__name__}: {e}"}
    value = run.value  # (the kept value: the stats' mean of an inf is not inf)
    recorded = float(np.sum(value)) if np.size(value) else float(run.stats[run.target, 0])
    out["replayed"] = f0
    if not math.isfinite(recorded):
        out["status"] = "skipped"
        out["why"] = f"the target is {recorded}"
    elif not math.isclose(f0, recorded, rel_tol=1e-3, abs_tol=1e-6):
        out["status"] = "skipped"
        written = sorted(
            {
                run.name_of(i)
                for k in run.graph
                for i in rec.ops[k].inputs
                if rec.written_at.get(i, k + 1) <= k
            }
        )
        missed = (
            f"{listed(written, 5)} {'was' if len(written) == 1 else 'were'} written over (through "
            ".data or a detached alias) before being read, which the replay does not follow"
            if written
            else "the recording missed something"
        )
        out["why"] = (
            f"the float64 replay gives {f0:.6g}, the cell gave {recorded:.6g}: {missed}, "
            "so this check would not be about the cell"
        )
    return out


def _shown_gradient(run, rec, params, v) -> tuple | None:
    """``(sum <g, v>, its rounding)`` over the gradients ``g`` the run shows (the cell's own
    backward's), or None where they cannot stand for the replay's: a parameter has none,
    one is not in float32 or float64, or a random op lies on the path (the replay takes
    its output as it came; the cell's gradient goes through it)."""
    grads = [rec.grads.get(i) for i in params]
    if run.no_gradients or any(_is_random(rec.ops[k]) for k in run.graph):
        return None
    if any(g is None or g.dtype not in (torch.float32, torch.float64) for g in grads):
        return None
    total = spread = 0.0
    for i, g in zip(params, grads):
        gv = g.detach().to(torch.float64) * v[i]
        total += float(gv.sum())
        spread += float(gv.abs().sum()) * torch.finfo(g.dtype).eps
    return total, 4 * spread


def _replayed_gradient(run, rec, params, x0, v) -> tuple:
    """``(sum <g, v>, the replay's value)`` with ``g`` from autograd on a float64 replay;
    ``(None, None)`` when the replay does not depend on the parameters."""
    with torch.enable_grad():
        xs = {i: x.clone().requires_grad_(True) for i, x in x0.items()}
        f = _seeded(replay, run, rec, xs)
        if not f.requires_grad:
            return None, None
        grads = torch.autograd.grad(f.sum(), [xs[i] for i in params], allow_unused=True)
    analytic = sum(float((g * v[i]).sum()) for i, g in zip(params, grads) if g is not None)
    return analytic, float(f.detach().sum())


def _differs(replayed: dict, shown: dict | None) -> dict:
    """The verdict of the replay's gradient; where it passes and the gradient shown did
    not, no verdict: the record did not follow every path the cell's backward took."""
    if shown is None or replayed["status"] != "pass":
        return replayed
    return dict(
        replayed,
        status="skipped",
        why="the gradient shown (the cell's own backward's) differs from the float64 "
        "replay's, which agrees with finite differences: the record missed a path to the "
        "target (ops it did not see, as in another thread), or a hook changed the gradient",
    )


_SCATTERS = frozenset({"scatter", "scatter_"})


def _writes_twice(rec, op) -> bool:
    """Whether a ``scatter`` (without ``reduce``) has an index that repeats along its dim."""
    consts = [c for c in op.consts if c is not _TENSOR]
    dims = [c for c in consts if isinstance(c, int) and not isinstance(c, bool)]
    if len(op.inputs) < 2 or not dims or any(isinstance(c, str) for c in consts):
        return False
    index = rec.held(op.inputs[1])
    if index.dtype != torch.int64 or index.dim() == 0:
        return False
    dim = dims[0] % index.dim()
    if index.shape[dim] < 2:
        return False
    ordered = index.sort(dim).values
    n = index.shape[dim]
    return bool((ordered.narrow(dim, 1, n - 1) == ordered.narrow(dim, 0, n - 1)).any())


def _not_checked(run, rec, k, op) -> str:
    """Why op ``k`` cannot be checked alone, or ""."""
    if op.name in RANDOM:  # (a recurrent layer's dropout is checked: each call draws alike)
        return "random: taken as it came"
    if op.name in _SCATTERS and _writes_twice(rec, op):
        return (
            "it writes several entries of src to one place: which one lands is "
            "not specified, and PyTorch gives each of them the place's gradient"
        )
    if any(version_of(rec.tensors[i]) != rec.version[i] and i not in rec.saved for i in op.inputs):
        return "an input was written over in place afterwards"
    # (an input written over before this op read it, through .data or a detached alias: the
    # kept copy is what its maker gave, not what this op saw)
    if any(rec.written_at.get(i, k + 1) <= k for i in op.inputs):
        return (
            "an input was written over in place (through .data or a detached "
            "alias) before this op read it"
        )
    size = _numbers(run, op)
    if size > OP_ELEMENTS:
        return f"too big to replay within the budget ({size:,} numbers)"
    return ""


def _weighted(outs, us, masks, keep=None):
    """``sum <u, o>`` over the outputs (those ``keep`` takes), within each one's mask."""
    return sum(
        (o * u if m is None else torch.where(m, o * u, 0.0)).sum()
        for o, u, m in zip(outs, us, masks)
        if keep is None or keep(o)
    )


def _one(run, rec, k, eps, atol, rtol, gen) -> dict:
    op = rec.ops[k]
    why = _not_checked(run, rec, k, op)
    if why:
        return {"status": "skipped", "why": why}
    try:
        xs = [_f64(rec.held(i)) for i in op.inputs]
        diff = [
            j
            for j, i in enumerate(op.inputs)
            if xs[j].is_floating_point() and rec.tensors[i].requires_grad
        ]
        if not diff:
            return {"status": "skipped", "why": "no input takes a gradient"}
        v = {j: gen.like(xs[j]) for j in diff}

        def f(tensors):
            if op.inplace:  # it writes into its first input: a copy of it, made inside
                tensors = [tensors[0].clone()] + list(tensors[1:])
            out = _seeded(_call, op, tensors)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            return [o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point()]

        with torch.enable_grad():
            leaves = [x.clone().requires_grad_(True) if j in v else x for j, x in enumerate(xs)]
            outs = f(leaves)
            # (entries that are not finite, like an attention mask's -inf, are left out)
            masks = [None if bool(torch.isfinite(o).all()) else torch.isfinite(o) for o in outs]
            us = [
                gen.like(o) if m is None else torch.where(m, gen.like(o), 0.0)
                for o, m in zip(outs, masks)
            ]
            s = _weighted(outs, us, masks, lambda o: o.requires_grad)
            if not isinstance(s, torch.Tensor):
                return {"status": "skipped", "why": "no output takes a gradient"}
            grads = torch.autograd.grad(s, [leaves[j] for j in diff], allow_unused=True)
        analytic = sum(float((g * v[j]).sum()) for j, g in zip(diff, grads) if g is not None)

        def moved(sign):
            with torch.no_grad():
                shifted = [x + sign * eps * v[j] if j in v else x for j, x in enumerate(xs)]
                return float(_weighted(f(shifted), us, masks))

        numeric = (moved(1) - moved(-1)) / (2 * eps)
    except Exception as e:  # noqa: BLE001 - an op that cannot be replayed alone
        return {"status": "skipped", "why": f"cannot be replayed alone: {type(e).__name__}: {e}"}
    return _verdict(analytic, numeric, atol, rtol, kinked=op.name in KINKS)
