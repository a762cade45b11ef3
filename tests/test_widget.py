"""The live view's payload and the display bundle (gradmagic.views.widget), without a browser.

What the browser does with them (drawing, clicking, zooming, stepping) is in test_browser.py.
"""

import re
from pathlib import Path

import pytest

from gradmagic import Value
from gradmagic.analysis import check as check_module
from gradmagic.views import render, widget
from gradmagic.analysis.trace import Trace
from gradmagic.analysis.graph import backward_steps, grads_at, path_to_target  # noqa: F401
from gradmagic.views.widget import WIDGET_MIME, TraceWidget, mimebundle, payload

pytest.importorskip("anywidget")
ROOT = Path(__file__).resolve().parents[1]


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


import json


# --------------------------------------------------------------------------- the payload
def tab(data, id):
    (found,) = [t for t in data["tabs"] if t["id"] == id]
    return found


def bundle_of(trace):
    """The display: (the static copy published first, the returned widget bundle).

    The static copy carries the run's text (the widget's own ``text/plain`` is one line).
    """
    published = []
    bundle = mimebundle(trace, publish=published.append)
    assert len(published) == 1
    assert "\n" not in bundle["text/plain"]
    return published[0], bundle


def test_tabs_are_a_list_of_kinds_with_payloads():
    trace = neuron()
    data = payload(trace, trace.check())
    assert [(t["id"], t["kind"]) for t in data["tabs"]] == [
        ("graph", "graph"),
        ("gradients", "table"),
        ("check", "table"),
        ("backward", "backward"),
        ("forward", "steps"),
        ("walk", "steps"),
        ("paths", "steps"),
    ]  # the last three: #16
    assert json.loads(json.dumps(data)) == data  # JSON all the way
    inputs = [n for n in trace.leaves if not n.is_constant]  # not the 0.0
    assert f"all {len(inputs)} gradients match" in tab(data, "check")["payload"]["head"][0]
    assert data["target"] == trace.target.index and data["order"][0] == trace.target.index


def test_drawn_nodes_are_those_of_the_dot_without_folded_constants():
    trace = neuron()
    data = payload(trace)
    drawn = {int(i) for i in re.findall(r"^  v(\d+) \[", data["dot"], re.M)}
    assert drawn == {int(i) for i in data["nodes"]}
    zero = [n.index for n in trace.nodes if n.is_leaf and not n.label]
    assert zero and not set(zero) & drawn  # the 0.0 of x1 * 0.0 is folded into "*0"
    (times_zero,) = [e for e in data["nodes"].values() if e["op"] == "*0"]
    assert times_zero["parents"] == [trace.node("x1").index]


def test_a_node_explains_its_local_derivatives_and_incoming_gradient():
    trace = neuron()
    data = payload(trace)
    n = data["nodes"][str(trace.node("n").index)]
    assert n["local"]["items"][0].startswith("∂n/∂") and n["local"]["more"] == 0
    (child,) = [c for c in trace.nodes if trace.node("n").index in c.parents]
    assert n["incoming"]["items"] == [f"{render.fmt(child.grad, 6)} × 1 from (+)"]
    x1 = data["nodes"][str(trace.node("x1").index)]
    assert len(x1["incoming"]["items"]) == 2 and x1["local"]["items"] == []  # used twice, a leaf
    target = data["nodes"][str(trace.target.index)]
    assert "seed" in target["incoming"]["items"][0]


def test_rules_use_the_operands_names():
    x, y = Value(2.0, label="x"), Value(3.0, label="y")
    b = x + y  # the user's b is the sum: the rule must not say ∂(a+b)/∂b
    b.label = "b"
    L = b * 2.0
    L.label = "L"
    trace = traced(L)
    data = payload(trace)
    assert (
        data["nodes"][str(b.index if hasattr(b, "index") else trace.node("b").index)]["rule"]
        == "∂(x+y)/∂x = 1, ∂(x+y)/∂y = 1"
    )
    assert data["nodes"][str(trace.node("L").index)]["rule"] == "∂(b·2)/∂b = 2, ∂(b·2)/∂2 = b"


def test_every_rule_names_its_operands_even_with_braces_in_names_or_rule():
    # each rule is made a format template once; names are text, never format fields
    from gradmagic.core.ops import OPS
    from gradmagic.core.tensor_ops import TENSOR_OPS

    rules = [e.rule for e in [*OPS.values(), *TENSOR_OPS.values()] if getattr(e, "rule", "")]
    assert any("{" in r for r in rules)  # Σ_{j≤i}: a rule's own braces stay
    for rule in rules:
        # a raised letter (aᵇ) is written on the line (a^b), where a name can stand
        flat = rule.replace("ᵇ⁻¹", "^(b−1)").replace("ᵃ", "^a").replace("ᵇ", "^b")
        for names in ({"a": "w{0}", "b": "{b}"}, {"a": "x"}):
            by_hand = re.sub(
                r"(?<![A-Za-z_])([ab])(?![A-Za-z_])",
                lambda m: names.get(m.group(1), m.group(1)),
                flat,
            )
            made = widget._template(rule).format_map(widget._Letters(names))
            assert made == by_hand and "ᵇ" not in made


def test_explanations_are_capped():
    x = Value(1.5, label="x")
    total = Value(0.0, label="total")
    for _ in range(1000):
        total = total + x * 1.0
    trace = traced(total, bindings={"x": x, "total": total})
    data = payload(trace)
    entry = data["nodes"][str(trace.node("x").index)]
    assert len(entry["incoming"]["items"]) == widget.TERMS
    assert entry["incoming"]["more"] == 1000 - widget.TERMS
    grads = tab(data, "gradients")["payload"]
    assert len(grads["rows"]) == widget.TABLE_ROWS and "more nodes" in grads["note"]
    assert grads["rows"][0][0] == str(trace.target.index)
    assert "x" in [r[1] for r in grads["rows"]]  # the input is kept
    assert len(json.dumps(data)) < 1_000_000


def test_steps_carry_running_sums():
    a = Value(3.0, label="a")
    b = a + a
    b.label = "b"
    trace = traced(b)
    steps = tab(payload(trace), "backward")["payload"]
    assert steps["total"] == 1
    (step,) = steps["steps"]
    assert step["name"] == "b" and step["items"] == [
        ["a", "1", "1", "1", "1", 0],
        ["a", "1", "1", "1", "2", 1],
    ]
    a_index = str(trace.node("a").index)
    assert step["ev"] == [[int(a_index), "1", "p"], [int(a_index), "2", "f"]]


def test_steps_end_at_the_recorded_gradients():
    trace = neuron()
    steps = tab(payload(trace), "backward")["payload"]["steps"]
    assert [s["n"] for s in steps] == backward_steps(trace)
    final = {}
    for s in steps:
        for p, text, state in s["ev"]:
            final[p] = (text, state)
    for i, (text, state) in final.items():
        assert state == "f" and text == render.figure(trace.nodes[i].grad)


def test_steps_are_capped():
    x = Value(0.5, label="x")
    total = Value(0.0)
    for _ in range(1500):
        total = total + x * 0.5
    steps = tab(payload(traced(total)), "backward")["payload"]
    assert len(steps["steps"]) == widget.STEP_LIMIT and steps["total"] == 3000
    assert "first 2,000 of 3,000" in steps["note"]


def test_big_graphs_send_the_summary_nodes_only():
    x = Value(0.5, label="x")
    total = Value(0.0)
    for _ in range(300):
        total = total + x * 0.5
    trace = traced(total, bindings={"x": x})
    data = payload(trace)
    shown = set(render.summarise(trace).shown) - render.folded(trace)
    assert {int(i) for i in data["nodes"]} == shown
    assert "--max-nodes" in data["summary"]["note"]


def test_the_widget_keeps_no_trace():
    """A displayed run keeps its compact payload, not the graph."""
    import gc
    import weakref

    trace = neuron()
    view = TraceWidget(trace, trace.check())
    ref = weakref.ref(trace)
    del trace
    gc.collect()
    assert ref() is None and json.loads(view.data)["nodes"]
    view.close()


def loop_trace(n=200):
    x = Value(0.5, label="x")
    total = Value(0.0, label="total")
    for _ in range(n):
        total = total + x * 0.5
    return traced(total, bindings={"x": x, "total": total})


def test_the_live_view_defers_the_tabs_that_grow_with_the_graph():
    """Backward and the teaching tabs of a bigger run are made when first opened."""
    trace = loop_trace()
    assert trace.n > widget.EAGER_NODES
    view = TraceWidget(trace, trace.check())
    data = json.loads(view.data)
    kinds = {t["id"]: t["kind"] for t in data["tabs"]}
    assert kinds == {
        "graph": "graph",
        "gradients": "table",
        "check": "table",
        "backward": "deferred",
        "forward": "deferred",
        "walk": "deferred",
        "paths": "deferred",
    }
    assert all(t["payload"] is None for t in data["tabs"] if t["kind"] == "deferred")
    assert json.loads(view.opened) == {}
    # the browser asks with a custom message; the answer is kept in the widget's state
    view._on_msg(view, {"type": "open", "tab": "backward"}, [])
    opened = json.loads(view.opened)
    assert list(opened) == ["backward"]
    assert opened["backward"] == json.loads(json.dumps(tab(payload(trace), "backward")))
    for ident in ("forward", "walk", "paths"):
        made = view.open_tab(ident)
        assert made["kind"] == "steps" and made["payload"]["frames"]
    assert list(json.loads(view.opened)) == ["backward", "forward", "walk", "paths"]
    assert view.open_tab("backward") == opened["backward"]  # made once
    view.close()


def test_a_bigger_run_explains_a_node_when_it_is_selected():
    """The side panel's rule, local derivatives and incoming gradient of a bigger run are made
    when the browser asks for one node, and say what the whole payload says."""
    trace = loop_trace()
    view = TraceWidget(trace, trace.check())
    sent, whole = json.loads(view.data)["nodes"], payload(trace)["nodes"]
    assert sent.keys() == whole.keys()
    keys = ("rule", "local", "incoming")
    assert not any(k in entry for entry in sent.values() for k in keys)
    for i in (trace.target.index, trace.node("x").index, next(iter(sent))):
        view._on_msg(view, {"type": "open", "tab": f"node:{i}"}, [])
        told = json.loads(view.opened)[f"node:{i}"]
        assert {k: told[k] for k in keys} == {k: whole[str(i)][k] for k in keys}
    assert trace.node("x").index in {int(i) for i in sent}
    for wrong in ("node:-1", "node:x", f"node:{trace.n + 5}"):  # not a drawn node: said so
        assert "incoming" not in view.open_tab(wrong)
    view.close()


def test_a_page_without_the_view_closing_its_comm_does_not_cut_it_off():
    """Notebook 7's file page, connected to the same kernel, answers a new widget's comm_open
    with a comm_close (it has no widget manager): the view's own page must still reach it."""
    from comm import get_comm_manager

    trace = loop_trace()
    view = TraceWidget(trace, trace.check())
    manager = get_comm_manager()
    comm_id = view.comm.comm_id
    assert manager.get_comm(comm_id) is view.comm
    manager.comm_close(None, None, {"content": {"comm_id": comm_id, "data": {}}})
    assert manager.get_comm(comm_id) is view.comm  # still open: messages still arrive
    manager.comm_msg(
        None,
        None,
        {
            "content": {
                "comm_id": comm_id,
                "data": {"method": "custom", "content": {"type": "open", "tab": "backward"}},
            },
            "buffers": [],
        },
    )
    assert list(json.loads(view.opened)) == ["backward"]
    view.close()  # the kernel's own close does close it
    assert manager.get_comm(comm_id) is None


def test_a_small_run_sends_every_tab_at_once():
    trace = neuron()
    data = json.loads(TraceWidget(trace).data)
    assert "deferred" not in {t["kind"] for t in data["tabs"]}


def test_a_deferred_tab_of_a_run_no_longer_in_memory_says_so():
    import gc

    trace = loop_trace()
    view = TraceWidget(trace)
    del trace
    gc.collect()
    made = view.open_tab("walk")
    assert made["kind"] == "html" and "run the cell again" in made["payload"]["html"]
    view.close()


def test_the_front_end_is_in_the_package():
    js = (widget.STATIC / "widget.js").read_text()
    assert "render" in js and len(js) < 100_000
    import gzip

    viz = gzip.decompress((widget.STATIC / "viz.js.gz").read_bytes())  # sent as it is
    assert b"Graphviz" in viz[:400] and b"export" in viz[-200:]
    assert b'.wasm"' not in viz  # nothing to fetch: the wasm is inlined
    assert not (widget.STATIC / "viz.js").exists()  # one copy in the package


# --------------------------------------------------------------------------- the bundle
def test_mimebundle_publishes_a_static_copy_then_the_widget():
    trace = neuron()
    static, bundle = bundle_of(trace)
    assert set(bundle) == {WIDGET_MIME, "text/plain"}
    assert bundle[WIDGET_MIME]["model_id"]
    # one line beside the live view; the static copy has the run's text (what a terminal prints)
    assert bundle["text/plain"] == (
        "o = 0.707107  (13 nodes, 5 inputs)  ·  ✓ all 5 gradients match finite differences"
    )
    assert set(static) == {"text/html", "text/plain"}
    assert static["text/plain"].startswith("o = ") and "x1" in static["text/plain"]
    page = static["text/html"]
    assert '<img class="gradmagic-graph"' in page and "<svg" not in page  # survives sanitisers
    assert "<table" in page and "gradients match" in page
    # the copy hides itself beside its live view (its own style, keyed by the run's id)
    run = re.search(r'data-gm-run="([0-9a-f]+)"', page).group(1)
    assert render.static_style(run) in page
    assert json.loads(widget_model(bundle).data)["run"] == run
    whole = mimebundle(trace)  # no publisher: one bundle with all three
    assert set(whole) == {WIDGET_MIME, "text/html", "text/plain"}


def test_a_dot_slower_than_its_limit_leaves_the_view_and_one_line_about_it(monkeypatch, tmp_path):
    from gradmagic.views import drawing

    slow = tmp_path / "dot"  # a Graphviz that never answers
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setattr(drawing, "DOT_SECONDS", 0.2)
    monkeypatch.setattr(drawing.DotServer, "TIMEOUT", 0.2)
    static, bundle = bundle_of(neuron())  # no exception escapes the display
    assert bundle[WIDGET_MIME]["model_id"]  # the live view (drawn in the browser) is there
    page = static["text/html"]
    assert "Traceback" not in page and "gradmagic-graph" not in page  # no picture, and
    notes = re.findall(r"<p[^>]*>([^<]*took more than 0.2 s[^<]*)</p>", page)
    assert len(notes) == 1 and "\n" not in notes[0]  # one line says why
    assert "the tables below still show the run" in notes[0]
    assert "<table" in page and "gradients match" in page
    monkeypatch.undo()
    assert "<svg" in render.svg(render.to_dot(neuron()))  # the real dot draws again


def test_a_view_that_fails_is_one_line_not_a_traceback():
    from gradmagic.views import display

    def broken(trace, publish=None):
        raise KeyError("a bug\nwith lines")

    shown = display._shown(broken, neuron(), publish=None)
    assert list(shown) == ["text/plain"] and "\n" not in shown["text/plain"]
    assert shown["text/plain"].startswith("Trace: its view could not be shown (KeyError")


def test_the_static_copy_shows_the_live_gradients_table():
    x, w = Value(0.3, label="x"), Value(0.7, label="w")
    s = x
    for _ in range(400):  # 1,602 nodes: the inputs are far from the target
        s = (s * w + x) * 0.5
    static, bundle = bundle_of(traced(s))
    live = tab(json.loads(widget_model(bundle).data), "gradients")["payload"]
    section = static["text/html"].split("<b>Gradients</b>", 1)[1].split("</details>", 1)[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", section)[1:]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert len(cells) == len(live["rows"]) == widget.TABLE_ROWS
    drop = [c for c, name in enumerate(live["columns"]) if name in ("shape", "flags")]
    assert cells == [[v for c, v in enumerate(row) if c not in drop] for row in live["rows"]]
    labels = [row[1] for row in cells]
    assert labels[:1] == ["(target)"] and "x" in labels and "w" in labels  # the inputs
    assert live["note"] in section  # "and N more nodes"


def _picture(static) -> str:
    import base64

    uri = re.search(
        r'<img class="gradmagic-graph"[^>]*src="data:image/svg\+xml;base64,([^"]+)"',
        static["text/html"],
    ).group(1)
    return base64.b64decode(uri).decode()


@pytest.mark.parametrize("wrong, big", [(False, 0.0), (True, 0.0), (False, 1e17)])
def test_the_picture_drawn_before_the_check_shows_its_verdicts(wrong, big):
    # dot draws the graph while the check runs; a node the check fails is drawn red in both
    # the live view's DOT and the static picture, and a passing run's DOT (or one whose rows
    # are only unresolved: 1e17 + ...) is the checked one's
    import dataclasses
    from gradmagic.core.engine import _make_unary
    from gradmagic.core.ops import OPS

    tanh = (
        _make_unary(dataclasses.replace(OPS["tanh"], df=lambda x, out: 1.0 - out))
        if wrong
        else Value.tanh
    )
    x, y = Value(0.4, label="x"), Value(2.0, label="y")
    trace = traced(tanh(x) * y + x + big)
    if big:
        assert {r.status for r in trace.check().rows} == {"unresolved"}
    static, bundle = bundle_of(trace)
    data = json.loads(widget_model(bundle).data)
    live = data["dot"]
    way = "TB" if "rankdir=TB" in live else "LR"
    assert live == render.to_dot(trace, trace.check(), fold=render.Folded(trace), rankdir=way)
    assert set(data["dots"]) == {"LR", "TB"} and data["dots"][way] == live  # small: both ways
    assert (render.FILL["fail"] in live) is wrong
    assert (render.FILL["fail"] in _picture(static)) is wrong
    assert (trace.check().passed) is not wrong


def widget_model(bundle):
    from ipywidgets.widgets.widget import _instances

    return _instances[bundle[WIDGET_MIME]["model_id"]]


def test_one_graphviz_library_model_is_shared():
    first = widget_model(bundle_of(neuron())[1])
    second = widget_model(bundle_of(neuron())[1])
    assert first.lib is second.lib and len(first.lib.code) < 1_000_000


def test_without_anywidget_the_bundle_is_static(monkeypatch):
    def missing():
        raise ImportError("No module named 'anywidget'")

    monkeypatch.setattr(widget, "_classes", missing)
    published = []
    bundle = mimebundle(neuron(), publish=published.append)
    assert set(bundle) == {"text/html", "text/plain"} and not published


def test_no_check_option_skips_the_check(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("check must not run")

    monkeypatch.setattr(check_module, "check", boom)
    trace = neuron()
    trace.options.no_check = True
    static, bundle = bundle_of(trace)
    assert "--no-check" in static["text/html"] and "--no-check" in static["text/plain"]
    assert "skipped" in tab(json.loads(widget_model(bundle).data), "check")["payload"]["html"]


def test_a_check_that_cannot_run_does_not_break_the_display(monkeypatch):
    def broken(*args, **kwargs):
        raise TypeError("node #3 has no _replay method")

    monkeypatch.setattr(check_module, "check", broken)
    static, _ = bundle_of(neuron())
    assert "could not run" in static["text/plain"] and "_replay" in static["text/html"]
    assert "gradmagic-graph" in static["text/html"]


def test_without_dot_the_static_copy_has_tables_and_the_live_view_its_dot(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    trace = neuron()
    static, bundle = bundle_of(trace)
    assert "apt-get install graphviz" in static["text/html"]
    assert "<table" in static["text/html"] and "gradients match" in static["text/html"]
    assert json.loads(widget_model(bundle).data)["dot"].startswith("digraph gradmagic")


def test_trace_warnings_are_shown_in_every_view():
    x = Value(2.0, label="x")
    trace = traced(x * x, warnings=["line 3: float(x) cut the graph"])
    static, bundle = bundle_of(trace)
    assert "line 3: float(x) cut the graph" in json.loads(widget_model(bundle).data)["notes"]
    for page in (static["text/html"], static["text/plain"]):
        assert "line 3: float(x) cut the graph" in page


# --------------------------------------------------------------------------- answers and torch
def test_expected_answers_get_their_own_tab_first():
    trace = neuron()
    report = trace.check()
    answers = trace.expect({"x1": -1.5, "w1": 2.0, "nope": 0.0})
    view = TraceWidget(trace, report, expected=answers)
    data = json.loads(view.data)
    assert [t["id"] for t in data["tabs"]] == [
        "answers",
        "graph",
        "gradients",
        "check",
        "backward",
        "forward",
        "walk",
        "paths",
    ]
    assert view.tab == "answers"
    answers_tab = tab(data, "answers")["payload"]
    assert answers_tab["head"][0] == "✗ 1 of 3 correct"
    assert [r[0] for r in answers_tab["rows"]] == ["✓", "✗", "✗"]
    assert answers_tab["classes"] == ["ok", "fail", "fail"]
    assert "correct" not in " ".join(tab(data, "check")["payload"]["head"])
    assert TraceWidget(trace, report).tab == "graph"


def test_the_bundle_puts_answers_first_in_every_view():
    trace = neuron()
    trace.options.expect = {"x1": -1.5, "o.data": 0.7071067811865476, "w1": 5.0}
    static, _ = bundle_of(trace)
    page, text = static["text/html"], static["text/plain"]
    assert page.index("<summary><b>Answers</b></summary>") < page.index("<img")
    assert "✗ 2 of 3 correct" in page and "✗ 2 of 3 correct" in text
    assert text.index("Answers") < text.index("label")
    (w1,) = [ln for ln in text.splitlines() if "∂o/∂w1" in ln]
    assert w1.startswith("✗") and "5" in w1 and "-4" in w1  # expected, got, got − expected


def test_torch_adds_a_column_to_the_check():
    pytest.importorskip("torch")
    trace = neuron()
    trace.options.torch = True
    static, bundle = bundle_of(trace)
    for page in (static["text/html"], static["text/plain"]):
        assert "|torch − analytic|" in page and "agrees on all 6 gradients" in page
    columns = tab(json.loads(widget_model(bundle).data), "check")["payload"]["columns"]
    assert columns[:6] == ["name", "verdict", "analytic", "numeric", "torch", "|torch − analytic|"]


def test_the_check_table_puts_each_verdict_and_its_reason_beside_the_name():
    # a narrow output shows the verdict without scrolling sideways: second, in a column that
    # wraps, a failing row's reason with its mark, in the live table and the static copy
    import dataclasses
    from gradmagic.core.engine import _make_unary
    from gradmagic.core.ops import OPS

    bad = _make_unary(dataclasses.replace(OPS["tanh"], df=lambda x, out: 1.0 - out))
    x, y = Value(0.4, label="x"), Value(2.0, label="y")
    trace = traced(bad(x) * y + x)
    static, bundle = bundle_of(trace)
    check = tab(json.loads(widget_model(bundle).data), "check")["payload"]
    assert check["columns"][:2] == ["name", "verdict"] and check["wrap"] == [0, 1]
    verdicts = {row[0]: row[1] for row in check["rows"]}
    assert verdicts["x"].startswith("✗ fail") and verdicts["y"] == "✓ pass"
    assert check["classes"][[row[0] for row in check["rows"]].index("x")] == "fail"
    page = static["text/html"]
    assert page.index(">verdict<") < page.index(">analytic<") and "✗ fail" in page


def test_torch_without_the_check_still_shows_its_table():
    pytest.importorskip("torch")
    trace = neuron()
    trace.options.torch, trace.options.no_check = True, True
    static, _ = bundle_of(trace)
    assert "--no-check" in static["text/html"] and "|torch − analytic|" in static["text/html"]
    assert "agrees on all 6 gradients" in static["text/plain"]


def test_without_torch_the_option_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    trace = neuron()
    trace.options.torch = True
    static, bundle = bundle_of(trace)
    for page in (static["text/html"], static["text/plain"]):
        assert "pip install torch" in page and "gradmagic[torch]" in page
        assert "gradients match finite differences" in page  # the rest works
    (line,) = [ln for ln in static["text/plain"].splitlines() if "pip install torch" in ln]
    assert line.startswith("--torch: PyTorch is not installed")
    assert WIDGET_MIME in bundle


def test_tensor_nodes_have_short_records_and_full_values():
    np = pytest.importorskip("numpy")
    tensor = pytest.importorskip("gradmagic.core.tensor")
    W = tensor.Tensor([[0.5], [-0.3]], label="W")
    X = tensor.Tensor(np.linspace(-1, 1, 40).reshape(20, 2), label="X", requires_grad=False)
    L = ((X @ W) ** 2).mean()  # X (no gradient asked) and the 2 are constants
    L.label = "L"
    trace = traced(L)
    data = payload(trace, trace.check())
    head = render.headline(trace)
    assert head.endswith(f"({len(trace.nodes)} nodes, 1 input)") and data["headline"] == head
    x = data["nodes"][str(trace.node("X").index)]
    assert x["shape"] == "20×2" and x["data"].startswith("‖·‖ ")
    assert x["dataFull"].count("\n") >= 5 and "array(" not in x["dataFull"]  # the array itself
    w = data["nodes"][str(trace.node("W").index)]
    assert w["data"] == "[[0.5], [-0.3]]"
    rows = tab(data, "gradients")["payload"]["rows"]
    assert any("[[0.5], [-0.3]]" in r for r in rows) and any(
        "20×2 ‖·‖=" in c for r in rows for c in r
    )
    assert "**2" in data["dot"] and "grad 0" not in data["dot"].split("**2")[0][-200:]


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
    assert [s for i, s in enumerate(state) if i != trace.target.index] == ["unknown"] * (
        len(trace.nodes) - 1
    )
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


def test_the_live_view_is_an_anywidget_made_the_documented_way():
    """Its state carries the same module, styles and model names as an AnyWidget made the
    usual way (``_esm`` and ``_css`` naming the built files)."""
    import anywidget

    view = widget_model(bundle_of(neuron())[1])

    class Usual(anywidget.AnyWidget):
        _esm = widget.STATIC / "widget.js"
        _css = widget.STATIC / "widget.css"

    usual = Usual()
    try:
        ours, theirs = view.get_state(), usual.get_state()
        for key in (
            "_esm",
            "_css",
            "_model_name",
            "_model_module",
            "_model_module_version",
            "_view_name",
            "_view_module",
            "_view_module_version",
        ):
            assert ours[key] == theirs[key], key
        assert ours["_anywidget_id"] == "gradmagic.views.live.LiveView"
        assert "export" in ours["_esm"] and ours["_css"].strip()
    finally:
        usual.close()


def test_graphviz_travels_as_bytes_in_a_binary_buffer():
    """The library's module is sent as it is in the package (gzipped bytes), as a buffer of
    the comm message, not as text inside the JSON."""
    from ipywidgets.widgets.widget import _remove_buffers

    view = widget_model(bundle_of(neuron())[1])
    lib = view.lib
    assert lib.code == (widget.STATIC / "viz.js.gz").read_bytes()
    state, paths, buffers = _remove_buffers(lib.get_state())
    assert paths == [["code"]] and "code" not in state
    assert bytes(buffers[0]) == lib.code
    assert widget_model(bundle_of(neuron())[1]).lib is lib  # one library for every view


def test_the_front_end_stays_inside_its_element():
    """The built view never looks outside the element anywidget gives it: no document-wide
    queries, no notebook classes; window is listened to only while a drag lasts, and for keys
    while the view is shown (each key read only when it is inside the view)."""
    js = (widget.STATIC / "widget.js").read_text()
    for outside in ("document.querySelector", "jp-OutputArea", "data-gm-run", '.closest(".jp'):
        assert outside not in js, outside
    sources = {p.name: p.read_text() for p in (ROOT / "js" / "src").glob("*.js")}
    adds = [name for name, text in sources.items() if "window.addEventListener" in text]
    assert sorted(adds) == ["graphview.js", "liveview.js"]
    assert "destroy()" in sources["graphview.js"] and "abort()" in sources["graphview.js"]
    live = sources["liveview.js"]
    assert live.count("window.addEventListener") == 1 and "this.root.contains(e.target)" in live
    assert 'window.removeEventListener("keydown", this.keydown, true)' in live


def test_the_gradients_table_sorts_numbers_by_magnitude_and_sends_keys_only_for_arrays():
    """Numbers are sorted by the front-end from the text shown; an array's or a big int's
    row carries its magnitude (the largest |element|; the text alone cannot give it)."""
    import numpy as np
    from gradmagic.core.tensor import Tensor

    W = Tensor(np.array([[1.0, -2.0], [3.0, 0.5]]), label="W")
    x = Value(-3.0, label="x")
    n = Value(10**20, label="n")
    loss = (W * x).sum() + n * 1e-20 + x * x
    trace = traced(loss, bindings={"W": W, "x": x, "n": n})
    grads = tab(payload(trace), "gradients")["payload"]
    assert grads["magnitude"] == [4, 5] and grads["descending"] == [0, 4, 5]
    rows = {r[1]: k for k, r in enumerate(grads["rows"])}
    keys = {int(k): v for k, v in json.loads(json.dumps(grads["keys"])).items()}
    assert rows["W"] in keys and rows["n"] in keys and rows["x"] not in keys
    assert keys[rows["W"]][4] == 3.0  # its largest |element|
    assert keys[rows["n"]][4] == pytest.approx(1e20)
    assert len(keys) < len(grads["rows"])


def test_flags_read_from_the_columns_in_both_wordings():
    """The live table says what a flag means; the static and text tables say it short."""
    a = Value(0.0, label="a")
    b = Value(float("inf"), label="b")
    r = a.relu()
    r.label = "r"
    loss = r + b * 2.0
    loss.label = "loss"
    trace = traced(loss, bindings={"a": a, "b": b, "r": r})
    rows = [trace.node(name).index for name in ("r", "b", "a")]
    live = {r[1]: r[6] for r in tab(payload(trace), "gradients")["payload"]["rows"]}
    assert live["r"] == "kink: a subgradient was used"
    assert live["b"] == "nan or infinite" and live["a"] == ""
    assert render.flags_text(trace, rows, {}) == ["kink", "non-finite", ""]
    assert render.flags_text(trace, rows, {rows[2]: "fail"}) == [
        "kink",
        "non-finite",
        "check: fail",
    ]
    assert render.flags_text(trace, [], {}) == []


def _contrast(a: str, b: str) -> float:
    def lum(h):
        rgb = [int(h[k : k + 2], 16) / 255 for k in (1, 3, 5)]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_every_text_colour_reads_at_wcag_aa_contrast():
    """Text colours of the live view's style sheet and of the drawn graphs: 4.5:1 or more on
    white and on the light fills text sits on."""
    from gradmagic.views import teaching_parts

    css = (widget.STATIC / "widget.css").read_text()
    colours = set()
    for rule in re.findall(r"\{([^}]*)\}", css):
        for prop, value in re.findall(r"(?<![-\w])(color|fill)\s*:\s*(#[0-9a-fA-F]{6})", rule):
            if prop == "color" or "text" in css[: css.find(rule)].rsplit("}", 1)[-1]:
                colours.add(value.lower())
    colours |= {teaching_parts._GREY, "#4b5563"}
    assert "#9ca3af" not in colours and colours
    for colour in colours:
        for ground in ("#ffffff", "#f3f4f6", "#dbeafe", "#fde68a", "#e5e7eb"):
            assert _contrast(colour, ground) >= 4.5, (colour, ground)


def test_a_green_tick_only_where_a_gradient_was_checked():
    # inf * y: the only row is flagged (no slope can be measured), so nothing passed a
    # comparison; the one-line text must not show a tick
    x, y = Value(float("inf"), label="x"), Value(3.0, label="y")
    trace = traced(x * y)
    report = trace.check()
    assert report.passed and len(report.flagged) == len(report.rows) == 2
    line = widget.one_line(trace, report)
    assert "⚠" in line and "✓" not in line
    fine = traced(Value(2.0, label="a") * Value(3.0, label="b"))
    assert "✓" in widget.one_line(fine, fine.check())


def test_a_constants_undefined_gradient_is_flagged_wherever_it_is_shown(ip):
    import gradmagic

    # d/dc (x - y)**c at a negative base has no real value: the 2's gradient is nan
    ip.run_cell("%%autograd -q --no-check\nx = 1.0\ny = 4.0\nloss = (x - y)**2 + x\nloss")
    trace = gradmagic.last
    (two,) = [n for n in trace.nodes if n.is_constant and n.data == 2]
    assert two.grad != two.grad  # nan, and no input's gradient is
    assert all(n.grad == n.grad for n in trace.nodes if not n.is_constant)
    flags = render.flags_text(trace, range(trace.n), {})
    assert flags[two.index] == render.UNDEFINED
    assert [f for i, f in enumerate(flags) if f and i != two.index] == []
    data = payload(trace, None)
    rows = tab(data, "gradients")["payload"]["rows"]
    (row,) = [r for r in rows if r[0] == str(two.index)]
    assert render.UNDEFINED in row[-1]
    assert f" v{two.index} [" not in render.to_dot(trace)  # drawn as micrograd does: one **2
    assert render.UNDEFINED in render.static_html(trace)
