"""A recorded PyTorch run's graph as boxes: grouped by ``nn.Module``, repeated blocks folded.

:func:`layout` decides what a drawing of a :class:`~gradmagic.analysis.torchrun.TorchRun`
shows within ``max_nodes`` boxes: each op the target depends on is drawn on its own, or inside
the box of the module it ran in (``model.blocks.3.attn``, with its class). Modules are opened
from the outside in while the drawing stays within the budget; siblings of a ``ModuleList`` or
``Sequential`` that ran the same ops are one box (``blocks.0-11  Block x 12``). ``open``
names modules to open one level whatever the budget (a folded box opens at the module
named; what is inside stays closed). Ops of
the cell's own top level that exceed the budget are grouped by the cell's line.

Why not :mod:`~gradmagic.analysis.groups`: that groups a trace's nodes by the cell's lines
and function calls; a PyTorch run's ops are grouped by the ``nn.Module`` they ran in.
Reads only the run's plain columns (no tensor): torch is not imported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .options import DEFAULTS

__all__ = ["Box", "Layout", "layout", "listed", "shown_name", "NAME_CHARS"]

_INDEX = re.compile(r"\d+\Z")


NAME_CHARS = 120  # a name longer than this is shown cut (module paths can be any text)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shown_name(name: str) -> str:
    """A name as text to show: control characters (a terminal's colour codes, say) spelled
    out as ``\\x1b``, and cut to :data:`NAME_CHARS` characters."""
    name = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", name)
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def listed(names: list, n: int = 4) -> str:
    """The first ``n`` names, and how many more."""
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


@dataclass
class Box:
    """One drawn node: an op (``kind == "op"``), a module, a folded run of repeated modules,
    a line of the cell, or a leaf (``"leaf"``: a parameter or an input)."""

    key: str
    kind: str  # "op", "module", "fold", "line", "leaf"
    title: str
    ops: list = field(default_factory=list)  # op indices inside
    value: int | None = None  # the value whose numbers the box shows (its last output)
    count: int = 1  # modules folded


@dataclass
class Layout:
    boxes: dict  # key → Box, in drawing order
    edges: list  # (key, key)
    note: str  # how the drawing was summarised ('' when everything is drawn)
    open: set


def _parts(path: str) -> list:
    return path.split(".") if path else []


def layout(run, max_nodes: int = DEFAULTS.max_nodes, open=()) -> Layout:
    """What to draw (see the module doc)."""
    graph = run.graph
    paths = {k: run.op_modules[k] for k in graph}
    opened = {""} | {p for name in open for p in _prefixes(name)}
    folds = _folds(run, graph, paths, opened)
    groups = _group_of(paths, opened, folds)
    if _count(run, groups) <= max_nodes:
        groups = _open_within(run, paths, opened, folds, groups, max_nodes, open)
    by_line = _count(run, groups) > max_nodes
    if by_line:  # the cell's own ops too many: a box per line
        groups = {k: (g if g else f"line:{run.ops[k].line}") for k, g in groups.items()}
    boxes: dict = {}
    for k in graph:
        g = groups[k]
        key = g or f"op:{k}"
        box = boxes.get(key)
        if box is None:
            box = boxes[key] = _box(run, key, g, k, folds)
        box.ops.append(k)
        box.value = run.ops[k].outputs[0]
    edges = _edges(run, groups, boxes)
    drawn_ops = sum(1 for b in boxes.values() if b.kind == "op")
    note = ""
    if drawn_ops < len(graph):
        note = (
            f"{len(graph)} ops in {len(boxes)} boxes: grouped by module"
            + (" and by line of the cell" if by_line else "")
            + "; torchview.html_view(run, open=['a.module.path']) opens one"
        )
    return Layout(boxes, sorted(edges), note, opened)


def _open_within(run, paths, opened: set, folds, groups, max_nodes: int, open) -> dict:
    """Modules opened outside-in, widest first, while the drawing stays within the budget
    (adds them to ``opened``); the groups of the ops then."""
    while True:
        closed = sorted(
            {
                g
                for g in groups.values()
                if g
                and g not in opened
                and not g.startswith("fold:")
                and not any(g.startswith(f"{name}.") for name in open)
            },
            key=lambda g: (len(_parts(g)), g),
        )  # (what was opened: one level)
        for g in closed:
            trial = _group_of(paths, opened | {g}, folds)
            if _count(run, trial) <= max_nodes:
                opened.add(g)
                groups = trial
                break
        else:
            return groups


def _edges(run, groups, boxes: dict) -> set:
    """The edges between boxes (adding a leaf box for each input read outside a module)."""
    graph = run.graph
    edges = set()
    made_by = {}
    for k in graph:
        for j in run.ops[k].outputs:
            made_by[j] = groups[k] or f"op:{k}"
    for k in graph:
        here = groups[k] or f"op:{k}"
        for i in run.ops[k].inputs:
            there = made_by.get(i)
            if there is None:
                if groups[k]:
                    continue  # a parameter inside a module's box: counted in the box
                there = f"leaf:{i}"
                if there not in boxes:
                    boxes[there] = Box(there, "leaf", run.name_of(i), value=i)
            if there != here:
                edges.add((there, here))
    return edges


def _prefixes(path: str):
    parts = _parts(path)
    for n in range(1, len(parts) + 1):
        yield ".".join(parts[:n])


def _folds(run, graph, paths, opened=frozenset()) -> dict:
    """module path → the fold key of the run of identical siblings it belongs to (an opened
    module ends a run: it is drawn opened, between the runs before and after it)."""
    ops_of: dict = {}
    for k in graph:
        parts = _parts(paths[k])
        for n in range(1, len(parts) + 1):
            ops_of.setdefault(".".join(parts[:n]), []).append(run.ops[k].name)
    children: dict = {}
    for path in ops_of:
        parent, _, last = path.rpartition(".")
        if _INDEX.match(last):
            children.setdefault(parent, []).append((int(last), path))
    folds = {}
    for parent, kids in children.items():
        kids.sort()
        run_start = 0
        for n in range(1, len(kids) + 1):
            same = (
                n < len(kids)
                and kids[n][1] not in opened
                and kids[run_start][1] not in opened
                and _signature(run, ops_of, kids[n][1])
                == _signature(run, ops_of, kids[run_start][1])
                and kids[n][0] == kids[n - 1][0] + 1
            )
            if not same:
                members = kids[run_start:n]
                if len(members) > 1:
                    key = f"fold:{parent}.{members[0][0]}-{members[-1][0]}"
                    for _, path in members:
                        folds[path] = key
                run_start = n
    return folds


def _signature(run, ops_of, path):
    return (run.module_types.get(path), tuple(ops_of[path]))


def _group_of(paths, opened, folds) -> dict:
    """op → the key of the box it is drawn in ('' for its own box)."""
    out = {}
    for k, path in paths.items():
        prefix, group = "", ""
        for part in _parts(path):
            child = f"{prefix}.{part}" if prefix else part
            if child in opened:
                prefix = child
                continue
            group = (
                folds.get(child, child)
                if not any(o.startswith(child + ".") or o == child for o in opened)
                else child
            )
            break
        out[k] = group
    return out


def _count(run, groups) -> int:
    """Boxes a grouping draws: groups, ops on their own, and the leaves those ops read."""
    boxes = set()
    for k, g in groups.items():
        if g:
            boxes.add(g)
        else:
            boxes.add(k)
            boxes.update(
                ("leaf", i)
                for i in run.ops[k].inputs
                if run.producer[i] < 0 or run.producer[i] not in groups
            )
    return len(boxes)


def _box(run, key, group, k, folds) -> Box:
    if not group:
        return Box(key, "op", run.ops[k].name)
    if group.startswith("fold:"):
        members = [p for p, f in folds.items() if f == group]
        kind = run.module_types.get(members[0], "module") if members else "module"
        return Box(key, "fold", f"{group[5:]}  {kind} x {len(members)}", count=len(members))
    if group.startswith("line:"):
        return Box(key, "line", f"line {group[5:]}")
    return Box(key, "module", f"{group}  ({run.module_types.get(group, 'module')})")
