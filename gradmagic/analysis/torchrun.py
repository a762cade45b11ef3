"""Recording a PyTorch cell as it runs, without changing it: :class:`Recorder`, :class:`TorchRun`.

When a cell's numbers are PyTorch tensors, torch is the engine: the cell runs
as plain Python, and a :class:`Recorder` watches it. A ``TorchFunctionMode``
sees every torch call (``x @ W``, ``F.cross_entropy``, ``h.tanh()``) and keeps
a reference to the inputs and outputs of those that concern the gradient;
global module hooks say which ``nn.Module`` each call ran in; a wrapper of
``autograd.Function.apply`` records custom Functions as one op each. Tensor
hooks keep the gradients: on the leaves from the start, on the other values
when a ``backward()`` starts (or just before an in-place write changes them);
a cell that runs no backward gets them from one ``torch.autograd.grad`` call
after it ends. While the cell runs nothing is computed on its tensors, except a
copy of what an in-place write is about to change, so its outputs, tensors,
random numbers and module state are those of a plain run.

When the cell ends, :func:`finish` turns what was seen into a :class:`TorchRun`:
the ops the target depends on, in the user's names (assignments of the cell,
``named_parameters`` paths), every value's and gradient's statistics from one
batched pass with one synchronisation, and the health signals
(:mod:`gradmagic.analysis.torchhealth`). The run keeps plain numbers (numpy,
str) and no tensor: the values and gradients it keeps whole for ``--expect``
are numpy arrays, within :data:`KEEP_BYTES`. The checks
(:mod:`gradmagic.analysis.torchcheck_run`) use the recorder before it is dropped.

This module imports torch; nothing imports it unless a cell uses torch.
"""

from __future__ import annotations

import ast
import math
import sys
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from .torchhealth import SATURATED, SATURATING, health, probes

__all__ = [
    "Recorder",
    "TorchRun",
    "Op",
    "assigned_names",
    "finish",
    "release",
    "summarise",
    "to_numpy",
    "KEEP_BYTES",
    "STAT_NAMES",
]

KEEP_BYTES = 16 << 20  # bytes of full values and gradients a run keeps (for --expect)
KEEP_ONE = 1 << 20  # the largest single tensor kept whole
WORST = 5  # entries of a wrong answer shown, worst first
STAT_NAMES = ("mean", "std", "absmax", "zero", "nonfinite", "saturated")

# torch calls that are not operations on values: read an attribute, ask a size, print, run
# backward, switch grad mode
_NOT_OPS = frozenset(
    {
        "backward",
        "register_hook",
        "retain_grad",
        "requires_grad_",
        "size",
        "dim",
        "numel",
        "item",
        "tolist",
        "numpy",
        "__repr__",
        "__format__",
        "__str__",
        "__len__",
        "__bool__",
        "__float__",
        "__int__",
        "__index__",
        "__hash__",
        "__iter__",
        "__contains__",
        "_set_grad_enabled",
        "is_grad_enabled",
        "data_ptr",
        "stride",
        "storage_offset",
        "is_contiguous",
        "element_size",
        "untyped_storage",
        "__reduce_ex__",
        "__deepcopy__",
        "grad",
        "is_floating_point",
        "is_complex",
        "get_device",
        "cpu",
        "_is_view",
        "manual_seed",
        "__array__",
        "__dlpack__",
        "__eq_hash__",
        "equal",
        "allclose",
    }
)
# ops whose result is random: the checks take what they made as given
RANDOM = frozenset(
    {
        "dropout",
        "dropout_",
        "rand",
        "randn",
        "randint",
        "rand_like",
        "randn_like",
        "randint_like",
        "randperm",
        "multinomial",
        "bernoulli",
        "bernoulli_",
        "normal",
        "normal_",
        "uniform_",
        "exponential_",
        "alpha_dropout",
        "feature_alpha_dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "poisson",
    }
)


def assigned_names(tree: ast.AST) -> dict:
    """Line → the names its assignment binds (``a, b = ...``, ``x += ...``), at the
    cell's top level (loops and ``with`` blocks included, function bodies not)."""
    out: dict = {}

    def names(target):
        if isinstance(target, ast.Name):
            yield target.id
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                yield from names(t)
        elif isinstance(target, ast.Starred):
            yield from names(target.value)

    def visit(body):
        for node in body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    out.setdefault(node.lineno, []).extend(names(t))
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                out.setdefault(node.lineno, []).extend(names(node.target))
            elif isinstance(
                node, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try)
            ):
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []) or [])
                for handler in getattr(node, "handlers", []) or []:
                    visit(handler.body)

    visit(getattr(tree, "body", []))
    return out


def _op_name(func) -> str:
    """``TensorBase.matmul`` → ``matmul``; ``__rmul__`` → ``rmul``; a getter → ``.name``."""
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":
        owner = getattr(func, "__self__", None)
        return "." + getattr(owner, "__name__", "attr")
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        return name[2:-2]
    return name


def _inplace(name: str) -> bool:
    """Whether an op of this name writes into its first argument (``add_``,
    ``_foreach_add_``, ``+=``, ``x[i] = v``)."""
    return (name.endswith("_") and not name.endswith("__")) or name in _INPLACE_DUNDERS


_INPLACE_DUNDERS = frozenset(
    {
        "iadd",
        "isub",
        "imul",
        "itruediv",
        "ifloordiv",
        "imod",
        "ipow",
        "imatmul",
        "iand",
        "ior",
        "ixor",
        "ilshift",
        "irshift",
        "setitem",
    }
)


@dataclass
class Op:
    """One recorded torch call: what it was, what went in and came out, where it ran."""

    name: str  # "matmul", "tanh", "cross_entropy", a custom Function's class name
    inputs: tuple  # value indices of the tensors that went in, in argument order
    outputs: tuple  # value indices of the tensors that came out
    module: tuple  # ids of the nn.Modules it ran inside, outermost first
    line: int | None  # the cell's line that made it (None: not found)
    grad_enabled: bool
    inplace: bool
    func: object = None  # what to call to replay it (the checks); dropped after them
    spec: object = None  # the arguments' pytree spec with the tensors taken out
    consts: tuple = ()  # the arguments' leaves, each tensor replaced by _TENSOR
    custom: bool = False  # a custom autograd.Function

    @property
    def consts_key(self) -> tuple:
        """The op's non-tensor arguments, as far as they can be compared (None where not)."""
        out = []
        for c in self.consts:
            try:
                hash(c)
                out.append(c if c is not _TENSOR else "T")
            except TypeError:
                out.append(repr(c)[:40])
        return tuple(out)

    @property
    def deliberate_inf(self) -> bool:
        """A non-finite number among its arguments (``masked_fill(mask, -inf)``): the
        infinities it makes are meant."""
        return any(isinstance(c, float) and not math.isfinite(c) for c in self.consts)


_TENSOR = object()  # where a tensor stood among an op's arguments (Op.consts)
_KINDS: dict = {}  # torch function → (its op name, writes in place, not an op)
_AUTOGRAD_GRAD = torch.autograd.grad
_SEQUENCES = (list, tuple)


def flatten(args, kwargs) -> tuple:
    """An op's arguments as one list (a list or tuple argument spread, one level: ``cat``,
    ``stack``, ``_foreach_*``) and what :func:`unflatten` needs to rebuild them."""
    leaves, shape = [], []
    for a in (*args, *kwargs.values()):
        if type(a) in _SEQUENCES:
            shape.append((type(a), len(a)))
            leaves.extend(a)
        else:
            shape.append(None)
            leaves.append(a)
    return leaves, (tuple(shape), len(args), tuple(kwargs))


def unflatten(leaves, spec) -> tuple:
    """``(args, kwargs)`` from :func:`flatten`'s output."""
    shape, n_args, keys = spec
    values, at = [], 0
    for s in shape:
        if s is None:
            values.append(leaves[at])
            at += 1
        else:
            values.append(s[0](leaves[at : at + s[1]]))
            at += s[1]
    return tuple(values[:n_args]), dict(zip(keys, values[n_args:]))


class Recorder(TorchFunctionMode):
    """Watches a cell run: every torch call, the gradients, the modules. See the module doc.

    ``with Recorder(filename, ns, assigns) as rec: exec(cell)``; then :meth:`finish`.
    """

    def __init__(self, filename: str, ns: dict, assigns: dict):
        super().__init__()
        self.filename = filename
        self.ns = ns
        self.assigns = assigns
        self.tensors: list = []  # value index → the tensor (kept alive: ids stay unique)
        self.version: list = []  # value index → the tensor's _version when it was made
        self.producer: list = []  # value index → the op that made it, -1 for a leaf
        self.labels: dict = {}  # value index → name
        self.index_of: dict = {}  # id(tensor) → its latest value index
        self.ops: list[Op] = []
        self.grads: dict = {}  # value index → gradient (from a hook)
        self.hooked: set = set()
        self.leaf_hooks: dict = {}  # id → leaf tensor with a hook
        self.pending: list = []  # values that require a gradient and have no hook yet
        self.handles: list = []
        self.stack: tuple = ()
        self.modules: dict = {}  # id → module (kept alive while the run is recorded)
        self.updates: dict = {}  # value index of a leaf → (update std, data std) of its writes
        self.backward_lines: list = []
        self.saved: dict = {}  # value index → what it held before an in-place write
        self.data_of: dict = {}  # id(p.data) → (p.data, p): writes through .data update p
        self.inside = 0  # > 0 inside a custom Function's forward: its ops are not recorded
        self.last_line = None
        self._cell_frame = None

    # ------------------------------------------------------------------ watching
    def __enter__(self):
        self._hooks = (
            torch.nn.modules.module.register_module_forward_pre_hook(self._enter_module),
            torch.nn.modules.module.register_module_forward_hook(self._leave_module),
        )
        self._apply = torch.autograd.Function.__dict__["apply"]
        recorder = self

        def apply(cls, *args, **kwargs):
            if recorder.inside:
                return recorder._apply.__get__(None, cls)(*args, **kwargs)
            recorder.inside += 1
            try:
                out = recorder._apply.__get__(None, cls)(*args, **kwargs)
            finally:
                recorder.inside -= 1
            recorder._record(cls.apply, cls.__name__, args, kwargs, out, custom=cls)
            return out

        torch.autograd.Function.apply = classmethod(apply)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            torch.autograd.Function.apply = self._apply
            for h in self._hooks:
                h.remove()
            self._flush_line(None)

    def _enter_module(self, module, args):
        self.modules[id(module)] = module
        self.stack = self.stack + (id(module),)

    def _leave_module(self, module, args, output):
        if self.stack and self.stack[-1] == id(module):
            self.stack = self.stack[:-1]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.inside:
            return func(*args, **kwargs)
        try:
            name, inplace, skip = _KINDS[func]
        except (KeyError, TypeError):
            name = _op_name(func)
            inplace, skip = _inplace(name), name in _NOT_OPS or name.startswith(".")
            try:
                _KINDS[func] = name, inplace, skip
            except TypeError:  # (a function that cannot be a key)
                pass
        if kwargs.get("inplace") is True:  # F.relu(x, inplace=True), F.dropout(..., inplace=True)
            inplace = True
        if name == "backward" or func is _AUTOGRAD_GRAD:
            self._hook_pending()
        if inplace and args:
            before = self._before_write(args[0])
            out = func(*args, **kwargs)
            if before:
                self._after_write(before)
        else:
            out = func(*args, **kwargs)
        if skip:
            if name == "backward":
                self.backward_lines.append(self._line())
            elif name == ".data" and isinstance(out, torch.Tensor) and args:
                self.data_of[id(out)] = (out, args[0])
            return out
        self._record(func, name, args, kwargs, out, inplace=inplace)
        return out

    def _before_write(self, written) -> list:
        """Copies of the recorded values an in-place write is about to change (``p -= lr *
        p.grad``, ``p.data += ...``, ``torch._foreach_add_(params, ...)``, ``h[0] = 0``): each
        value keeps what the ops that read it saw."""
        found = []
        for t in written if isinstance(written, (list, tuple)) else (written,):
            if not isinstance(t, torch.Tensor):
                continue
            alias = self.data_of.get(id(t))
            through_data = alias is not None and alias[0] is t
            p = alias[1] if through_data else t
            for q in (p, p._base):  # a write into a view writes into its base too
                if q is None:
                    continue
                i = self.index_of.get(id(q))
                if i is not None and self.tensors[i] is q and i not in self.saved:
                    found.append((i, q, q.detach().clone(), through_data))
                    if i in self._pending_set():  # its gradient: from the node that made it
                        self._hook(q, i)
        return found

    def _after_write(self, found) -> None:
        """Keep the copies; a parameter's update (a write under no_grad or through ``.data``)
        as two numbers on its device (the update's std and the old value's std), read with
        the run's other statistics."""
        for i, p, old, through_data in found:
            self.saved[i] = old
            if (
                p.requires_grad
                and p.is_leaf
                and p.is_floating_point()
                and (through_data or not torch.is_grad_enabled())
                and i not in self.updates
            ):
                self.updates[i] = torch.stack(
                    [(p.detach() - old).to(torch.float64).std(), old.to(torch.float64).std()]
                )

    def _line(self):
        """The cell's line running now; labels the names the line before it assigned."""
        f = sys._getframe(2)
        filename = self.filename
        while f is not None and f.f_code.co_filename != filename:
            f = f.f_back
        if f is None:
            return None
        line = f.f_lineno
        if f.f_code.co_name == "<module>" and line != self.last_line:
            self._flush_line(line)
        return line

    def _flush_line(self, line):
        names = self.assigns.get(self.last_line)
        self.last_line = line
        if names:
            ns, index_of = self.ns, self.index_of
            for name in names:
                t = ns.get(name)
                i = index_of.get(id(t)) if isinstance(t, torch.Tensor) else None
                if i is not None and self.tensors[i] is t:
                    self.labels[i] = name

    def held(self, i):
        """Value ``i`` as the ops that read it saw it (a copy if it was written over since)."""
        saved = self.saved.get(i)
        return self.tensors[i] if saved is None else saved

    def _value(self, t) -> int:
        """The value index of tensor ``t`` as an input (a new leaf if unseen)."""
        i = self.index_of.get(id(t))
        if i is not None and self.tensors[i] is t:
            return i
        return self._new(t, -1)

    def _new(self, t, producer: int) -> int:
        i = len(self.tensors)
        self.tensors.append(t)
        self.version.append(t._version)
        self.producer.append(producer)
        self.index_of[id(t)] = i
        if producer < 0 and t.requires_grad and t.is_leaf and id(t) not in self.leaf_hooks:
            self._hook(t, i, leaf=True)  # this run's gradient (.grad may hold older ones too)
        return i

    def _pending_set(self) -> set:
        return set(self.pending) - self.hooked

    def _hook_pending(self) -> None:
        """Hooks on the values made so far that take a gradient (a backward is starting).
        A value written over in place got its hook before the write."""
        tensors, index_of, hooked, version = self.tensors, self.index_of, self.hooked, self.version
        for j in self.pending:
            t = tensors[j]
            # (a view written over through its base is stale: no hook, torch may crash on it)
            if j not in hooked and index_of.get(id(t)) == j and t._version == version[j]:
                self._hook(t, j)
        self.pending = []

    def _hook(self, t, i, leaf=False):
        grads = self.grads
        if leaf:  # a parameter updated in place is a new value: the latest one gets it
            key, index_of = id(t), self.index_of
            self.leaf_hooks[key] = t

            def keep(g):
                grads[index_of[key]] = g
        else:

            def keep(g):
                grads[i] = g

        try:
            self.handles.append(t.register_hook(keep))
            self.hooked.add(i)
        except RuntimeError:  # a tensor that cannot take a hook (an inference tensor)
            pass

    def _record(self, func, name, args, kwargs, out, custom=None, inplace=False):
        leaves, spec = flatten(args, kwargs)
        if not self._concerns(leaves, out):
            return
        line = self._line()
        tensors, consts, inputs = [], [], []
        for x in leaves:
            if isinstance(x, torch.Tensor):
                tensors.append(x)
                inputs.append(self._value(x))
                consts.append(_TENSOR)
            else:
                consts.append(x)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        if inplace and tensors and not any(isinstance(o, torch.Tensor) for o in outs):
            outs = (tensors[0],)  # x[i] = v returns None: x is what it made
        k = len(self.ops)
        outputs = []
        grad_enabled = torch.is_grad_enabled()
        for o in outs:
            if not isinstance(o, torch.Tensor):
                continue
            j = (
                self._new(o, k)
                if not (inplace and outputs == [] and tensors and o is tensors[0])
                else self._rewritten(o, k, inputs[0])
            )
            outputs.append(j)
            if o.requires_grad and o.is_leaf:  # torch.randn(..., requires_grad=True): a leaf
                if id(o) not in self.leaf_hooks:
                    self._hook(o, j, leaf=True)
            elif o.requires_grad and grad_enabled:
                self.pending.append(j)  # hooked when a backward starts (see _hook_pending)
        if not outputs:
            return
        self.ops.append(
            Op(
                name,
                tuple(inputs),
                tuple(outputs),
                self.stack,
                line,
                grad_enabled,
                inplace,
                func,
                spec,
                tuple(consts),
                custom is not None,
            )
        )

    def _concerns(self, leaves, out) -> bool:
        """Whether an op matters to the gradient: it reads a tensor that requires one or one
        made by a recorded op (what depends on a parameter, through detach and no_grad too),
        or makes a tensor that requires one. Others (sampling a batch, indexing the data,
        a learning rate times a gradient) leave the tensors they make as leaves."""
        index_of, tensors = self.index_of, self.tensors
        for x in leaves:
            if isinstance(x, torch.Tensor):
                if x.requires_grad:
                    return True
                i = index_of.get(id(x))
                if i is not None and tensors[i] is x and self.producer[i] >= 0:
                    return True
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(o, torch.Tensor) and o.requires_grad:
                return True
        return False

    def _rewritten(self, t, k, old) -> int:
        """An in-place write: the tensor holds a new value (the old value's row keeps the
        tensor, whose ``_version`` then says it was written over)."""
        return self._new(t, k)

    # ------------------------------------------------------------------ the end
    def remove_hooks(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


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
    options: object = None
    warnings: list = field(default_factory=list)
    health: dict = field(default_factory=dict)
    check: dict | None = None  # the numerical checks (see torchcheck_run)
    full: dict = field(default_factory=dict)  # value index → (value, grad) numpy, kept small
    backward_by_cell: bool = False
    in_place_after: set = field(default_factory=set)  # values written in place after made

    @property
    def value(self) -> float | np.ndarray:
        """The target's value (a float for one number)."""
        full = self.full.get(self.target)
        if full is not None and full[0] is not None:
            v = full[0]
            return float(v) if v.size == 1 else v
        return float(self.stats[self.target, 0])

    @property
    def n(self) -> int:
        return len(self.names)

    def name_of(self, i: int) -> str:
        """Value ``i``'s name: the user's, else its op (``tanh``), else its shape."""
        if self.names[i]:
            return self.names[i]
        k = self.producer[i]
        if k >= 0:
            return f"({self.ops[k].name})"
        return f"tensor{list(self.shapes[i])}"

    def index(self, name: str) -> int:
        """The value a name means (the last so named); KeyError listing the names."""
        for i in range(self.n - 1, -1, -1):
            if self.names[i] == name:
                return i
        raise KeyError(
            f"no value is named {name!r}; named values: "
            f"{', '.join(sorted(set(filter(None, self.names)))) or 'none'}"
        )

    @property
    def grads(self) -> dict:
        """name → gradient (numpy) for every named value whose gradient was kept in full."""
        out = {}
        for i, name in enumerate(self.names):
            if name and i in self.full and self.full[i][1] is not None:
                out[name] = self.full[i][1]
        return out

    def stat(self, i: int, grad: bool = False) -> dict:
        row = (self.grad_stats if grad else self.stats)[i]
        return dict(zip(STAT_NAMES, row.tolist()))

    def expect(self, mapping, atol: float | None = None, rtol: float | None = None):
        """Compare named gradients (``"dW1"``-style answers, tensors or arrays) with the
        recorded ones, element by element; returns a
        :class:`~gradmagic.analysis.check.CheckReport`."""
        from .check import differences, expect

        opts = self.options
        atol = atol if atol is not None else getattr(opts, "atol", 1e-5)
        rtol = rtol if rtol is not None else getattr(opts, "rtol", 1e-3)
        report = expect(_Answers(self), _plain_answers(mapping), atol=atol, rtol=rtol)
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


def _plain_answers(mapping):
    from .check import expected_pairs

    return [(k, to_numpy(v)) for k, v in expected_pairs(mapping)]


def to_numpy(x):
    """A tensor (on any device, requiring a gradient or not) as a float numpy array; anything
    else as it is."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return x


class _Answers:
    """The face of a TorchRun that :func:`gradmagic.analysis.check.expect` reads."""

    branch_dependent = False

    def __init__(self, run: TorchRun):
        self.run = run
        self.target = _Named(run.name_of(run.target))

    def node(self, name):
        run = self.run
        i = run.index(name)
        kept = run.full.get(i)
        if kept is None:
            raise KeyError(f"{name!r} (too big to be kept whole)")
        return _Named(name, i, kept[0], kept[1])


@dataclass
class _Named:
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
    t_index = rec._value(target)
    ran_backward = t_index in rec.grads
    if not ran_backward and target.requires_grad and target.grad_fn is not None:
        # every value's gradient in one call, as inputs (no hook needed); the leaves' and the
        # written-over values' hooks keep theirs as it passes
        values = [
            j
            for j in rec.pending
            if j not in rec.hooked
            and rec.index_of.get(id(rec.tensors[j])) == j
            and rec.tensors[j]._version == rec.version[j]
        ]
        inputs = [rec.tensors[j] for j in values] + list(rec.leaf_hooks.values())
        if target.numel() == 1 and inputs:
            got = torch.autograd.grad(target, inputs, retain_graph=True, allow_unused=True)
            for j, g in zip(values, got):
                if g is not None:
                    rec.grads[j] = g
    rec.remove_hooks()
    if t_index not in rec.grads and target.requires_grad:
        rec.grads[t_index] = torch.ones_like(target)
    graph = _ancestors(rec, t_index)
    names = _names(rec, ns or rec.ns)
    module_paths = _module_paths(rec, ns or rec.ns)
    n = len(rec.tensors)
    shown = sorted(set(graph_values(rec, graph)) | {t_index})
    probe = probes(rec, graph)
    stats, grad_stats, probed, host = summarise(rec, shown, [t for _, t in probe])
    producer = np.array(rec.producer, dtype=np.int32)
    requires = np.fromiter((t.requires_grad for t in rec.tensors), bool, n)
    reached = np.zeros(n, dtype=bool)
    reached[list(rec.grads)] = True
    in_place_after = {
        i for i in shown if rec.tensors[i]._version != rec.version[i] and i not in rec.saved
    }
    op_modules = [module_paths.get(op.module[-1], "") if op.module else "" for op in rec.ops]
    types = {}
    for op in rec.ops:
        for m in op.module:
            path = module_paths.get(m)
            if path is not None and path not in types:
                types[path] = type(rec.modules[m]).__name__
    in_graph = set(graph)
    leaves = [i for i in shown if rec.producer[i] not in in_graph and i != t_index]
    params = [i for i in leaves if rec.tensors[i].requires_grad and rec.tensors[i].is_leaf]
    run = TorchRun(
        source=source,
        target=t_index,
        names=names,
        shapes=[tuple(t.shape) for t in rec.tensors],
        dtypes=[str(t.dtype).replace("torch.", "") for t in rec.tensors],
        producer=producer,
        requires_grad=requires,
        reached=reached,
        stats=stats,
        grad_stats=grad_stats,
        ops=rec.ops,
        op_modules=op_modules,
        module_types=types,
        graph=graph,
        leaves=leaves,
        params=params,
        options=options,
        backward_by_cell=ran_backward,
        in_place_after=in_place_after,
    )
    run.full = _keep_full(rec, shown, t_index, host)
    if not graph and target.grad_fn is not None:
        run.warnings.append(
            "the target was computed before this cell ran, so none of its "
            "ops were recorded: run the cell that computes it under the magic"
        )
    run.health = health(run, rec, {key: value for (key, _), value in zip(probe, probed)})
    return run


def _ancestors(rec: Recorder, target: int) -> list:
    """The ops ``target`` depends on through ops that carry a gradient (grad mode on, an
    output that requires one), in the order they ran."""
    seen, todo = set(), [target]
    ops = rec.ops
    while todo:
        i = todo.pop()
        k = rec.producer[i]
        if k < 0 or k in seen:
            continue
        op = ops[k]
        t = rec.tensors[i]
        if not (op.grad_enabled and t.requires_grad) or t.is_leaf:
            continue  # made without a gradient (a constant for the target), or a leaf
        seen.add(k)
        todo.extend(op.inputs)
    return sorted(seen)


def graph_values(rec, graph) -> list:
    """The values the ops of ``graph`` read and make."""
    out = set()
    for k in graph:
        out.update(rec.ops[k].inputs)
        out.update(rec.ops[k].outputs)
    return sorted(out)


def _names(rec: Recorder, ns) -> list:
    """Each value's name: the cell's assignment that bound it, else a name it has in the
    namespace (``W1``, ``model.blocks.0.attn.c_attn.weight``, ``layers[2].gamma``)."""
    names = [""] * len(rec.tensors)
    for i, name in rec.labels.items():
        names[i] = name
    wanted: dict = {}  # id → the unnamed values of that tensor (an in-place write: several)
    for i, t in enumerate(rec.tensors):
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
            for p, t in v.named_parameters(prefix=path, remove_duplicate=False):
                yield p, t
            for p, t in v.named_buffers(prefix=path, remove_duplicate=False):
                yield p, t
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


def summarise(rec: Recorder, shown: list, extra=()) -> tuple:
    """Statistics of the values ``shown`` and of their gradients, in one batched pass:
    ``(stats, grad_stats, extra, host)``.

    The floating tensors are concatenated into one float64 buffer on their device; its
    pieces are reduced together (a segment sum, ``_foreach_norm`` for the sums of squares and
    the counts of non-zeros, the magnitudes' maxima) and everything, with the
    1-d tensors ``extra``, is read back in one copy to the host. ``host`` maps a row (value
    ``i``, or ``~i`` for its gradient) to its numbers on the host when the whole buffer is
    at most :data:`KEEP_BYTES` (else None). Rows of values that are not floating point
    (indices) are nan. A tensor holding a nan or an inf is summarised again without them,
    which costs a second read only then.
    """
    n = len(rec.tensors)
    stats = np.full((n, len(STAT_NAMES)), np.nan)
    grad_stats = np.full((n, len(STAT_NAMES)), np.nan)
    parts, rows, sat_kind = [], [], []
    for i in shown:
        t = rec.held(i)
        if t.is_floating_point() and t.numel():
            parts.append(t.detach().reshape(-1))
            rows.append(i)
            k = rec.producer[i]
            sat_kind.append(SATURATING.get(rec.ops[k].name, "") if k >= 0 else "")
        g = rec.grads.get(i)
        if g is not None and g.is_floating_point() and g.numel():
            parts.append(g.detach().reshape(-1))
            rows.append(~i)
            sat_kind.append("")
    if not parts:
        return stats, grad_stats, [e.detach().cpu().numpy() for e in extra], None
    device = parts[0].device
    if any(p.device != device for p in parts):
        parts = [p.to(device) for p in parts]
    sizes = [p.numel() for p in parts]
    x = torch.cat(parts).to(torch.float64)
    pieces = x.split(sizes)
    m = len(parts)
    lengths = torch.tensor(sizes, device=device)
    columns = [
        torch.segment_reduce(x, "sum", lengths=lengths),
        torch.stack(torch._foreach_norm(pieces, 2)),
        torch.stack(torch._foreach_norm(pieces, 0)),
        torch.stack(_absmax(x, sizes)),
    ]
    saturating = [r for r, kind in enumerate(sat_kind) if kind]
    for r in saturating:
        p = pieces[r]
        hit = p.abs() > SATURATED if sat_kind[r] == "tanh" else (p - 0.5).abs() > SATURATED - 0.5
        columns.append(hit.sum(dtype=torch.float64).reshape(1))
    flat = torch.cat(columns + [e.detach().to(device, torch.float64).reshape(-1) for e in extra])
    keep = x.numel() * 8 <= KEEP_BYTES
    host_all = flat.cpu().numpy()  # the one synchronisation (with the buffer, if kept)
    host_x = x.cpu().numpy() if keep else None
    s1, norm2, nonzero, absmax = host_all[: 4 * m].reshape(4, m)
    sat = np.full(m, np.nan)
    sat[saturating] = host_all[4 * m : 4 * m + len(saturating)]
    at = 4 * m + len(saturating)
    extra_host = []
    for e in extra:
        extra_host.append(host_all[at : at + e.numel()])
        at += e.numel()
    size = np.array(sizes, dtype=np.float64)
    finite_count = size.copy()
    bad = np.flatnonzero(~np.isfinite(norm2))
    if bad.size:  # nan or inf inside: the statistics of the finite entries
        again = []
        for r in bad.tolist():
            p = pieces[r]
            ok = torch.isfinite(p)
            f = torch.where(ok, p, 0.0)
            again.append(
                torch.stack(
                    [
                        ok.sum(dtype=torch.float64),
                        f.sum(),
                        torch.linalg.vector_norm(f),
                        f.abs().max(),
                    ]
                )
            )
        fixed = torch.stack(again).cpu().numpy()
        finite_count[bad], s1[bad], norm2[bad], absmax[bad] = fixed.T
    with np.errstate(all="ignore"):
        mean = s1 / finite_count
        squares = norm2 * norm2
        spread = squares - s1 * mean
        # what is left of a constant tensor's spread is rounding: 0
        spread[spread <= 4 * np.finfo(np.float64).eps * np.sqrt(finite_count) * squares] = 0
        var = spread / np.maximum(finite_count - 1, 1)
        table = np.stack(
            [
                mean,
                np.sqrt(var),
                absmax,
                1 - nonzero / size,
                (size - finite_count) / size,
                sat / size,
            ],
            axis=1,
        )
    host = {} if keep else None
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    for r, i in enumerate(rows):
        if i >= 0:
            stats[i] = table[r]
        else:
            grad_stats[~i] = table[r]
        if keep:
            host[i] = host_x[offsets[r] : offsets[r + 1]]
    return stats, grad_stats, extra_host, host


def _absmax(x, sizes) -> list:
    """max |x| of each piece of ``x`` (``torch._foreach_max`` is slower on the CPU)."""
    return [p.max() for p in x.abs().split(sizes)]


def _keep_full(rec: Recorder, shown: list, target: int, host) -> dict:
    """Values and gradients kept whole on the host for ``--expect`` and ``run.value``
    (value index → (value, gradient), numpy, float64 for floats): from the summaries'
    buffer when it was read back whole, else the named ones first, each at most
    :data:`KEEP_ONE` bytes, :data:`KEEP_BYTES` in all."""
    full = {}
    if host is not None:
        for i in shown:
            t = rec.held(i)
            value = host.get(i)
            if value is None:  # integers (indices), empty tensors
                if t.numel() * 8 > KEEP_ONE:
                    continue
                value = t.detach().cpu().numpy().reshape(-1)
            grad = host.get(~i)
            full[i] = (value.reshape(t.shape), None if grad is None else grad.reshape(t.shape))
        return full
    spent = 0
    order = sorted(
        shown, key=lambda i: (i != target, not rec.labels.get(i) and rec.producer[i] >= 0)
    )
    for i in order:
        t = rec.held(i)
        size = t.numel() * 8
        if size > KEEP_ONE or spent + 2 * size > KEEP_BYTES:
            continue
        g = rec.grads.get(i)
        full[i] = (
            to_numpy(t) if t.is_floating_point() else t.detach().cpu().numpy(),
            to_numpy(g) if g is not None else None,
        )
        spent += 2 * size
    return full


def release(run: TorchRun) -> None:
    """Drop what only the checks needed (the ops' functions and arguments)."""
    for op in run.ops:
        op.func = op.spec = None
        op.consts = ()
