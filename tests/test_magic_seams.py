"""Where array nodes meet the rest of a cell: ``range`` and list indices, ``float()`` and
``.item()`` of a one-element array node.

Each cell is run by the magic and as plain Python: the gradient of ``L`` with respect to
the array ``W`` it reads must match central differences of the plain cell, with no cut
reported, and the numerical check and PyTorch's replay must agree.
"""

import numpy as np
import pytest

import gradmagic
from numeric import central

W0 = np.array([[0.3, -1.2, 0.8], [0.5, 0.1, -0.4], [1.1, -0.7, 0.2], [-0.6, 0.9, 0.35]])

CELLS = [  # (name, cell): L is the target
    (  # the softmax loss's gradient written as a student writes it
        "range_and_list_minus_equals",
        "y = [2, 0, 1, 1]\n"
        "P = np.exp(W) / np.exp(W).sum(axis=1, keepdims=True)\n"
        "g = P * 1.0\n"
        "g[range(4), y] -= 1\n"
        "L = (g * W).sum()",
    ),
    (
        "range_write_of_a_constant",
        "M = W * W\nM[range(4), [0, 1, 2, 0]] = 0.0\nL = M.sum()",
    ),
    (
        "range_write_of_values",
        "M = W * 1.0\nM[range(3), [1, 2, 0]] = W[3] ** 2\nL = (M * M).sum()",
    ),
    (
        "range_and_list_read",
        "S = W * 2.0\nL = -np.log(np.exp(S)[range(4), [0, 2, 1, 1]]).sum() + S[[1, 3]].sum()",
    ),
    (
        "range_read_of_a_row",
        "L = (W[range(1, 4)] ** 3).sum() + W[[0, 0, 2], range(3)].prod()",
    ),
    (
        "float_of_a_mean",
        "m = float(W.mean())\nL = m * m + (W - m).sum() ** 2",
    ),
    (
        "item_of_reductions",
        "s = (W ** 2).sum().item()\nL = np.sqrt(s) + W.std().item() * W[0, 1]",
    ),
    (
        "item_of_a_one_element_slice",
        "v = W[1:2, 2:3].item()\nL = v ** 3 + float(W[3, 0]) * v",
    ),
    (
        "item_of_an_index",
        "L = W.item(4) * W.item(-1) + W.item((0, 1)) ** 2 + W.item(3, 2) * W.item(0)",
    ),
]


def plain(cell, w):
    ns = {"np": np, "W": w.copy()}
    exec(compile(cell, "<plain>", "exec"), ns)
    return float(ns["L"])


@pytest.mark.parametrize("name, cell", CELLS, ids=[c[0] for c in CELLS])
def test_the_gradient_of_the_plain_cell_with_no_cut(name, cell):
    run = gradmagic.autograd(cell + "\nL")(np=np, W=W0.copy())
    assert run.value == pytest.approx(plain(cell, W0), rel=1e-13)
    assert not run.trace.warnings and not run.trace.cut_notes
    np.testing.assert_allclose(
        run.grads["W"], central(lambda w: plain(cell, w), W0), rtol=1e-6, atol=1e-8
    )
    assert run.check().passed


@pytest.mark.parametrize("name, cell", CELLS, ids=[c[0] for c in CELLS])
def test_pytorch_replays_the_same_gradients(name, cell):
    pytest.importorskip("torch")
    from gradmagic.analysis.torchcheck import compare

    run = gradmagic.autograd(cell + "\nL")(np=np, W=W0.copy())
    assert compare(run.trace).passed


def test_float_and_item_give_python_floats_as_plain_code_does():
    cell = "a = float(W.sum())\nb = W.max().item()\nc = W[2:3, 0:1].item()\nL = a + b + c"
    run = gradmagic.autograd(cell + "\nL")(np=np, W=W0.copy())
    for name in "abc":
        assert type(run.values[name]) is float


# --------------------------------------------------------------------------- inputs of any shape
A0, B0 = np.array([0.5, -1.5, 2.0]), np.array([1.2, 0.3, -0.7])


def _stack_loss(t):
    return float(np.sum(np.sin(np.vstack(t)) * np.arange(6.0).reshape(2, 3)))


@pytest.mark.parametrize(
    "cell, data, grads",
    [
        (  # a tuple of arrays: each array is an input, named by its place
            "L = np.sum(np.sin(np.vstack(t)) * np.arange(6.0).reshape(2, 3))",
            {"t": (A0, B0)},
            {"t[0]": lambda: central(lambda a: _stack_loss((a, B0)), A0)},
        ),
        (  # a tuple inside a list, and a float in a tuple
            "L = np.sum(np.concatenate(ps[0]) ** 2) * ps[1][0]",
            {"ps": [(A0, B0), (1.5,)]},
            {"ps[0][1]": lambda: 2 * B0 * 1.5, "ps[1][0]": lambda: np.sum(A0**2 + B0**2)},
        ),
        (  # an element bound to a new name is still the list's element
            "y = x[1]\nL = y * 3.0 + x[0] * y",
            {"x": [1.0, 2.0]},
            {"x[1]": lambda: 4.0, "x[0]": lambda: 2.0},
        ),
    ],
)
def test_containers_of_inputs_are_inputs_named_by_their_paths(cell, data, grads):
    run = gradmagic.autograd(cell + "\nL")(np=np, **data)
    assert not run.trace.warnings and not run.trace.cut_notes
    for name, expected in grads.items():
        np.testing.assert_allclose(run.grads[name], expected(), rtol=1e-6)
    assert "y" not in run.grads
    assert run.check().passed
    assert type(data[next(iter(data))]) in (tuple, list)  # the user's data is left as it was
    if "t" in data:
        assert data["t"][0] is A0


@pytest.mark.parametrize(
    "cell, data, who",
    [
        ("L = np.sum(a.real.astype(np.float64) ** 2)", {"a": A0.astype(np.complex64)}, "'a'"),
        ("L = float(np.sum(v[0])) * x", {"v": [np.ones(2, dtype=np.complex64)], "x": 2.0}, "'v'"),
        ("L = abs((x - 5.0) ** 0.5) + x", {"x": 2.0}, "complex arithmetic"),
    ],
)
def test_numbers_not_followed_are_said_by_name(cell, data, who):
    """complex64 arrays are not differentiated, nor a float's power that Python
    makes complex: never a silent tick, a warning names what was not followed."""
    run = gradmagic.autograd(cell + "\nL")(np=np, **data)
    assert any(who in w for w in run.trace.warnings), run.trace.warnings
    assert who.strip("'") not in run.grads or who == "'x'"


@pytest.mark.parametrize(
    "cell, dx",
    [
        ("L = np.sum(x) + np.max(x) + np.min(x) + np.prod(x) + np.sign(x)", 4.0),
        ("L = np.mean(x) * 3.0 + np.std(x + 1.0) + np.var(x)", 3.0),
        ("L = np.real(x) * 3.0", 3.0),
        ("L = np.sum(np.linspace(x, 5.0, num=1)) + np.sum(np.linspace(0.0, x, 0))", 1.0),
        ("L = np.sum(np.linspace(0.0, x, num=4, endpoint=False))", 1.5),
    ],
)
def test_numpy_functions_of_a_float_give_its_gradient_without_a_warning(cell, dx):
    run = gradmagic.autograd(cell + "\nL")(np=np, x=2.0)
    assert not run.trace.warnings and not run.trace.cut_notes
    assert run.grads["x"] == pytest.approx(dx)


def test_a_numpy_function_called_by_another_name_keeps_the_graph():
    """``f = np.mean; f(x)``: the rewrite cannot see which function ``f`` is, numpy's
    dispatch takes the float node to its rule."""
    cell = "f, g = np.mean, np.atleast_1d\nL = f(x) * 2.0 + np.sum(g(x) * 3.0) + np.round(x)"
    run = gradmagic.autograd(cell + "\nL")(np=np, x=2.5)
    assert run.grads["x"] == pytest.approx(5.0)
    assert not run.trace.warnings and not run.trace.cut_notes


@pytest.mark.parametrize("fails", [False, True])
def test_the_users_tuple_is_left_as_it_was(ip, fails):
    """The tuple the cell read is the user's own object again after the run, also when the
    cell raises; a list holding a tuple gets its tuple back."""
    pair, rows = (A0.copy(), 2.0), [(B0.copy(), 0.5)]
    ip.user_ns.update(np=np, pair=pair, rows=rows)
    body = "L = np.sum(pair[0] * pair[1]) + np.sum(rows[0][0]) * rows[0][1]"
    result = ip.run_cell(f"%%autograd -q\n{body}" + ("\nraise ValueError('x')" if fails else ""))
    assert result.success is not fails
    assert ip.user_ns["pair"] is pair and ip.user_ns["rows"][0] is rows[0]
    assert type(pair[1]) is float and type(rows[0][1]) is float
    if not fails:
        trace = gradmagic.last
        np.testing.assert_allclose(trace.grads["pair[0]"], np.full(3, 2.0))
        assert trace.grads["pair[1]"] == pytest.approx(A0.sum())
        assert trace.grads["rows[0][1]"] == pytest.approx(B0.sum())


def _plain_grad(cell, data, name):
    """d L/d(real part) − i d L/d(imaginary part) of the plain cell at ``data``, by central
    differences (HIPS autograd's gradient of a complex input; d L/d x of a real one)."""
    kind = type(data[name])

    def loss(v):
        ns = {"np": np, **data, name: v if kind is np.ndarray else kind(v[()])}
        exec(cell, ns)
        return float(ns["L"])

    x = np.array(data[name])
    g = central(loss, x).real
    if np.iscomplexobj(x):
        g = g - 1j * central(lambda y: loss(x + 1j * y), np.zeros(x.shape))
    return g


@pytest.mark.parametrize(
    "cell, data",
    [
        ("L = np.sum(np.abs(z))", {"z": np.array([1 + 2j, 3 - 1j])}),
        ("L = abs(c) + x", {"c": 1.5 - 2j, "x": 2.0}),
        ("L = abs(x * 1j) + x", {"x": 2.0}),
        ("c = complex(x, y)\nL = abs(c) + c.imag + abs(complex(x))", {"x": 0.7, "y": -0.4}),
        ("L = abs(1j * x) + x", {"x": 2.0}),
        ("L = np.sum(np.abs(np.exp(1j * a)) * a)", {"a": A0}),
        ("L = np.sum(np.asarray(a, dtype=np.complex128).imag * a) + a[0]", {"a": A0}),
        (
            "w = z * x\nL = w.real * w.imag + np.angle(z.conjugate(), deg=True) / 90",
            {"z": 0.3 - 1.2j, "x": 0.7},
        ),
        ("w = np.sum(z * a)\nL = np.var(z) + (w * w.conj()).real", {"z": A0 - 1j * B0, "a": B0}),
        (
            "w = z * 1.0\nw[0] = x * 1j\nw += x\nw *= z\nL = np.sum(np.abs(w))",
            {"z": A0 - 1j * B0, "x": 0.7},
        ),
        (
            "w = np.zeros(3, dtype=complex)\nfor i in range(3):\n    w[i] = z[i] * x\nL = np.sum(w.imag)",
            {"z": A0 + 1j * B0, "x": 0.7},
        ),
        (
            "w = np.empty(3, complex)\nnp.multiply(z, x, out=w)\nL = np.real(np.vdot(z, w))",
            {"z": A0 - 1j * B0, "x": 0.7},
        ),
        ("w = np.empty(3)\nnp.multiply(a, x, out=w)\nL = np.sum(w ** 2)", {"a": A0, "x": 0.7}),
        (
            "L = abs(np.linalg.det(np.outer(z, z) + np.eye(3))) + np.abs(np.linalg.inv(np.diag(z)).sum())",
            {"z": A0 - 1j * B0},
        ),
        (
            "L = np.abs(np.sum(np.sort(z) * np.cumprod(z) * z[[0, 0, 2]] * np.array([z[1], x, 2.0])))",
            {"z": A0 - 1j * B0, "x": 0.7},
        ),
    ],
)
def test_complex_numbers_are_differentiated(cell, data):
    """A complex input's gradient is d/d(real part) − i d/d(imaginary part), HIPS autograd's
    and JAX's; a real input meeting complex numbers keeps its gradient. The check leaves
    complex inputs out, and says so."""
    run = gradmagic.autograd(cell + "\nL")(np=np, **data)
    assert not run.trace.warnings and not run.trace.cut_notes
    for name in data:
        np.testing.assert_allclose(run.grads[name], _plain_grad(cell, data, name), atol=1e-6)
    report = run.check()
    complex_inputs = [n for n, v in data.items() if np.iscomplexobj(v)]
    assert not {r.name for r in report.rows} & set(complex_inputs)
    assert all(r.status == "pass" for r in report.rows)
    if complex_inputs:
        assert any("complex inputs not checked" in n for n in report.notes), report.notes


@pytest.mark.parametrize(
    "cell",
    [
        "w = np.complex128(2 + 1j) * (x * 1j)",
        "w = (x * 1j) * np.complex128(2 + 1j)",
        "w = np.float64(2.0) * (x * 1j) - np.complex128(1j) / (x * 1j)",
        "w = (x * 1j) ** np.float64(2.0) + np.float64(2.0) ** (x * 1j)",
    ],
)
def test_python_and_numpy_complex_numbers_give_plain_types(ip, cell):
    """A Python complex meeting a numpy number gives what Python's operators give (numpy's
    type where numpy's method wins), with the real input's gradient kept."""
    ip.user_ns.update(np=np, x=0.7)
    ip.run_cell(cell)
    plain = ip.user_ns["w"]
    assert ip.run_cell("%%autograd -q\n" + cell + "\nL = abs(w)\nL").success
    assert type(ip.user_ns["w"]) is type(plain) and ip.user_ns["w"] == plain
    truth = _plain_grad(cell + "\nL = abs(w)", {"x": 0.7}, "x")
    assert gradmagic.last.grads["x"] == pytest.approx(float(truth), rel=1e-6)


def test_a_complex_result_with_no_rule_is_a_cut():
    run = gradmagic.autograd("L = np.sum(np.real(np.fft.ihfft(a)))\nL")(np=np, a=A0.copy())
    assert any("numpy.ihfft" in w and "no gradient rule" in w for w in run.trace.warnings)


def test_a_graph_of_complex_numbers_is_not_replayed_on_real_numbers():
    """Where the code cannot be run again the check replays the graph, and --torch always
    does, on real numbers: a graph holding complex numbers is said to be unchecked."""
    run = gradmagic.autograd("L = np.sum(np.abs(z * x)) + x\nL")(np=np, z=A0 - 1j * B0, x=0.5)
    run.trace.rerun.problem = "it cannot here"
    report = run.check()
    assert not report.rows and "complex numbers" in report.unchecked
    pytest.importorskip("torch")
    from gradmagic.analysis import torchcheck

    assert "complex numbers" in torchcheck.compare(run.trace).error
