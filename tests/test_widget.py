"""The widget and the display bundle (gradmagic.views.widget), without a browser."""
import re

import pytest

from gradmagic import Value
from gradmagic.analysis import check as check_module
from gradmagic.views import render, widget
from gradmagic.analysis.trace import Trace
from gradmagic.analysis.graph import backward_steps, grads_at, path_to_target
from gradmagic.views.widget import WIDGET_MIME, TraceWidget, mimebundle

pytest.importorskip("ipywidgets")


def traced(target, **kwargs):
    target.backward()
    return Trace(target, **kwargs)


def neuron():
    """o = tanh(x1*w1 + x2*w2 + b): Karpathy's example, x1 reused once more."""
    x1, w1 = Value(2.0, label="x1"), Value(-3.0, label="w1")
    x2, w2 = Value(0.0, label="x2"), Value(1.0, label="w2")
    b = Value(6.8813735870195432, label="b")
    n = x1 * w1 + x2 * w2 + b
    n.label = "n"
    o = (n + x1 * 0.0).tanh()
    o.label = "o"
    return traced(o)


# --------------------------------------------------------------------------- structure
def test_tabs_slider_and_picker():
    trace = neuron()
    view = TraceWidget(trace, trace.check())
    assert view.tabs.titles == ("Graph", "Gradients", "Check", "Backward")
    assert len(view.tabs.children) == 4
    ops = sum(1 for n in trace.nodes if n.parents)
    assert (view.slider.min, view.slider.max, view.slider.value) == (0, ops, 0)
    values = [v for _, v in view.picker.options]
    assert values[0] == widget.NONE and sorted(values[1:]) == list(range(len(trace.nodes)))
    assert values[1] == trace.target.index  # target first
    assert "<svg" in view.graph.value
    inputs = [n for n in trace.leaves if not n.is_constant]  # not the 0.0
    assert f"all {len(inputs)} gradients match" in view.check_view.value


def table_rows(page: str) -> list:
    """Node indices of an HTML nodes table, in row order."""
    return [int(i) for i in re.findall(r"<tr[^>]*><td[^>]*>(\d+)</td>", page)]


def test_gradients_tab_lists_every_node_target_first_and_sorts():
    trace = neuron()
    view = TraceWidget(trace)
    rows = table_rows(view.table.value)
    assert rows[0] == trace.target.index and sorted(rows) == list(range(len(trace.nodes)))
    view.sort.value = "grad"
    rows = table_rows(view.table.value)
    assert rows[0] == trace.target.index
    mags = [abs(trace.nodes[i].grad) for i in rows[1:]]
    assert mags == sorted(mags, reverse=True)
    view.sort.value = "label"
    labels = [trace.nodes[i].label for i in table_rows(view.table.value)[1:]]
    named = [x for x in labels if x]
    assert named == sorted(named) and labels[:len(named)] == named


def test_check_tab_is_worst_first_and_skipped_with_no_check():
    x, y = Value(0.0, label="x"), Value(2.0, label="y")
    trace = traced(x.relu() * y + y)
    view = TraceWidget(trace, trace.check())
    page = view.check_view.value
    assert page.index(">x<") < page.index(">y<")  # the flagged kink row first
    trace.options.no_check = True
    skipped = TraceWidget(trace, None)
    assert "skipped" in skipped.check_view.value and "--no-check" in skipped.check_view.value


# --------------------------------------------------------------------------- backward stepping
def test_backward_steps_run_from_the_target_in_reverse_topological_order():
    trace = neuron()
    steps = backward_steps(trace)
    assert steps[0] == trace.target.index
    assert steps == sorted(steps, reverse=True)
    assert all(trace.nodes[i].parents for i in steps)


def test_partial_gradients_end_at_the_recorded_ones():
    trace = neuron()
    steps = backward_steps(trace)
    grads, state = grads_at(trace, 0)
    assert state[trace.target.index] == "final"
    assert [s for i, s in enumerate(state) if i != trace.target.index] == \
        ["unknown"] * (len(trace.nodes) - 1)
    grads, state = grads_at(trace, len(steps))
    assert state == ["final"] * len(trace.nodes)
    for node, g in zip(trace.nodes, grads):
        assert g == pytest.approx(node.grad, abs=1e-12)


def test_a_reused_node_is_partial_until_all_its_children_are_processed():
    trace = neuron()
    x1 = trace.node("x1").index
    children = [n.index for n in trace.nodes if x1 in n.parents]
    assert len(children) == 2
    steps = backward_steps(trace)
    first = min(steps.index(c) for c in children) + 1  # after the first child
    grads, state = grads_at(trace, first)
    assert state[x1] == "partial"
    later = max(steps.index(c) for c in children) + 1
    grads, state = grads_at(trace, later)
    assert state[x1] == "final" and grads[x1] == pytest.approx(trace.node("x1").grad)


def test_a_final_gradient_includes_tensor_contributions():
    """v feeds a tensor op and a scalar op: its final gradient is the sum of both."""
    tensor = pytest.importorskip("gradmagic.core.tensor")
    v = Value(2.0, label="v")
    T = tensor.Tensor([1.0, 2.0], label="T")
    L = (T * v).sum() + v * v  # dL/dv = 1 + 2 + 2v = 7
    L.label = "L"
    trace = traced(L)
    assert trace.node("v").grad == pytest.approx(7.0)
    steps = backward_steps(trace)
    grads, state = grads_at(trace, len(steps))
    i = trace.node("v").index
    assert state[i] == "final" and grads[i] == pytest.approx(7.0)


def test_local_derivatives_are_read_from_the_snapshot():
    x = Value(2.0, label="x")
    y = x * x + x.tanh()
    trace = traced(y)
    x.data = 5.0  # an optimizer step after the run does not change the trace
    (prod,) = [n for n in trace.nodes if n.op == "*"]
    assert prod.local == (2.0, 2.0)
    assert trace.node("x").local == () and trace.target.local == (1.0, 1.0)


def test_slider_redraws_with_the_processed_node_highlighted():
    trace = neuron()
    view = TraceWidget(trace)
    assert view.backward_graph.value == ""  # drawn lazily
    view.tabs.selected_index = 3
    assert "Start" in view.step_info.value and "?" in view.backward_graph.value
    view.slider.value = 1
    assert "Step 1 of" in view.step_info.value
    assert render.FILL["current"] in view.backward_graph.value
    assert "tanh" in view.step_info.value  # the rule text of the processed op
    view.slider.value = view.slider.max
    assert "so far" not in view.backward_graph.value


# --------------------------------------------------------------------------- node picker
def test_picker_highlights_the_path_and_explains_the_gradient():
    trace = neuron()
    view = TraceWidget(trace)
    n = trace.node("n")
    view.picker.value = n.index
    assert view.selected == n.index
    info = view.info.value
    assert "Local derivatives" in info and "∂(a+b)/∂a = 1" in info
    assert "Incoming gradient" in info and f"{n.grad:.6g}" in info
    assert render.LINE["path"] in view.graph.value
    path = path_to_target(trace, n.index)
    assert trace.target.index in path and trace.node("x2").index not in path
    view.picker.value = widget.NONE
    assert view.selected is None and view.info.value == ""


def test_picker_on_a_leaf_and_on_the_target():
    trace = neuron()
    view = TraceWidget(trace)
    view.select(trace.node("x1").index)
    assert "A leaf" in view.info.value and view.info.value.count(" from ") == 2  # used twice
    view.select(trace.target.index)
    assert "seed" in view.info.value


def test_big_graphs_offer_the_summary_nodes_only():
    x = Value(0.5, label="x")
    total = Value(0.0)
    for i in range(300):
        total = total + x * 0.5
    trace = traced(total, bindings={"x": x})
    view = TraceWidget(trace)
    shown = set(render.summarise(trace).shown)
    assert {v for _, v in view.picker.options[1:]} == shown
    assert "--max-nodes" in view.graph.value


# --------------------------------------------------------------------------- the bundle
def test_mimebundle_has_widget_view_static_html_and_text():
    trace = neuron()
    bundle = mimebundle(trace)
    assert set(bundle) == {WIDGET_MIME, "text/html", "text/plain"}
    assert bundle[WIDGET_MIME]["model_id"]
    assert "<svg" in bundle["text/html"] and "<table" in bundle["text/html"]
    assert "gradients match" in bundle["text/html"]
    assert bundle["text/plain"].startswith("o = ") and "x1" in bundle["text/plain"]
    assert mimebundle(trace).keys() == bundle.keys()


def test_static_view_and_widget_share_one_drawing(monkeypatch):
    calls = []
    real = render.svg
    monkeypatch.setattr(render, "svg", lambda source: calls.append(source) or real(source))
    mimebundle(neuron())
    assert len(calls) == 1


def test_without_ipywidgets_the_bundle_is_static(monkeypatch):
    def missing():
        raise ImportError("No module named 'ipywidgets'")
    monkeypatch.setattr(widget, "_widgets", missing)
    bundle = mimebundle(neuron())
    assert set(bundle) == {"text/html", "text/plain"}


def test_no_check_option_skips_the_check(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("check must not run")
    monkeypatch.setattr(check_module, "check", boom)
    trace = neuron()
    trace.options.no_check = True
    bundle = mimebundle(trace)
    assert "--no-check" in bundle["text/html"] and "--no-check" in bundle["text/plain"]


def test_a_check_that_cannot_run_does_not_break_the_display(monkeypatch):
    def broken(*args, **kwargs):
        raise TypeError("node #3 has no _replay method")
    monkeypatch.setattr(check_module, "check", broken)
    bundle = mimebundle(neuron())
    assert "could not run" in bundle["text/plain"] and "_replay" in bundle["text/html"]
    assert "<svg" in bundle["text/html"]


def test_expect_option_adds_expected_answers():
    trace = neuron()
    trace.options.expect = {"x1": -1.5, "w1": 1.0, "nope": 0.0}
    bundle = mimebundle(trace)
    assert "2 of 3 correct" in bundle["text/html"] and "no node named" in bundle["text/plain"]


def test_without_dot_the_other_tabs_still_work(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    trace = neuron()
    view = TraceWidget(trace, trace.check())
    assert "apt-get install graphviz" in view.graph.value
    assert "<table" in view.table.value and "gradients match" in view.check_view.value
    bundle = mimebundle(trace)
    assert "apt-get install graphviz" in bundle["text/html"]


def test_trace_warnings_are_shown_in_every_view():
    x = Value(2.0, label="x")
    trace = traced(x * x, warnings=["line 3: float(x) cut the graph"])
    view = TraceWidget(trace)
    bundle = mimebundle(trace)
    for page in (view.box.children[0].value, bundle["text/html"], bundle["text/plain"]):
        assert "line 3: float(x) cut the graph" in page


# --------------------------------------------------------------------------- answers and torch
def test_expected_answers_get_their_own_tab_first_and_selected():
    trace = neuron()
    report = trace.check()
    answers = trace.expect({"x1": -1.5, "w1": 2.0, "nope": 0.0})
    view = TraceWidget(trace, report, expected=answers)
    assert view.tabs.titles == ("Answers", "Graph", "Gradients", "Check", "Backward")
    assert view.tabs.selected_index == 0 and view.tabs.children[0].children == (view.answers,)
    page = view.answers.value
    assert page.index("1 of 3 correct") < page.index("<table")  # the verdict on top
    cells = re.findall(r"<tr[^>]*>(.*?)</tr>", page)[1:]
    assert [re.findall(r"<td[^>]*>(.*?)</td>", c)[0] for c in cells] == ["✓", "✗", "✗"]
    assert "∂o/∂x1" in page and "no node named &#x27;nope&#x27;" in page
    assert "correct" not in view.check_view.value  # the answers left the Check tab
    view.tabs.selected_index = view.titles.index("Backward")
    assert "Step" in view.step_info.value or "Start" in view.step_info.value
    plain = TraceWidget(trace, report)
    assert plain.tabs.titles == widget.TAB_TITLES and plain.tabs.selected_index == 0
    assert plain.answers is None


def test_the_bundle_puts_answers_first_in_every_view():
    trace = neuron()
    trace.options.expect = {"x1": -1.5, "o.data": 0.7071067811865476, "w1": 5.0}
    bundle = mimebundle(trace)
    page, text = bundle["text/html"], bundle["text/plain"]
    assert page.index("<summary><b>Answers</b></summary>") < page.index("<svg")
    assert "✗ 2 of 3 correct" in page and "✗ 2 of 3 correct" in text
    assert text.index("Answers") < text.index("label")
    (w1,) = [ln for ln in text.splitlines() if "∂o/∂w1" in ln]
    assert w1.startswith("✗") and "5" in w1 and "-4" in w1  # expected, got, got − expected


def test_torch_adds_a_column_to_the_check():
    pytest.importorskip("torch")
    trace = neuron()
    trace.options.torch = True
    bundle = mimebundle(trace)
    for page in (bundle["text/html"], bundle["text/plain"]):
        assert "|torch − analytic|" in page and "agrees on all 6 gradients" in page
    view = TraceWidget(trace, trace.check(), torch=check_module_torch().compare(trace))
    header = re.findall(r"<th style=[^>]*>(.*?)</th>", view.check_view.value)
    assert header[:5] == ["name", "analytic", "numeric", "torch", "|torch − analytic|"]


def test_torch_without_the_check_still_shows_its_table():
    pytest.importorskip("torch")
    trace = neuron()
    trace.options.torch, trace.options.no_check = True, True
    bundle = mimebundle(trace)
    assert "--no-check" in bundle["text/html"] and "|torch − analytic|" in bundle["text/html"]
    assert "agrees on all 6 gradients" in bundle["text/plain"]


def test_without_torch_the_option_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    trace = neuron()
    trace.options.torch = True
    bundle = mimebundle(trace)
    for page in (bundle["text/html"], bundle["text/plain"]):
        assert "pip install torch" in page and "gradmagic[torch]" in page
        assert "gradients match finite differences" in page  # the rest works
    (line,) = [ln for ln in bundle["text/plain"].splitlines() if "pip install torch" in ln]
    assert line.startswith("--torch: PyTorch is not installed")
    assert WIDGET_MIME in bundle


def check_module_torch():
    from gradmagic.analysis import torchcheck
    return torchcheck


def test_widget_static_and_text_views_agree_on_the_headline_and_show_arrays_on_one_line():
    np = pytest.importorskip("numpy")
    tensor = pytest.importorskip("gradmagic.core.tensor")
    W = tensor.Tensor([[0.5], [-0.3]], label="W")
    X = tensor.Tensor(np.linspace(-1, 1, 40).reshape(20, 2), label="X", requires_grad=False)
    L = ((X @ W) ** 2).mean()  # X (no gradient asked) and the 2 are constants
    L.label = "L"
    trace = traced(L)
    view = TraceWidget(trace, trace.check())
    head = render.headline(trace)
    assert head.endswith(f"({len(trace.nodes)} nodes, 1 input)") and len(trace.leaves) == 3
    bundle = mimebundle(trace)
    assert head in view.box.children[0].value and head in bundle["text/html"]
    assert bundle["text/plain"].splitlines()[0] == head
    assert "[[0.5], [-0.3]]" in view.table.value and "20×2 ‖·‖=" in view.table.value
    view.slider.value = view.slider.max
    assert "array(" not in view.backward_graph.value
    assert "W 2×1" in view.backward_graph.value
