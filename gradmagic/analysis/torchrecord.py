"""Watching a PyTorch cell run, without changing it: :class:`Recorder`.

A ``TorchFunctionMode`` sees every torch call (``x @ W``, ``F.cross_entropy``, ``h.tanh()``)
and keeps a reference to the inputs and outputs of those that concern the gradient; global
module hooks say which ``nn.Module`` each call ran in; a wrapper of
``autograd.Function.apply`` records custom Functions as one op each. Tensor hooks keep the
gradients: on the leaves from the start, on the other values when a ``backward()`` starts
(or just before an in-place write changes them), which also keeps its loss and lets go of
earlier steps (a training loop keeps one step). While the cell runs nothing is computed
on its tensors, except a copy of what an in-place write is about to change, so its
outputs, tensors, random numbers and module state are those of a plain run. Everything
else waits for the cell's end (:func:`gradmagic.analysis.torchrun.finish`).

Why its own: the numpy engine builds gradmagic's graph as the rewritten cell runs; here
torch builds its own, and this only watches.
This module imports torch; nothing imports it unless a cell uses torch.
"""

from __future__ import annotations

import bisect
import functools
import sys
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .torchcalls import (
    _AUTOGRAD_GRAD,
    _KINDS,
    _NOT_OPS,
    _PLAIN,
    _SEQUENCES,
    _TENSOR,
    _TRACING,
    CLOCK,
    Op,
    _inplace,
    _leave,
    _op_name,
    _shipped,
    call_from,
    flatten,
    version_of,
)

__all__ = ["Recorder", "HOLD_BYTES", "ancestors", "graph_values"]


# modules with a fused path torch takes only when no mode is on and no gradient is wanted
_FAST_PATH = (
    torch.nn.TransformerEncoderLayer,
    torch.nn.TransformerEncoder,
    torch.nn.MultiheadAttention,
)
HOLD_BYTES = 1 << 30  # bytes of tensors the record may keep alive


def _plainly(method):
    """``method`` run with tensor subclasses' ``__torch_function__`` off: the record's own
    reading of the cell's tensors (hooks, sizes, copies) is no call a subclass of the
    user's should see."""

    @functools.wraps(method)
    def run(*args, **kwargs):
        with torch._C.DisableTorchFunctionSubclass():
            return method(*args, **kwargs)

    return run


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
        # id of a leaf → the backward passes that reached it, and whether its .grad held a
        # gradient before the first (both make .grad differ from the gradient shown)
        self.passes: dict = {}
        self.leaf_root: dict = {}  # id of a leaf → what the pass that gave its gradient began at
        self.pass_root: tuple = (None, True)  # (what the running pass began at, adds to .grad)
        self.written_at: dict = {}  # value index → how many ops ran before it was written over
        self.pending: list = []  # values that require a gradient and have no hook yet
        self.handles: list = []
        self.stack: tuple = ()
        self.modules: dict = {}  # id → module (kept alive while the run is recorded)
        # value index of a parameter → [it, its value before its first in-place update, that
        # update once it is written again]: measured with the run's other statistics
        self.updates: dict = {}
        self.updated: dict = {}  # id(parameter) → its value index in updates
        self.saved: dict = {}  # value index → what it held before an in-place write
        # id(p.data) → (p.data, p, ".data"), id(h.detach()) → (that, h, "detach()"): the same
        # memory, so a write through the alias is a write into its source
        self.data_of: dict = {}
        self.alias_writes: list = []  # (line, value index) of writes through detach()
        self.inside = 0  # > 0 inside a custom Function's forward: its ops are not recorded
        # the record keeps every tensor it saw alive: past ``budget`` bytes of them (a loop
        # of steps whose graphs a plain run frees), it stops and lets go
        self.budget = HOLD_BYTES
        self.made_bytes = 0
        self.stopped_at = None  # the cell's line where the recording stopped
        self.aside: int | None = None  # id of the module our mode stepped aside for (see _fast)
        self.losses: list = []  # what each backward() of the cell began at (one real number)
        self.mark = 0  # values recorded when the last backward() began (see _let_go)
        self.since = self.kept_since = 0.0  # when it began; when what is kept began
        self.backward_seconds = 0.0  # the backward pass run for the cell when it ran none
        self.slots: dict = {}  # value index → [it], read by the hook that keeps its gradient
        self.last_line = None

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
            root = args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))
            if name == "backward":
                self._step(root)
                self._let_go(root)
            # (torch.autograd.grad and backward(inputs=...) stop at tensors whose nodes do
            # not run: those get tensor hooks, which fire there)
            self._hook_pending(node=name == "backward" and kwargs.get("inputs") is None)
            self.pass_root = (root, name == "backward")  # (autograd.grad adds to no .grad)
        if name in ("zero_", "_foreach_zero_") and args and self.passes:
            self._zeroed(args[0])
        before = None
        if inplace and args:
            before = self._before_write(args[0], None if skip else (args[1:], kwargs))
        out = call(func, args, kwargs)
        if name == "detach" and type(out) is torch.Tensor and args:
            self.data_of[id(out)] = (out, args[0], "detach()")
        if skip:
            if before:
                self._after_write(before)
            if name == "backward":
                self._line()  # (names what the line before assigned)
            elif name == ".data" and isinstance(out, torch.Tensor) and args:
                self.data_of[id(out)] = (out, args[0], ".data")
            return out
        self._record(func, name, args, kwargs, out, inplace=inplace)
        if before:  # (after the op that wrote is recorded: it read the old contents)
            self._after_write(before)
        return out

    @_plainly
    def _before_write(self, written, rest: tuple[Any, Any] | None = None) -> list:
        """Copies of the recorded values an in-place write is about to change (``p -= lr *
        p.grad``, ``p.data += ...``, ``torch._foreach_add_(params, ...)``, ``h[0] = 0``): each
        value keeps what the ops that read it saw. ``rest``: the op's other arguments, when
        it is to be recorded."""
        found: list = []
        index_of = self.index_of
        if type(written) is torch.Tensor and id(written) not in index_of:
            base = written._base  # (a write into a view of nothing recorded: nothing to keep)
            if id(written) not in self.data_of and (base is None or id(base) not in index_of):
                if rest is None or not self._concerns(*rest, None):
                    return found
                # a tensor seen first as what a recorded op writes into (torch.zeros(n)
                # .index_add_(0, i, h)): a leaf that keeps what it held before the write
                self._value(written)
        for t in written if isinstance(written, (list, tuple)) else (written,):
            if not isinstance(t, torch.Tensor):
                continue
            alias: Any = self.data_of.get(id(t))  # (a tuple where through_data, else unread)
            through_data = alias is not None and alias[0] is t
            p = alias[1] if through_data else t
            update = self.updates.get(self.updated.get(id(p), -1))
            if update is not None and update[0] is p and update[2] is None:
                update[2] = p.detach() - update[1]  # written again: its first update, now
            if through_data and alias[2] == "detach()" and id(p) in index_of:
                self.alias_writes.append((self._line(), index_of[id(p)]))
            # a write into a view writes into its base too; one through an alias, into both
            for q in (p, p._base, t) if through_data else (p, p._base):
                if q is None:
                    continue
                i = self.index_of.get(id(q))
                if i is not None and self.tensors[i] is q and i not in self.saved:
                    found.append((i, q, q.detach().clone(), through_data))
                    if i in self._pending_set():  # its gradient: from the node that made it
                        self._hook(q, i)
        return found

    @_plainly
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

    @_plainly
    def _step(self, root) -> None:
        """Keep the loss a backward() begins at (read when the cell ends)."""
        if isinstance(root, torch.Tensor) and root.numel() == 1 and root.is_floating_point():
            self.losses.append(root.detach())

    @_plainly
    def _zeroed(self, grads) -> None:
        """A leaf's ``.grad`` zeroed in place (``zero_grad(set_to_none=False)``): its count
        of backward passes starts again."""
        ids = {id(g) for g in (grads if isinstance(grads, (list, tuple)) else (grads,))}
        for key, t in self.leaf_hooks.items():
            if id(t.grad) in ids:
                self.passes[key] = (0, False)

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
        """The value index of tensor ``t`` as an input (a new leaf if unseen, or if a leaf
        written over out of sight: ``p.data += ...`` makes a new value of a parameter)."""
        i = self.index_of.get(id(t))
        if i is not None and self.tensors[i] is t and not (i in self.saved and t.is_leaf):
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

    @_plainly
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

    def _hook(self, t, i, leaf=False, node=False):
        rec = self  # (whose dicts _keep renumbers; a slot holds a value's index as it is now)
        if leaf or not node or t.grad_fn is None:
            if leaf:  # a parameter updated in place is a new value: the latest one gets it
                key, passes = id(t), self.passes
                self.leaf_hooks[key] = t

                def keep(g):
                    i = rec.index_of.get(key)
                    if i is None:  # (its value was let go of, and not read since)
                        return
                    rec.grads[i] = g
                    root, accumulates = rec.pass_root
                    rec.leaf_root[key] = root  # (whose gradient the kept one is)
                    if accumulates:
                        # (a leaf's hook runs before torch adds g into its .grad; one set to
                        # None or zeroed since the last pass starts the count again)
                        count, held = (0, False) if t.grad is None else passes.get(key, (0, True))
                        passes[key] = (count + 1, held)
            else:
                slot = self.slots[i] = [i]

                def keep(g):
                    if slot[0] is not None:
                        rec.grads[slot[0]] = g

            try:
                self.handles.append(t.register_hook(keep))
                self.hooked.add(i)
            except RuntimeError:  # a tensor that cannot take a hook (an inference tensor)
                pass
            return
        # another value: a hook on the autograd node that made it, which receives the
        # gradients of its outputs (cheaper than a tensor hook, and the node stays the one
        # that made this value if the tensor is written over in place later)
        nr, slot = t.output_nr, [i]
        self.slots[i] = slot

        def keep_node(grad_inputs, grad_outputs):
            g = grad_outputs[nr]
            if g is not None and slot[0] is not None:
                rec.grads[slot[0]] = g

        self.handles.append(t.grad_fn.register_hook(keep_node))
        self.hooked.add(i)

    @_plainly
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
            # (an in-place write makes a new value of the same tensor: the old value's row
            # keeps the tensor, whose ``_version`` then says it was written over)
            j = self._new(o, k)
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
                if type(x) in _PLAIN or not isinstance(x, torch.Tensor):
                    continue
                if x.requires_grad:
                    return True
                i = index_of.get(id(x))
                if i is not None and tensors[i] is x and producer[i] >= 0:
                    return True
        if type(out) is torch.Tensor:
            return False  # (its requires_grad is read above)
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(o, torch.Tensor) and o.requires_grad:
                return True
        return False

    # ------------------------------------------------------------------ one step kept
    @_plainly
    def _let_go(self, root) -> None:
        """As a backward() begins, let go of what was made before the previous one began,
        unless this pass reaches it or a tensor of the namespace depends on it: a training
        loop keeps about one step in the record, as a plain run keeps one step's graph."""
        mark, since = self.mark, self.since
        self.mark, self.since = len(self.tensors), CLOCK()
        if not mark:
            return
        self.kept_since = since
        keep = set(range(mark, len(self.tensors)))
        named = [t for t in list(self.ns.values()) if isinstance(t, torch.Tensor)]
        for t in (root, *named, *self.leaf_hooks.values()):
            i = self.index_of.get(id(t))
            if i is not None and self.tensors[i] is t:
                keep.add(i)
                keep.update(graph_values(self, ancestors(self, i)))
        self._keep(keep)
        self.mark = len(self.tensors)

    def _keep(self, keep: set) -> None:
        """Renumber the record to the values ``keep`` and the ops that read only them (an
        op that read a value let go of goes too, and what it made is a leaf)."""
        ops = []
        for k, op in enumerate(self.ops):
            if keep.issuperset(op.inputs) and keep.intersection(op.outputs):
                keep.update(op.outputs)
                ops.append(k)
        if len(keep) == len(self.tensors):
            return
        order = sorted(keep)
        new = {old: n for n, old in enumerate(order)}
        new_op = {old: n for n, old in enumerate(ops)}
        for k in ops:
            op = self.ops[k]
            op.inputs = tuple(new[i] for i in op.inputs)
            op.outputs = tuple(new[i] for i in op.outputs)
        self.ops = [self.ops[k] for k in ops]
        self.tensors = [self.tensors[i] for i in order]
        self.version = [self.version[i] for i in order]
        self.producer = [new_op.get(self.producer[i], -1) for i in order]

        for name in ("labels", "saved", "grads", "updates", "written_at"):  # (value index → ...)
            setattr(self, name, {new[i]: v for i, v in getattr(self, name).items() if i in new})
        self.written_at = {i: bisect.bisect_left(ops, k) for i, k in self.written_at.items()}
        self.updated = {key: new[i] for key, i in self.updated.items() if i in new}
        self.hooked = {new[i] for i in self.hooked if i in new}
        self.pending = [new[i] for i in self.pending if i in new]
        self.alias_writes = [(line, new[i]) for line, i in self.alias_writes if i in new]
        self.index_of = {key: new[i] for key, i in self.index_of.items() if i in new}
        for i, slot in self.slots.items():  # (the hooks read the slots: renumbered in place)
            slot[0] = new.get(i)
        self.slots = {slot[0]: slot for slot in self.slots.values() if slot[0] is not None}
        self.made_bytes = sum(t.nelement() * t.element_size() for t in self.tensors)

    # ------------------------------------------------------------------ the end
    def remove_hooks(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


def ancestors(rec: Recorder, target: int) -> list:
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
