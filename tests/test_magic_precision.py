"""float32 and float16 numbers under %%autograd: computed in their own precision, exactly as
plain numpy computes them (every value's dtype and bits), differentiated with gradients of
the input's dtype that agree with central differences of the same code in float64, and
checked with a step and tolerances fit for their precision."""

import numpy as np
import pytest

import gradmagic

from numeric import central

A = np.array([0.3, -1.2, 2.5])
M = np.array([[1.5, -0.4, 0.2], [0.3, 2.0, -0.7], [0.1, 0.6, 1.8]])
# how far a low-precision gradient may be from the float64 one (their rounding, not a rule's)
CLOSE = {np.float32: 1e-4, np.float16: 2e-2, np.float64: 1e-6}


def _in_float64(x):
    if isinstance(x, list):
        return [_in_float64(e) for e in x]
    return np.float64(x) if np.ndim(x) == 0 else np.asarray(x, dtype=np.float64)


def _plain(cell, data):
    ns = {"np": np, **{k: v.copy() for k, v in data.items()}}
    exec(cell, ns)
    return ns


def _reference(cell, data, name, path=()):
    """d L/d data[name] (at ``path`` inside it) by central differences of the cell in float64."""
    cell64 = cell.replace("float32", "float64").replace("float16", "float64")
    wide = {k: _in_float64(v) for k, v in data.items()}
    x = wide[name]
    for k in path:
        x = x[k]

    def loss(v):
        ns = {"np": np, **{k: _in_float64(e) for k, e in wide.items()}}
        if path:
            ns[name][path[0]] = v
        else:
            ns[name] = v if np.ndim(x) else np.float64(v)
        exec(cell64, ns)
        return float(ns["L"])

    return central(loss, np.array(x))


CASES = [
    ("L = np.sum(x * x)", {"x": A.astype(np.float32)}),
    ("L = np.sum(np.sin(h) * h) + h.var()", {"h": A.astype(np.float16)}),
    ("L = np.sum(np.tanh(x) * x.astype('float64'))", {"x": A.astype(np.float32)}),
    (
        "v = np.full(3, a[0], dtype=np.float32)\nL = (v * x).sum() + np.full(2, a[1]).sum()",
        {"a": A, "x": A.astype(np.float32)},
    ),
    (
        "L = a.sum().astype(np.float32) * x[1:2].item() + a.max().astype(np.float64)"
        " + x.astype(np.float16, copy=False).sum() + x.astype(np.float32, copy=False)[0]",
        {"a": A, "x": A.astype(np.float32)},
    ),
    ("L = np.sum(x * a) + np.mean(x**2) * a[0]", {"x": A.astype(np.float32), "a": A[::-1]}),
    (
        "y = a.astype('float32')\nL = np.sum(np.exp(y) * y) + np.float32(0.5) * y.max()",
        {"a": A},
    ),
    ("L = s * s + np.float32(2) * s + np.sqrt(s)", {"s": np.float32(0.7)}),
    (
        "L = np.linalg.norm(W @ W.T) + np.trace(np.linalg.inv(W + 3 * np.eye(3, dtype=np.float32)))",
        {"W": M.astype(np.float32)},
    ),
    (
        "y = np.float32(3.0) * x\nL = y * x + x * np.float32(2) + float(y) * np.float64(y)",
        {"x": np.float64(0.7)},
    ),
    ("L = float(np.float32(2.0) * x) * x + np.float16(x)", {"x": np.float64(1.5)}),
    ("L = np.float32(2) * x + x ** np.float16(3) - np.float32(1) / x", {"x": np.float64(1.5)}),
    (
        "w = x * 1.0\nw[0] = s\nw *= x\nL = w.sum() + np.tanh(w).max()",
        {
            "x": A.astype(np.float32),
            "s": np.float32(0.4),
        },
    ),
]


@pytest.mark.parametrize("cell, data", CASES)
def test_low_precision_inputs_are_differentiated_in_their_precision(cell, data):
    run = gradmagic.autograd(cell + "\nL")(np=np, **{k: v.copy() for k, v in data.items()})
    plain = _plain(cell, data)
    assert not run.trace.warnings and not run.trace.cut_notes
    assert np.asarray(run.value).dtype == np.asarray(plain["L"]).dtype and run.value == plain["L"]
    for name, x in data.items():
        g = run.grads[name]
        assert np.asarray(g).dtype == np.asarray(x).dtype and np.shape(g) == np.shape(x), name
        want = _reference(cell, data, name)
        np.testing.assert_allclose(g, want, rtol=CLOSE[np.asarray(x).dtype.type], atol=1e-4)
    for name, g in run.grads.items():  # every node's gradient in its own dtype (L's too)
        assert np.asarray(g).dtype == np.asarray(run.trace.values[name]).dtype, name
    report = run.check()
    assert report.rows and all(r.status == "pass" for r in report.rows), report.rows
    assert any("inputs are moved by" in n for n in report.notes), report.notes


@pytest.mark.parametrize("cell, data", CASES)
def test_a_low_precision_cell_leaves_what_plain_numpy_leaves(ip, cell, data):
    """Every name the cell binds: the same type, dtype and numbers (bit for bit) as plain."""
    ip.user_ns.update(np=np, **{k: v.copy() for k, v in data.items()})
    assert ip.run_cell("%%autograd -q\n" + cell).success
    plain = _plain(cell, data)
    for name in set(plain) - {"np", "__builtins__"}:
        got, want = ip.user_ns[name], plain[name]
        assert repr(got) == repr(want) and str(got) == str(want), name
        assert np.asarray(got).dtype == np.asarray(want).dtype, name
        assert np.array_equal(np.asarray(got), np.asarray(want), equal_nan=True), name


def test_float32_literals_and_arrays_in_a_list_are_inputs():
    cell = (
        "x = np.array([1.0, -2.0, 0.5], dtype=np.float32)\n"
        "L = np.sum(np.tanh(x) * x) + np.sum(ws[0] @ ws[1])"
    )
    ws = [M.astype(np.float32), M[::-1].astype(np.float32)]
    run = gradmagic.autograd(cell + "\nL")(np=np, ws=[w.copy() for w in ws])
    x = np.array([1.0, -2.0, 0.5])
    assert run.grads["x"].dtype == np.float32 and run.grads["ws[0]"].dtype == np.float32
    want = np.tanh(x) + x * (1 - np.tanh(x) ** 2)
    np.testing.assert_allclose(run.grads["x"], want, rtol=1e-5)
    data = {"ws": ws}
    for i in range(2):
        cell_w = "L = np.sum(ws[0] @ ws[1])"
        want = _reference(cell_w, data, "ws", (i,))
        np.testing.assert_allclose(run.grads[f"ws[{i}]"], want, rtol=1e-5)
    assert run.check().passed


@pytest.mark.parametrize("cell, data", CASES[:4])
def test_the_graph_replayed_and_torch_agree_in_low_precision(cell, data):
    """Where the code cannot be run again the check replays the graph, and --torch replays
    it in float64: both allow for the rounding of float32 and float16 numbers."""
    run = gradmagic.autograd(cell + "\nL")(np=np, **{k: v.copy() for k, v in data.items()})
    run.trace.rerun.problem = "it cannot here"
    report = run.check()
    assert report.rows and all(r.status == "graph" and r.abs_err <= r.bound for r in report.rows)
    assert not any(n.startswith("Replay mismatch") for n in report.notes), report.notes
    pytest.importorskip("torch")
    from gradmagic.analysis import torchcheck

    comparison = torchcheck.compare(run.trace)
    assert comparison.passed, comparison.verdict


def test_the_check_in_float32_still_sees_a_path_the_graph_missed():
    """The looser step and tolerance still fail a gradient that misses a path (tolist()
    leaves the graph: the code's slope is 3 more than the graph's for x[1]), and do not
    take it for a kink, though a step this long parts a smooth function's one-sided
    slopes."""
    cell = "L = np.sum(x * x) + x.tolist()[1] * 3"
    run = gradmagic.autograd(cell + "\nL")(np=np, x=A.astype(np.float32))
    report = run.check()
    assert any("inputs are moved by 0.0049" in n for n in report.notes), report.notes
    assert [r.status for r in report.rows if r.name == "x"] == ["fail"]
    assert not report.passed


def test_resize_of_an_array_node_is_plain_numpys(ip):
    """A float32 array the cell makes, and one an earlier cell made, resized in place."""
    ip.user_ns.update(np=np, d=np.arange(6, dtype=np.float32))
    assert ip.run_cell(
        "%%autograd -q\nd.resize((2, 3))\ne = np.arange(4.0)\ne.resize((2, 2))"
    ).success
    assert ip.user_ns["d"].shape == (2, 3) and ip.user_ns["e"].shape == (2, 2)
