"""A recorded PyTorch cell, finished: :func:`finish` makes a :class:`TorchRun`.

When a cell's numbers are PyTorch tensors, torch is the engine: the cell runs as plain
Python while a :class:`~gradmagic.analysis.torchrecord.Recorder` watches it. When the cell
ends, :func:`finish` turns what was seen into a :class:`TorchRun`: the ops the target
depends on, in the user's names (assignments of the cell, ``named_parameters`` paths),
every value's and gradient's statistics from one batched pass with one synchronisation
(:mod:`gradmagic.analysis.torchstats`), and the health signals
(:mod:`gradmagic.analysis.torchhealth`). A cell that runs no backward gets its gradients
from one ``torch.autograd.grad`` call here. The run keeps plain numbers (numpy, str) and
no tensor: the values and gradients it keeps whole for ``--expect`` are numpy arrays,
within :data:`~gradmagic.analysis.torchstats.KEEP_BYTES`. The checks
(:mod:`gradmagic.analysis.torchcheck_run`) use the recorder before it is dropped.

Why not a :class:`~gradmagic.analysis.trace.Trace`: torch made this graph and its
gradients, on any device, at any size; the run is read from a recording of torch calls and
keeps statistics per tensor, not a row per number. What both do alike is shared: the check
report (:mod:`~gradmagic.analysis.check`), ``expect``, ``grads_of``, the options.
This module imports torch; nothing imports it unless a cell uses torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import torch

from .options import Options
from .torchbackward import backward_order
from .torchgraph import listed, shown_name
from .torchhealth import health, probes
from .torchcalls import CLOCK, assigned_names, modes_set_aside, torch_as_shipped, version_of
from .torchrecord import Recorder, ancestors, graph_values
from .torchstats import STAT_NAMES, keep_full, summarise, to_numpy

__all__ = [
    "Recorder",
    "TorchRun",
    "TorchNode",
    "assigned_names",
    "finish",
    "modes_set_aside",
    "release",
    "torch_as_shipped",
]

WORST = 5  # entries of a wrong answer shown, worst first


# ---------------------------------------------------------------------------- the snapshot
@dataclass
class TorchRun:
    """One PyTorch cell, recorded: ops, values, gradients, names, modules, health, checks.

    Columns, one row per value (a tensor as one op made it; ``values[i]``):
    ``name`` (the user's name or ''), ``shape``, ``dtype``, ``producer`` (op index, -1 for
    a leaf), ``stats`` and ``grad_stats`` (n × 6 float arrays: mean, std, max |x|,
    fraction zero, fraction non-finite, fraction saturated), ``reached`` (a gradient
    arrived), ``requires_grad``. One row per op (``ops[k]``): its name, inputs, outputs,
    module path, line, flags. ``graph`` lists the ops the target depends on (a gradient
    can flow through them), in the order they ran.
    """

    source: str
    target: int  # value index of the target
    names: list
    shapes: list
    dtypes: list
    producer: np.ndarray
    requires_grad: np.ndarray
    reached: np.ndarray
    stats: np.ndarray
    grad_stats: np.ndarray
    ops: list  # Op records (func/spec/consts dropped once checked)
    op_modules: list  # module path of each op ('' at the cell's top level)
    module_types: dict  # module path → class name
    graph: list  # op indices the target depends on
    leaves: list  # value indices of the leaves the target depends on
    params: list  # value indices of leaves that require a gradient
    options: Options = field(default_factory=Options)
    warnings: list = field(default_factory=list)
    health: dict = field(default_factory=dict)
    checks: dict | None = None  # the numerical checks (see torchcheck_run)
    full: Mapping = field(default_factory=dict)  # value index → (value, grad) numpy, kept small
    backward_by_cell: bool = False
    no_gradients: bool = False  # the cell ran no backward and the magic could run none
    # the autograd nodes in the order backward ran them: (node name, op or -1, value or -1)
    backward: list = field(default_factory=list)
    backward_total: int = 0  # nodes of the backward graph (backward keeps the first STEPS)
    steps: list = field(default_factory=list)  # the loss at each backward() the cell called

    @property
    def value(self) -> float | np.ndarray:
        """The target's value (a float for one number)."""
        full = self.full.get(self.target)
        if full is not None and full[0] is not None:
            v = full[0]
            return float(v.reshape(())) if v.size == 1 else v
        return float(self.stats[self.target, 0])

    @property
    def n(self) -> int:
        return len(self.names)

    def name_of(self, i: int) -> str:
        """Value ``i``'s name as shown: the user's (control characters spelled out, cut at
        :data:`NAME_CHARS`), else its op (``tanh``), else its shape."""
        if self.names[i]:
            return shown_name(self.names[i])
        k = self.producer[i]
        if k >= 0:
            return f"({self.ops[k].name})"
        return f"tensor{list(self.shapes[i])}"

    def index(self, name: str) -> int:
        """The value a name means (the last so named); KeyError listing the names."""
        for i in range(self.n - 1, -1, -1):
            if self.names[i] == name:
                return i
        named = [shown_name(n) for n in sorted(set(filter(None, self.names)))]
        raise KeyError(
            f"no value is named {shown_name(str(name))!r}; named values: "
            f"{listed(named, 20) or 'none'}"
        )

    @property
    def grads(self) -> dict:
        """name → gradient (numpy) for every named value whose gradient was kept in full."""
        out = {}
        for i, name in enumerate(self.names):
            if name and i in self.full and self.full[i][1] is not None:
                out[name] = self.full[i][1]
        return out

    def grads_of(self, path: str):
        """The gradients of what ``path`` names (a module's path gives its parameters'),
        as :meth:`~gradmagic.analysis.trace.Trace.grads_of` does."""
        from .trace import grads_of

        return grads_of(self.grads, path)

    def node(self, name: str) -> TorchNode:
        """The value ``name`` names, kept whole (its numbers and gradient, numpy); KeyError
        when there is none, or it was too big to keep."""
        i = self.index(name)
        kept = self.full.get(i)
        if kept is None:
            raise KeyError(f"{name!r} (too big to be kept whole)")
        return TorchNode(name, i, kept[0], kept[1])

    def check(self):
        """The checks as a :class:`~gradmagic.analysis.check.CheckReport`, as every run has:
        a row for the whole cell (the recorded ops replayed in float64, all parameters moved
        at once along a random direction) and one for each op checked on its own.

        The rows compare PyTorch's gradients with central differences of the recorded ops
        (``oracle`` "ops"), not of the cell run again; a skipped check is a note, not a row.
        """
        from .check import CheckReport, CheckRow

        atol, rtol = self.options.atol, self.options.rtol
        checks = self.checks or {}
        rows, notes = [], list(checks.get("notes", []))
        named = [("the whole cell, all parameters at once", checks.get("whole"), None)]
        named += [
            (f"{self.ops[k].name} (line {self.ops[k].line})", r, k)
            for k, r in checks.get("ops", {}).items()
        ]
        for name, r, k in named:
            if r and (r.get("status") == "skipped" or "analytic" not in r):
                notes.append(f"{name}: not checked ({r.get('why', 'no reason given')})")
            elif r:
                a, n = float(r["analytic"]), float(r["numeric"])
                bound = atol + rtol * abs(n)
                why = r.get("why", "")
                rows.append(
                    CheckRow(
                        name, a, n, abs(a - n), r.get("error", 0.0), bound, r["status"], why, k
                    )
                )
        return CheckReport(
            rows,
            kind="check",
            atol=atol,
            rtol=rtol,
            eps=self.options.eps,
            notes=notes,
            target=self.name_of(self.target),
            unchecked="no op could be checked"
            if self.checks is not None
            else "the cell ran with --no-check",
            oracle="ops",
        )

    def expect(self, mapping, atol: float | None = None, rtol: float | None = None):
        """Compare named gradients (``"dW1"``-style answers, tensors or arrays) with the
        recorded ones, element by element; returns a
        :class:`~gradmagic.analysis.check.CheckReport`."""
        from .check import differences, expect, expected_pairs

        atol = self.options.atol if atol is None else atol
        rtol = self.options.rtol if rtol is None else rtol
        answers = [(k, to_numpy(v)) for k, v in expected_pairs(mapping)]
        target = TorchNode(self.name_of(self.target))
        face = SimpleNamespace(node=self.node, target=target, branch_dependent=False)
        report = expect(face, answers, atol=atol, rtol=rtol)
        for n, row in enumerate(report.rows):  # a wrong array: its worst entries
            if row.status != "fail" or np.ndim(row.got) == 0:
                continue
            got, want = np.asarray(row.got, float), np.asarray(row.expected, float)
            err, bound, close = differences(got, want, atol, rtol)
            bad = np.flatnonzero(~close.ravel())
            worst = bad[np.argsort(-err.ravel()[bad], kind="stable")][:WORST]
            entries = "; ".join(
                f"{tuple(int(j) for j in np.unravel_index(w, got.shape))}: "
                f"{got.flat[w]:.6g} (torch) vs {want.flat[w]:.6g}"
                for w in worst
            )
            report.rows[n] = row._replace(
                note=f"{bad.size} of {got.size} entries wrong; worst: {entries}"
            )
        return report

    def __repr__(self):
        return (
            f"<TorchRun: {len(self.graph)} ops, {len(self.params)} parameters, "
            f"target {self.name_of(self.target)} = {self.value:.6g}>"
            if np.ndim(self.value) == 0
            else f"<TorchRun: {len(self.graph)} ops>"
        )


@dataclass
class TorchNode:
    """A value of a :class:`TorchRun` by name, as :meth:`TorchRun.node` gives it."""

    name: str
    index: int | None = None
    data: object = None
    grad: object = None


# ---------------------------------------------------------------------------- finishing
def finish(rec: Recorder, target, *, source: str, options=None, ns=None) -> TorchRun:
    """Turn a finished recording into a :class:`TorchRun` for ``target`` (a tensor).

    If the cell did not run backward through ``target``, its gradients are computed here with
    ``torch.autograd.grad`` (``retain_graph=True``: the graph stays as the cell left it, and no
    ``.grad`` is written). Then the hooks are removed and the statistics taken.
    """
    given = target
    t_index, target = _target(rec, target)
    ran_backward = t_index in rec.grads
    passes = dict(rec.passes)  # (the cell's own: not the gradients computed below)
    not_computed = None
    if not ran_backward and target.requires_grad and target.grad_fn is not None:
        rec.pass_root = (target, False)
        started = CLOCK()
        not_computed = _gradients(rec, target)
        rec.backward_seconds = CLOCK() - started
    others = _not_the_targets(rec, target, given)
    rec.remove_hooks()
    if t_index not in rec.grads and target.requires_grad:
        rec.grads[t_index] = torch.ones_like(target)
    graph = ancestors(rec, t_index)
    shown = sorted(set(graph_values(rec, graph)) | {t_index})
    probe = probes(rec, graph)
    with torch._C.DisableTorchFunctionSubclass():  # (the numbers held, not a subclass's)
        stats, grad_stats, probed, host, updates = summarise(rec, shown, [t for _, t in probe])
    run = _snapshot(rec, t_index, graph, shown, ns or rec.ns)
    if given is not target and not run.names[t_index]:  # (a subclass alias: the user's name)
        run.names[t_index] = next(
            (k for k, v in (ns or rec.ns).items() if v is given and not k.startswith("_")), ""
        )
    run.source, run.options, run.backward_by_cell = source, Options.of(options), ran_backward
    run.stats, run.grad_stats = stats, grad_stats
    run.steps = [float(loss) for loss in rec.losses]
    run.full = keep_full(rec, shown, t_index, host)
    run.backward, run.backward_total = backward_order(rec, target, graph)
    run.warnings.extend(_record_warnings(rec, run, target, graph, shown))
    if not_computed:
        run.warnings.append(not_computed)
        run.no_gradients = True
    elif passes:
        run.warnings.extend(_grad_not_shown(rec, run, passes, set(others)))
    if others and not not_computed:
        run.warnings.append(
            f"{listed([run.name_of(i) for i in others])}: the last backward pass to reach "
            "it did not begin at the target, so its gradient of the target is not known and "
            "not shown"
        )
    probed = {key: value for (key, _), value in zip(probe, probed)}
    probed.update((("update", i), pair) for i, pair in updates.items())
    run.health = health(run, rec, probed)
    return run


def _record_warnings(rec: Recorder, run: TorchRun, target, graph, shown) -> list:
    """What the record could not see, or shows other than the numbers hold."""
    warnings: list = []
    if not graph and target.grad_fn is not None:
        warnings.append(
            "none of the target's ops were recorded: it was computed before this cell ran "
            "(run the cell that computes it under the magic)"
            if not rec.mark
            else "none of the target's ops were recorded: it was computed before this cell "
            "ran, or before a later backward() of the cell, which let go of the ops before it "
            "(bind it to a name, which keeps its ops)"
        )
    unseen = [i for i in run.leaves if rec.tensors[i].grad_fn is not None]
    if unseen and graph:
        names = ", ".join(run.name_of(i) for i in unseen[:3]) + (", ..." if len(unseen) > 3 else "")
        warnings.append(
            f"{names} {'was' if len(unseen) == 1 else 'were'} made by ops the record did not "
            "see (in an earlier cell, inside a torch.jit module, or before an earlier "
            "backward(), whose ops the record let go of): the graph and its "
            "gradients start there, not at what made them"
        )
    for line, i in dict((i, (line, i)) for line, i in rec.alias_writes).values():
        if i in shown:
            warnings.append(
                f"{run.name_of(i)} was written in place through its detach() at line {line}: "
                "what is shown of it is what the op that made it gave"
            )
    complex_ = [run.name_of(i) for i in shown if rec.held(i).is_complex()]
    if complex_:
        warnings.append(
            f"{listed(complex_)}: complex numbers, whose statistics and gradients are not "
            "shown (the statistics are of real numbers; .grad and the tensors hold them)"
        )
    return warnings


def _not_the_targets(rec: Recorder, *target) -> list:
    """The leaves whose kept gradient came from a pass that did not begin at ``target``
    (``l2.backward(); l1.backward()`` with ``l2`` the target; the target as the cell has it,
    and as a plain tensor): forgotten; their indices."""
    dropped = []
    for key, root in rec.leaf_root.items():
        roots = root if isinstance(root, (list, tuple)) else (root,)
        i = rec.index_of.get(key)
        if i is not None and not any(r is t for r in roots for t in target) and i in rec.grads:
            del rec.grads[i]
            dropped.append(i)
    return dropped


def _grad_not_shown(rec: Recorder, run: TorchRun, passes: dict, unknown: set) -> list:
    """Notes on the leaves whose ``.grad`` is not the gradient shown: it adds up several
    backward passes of the cell (gradient accumulation), or one made before the cell."""
    again: dict[int, list[str]] = {}  # passes → the leaves that saw that many
    held: list[str] = []
    for key, (count, before) in passes.items():
        t = rec.leaf_hooks.get(key)
        i = rec.index_of.get(key)
        if t is None or i is None or t.grad is None or i in unknown:  # (zeroed since, or
            continue  # its gradient of the target not known)
        # (named as the target read it: an optimizer's step may have written it since)
        name = run.name_of(max((j for j in run.params if rec.tensors[j] is t), default=i))
        if count > 1:
            again.setdefault(count, []).append(name)
        if before:
            held.append(name)
    notes = [
        f"{listed(names)}: .grad adds up the {count} backward passes of this cell that "
        "reached it; the gradient shown is that of the target alone"
        for count, names in sorted(again.items())
    ]
    if held:
        notes.append(
            f"{listed(held)}: .grad already held a gradient when this cell's backward "
            "reached it (it was not zeroed), and adds the target's to it: the gradient shown "
            "is the target's alone"
        )
    return notes


def _target(rec: Recorder, target) -> tuple:
    """(the target's value index, the target as a plain tensor). A subclass's methods are
    not called on it: what it is judged by is the numbers it holds and the graph it is on,
    whatever its ``__torch_function__`` says. A subclass alias of a recorded value
    (``loss.as_subclass(T)``) is that value."""
    if type(target) in (torch.Tensor, torch.nn.Parameter):
        return rec._value(target), target
    with torch._C.DisableTorchFunctionSubclass():
        plain = torch.Tensor.as_subclass(target, torch.Tensor)
        i = rec.index_of.get(id(target))
        if i is not None and rec.tensors[i] is target:
            return i, plain
        # (as_subclass makes an alias node, and so may a subclass for each op's result:
        # the recorded value is the nearest one down the chain of aliases)
        nodes: list = []
        node = plain.grad_fn
        while node is not None and len(nodes) < 8:
            nodes.append(node)
            if type(node).__name__ != "AliasBackward0" or not node.next_functions:
                break
            node = node.next_functions[0][0]
        rank = {id(n): r for r, n in enumerate(nodes)}
        best = None
        for j, t in enumerate(rec.tensors):
            r = rank.get(id(t.grad_fn))
            if (
                r is not None
                and (best is None or r <= best[0])
                and t.shape == plain.shape
                and t.data_ptr() == plain.data_ptr()
            ):
                best = (r, j)
        if best is not None:
            return best[1], plain
        return rec._value(plain), plain


def _gradients(rec: Recorder, target):
    """Every value's gradient in one ``torch.autograd.grad`` call, as inputs (no hook
    needed); the leaves' and the written-over values' hooks keep theirs as it passes.

    The cell did not ask for a backward pass, so none is run where it would do something
    the user can see: call a hook of theirs, fill the ``.grad`` of a tensor that retains
    it. Returns the reason gradients are not shown, or None."""
    yours = _what_a_backward_would_run(rec)
    if yours:
        return (
            "the cell did not run backward, and running it would run "
            f"{', '.join(yours)}: no gradient is shown (call backward() on the "
            "target in the cell to see them)"
        )
    values = [
        j
        for j in rec.pending
        if j not in rec.hooked
        and rec.index_of.get(id(rec.tensors[j])) == j
        and version_of(rec.tensors[j]) == rec.version[j]
    ]
    inputs = [rec.tensors[j] for j in values] + list(rec.leaf_hooks.values())
    if target.numel() != 1 or not inputs:
        return None
    try:
        got = torch.autograd.grad(target, inputs, retain_graph=True, allow_unused=True)
    except RuntimeError as e:  # the cell's own backward freed the graph, or torch refuses
        return f"the cell did not run backward through the target, and it cannot be run: {e}"
    for j, g in zip(values, got):
        if g is not None:
            rec.grads[j] = g
    return None


def _what_a_backward_would_run(rec: Recorder) -> list:
    """What of the user's a backward pass through the recorded graph would run: their
    gradient hooks on tensors and modules, ``retain_grad()`` (it fills ``.grad``)."""
    from torch.nn.modules import module as torch_module

    found = []
    for j, t in enumerate(rec.tensors):
        ours = j in rec.hooked or rec.leaf_hooks.get(id(t)) is t
        hooks = getattr(t, "_backward_hooks", None)
        if hooks and len(hooks) > ours:
            found.append(f"a hook on {_label(rec, j)}")
        elif not t.is_leaf and t.retains_grad:
            found.append(f"{_label(rec, j)}.retain_grad()")
    for m in rec.modules.values():
        if m._backward_hooks or m._backward_pre_hooks:
            found.append(f"a backward hook of a {type(m).__name__}")
    if torch_module._global_backward_hooks or torch_module._global_backward_pre_hooks:
        found.append("a global module backward hook")
    return list(dict.fromkeys(found))[:4]


def _label(rec: Recorder, j: int) -> str:
    t = rec.tensors[j]
    named = rec.labels.get(j) or next(
        (k for k, v in rec.ns.items() if v is t and not k.startswith("_")), None
    )
    return named or "a tensor"


def _snapshot(rec: Recorder, t_index: int, graph: list, shown: list, ns) -> TorchRun:
    """The run's columns that need no statistics: names, shapes, modules, leaves."""
    n = len(rec.tensors)
    module_paths = _module_paths(rec, ns)
    reached = np.zeros(n, dtype=bool)
    reached[list(rec.grads)] = True
    types = {}
    for op in rec.ops:
        for m in op.module:
            path = module_paths.get(m)
            if path is not None and path not in types:
                types[path] = type(rec.modules[m]).__name__
    in_graph = set(graph)
    leaves = [i for i in shown if rec.producer[i] not in in_graph and i != t_index]
    return TorchRun(
        source="",
        target=t_index,
        names=_names(rec, ns, shown),
        shapes=[tuple(t.shape) for t in rec.tensors],
        dtypes=[str(t.dtype).replace("torch.", "") for t in rec.tensors],
        producer=np.array(rec.producer, dtype=np.int32),
        requires_grad=np.fromiter((t.requires_grad for t in rec.tensors), bool, n),
        reached=reached,
        stats=np.zeros((0, len(STAT_NAMES))),  # (filled once the values are summarised)
        grad_stats=np.zeros((0, len(STAT_NAMES))),
        ops=rec.ops,
        op_modules=[module_paths.get(op.module[-1], "") if op.module else "" for op in rec.ops],
        module_types=types,
        graph=graph,
        leaves=leaves,
        params=[i for i in leaves if rec.tensors[i].requires_grad and rec.tensors[i].is_leaf],
    )


def _names(rec: Recorder, ns, shown) -> list:
    """Each value's name: the cell's assignment that bound it, else, for the values
    ``shown``, a name it has in the namespace (``W1``, ``model.blocks.0.attn.c_attn.weight``,
    ``layers[2].gamma``)."""
    names = [""] * len(rec.tensors)
    for i, name in rec.labels.items():
        names[i] = name
    wanted: dict = {}  # id → the unnamed values of that tensor (an in-place write: several)
    tensors = rec.tensors
    for i in shown:
        t = tensors[i]
        if not names[i] and (
            rec.producer[i] < 0 or rec.index_of.get(id(t)) == i or rec.ops[rec.producer[i]].inplace
        ):
            wanted.setdefault(id(t), []).append(i)
    if not wanted:
        return names
    for path, t in _namespace_tensors(ns):
        for i in wanted.pop(id(t), ()):
            if rec.tensors[i] is t:
                names[i] = path
    return names


def _namespace_tensors(ns, budget: int = 20000):
    """(path, tensor) for the tensors the namespace reaches: names, modules' named parameters
    and buffers, lists/tuples/dicts of them, and the attributes of the notebook's objects
    (two levels, at most ``budget`` objects looked at)."""
    count = 0
    todo = [
        (name, v, 0)
        for name, v in list(ns.items())
        if not name.startswith("_") and name not in ("In", "Out")
    ]
    seen = set()
    while todo and count < budget:
        path, v, depth = todo.pop(0)
        count += 1
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, torch.Tensor):
            yield path, v
        elif isinstance(v, torch.nn.Module):
            yield from v.named_parameters(prefix=path, remove_duplicate=False)
            yield from v.named_buffers(prefix=path, remove_duplicate=False)
        elif depth < 2 and isinstance(v, (list, tuple)):
            todo.extend((f"{path}[{i}]", e, depth + 1) for i, e in enumerate(v[:1000]))
        elif depth < 2 and isinstance(v, dict):
            todo.extend((f"{path}[{k!r}]", e, depth + 1) for k, e in list(v.items())[:1000])
        elif depth < 2 and getattr(type(v), "__module__", None) == "__main__":
            try:
                attrs = vars(v)
            except TypeError:
                continue
            todo.extend(
                (f"{path}.{k}", e, depth + 1) for k, e in attrs.items() if not k.startswith("_")
            )


def _module_paths(rec: Recorder, ns) -> dict:
    """id(module) → its path (``model.blocks.3.attn``) for every module the run entered:
    from the namespace's modules' ``named_modules``, else its parent's path and its class."""
    paths = {}
    want = set(rec.modules)
    for name, v in list(ns.items()):
        if isinstance(v, torch.nn.Module) and not name.startswith("_"):
            for p, m in v.named_modules(prefix=name, remove_duplicate=False):
                if id(m) in want and id(m) not in paths:
                    paths[id(m)] = p
    for op in rec.ops:
        for depth, m in enumerate(op.module):
            if m not in paths:
                parent = paths.get(op.module[depth - 1], "") if depth else ""
                name = type(rec.modules[m]).__name__
                paths[m] = f"{parent}.{name}" if parent else name
    return paths


def release(run: TorchRun) -> None:
    """Drop what only the checks needed (the ops' functions and arguments)."""
    for op in run.ops:
        op.func = op.spec = None
        op.consts = ()
