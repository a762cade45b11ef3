"""The check's judge is the code: the cell (or function) run again plainly at moved inputs.

A path the recording misses changes the code's value and not the graph's, so the check must
say "disagree", never tick; a re-run must leave nothing behind; a cell that reaches outside
is not re-run and gets no tick; every engine's run answers ``check()`` with one report type.
"""

import hashlib
import os
import pickle
import sys
import textwrap

import numpy as np
import pytest

import gradmagic
from gradmagic.analysis.check import CheckReport
from gradmagic.notebook import session


def central(f, x: float, eps: float = 1e-6) -> float:
    return (f(x + eps) - f(x - eps)) / (2 * eps)


STABLE_SIGMOID = """
import numpy as np

def sigmoid(x):
    pos = x >= 0
    z = np.zeros_like(x)
    z[pos] = np.exp(-x[pos])
    z[~pos] = np.exp(x[~pos])
    top = np.ones_like(x)
    top[~pos] = z[~pos]
    return top / (1 + z)
"""


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    """A folder on sys.path holding ``stable.py`` (a library the magic does not follow)."""
    (tmp_path / "stable.py").write_text(STABLE_SIGMOID)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("stable", None)


def _run(ip, source, setup=""):
    if setup:
        assert ip.run_cell(textwrap.dedent(setup)).success
    result = ip.run_cell("%%autograd -q\n" + textwrap.dedent(source))
    assert result.success, result.error_in_exec
    return session.last


# cells whose value depends on an input by a path the recording cannot see, with the plain
# function of that input that the cell computes
SILENT_CUTS = {
    "json round trip": (
        "import json\nL = json.loads(json.dumps(a)) * a + a\nL",
        lambda a: __import__("json").loads(__import__("json").dumps(a)) * a + a,
    ),
    "text round trip": ("L = float(str(a)) * a\nL", lambda a: float(str(a)) * a),
    "struct round trip": (
        "import struct\nL = struct.unpack('d', struct.pack('d', a))[0] + a * a\nL",
        lambda a: a + a * a,
    ),
    "decimal helper": (
        "from decimal import Decimal\nL = float(Decimal(a) * 3) + a\nL",
        lambda a: 4 * a,
    ),
}


@pytest.mark.parametrize("name", sorted(SILENT_CUTS))
def test_a_path_the_graph_misses_is_red_and_the_numeric_is_the_codes(ip, name):
    source, plain = SILENT_CUTS[name]
    trace = _run(ip, source, "a = 0.7")
    report = trace.check()
    assert isinstance(report, CheckReport) and report.oracle == "code"
    assert not report.passed, report.verdict
    row = next(r for r in report.rows if r.name == "a")
    assert row.status == "fail"
    assert row.numeric == pytest.approx(central(plain, 0.7), rel=1e-5)
    assert any("missing from the graph" in n for n in report.notes)


# cells where an input reaches the target only by a path the recording cannot see: the
# graph has no node for it, so only moving what the graph leaves out shows the cut
WHOLLY_CUT = {
    "json round trip": (
        "import json\na = 0.5\nb = 2.0\nL = json.loads(json.dumps(b)) * a\nL",
        lambda b: __import__("json").loads(__import__("json").dumps(b)) * 0.5,
        "(b)",
    ),
    "statistics helper": (
        "import statistics\nxs = [1.0, 2.5, 4.0]\nc = 1.5\nL = statistics.fmean(xs) * c\nL",
        None,
        "3 inputs",
    ),
}


@pytest.mark.parametrize("name", sorted(WHOLLY_CUT))
def test_an_input_the_graph_never_met_is_red(ip, name):
    source, plain, said = WHOLLY_CUT[name]
    report = _run(ip, source).check()
    assert not report.passed and report.oracle == "code", report.verdict
    row = next(r for r in report.rows if "outside the graph" in r.name)
    assert row.status == "fail" and row.got == 0.0 and said in row.name
    assert any("inputs the graph never reached" in n for n in report.notes)
    if plain is not None:  # one number moved by 0.5 to 1.5 eps: the plain code's slope, so scaled
        assert 0.5 <= abs(row.numeric / central(plain, 2.0)) <= 1.5


def test_numbers_outside_the_graph_that_change_nothing_leave_the_tick(ip):
    """Unused numbers, a count made an int, a printed one: the target does not move with
    them, and no row is added for them."""
    source = (
        "n = 3.0\nunused = 7.5\nprint(unused)\nw = 0.5\nL = sum(w * k for k in range(int(n)))\nL"
    )
    report = _run(ip, source).check()
    assert report.passed and report.oracle == "code", report.verdict
    assert not any("outside the graph" in r.name for r in report.rows)


def test_an_imported_library_writing_into_plain_arrays_is_caught(ip, module_dir):
    x0 = np.array([-1.5, -0.3, 0.4, 2.0])
    ip.user_ns["x"] = x0.copy()
    trace = _run(
        ip, "L = np.sum(sigmoid(x) + x)\nL", "import numpy as np\nfrom stable import sigmoid"
    )
    report = trace.check()
    assert not report.passed and report.oracle == "code"
    assert {r.status for r in report.rows} == {"fail"}

    def plain(v):
        return float(np.sum(1 / (1 + np.exp(-v)) + v))

    truth = np.array([central(lambda t, k=k: plain(x0 + t * np.eye(4)[k]), 0.0) for k in range(4)])
    # a student's right answer is judged right (against the code), a graph-like one wrong
    assert trace.expect({"x": truth}).passed
    assert not trace.expect({"x": np.ones(4)}).passed
    assert np.array_equal(ip.user_ns["x"], x0)  # the re-runs left the user's array alone


def test_a_right_cell_passes_against_its_code(ip):
    trace = _run(ip, "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f\nL")
    report = trace.check()
    assert report.passed and report.oracle == "code", report.verdict
    assert {r.name for r in report.rows} == {"a", "b", "c", "f"}


@pytest.mark.parametrize("reads_back", [False, True])
def test_every_check_of_a_run_starts_from_the_state_the_cell_started_from(ip, reads_back):
    # a cell that grows a list it reads gives other values when re-run in one process: each
    # re-run must still see the list as the recorded run did, at every check asked
    grow = "seen.append(a)\n" if reads_back else ""
    trace = _run(ip, f"{grow}L = a * a * len(seen) + b\nL", "seen = [0]\na = 1.5\nb = 2.0")
    count = len(ip.user_ns["seen"])
    for eps in (None, 1e-5):
        report = trace.check(eps)
        assert report.passed and report.oracle == "code", report.verdict
        grads = {r.name: r.numeric for r in report.rows if r.index is not None}
        assert grads == {"a": pytest.approx(3.0 * count, rel=1e-6), "b": pytest.approx(1.0)}
    assert len(ip.user_ns["seen"]) == count


@pytest.mark.skipif(sys.platform != "linux", reason="finds processes in /proc")
def test_closing_the_re_runs_leaves_no_process_behind(ip):
    # the process that ran the points is the zygote's child: ended and reaped by it, not
    # left to whoever adopts orphans (which, in a container, may never reap them)
    trace = _run(ip, "L = a * a\nL", "a = 2.0")
    assert trace.check().passed
    zygote = trace.rerun.zygote._process.pid
    workers = _children(zygote)
    assert workers
    trace.rerun.close()
    assert not [pid for pid in (zygote, *workers) if os.path.exists(f"/proc/{pid}")]


def _children(parent: int) -> list:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(pid))
    return found


def test_a_cell_that_writes_a_file_is_not_run_again_and_gets_no_tick(ip, tmp_path):
    out = tmp_path / "log.txt"
    trace = _run(
        ip,
        f"with open({str(out)!r}, 'a') as fh:\n    fh.write('x')\nL = a * a\nL",
        "a = 3.0",
    )
    report = trace.check()
    assert not report.passed and report.oracle == "graph"
    assert {r.status for r in report.rows} == {"graph"}
    assert "opens" in report.notes[0] and "not run again" in report.notes[0]
    assert out.read_text() == "x"  # written once, by the cell itself


def _digest(obj) -> str:
    return hashlib.sha256(pickle.dumps(obj)).hexdigest()


def test_re_runs_leave_the_state_the_recorded_run_left(ip):
    setup = """
    import heapq, random
    random.seed(3)
    heap = [5.0, 1.0, 3.0]
    heapq.heapify(heap)
    log = []
    class Counter:
        calls = 0
    w = 0.5
    """
    cell = """
    Counter.calls += 1
    heapq.heappush(heap, w * 2)
    log.append(random.random())
    w = w * 1.5
    L = w * heap[0] + log[-1]
    L
    """
    trace = _run(ip, cell, setup)
    ns = ip.user_ns
    kept = _digest((ns["heap"], ns["log"], ns["w"], ns["Counter"].calls, ns["L"]))
    rnd = ns["random"].getstate()
    report = trace.check()
    assert report.oracle == "code" and report.passed, report.verdict
    assert _digest((ns["heap"], ns["log"], ns["w"], ns["Counter"].calls, ns["L"])) == kept
    assert ns["random"].getstate() == rnd
    assert ns["w"] == 0.75 and ns["Counter"].calls == 1
    # a plain cell after it, and the magic again, see the same state
    assert ip.run_cell("after = (len(log), len(heap), Counter.calls)").success
    assert ns["after"] == (1, 4, 1)
    _run(ip, cell)
    assert ns["Counter"].calls == 2 and len(ns["log"]) == 2


def test_printing_in_a_re_run_reaches_nobody(ip, capsys):
    trace = _run(ip, "print('once')\nL = a * 3.0\nL", "a = 1.0")
    capsys.readouterr()
    assert trace.check().passed
    assert capsys.readouterr().out == ""


def test_every_engine_answers_check_with_one_report_type(ip):
    scalar = _run(ip, "a = 2.0\nL = a * a\nL")
    arrays = _run(ip, "L = np.sum(np.tanh(W) * 2)\nL", "import numpy as np\nW = np.ones((2, 3))")

    def f(w, b):
        return (w * 2.0 + b - 1.0) ** 2

    function = gradmagic.autograd(f)(w=0.5, b=-1.0)
    for run in (scalar, arrays, function):
        report = run.check()
        assert isinstance(report, CheckReport) and report.passed and report.oracle == "code"


def test_pytorch_runs_answer_check_too_a_1x1_target_included(ip):
    torch = pytest.importorskip("torch")
    ip.run_cell("import torch\ntorch.manual_seed(0)\nx = torch.randn(1, 27)")
    ip.user_ns["W"] = torch.randn(27, 1, requires_grad=True)
    result = ip.run_cell("%%autograd -q\nx @ W")
    assert result.success
    run = gradmagic.last
    assert run is not None and run.value == pytest.approx(
        float((ip.user_ns["x"] @ ip.user_ns["W"]).item())
    )
    report = run.check()
    assert isinstance(report, CheckReport) and report.passed and report.oracle == "ops"

    def g(W):
        return (ip.user_ns["x"] @ W).tanh().sum()

    report = gradmagic.autograd(g)(W=torch.randn(27, 1, requires_grad=True)).check()
    assert isinstance(report, CheckReport) and report.passed


def test_the_re_runs_keep_to_a_time_budget_and_say_what_they_left(ip):
    # 40 inputs, each plain run sleeping 20 ms: moving each one alone would take 1.6 s, past
    # the budget; the direction through all of them still runs, and the report says so
    trace = _run(
        ip,
        "time.sleep(0.02)\nL = sum(w * w for w in ws)\nL",
        "import time\nws = [0.1 * k for k in range(1, 41)]",
    )
    report = trace.check()
    assert report.oracle == "code" and report.passed, report.verdict
    alone = [r for r in report.rows if r.index is not None]
    assert 0 < len(alone) < 40
    assert any(r.index is None and r.count == 40 for r in report.rows)
    assert any("not moved one by one" in n for n in report.notes)
    assert all(r.expected == pytest.approx(2 * trace.node(r.name).data, rel=1e-4) for r in alone)


HOSTILE_RERUNS = {  # a cell that behaves otherwise when it is run again, and what is said
    "ends its process": ("os._exit(3)", "ended its process"),
    "exits": ("sys.exit(0)", "SystemExit"),
    "signals the kernel": ("os.kill(KERNEL, signal.SIGTERM)", "calls os.kill"),
    "forks": ("os.fork()", "calls os.fork"),
    "computes something else": ("a = a * a", "does not compute the same thing twice"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_RERUNS))
def test_a_cell_that_behaves_otherwise_when_run_again_gets_no_tick(ip, name):
    act, said = HOSTILE_RERUNS[name]
    ip.user_ns.update(KERNEL=os.getpid(), a=1.5)
    trace = _run(ip, f"import os, sys, signal\nif os.getpid() != KERNEL:\n    {act}\nL = a * a\nL")
    report = trace.check()
    assert not report.passed and report.oracle == "graph"
    assert said in report.notes[0], report.notes
    assert os.getpid() == ip.user_ns["KERNEL"] and ip.user_ns["a"] == 1.5


def test_a_pytorch_run_has_the_same_face_as_every_run():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    X, y = torch.randn(8, 3), torch.randn(8, 1)

    def mse(net, X, y):
        return ((net(X) - y) ** 2).mean()

    run = gradmagic.autograd(mse)(net, X, y)
    assert run.value == pytest.approx(float(mse(net, X, y)))
    layer = run.grads_of("net")
    np.testing.assert_array_equal(layer["0"]["weight"], run.grads["net.0.weight"])
    assert isinstance(run.check(), CheckReport) and run.check().passed


def test_a_file_an_earlier_cell_opened_is_not_written_by_a_re_run(ip, tmp_path):
    # fh.write raises no audit event: the re-run's descriptors open for writing go nowhere
    out = tmp_path / "log.txt"
    ip.user_ns["fh"] = open(out, "w")
    try:
        trace = _run(ip, "fh.write('x')\nfh.flush()\nL = a * a\nL", "a = 2.0")
        report = trace.check()
        assert report.oracle == "code" and report.passed, report.verdict
    finally:
        ip.user_ns["fh"].close()
    assert out.read_text() == "x"  # once, by the cell itself


TRAINING = """
w = [0.5, -0.3]
xs = [(1.0, 2.0), (2.0, -1.0)]
ys = [1.0, -1.0]
for step in range(4):
    loss = sum((w[0] * a + w[1] * b - y) ** 2 for (a, b), y in zip(xs, ys))
    loss.backward()
    w = [wi - 0.05 * wi.grad for wi in w]
loss
"""


def test_a_training_loop_on_the_magics_numbers_plots_its_steps_and_ticks_nothing_refuted(ip):
    """Each step's .grad is a plain number the next step reads: the graph's gradient holds
    it fixed (the last step's), the code's runs through every update. The check says so and
    compares with the graph, never a red row over a right last-step gradient."""
    trace = _run(ip, TRAINING)
    w, losses = [0.5, -0.3], []
    data = list(zip([(1.0, 2.0), (2.0, -1.0)], [1.0, -1.0]))
    for _ in range(4):
        losses.append(sum((w[0] * a + w[1] * b - y) ** 2 for (a, b), y in data))
        r = [w[0] * a + w[1] * b - y for (a, b), y in data]
        g = [sum(2 * rk * x[k] for rk, (x, _) in zip(r, data)) for k in (0, 1)]
        w = [wi - 0.05 * gi for wi, gi in zip(w, g)]
    assert trace.steps == pytest.approx(losses, rel=1e-12) and trace.trained
    report = trace.check()
    assert report.oracle == "graph" and report.mark not in ("✓", "✗") and not report.passed
    assert not any(r.status == "fail" for r in report.rows)
    assert any("the cell trains" in n for n in report.notes)
    # a single backward() on the target itself is no training: the code still judges
    single = _run(ip, "a = 2.0\nb = -3.0\nL = a * b\nL.backward()\nL").check()
    assert single.passed and single.oracle == "code"


def test_an_array_the_graph_never_met_is_red_not_a_zero(ip):
    """An array input read by a library that computes outside the graph: its gradient is
    not shown as a silent zero; the check moves it and fails."""
    ip.user_ns["x"] = np.array([0.5, -1.5, 2.0])
    source = "import json\nL = np.sum(np.array(json.loads(json.dumps(x.tolist()))) ** 2)\nL"
    report = _run(ip, source, "import numpy as np").check()
    assert not report.passed and report.oracle == "code", report.verdict
    row = next(r for r in report.rows if "outside the graph" in r.name)
    assert row.status == "fail" and "x" in row.name
