"""numpy code as people write it, under %%autograd: the plain cell's value and type, and
the gradient central differences of the plain cell give (numbers alone, in lists, in
np.array, and arrays through numpy's functions)."""

import numpy as np
import pytest

import gradmagic

pytestmark = pytest.mark.usefixtures("ip")

# (name, cell, the inputs and their values); L is the target
CELLS = [
    ("maximum", "L = np.maximum(x, 0.0) * x", {"x": 0.7}),
    ("clip", "L = np.clip(x, 0, 1) * x + np.clip(y, 0, 1)", {"x": 0.7, "y": 1.4}),
    (
        "where",
        "L = np.where(x > 0, x, 0.1 * x) + np.where(y > 0, y, 0.1 * y)",
        {"x": -0.7, "y": 0.4},
    ),
    ("power", "L = np.power(x, 3) + np.power(2.0, x)", {"x": 0.7}),
    ("square", "L = np.square(x) + np.sqrt(np.square(y) + 1.0)", {"x": 0.7, "y": -1.1}),
    ("mean_of_list", "L = np.mean([x, x * x])", {"x": 0.7}),
    ("sum_of_list", "L = np.sum([x, y]) * y", {"x": 0.7, "y": 1.3}),
    ("dot_of_lists", "L = np.dot([x, y], [y, x])", {"x": 0.7, "y": 1.3}),
    ("prod_of_list", "L = np.prod([x, y, 2.0])", {"x": 0.7, "y": 1.3}),
    (
        "rotation_matrix",
        "c, s = np.cos(t), np.sin(t)\nR = np.array([[c, -s], [s, c]])\n"
        "v = R @ np.array([1.0, 2.0])\nL = v[0] * v[1]",
        {"t": 0.4},
    ),
    ("arange_times_number", "L = (np.arange(4) * s).sum()", {"s": 0.9}),
    (
        "int_array_plus_number",
        "L = (np.array([1, 2, 3]) + s) @ np.array([1.0, -1.0, 2.0])",
        {"s": 0.9},
    ),
    (
        "sort_of_scaled",
        "A = np.array([[3.0, 1.0], [0.5, 2.0]])\nL = np.sort(A * s)[0, 0] + "
        "np.sort(A * s, axis=None)[-1]",
        {"s": 0.9},
    ),
    (
        "stack_and_norm",
        "v = np.stack([np.array([x, y]), np.array([y, 1.0])])\n"
        "L = np.linalg.norm(v) + np.linalg.det(v)",
        {"x": 0.7, "y": 1.3},
    ),
    (
        "vector_of_numbers",
        "w = np.array([x, y, x * y])\nL = np.linalg.norm(w, 1) + w.max() "
        "+ np.cumsum(w)[-1] + np.median(w)",
        {"x": 0.7, "y": -1.3},
    ),
    (
        "arctan2_hypot",
        "L = np.arctan2(y, x) + np.hypot(x, y) + np.logaddexp(x, y)",
        {"x": 0.7, "y": -1.3},
    ),
    (
        "concatenate_pad",
        "a = np.array([x, y])\nb = np.concatenate([a, a * 2.0, [1.0]])\n"
        "L = (np.pad(b, 1) * np.arange(7)).sum()",
        {"x": 0.7, "y": -1.3},
    ),
    (
        "einsum_inv_solve",
        "A = np.array([[x, 1.0], [0.5, y]])\n"
        "L = np.einsum('ij,ij->', A, np.linalg.inv(A)) + "
        "np.linalg.solve(A, np.array([1.0, 2.0])).sum()",
        {"x": 2.0, "y": 3.0},
    ),
]


def plain(cell, inputs):
    ns = {"np": np, **inputs}
    exec(compile(cell, "<plain>", "exec"), ns)
    return ns


def central(cell, inputs, name, eps=1e-6):
    up, down = dict(inputs), dict(inputs)
    up[name] += eps
    down[name] -= eps
    return (float(plain(cell, up)["L"]) - float(plain(cell, down)["L"])) / (2 * eps)


@pytest.mark.parametrize("name, cell, inputs", CELLS, ids=[c[0] for c in CELLS])
def test_numpy_cells_give_the_plain_value_and_the_central_difference_gradient(
    ip, name, cell, inputs
):
    source = "".join(f"{k} = {v!r}\n" for k, v in inputs.items()) + cell
    ip.user_ns["np"] = np
    result = ip.run_cell("%%autograd -q\n" + source)
    assert result.success, result.error_in_exec
    trace = gradmagic.last
    want = plain(cell, inputs)
    assert trace is not None, "the target is a node"
    assert trace.value == want["L"]  # plain numpy's number, to the last bit
    for k, v in want.items():  # every name the cell made: numpy's value and type
        if k in ("np", "__builtins__"):
            continue
        got = ip.user_ns[k]
        assert type(got).__name__ == type(v).__name__, k
        assert np.asarray(got).dtype == np.asarray(v).dtype, k
        np.testing.assert_array_equal(np.asarray(got), np.asarray(v), err_msg=k)
    assert not [w for w in trace.warnings if "no gradient rule" in w], trace.warnings
    for k in inputs:
        assert trace.grads[k] == pytest.approx(central(cell, inputs, k), rel=1e-6, abs=1e-8), k
    assert trace.check().passed


def test_the_torch_replay_agrees_on_a_numpy_cell(ip):
    pytest.importorskip("torch")
    from gradmagic.analysis import torchcheck

    ip.user_ns["np"] = np
    cell = (
        "t = 0.4\nx = 1.5\nc, s = np.cos(t), np.sin(t)\nR = np.array([[c, -s], [s, c]])\n"
        "M = np.kron(R, np.eye(2)) + np.diag(np.arange(4) * x)\n"
        "L = np.linalg.slogdet(M)[1] + np.sort(np.linalg.eigvalsh(M + M.T))[-1] "
        "+ np.einsum('ii', np.linalg.inv(M)) + np.prod(np.tril(M) + 1.0)"
    )
    assert ip.run_cell("%%autograd -q\n" + cell).success
    comparison = torchcheck.compare(gradmagic.last)
    assert not comparison.error, comparison.error
    assert comparison.passed and len(comparison.rows) >= 2, comparison.verdict


def test_a_function_with_no_derivative_gives_numpys_values(ip):
    ip.user_ns["np"] = np
    cell = "w = np.array([x, y, x])\ni = np.argsort(w)\nu = np.unique(w)\nL = w[i[0]] * 2.0"
    assert ip.run_cell("%%autograd -q\nx = 0.7\ny = -1.3\n" + cell).success
    want = plain(cell, {"x": 0.7, "y": -1.3})
    assert ip.user_ns["i"].tolist() == want["i"].tolist()
    assert ip.user_ns["u"].tolist() == want["u"].tolist()
    assert gradmagic.last.grads["y"] == 2.0 and gradmagic.last.grads["x"] == 0.0


def test_a_float32_array_times_a_number_is_float32_and_keeps_the_graph(ip):
    ip.user_ns["np"] = np
    cell = "x = 0.7\na = np.ones(2, dtype=np.float32) * x\nb = np.arange(3) * x\nL = x * b.sum() + a.sum()"
    assert ip.run_cell("%%autograd -q\n" + cell).success
    want = plain(cell, {})
    assert ip.user_ns["a"].dtype == np.float32 == want["a"].dtype
    assert ip.user_ns["a"].tolist() == want["a"].tolist()
    assert ip.user_ns["b"].dtype == np.float64
    assert ip.user_ns["L"].dtype == want["L"].dtype and ip.user_ns["L"] == want["L"]
    assert gradmagic.last.grads["x"] == pytest.approx(2 * 3.0 * 0.7 + 2.0)
    assert not gradmagic.last.warnings


ARRAY_CELLS = [  # W is a (3, 3) array the cell reads; L is the target
    (
        "softmax_logsumexp",
        "z = W @ np.array([1.0, -2.0, 0.5])\n"
        "p = np.exp(z - z.max()) / np.sum(np.exp(z - z.max()))\n"
        "L = -np.log(p[1])",
    ),
    (
        "logistic",
        "y = np.array([1.0, -1.0, 1.0])\n"
        "L = np.mean(np.log1p(np.exp(-y * (W @ np.array([0.3, 0.2, -0.1])))))",
    ),
    (
        "stack_median_ptp",
        "S = np.stack([W, W.T, W * W])\nL = np.median(S, axis=0).sum() + "
        "np.ptp(S) + np.prod(np.abs(W) + 1.0, axis=1).sum()",
    ),
    (
        "linalg",
        "A = W @ W.T + 3.0 * np.eye(3)\nC = np.linalg.cholesky(A)\n"
        "L = np.trace(C) + np.linalg.slogdet(A)[1] + np.linalg.solve(A, W[0]).sum() "
        "+ np.linalg.norm(np.linalg.pinv(W), 'fro')",
    ),
    (
        "moves",
        "L = (np.roll(W, 1, axis=0) * np.flip(W) + np.tril(W) @ np.triu(W)).sum() "
        "+ np.pad(W, 1, mode='edge').mean() + np.tile(np.diag(W), 2) @ np.arange(6.0)",
    ),
    (
        "einsum_family",
        "L = np.einsum('ij,jk,ki->', W, W, W) + np.kron(W, W[:2, :2]).std() "
        "+ np.tensordot(W, W, axes=([0], [1])).max() + np.outer(W[0], W[1]).sum()",
    ),
    (
        "sort_split_concat",
        "a, b = np.split(np.sort(W.ravel()), [4])\n"
        "L = np.concatenate([b, a * 2.0]) @ np.linspace(0.0, 1.0, 9) "
        "+ np.cumprod(np.abs(W[0]) + 0.5)[-1] + np.diff(W, axis=1).sum() ** 2",
    ),
]


@pytest.mark.parametrize("name, cell", ARRAY_CELLS, ids=[c[0] for c in ARRAY_CELLS])
def test_array_cells_give_the_plain_value_and_the_central_difference_gradient(ip, name, cell):
    W0 = np.array([[0.3, -1.2, 0.8], [1.1, 0.4, -0.6], [-0.2, 0.9, 1.5]])
    ip.user_ns.update(np=np, W=W0.copy())
    result = ip.run_cell("%%autograd -q\n" + cell)
    assert result.success, result.error_in_exec
    trace = gradmagic.last

    def f(w):
        ns = {"np": np, "W": w.copy()}
        exec(compile(cell, "<plain>", "exec"), ns)
        return float(ns["L"])

    assert trace.value == f(W0)
    assert not [w for w in trace.warnings if "no gradient rule" in w], trace.warnings
    grad = [n for n in trace.nodes if n.label == "W" and n.is_leaf and n.index >= 0][0].grad
    num = np.zeros_like(W0)
    for i in np.ndindex(W0.shape):
        up, down = W0.copy(), W0.copy()
        up[i] += 1e-6
        down[i] -= 1e-6
        num[i] = (f(up) - f(down)) / 2e-6
    np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-7)
    assert trace.check().passed
    pytest.importorskip("torch")
    from gradmagic.analysis import torchcheck

    comparison = torchcheck.compare(trace)
    assert comparison.passed, comparison.verdict
