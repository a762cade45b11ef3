"""``%%autograd`` on a PyTorch cell: run it plain, record it, return a TorchRun.

When a cell's numbers are PyTorch tensors, torch is the engine and the cell is
not rewritten: its code is compiled as the shell would compile it and runs in
the user's namespace under a :class:`~gradmagic.analysis.torchrecord.Recorder`, so
its outputs, tensors, random numbers and module state are those of a plain run.

:func:`wants_torch` decides before the cell runs, from the cell's text and the
namespace, without importing torch: the cell imports torch, or reads a name
bound to something of torch's (the module, a tensor, an ``nn.Module``, a list
of tensors, an object of the notebook's whose attributes are tensors).

Why not :func:`~gradmagic.notebook.cell.prepare`: a PyTorch cell is not rewritten (torch
records its own graph). What the two share is one: the target's choice, the
:class:`~gradmagic.notebook.cell.NoTarget` it raises, and the callers that run it.
"""

from __future__ import annotations

import ast
import re
import sys
import types
import warnings

from . import memory
from .cell import NO_TARGET, NoTarget, named_target
from .cell_facts import _assigned_name

__all__ = ["wants_torch", "run"]


_WORD = re.compile(r"[A-Za-z_]\w*")


NoTensorTarget = NoTarget  # (the name grade() imports)


def wants_torch(source: str, ns) -> bool:
    """True if the cell uses PyTorch: it imports torch, or reads a name bound to a torch
    object. Never imports torch; False for a cell that does not parse."""
    torch = sys.modules.get("torch")
    if "torch" not in source:  # (the common cases cost no parse: no torch, or no torch name)
        if torch is None or not any(
            name in ns and _of_torch(ns[name], torch) for name in set(_WORD.findall(source))
        ):
            return False
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    loaded, bound = set(), set()  # (a name the cell binds before reading it is its own)
    for statement in tree.body:
        stored = set()
        for node in ast.walk(statement):
            if isinstance(node, ast.Import):
                if any(a.name.split(".")[0] == "torch" for a in node.names):
                    return True
            elif isinstance(node, ast.ImportFrom):
                if (node.module or "").split(".")[0] == "torch" and not node.level:
                    return True
            elif isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    if node.id not in bound:
                        loaded.add(node.id)
                else:
                    stored.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stored.add(node.name)
        bound |= stored
    if torch is None:
        return False
    return any(name in ns and _of_torch(ns[name], torch) for name in loaded)


def _of_torch(obj, torch, depth: int = 0) -> bool:
    """Something of torch's: the module or a submodule, a tensor, a module, a function or
    class of torch, a list/tuple/dict of tensors, a notebook object holding tensors."""
    if isinstance(obj, (torch.Tensor, torch.nn.Module)):
        return True
    if isinstance(obj, types.ModuleType):
        return obj.__name__.split(".")[0] == "torch"
    module = getattr(type(obj), "__module__", "") or ""
    if module.split(".")[0] == "torch":
        return True
    own = getattr(obj, "__module__", None)
    if isinstance(own, str) and own.split(".")[0] == "torch" and callable(obj):
        return True
    if depth >= 2:
        return False
    if isinstance(obj, (list, tuple)):
        return any(_of_torch(e, torch, depth + 1) for e in obj[:8])
    if isinstance(obj, dict):
        return any(_of_torch(e, torch, depth + 1) for e in list(obj.values())[:8])
    if module == "__main__" and not isinstance(obj, type):
        try:
            attributes = vars(obj)
        except TypeError:
            return False
        return any(_of_torch(e, torch, depth + 1) for e in list(attributes.values())[:16])
    return False


def run(
    source: str,
    ns,
    options,
    *,
    filename: str = "<cell>",
    first_line: int = 1,
    compiler=compile,
    global_ns=None,
    source_text: str | None = None,
):
    """Run a PyTorch cell plain in ``ns`` under the recorder; return its
    :class:`~gradmagic.analysis.torchrun.TorchRun`.

    The target is ``options.target`` (a name), else the cell's last expression, else
    the name its last statement assigns. Raises what the cell raises (after removing
    every hook), :class:`~gradmagic.notebook.cell.NoTarget`, or ``SyntaxError``.
    """
    __tracebackhide__ = True
    import torch
    from ..analysis import torchrun

    global_ns = ns if global_ns is None else global_ns
    code, final_code, assigned, assigns = _compiled(source, filename, first_line, compiler)
    if options.target is None and final_code is None and assigned is None:
        exec(code, global_ns, ns)  # no target can come of it: a plain run, nothing recorded
        raise NoTarget(NO_TARGET)
    recorder = torchrun.Recorder(filename, ns, assigns)
    value, ran, full = _recorded(recorder, code, final_code, global_ns, ns, options)
    try:
        if recorder.stopped_at is not None:
            raise NoTarget(_stopped(recorder, full))
        target = _tensor_target(torch, options.target, value, ns, final_code, assigned)
        try:
            source = source if source_text is None else source_text
            result = _finished(recorder, target, source, options, ns, ran)
        except Exception as e:  # noqa: BLE001 - the cell ran: what it did stands, said plainly
            raise NoTarget(
                f"the cell ran, but its record could not be made ({type(e).__name__}: {e})"
            ) from e
    except NoTarget as e:  # (what plain Python shows of the cell, it still shows)
        e.value, e.shown = value, final_code is not None
        raise
    finally:
        recorder.remove_hooks()
    torchrun.release(result)
    return result


def _recorded(recorder, code, final_code, global_ns, ns, options) -> tuple:
    """Run the cell under ``recorder``: (its value, the seconds it took, the memory bound
    if the process outgrew it). What the cell raises is raised, with every hook removed."""
    __tracebackhide__ = True
    from ..analysis.torchcalls import CLOCK

    value, full = None, []

    def stop(limit):  # (the record stops at its next op)
        full.append(limit)
        recorder.budget = -1

    try:
        started = CLOCK()
        with recorder, memory.bounded(stop, options.max_memory):
            exec(code, global_ns, ns)
            if final_code is not None:
                value = eval(final_code, global_ns, ns)
        # (the seconds of what the record kept: a loop's last step, not the whole loop)
        return value, CLOCK() - max(started, recorder.kept_since), full
    except BaseException:
        recorder.remove_hooks()
        raise


def _finished(recorder, value, source, options, ns, ran):
    """The run's summaries and checks; what they do draws no number of the cell's, and no
    mode or patch of the user's sees it."""
    import torch

    from ..analysis import torchcheck_run, torchrun

    with (
        torchcheck_run.rng_kept(),
        torchrun.modes_set_aside(),
        torchrun.torch_as_shipped(),
        torch._C.DisableTorchFunctionSubclass(),  # (nor a tensor subclass of the user's)
    ):
        result = torchrun.finish(recorder, value, source=source, options=options, ns=ns)
        if not options.no_check:
            with warnings.catch_warnings():  # the check replays the cell's ops: their
                warnings.simplefilter("ignore")  # warnings were the cell's, shown once
                step = ran + recorder.backward_seconds  # (its forward and backward)
                result.checks = torchcheck_run.check(result, recorder, eps=None, ran=step)
    return result


def _stopped(recorder, full: list) -> str:
    """Why the record stopped, and where (``full``: the memory bound, if it was that)."""
    made = (
        f"made the process more than {full[0] / 2**20:,.0f} MB bigger"
        if full
        else f"made more than {recorder.budget / 2**20:,.0f} MB of tensors"
    )
    return (
        f"the cell {made}, which the record would keep alive: it stopped at line "
        f"{recorder.stopped_at} and shows nothing (the cell ran as it is; run fewer "
        "steps or smaller tensors under the magic to see them"
        + (", or give it more room with --max-memory GB)" if full else ")")
    )


def _tensor_target(torch, name, value, ns, final_code, assigned):
    """The cell's target: the variable ``name`` (``-t``), else its last expression's
    ``value``, else what its last statement assigned; NoTarget unless it is a
    one-element ``torch.Tensor``."""
    __tracebackhide__ = True
    value, what = named_target(name, value, ns, final_code is not None, assigned)
    if not isinstance(value, torch.Tensor):
        raise NoTarget(
            f"the cell uses PyTorch, so it ran as plain PyTorch, but {what} "
            f"is a {type(value).__name__}, not a torch.Tensor"
        )
    # (read by torch's own methods: a subclass of the user's sees no call of the magic's)
    with torch._C.DisableTorchFunctionSubclass():
        if value.layout != torch.strided or value.is_nested or value.is_meta:
            kind = "meta" if value.is_meta else "nested" if value.is_nested else str(value.layout)
            raise NoTarget(
                f"{what} is a {kind} tensor; the magic shows dense tensors that hold their numbers"
            )
        if value.is_complex():
            raise NoTarget(
                f"{what} is a complex tensor; a gradient is taken of a real number "
                "(.real, .abs(), or a real loss of it)"
            )
        if value.numel() != 1:
            raise NoTarget(
                f"{what} is a tensor of shape {tuple(value.shape)}; reduce it to "
                "one number (.sum(), .mean()) to differentiate it"
            )
    return value


_CODES: dict = {}  # (text, first line, compiler, its flags) → what _compiled made of it
_KEPT_CODES = 64


def _compiled(source, filename, first_line, compiler):
    """(code, code of the last expression or None, the name the last statement assigns,
    line → names assigned) of a cell. A cell run again (a training step) is not parsed
    again: its code is the last run's, given this run's file name."""
    key = (source, first_line, compiler, getattr(compiler, "flags", None))
    made = _CODES.get(key)
    if made is None:
        if len(_CODES) >= _KEPT_CODES:
            _CODES.clear()
        made = _CODES[key] = _parsed(source, filename, first_line, compiler)
    code, final_code, assigned, assigns = made
    if code.co_filename != filename:
        code = _renamed(code, filename)
        final_code = final_code and _renamed(final_code, filename)
    return code, final_code, assigned, assigns


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    """``code`` (and the functions and classes it defines) as compiled in ``filename``."""
    consts = tuple(
        _renamed(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


def _parsed(source, filename, first_line, compiler):
    from ..analysis.torchrun import assigned_names

    # (the lines before it as blank lines: numbered as in the notebook with no walk of the tree)
    tree = ast.parse("\n" * (first_line - 1) + source, filename)
    final = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        final = ast.Expression(tree.body.pop().value)
    assigned = _assigned_name(tree.body[-1]) if tree.body else None
    code = compiler(tree, filename, "exec")
    final_code = compiler(final, filename, "eval") if final is not None else None
    return code, final_code, assigned, assigned_names(tree)
