"""What a torch call is, to the recorder: its name, whether it writes in place, the
:class:`Op` it is recorded as, its arguments flattened, and the call made as if from the
user's own line; and the user's modes and patched methods set aside while the magic works.

Why its own: these are facts about torch's calls; the numpy engine has no counterpart.
This module imports torch; nothing imports it unless a cell uses torch.
"""

from __future__ import annotations

import ast
import contextlib
import math
import time
import types
from dataclasses import dataclass

import torch

__all__ = [
    "Op",
    "assigned_names",
    "call_from",
    "flatten",
    "unflatten",
    "version_of",
    "modes_set_aside",
    "torch_as_shipped",
    "RANDOM",
    "CALL_NAME",
    "CLOCK",
]

# the clock of a step's time and of the checks' budget: this thread's CPU time, which
# other programs' load on the machine does not stretch
CLOCK = time.thread_time


# torch calls that are not operations on values: read an attribute, ask a size, print, run
# backward, switch grad mode
_NOT_OPS = frozenset(
    (
        "backward register_hook retain_grad requires_grad_ size dim numel item tolist numpy "
        "__repr__ __format__ __str__ __len__ __bool__ __float__ __int__ __index__ __hash__ "
        "__iter__ __contains__ _set_grad_enabled is_grad_enabled data_ptr stride "
        "storage_offset is_contiguous element_size untyped_storage __reduce_ex__ __deepcopy__ "
        "grad is_floating_point is_complex get_device cpu _is_view manual_seed __array__ "
        "__dlpack__ __eq_hash__ equal allclose"
    ).split()
)
# ops whose result is random: the checks take what they made as given
RANDOM = frozenset(
    (
        "dropout dropout_ rand randn randint rand_like randn_like randint_like randperm "
        "multinomial bernoulli bernoulli_ normal normal_ uniform_ exponential_ alpha_dropout "
        "feature_alpha_dropout dropout1d dropout2d dropout3d poisson"
    ).split()
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


# Tensor's attributes as torch made them (a user's replaced before this import are not)
_SHIPPED = {name: value for name, value in vars(torch.Tensor).items() if not _users(value)}


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
        if _SHIPPED.get(name) is not value and _users(value) and hasattr(base, name)
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
    (
        "iadd isub imul itruediv ifloordiv imod ipow imatmul iand ior ixor ilshift irshift setitem"
    ).split()
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
_PLAIN = frozenset({int, float, bool, type(None), slice})  # (never tensors: no isinstance)


def flatten(args, kwargs) -> tuple:
    """An op's arguments as one list (a list or tuple argument spread, one level: ``cat``,
    ``stack``, ``_foreach_*``) and what :func:`unflatten` needs to rebuild them."""
    leaves: list = []
    shape: list[tuple[type, int] | None] = []  # (a sequence's type, its length), or None
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
