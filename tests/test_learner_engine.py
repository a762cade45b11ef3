"""A learner's own autograd engine under the magic, against the plain code.

Each case is the learner's engine (written in a plain cell, in the magic cell itself, or
imported from the ``micrograd`` package), a plain set-up cell making its objects, and a
magic cell computing with them. The magic's gradients of the target's ``.data`` are
compared with central differences of the plain code (the set-up's objects' ``.data``
moved, the cell run plainly); the engine's own ``.grad`` values are judged against them
(``trace.claims``); the cell's output and the objects it leaves are compared with the
plain run's.
"""

import contextlib
import sys
import io

import numpy as np
import pytest

import gradmagic
from gradmagic.grade import _judge
from gradmagic.notebook import learner
from gradmagic.views.dot import to_dot
from gradmagic.views.tabs import payload
from gradmagic.views.widget import _analyses, static_bundle
from learner_engines import ARRAYS, MLP, NODES, SCALAR, buggy

pytestmark = pytest.mark.usefixtures("ip")

SCALAR_CELL = """e = a * b
d = e + c
f = Num(-2.0, label='f')
L = d * f + a ** 3 / b - (a + a).tanh() + (c * 0.5).exp()
L.backward()
print(L, a.grad)
L"""

CASES = {
    "notebook": (
        [SCALAR],
        "a = Num(2.0, label='a'); b = Num(-3.0, label='b')\nc = Num(0.5)",
        SCALAR_CELL,
    ),
    "defined in the cell": (
        [],
        "",
        SCALAR + "\na = Num(2.0, label='a')\nb = Num(-3.0)\nc = Num(0.5)\n" + SCALAR_CELL,
    ),
    # an engine that sets .grad before .data: setting data in __init__ is no training step
    "grad set first": (
        [
            SCALAR.replace(
                "        self.data = data\n        self.grad = 0.0\n",
                "        self.grad = 0.0\n        self.data = data\n",
            )
        ],
        "a = Num(2.0, label='a'); b = Num(-3.0, label='b')\nc = Num(0.5)",
        SCALAR_CELL,
    ),
    "micrograd": (
        ["from micrograd.engine import Value"],
        "a = Value(2.0); b = Value(-3.0); c = Value(0.5)",
        "L = (a * b + c) * a ** 2 - (a + a).relu() / b + (c - a * a).relu()\nL.backward()\nL",
    ),
    "numpy tensors": (
        [ARRAYS],
        "W = Tensor(np.array([[0.5, -1.0], [2.0, 0.25]]))\nx = Tensor(np.array([[1.0], [-2.0]]))",
        "h = W.dot(x).tanh()\nL = (h * h).sum()\nL.backward()\nL",
    ),
    "sorted_graph": (
        [NODES],
        "a = Node(2.0); b = Node(-3.0)",
        "c = a * b + a * a\ndifferentiate(c)\nc",
    ),
    "mlp": (
        [SCALAR, MLP],
        "random.seed(0)\nn = MLP(3, [4, 4, 1])\nxs = [[2.0, 3.0, -1.0], [3.0, -1.0, 0.5]]\nys = [1.0, -1.0]",
        "ypred = [n(x) for x in xs]\nloss = sum((yout - ygt) ** 2 for ygt, yout in zip(ys, ypred))\n"
        "for p in n.parameters():\n    p.grad = 0.0\nloss.backward()\nloss",
    ),
}


def plain(sources, cell, move=None):
    """The namespace, the value's ``.data`` and the output of ``cell`` run plainly after
    ``sources``; ``move`` = (path, index, h) moves one set-up number first."""
    ns = {"__builtins__": __builtins__, "__name__": "__main__"}
    for source in sources:
        exec(compile(source, "<plain>", "exec"), ns)
    if move is not None:
        path, index, h = move
        obj = eval(path, ns)
        if index is None:
            obj.data = obj.data + h
        else:
            obj.data = np.array(obj.data, dtype=float)
            obj.data[index] += h
    body, _, last = cell.rstrip().rpartition("\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(body, "<plain>", "exec"), ns)
        value = eval(compile(last, "<plain>", "eval"), ns)
    return ns, value, out.getvalue()


def numeric(sources, setup, cell, path, index=None):
    """d value.data / d path.data (one element) by central differences of the plain code."""
    x = eval(path, plain(sources + [setup], "0")[0]).data
    x = float(x if index is None else np.asarray(x)[index])
    h = 1e-6 * max(1.0, abs(x))
    up = plain(sources + [setup], cell, (path, index, h))[1].data
    down = plain(sources + [setup], cell, (path, index, -h))[1].data
    return float(np.sum(up) - np.sum(down)) / (2 * h)


def state(ns, names) -> list:
    """Every learner object the names reach, as (data, its type, grad, its type), sorted."""
    found = {}
    for v, _ in learner.paths(ns, names).values():
        for u in learner.learner_graph(v):
            found[id(u)] = u
    # (a set's order of parents is its objects' addresses: sums of gradients may add in
    # another order from run to run, plain or not, so gradients are kept to 12 digits)
    return sorted(
        (
            repr(np.asarray(u.data).tolist()),
            type(u.data).__name__,
            repr(np.round(np.asarray(u.grad, dtype=float), 12).tolist()),
            type(u.grad).__name__,
        )
        for u in found.values()
    )


def magic(ip, sources, setup, cell, capsys):
    for source in sources + [setup]:
        assert ip.run_cell(source).success
    capsys.readouterr()
    result = ip.run_cell(f"%%autograd -q\n{cell}")
    assert result.success, result.error_in_exec
    return gradmagic.last, capsys.readouterr().out


@pytest.mark.parametrize("case", list(CASES))
def test_a_correct_engine_passes_and_the_cell_is_plain(ip, case, capsys):
    sources, setup, cell = CASES[case]
    trace, out = magic(ip, sources, setup, cell, capsys)
    ns, value, plain_out = plain(sources + [setup], cell)
    assert out == plain_out
    assert trace.value == pytest.approx(float(np.sum(value.data)), rel=1e-12)
    names = [n for n in ns if not n.startswith("_")]
    assert state(ip.user_ns, names) == state(ns, names)
    claims = trace.claims
    assert claims is not None and claims.passed, claims.verdict
    assert len(claims.rows) >= 3 and not trace.warnings, trace.warnings
    checked = 0
    before = plain(sources + [setup], "0")[0]
    for row in claims.rows:  # the truth, against the plain code, for the set-up's objects
        try:
            eval(row.name, before)
        except Exception:
            continue  # an object the cell made
        grads = np.asarray(row.got, dtype=float).ravel()
        for k in range(min(grads.size, 3)):
            index = None if np.ndim(row.got) == 0 else np.unravel_index(k, np.shape(row.got))
            want = numeric(sources, setup, cell, row.name, index)
            assert grads[k] == pytest.approx(want, rel=1e-4, abs=1e-6), row.name
            checked += 1
    if not setup:  # the engine and its inputs written in the cell: the same function
        sources, setup, _ = CASES["notebook"]
        for name in ("a", "b"):
            want = numeric(sources, setup, SCALAR_CELL, name)
            assert trace.grads[name] == pytest.approx(want, rel=1e-4)
            checked += 1
    assert checked >= 2


def test_the_learners_names_name_the_inputs(ip, capsys):
    sources, setup, cell = CASES["mlp"]
    trace, _ = magic(ip, sources, setup, cell, capsys)
    path = "n.layers[0].neurons[1].w[2]"
    assert path in trace.grads and "n.layers[2].neurons[0].b" in trace.grads
    assert trace.grads[path] == pytest.approx(numeric(sources, setup, cell, path), rel=1e-4)
    assert trace.target.name == "loss"
    assert type(ip.user_ns["n"].layers[0].neurons[1].w[2].data) is float


BUGS = {
    # (bug, set-up, cell): each shows the bug on the named inputs
    "add_overwrites": ("a = Num(3.0, label='a')", "b = a + a\nb.backward()\nb", ["a"]),
    "tanh_derivative": (
        "x = Num(0.5, label='x'); w = Num(-1.5, label='w')",
        "o = (x * w + 0.25).tanh()\no.backward()\no",
        ["x", "w"],
    ),
    "pow_derivative": ("a = Num(1.5, label='a')", "y = a ** 3 * 2.0\ny.backward()\ny", ["a"]),
}


@pytest.mark.parametrize("bug", list(BUGS))
def test_a_planted_bug_is_caught_and_named(ip, bug, capsys):
    setup, cell, wrong = BUGS[bug]
    sources = [buggy(bug)]
    trace, _ = magic(ip, sources, setup, cell, capsys)
    ns, _, _ = plain(sources + [setup], cell)
    claims = trace.claims
    assert not claims.passed
    failed = {r.name: r for r in claims.rows if not r.ok}
    for name in wrong:
        row = failed[name]
        assert row.expected == ns[name].grad  # the learner's own number, as plain leaves it
        assert row.got == pytest.approx(numeric(sources, setup, cell, name), rel=1e-4)
    assert any(name in note for note in claims.notes for name in wrong)
    assert ip.user_ns[wrong[0]].grad == ns[wrong[0]].grad


def test_a_cell_that_does_not_call_backward_is_judged_and_left_as_plain(ip, capsys):
    sources = [buggy("add_overwrites")]
    setup, cell = "a = Num(3.0, label='a')", "b = a + a\nb"
    trace, _ = magic(ip, sources, setup, cell, capsys)
    assert not trace.claims.passed and trace.claims.rows[0].expected == 1.0
    assert any("did not call b.backward()" in n for n in trace.claims.notes)
    assert ip.user_ns["a"].grad == 0.0 and ip.user_ns["b"].grad == 0.0
    assert trace.grads["a"] == pytest.approx(2.0)


def test_the_view_shows_the_engines_gradients(ip, capsys):
    sources, setup, cell = [buggy("tanh_derivative")], *BUGS["tanh_derivative"][:2]
    for source in sources + [setup]:
        ip.run_cell(source)
    trace = ip.run_cell(f"%%autograd\n{cell}").result
    report, expected, _, problems = _analyses(trace)
    assert expected is trace.claims and not problems
    text = static_bundle(trace, report, expected=expected)["text/plain"]
    assert "your .grad" in text and "∂o/∂x" in text and "✗" in text


TRAIN_SETUP = (
    "random.seed(0)\nn = MLP(3, [4, 4, 1])\n"
    "xs = [[2.0, 3.0, -1.0], [3.0, -1.0, 0.5], [0.5, 1.0, 1.0], [1.0, 1.0, -1.0]]\n"
    "ys = [1.0, -1.0, -1.0, 1.0]"
)
FORWARD = (
    "ypred = [n(x) for x in xs]\nloss = sum((yout - ygt) ** 2 for ygt, yout in zip(ys, ypred))\n"
)
TRAIN = (
    "for k in range({steps}):\n"
    + "".join(f"    {line}\n" for line in FORWARD.splitlines())
    + "    for p in n.parameters():\n        p.grad = 0.0\n    loss.backward()\n"
    "    for p in n.parameters():\n        p.data += -0.1 * p.grad\n"
    "    print(k, loss.data)\nloss"
)


def test_the_lecture_training_loop_runs_unchanged_under_the_microscope(ip, capsys):
    sources, steps = [SCALAR, MLP], 6
    trace, out = magic(ip, sources, TRAIN_SETUP, TRAIN.format(steps=steps), capsys)
    ns, value, plain_out = plain(sources + [TRAIN_SETUP], TRAIN.format(steps=steps))
    losses = [float(line.split()[1]) for line in plain_out.splitlines()]
    assert [float(line.split()[1]) for line in out.splitlines()] == pytest.approx(losses, rel=1e-9)
    assert trace.steps == pytest.approx(losses, rel=1e-9) and len(losses) == steps
    assert losses[-1] < losses[0]
    assert trace.value == pytest.approx(losses[-1], rel=1e-9)
    assert any(f"trained {steps} steps" in note for note in trace.claims.notes)
    assert trace.claims.passed, trace.claims.verdict
    names = [k for k in ns if not k.startswith("_")]
    got, want = state(ip.user_ns, names), state(ns, names)
    assert [g[1::2] for g in got] == [w[1::2] for w in want]  # plain floats, as plain leaves
    assert [float(g[0]) for g in got] == pytest.approx([float(w[0]) for w in want], rel=1e-9)
    # the microscope is on the last step: the loss of its forward pass, from the
    # parameters it started with (the plain loop stopped one step earlier)
    before = TRAIN.format(steps=steps - 1).rpartition("\n")[0]
    for path in ("n.layers[0].neurons[1].w[2]", "n.layers[2].neurons[0].b"):
        want = numeric(sources, TRAIN_SETUP + "\n" + before, FORWARD + "loss", path)
        assert trace.grads[path] == pytest.approx(want, rel=1e-4, abs=1e-8), path


def test_a_step_on_the_magics_own_numbers_says_how_to_write_it(ip):
    assert ip.run_cell("w = [0.5, -1.0]").success
    result = ip.run_cell("%%autograd -q\nfor p in w:\n    p.data += -0.1 * p.grad\nsum(w)")
    error = result.error_in_exec
    assert isinstance(error, AttributeError) and "w[i] = w[i] - 0.1 * g" in str(error)
    assert ip.user_ns["w"] == [0.5, -1.0] and type(ip.user_ns["w"][0]) is float


def test_a_backward_that_raises_is_said_and_its_gradients_put_back(ip, capsys):
    end = "        for v in reversed(order):\n            v._backward()\n"
    assert SCALAR.count(end) == 1
    broken = SCALAR.replace(end, end + "        raise RuntimeError('half way')\n")
    trace, _ = magic(ip, [broken], "a = Num(3.0, label='a')", "b = a * 2.0 + a\nb", capsys)
    assert trace.grads["a"] == pytest.approx(3.0)
    assert not trace.claims.rows and "nothing compared" in trace.claims.verdict
    assert any("RuntimeError: half way" in note for note in trace.claims.notes)
    assert ip.user_ns["a"].grad == 0.0 and ip.user_ns["b"].grad == 0.0


def plotted(html: str, height: int = 90) -> list:
    """The numbers a loss plot (render.steps_svg) draws, read back from its points and
    its label's first and last values (the plot's range)."""
    ys = [float(p.split(",")[1]) for p in html.split('points="')[1].split('"')[0].split()]
    label = html.split('font-size="11">')[1].split("</text>")[0]
    first, last = (float(part.split(": ")[1]) for part in label.split(" → "))
    y0, y1 = ys[0], ys[-1]  # (a loss that falls all the way: the first step highest)
    return [first + (y - y0) * (last - first) / (y1 - y0) for y in ys]


def test_the_view_plots_the_plain_loops_loss_per_step(ip, capsys):
    sources, steps = [SCALAR, MLP], 5
    trace, _ = magic(ip, sources, TRAIN_SETUP, TRAIN.format(steps=steps), capsys)
    _, _, out = plain(sources + [TRAIN_SETUP], TRAIN.format(steps=steps))
    losses = [float(line.split()[1]) for line in out.splitlines()]
    assert sorted(losses, reverse=True) == losses  # (falls at each step: plotted() reads it)
    bundle = static_bundle(trace, None, expected=trace.claims)
    assert f"loss per step ({steps} steps)" in bundle["text/plain"]
    (tab,) = [t for t in payload(trace, expected=trace.claims)["tabs"] if t["id"] == "training"]
    for html in (bundle["text/html"].split("<b>Training</b>")[1], tab["payload"]["html"]):
        assert html.count("<polyline") >= 1
        span = losses[0] - losses[-1]
        assert plotted(html) == pytest.approx(losses, abs=span / 200 + 1e-3 * losses[0])


def test_a_wrong_backward_of_a_tensor_engine_names_its_worst_element(ip, capsys):
    right, wrong = "g * (1 - t ** 2)", "g * (1 - t)"
    sources = [ARRAYS.replace(right, wrong)]
    assert sources[0] != ARRAYS
    _, setup, cell = CASES["numpy tensors"]
    trace, _ = magic(ip, sources, setup, cell, capsys)
    ns, _, _ = plain(sources + [setup], cell)
    failed = {r.name: r for r in trace.claims.rows if not r.ok}
    assert {"W", "x"} <= set(failed)
    row = failed["W"]
    np.testing.assert_array_equal(row.expected, ns["W"].grad)  # their own numbers
    for k in range(4):
        index = np.unravel_index(k, (2, 2))
        want = numeric(sources, setup, cell, "W", index)
        assert row.got[index] == pytest.approx(want, rel=1e-4)
    assert "worst element" in row.note


def graded(sources, setup, cell, **options):
    return gradmagic.grade("\n".join(sources + [setup, cell]), None, **options)


@pytest.mark.parametrize("case", ["notebook", "micrograd", "numpy tensors", "sorted_graph"])
def test_grade_judges_a_correct_engines_grad_and_passes(case):
    sources, setup, cell = CASES[case]
    report = graded(sources, setup, cell, isolate=False)
    assert report.outcome == "pass" and len(report.rows) >= 3, str(report)
    before, checked = plain(sources + [setup], "0")[0], 0
    for row in report.rows:  # the expected numbers are the truth, from the plain code
        name = row.name.removesuffix(".grad")
        if name not in before:
            continue
        np.testing.assert_allclose(row.got, eval(name, plain(sources + [setup], cell)[0]).grad)
        index = None if np.ndim(row.expected) == 0 else (0,) * np.ndim(row.expected)
        want = numeric(sources, setup, cell, name, index)
        assert np.asarray(row.expected)[index or ()] == pytest.approx(want, rel=1e-4, abs=1e-6)
        checked += 1
    assert checked >= 2


@pytest.mark.parametrize("bug", list(BUGS))
def test_grade_fails_a_planted_bug_naming_the_node_with_both_numbers(bug):
    setup, cell, wrong = BUGS[bug]
    sources = [buggy(bug)]
    report = graded(sources, setup, cell, isolate=False)
    ns = plain(sources + [setup], cell)[0]
    assert report.outcome == "wrong" and not report.passed
    failed = {r.name: r for r in report.rows if not r.ok}
    assert {f"{name}.grad" for name in wrong} <= set(failed)
    for name in wrong:
        assert failed[f"{name}.grad"].got == ns[name].grad  # their number, as plain leaves it
        want = numeric(sources, setup, cell, name)
        assert failed[f"{name}.grad"].expected == pytest.approx(want, rel=1e-4)
        assert f"∂{cell.split()[0]}/∂{name}" in str(report)
    assert any("look at that backward" in note for note in report.notes)


def test_grade_judges_an_engine_in_the_sandbox_beside_the_answers():
    sources, setup, cell = CASES["micrograd"]
    report = graded(sources, setup, cell)
    assert report.sandbox["sandboxed"] and report.outcome == "pass", str(report)
    setup, cell, _ = BUGS["add_overwrites"]
    source = "\n".join([buggy("add_overwrites"), setup, cell])
    report = gradmagic.grade(source, {"b.data": 6.0}, feedback="verdicts")
    assert report.outcome == "wrong" and [r.ok for r in report.rows] == [True, False, True]
    assert report.rows[1].name == "a.grad" and report.rows[1].expected is None  # not shown
    text = str(report)
    assert "✗ a.grad: wrong" in text and "2.0" not in text


def _rows(report) -> list:
    return [(r.name, r.status, r.got, r.expected) for r in report.rows]


@pytest.mark.parametrize("bug", ["none", *BUGS])
def test_grade_judges_an_engine_in_the_students_module_as_one_in_the_cell(bug):
    setup, cell, wrong = BUGS[bug] if bug != "none" else (*CASES["notebook"][1:], [])
    engine = buggy(bug) if bug != "none" else SCALAR
    module = gradmagic.grade(
        f"from engine import Num\n{setup}\n{cell}", None, files={"engine.py": engine}
    )
    assert module.sandbox["sandboxed"], str(module)
    pasted = graded([engine], setup, cell, isolate=False)
    assert _rows(module) == _rows(pasted) and module.outcome == pasted.outcome
    assert module.outcome == ("pass" if not wrong else "wrong"), str(module)
    failed = {r.name: r for r in module.rows if not r.ok}
    assert set(failed) == {f"{name}.grad" for name in wrong} or bug == "tanh_derivative"
    ns = plain([engine, setup], cell)[0]
    for name in wrong:  # their number beside the truth, from the plain code
        assert failed[f"{name}.grad"].got == ns[name].grad
        want = numeric([engine], setup, cell, name)
        assert failed[f"{name}.grad"].expected == pytest.approx(want, rel=1e-4)
    assert not wrong or any("look at that backward" in note for note in module.notes)


def test_grade_runs_a_students_package_beside_the_cell_and_leaves_nothing(tmp_path):
    files = {"hw/engine.py": SCALAR, "hw/model.py": "from hw.engine import Num\n"}
    cwd, path = __import__("os").getcwd(), list(sys.path)
    report = gradmagic.grade(
        "from hw.model import *\nw = Num(0.5, label='w')\nL = (w * w).tanh()\nL.backward()\nL",
        None,
        isolate=False,
        files=files,
    )
    rows = {r.name: r for r in report.rows}
    assert report.outcome == "pass" and len(rows) == 3 and "L.grad" in rows, str(report)
    want = 2 * 0.5 * (1 - np.tanh(0.25) ** 2)  # d tanh(w²)/dw, by hand
    assert rows["w.grad"].got == pytest.approx(want, rel=1e-12)
    assert __import__("os").getcwd() == cwd and sys.path == path
    assert not any(m.startswith("hw") for m in sys.modules)
    for bad, error in [
        ({"../x.py": ""}, ValueError),
        ({"x.txt": ""}, ValueError),
        ({"/x.py": ""}, ValueError),
        ({"x.py": 3}, TypeError),
        ([1], TypeError),
    ]:
        with pytest.raises(error):
            gradmagic.grade("1.0", None, isolate=False, files=bad)


def test_grade_with_nothing_to_judge_says_so():
    report = gradmagic.grade("L = 2.0 * 3.0\nL", None, isolate=False)
    assert report.outcome == "error" and not report.passed
    assert "nothing to grade" in report.rows[0].note


def test_the_graph_draws_each_engine_grad_beside_the_true_one(ip, capsys):
    sources, (setup, cell, _) = [buggy("add_overwrites")], BUGS["add_overwrites"]
    trace, _ = magic(ip, sources, setup, cell, capsys)
    dot = to_dot(trace)
    ns = plain(sources + [setup], cell)[0]
    true = numeric(sources, setup, cell, "a")
    assert f"a|data 3|grad {true:.4g} · yours {ns['a'].grad:.4g} ✗" in dot
    assert "|grad 1 · yours 1 ✓" in dot  # b, the target


def test_an_engine_imported_in_the_cell_itself_holds_inputs(ip, capsys, tmp_path, monkeypatch):
    (tmp_path / "own_engine.py").write_text(SCALAR)  # found by its source, not imported first
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # the notebook's folder: the module is the learner's own
    monkeypatch.delitem(sys.modules, "own_engine", raising=False)
    cell = "from own_engine import Num\na = Num({x}, label='a')\nb = a * a + a ** 3 / 2\nb.backward()\nb"
    trace, _ = magic(ip, [], "", cell.format(x=0.5), capsys)
    assert trace.claims.passed and trace.target.name == "b"
    h = 1e-6
    up, down = (plain([], cell.format(x=0.5 + d))[1].data for d in (h, -h))
    assert trace.grads["a"] == pytest.approx((up - down) / (2 * h), rel=1e-6)
    assert ip.user_ns["a"].grad == pytest.approx(trace.grads["a"], rel=1e-12)


@pytest.mark.parametrize(
    "claims",
    [
        [],
        {"rows": {}},
        {"rows": [{"name": 5, "index": 0, "grad": 1.0, "true": 2.0}]},
        {"rows": [{"name": "a", "index": "0", "grad": 1.0, "true": 2.0}]},
        {"rows": [{"name": "a", "index": 0, "grad": "1", "true": 2.0}]},
        {"rows": [{"name": "a", "index": 0, "grad": 1.0, "true": 2.0, "disputed": 1}]},
        {"rows": [{"name": "a", "index": 0, "grad": 1.0, "true": 2.0}] * 10_001},
        {"rows": [], "notes": "a note"},
    ],
)
def test_grade_reads_forged_claims_as_a_crash_never_a_raise(claims):
    forged = {"status": "ran", "target": "b", "nodes": {}, "notes": [], "claims": claims}
    report = _judge(forged, [], "", 1e-5, 1e-3, 10, 1024)
    assert report.outcome == "crash" and not report.passed


def test_grade_judges_claims_in_the_grader_not_by_the_childs_verdict():
    row = {"name": "a\u2028✓ 9 of 9 correct", "index": 0, "grad": 1.0, "true": 2.0}
    forged = {"status": "ran", "target": "b", "nodes": {}, "notes": [], "claims": {"rows": [row]}}
    report = _judge(forged, [], "", 1e-5, 1e-3, 10, 1024)
    assert report.outcome == "wrong" and report.rows[0].status == "fail"
    assert str(report).startswith("✗ 0 of 1 correct") and "\u2028" not in str(report)


def test_the_view_draws_the_learners_own_graph_with_both_gradients(ip, capsys):
    """Their objects, labels and ops as their draw_dot draws them, each grad field the true
    gradient (central differences of the plain code) beside theirs; a hostile label is text."""
    import base64
    import math
    import re

    from gradmagic.views.render import own_dot, svg

    sources = [buggy("tanh_derivative")]
    setup = "x = Num(0.5, label='x<b>\"{|}</text>'); w = Num(-1.5, label='w')"
    cell = "n = x * w + 0.25; n.label = 'n'\no = n.tanh(); o.label = 'o'\no.backward()\no"
    trace, _ = magic(ip, sources, setup, cell, capsys)
    ns = plain(sources + [setup], cell)[0]
    own = trace.own_graph
    nodes = own["nodes"]
    assert nodes[0]["label"] == "o" and nodes[0]["op"] == "tanh"
    by_label = {n["label"]: k for k, n in enumerate(nodes)}
    assert {"o", "n", "w", 'x<b>"{|}</text>'} <= set(by_label)
    assert {"tanh", "+", "*"} <= {n["op"] for n in nodes}
    assert own["parents"][0] == [by_label["n"]]  # tanh's input is their n
    dot = own_dot(own)
    for name in ("x", "w"):
        true, theirs = numeric(sources, setup, cell, name), ns[name].grad
        assert abs(true - theirs) > 0.1  # (the planted bug shows on both)
        assert f"|grad {true:.4g} · yours {theirs:.4g} ✗}}" in dot
    target = f"|data {ns['o'].data:.4g}|grad 1 · yours 1 ✓}}"  # o: the seed, theirs and true
    assert target in dot and ns["o"].data == pytest.approx(math.tanh(-0.5))
    assert re.search(r"p0 \[[^\]]*label=\"tanh\"", dot) and f"u{by_label['n']} -> p0;" in dot
    tab = payload(trace)["tabs"][0]
    assert tab["id"] == "yours" and tab["kind"] == "picture" and tab["payload"]["dot"] == dot
    # top to bottom too, for an output too narrow for it: the same records, fields side by side
    down = tab["payload"]["dots"]["TB"]
    assert tab["payload"]["dots"]["LR"] == dot and "rankdir=TB" in down
    assert target.rstrip("}") in down and target not in down
    svg(down)  # (Graphviz lays it out)
    page = static_bundle(trace, None, expected=trace.claims)["text/html"]
    assert "Your graph" in page
    images = [base64.b64decode(u).decode() for u in re.findall(r"base64,([A-Za-z0-9+/=]+)", page)]
    drawn = next(image for image in images if "yours" in image)
    assert svg(dot) in drawn
    assert "x&lt;b&gt;&quot;{|}&lt;/text&gt;" in drawn and "<b>" not in drawn
