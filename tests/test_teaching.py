"""The teaching views: forward mode, the topological walk, the chain rule as a sum over paths."""

import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gradmagic
from gradmagic import Tensor, Value
from gradmagic.analysis import explanations
from gradmagic.analysis.graph import children_of
from gradmagic.analysis.trace import Trace
from gradmagic.views import render
from gradmagic.views import teaching as views
from gradmagic.views import teaching_walk

SEED_CELL = "x = 2.0\ny = 3.0\na = 3*x**2\nb = x*y\nc = 5*y**2\nd = a + b\nf = d + c\nf"


def traced(target, **kwargs):
    target.backward()
    return Trace(target, **kwargs)


# =========================================================================== random graphs
UNARY = ("tanh", "sin", "cos", "sigmoid", "neg")
BINARY = ("+", "-", "*", "mul_const", "add_const", "square", "div")


@st.composite
def graphs(draw, max_inputs=4, max_ops=25):
    """A random scalar graph: inputs in [-2, 2], ops that keep numbers moderate."""
    n_in = draw(st.integers(1, max_inputs))
    xs = [Value(draw(st.floats(-2, 2, allow_nan=False)), label=f"x{k}") for k in range(n_in)]
    pool = list(xs)
    for _ in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(UNARY + BINARY))
        a = draw(st.sampled_from(pool))
        b = draw(st.sampled_from(pool))
        if kind in UNARY:
            v = -a if kind == "neg" else getattr(a, kind)()
        elif kind == "+":
            v = a + b
        elif kind == "-":
            v = a - b
        elif kind == "*":
            v = (a * b).tanh()  # keep products of products bounded
        elif kind == "mul_const":
            v = draw(st.floats(-3, 3, allow_nan=False)) * a
        elif kind == "add_const":
            v = a + draw(st.floats(-3, 3, allow_nan=False))
        elif kind == "square":
            v = a**2
        else:
            v = a / (b * b + 1.0)
        pool.append(v)
    # the target uses the last few nodes, so most of the graph reaches it
    target = pool[-1]
    for v in pool[-4:-1]:
        target = target + v
    trace = traced(target)
    labels = {n.label for n in trace.nodes}
    trace.live_target = target  # the tests compare with the seed's walk on the live nodes
    return trace, [x for x in xs if x.label in labels]


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_jvp_tangents_equal_reverse_mode_gradients(case):
    trace, xs = case
    for x in xs:
        t = trace.jvp({x.label: 1})
        g = trace.node(x.label).grad
        assert abs(t.target - g) <= 1e-12 * max(1.0, abs(g)), (x.label, t.target, g)
        assert t[x.label] == 1.0 and t.by_name[x.label] == 1.0
    comparison = explanations.forward_vs_reverse(trace)
    assert comparison.agree and comparison.complete
    assert comparison.inputs == len(explanations.inputs(trace))


@settings(max_examples=40, deadline=None)
@given(graphs(max_inputs=3), st.lists(st.floats(-2, 2, allow_nan=False), min_size=3, max_size=3))
def test_jvp_is_linear_in_the_seed(case, ws):
    """A seed mixing inputs gives the matching mix of gradients (a directional derivative)."""
    trace, xs = case
    seed = {x.label: w for x, w in zip(xs, ws)}
    t = trace.jvp(seed)
    expected = sum(w * trace.node(name).grad for name, w in seed.items())
    assert abs(t.target - expected) <= 1e-12 * max(
        1.0, sum(abs(w * trace.node(n).grad) for n, w in seed.items())
    )


def brute_paths(trace, start):
    """Every path from ``start`` to the target as lists of local derivatives (exhaustive)."""
    kids = children_of(trace)
    target = trace.target.index
    out = []

    def go(i, locals_):
        if i == target:
            out.append(locals_)
        seen = {}
        for c in kids[i]:
            seen[c] = seen.get(c, 0) + 1
        for c in seen:
            node = trace.nodes[c]
            for slot, p in enumerate(node.parents):
                if p == i:
                    go(c, locals_ + [node.local[slot]])

    go(start, [])
    return out


@settings(max_examples=60, deadline=None)
@given(graphs(max_inputs=3, max_ops=10))
def test_path_sums_equal_the_gradients(case):
    trace, xs = case
    for x in xs:
        i = trace.node(x.label).index
        everything = explanations.paths(trace, i, handful=10**6)
        brute = brute_paths(trace, i)
        assert everything.count == len(brute) == len(everything.paths)
        assert everything.complete
        g = trace.nodes[i].grad
        assert abs(everything.listed_sum - g) <= 1e-12 * max(1.0, abs(g))
        assert abs(everything.total - g) <= 1e-12 * max(1.0, abs(g))
        for p in everything.paths:  # each product is its locals' product
            assert p.product == pytest.approx(
                math.prod(d for _, _, d, _ in p.steps), rel=1e-15, abs=0
            )
            assert p.nodes[0] == trace.target.index and p.nodes[-1] == i
        # best-first top-k = the k largest |products| of the full list
        top = explanations.paths(trace, i, handful=0, top=3)
        want = sorted((abs(math.prod(b)) for b in brute), reverse=True)[:3]
        assert [abs(p.product) for p in top.paths] == pytest.approx(want, rel=1e-12)
        assert top.count == len(brute) and not top.complete


def seed_algorithm(root):
    """micrograd's build_topo, recursive, as written in the lecture; ``parents`` as ``_prev``.

    Returns the printed lines (labels of labelled nodes, as the seed prints them) and the
    whole order (every node).
    """
    topo, visited, seen, lines = [], [], set(), []

    def build_topo(v):
        if id(v) not in seen:
            seen.add(id(v))
            visited.append(v)
            if v.label:
                lines.append(("v", [n.label for n in visited if n.label]))
            for child in v.parents:
                build_topo(child)
            topo.append(v)
            if v.label:
                lines.append(("t", [n.label for n in topo if n.label]))

    build_topo(root)
    return lines, topo, visited


class _GraphNode:
    """A node with ``label`` and ``parents`` objects, as the lecture's Value has."""

    def __init__(self, label, parents):
        self.label, self.parents = label, parents


def _linked(trace, i, made):
    if i not in made:
        node = trace.nodes[i]
        made[i] = _GraphNode(node.label, [_linked(trace, p, made) for p in node.parents])
    return made[i]


def test_the_walk_reproduces_the_seeds_printout(ip):
    ip.run_cell("%%autograd -q\n" + SEED_CELL)
    import gradmagic

    trace = gradmagic.last
    lines = views.walk_lines(trace)
    # as the issue quotes the seed: v ['f'], v ['f', 'd'], ..., t ['x', 'a', ...]
    assert lines[0] == ("v", ["f"]) and lines[1] == ("v", ["f", "d"])
    assert [items for kind, items in lines if kind == "t"][1] == ["x", "a"]
    assert lines == [
        ("v", ["f"]),
        ("v", ["f", "d"]),
        ("v", ["f", "d", "a"]),
        ("v", ["f", "d", "a", "x"]),
        ("t", ["x"]),
        ("t", ["x", "a"]),
        ("v", ["f", "d", "a", "x", "b"]),
        ("v", ["f", "d", "a", "x", "b", "y"]),
        ("t", ["x", "a", "y"]),
        ("t", ["x", "a", "y", "b"]),
        ("t", ["x", "a", "y", "b", "d"]),
        ("v", ["f", "d", "a", "x", "b", "y", "c"]),
        ("t", ["x", "a", "y", "b", "d", "c"]),
        ("t", ["x", "a", "y", "b", "d", "c", "f"]),
    ]
    # and the seed's own recursive algorithm on the same graph prints the same (the names
    # keep no graph links after the cell: the graph is the trace's)
    seed_lines, topo, visited = seed_algorithm(_linked(trace, trace.target.index, {}))
    assert lines == seed_lines
    walk = explanations.walk(trace)
    assert len(walk.order) == len(topo) == len(trace.nodes)
    text = views.walk_text(trace)
    assert "v ['f', 'd']" in text and "t ['x', 'a']" in text


def test_the_walk_calls_build_topo_on_the_target_by_its_own_name(ip):
    ip.run_cell("%%autograd -q --no-check\nw = 2.0\nx = 3.0\nloss = w*x + w\nloss")
    import gradmagic

    page = views.walk_html(gradmagic.last, draw=False)
    assert "build_topo(loss)" in page and "build_topo(f)" not in page
    ip.run_cell("%%autograd -q --no-check\nf = 2.0\nx = 3.0\nf*x + x")
    page = views.walk_html(gradmagic.last, draw=False)  # f is an input here, not the target
    assert "build_topo(target)  # the cell&#x27;s last expression" in page
    assert "build_topo(f)" not in page


@settings(max_examples=40, deadline=None)
@given(graphs(max_inputs=3, max_ops=20))
def test_topological_order_is_valid_and_is_the_seeds(case):
    trace, _ = case
    walk = explanations.walk(trace)
    position = {i: k for k, i in enumerate(walk.order)}
    assert sorted(walk.order) == list(range(len(trace.nodes)))
    for node in trace.nodes:  # parents before children
        assert all(position[p] < position[node.index] for p in node.parents)
    assert walk.order[-1] == trace.target.index
    assert walk.backward[0] == trace.target.index
    # the same visits and order as the recursive original on the live nodes
    _, topo, visited = seed_algorithm(trace.live_target)
    live = {id(v): k for k, v in enumerate(Value.topo(trace.live_target))}
    assert [live[id(v)] for v in topo] == walk.order
    assert [live[id(v)] for v in visited] == walk.visited
    # every event after step k: the lists are prefixes of the final ones
    k = len(walk.events) // 2
    v, o, event = walk.at(k)
    assert v == walk.visited[: len(v)] and o == walk.order[: len(o)]


def test_seed_paths_of_df_dx_read_as_the_seed_writes_them(ip):
    ip.run_cell("%%autograd -q\n" + SEED_CELL)
    import gradmagic

    trace = gradmagic.last
    result = explanations.paths(trace, "x")
    assert result.count == 2 and result.complete
    assert result.listed_sum == 15.0 == 6 * 2.0 + 3.0 == trace.grads["x"]
    exprs = views.expressions(trace)
    cells = [views._path_cells(trace, exprs, p) for p in result.paths]
    assert cells[0] == ["f ← d ← a ← x² ← x", "1·1·3·(2x)", "1·1·3·4", "12"]
    assert cells[1] == ["f ← d ← b ← x", "1·1·y", "1·1·3", "3"]
    text = views.paths_text(trace, "x")
    assert "c = 5·y² (45) does not depend on x" in text and "= 1 · 0 = 0" in text
    assert "Sum of the 2 products = 15; backward's gradient ∂f/∂x = 15." in text
    page = views.paths_html(trace, "x", draw=False)
    assert "1·1·3·(2x)" in page and "12 + 3 = 15" in page
    # df/dy = x + 10y = 32
    assert explanations.paths(trace, "y").listed_sum == 32.0


def test_last_jvp_returns_every_nodes_tangent(ip):
    ip.run_cell("%%autograd -q\n" + SEED_CELL)
    import gradmagic

    t = gradmagic.last.jvp({"x": 1})
    assert t.target == 15.0 and t["f"] == 15.0
    assert t.by_name == {"x": 1.0, "y": 0.0, "a": 12.0, "b": 3.0, "c": 0.0, "d": 15.0, "f": 15.0}
    assert len(t) == len(gradmagic.last.nodes) and list(t) == list(range(len(t)))
    assert t[gradmagic.last.node("a").index] == 12.0
    both = gradmagic.last.jvp({"x": 1, "y": 1})
    assert both.target == 15.0 + 32.0
    assert gradmagic.last.jvp("y").target == 32.0
    comparison = explanations.forward_vs_reverse(gradmagic.last)
    assert comparison.inputs == 2 and len(comparison.passes) == 2 and comparison.agree
    assert comparison.edges == explanations.edge_count(gradmagic.last) == 14
    assert comparison.forward_operations == sum(p.operations for p in comparison.passes)
    text = views.forward_text(gradmagic.last, "x")
    assert "2 inputs → 2 passes" in text and "1 backward pass, 14 multiply-adds" in text
    assert "✓ Forward and reverse mode agree on all 2 gradients" in text


def test_bad_seeds_get_clear_messages():
    x, y = Value(2.0, label="x"), Value(3.0, label="y")
    trace = traced(x * y + 1.0)
    with pytest.raises(ValueError, match="no node is labelled 'z'"):
        trace.jvp({"z": 1})
    with pytest.raises(ValueError, match="not an input"):
        trace.jvp({trace.target.index: 1})
    with pytest.raises(ValueError, match="must be a number"):
        trace.jvp({"x": "one"})
    with pytest.raises(ValueError, match="out of range"):
        trace.jvp({99: 1})
    with pytest.raises(ValueError, match="needs a seed"):
        trace.jvp([1, 2])


def test_tensor_runs_say_forward_mode_covers_scalar_graphs():
    W = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), label="W")
    L = (W * W).sum()
    trace = traced(L)
    with pytest.raises(explanations.ForwardModeError, match="covers scalar graphs"):
        trace.jvp({"W": 1})
    assert "covers scalar graphs" in views.forward_html(trace, draw=False)
    assert "scalar graphs" in views.paths_html(trace, draw=False)
    assert "build_topo" in views.walk_html(trace, draw=False)  # the walk needs no locals


def test_nodes_the_target_does_not_reach_are_greyed_and_explained(ip):
    ip.run_cell("%%autograd -q\nx = 2.0\ny = 3.0\ng = x * 10\nf = x * y\nf")
    import gradmagic

    trace = gradmagic.last
    walk = explanations.walk(trace)
    assert walk.unreached == {"g": 20.0}
    assert "Not reached: g" in views.walk_text(trace)
    page = views.walk_html(trace, step=1, draw=False)
    assert "Not reached: g" in page
    assert 'style="filled,dashed"' in teaching_walk._unreached_dot(walk)


def test_exponentially_many_paths_are_counted_not_listed():
    x = Value(1.5, label="x")
    v = x
    for _ in range(60):
        v = v + v  # each doubling doubles the paths
    trace = traced(v)
    result = explanations.paths(trace, "x")
    assert result.count == 2**60  # exact, an int
    assert not result.complete and len(result.paths) == explanations.TOP
    assert result.total == result.grad == 2.0**60
    assert all(p.product == 1.0 and len(p.steps) == 60 for p in result.paths)
    text = views.paths_text(trace, "x")
    assert f"{2**60:,} paths" in text and "Reverse mode never lists paths" in text


def big_trace(n_nodes=2000, n_inputs=100, seed=0):
    rng = np.random.default_rng(seed)
    xs = [Value(float(rng.uniform(-1, 1)), label=f"w{k}") for k in range(n_inputs)]
    pool = list(xs)
    while len(Value.topo(pool[-1])) < n_nodes - 200 or len(pool) < n_nodes // 3:
        a, b = (pool[int(k)] for k in rng.integers(max(0, len(pool) - 300), len(pool), 2))
        pool.append((a * b).tanh() + a)
    target = pool[-1]
    k = len(pool) - 2
    while len(Value.topo(target)) < n_nodes and k >= 0:
        target = target + pool[k]
        k -= 1
    return traced(target)


@pytest.fixture(scope="module")
def big():
    return big_trace()


def test_views_are_capped_on_a_2000_node_graph(big):
    n = len(big.nodes)
    assert n >= 2000
    forward = views.forward_html(big, draw=False)
    walk = views.walk_html(big, step=len(explanations.walk(big).events) // 2, draw=False)
    paths = views.paths_html(big, draw=False)
    static = views.static_section(big)
    for page in (forward, walk, paths, static):
        assert page.count("<tr") <= 4 * (views.ROWS + 2)  # two tables (forward), three (static)
        assert len(page) < 150_000
    assert "more inputs" in forward and "… and" in forward
    assert "more …" in walk  # long lists are elided
    assert re.search(r"There are [\d,]+ paths", paths)
    assert "Reverse mode never lists paths" in paths or "Sum of the" in paths
    text = views.walk_text(big)
    assert len(text.splitlines()) <= views.LINES + 4
    assert "more lines" in text
    comparison = explanations.forward_vs_reverse(big)
    assert not comparison.complete and comparison.agree  # 50 run, the rest counted
    assert comparison.forward_operations > comparison.edges


def test_drawn_views_keep_the_highlighted_node_on_a_big_graph(big):
    walk = explanations.walk(big)
    step = len(walk.events) // 2
    _, _, (_, current) = walk.at(step)
    page = views.walk_html(big, step=step, cache={})
    assert "nodes:" in page  # the summary line
    assert render.FILL["current"] in drawings(page) or "Graphviz" in page


def test_static_display_has_the_teaching_section():
    x, y = Value(2.0, label="x"), Value(3.0, label="y")
    trace = traced(3 * x**2 + x * y + 5 * y**2)
    page = render.static_html(trace)
    assert "Teaching views: forward mode, the topological walk, paths" in page
    assert "Forward mode against reverse mode" in page and "1·1·3·(2x)" in page


def test_untrusted_labels_never_inject_markup():
    x = Value(2.0, label="<script>alert(1)</script>")
    trace = traced(x * x + 1.0)
    for page in (
        views.forward_html(trace, cache={}),
        views.walk_html(trace, step=2, cache={}),
        views.paths_html(trace, cache={}),
        views.static_section(trace),
    ):
        assert "<script>" not in page


def test_expressions_write_nodes_as_people_do():
    x, y = Value(2.0, label="x"), Value(3.0, label="y")
    trace = traced((x + y) * (x - y) / y**3 + (-x).tanh())
    exprs = views.expressions(trace)
    assert exprs[trace.target.index].startswith("(") or "tanh(−x)" in exprs[trace.target.index]
    assert "(x + y)·(x − y)" in exprs
    assert "y³" in exprs
    # local derivative formulas of the product's edges are the other factor
    prod = exprs.index("(x + y)·(x − y)")
    assert views.local_text(trace, exprs, prod, 0) == "x − y"
    cube = exprs.index("y³")
    assert views.local_text(trace, exprs, cube, 0) == "3y²"


def test_repeated_inputs_count_each_edge():
    a = Value(3.0, label="a")
    trace = traced(a + a)
    result = explanations.paths(trace, "a")
    assert result.count == 2 and result.listed_sum == 2.0 == trace.grads["a"]
    t = trace.jvp({"a": 1})
    assert t.target == 2.0 and t.operations == 2


def test_a_nan_local_off_the_inputs_branch_does_not_spoil_the_tangent():
    x, y = Value(2.0, label="x"), Value(0.0, label="y")
    trace = traced(x * 3.0 + y.sqrt())  # d sqrt(y)/dy is inf at 0
    assert trace.jvp({"x": 1}).target == 3.0 == trace.grads["x"]


@pytest.mark.parametrize("combo", list(itertools.product([0, 1], repeat=2)))
def test_seeding_zero_inputs_gives_zero(combo):
    x, y = Value(2.0, label="x"), Value(3.0, label="y")
    trace = traced(x * y)
    t = trace.jvp({"x": combo[0], "y": combo[1]})
    assert t.target == combo[0] * 3.0 + combo[1] * 2.0


def drawings(page: str) -> str:
    """The SVG text of every <img> data URI in ``page``."""
    import base64

    return "".join(
        base64.b64decode(m).decode()
        for m in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', page)
    )


def test_notebook_views_show_html_and_text():
    x, y = Value(2.0, label="x"), Value(3.0, label="y")
    trace = traced(3 * x**2 + x * y + 5 * y**2)
    for view in (
        views.forward(trace, "x", step=2),
        views.walk_view(trace, step=3),
        views.paths_view(trace, "y"),
    ):
        page = view._repr_html_()
        # the drawing is an <img> of an SVG (inline <svg> is stripped in untrusted notebooks)
        assert page.startswith("<div") and "<svg" not in page
        assert "<svg" in drawings(page) or "Graphviz" in page
        assert repr(view) and "<" not in repr(view).split("\n")[0][:1]
    assert "x + 10·y" not in repr(views.paths_view(trace, "y"))  # formulas, not algebra
    assert "1·5·(2y)" in repr(views.paths_view(trace, "y"))


def test_widget_tabs_are_json_and_step_through_the_views():
    import json

    x, y = Value(2.0, label="x"), Value(3.0, label="y")
    a = 3 * x**2
    a.label = "a"
    f = a + x * y + 5 * y**2
    f.label = "f"
    trace = traced(f)
    tabs = [make(trace, None, {"drawn": None}) for make in views.TABS]
    json.dumps(tabs)
    assert [t["id"] for t in tabs] == ["forward", "walk", "paths"]
    forward, walk, paths = (t["payload"] for t in tabs)
    # forward: the pass for x then for y, every reached node once, ending at the gradient
    assert "agree on all 2 gradients" in forward["head"]
    ends = [fr["html"] for fr in forward["frames"] if "the pass ends" in fr["html"]]
    assert len(ends) == 2 and "= 15, backward gave 15" in ends[0] and "= 32" in ends[1]
    # walk: one frame per event, visits and appends in the walk's order
    events = explanations.walk(trace).events
    assert len(walk["frames"]) == len(events)
    assert [fr["n"] for fr in walk["frames"]] == [i for _, i in events]
    assert walk["frames"][0]["html"].startswith("<b>v</b>")
    # paths: the two paths of df/dx, then those of df/dy, each highlighted
    assert len(paths["frames"]) == 4
    assert "1·1·3·(2x)" in paths["frames"][0]["html"]
    assert set(paths["frames"][0]["path"]) >= {trace.node("x").index, trace.target.index}


def test_widget_tabs_are_capped_on_a_2000_node_graph(big):
    import json

    drawn = set(render.summarise(big).shown)
    tabs = [make(big, None, {"drawn": drawn}) for make in views.TABS]
    size = len(json.dumps(tabs))
    assert size < 1_500_000
    for tab in tabs:
        frames = tab["payload"].get("frames", [])
        assert len(frames) <= views.STEP_FRAMES
        for fr in frames:
            assert fr["n"] == -1 or fr["n"] in drawn
            assert all(p in drawn for p in fr["path"])
            assert all(e[0] in drawn for e in fr["ev"])
    assert "Stepping covers" in tabs[1]["payload"]["note"]


def test_negative_factors_are_written_in_parentheses():
    a, b = Value(2.0, label="a"), Value(-3.0, label="b")
    e = a * b
    L = (e + 10.0) * -2.0
    trace = traced(L)
    exprs = views.expressions(trace)
    (path,) = explanations.paths(trace, "a").paths
    assert views._path_cells(trace, exprs, path)[2] == "-2·1·(-3)"


def test_the_static_copy_spells_the_views_out_when_the_graph_is_drawn_in_full():
    x = Value(0.5, label="x")
    total = x * 1.0
    for _ in range(100):
        total = total + x * 0.5
    trace = traced(total)
    assert len(trace.nodes) > render.DEFAULT_MAX_NODES
    page = render.static_html(trace)
    assert "Teaching views" in page and "Forward, Walk and Paths tabs" in page
    assert "Forward mode against reverse mode" not in page  # past --max-nodes: counts only
    trace.options.max_nodes = 1000
    page = render.static_html(trace)
    assert "Forward mode against reverse mode" in page and "The topological walk" in page


def test_tangents_are_a_whole_mapping_of_node_index_to_tangent():
    """``jvp``'s result is a Mapping: its values() and items() work as dict(t)'s do."""
    run = gradmagic.autograd(lambda x: x * x + 1.0)(3.0)
    t = run.jvp({"x": 1.0})
    assert list(t.values()) == [t[i] for i in t] == list(dict(t).values())
    assert dict(t.items()) == dict(t) and t.target == list(t.values())[-1] == 6.0


def test_the_paths_rules_use_the_operands_names_not_the_tables_letters(ip):
    import gradmagic

    # the cell's own b is not the rule's b: each rule names its own operands
    ip.run_cell("%%autograd -q --no-check\nb = 2.0\na = 3.0\nc = a * 5.0\nd = c + b\nd")
    page = views.paths_html(gradmagic.last, "a", draw=False)
    rules = re.search(r"Rules used on path 1: ([^<]*)<", page).group(1)
    assert "∂(c+b)/∂c = 1" in rules and "∂(a·5)/∂a = 5" in rules, rules
    assert "∂(a+b)" not in rules and "∂(a·b)" not in rules
    # at the text's own size (a <small> in the live view's 12 px tab is under 10 px)
    tag = re.search(r"<(\w+)( style=\"[^\"]*\")?>Rules used", page)
    assert tag.group(1) == "p" and "font-size" not in (tag.group(2) or ""), page


def test_a_rule_keeps_an_unnamed_operand_whole(ip):
    import gradmagic

    ip.run_cell("%%autograd -q --no-check\nx = 3.0\ny = 5.0\n(x - y) ** 2")
    page = views.paths_html(gradmagic.last, "x", draw=False)
    rules = re.search(r"Rules used on path 1: ([^<]*)<", page).group(1)
    # the base is x − y: written in parentheses, never "x − y^2"
    assert "∂((x − y)^2)/∂(x − y) = 2·(x − y)^(2−1)" in rules, rules
