"""A big graph grouped the way its code made it: by function call and source line.

The magic records where each node was made (``trace.site``, see
:mod:`gradmagic.core.sites`): which call of which function, and which line of it.
:class:`Grouping` turns that into a tree of groups:

* a **call** (``Neuron.__call__``): the nodes one call of a function made, in
  the lines of its body;
* a **line** of a call (``line 12``): the nodes that line made itself, and the
  calls it made;
* the calls of one function from one line (``Neuron.__call__ × 9``), when a
  line makes more than :data:`PART` calls;
* a **part** of a long list of members (``line 12, 1-150 of 1,200``), so that no
  opened group shows more than :data:`PART` items.

The run's inputs (its leaves that are not constants: the named parameters) and its
target are never inside a group: :meth:`Grouping.view` always shows them, the target
by its own name. A view is the
cell's lines, with the groups in ``opened`` opened one level each, and the edges
between what is shown (with how many node-level edges each stands for).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Group", "Grouping", "View", "PART", "BUDGET"]

PART = 12
"""Items an opened group shows at most; longer lists are split into parts."""
BUDGET = 30
"""Items (groups and nodes, inputs not counted) a default view opens groups up to."""


@dataclass(frozen=True)
class Group:
    """One box of a grouped view."""

    id: str  # "c3" a call, "c3.2" a line of it, "c3.2.f7" calls of one function, ".../0-150"
    kind: str  # "call", "line", "calls" or "part"
    title: str  # "Neuron.__call__", "line 12", "Neuron.__call__ × 9", "line 12: 1-150"
    line: int | None  # the source line (a call: the line that called it)
    size: int  # nodes inside, at any depth
    runs: int = 0  # a line in a loop: how many times it ran (0: not counted)


@dataclass
class View:
    """What a grouped picture draws: groups, single nodes, the inputs, the edges between them.

    Keys name what is drawn: a group by its id, a node ``i`` as ``"n{i}"``. ``edges`` maps
    ``(from key, to key)`` to the number of node-level edges it stands for; ``inputs`` and
    ``outputs`` list, for each group, the nodes outside it that it reads and the nodes in
    it that something outside reads (or the target).
    """

    groups: list
    nodes: list
    params: list
    edges: dict
    inputs: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)
    frames: dict = field(default_factory=dict)  # opened group id → (Group, enclosing id)
    frame_of: dict = field(default_factory=dict)  # drawn key → the opened group around it

    def keys(self) -> list:
        return [g.id for g in self.groups] + [f"n{i}" for i in self.nodes + self.params]


class Grouping:
    """The groups of ``trace``'s nodes (see the module docstring)."""

    def __init__(self, trace):
        self.trace = trace
        n = self.n = trace.n
        site = np.asarray(trace.site, dtype=np.int64)
        calls = trace.calls or [(0, -1, -1)]
        self.functions = trace.functions
        bases = np.array([c[0] for c in calls], dtype=np.int64)
        sizes = np.array([self._lines_of(c[1]) for c in calls], dtype=np.int64)
        self.calls = calls
        # each node's call and line (offset in its function): -1 outside any
        at = np.searchsorted(bases, site, side="right") - 1
        k = site - bases[np.maximum(at, 0)]
        valid = (site >= 0) & (at >= 0) & (k < sizes[np.maximum(at, 0)])
        self.node_call = np.where(valid, at, 0)
        self.node_line = np.where(valid, k, -1)
        # the run's inputs are shown apart, never inside a group
        leaves = np.flatnonzero(trace.parent_a < 0)
        self.params = leaves[~trace.constant[leaves]].tolist()
        inside = np.ones(n, dtype=bool)
        inside[self.params] = False
        # the target too: a box of its own, by its name, never one line of a group's
        self.target = n - 1 if n and inside[n - 1] else None
        if self.target is not None:
            inside[self.target] = False
        self.inside = inside
        # each call's caller (call, line) and the end of its subtree (calls are in preorder)
        m = len(calls)
        self.parent = np.zeros(m, dtype=np.int64)
        self.parent_line = np.full(m, -1, dtype=np.int64)
        for c in range(1, m):
            s = calls[c][2]
            p = int(np.searchsorted(bases, s, side="right")) - 1 if s >= 0 else -1
            if p >= 0 and p < c and s - bases[p] < sizes[p]:
                self.parent[c], self.parent_line[c] = p, s - bases[p]
        self.end = np.arange(m)
        for c in range(m - 1, 0, -1):
            p = self.parent[c]
            self.end[p] = max(self.end[p], self.end[c])
        # the nodes each call made directly, and at any depth
        direct = np.bincount(self.node_call[inside], minlength=m)
        cum = np.concatenate([[0], np.cumsum(direct)])
        self.call_size = cum[self.end + 1] - cum[np.arange(m)]
        self.kids: dict = {}  # (call, line) → the calls that line made (that made nodes)
        for c in range(1, m):
            if self.call_size[c]:
                self.kids.setdefault((int(self.parent[c]), int(self.parent_line[c])), []).append(c)
        self._direct: dict | None = None
        self._item_cache: dict = {}
        self._item_arrays: dict = {}
        self._groups: dict = {}

    # ---------------------------------------------------------------- the tree
    def _lines_of(self, function: int) -> int:
        entry = self.functions.get(function)
        return len(entry[2]) if entry else 1

    def _name(self, call: int) -> str:
        entry = self.functions.get(self.calls[call][1])
        return entry[0] if entry else "<cell>"

    def _source_line(self, call: int, k: int) -> int | None:
        entry = self.functions.get(self.calls[call][1])
        if entry is None or k < 0 or k >= len(entry[2]):
            return None
        return int(entry[2][k])

    def direct(self, call: int, k: int) -> np.ndarray:
        """The nodes line ``k`` of ``call`` made itself (inputs not counted)."""
        if self._direct is None:
            keep = np.flatnonzero(self.inside)
            key = self.node_call[keep] * (1 << 20) + (self.node_line[keep] + 1)
            order = np.argsort(key, kind="stable")
            key, keep = key[order], keep[order]
            starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key
            self._direct = {}
            for a, b in zip(starts, list(starts[1:]) + [key.size]):
                kk = int(key[a])
                self._direct[(kk >> 20, (kk & ((1 << 20) - 1)) - 1)] = keep[a:b]
        return self._direct.get((call, k), np.zeros(0, dtype=np.int64))

    def _line_size(self, call: int, k: int) -> int:
        return int(self.direct(call, k).size) + sum(
            int(self.call_size[c]) for c in self.kids.get((call, k), ())
        )

    def _lines(self, call: int) -> list:
        """The lines of ``call`` that made nodes, in source order."""
        ks = {k for (c, k) in self._direct_keys() if c == call}
        ks.update(k for (c, k) in self.kids if c == call)
        return sorted(ks, key=lambda k: (self._source_line(call, k) or 0, k))

    def _direct_keys(self):
        self.direct(0, 0)
        return self._direct.keys()

    def group(self, gid: str) -> Group:
        """The group ``gid``."""
        group = self._groups.get(gid)
        if group is None:
            group = self._groups[gid] = self._group(gid)
        return group

    def _group(self, gid: str) -> Group:
        base, a, b = self._part(gid)
        if a is not None:
            items = self._items(base)
            inner = self.group(base)
            size = sum(1 if isinstance(i, int) else self.group(i).size for i in items[a:b])
            title = f"{inner.title}: {a + 1:,}-{b:,} of {len(items):,}"
            if inner.kind == "line" and not any(isinstance(i, str) for i in items[a:b]):
                title = f"{inner.title}: nodes {a + 1:,}-{b:,} of {len(items):,}"
            return Group(gid, "part", title, inner.line, size)
        kind, call, k, function = self._parse(base)
        if kind == "call":
            caller_line = self._source_line(int(self.parent[call]), int(self.parent_line[call]))
            return Group(base, "call", self._name(call), caller_line, int(self.call_size[call]))
        if kind == "line":
            line = self._source_line(call, k)
            title = f"line {line}" if line is not None else "made elsewhere"
            runs = getattr(self.trace, "runs", {}).get(self.calls[call][0] + k, 0)
            return Group(base, "line", title, line, self._line_size(call, k), runs)
        calls = self._bundle(call, k, function)
        name = self.functions.get(function, ("?",))[0]
        size = sum(int(self.call_size[c]) for c in calls)
        return Group(base, "calls", f"{name} × {len(calls):,}", self._source_line(call, k), size)

    @staticmethod
    def _parse(base: str):
        if "." not in base:
            return "call", int(base[1:]), -1, -1
        head, *rest = base[1:].split(".")
        if len(rest) == 1:
            return "line", int(head), int(rest[0]), -1
        return "calls", int(head), int(rest[0]), int(rest[1][1:])

    def _bundle(self, call: int, k: int, function: int) -> list:
        return [c for c in self.kids.get((call, k), ()) if self.calls[c][1] == function]

    def _items(self, base: str) -> list:
        """The members of group ``base`` one level down: group ids and node indices."""
        items = self._item_cache.get(base)
        if items is None:
            items = self._item_cache[base] = self._items_of(base)
        return items

    def _items_of(self, base: str) -> list:
        kind, call, k, function = self._parse(base)
        if kind == "call":
            lines = self._lines(call)
            if len(lines) == 1 and call:  # a call of one line: the line's items, as the call's
                return self._items(f"c{call}.{lines[0]}")
            return [f"c{call}.{line}" for line in lines]
        if kind == "calls":
            return [f"c{c}" for c in self._bundle(call, k, function)]
        kids = self.kids.get((call, k), [])
        items: list = []
        if len(kids) > PART:  # many calls: one group per function
            for f in dict.fromkeys(self.calls[c][1] for c in kids):
                bundle = self._bundle(call, k, f)
                items.append(f"c{bundle[0]}" if len(bundle) == 1 else f"c{call}.{k}.f{f}")
        else:
            items.extend(f"c{c}" for c in kids)
        items.extend(self.direct(call, k).tolist())
        return items

    def children(self, gid: str) -> list:
        """What opening ``gid`` shows: at most :data:`PART` items (parts of a longer list)."""
        base, start, stop = self._part(gid)
        items = self._items(base)
        start, stop = start or 0, len(items) if stop is None else stop
        count = stop - start
        if count <= PART:
            return [self._through(i) for i in items[start:stop]]
        # the groups first (a line's calls), when they leave room; then the nodes, in parts
        groups = 0
        while start + groups < stop and isinstance(items[start + groups], str):
            groups += 1
        if groups >= PART or groups == count:
            groups = 0
        shown = [self._through(i) for i in items[start : start + groups]]
        start += groups
        count, parts = stop - start, PART - groups
        step = max(PART, -(-count // parts))  # parts of at least PART items, at most `parts`
        step = -(-count // -(-count // step))  # (of even sizes)
        return shown + [f"{base}/{a}-{min(a + step, stop)}" for a in range(start, stop, step)]

    def _through(self, item):
        """``item``, or what it holds when that is one thing (a call of one line: the line's
        items, a line that only made one call: that call)."""
        while isinstance(item, str) and "/" not in item:
            inner = self._items(item)
            if len(inner) != 1:
                break
            item = inner[0]
        return item

    @staticmethod
    def _part(gid: str):
        """``"c3.2/150-300"`` → ``("c3.2", 150, 300)``; no part: ``(gid, None, None)``."""
        base, _, part = gid.partition("/")
        if not part:
            return base, None, None
        a, _, b = part.partition("-")
        return base, int(a), int(b)

    def members(self, gid: str) -> np.ndarray:
        """Every node inside ``gid``, at any depth (inputs not counted), ascending."""
        base, a, b = self._part(gid)
        if a is not None:
            items = self._items(base)
            kept = self._item_arrays.get(base)
            if kept is None:  # the node items as one array (-1 where a group is)
                kept = self._item_arrays[base] = np.array(
                    [i if isinstance(i, int) else -1 for i in items], dtype=np.int64
                )
            nodes = kept[a:b]
            chunks = [nodes[nodes >= 0]]
            chunks += [self.members(items[j]) for j in np.flatnonzero(nodes < 0) + a]
            return np.sort(np.concatenate(chunks))
        kind, call, k, function = self._parse(base)
        nc, inside = self.node_call, self.inside
        if kind == "call":
            mask = (nc >= call) & (nc <= self.end[call]) & inside
            return np.flatnonzero(mask)
        calls = self.kids.get((call, k), []) if kind == "line" else self._bundle(call, k, function)
        mask = np.zeros(self.n, dtype=bool)
        for c in calls:
            mask |= (nc >= c) & (nc <= self.end[c])
        if kind == "line":
            mask[self.direct(call, k)] = True
        return np.flatnonzero(mask & inside)

    def top(self) -> list:
        """The items of the cell's own lines, and the target: what a view shows with nothing
        opened."""
        return self.children("c0") + ([] if self.target is None else [self.target])

    # ---------------------------------------------------------------- a view
    def opened_by_default(self, budget: int = BUDGET) -> set:
        """The groups a first view opens: level by level, the biggest first, while the view
        shows at most ``budget`` items; a group that would show only parts stays closed."""
        opened: set = set()
        shown = self.top()
        level = [g for g in shown if isinstance(g, str)]
        count = len(shown)
        while level:
            following: list[str] = []
            for gid in sorted(level, key=lambda g: -self.group(g).size):
                kids = self.children(gid)
                if all(isinstance(k, str) and "/" in k for k in kids):
                    continue  # parts of a long list tell less than the list's one box
                if count - 1 + len(kids) <= budget:
                    opened.add(gid)
                    count += len(kids) - 1
                    following.extend(g for g in kids if isinstance(g, str))
            level = following
        return opened

    def view(self, opened=None) -> View:
        """The picture with the groups ``opened`` opened (None: :meth:`opened_by_default`)."""
        opened = set(self.opened_by_default() if opened is None else opened)
        view = View([], [], list(self.params), {})
        stack = [(item, None) for item in reversed(self.top())]
        while stack:  # frames: an opened group → (its Group, the opened group around it)
            item, frame = stack.pop()
            if isinstance(item, int):
                view.nodes.append(item)
                view.frame_of[f"n{item}"] = frame
            elif item in opened:
                view.frames[item] = (self.group(item), frame)
                stack.extend((kid, item) for kid in reversed(self.children(item)))
            else:
                view.groups.append(self.group(item))
                view.frame_of[item] = frame
        self._connect(view)
        return view

    def _connect(self, view: View) -> None:
        """The view's edges, and each drawn group's inputs and outputs."""
        groups, keys, n = view.groups, view.keys(), np.int64(self.n)
        rep = np.full(self.n, -1, dtype=np.int64)  # node → the position of what draws it
        for j, g in enumerate(groups):
            rep[self.members(g.id)] = j
        for j, i in enumerate(view.nodes + view.params, start=len(groups)):
            rep[i] = j
        width = np.int64(len(keys) + 1)
        ins, outs = [], []  # (group, node) pairs, as one int each
        for parent in (self.trace.parent_a, self.trace.parent_b):
            child = np.flatnonzero(parent >= 0)
            src, dst = rep[parent[child]], rep[child]
            cross = (src != dst) & (src >= 0) & (dst >= 0)
            pairs, counts = np.unique(src[cross] * width + dst[cross], return_counts=True)
            for pair, c in zip(pairs.tolist(), counts.tolist()):
                key = (keys[pair // width], keys[pair % width])
                view.edges[key] = view.edges.get(key, 0) + c
            p, d, s = parent[child][cross], dst[cross], src[cross]
            ins.append(d[d < len(groups)] * n + p[d < len(groups)])
            outs.append(s[s < len(groups)] * n + p[s < len(groups)])
        inputs: dict = {}
        outputs: dict = {}
        for found, into in ((ins, inputs), (outs, outputs)):
            for pair in np.unique(np.concatenate(found)).tolist():
                into.setdefault(keys[pair // self.n], set()).add(pair % self.n)
        target = self.n - 1
        if 0 <= rep[target] < len(groups):
            outputs.setdefault(keys[rep[target]], set()).add(target)
        view.inputs = {k: sorted(v) for k, v in inputs.items()}
        view.outputs = {k: sorted(v) for k, v in outputs.items()}
