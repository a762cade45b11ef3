"""Views of a run (gradmagic.views.render): DOT, SVG, summaries, tables, text."""

import dataclasses
import re
import sys
import time
import xml.etree.ElementTree as ET

import graphviz
import pytest

from gradmagic import Value
from gradmagic.views import drawing, render
from gradmagic.analysis.check import check
from gradmagic.core.engine import _make_unary
from gradmagic.core.ops import OPS
from gradmagic.analysis.trace import Trace

SVG = "{http://www.w3.org/2000/svg}"


def traced(target, **kwargs):
    target.backward()
    return Trace(target, **kwargs)


def svg_texts(svg: str) -> list:
    """The text Graphviz drew, unescaped (as a browser would show it)."""
    root = ET.fromstring(svg)
    return [t.text for t in root.iter(SVG + "text") if t.text]


def small():
    a, b = Value(2.0, label="a"), Value(-3.0, label="b")
    c = a * b
    c.label = "c"
    L = (c + a).tanh()
    L.label = "L"
    return traced(L)


def dot_line(dot: str, node_id: str) -> str:
    (line,) = [ln for ln in dot.splitlines() if ln.strip().startswith(node_id + " [")]
    return line


# --------------------------------------------------------------------------- escaping
@pytest.mark.parametrize(
    "label",
    [
        "a{b}",
        "x|y",
        "<tag>",
        'say "hi"',
        "a & b",
        "back\\slash",
        "\\N",
        "Δx₁ → ∞",
        "ok 🙂",
        '{|<>"&}',
    ],
)
def test_any_label_renders_verbatim_through_dot(label):
    x = Value(1.5, label=label)
    y = x * 2.0
    y.label = label + "'"
    trace = traced(y)
    texts = svg_texts(render.svg(render.to_dot(trace)))
    assert label in texts and label + "'" in texts


def test_escape_record_escapes_every_special_character():
    assert render.escape_record('{a|b<c>"d"\\}') == '\\{a\\|b\\<c\\>\\"d\\"\\\\\\}'
    assert render.escape_record("line\nbreak") == "line break"
    assert render.escape_string('say "x" \\') == 'say \\"x\\" \\\\'


# --------------------------------------------------------------------------- structure and colours
def test_values_are_records_with_label_data_grad_and_ops_sit_between():
    trace = small()
    dot = render.to_dot(trace)
    c = trace.node("c")
    line = dot_line(dot, f"v{c.index}")
    assert 'shape="record"' in line and 'label="{c|data -6|grad ' in line
    assert f"o{c.index} -> v{c.index};" in dot
    a, b = trace.node("a").index, trace.node("b").index
    assert f"v{a} -> o{c.index};" in dot and f"v{b} -> o{c.index};" in dot
    assert 'label="*"' in dot_line(dot, f"o{c.index}")
    assert "o" + str(a) + " [" not in dot  # leaves have no op node


def test_leaves_ops_and_target_have_distinct_colours():
    trace = small()
    dot = render.to_dot(trace)

    def fill(node_id):
        return re.search(r'fillcolor="([^"]+)"', dot_line(dot, node_id)).group(1)

    leaf = fill(f"v{trace.node('a').index}")
    middle = fill(f"v{trace.node('c').index}")
    target = fill(f"v{trace.target.index}")
    op = fill(f"o{trace.target.index}")
    assert len({leaf, middle, target, op}) == 4
    assert leaf == render.FILL["leaf"] and target == render.FILL["target"]


def test_nodes_failing_the_check_are_red():
    wrong = _make_unary(dataclasses.replace(OPS["tanh"], df=lambda x, out: 1.0 - out))
    x, y = Value(0.4, label="x"), Value(2.0, label="y")
    trace = traced(wrong(x) + y)
    report = check(trace)
    dot = render.to_dot(trace, report)
    bad = dot_line(dot, f"v{trace.node('x').index}")
    good = dot_line(dot, f"v{trace.node('y').index}")
    assert render.FILL["fail"] in bad and render.LINE["fail"] in bad
    assert render.FILL["fail"] not in good
    svg = render.svg(dot)
    assert render.FILL["fail"] in svg


def test_kinks_and_non_finite_values_are_marked():
    x, y = Value(0.0, label="x"), Value(-1.0, label="y")
    r = x.relu()
    r.label = "r"
    out = r + y.log()
    trace = traced(out)
    dot = render.to_dot(trace)
    relu_op = dot_line(dot, f"o{trace.node('r').index}")
    assert "kink" in relu_op and render.LINE["kink"] in relu_op
    nan_value = dot_line(dot, f"v{trace.target.index}")
    assert "⚠ nan" in nan_value and render.LINE["nonfinite"] in nan_value
    assert "kink" in " ".join(svg_texts(render.svg(dot)))


def test_rankdir_from_argument_and_options():
    trace = small()
    assert "rankdir=LR" in render.to_dot(trace)
    tb = render.to_dot(trace, rankdir="tb")
    assert "rankdir=TB" in tb and 'label="c|data' in tb  # no record flip in TB
    trace.options.rankdir = "TB"
    assert "rankdir=TB" in render.to_dot(trace)
    with pytest.raises(ValueError, match="rankdir"):
        render.to_dot(trace, rankdir="RL")


def test_path_and_current_highlights():
    trace = small()
    c, top = trace.node("c").index, trace.target.index
    path = {c, c + 1, top}  # c, c + a, tanh(c + a)
    assert trace.nodes[c + 1].parents[0] == c and trace.nodes[top].parents == (c + 1,)
    dot = render.to_dot(trace, path=path, current=c)
    assert render.FILL["current"] in dot_line(dot, f"v{c}")
    assert render.LINE["path"] in dot_line(dot, f"o{top}")
    assert render.LINE["path"] in dot_line(dot, f"o{c + 1}")
    assert render.LINE["path"] not in dot_line(dot, f"o{c}")  # c's own op is upstream
    assert f'v{c} -> o{c + 1} [color="{render.LINE["path"]}"' in dot


# --------------------------------------------------------------------------- big graphs
def chain(n):
    x = Value(0.5, label="x")
    total = Value(0.0, label="start")
    for i in range(n):
        total = total + x * float(i % 7)
    total.label = "total"
    return traced(total, bindings={"x": x, "total": total})


def image(html: str) -> str:
    """The SVG inside the static graph's ``<img>`` (a base64 data URI)."""
    import base64

    uri = re.search(
        r'<img class="gradmagic-graph"[^>]* src="data:image/svg\+xml;base64,([^"]+)"', html
    )
    assert uri, html[:300]
    return base64.b64decode(uri.group(1)).decode()


def test_small_graphs_are_drawn_in_full():
    trace = small()
    assert render.summarise(trace) is None
    html = render.graph_html(trace)
    assert "<svg" in image(html) and "max-nodes" not in html
    assert "<svg" not in html  # inline SVG is stripped by sanitisers: only the image


def test_past_max_nodes_the_graph_shows_a_summary_with_a_note():
    trace = chain(200)
    n = len(trace.nodes)
    assert n == 602  # x, start, and a constant, a * and a + per step
    summary = render.summarise(trace)
    assert summary is not None
    assert len(summary.shown) <= render.NEIGHBOURHOOD + render.NAMED
    assert trace.target.index in summary.shown and trace.node("x").index in summary.shown
    assert "602 nodes" in summary.counts and "+ 200" in summary.counts
    # x feeds every step: drawn whole, its edges would cross every rank (past the budget),
    # so no bigger --max-nodes is offered
    assert render.layout_size(trace, render.drawn_nodes(trace)) > render.LAYOUT_LIMIT
    assert "--max-nodes 602" not in summary.note and "draws them all" not in summary.note
    html = render.graph_html(trace)
    assert "<svg" in image(html)
    assert "More than --max-nodes 150: this summary draws the 30 nodes nearest" in html
    # 602 nodes: the Gradients table keeps 500 of them, and says where the rest are
    assert "the Gradients table lists 500 (the target, the inputs" in summary.note
    assert "`gradmagic.last.nodes` has all 602" in summary.note
    assert "lists every node" in render.summarise(chain(100), max_nodes=100).note
    drawn = re.findall(r"^  v(\d+) \[", render.to_dot(trace, subset=summary.shown), re.M)
    assert len(drawn) == len(set(summary.shown) - render.folded(trace))  # constants folded
    assert "more input" in render.to_dot(trace, subset=summary.shown)


def test_a_summary_offers_only_sizes_that_can_be_laid_out():
    tree = [Value(float(i), label=f"x{i}") for i in range(160)]
    while len(tree) > 1:  # a balanced sum: short edges, 319 values
        tree = [a + b for a, b in zip(tree[::2], tree[1::2])] + tree[len(tree) // 2 * 2 :]
    balanced = traced(tree[0])
    assert render.drawable(balanced, render.drawn_nodes(balanced))
    assert "`%%autograd --max-nodes 319` draws them all." in render.summarise(balanced).note
    assert render.summarise(balanced, max_nodes=319) is None
    long = chain(200)  # asked to draw it all, past what can be laid out: still summarised
    summary = render.summarise(long, max_nodes=10_000)
    assert summary is not None and summary.note.startswith("Too big to lay out whole within 5 s")
    assert "--max-nodes" not in summary.note
    assert not render.drawable(long, list(range(2 * render.DRAW_LIMIT)))


def test_summary_counts_name_tensor_ops_by_their_symbol():
    tensor = pytest.importorskip("gradmagic.core.tensor")
    T = tensor.Tensor(list(range(100)), label="T")
    total = T[0]
    for i in range(1, 100):
        total = total + T[i]
    summary = render.summarise(traced(total.sum()))
    assert "[] 100" in summary.counts and "getitem" not in summary.counts


def test_graph_html_uses_a_summary_it_is_given(monkeypatch):
    trace = chain(200)
    summary = render.summarise(trace)
    expected = render.graph_html(trace)
    monkeypatch.setattr(render, "summarise", lambda *a, **k: pytest.fail("summarised again"))
    assert render.graph_html(trace, summary=summary) == expected


def test_max_nodes_option_and_argument():
    trace = chain(20)  # 62 nodes
    assert render.summarise(trace) is None
    trace.options.max_nodes = 10
    assert render.summarise(trace) is not None
    assert render.summarise(trace, max_nodes=100) is None


@pytest.mark.slow
def test_a_hundred_thousand_node_trace_summarises():
    trace = chain(33_400)
    summary = render.summarise(trace)
    html = render.graph_html(trace)
    assert "100,202 nodes" in summary.counts
    assert "<svg" in image(html) and len(html) < 300_000


# --------------------------------------------------------------------------- without Graphviz
def test_without_dot_the_graph_view_says_how_to_install_and_shows_dot(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot executable anywhere
    trace = small()
    html = render.graph_html(trace)
    first = html.split("</p>")[0]
    assert "apt-get install graphviz" in first and "\n" not in first
    assert "<pre" in html and "digraph gradmagic" in html
    assert "&quot;" in html or "&lt;" in html or "label=" in html  # the DOT, escaped


def test_other_graphviz_failures_show_the_message_and_source(monkeypatch):
    def broken(source):
        raise graphviz.CalledProcessError(1, ["dot"], stderr="syntax error")

    monkeypatch.setattr(render, "svg", broken)
    html = render.graph_html(small())
    assert "could not draw" in html and "digraph gradmagic" in html


def test_svg_cache_avoids_redrawing(monkeypatch):
    calls = []
    real = render.svg
    monkeypatch.setattr(render, "svg", lambda source: calls.append(1) or real(source))
    cache = {}
    trace = small()
    first = render.graph_html(trace, cache=cache)
    drawn = len(calls)  # a small graph: drawn both ways, the one that fits kept
    assert drawn == 2
    second = render.graph_html(trace, cache=cache)
    assert first == second and len(calls) == drawn


# --------------------------------------------------------------------------- tables and text
def test_node_order_puts_the_target_first_and_sorts():
    trace = small()
    for key in render.SORT_KEYS:
        order = render.node_order(trace, key)
        assert order[0] == trace.target.index and sorted(order) == list(range(len(trace.nodes)))
    by_grad = render.node_order(trace, "grad")[1:]
    mags = [abs(trace.nodes[i].grad) for i in by_grad]
    assert mags == sorted(mags, reverse=True)
    with pytest.raises(ValueError, match="sort key"):
        render.node_order(trace, "colour")


def test_html_table_lists_every_node_escaped():
    x = Value(1.0, label="<script>")
    trace = traced(x * 3.0)
    table = render.nodes_table_html(trace)
    assert "&lt;script&gt;" in table and "<script>" not in table
    assert table.count("<tr") == len(trace.nodes) + 1


def test_html_table_is_cut_for_huge_graphs():
    trace = chain(400)
    table = render.nodes_table_html(trace, limit=50)
    assert table.count("<tr") == 51 and "Showing 50 of 1,202 nodes" in table


def test_plain_text_view_has_headline_table_and_check():
    trace = small()
    out = render.text(trace, check(trace))
    lines = out.splitlines()
    assert lines[0].startswith("L = ") and "5 nodes" in lines[0]
    assert lines[1].split() == ["#", "label", "op", "data", "grad", "flags"]
    assert lines[3].split()[:3] == [str(trace.target.index), "L", "tanh"]
    assert "✓ all 2 gradients match" in out


def test_static_html_has_graph_tables_and_check():
    trace = small()
    page = render.static_html(trace, check(trace))
    assert "<svg" in image(page) and "Gradients" in page and "Check" in page
    assert "all 2 gradients match" in page


def test_static_html_mentions_a_skipped_check():
    trace = small()
    trace.options.no_check = True
    assert "--no-check" in render.static_html(trace, None)


def test_render_does_not_import_ipywidgets():
    import subprocess

    code = "import gradmagic.views.render, sys; print('ipywidgets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- answers
def test_answers_views_verdict_rows_and_unknown_names():
    trace = small()
    answers = trace.expect(
        {
            "a": trace.node("a").grad + 0.5,
            "L.data": trace.value,
            "b.grad": trace.node("b").grad,
            "zz": 1.0,
        }
    )
    text = render.answers_text(answers)
    lines = text.splitlines()
    assert lines[0] == "✗ 2 of 4 correct"
    assert "≤ 1e-05 + 0.001·|expected|" in lines[1]
    rows = lines[4:]
    assert [r[0] for r in rows] == ["✗", "✓", "✓", "✗"]  # in the order given
    assert "∂L/∂a" in rows[0] and "-0.5" in rows[0]  # got − expected
    assert "L (value)" in rows[1] and "∂L/∂b" in rows[2]
    assert "∂L/∂zz" in rows[3] and "no node named 'zz'" in rows[3]
    page = render.answers_html(answers)
    assert page.index("2 of 4 correct") < page.index("<table") and page.count("✗") == 3
    assert render.report_text(answers) == text and render.report_html(answers) == page


def test_static_views_have_an_answers_section_on_top():
    trace = small()
    answers = trace.expect({"a": 0.0})
    page = render.static_html(trace, check(trace), expected=answers)
    assert page.index("<summary><b>Answers</b></summary>") < page.index("<img")
    assert page.index("<img") < page.index("<summary><b>Check</b></summary>")
    assert "<details open><summary><b>Answers" in page
    out = render.text(trace, check(trace), expected=answers)
    assert out.index("✗ 0 of 1 correct") < out.index("✓ all 2 gradients match")
    assert "Answers" not in render.text(trace, check(trace))
    assert "Answers" not in render.static_html(trace, check(trace))


def test_array_answers_show_the_worst_difference():
    from gradmagic.core.tensor import Tensor

    W = Tensor([[1.0, 2.0]], label="W")
    L = (W * W).sum()
    L.label = "L"
    trace = traced(L)
    answers = trace.expect({"W": [[2.0, 4.5]]})
    (row,) = render.answers_text(answers).splitlines()[4:]
    assert row.startswith("✗") and "0.5" in row and "worst element (0, 1)" in row


# --------------------------------------------------------------------------- arrays and inputs
np = pytest.importorskip("numpy")


def test_numbers_and_arrays_are_one_line():
    assert render.fmt(np.array(2.095762345), 6) == render.fmt(2.095762345, 6) == "2.09576"
    assert render.fmt(np.array(2.0)) == render.fmt(2.0) == "2"  # 0-d arrays like scalars
    small_array = np.array([[0.5], [-0.3]])
    assert render.fmt(small_array) == "[[0.5], [-0.3]]"
    assert render.fmt(np.arange(6.0).reshape(2, 3)) == "[[0, 1, 2], [3, 4, 5]]"
    big = np.linspace(-1.1, 2.0, 50).reshape(50, 1)
    norm = float(np.linalg.norm(big))
    assert render.fmt(big, 6) == f"50×1 ‖·‖={norm:.6g} min -1.1 max 2"
    assert render.fmt(big, 6, shape=False) == f"‖·‖={norm:.6g} min -1.1 max 2"
    assert render.fmt(np.zeros(7)) == "(7,) ‖·‖=0 min 0 max 0"
    for x in (small_array, big, np.ones((3, 2)), np.full((2, 2, 2), np.nan)):
        assert "\n" not in render.fmt(x) and "\n" not in render.fmt(x, shape=False)


def tensor_trace():
    """L = mean((X @ W + b - Y) ** 2) with a 50×1 X, a 2-element W and literals."""
    tensor = pytest.importorskip("gradmagic.core.tensor")
    X = tensor.Tensor(np.linspace(-1, 1, 100).reshape(50, 2), label="X", requires_grad=False)
    W = tensor.Tensor([[0.5], [-0.3]], label="W")
    b = tensor.Tensor([0.1], label="b")
    Y = X[:, :1] * 2 + 0.5
    Y.label = "Y"
    L = ((X @ W + b - Y) ** 2).mean()
    L.label = "L"
    return traced(L)


def test_graph_records_show_shapes_and_short_figures():
    trace = tensor_trace()
    dot = render.to_dot(trace)
    w, x = trace.node("W").index, trace.node("X").index
    assert "{W 2×1|data [[0.5], [-0.3]]|grad [[" in dot_line(dot, f"v{w}")
    assert "{X 50×2|data ‖·‖ 5.83|grad ‖·‖ 0}" in dot_line(dot, f"v{x}")  # short: no min/max
    assert "array(" not in dot and "min " not in dot
    texts = svg_texts(render.svg(dot))
    assert "W 2×1" in texts and "data [[0.5], [-0.3]]" in texts
    assert max(len(t) for t in texts) <= 26  # "grad [[-1.216], [-1.232]]"


def test_a_constant_array_is_not_drawn_as_an_input():
    from gradmagic import tensor
    import numpy as np

    W = tensor(np.array([[0.5], [-0.3]]), requires_grad=True, label="W")
    y = (W * np.array([[2.0], [3.0]])).sum()
    trace = traced(y)
    dot = render.to_dot(trace)
    constant = [i for i in range(trace.n) if trace.nodes[i].is_constant][0]
    line = re.search(rf"^  v{constant} \[(.*)\];$", dot, re.M).group(1)
    assert f'fillcolor="{render.FILL["constant"]}"' in line
    assert f'fillcolor="{render.FILL["leaf"]}"' in re.search(
        rf"^  v{trace.node('W').index} \[(.*)\];$", dot, re.M
    ).group(1)


def test_constants_fold_into_their_op():
    x = Value(3.0, label="x")
    y = 2.0 * (x**2) * 3.0 + 1.0
    y.label = "y"
    trace = traced(y)
    dot = render.to_dot(trace)
    assert len(re.findall(r"^  v\d+ \[", dot, re.M)) == 5  # x and four results: no constants
    labels = re.findall(r'^  o\d+ \[shape="ellipse", label="([^"]+)"', dot, re.M)
    assert labels == ["**2", "*2", "*3", "+1"]
    z = Value(1.0, label="z")
    w = sum([z * z, z]) - (-1.0)  # sum() starts at 0; a negative constant after a minus
    w = 2.0 - w / -4.0
    labels = re.findall(r'label="([^"]+)"', render.to_dot(traced(w)))
    assert "+0" in labels and "-(-1)" in labels and "/(-4)" in labels and "2-" in labels
    assert not {"0+", "--1"} & set(labels)
    tensor = tensor_trace()
    dot = render.to_dot(tensor)
    assert 'label="**2"' in dot and len(re.findall(r"^  v\d+ \[", dot, re.M)) == 9


def test_no_negative_zero():
    assert render.fmt(-0.0) == "0" and render.figure(-0.0) == "0"
    assert render.fmt(np.array([-0.0, 1.0])) == "[0, 1]"
    x = Value(0.0, label="x")
    y = x * -1.0
    y.label = "y"
    trace = traced(y)
    assert "-0" not in render.to_dot(trace) and "-0 " not in render.text(trace)


def test_layout_is_bounded_past_a_size():
    assert render.layout_attrs(render.LAYOUT_EXACT) == ""
    assert "nslimit=" in render.layout_attrs(render.LAYOUT_EXACT + 1)
    assert "nslimit=4" in render.to_dot(chain(20)) and "nslimit" not in render.to_dot(small())


@pytest.mark.slow
def test_the_tanh_recurrence_lays_out_with_bounded_work():
    """20 steps of h = tanh(w1*h + w2*x + b), s += h*c: 46 s in dot before the limits.

    A hang guard, not a speed target: the bound's attributes are asserted, and the
    time only has to stay far below the unbounded 46 s (even on a loaded machine)."""
    import time

    w1, w2, b, c = (
        Value(v, label=n) for v, n in ((0.5, "w1"), (-0.3, "w2"), (0.1, "b"), (0.7, "c"))
    )
    h, s = Value(0.0, label="h"), Value(0.0, label="s")
    for t in range(20):
        h = (w1 * h + w2 * (0.1 * t) + b).tanh()
        s = s + h * c
    trace = traced(s)
    assert len(trace.nodes) > 140
    dot = render.to_dot(trace)
    start = time.perf_counter()
    render.svg(dot)
    assert "nslimit=4" in dot
    assert time.perf_counter() - start < 30  # about 0.3 s idle, 1-2 s at load 9; unbounded 46 s


def test_tables_show_small_arrays_in_full_and_large_ones_summarised():
    trace = tensor_trace()
    out = render.nodes_table_text(trace)
    lines = out.splitlines()
    assert "array(" not in out and all("\n" not in c for c in lines)
    w_row = next(line for line in lines if line.split()[1:2] == ["W"])
    assert "[[0.5], [-0.3]]" in w_row
    x_row = next(line for line in lines if line.split()[1:2] == ["X"])
    assert "50×2 ‖·‖=" in x_row and " min " in x_row and " max " in x_row
    header = lines[0]
    assert x_row.index("50×2") == header.index("data")
    page = render.nodes_table_html(trace)
    assert "[[0.5], [-0.3]]" in page and "50×2 ‖·‖=" in page


def test_headline_counts_inputs_not_unnamed_constants():
    x = Value(3.0, label="x")
    y = x**2 * 1.0  # the 2 and the 1.0 are unnamed constant leaves
    y.label = "y"
    trace = traced(y)
    assert len(trace.leaves) == 3 and [n.label for n in render.inputs(trace)] == ["x"]
    assert render.headline(trace) == "y = 9  (5 nodes, 1 input)"
    # named leaves count, but not those asking for no gradient (X, and Y made from X
    # alone), nor 2, 0.5, 2
    tensor = tensor_trace()
    assert sorted(n.label for n in render.inputs(tensor)) == ["W", "b"]
    assert render.headline(tensor).endswith(f"({len(tensor.nodes)} nodes, 2 inputs)")
    unnamed = pytest.importorskip("gradmagic.core.tensor").Tensor([1.0, 2.0])  # asks for a gradient
    assert len(render.inputs(traced((unnamed * 2.0).sum()))) == 1
    out = render.text(tensor, check(tensor))
    assert out.count("constant") == 1  # one note, naming X and Y only
    note = next(line for line in out.splitlines() if "constant" in line)
    assert note.startswith("2 named constants (requires_grad=False: ")
    assert sorted(note.split(": ")[1].split(")")[0].split(", ")) == ["X", "Y"]
    assert render.headline(tensor) in render.static_html(tensor, check(tensor))


def test_the_static_graph_keeps_its_size_and_scrolls():
    import base64

    page = render.graph_html(chain(3))
    box = re.search(r'<div style="overflow:auto; max-width:100%; max-height:(\d+)px"><img', page)
    assert box and int(box.group(1)) == render.GRAPH_HEIGHT
    # scaled to the output's width, at most SHRINK times; past that the box scrolls to the rest
    style = re.search(r'<img class="gradmagic-graph"[^>]*style="([^"]+)"', page).group(1)
    width = float(re.search(r"width:(\d+)pt", style).group(1))
    assert "max-width:100%" in style
    assert f"min-width:{width / render.SHRINK:.0f}pt" in style
    assert "gradmagic-legend" in page
    uri = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(uri).decode().startswith("<?xml")


# --------------------------------------------------------------------------- read from columns
def mixed():
    """Floats, -0.0, ints, folded constants on either side, a unary op, nan, a 1-element tensor."""
    import numpy as np
    from gradmagic import tensor

    x, n = Value(-0.0, label="x"), Value(3, label="n")
    y = (2.0 * x + x * 0.5) ** 2 - n * 7 + (x + 1e-300).log()
    t = tensor(np.array([1.5]), requires_grad=True)
    z = (t * np.array([2.0])).sum()
    return traced(y + 3.0 * z)


def test_columns_read_as_the_node_views_do():
    trace = mixed()
    rows = list(range(trace.n))
    fold = render.Folded(trace)
    assert set(fold) == render.folded(trace) and fold  # some constants fold
    assert render.column_text(trace, rows, "data") == [render.fmt(n.data, 6) for n in trace.nodes]
    assert render.column_text(trace, rows, "grad") == [render.fmt(n.grad, 6) for n in trace.nodes]
    assert render.op_labels(trace, rows, fold) == [
        render.op_label(trace, i, fold) if trace.nodes[i].op else "" for i in rows
    ]
    assert render.op_labels(trace, rows, fold) == render.op_labels(trace, rows, set(fold))
    status = {rows[1]: "fail"}
    assert render.flags_text(trace, rows, status) == [
        render.flag_words(n, status.get(n.index)) for n in trace.nodes
    ]


def test_children_among_reads_the_parent_columns():
    from gradmagic.analysis.graph import children_of

    trace = mixed()
    every = children_of(trace)
    some = [0, 2, trace.n - 1]
    among = render.children_among(trace, some)
    assert {i: among[i] for i in some} == {i: every[i] for i in some}
    capped = render.children_among(trace, some, cap=1)
    for i in some:
        assert capped[i] == every[i][:1] and render.use_count(capped, i) == len(every[i])
        assert render.use_count(every, i) == len(every[i])


def test_one_dot_process_draws_graph_after_graph_as_a_fresh_one_does():
    trace = small()
    source = render.to_dot(trace)
    fresh = graphviz.Source(source).pipe(format="svg", encoding="utf-8")
    fresh = fresh[fresh.find("<svg") :]
    assert [render.svg(source) for _ in range(3)] == [fresh] * 3
    with pytest.raises(render.DrawError, match="dot rejected the graph: .*syntax error"):
        render.svg("digraph { a -> ")
    assert render.svg(source) == fresh  # and the next graph is drawn again


# --------------------------------------------------------------------------- bounded drawing
def test_dot_is_stopped_past_its_time_and_says_so(monkeypatch):
    slow = render.to_dot(chain(200))  # x feeds every step: about a second or more of dot
    monkeypatch.setattr(drawing, "DOT_SECONDS", 0.05)
    monkeypatch.setattr(drawing.DotServer, "TIMEOUT", 0.05)
    started = time.monotonic()
    with pytest.raises(render.DrawError, match=r"took more than 0.05 s .* was stopped"):
        render.svg(slow)
    with pytest.raises(render.DrawError, match=r"took more than 0.05 s"):  # the one-shot too
        drawing.dot_once(slow)
    assert time.monotonic() - started < 3
    html = render.graph_html(chain(200), max_nodes=10_000, summary=None)
    assert "took more than 0.05 s" in html and "the tables below still show the run" in html
    monkeypatch.undo()
    assert "<svg" in render.svg(render.to_dot(small()))  # the next graph is drawn again


def test_dot_runs_with_bounded_memory(monkeypatch):
    monkeypatch.setattr(drawing, "DOT_BYTES", 30 << 20)  # too little for this graph's layout
    with pytest.raises(render.DrawError, match="dot ran out of its 30 MB of memory"):
        drawing.dot_once(render.to_dot(chain(200)))


def test_a_name_of_any_length_is_drawn_clipped_with_its_end_kept():
    from gradmagic.analysis.trace import Trace
    from gradmagic.core.engine import backward, walk

    long = "w" * 3000
    x = Value(2.0, long + "[17]")
    y = x * 3.0
    y.label = "y"
    w = walk(y, zero=True)
    backward(y, 1.0, w)
    source = render.to_dot(Trace(y, walk=w))
    assert max(len(line) for line in source.splitlines()) < 400
    assert "…" in source and "[17]" in source
    svg = render.svg(source)
    widths = [float(v) for v in re.findall(r'<svg width="([0-9.]+)pt', svg)]
    assert widths and widths[0] < 1200


def test_numbers_never_break_at_their_sign_or_exponent():
    page = render.whole_numbers("error 5.78e-10 at -3.5, then 12 and x-1")
    assert '<span style="white-space:nowrap">5.78e-10</span>' in page
    assert '<span style="white-space:nowrap">-3.5</span>' in page
    assert " 12 " in page  # nothing to break in it: as it is
    header = ["name", "analytic", "note"]
    table = render.html_table(header, [["x", "5.78e-10", "off by -2e-05"]])
    assert 'white-space:nowrap">5.78e-10</td>' in table
    assert '<span style="white-space:nowrap">-2e-05</span>' in table


def test_a_function_with_a_folded_constant_reads_as_a_call(ip):
    import gradmagic

    assert render.folded_label("maximum", "0", "") == "maximum(0, ·)"
    assert render.folded_label("*", "3", "") == "*3" and render.folded_label("**", "", "2") == "**2"
    ip.run_cell("import numpy as np")
    ip.run_cell("%%autograd -q\nx = np.array([1.0, -2.0])\nL = (np.maximum(0, x) * 2).sum()\nL")
    trace = gradmagic.last
    labels = render.op_labels(trace, range(trace.n), render.Folded(trace))
    assert "maximum(0, ·)" in labels and "0maximum" not in labels
