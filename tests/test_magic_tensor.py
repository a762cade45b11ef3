"""%%autograd on numpy arrays: tensor leaves, numpy functions that keep the graph, views' data.

Run through a real IPython shell, as tests/test_magic.py does.
"""

import math

import numpy as np
import pytest

import gradmagic
from gradmagic.core.engine import Value
from gradmagic.core.array import Array, Scalar64
from gradmagic.core.tensor import Tensor
from numeric import central


def array_node(x) -> bool:
    """True for what the magic makes of a float array: an ndarray (float64) that is a node."""
    return type(x) in (Array, Scalar64) and isinstance(x, (np.ndarray, np.float64))


RUNTIME_NAMES = ("_runtime", "labelled(", "literal(", "leaf(", "changing(", "\\x00", "\x00")


def autograd(ip, body, options="-q"):
    """Run ``%%autograd options`` over ``body``; returns the ExecutionResult."""
    return ip.run_cell(f"%%autograd {options}\n{body}")


def plain(ip, source):
    """Run ``source`` as a plain cell (must succeed)."""
    assert ip.run_cell(source).success


def run_plain(source, ns):
    """``source`` run as plain Python in a copy of ``ns``; returns the namespace."""
    ns = dict(ns)
    exec(compile(source, "<plain>", "exec"), ns)
    return ns


DATA = (
    "import numpy as np\nrng = np.random.default_rng(0)\nN = 20\n"
    "X = rng.normal(size=(N, 2))\nY = X @ np.array([[1.5], [-2.0]]) + 0.3 * rng.normal(size=(N, 1))"
)


# --------------------------------------------------------------------------- the seeds' example
@pytest.mark.parametrize("init", ["np.array([[0.5], [-0.3]])", "np.zeros((2, 1))"])
def test_linear_regression_is_one_cell_with_the_closed_form_gradient(ip, init):
    plain(ip, DATA)
    X0, Y0 = ip.user_ns["X"].copy(), ip.user_ns["Y"].copy()
    assert autograd(ip, f"W = {init}\nP = X @ W\nL = np.mean((P - Y) ** 2)").success
    trace = gradmagic.last
    ns = ip.user_ns
    X, Y, W, P, L = (ns[k] for k in ("X", "Y", "W", "P", "L"))
    assert all(array_node(t) for t in (X, Y, W, P)) and type(L) is np.float64
    assert {"X", "Y", "W", "P", "L"} <= {n.label for n in trace.nodes}
    assert trace.target.label == "L" and trace.value == pytest.approx(float(L))
    W0 = eval(init, {"np": np})
    P0 = X0 @ W0
    np.testing.assert_array_equal(X.data, X0)  # the leaves hold the namespace's numbers
    np.testing.assert_allclose(P.data, P0, rtol=1e-15)
    assert float(L) == pytest.approx(np.mean((P0 - Y0) ** 2), rel=1e-15)
    closed = 2 / 20 * X0.T @ (P0 - Y0)  # dL/dW = 2/N · Xᵀ(P − Y)
    np.testing.assert_allclose(W.grad, closed, rtol=1e-12)
    np.testing.assert_allclose(trace.grads["W"], closed, rtol=1e-12)
    np.testing.assert_allclose(P.grad, 2 / 20 * (P0 - Y0), rtol=1e-12)
    np.testing.assert_allclose(Y.grad, -2 / 20 * (P0 - Y0), rtol=1e-12)
    np.testing.assert_allclose(X.grad, 2 / 20 * (P0 - Y0) @ W0.T, rtol=1e-12, atol=1e-15)
    report = trace.check()
    assert report.passed and {"W", "X", "Y"} <= {r.name for r in report.rows}


def test_linear_regression_matches_torch(ip, torch64):
    torch = torch64
    plain(ip, DATA)
    X0, Y0 = ip.user_ns["X"].copy(), ip.user_ns["Y"].copy()
    assert autograd(
        ip, "W = np.array([[0.5], [-0.3]])\nb = np.array([0.1])\nL = np.mean((X @ W + b - Y) ** 2)"
    ).success
    tX, tY = torch.tensor(X0), torch.tensor(Y0)
    tW = torch.tensor([[0.5], [-0.3]], requires_grad=True)
    tb = torch.tensor([0.1], requires_grad=True)
    torch.mean((tX @ tW + tb - tY) ** 2).backward()
    np.testing.assert_allclose(ip.user_ns["W"].grad, tW.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ip.user_ns["b"].grad, tb.grad.numpy(), rtol=1e-12)


# --------------------------------------------------------------------------- numpy keeps the graph
NUMPY_CELLS = [
    ("exp_tanh_sum_mean", "B = np.exp(A) + np.tanh(A)\nL = B.sum() + np.mean(A * B)"),
    ("matmul_transpose", "C = A.T @ A\nL = np.sum(C * C) / 10.0"),
    (
        "reshape_and_index",
        "D = A.reshape(6)[1:4] * A[0, 1]\nL = D.sum() + A[1].mean() + A[:, 2].max()",
    ),
    ("axes", "M = A.mean(axis=0, keepdims=True)\nL = ((A - M) ** 2).sum(axis=1).mean()"),
    (
        "ufuncs",
        "L = np.sqrt(np.abs(A) + 1.0).sum() + np.log(np.square(A) + 1.0).mean()"
        " + np.maximum(A, 0.0).sum()",
    ),
    (
        "softmax",
        "from gradmagic.core.tensor import softmax, log_softmax\n"
        "p = softmax(A)\nq = log_softmax(A, axis=0)\nL = (p * q).sum() + softmax(A, 0)[1, 2]",
    ),
    (
        "methods",
        "L = (np.exp(A).flatten() * A.ravel()).sum() + A.transpose(1, 0).reshape(-1)[4]"
        " + np.dot(A, A.T).sum()",
    ),
    ("linalg_where", "L = np.linalg.norm(A) + np.where(A > 0, A, 0.1 * A).sum()"),
]


@pytest.mark.parametrize("name, body", NUMPY_CELLS, ids=[c[0] for c in NUMPY_CELLS])
def test_numpy_functions_keep_the_graph(ip, name, body):
    A0 = np.array([[0.3, -1.2, 0.8], [1.5, 0.2, -0.7]])
    ip.user_ns.update(np=np, A=A0.copy())
    assert autograd(ip, body).success
    A, L = ip.user_ns["A"], ip.user_ns["L"]
    assert array_node(A) and A.label == "A" and type(L) is np.float64  # numpy's own, as plain

    def f(a):
        return float(run_plain(body, {"np": np, "A": a})["L"])

    assert float(L) == pytest.approx(f(A0), rel=1e-14)  # the same number as plain Python
    np.testing.assert_allclose(A.grad, central(f, A0), rtol=1e-6, atol=1e-8)
    assert gradmagic.last.check().passed


def test_axis_and_shape_literals_are_not_branches(ip):
    ip.user_ns.update(np=np, A=np.arange(6.0).reshape(2, 3))
    assert autograd(
        ip,
        "B = A * 2.0\nL = B.sum(axis=0).max() + B.reshape(3, 2)[2, 1]"
        " + B.transpose(1, 0).mean(1)[0] + B.softmax(axis=0)[0, 0]",
    ).success
    trace = gradmagic.last
    assert trace.branch_events == 0 and not trace.branch_dependent
    assert trace.check().passed


def test_arrays_made_in_the_cell_become_labelled_leaves(ip):
    ip.user_ns["np"] = np
    assert autograd(
        ip,
        "a = np.array([1.0, 2.0])\nz = np.zeros(2)\no = np.ones((2,))\n"
        "r = np.random.default_rng(0).normal(size=2)\nl = np.linspace(0.0, 1.0, 2)\n"
        "L = (a * z + o * r + l * a).sum()",
    ).success
    ns = ip.user_ns
    for name in ("a", "z", "o", "r", "l"):
        assert array_node(ns[name]) and ns[name].is_leaf and ns[name].label == name
    np.testing.assert_allclose(ns["z"].grad, [1.0, 2.0])
    np.testing.assert_allclose(ns["a"].grad, ns["z"].data + ns["l"].data)


def test_integer_arrays_and_arrays_changed_in_place_stay_arrays(ip):
    ip.user_ns["np"] = np
    assert autograd(
        ip,
        "idx = np.array([2, 0])\nA = np.array([1.0, 2.0, 3.0])\n"
        "B = np.ones(3)\nB[1] = 5.0\nL = (A[idx] * 2.0).sum() + (A * B).sum()",
    ).success
    ns = ip.user_ns
    assert type(ns["idx"]) is np.ndarray  # an int array: plain
    assert array_node(ns["B"]) and ns["B"].tolist() == [1.0, 5.0, 1.0]  # written in place
    np.testing.assert_allclose(ns["A"].grad, [3.0, 5.0, 3.0])
    assert gradmagic.last.warnings == []


def test_an_array_copy_changed_in_place_keeps_the_graph(ip):
    ip.user_ns.update(np=np, W=np.array([1.0, 2.0]))
    assert autograd(ip, "V = W.copy()\nV[0] = 10.0\nL = (V * W).sum()").success
    ns = ip.user_ns
    assert array_node(ns["V"]) and ns["V"].tolist() == [10.0, 2.0] and ns["V"].op == "setitem"
    np.testing.assert_allclose(ns["W"].grad, [10.0, 4.0])  # L = 10·W0 + W1²
    assert gradmagic.last.warnings == [] and gradmagic.last.check().passed
    assert autograd(ip, "V = W.copy()\nV.sort()\nL = (V * W).sum()").success  # no rule
    assert gradmagic.last.warnings == [
        "line 3: .sort() changes 'V' in place, which has no gradient rule: from here on it is "
        "a fresh leaf holding its new numbers, so no gradient flows through it"
    ]


def test_copies_keep_the_graph(ip):
    ip.user_ns.update(np=np, W0=np.array([1.0, -2.0]))
    assert autograd(
        ip,
        "W = np.array(W0)\nV = W.copy()\nU = np.asarray(V)\nL = (U * W0).sum() + np.copy(W).sum()",
    ).success
    ns = ip.user_ns
    assert ns["U"] is ns["V"] and ns["W"].op == ns["V"].op == "copy"
    np.testing.assert_allclose(ns["W0"].grad, 2 * np.array([1.0, -2.0]) + 1.0)
    assert gradmagic.last.warnings == [] and gradmagic.last.check().passed


def test_numpy_functions_of_an_array_number_keep_the_graph(ip):
    ip.user_ns["np"] = np
    assert autograd(
        ip,
        "v = np.array([0.5, 1.5])\nL = np.exp(v.sum()) "
        "+ np.tanh(v[0]) + np.sqrt(v[1]) + np.log1p(v[0])",
    ).success
    L = ip.user_ns["L"]
    assert type(L).__name__ == "float64" and isinstance(L, np.float64)
    grad = ip.user_ns["v"].grad
    np.testing.assert_allclose(
        grad, [np.exp(2.0) + 1 - np.tanh(0.5) ** 2 + 1 / 1.5, np.exp(2.0) + 0.5 / np.sqrt(1.5)]
    )
    assert gradmagic.last.float_conversions == 0 and gradmagic.last.check().passed


def test_math_functions_of_an_array_number_give_floats_and_say_so(ip):
    ip.user_ns["np"] = np
    assert autograd(
        ip, "import math\nv = np.array([0.5, 1.5])\ne = math.exp(v.sum())\nL = v.sum() * 2.0 + e"
    ).success
    # v.sum() is a float64 number node: math.exp of it keeps the graph, a float as in plain code
    assert isinstance(ip.user_ns["e"], float) and ip.user_ns["e"] == math.exp(2.0)
    assert type(ip.user_ns["e"]).__name__ == "float" and not gradmagic.last.warnings
    np.testing.assert_allclose(ip.user_ns["v"].grad, [2.0 + math.exp(2.0)] * 2, rtol=1e-12)
    v32 = "v = np.array([0.5, 1.5], dtype=np.float32)\ne = math.exp(v.sum())\nL = v.sum() + e"
    assert autograd(ip, "import math\n" + v32).success  # a float32 number node: numbers only
    assert type(ip.user_ns["e"]) is float and ip.user_ns["v"].grad.tolist() == [1.0, 1.0]
    assert any(
        "math.exp takes an array node as a plain number" in w for w in gradmagic.last.warnings
    )


def test_numpy_functions_built_from_ops_keep_the_graph_and_numpys_numbers(ip):
    ip.user_ns["np"] = np
    x = np.array([2.0, 1e-12, 0.3])
    ip.user_ns["v"] = x.copy()
    assert autograd(
        ip,
        "a = np.log1p(v)\nb = np.expm1(v)\nc = np.log2(v)\nd = np.sinh(v)\n"
        "e = np.arctanh(v * 0.1)\nf = np.floor(v * 3.0)\n"
        "L = (a + b + c + d + e + f * v).sum()",
    ).success
    ns = ip.user_ns
    for name, exact in (
        ("a", np.log1p(x)),
        ("b", np.expm1(x)),
        ("c", np.log2(x)),
        ("d", np.sinh(x)),
    ):
        assert array_node(ns[name])
        np.testing.assert_array_equal(ns[name].data, exact)  # numpy's own numbers
    assert type(ns["f"]) is np.ndarray  # piecewise constant: plain values
    expected = (
        1 / (1 + x)
        + np.exp(x)
        + 1 / (x * np.log(2))
        + np.cosh(x)
        + 0.1 / (1 - (0.1 * x) ** 2)
        + np.floor(3 * x)
    )
    np.testing.assert_allclose(ns["v"].grad, expected, rtol=1e-12)
    assert gradmagic.last.warnings == []


def test_math_functions_without_a_tensor_rule_convert_as_plain_python(ip):
    ip.user_ns["np"] = np
    assert autograd(
        ip, "import math\nv = np.array([0.5])\nt = math.tan(v[0])\nL = v.sum() * t"
    ).success
    # v[0] is a float64 number node, which math.tan keeps in the graph
    assert isinstance(ip.user_ns["t"], float) and ip.user_ns["t"] == np.tan(0.5)
    want = np.tan(0.5) + 0.5 / np.cos(0.5) ** 2
    np.testing.assert_allclose(ip.user_ns["v"].grad, [want], rtol=1e-12)
    assert not gradmagic.last.warnings
    result = autograd(ip, "u = math.tan(v)")  # numpy 2: a 1-element array is no number
    assert isinstance(result.error_in_exec, TypeError)
    assert autograd(ip, "a = 2.0\nL = math.log(v[0], a)").success  # mixed: a float, no crash
    assert ip.user_ns["L"] == math.log(0.5, 2.0)
    assert autograd(ip, "f = float(v.sum())\nr = round(f, 2)\nL = v.sum() * f").success
    assert isinstance(ip.user_ns["f"], float) and ip.user_ns["r"] == 0.5  # as plain Python
    assert ip.user_ns["v"].grad.tolist() == [1.0]  # float() of an array node keeps the graph


# --------------------------------------------------------------------------- networks
NET = """import gradmagic.nn as nn
from gradmagic.core.tensor import cross_entropy
net = nn.Sequential(nn.Linear(2, 16, seed=0), nn.ReLU(), nn.Linear(16, 10, seed=1))
logits = net(Xb)
L = cross_entropy(logits, yb)"""


def test_a_two_layer_network_cell(ip, torch64):
    torch = torch64
    rng = np.random.default_rng(3)
    Xb, yb = rng.normal(size=(12, 2)), rng.integers(0, 10, 12)
    ip.user_ns.update(np=np, Xb=Xb.copy(), yb=yb)
    assert autograd(ip, NET).success
    trace = gradmagic.last
    labels = {n.label for n in trace.nodes}
    assert {"Xb", "0.W", "0.b", "2.W", "2.b", "logits", "L"} <= labels
    assert type(ip.user_ns["yb"]) is np.ndarray  # class indices stay integers
    net = ip.user_ns["net"]
    params = net.parameters()
    theirs = [torch.tensor(p.data, requires_grad=True) for p in params]
    W1, b1, W2, b2 = theirs
    out = torch.relu(torch.tensor(Xb) @ W1 + b1) @ W2 + b2
    loss = torch.nn.functional.cross_entropy(out, torch.tensor(yb))
    loss.backward()
    assert trace.value == pytest.approx(loss.item(), rel=1e-12)
    for p, t in zip(params, theirs):
        np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(trace.grads[p.label], t.grad.numpy(), rtol=1e-10, atol=1e-14)
    assert trace.check().passed


def test_training_in_plain_cells_then_one_step_inspected(ip):
    plain(
        ip,
        """import numpy as np
import gradmagic.nn as nn
from gradmagic.optim import Adam
from gradmagic.core.tensor import cross_entropy
rng = np.random.default_rng(0)
centres = rng.normal(scale=4.0, size=(10, 2))
y = np.repeat(np.arange(10), 20)
X = centres[y] + rng.normal(size=(200, 2))
net = nn.Sequential(nn.Linear(2, 32, seed=0), nn.ReLU(), nn.Linear(32, 10, seed=1))
opt = Adam(net.parameters(), lr=0.05)
first = cross_entropy(net(X), y).data.item()
for step in range(60):
    loss = cross_entropy(net(X), y)
    opt.zero_grad()
    loss.backward()
    opt.step()""",
    )
    assert autograd(ip, "logits = net(X)\nL = cross_entropy(logits, y)").success
    trace = gradmagic.last
    assert trace.value < 0.5 * ip.user_ns["first"]  # it trained
    assert array_node(ip.user_ns["X"]) and type(ip.user_ns["y"]) is np.ndarray
    assert trace.check().passed
    assert ip.run_cell("acc = (net(X).data.argmax(axis=1) == y).mean()").success
    assert ip.user_ns["acc"] > 0.6


# --------------------------------------------------------------------------- the check and views
def test_a_large_leaf_is_sampled_by_the_check_and_the_report_says_so(ip):
    ip.user_ns.update(np=np, G=np.random.default_rng(1).normal(size=(100, 50)))
    assert autograd(ip, "L = (np.tanh(G) ** 2).mean()").success
    report = gradmagic.last.check()
    assert report.passed
    (row,) = [r for r in report.rows if r.name == "G"]
    assert row.count <= 300
    assert any("G" in n and "of its 5,000 elements" in n for n in report.notes)
    assert "of 5,000 elements" in row.note


def test_the_trace_holds_shapes_and_gradient_arrays(ip):
    plain(ip, DATA)
    result = autograd(ip, "W = np.zeros((2, 1))\nP = X @ W\nL = np.mean((P - Y) ** 2)", options="")
    trace = result.result
    W = trace.node("W")
    assert W.shape == (2, 1) and isinstance(W.grad, np.ndarray) and W.grad.shape == (2, 1)
    assert trace.node("X").shape == (20, 2) and trace.target.label == "L"
    np.testing.assert_array_equal(trace.grads["W"], ip.user_ns["W"].grad)
    published = []  # the static copy, published before the live view, has the run's text
    ip.display_pub.publish = lambda data, **kwargs: published.append(data)
    try:
        line = ip.display_formatter.format(trace)[0]["text/plain"]
    finally:
        del ip.display_pub.publish
    text = published[-1]["text/plain"]
    assert "W" in text and "X" in text and "L" in text
    assert line.startswith("L = ") and "\n" not in line  # beside the live view: one line


def test_a_constant_tensor_from_an_earlier_cell_stays_constant(ip):
    ip.user_ns.update(np=np, gradmagic=gradmagic)
    plain(ip, "X = gradmagic.Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=False)")
    assert autograd(ip, "W = np.array([[0.5], [-1.0]])\nL = ((X @ W) ** 2).mean()").success
    X = ip.user_ns["X"]
    assert X.is_leaf and X.requires_grad is False
    assert not X.grad.any() and ip.user_ns["W"].grad.any()
    report = gradmagic.last.check()
    assert report.passed and any("requires_grad=False: X" in n for n in report.notes)


# --------------------------------------------------------------------------- mixed, reruns, errors
def test_values_and_tensors_mix(ip):
    ip.user_ns["np"] = np
    assert autograd(
        ip,
        "a = 2.0\nb = -0.5\nv = np.array([1.0, -2.0, 3.0])\n"
        "w = v * a + b\nL = (w * w).sum() * b + w[0] * a + np.tanh(a)",
    ).success
    ns = ip.user_ns
    assert isinstance(ns["a"], float) and ns["a"].label == "a" and array_node(ns["v"])

    def f(x):
        a, b, v = x[0], x[1], x[2:]
        w = v * a + b
        return (w * w).sum() * b + w[0] * a + np.tanh(a)

    x0 = np.array([2.0, -0.5, 1.0, -2.0, 3.0])
    num = central(f, x0)
    assert ns["a"].grad == pytest.approx(num[0], rel=1e-7)
    assert ns["b"].grad == pytest.approx(num[1], rel=1e-7)
    np.testing.assert_allclose(ns["v"].grad, num[2:], rtol=1e-7)
    assert gradmagic.last.check().passed


def test_rerunning_a_cell_gives_the_same_gradients(ip):
    plain(ip, DATA)
    body = "W = np.array([[0.5], [-0.3]])\nP = X @ W\nL = np.mean((P - Y) ** 2)"
    grads = []
    for _ in range(3):
        assert autograd(ip, body).success
        grads.append({k: v.copy() for k, v in gradmagic.last.grads.items()})
        assert ip.user_ns["X"].is_leaf  # a fresh leaf each time, not the last run's node
    for later in grads[1:]:
        assert later.keys() == grads[0].keys()
        for k in later:
            np.testing.assert_array_equal(later[k], grads[0][k])


def test_a_shape_error_points_at_the_users_line(ip, capsys):
    plain(ip, DATA)
    result = autograd(ip, "W = np.ones((3, 1))\nP = X @ W\nL = P.sum()", options="")
    assert isinstance(result.error_in_exec, ValueError)
    shown = capsys.readouterr().out
    assert "----> 3 P = X @ W" in shown
    with pytest.raises(ValueError) as plain_error:  # numpy's own message
        np.ones((20, 2)) @ np.ones((3, 1))
    assert str(plain_error.value) in shown
    assert not any(name in shown for name in RUNTIME_NAMES)
    # as for a numpy error: the user's line, then the message; no frames of gradmagic's own
    assert "tensor.py" not in shown and "_apply" not in shown and "File " not in shown
    tail = shown[shown.index("----> 3 P = X @ W") :].splitlines()
    assert tail[3].startswith("ValueError: matmul: Input operand 1"), tail
    assert type(ip.user_ns["X"]) is np.ndarray  # a failed run leaves the namespace's arrays


def test_a_numpy_function_without_a_rule_computes_as_numpy_and_reports_the_cut(ip):
    ip.user_ns.update(np=np, A=np.array([0.5, 1.0]))
    result = autograd(ip, "B = A * 0.2\nC = np.spacing(B)\nL = C.sum() + B.sum()", options="-q")
    assert result.success
    assert type(ip.user_ns["C"]).__name__ == "ndarray"  # numpy's own result
    assert ip.user_ns["C"].tolist() == np.spacing(np.array([0.5, 1.0]) * 0.2).tolist()
    assert gradmagic.last.grads["A"].tolist() == [0.2, 0.2]  # through B only
    assert any(
        w.startswith("line 3: numpy.spacing has no gradient rule") for w in gradmagic.last.warnings
    )


def test_a_tensor_cannot_be_the_target_unless_it_is_one_number(ip, capsys):
    ip.user_ns.update(np=np, A=np.array([0.5, 1.0]))
    assert autograd(ip, "B = A * 2.0", options="").success
    assert "tensor of shape (2,)" in capsys.readouterr().out and gradmagic.last is None
    assert autograd(ip, "B = (A * 2.0)[1:]", options="-q").success
    assert gradmagic.last.grads["A"].tolist() == [0.0, 2.0]


PLAIN_CELLS = [
    (
        "stats",
        "m = X.mean(axis=0)\ns = ((X - m) ** 2).sum(axis=0)\nz = (X - m) / np.sqrt(s)\n"
        "shape = z.shape\nn = len(z)\nprint(f'{n} rows, first {z[0, 0]:.3f}')\nL = z.max()",
    ),
    (
        "loop",
        "total = 0.0\nfor row in X[:3]:\n    total = total + (row ** 2).sum()\n"
        "print(round(float(total), 6))\nL = total",
    ),
    ("copy", "Z = X.copy()\nZ[0, 0] = 0.0\nL = (Z * X).sum()"),
    ("argmax", "k = X.argmax()\nflat = X.flatten()\nL = flat[k] * 2.0"),
    (
        "methods",
        "q = X // 2\nr = X % 4\ns = X.std(axis=0)\nc = X.cumsum()\nG = X.dot(X.T)\n"
        "v = np.var(X)\nL = (r * s).sum() + c[-1] + G.sum() + q.sum() + v",
    ),
]


@pytest.mark.parametrize("name, source", PLAIN_CELLS, ids=[c[0] for c in PLAIN_CELLS])
def test_tensor_cells_compute_as_plain_python(ip, capsys, name, source):
    X0 = np.random.default_rng(5).normal(size=(4, 3))
    expected = run_plain(source, {"np": np, "X": X0.copy(), "print": print})
    printed = capsys.readouterr().out
    ip.user_ns.update(np=np, X=X0.copy())
    assert autograd(ip, source).success
    assert capsys.readouterr().out == printed
    for key, value in expected.items():
        if key.startswith("__") or key in ("np", "print"):
            continue
        got = ip.user_ns[key]
        got = got.data if isinstance(got, (Tensor, Value, Array, Scalar64)) else got
        np.testing.assert_array_equal(np.asarray(got), np.asarray(value), err_msg=key)


# --------------------------------------------------------------------------- the demo notebook's cells
def test_the_tensor_notebook_cells_run_without_errors(ip, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "scripts" / "make_notebooks.py"
    spec = importlib.util.spec_from_file_location("make_notebooks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cells = module.TENSORS
    assert {kind for kind, _ in cells} == {"md", "code"} and cells[1][1].startswith("%load_ext")
    for kind, source in cells:
        if kind == "code":
            result = ip.run_cell(source)
            assert result.success, (source, capsys.readouterr().out)
    shown = capsys.readouterr().out
    assert "Traceback" not in shown and "%%autograd:" not in shown
    ns = ip.user_ns
    assert ns["closed_form"] == pytest.approx(ns["W"].grad)
    assert ns["report"].passed and any("8 of its 5,000" in n for n in ns["report"].notes)
    assert ns["after"] < ns["before"] and gradmagic.last.check().passed


def test_a_tensor_error_inside_a_function_of_the_cell_shows_only_the_users_lines(ip, capsys):
    ip.user_ns.update(np=np, A=np.ones((2, 3)))
    result = autograd(
        ip, "def f(T):\n    return T.reshape(4, 2)\nB = f(A * 1.0)\nL = B.sum()", options=""
    )
    assert isinstance(result.error_in_exec, ValueError)
    shown = capsys.readouterr().out
    assert "----> 4 B = f(A * 1.0)" in shown and "----> 3     return T.reshape(4, 2)" in shown
    assert "cannot reshape array of size 6 into shape (4,2)" in shown
    assert "gradmagic" not in shown and "tensor.py" not in shown, shown


def test_an_engine_error_shows_only_the_users_line(ip, capsys):
    result = autograd(ip, "x = 2.0\ny = x.tanh(3)", options="")
    assert isinstance(result.error_in_exec, TypeError)
    shown = capsys.readouterr().out
    assert "----> 3 y = x.tanh(3)" in shown and "engine.py" not in shown, shown


def test_a_tensor_turned_into_plain_numbers_is_reported_as_such(ip):
    ip.user_ns.update(np=np, A=np.array([0.5, 1.0]))
    autograd(ip, "B = A * 2.0\nc = B.tolist()\nL = B.sum() + c[0]")
    warning = [w for w in gradmagic.last.warnings if "converted" in w]
    assert warning and warning[0].startswith("a Value or Tensor was converted to plain numbers")


def test_a_plain_cell_can_change_an_array_the_magic_made_a_tensor(ip, capsys):
    ip.user_ns.update(np=np, A=np.array([1.0, 2.0]))
    assert autograd(ip, "L = (A * A).sum()").success
    assert array_node(ip.user_ns["A"])
    plain(ip, "A[0] = 5.0\nA[1:] *= 2.0")  # plain numpy code keeps working on it
    assert ip.user_ns["A"].data.tolist() == [5.0, 4.0] and ip.user_ns["A"].is_leaf
    assert autograd(ip, "L = (A * A).sum()").success
    assert gradmagic.last.grads["A"].tolist() == [10.0, 8.0]
    result = autograd(ip, "B = A * 2.0\nA[0] = 1.0\nL = B.sum()", options="-q")
    assert result.success and ip.user_ns["A"].tolist() == [1.0, 4.0]  # written, as numpy does
    assert gradmagic.last.grads["A"].tolist() == [2.0, 2.0]  # B was made from A before it
    assert gradmagic.last.warnings == [] and gradmagic.last.check().passed
