"""Watching a PyTorch cell run, without changing it: :class:`Recorder`.

A ``TorchFunctionMode`` sees every torch call (``x @ W``, ``F.cross_entropy``, ``h.tanh()``)
and keeps a reference to the inputs and outputs of those that concern the gradient; global
module hooks say which ``nn.Module`` each call ran in; a wrapper of
``autograd.Function.apply`` records custom Functions as one op each. Tensor hooks keep the
gradients: on the leaves from the start, on the other values when a ``backward()`` starts
(or just before an in-place write changes them). While the cell runs nothing is computed
on its tensors, except a copy of what an in-place write is about to change, so its
outputs, tensors, random numbers and module state are those of a plain run. Everything
else waits for the cell's end (:func:`gradmagic.analysis.torchrun.finish`).

This module imports torch; nothing imports it unless a cell uses torch.
"""

from __future__ import annotations

import ast
import contextlib
import math
import sys
import types
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

__all__ = [
    "Recorder",
    "Op",
    "assigned_names",
    "flatten",
    "unflatten",
    "RANDOM",
    "HOLD_BYTES",
    "modes_set_aside",
]


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
# modules with a fused path torch takes only when no mode is on and no gradient is wanted
_FAST_PATH = (
    torch.nn.TransformerEncoderLayer,
    torch.nn.TransformerEncoder,
    torch.nn.MultiheadAttention,
)
HOLD_BYTES = 1 << 30  # bytes of tensors the record may keep alive
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


def _leave(mode) -> None:
    """Take ``mode`` off torch's function-mode stack wherever it is: the modes a cell entered
    and did not leave stay above it, in their order."""
    from torch.overrides import _get_current_function_mode_stack, _pop_mode, _push_mode

    if not any(m is mode for m in _get_current_function_mode_stack()):
        return
    above = []
    while (top := _pop_mode()) is not mode:
        above.append(top)
    for m in reversed(above):
        _push_mode(m)


@contextlib.contextmanager
def modes_set_aside():
    """The function modes on torch's stack (a user's) are off while inside, so they see
    none of the ops run here; they are back, in their order, on leaving."""
    from torch.overrides import _len_torch_function_stack, _pop_mode, _push_mode

    modes = [_pop_mode() for _ in range(_len_torch_function_stack())]
    try:
        yield
    finally:
        for m in reversed(modes):
            _push_mode(m)


def _users(obj) -> bool:
    """``obj`` (a function, or a property's getter) was not written in torch."""
    obj = getattr(obj, "fget", obj)
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] != "torch"


def _shipped(func):
    """The function torch's C core runs for ``func``. A mode is handed the public attribute
    (``torch.Tensor.mean``): if the user replaced it, that is their function, which calls
    torch's, which comes back here. Calling theirs would run it twice (once from
    their call, once from here); torch's is what the plain run calls at this point."""
    if callable(func) and not _users(func):
        return func
    for name, value in vars(torch.Tensor).items():
        if value is func:
            base = getattr(torch._C.TensorBase, name, None)
            return base if callable(base) else func
    return func


@contextlib.contextmanager
def torch_as_shipped():
    """Tensor methods of torch's C core that a user replaced (``torch.Tensor.mean = ...``),
    and ``torch.autograd.grad`` if replaced after this module was loaded, are torch's own
    while inside, so the magic's own work calls none of the user's code; they are the
    user's again on leaving."""
    tensor, base = torch.Tensor, torch._C.TensorBase
    patched = {
        name: value
        for name, value in list(vars(tensor).items())
        if _users(value) and hasattr(base, name)
    }
    grad = torch.autograd.grad
    try:
        for name in patched:
            delattr(tensor, name)
        if grad is not _AUTOGRAD_GRAD and _users(grad) and not _users(_AUTOGRAD_GRAD):
            torch.autograd.grad = _AUTOGRAD_GRAD
        yield
    finally:
        torch.autograd.grad = grad
        for name, value in patched.items():
            setattr(tensor, name, value)


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
# torch function → (its op name, writes in place, not an op, the function to call)
_KINDS: dict = {}
_AUTOGRAD_GRAD = torch.autograd.grad
_TRACING = torch._C._get_tracing_state


# the call is on the function's first line: a copy of its code moved to another file and line
# calls from there (a def's body would be a line or more below the line it is moved to)
_at = lambda func, args, kwargs: func(*args, **kwargs)  # noqa: E731
_AT = _at.__code__
_OVERRIDES = torch.overrides.__file__
_CALLS: dict = {}  # (code, line) -> _at as if written there
CALL_NAME = "__gradmagic_call__"


def call_from(frame):
    """A function that calls ``func(*args, **kwargs)`` as if from ``frame``'s line.

    A warning torch raises names the Python line that called it (``F.mse_loss``: "Using a
    target size ..."); under the recorder that line would be the recorder's own, shown as
    gradmagic's and counted once for every line of the cell. Called through this function,
    it names the line it names without the recorder, in that line's module. A frame of
    ``handle_torch_function`` stands for the public function that called it: the line is
    that function's caller."""
    if frame.f_code.co_filename == _OVERRIDES and frame.f_back and frame.f_back.f_back:
        frame = frame.f_back.f_back
    code, line = frame.f_code, frame.f_lineno or frame.f_code.co_firstlineno
    call = _CALLS.get((code, line))
    if call is None:
        if len(_CALLS) >= 4096:
            _CALLS.clear()
        moved = _AT.replace(co_filename=code.co_filename, co_firstlineno=line, co_name=CALL_NAME)
        call = _CALLS[code, line] = types.FunctionType(moved, frame.f_globals)
    return call


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


def version_of(t) -> int:
    """How often ``t`` was written in place (``t._version``); -1 for an inference tensor,
    which keeps no count."""
    try:
        return t._version
    except RuntimeError:
        return -1


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
        # a leaf's gradient over several passes: the backward passes' sum (what its .grad
        # gained); a torch.autograd.grad pass (which writes no .grad) only if none ran
        self.pass_kind = "backward"
        self.written_at: dict = {}  # value index → how many ops ran before it was written over
        self.leaf_passes: dict = {}  # leaf value index → backward passes that reached it
        self.pending: list = []  # values that require a gradient and have no hook yet
        self.handles: list = []
        self.stack: tuple = ()
        self.modules: dict = {}  # id → module (kept alive while the run is recorded)
        # value index of a parameter → [it, its value before its first in-place update, that
        # update once it is written again]: measured with the run's other statistics
        self.updates: dict = {}
        self.updated: dict = {}  # id(parameter) → its value index in updates
        self.backward_lines: list = []
        self.saved: dict = {}  # value index → what it held before an in-place write
        self.data_of: dict = {}  # id(p.data) → (p.data, p): writes through .data update p
        self.inside = 0  # > 0 inside a custom Function's forward: its ops are not recorded
        # the record keeps every tensor it saw alive: past ``budget`` bytes of them (a loop
        # of steps whose graphs a plain run frees), it stops and lets go
        self.budget = HOLD_BYTES
        self.made_bytes = 0
        self.stopped_at = None  # the cell's line where the recording stopped
        self.aside = None  # id of the module our mode stepped aside for (see _fast)
        self.last_line = None
        self._cell_frame = None

    # ------------------------------------------------------------------ watching
    def __enter__(self):
        self._hooks = (
            torch.nn.modules.module.register_module_forward_pre_hook(self._enter_module),
            # (always: a forward that raises leaves its module too)
            torch.nn.modules.module.register_module_forward_hook(
                self._leave_module, always_call=True
            ),
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
            _leave(self)  # (not a pop: the cell may have entered a mode and kept it)
        finally:
            torch.autograd.Function.apply = self._apply
            for h in self._hooks:
                h.remove()
            self._flush_line(None)

    def _enter_module(self, module, args):
        self.modules[id(module)] = module
        self.stack = self.stack + (id(module),)
        if self.aside is None and isinstance(module, _FAST_PATH) and self._fast(module, args):
            self._step_aside(module)

    def _fast(self, module, args) -> bool:
        """The module may take torch's fused fast path (no gradient is wanted through it), which
        torch does not take while a mode is on: ours steps aside so that it does (the ops in
        it take no gradient, so nothing of the record is lost)."""
        from torch.overrides import _get_current_function_mode_stack

        stack = _get_current_function_mode_stack()
        if not stack or stack[-1] is not self:  # (a mode of the user's: no fast path plainly)
            return False
        if not torch.is_grad_enabled():
            return True
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        return not any(t.requires_grad for t in (*module.parameters(), *tensors))

    def _step_aside(self, module) -> None:
        from torch.overrides import _pop_mode

        _pop_mode()
        self.aside = id(module)
        self.inside += 1

    def _leave_module(self, module, args, output):
        if self.aside == id(module):
            from torch.overrides import _push_mode

            _push_mode(self)
            self.aside = None
            self.inside -= 1
        stack = self.stack
        if stack and stack[-1] == id(module):
            self.stack = stack[:-1]
        elif id(module) in stack:  # (a module inside it raised, and was left without a word)
            self.stack = stack[: len(stack) - 1 - stack[::-1].index(id(module))]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.inside:
            return func(*args, **kwargs)
        call = call_from(sys._getframe(1))
        try:
            name, inplace, skip, func = _KINDS[func]
        except (KeyError, TypeError):
            given, func = func, _shipped(func)
            name = _op_name(func)
            inplace, skip = _inplace(name), name in _NOT_OPS or name.startswith(".")
            try:
                _KINDS[given] = name, inplace, skip, func
            except TypeError:  # (a function that cannot be a key)
                pass
        if kwargs.get("inplace") is True:  # F.relu(x, inplace=True), F.dropout(..., inplace=True)
            inplace = True
        if name == "backward" or func is _AUTOGRAD_GRAD:
            # (torch.autograd.grad and backward(inputs=...) stop at tensors whose nodes do
            # not run: those get tensor hooks, which fire there)
            self.pass_kind = "backward" if name == "backward" else "grad"
            self._hook_pending(node=name == "backward" and kwargs.get("inputs") is None)
        if inplace and args:
            before = self._before_write(args[0])
            out = call(func, args, kwargs)
            if before:
                self._after_write(before)
        else:
            out = call(func, args, kwargs)
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
            update = self.updates.get(self.updated.get(id(p), -1))
            if update is not None and update[0] is p and update[2] is None:
                update[2] = p.detach() - update[1]  # written again: its first update, now
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
        """Keep the copies, and note a parameter's first update (a write under no_grad or
        through ``.data``): its size is measured when the run's statistics are taken."""
        for i, p, old, through_data in found:
            self.saved[i] = old
            self.written_at[i] = len(self.ops)  # (ops from here on read the new contents)
            if (
                p.requires_grad
                and p.is_leaf
                and p.is_floating_point()
                and (through_data or not torch.is_grad_enabled())
                and id(p) not in self.updated
            ):
                self.updates[i] = [p, old, None]
                self.updated[id(p)] = i

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
        if _TRACING() is None:  # (under torch.jit.trace a size is a traced value)
            self.made_bytes += t.nelement() * t.element_size()
        i = len(self.tensors)
        self.tensors.append(t)
        try:
            self.version.append(t._version)
        except RuntimeError:  # an inference tensor keeps no count (see version_of)
            self.version.append(-1)
        self.producer.append(producer)
        self.index_of[id(t)] = i
        if producer < 0 and t.requires_grad and t.is_leaf and id(t) not in self.leaf_hooks:
            self._hook(t, i, leaf=True)  # this run's gradient (.grad may hold older ones too)
        return i

    def _pending_set(self) -> set:
        return set(self.pending) - self.hooked

    def _hook_pending(self, node: bool = True) -> None:
        """Hooks on the values made so far that take a gradient (a backward is starting).
        A value written over in place got its hook before the write."""
        tensors, index_of, hooked, version = self.tensors, self.index_of, self.hooked, self.version
        for j in self.pending:
            t = tensors[j]
            # (a view written over through its base is stale: no hook, torch may crash on it)
            if j not in hooked and index_of.get(id(t)) == j and version_of(t) == version[j]:
                self._hook(t, j, node=node)
        self.pending = []

    def _keep_leaf(self, i, g) -> None:
        grads, passes = self.grads, self.leaf_passes
        n = passes.get(i, 0)
        if self.pass_kind == "backward":
            passes[i] = n + 1
            if n and i in grads:
                try:
                    g = grads[i] + g
                except RuntimeError:  # (layouts that do not add: the last pass's, counted)
                    pass
            grads[i] = g
        elif not n:
            grads[i] = g

    def _hook(self, t, i, leaf=False, node=False):
        grads = self.grads
        if leaf or not node or t.grad_fn is None:
            if leaf:  # a parameter updated in place is a new value: the latest one gets it
                key, index_of = id(t), self.index_of
                self.leaf_hooks[key] = t

                def keep(g):
                    self._keep_leaf(index_of[key], g)
            elif t.grad_fn is None:

                def keep(g):
                    self._keep_leaf(i, g)
            else:

                def keep(g):
                    grads[i] = g

            try:
                self.handles.append(t.register_hook(keep))
                self.hooked.add(i)
            except RuntimeError:  # a tensor that cannot take a hook (an inference tensor)
                pass
            return
        # another value: a hook on the autograd node that made it, which receives the
        # gradients of its outputs (cheaper than a tensor hook, and the node stays the one
        # that made this value if the tensor is written over in place later)
        slot = t.output_nr

        def keep_node(grad_inputs, grad_outputs):
            g = grad_outputs[slot]
            if g is not None:
                grads[i] = g

        self.handles.append(t.grad_fn.register_hook(keep_node))
        self.hooked.add(i)

    def _record(self, func, name, args, kwargs, out, custom=None, inplace=False):
        if out is None and not inplace:  # (p.grad = None: a setter makes nothing)
            return
        if not self._concerns(args, kwargs, out):
            return
        leaves, spec = flatten(args, kwargs)
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
        if self.made_bytes > self.budget:
            self._stop(line)

    def _stop(self, line) -> None:
        """Record nothing more, and let go of what was recorded (the cell runs on plain)."""
        self.stopped_at = line
        self.inside += 1  # (never taken back: every op and Function.apply passes through)
        self.remove_hooks()
        self.tensors, self.saved, self.grads, self.ops = [], {}, {}, []
        self.index_of, self.pending, self.updates, self.updated = {}, [], {}, {}
        self.leaf_hooks, self.data_of, self.modules = {}, {}, {}

    def _concerns(self, args, kwargs, out) -> bool:
        """Whether an op matters to the gradient: it reads a tensor that requires one or one
        made by a recorded op (what depends on a parameter, through detach and no_grad too),
        or makes a tensor that requires one. Others (sampling a batch, indexing the data,
        a learning rate times a gradient) leave the tensors they make as leaves."""
        if type(out) is torch.Tensor and out.requires_grad:  # (most ops: no look at the args)
            return True
        index_of, tensors, producer = self.index_of, self.tensors, self.producer
        for a in (*args, *kwargs.values()) if kwargs else args:
            for x in a if type(a) in _SEQUENCES else (a,):
                if isinstance(x, torch.Tensor):
                    if x.requires_grad:
                        return True
                    i = index_of.get(id(x))
                    if i is not None and tensors[i] is x and producer[i] >= 0:
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
