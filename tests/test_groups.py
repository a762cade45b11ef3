"""A big graph grouped by the code that made it: the sites the magic records and the groups."""

from __future__ import annotations

import numpy as np
import pytest

from gradmagic.analysis.groups import BUDGET, PART, Grouping
from gradmagic.core.sites import cursor

MLP = """%%autograd --max-nodes 20
import math, random
random.seed(1)
class Neuron:
    def __init__(self, nin):
        self.w = [random.uniform(-1, 1) for _ in range(nin)]
        self.b = 0.0
    def __call__(self, x):
        act = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)
        return math.tanh(act)
class Layer:
    def __init__(self, nin, nout):
        self.neurons = [Neuron(nin) for _ in range(nout)]
    def __call__(self, x):
        return [n(x) for n in self.neurons]
class MLP:
    def __init__(self, nin, nouts):
        sz = [nin] + nouts
        self.layers = [Layer(sz[i], sz[i + 1]) for i in range(len(nouts))]
    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x[0]
model = MLP(3, [4, 4, 1])
xs = [[2.0, 3.0, -1.0], [3.0, -1.0, 0.5]]
ys = [1.0, -1.0]
loss = sum((model(x) - y) ** 2 for x, y in zip(xs, ys))
loss"""


def _run(ip, cell):
    result = ip.run_cell(cell)
    assert result.error_in_exec is None, result.error_in_exec
    import gradmagic

    return gradmagic.last


def _all_groups(g: Grouping, gid: str):
    yield gid
    for kid in g.children(gid):
        if isinstance(kid, str):
            yield from _all_groups(g, kid)


def _assert_tree_is_consistent(g: Grouping) -> None:
    """Each group's members are exactly its children's members; the top holds every node."""
    for gid in _all_groups(g, "c0"):
        kids = g.children(gid)
        assert len(kids) <= PART
        held = [np.array([k]) if isinstance(k, int) else g.members(k) for k in kids]
        union = np.sort(np.concatenate(held)) if held else np.zeros(0, dtype=np.int64)
        np.testing.assert_array_equal(union, g.members(gid))
        if gid != "c0":
            assert g.group(gid).size == len(g.members(gid))
    top = [np.array([k]) if isinstance(k, int) else g.members(k) for k in g.top()]
    inside = np.sort(np.concatenate(top))
    assert len(inside) + len(g.params) == g.trace.n
    assert not set(inside.tolist()) & set(g.params)


def _titles(g: Grouping) -> set:
    return {g.group(gid).title for gid in _all_groups(g, "c0") if gid != "c0"}


def test_an_mlp_groups_by_its_calls_and_every_count_adds_up(ip):
    trace = _run(ip, MLP)
    g = Grouping(trace)
    _assert_tree_is_consistent(g)
    titles = _titles(g)
    assert {"MLP.__call__", "Layer.__call__", "Neuron.__call__"} <= titles
    # one call per example of the model, each holding three layer calls
    model_calls = [c for c in range(len(g.calls)) if g._name(c) == "MLP.__call__"]
    layer_calls = [c for c in range(len(g.calls)) if g._name(c) == "Layer.__call__"]
    assert len(model_calls) == 2 and len(layer_calls) == 6
    assert all(g.parent[c] in model_calls for c in layer_calls)
    for c in model_calls:  # a model call holds its layers' nodes
        inner = [lc for lc in layer_calls if g.parent[lc] == c]
        mine = set(g.members(f"c{c}").tolist())
        assert all(set(g.members(f"c{lc}").tolist()) <= mine for lc in inner)
    # a neuron's call made 3 products, 3 sums and a tanh (its constants: the sum's start)
    neuron = next(c for c in range(len(g.calls)) if g._name(c) == "Neuron.__call__")
    ops = {trace.nodes[i].op for i in g.members(f"c{neuron}")}
    assert {"*", "+", "tanh"} <= ops


def test_every_input_of_the_run_is_drawn_whatever_is_opened(ip):
    trace = _run(ip, MLP)
    g = Grouping(trace)
    named = {trace.nodes[i].label for i in g.params}
    weights = {f"model.layers[0].neurons[{j}].w[{k}]" for j in range(4) for k in range(3)}
    assert weights <= named
    assert "model.layers[2].neurons[0].b" in named
    for opened in (set(), None, set(_all_groups(g, "c0"))):
        view = g.view(opened)
        keys = set(view.keys())
        assert {f"n{i}" for i in g.params} <= keys
        assert all(a in keys and b in keys for a, b in view.edges)
        drawn = [g.members(x.id) for x in view.groups] + [np.array(view.nodes + view.params)]
        assert sum(map(len, drawn)) == trace.n  # each node drawn once, in one place


def test_opening_a_group_shows_its_members(ip):
    trace = _run(ip, MLP)
    g = Grouping(trace)
    closed = g.view(set())
    first = closed.groups[0]
    opened = g.view({first.id})
    assert first.id not in {x.id for x in opened.groups}
    shown = {x.id for x in opened.groups} | {f"n{i}" for i in opened.nodes}
    assert {k if isinstance(k, str) else f"n{k}" for k in g.children(first.id)} <= shown
    assert all(opened.frame_of[k] == first.id for k in opened.frame_of if opened.frame_of[k])
    # the default view opens groups while it stays within its budget
    default = g.view()
    assert len(default.groups) + len(default.nodes) <= BUDGET
    assert len(default.frames) >= 1


def test_edges_count_the_node_edges_they_stand_for(ip):
    trace = _run(ip, MLP)
    g = Grouping(trace)
    view = g.view(set())
    crossing = 0
    rep = {}
    for x in view.groups:
        for i in g.members(x.id).tolist():
            rep[i] = x.id
    for i in view.nodes + view.params:
        rep[i] = f"n{i}"
    for i in range(trace.n):
        for p in trace.nodes[i].parents:
            crossing += rep[p] != rep[i]
    assert sum(view.edges.values()) == crossing


def test_recursion_nests_each_call_in_its_caller(ip):
    trace = _run(
        ip,
        """%%autograd
def f(x, k):
    if k == 0:
        return x
    y = x * x * 0.5 + x
    return f(y, k - 1)
w = 0.3
out = f(w, 5)""",
    )
    g = Grouping(trace)
    calls = [c for c in range(len(g.calls)) if g._name(c) == "f"]
    assert len(calls) == 6
    for a, b in zip(calls, calls[1:]):
        assert g.parent[b] == a
    _assert_tree_is_consistent(g)
    # each call's own nodes are at its line 5: three ops and the constant 0.5
    line5 = [c for c in calls if len(g.direct(c, 0))]
    assert all(trace.nodes[i].op in ("*", "+", "") for c in calls for i in g.members(f"c{c}"))
    assert line5 or all(g._lines(c) for c in calls[:-1])


def test_lambdas_comprehensions_and_generators_count_at_the_line_that_ran_them(ip):
    trace = _run(
        ip,
        """%%autograd
sq = lambda t: t * t
def gen(v):
    for k in range(3):
        yield v * k
w = 1.5
a = [sq(w) for _ in range(4)]
b = sum(gen(w))
c = sum(a) + b""",
    )
    g = Grouping(trace)
    _assert_tree_is_consistent(g)
    lines = {}
    for i in range(trace.n):
        if i in g.params:
            continue
        lines.setdefault(g._source_line(int(g.node_call[i]), int(g.node_line[i])), []).append(i)
    ops = {line: sorted({trace.nodes[i].op for i in idx} - {""}) for line, idx in lines.items()}
    assert ops[7] == ["*"]  # the lambda's products, at the comprehension's line
    assert "*" in ops[8] and "+" in ops[8]  # the generator's products and the sum
    assert ops[9] == ["+"]
    assert [g._name(c) for c in range(len(g.calls))] == ["<cell>"]  # no call recorded


def test_a_function_a_plain_cell_defined_is_grouped_as_its_own_calls(ip):
    ip.run_cell("def step(s, w):\n    t = s * w\n    return t + w\n")
    trace = _run(ip, "%%autograd\nw = 0.5\ns = 1.0\nfor _ in range(3):\n    s = step(s, w)\ns")
    g = Grouping(trace)
    steps = [c for c in range(len(g.calls)) if g._name(c) == "step"]
    assert len(steps) == 3
    assert {g._source_line(c, k) for c in steps for k in range(2)} == {2, 3}
    _assert_tree_is_consistent(g)
    assert ip.user_ns["step"].__code__.co_name == "step"


def test_a_long_loop_folds_into_parts_no_view_shows_more_than_it_can_draw(ip):
    trace = _run(
        ip,
        """%%autograd
w = 0.999
x = 0.001
s = 1.0
for i in range(20000):
    s = s * w + x
s""",
    )
    assert trace.n > 40_000
    g = Grouping(trace)
    view = g.view()
    assert len(view.groups) + len(view.nodes) <= BUDGET
    assert {trace.nodes[i].label for i in view.params} >= {"w", "x"}
    # the loop's line holds everything but the inputs and the target, in parts of parts
    (line,) = [x for x in g.view(set()).groups if x.title == "line 6"]
    assert line.size == trace.n - len(g.params) - 1
    assert trace.n - 1 in view.nodes  # the target, s, drawn on its own
    part = g.children(line.id)[0]
    assert g.group(part).kind == "part" and len(g.children(part)) <= PART


def test_an_exception_inside_a_function_leaves_the_sites_in_step(ip):
    trace = _run(
        ip,
        """%%autograd
def bad(v):
    u = v * 2.0
    raise ValueError(u)
w = 0.5
try:
    bad(w)
except ValueError:
    pass
out = w * 3.0 + w""",
    )
    assert cursor.stack == []
    g = Grouping(trace)
    made = [i for i in range(trace.n) if i not in g.params and trace.nodes[i].op]
    assert {g._source_line(int(g.node_call[i]), int(g.node_line[i])) for i in made} == {10}


def test_sites_leave_what_plain_python_sees_unchanged(ip):
    result = ip.run_cell(
        '''%%autograd
def f(x):
    """Doc."""
    y = x * 2.0
    return sorted(locals()), f.__doc__, y
w = 1.0
names, doc, out = f(w)
out'''
    )
    assert result.error_in_exec is None
    assert ip.user_ns["names"] == ["x", "y"]
    assert ip.user_ns["doc"] == "Doc."
    assert ip.user_ns["f"].__code__.co_varnames == ("x", "y")


@pytest.mark.parametrize("budget", [5, 12])
def test_the_default_view_keeps_to_any_budget(ip, budget):
    g = Grouping(_run(ip, MLP))
    view = g.view(g.opened_by_default(budget))
    assert len(view.groups) + len(view.nodes) <= max(budget, len(g.top()))


# ------------------------------------------------------------------ the picture
def _svg_text(image: str) -> str:
    import html
    import re

    return html.unescape(" ".join(re.findall(r"<text[^>]*>([^<]*)</text>", image)))


def test_the_grouped_picture_draws_every_input_with_its_gradient(ip):
    from gradmagic.views import grouped, render

    trace = _run(ip, MLP.replace("--max-nodes 20", ""))
    summary = grouped.summarise(trace)
    assert summary is not None and summary.dot is not None
    assert "grouped by the code" in summary.note
    image = render.svg(summary.dot)
    text = _svg_text(image)
    g = summary.groups
    tables = grouped.containers(trace, g.params)
    assert set(tables) == {
        "model.layers[0].neurons",
        "model.layers[1].neurons",
        "model.layers[2].neurons",
        "xs",
        "ys",
    }
    for name in tables:
        assert name in text
    assert text.count("∇") == len(g.params)  # one gradient shown an input
    for i in g.params:
        node = trace.nodes[i]
        assert render.figure(node.data) in text and render.figure(node.grad) in text
    assert "MLP.__call__" in text
    # 10 pt text: nothing drawn smaller
    sizes = {float(s) for s in __import__("re").findall(r'font-size="([\d.]+)"', image)}
    assert sizes and min(sizes) >= 10


def test_the_grouped_view_draws_the_target_by_its_name_and_steps_its_tables(ip):
    import html
    import re

    from gradmagic.views import grouped, render, tabs

    trace = _run(ip, MLP.replace("--max-nodes 20", ""))
    target = trace.target.index
    summary = grouped.summarise(trace)
    # the target is a record of its own, loss | data | grad, not a line inside a group's box
    (record,) = [ln for ln in summary.dot.splitlines() if ln.strip().startswith(f"v{target} [")]
    assert "|loss|" in record and render.FILL["target"] in record
    assert all(target not in summary.groups.members(g.id) for g in summary.groups.view().groups)
    data, _ = tabs._payload(trace, None, summary=summary)
    assert data["nodes"][str(target)]["name"] == "loss"  # in the node picker, by its name
    # what a click does is said where a click does it: the live view, not the static picture
    assert "Click a box to open it" in data["summary"]["note"]
    assert "Click a box" not in render.graph_html(trace, summary=summary)
    # the input of each ∇ cell of the tables, in the order dot draws them
    texts = re.findall(r">(∇[^<]*)<", render.svg(summary.dot))
    cells = data["cells"]
    assert sorted(cells) == sorted(summary.groups.params)
    assert [html.unescape(t) for t in texts] == [
        "∇" + render.figure(trace.nodes[i].grad) for i in cells
    ]
    # the backward steps name unnamed nodes as people write them, never "(+)" or "#12" alone
    steps = tabs._steps(trace, set(summary.shown), render.Folded(trace))["steps"]
    assert steps[0]["name"] == "loss"
    for step in steps[:50]:
        assert step["name"] not in ("(+)", "(*)", "(tanh)")
        assert not any(re.fullmatch(r"#\d+", item[0]) for item in step["items"])


def test_clicking_a_group_in_the_live_view_opens_it_and_keeps_it_opened(ip):
    import json

    pytest.importorskip("anywidget")
    from gradmagic.views import grouped, widget

    trace = _run(ip, MLP.replace("--max-nodes 20", ""))
    summary = grouped.summarise(trace)
    view = widget.TraceWidget(trace, summary=summary, dot=summary.dot)
    closed = [x.id for x in summary.groups.view(summary.groups.opened_by_default()).groups]
    gid = next(x for x in closed if summary.groups.children(x))
    view._on_msg(view, {"type": "open", "tab": f"group:{gid}"}, [])
    graph = json.loads(view.opened)["graph"]
    assert gid in graph["groups"]
    assert f'"cluster_{gid}"' in graph["dot"]  # drawn as an opened frame
    for kid in summary.groups.children(gid):
        assert (f'"g:{kid}"' if isinstance(kid, str) else f"v{kid} ") in graph["dot"]
    # a second group opens beside the first: the state keeps both
    inner = next((k for k in summary.groups.children(gid) if isinstance(k, str)), None)
    if inner is not None:
        view._on_msg(view, {"type": "open", "tab": f"group:{inner}"}, [])
        assert {gid, inner} <= set(json.loads(view.opened)["graph"]["groups"])
    # a group of no run is refused, and nothing changes
    before = view.opened
    view._on_msg(view, {"type": "open", "tab": "group:c99999"}, [])
    assert view.opened == before


def test_a_frame_clicked_closes_its_group_and_what_was_opened_inside_it(ip):
    import json

    pytest.importorskip("anywidget")
    from gradmagic.views import grouped, widget

    trace = _run(ip, MLP.replace("--max-nodes 20", ""))
    summary = grouped.summarise(trace)
    view = widget.TraceWidget(trace, summary=summary, dot=summary.dot)
    first = summary.groups.opened_by_default()
    closed = [x.id for x in summary.groups.view(first).groups]
    gid = next(x for x in closed if any(isinstance(k, str) for k in summary.groups.children(x)))
    inner = next(k for k in summary.groups.children(gid) if isinstance(k, str))
    view._on_msg(view, {"type": "open", "tab": f"group:{gid}"}, [])
    view._on_msg(view, {"type": "open", "tab": f"group:{inner}"}, [])
    assert {gid, inner} <= set(json.loads(view.opened)["graph"]["groups"])
    # the frame's title says a click closes it
    assert "click to close" in json.loads(view.opened)["graph"]["dot"]
    view._on_msg(view, {"type": "close", "group": gid}, [])
    graph = json.loads(view.opened)["graph"]
    assert set(graph["groups"]) == set(first)  # the group and the one inside it closed
    assert f'"cluster_{gid}"' not in graph["dot"] and f'"cluster_{inner}"' not in graph["dot"]
    assert f'"g:{gid}"' in graph["dot"]  # a box again
    # a group the first picture opened closes too; an unknown one changes nothing
    if first:
        some = sorted(first)[0]
        view._on_msg(view, {"type": "close", "group": some}, [])
        assert some not in json.loads(view.opened)["graph"]["groups"]
    before = view.opened
    view._on_msg(view, {"type": "close", "group": "c99999"}, [])
    assert view.opened == before


def test_a_long_loop_is_drawn_grouped_within_the_drawing_budget(ip):
    from gradmagic.views import grouped, render

    trace = _run(
        ip,
        "%%autograd\nw = 0.999\nx = 0.001\ns = 1.0\nfor i in range(50000):\n    s = s * w + x\ns",
    )
    assert trace.n > 100_000
    summary = grouped.summarise(trace)
    text = _svg_text(render.svg(summary.dot))
    assert "line 6 × 50,000" in text  # the folded loop says how many times it ran
    assert {"w", "x", "s"} <= set(text.split())


def test_a_looped_line_counts_its_runs_only_when_each_item_runs_it(ip):
    """The count is the loop's length, added up over the loops that ran it (a loop in a
    loop, a function called twice), and absent where an iteration may end early or the
    length is not known without running the user's code."""
    trace = _run(
        ip,
        """%%autograd
def inner(v, n):
    for _ in range(n):
        v = v * 1.01
    return v
w = 0.5
s = 0.0
for i in [1, 2, 3]:
    s = s + inner(w, 4)
    for j in range(i):
        s = s - w
for k in range(7):
    if k > 2:
        break
    s = s * w
for x in iter([1.0, 2.0]):
    s = s + x * w
s""",
    )
    g = Grouping(trace)
    runs: dict = {}  # (function, source line) → the runs its line groups count
    for c in range(len(g.calls)):
        for k in range(g._lines_of(g.calls[c][1])):
            key = (g._name(c), g._source_line(c, k))
            runs[key] = runs.get(key, 0) + g.group(f"c{c}.{k}").runs
    assert runs[("inner", 4)] == 3 * 4  # three calls, four runs each
    assert runs[("<cell>", 9)] == 3
    assert runs[("<cell>", 11)] == 1 + 2 + 3  # a loop in a loop: every run counted
    assert runs[("<cell>", 15)] == 0  # a break: not counted
    assert runs[("<cell>", 17)] == 0  # an iterator: its length unknown
    assert cursor.stack == []


def test_past_the_call_limit_calls_of_a_function_share_one_record(ip, monkeypatch):
    from gradmagic.core import sites

    monkeypatch.setattr(sites, "CALL_LIMIT", 5)
    trace = _run(
        ip,
        "%%autograd\ndef f(v):\n    return v * 2.0 + v\nw = 0.5\ns = 0.0\n"
        "for _ in range(20):\n    s = s + f(w)\ns",
    )
    g = Grouping(trace)
    assert len(g.calls) <= 6  # the cell, 4 calls one by one, the rest in one shared record
    _assert_tree_is_consistent(g)
    assert cursor.stack == []


def test_a_thread_running_rewritten_code_never_breaks_it(ip):
    result = ip.run_cell(
        """%%autograd
import threading
def f(v):
    return v * 2.0
w = 0.5
out = []
ts = [threading.Thread(target=lambda: out.append(f(w))) for _ in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
y = f(w) + w
y"""
    )
    assert result.error_in_exec is None
    assert len(ip.user_ns["out"]) == 4


def test_the_static_picture_draws_a_big_table_as_one_box_saying_where_its_numbers_are(ip):
    """The live view's picture draws every input; the static copy's lays out a table of more
    than STATIC_INPUTS inputs as one box, and its Gradients table holds their numbers."""
    from gradmagic.views import grouped, render
    from gradmagic.views.widget import _graph, static_bundle

    trace = _run(ip, MLP.replace("--max-nodes 20", "").replace("[4, 4, 1]", "[4, 8, 1]"))
    graph = _graph(trace)
    summary = graph["summary"]
    tables = grouped.containers(trace, summary.groups.params)
    counts = {n: sum(map(len, rows.values())) for n, rows in tables.items()}
    big = [n for n, count in counts.items() if count > grouped.STATIC_INPUTS]
    assert big and len(big) < len(tables)
    assert graph["picture"] == summary.static != summary.dot
    text = _svg_text(render.svg(summary.static))
    for name in big:
        assert f"{counts[name]:,} inputs: values and gradients in the Gradients table" in text
    drawn = sum(counts[n] for n in tables if n not in big)
    assert text.count("∇") == drawn  # the small tables drawn as before, a gradient an input
    assert _svg_text(render.svg(summary.dot)).count("∇") == sum(counts.values())
    page = static_bundle(trace, summary=summary, dot=graph["picture"], cache=graph["drawing"])
    html = page["text/html"]
    assert render.BOXED in html
    gradients = html[html.index("<b>Gradients</b>") :]
    for name in big:  # every input of a boxed table is a row of the Gradients table
        for cells in tables[name].values():
            for i in cells.values():
                assert f">{trace.nodes[i].label}<" in gradients
