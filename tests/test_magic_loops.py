"""Loops over numpy scalars under %%autograd: an element read from an array (``P[i, j]``), a
reduction or product to one number (``np.sum(A)``, ``np.dot(u, v)``, ``X[i].dot(W)[j]``) and
the arithmetic on them are float64 number nodes. Each cell gives plain numpy's values and
types, plain numpy's warnings (once a line, as plain code shows them), and the gradient of
central differences of the plain cell; the numerical check agrees."""

import warnings

import numpy as np
import pytest

import gradmagic

from numeric import central

RNG = np.random.default_rng(3)
INPUTS = {
    "W": RNG.normal(size=(4, 3)),
    "v": RNG.normal(size=3),
    "pairs": [(0, 1), (2, 2), (3, 0), (0, 1), (1, 2)],
}

CELLS = [
    (
        "bigram_nll",
        "P = np.exp(W) / np.exp(W).sum(1, keepdims=True)\nnll = 0.0\n"
        "for a, b in pairs:\n    p = P[a, b]\n    nll += -np.log(p)\nL = nll / len(pairs)",
    ),
    (
        "element_writes_then_reads",
        "K = np.zeros((3, 3))\nfor i in range(3):\n    for j in range(3):\n"
        "        d = W[i] - W[j]\n        K[i, j] = np.exp(-np.dot(d, d) / 2)\n"
        "L = K[0, 1] * K[2, 0] + np.sum(K * K)",
    ),
    (
        "max_of_windows_and_margins",
        "s = 0.0\nfor i in range(3):\n    m = np.max(W[i:i + 2, :2])\n"
        "    c = W[i].dot(v)\n    margin = m - c + 1\n    if margin > 0:\n        s += margin\n"
        "L = s * np.sum(W * W) + float(W[1, 1]) * W[0, 2].item()",
    ),
    (
        "math_of_a_reduction",
        "import math\nL = math.exp(np.sum(W) / 10) * W[0, 0] + math.sqrt(W[1, 1] ** 2)",
    ),
    (
        "numbers_of_numbers",
        "a = W[0, 0]\nb = a * a - W[1, 2] / (1 + W[2, 1] ** 2)\n"
        "L = np.sqrt(b * b + 1) + np.tanh(b) * abs(a) + np.float64(b).astype(np.float64)",
    ),
]


def _plain(cell, data):
    ns = {"np": np, **{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in data.items()}}
    exec(cell, ns)
    return ns


@pytest.mark.parametrize("name, cell", CELLS, ids=[c[0] for c in CELLS])
def test_scalar_loops_give_plain_values_and_central_difference_gradients(name, cell):
    data = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in INPUTS.items()}
    run = gradmagic.autograd(cell + "\nL")(np=np, **data)
    plain = _plain(cell, INPUTS)
    assert type(run.value) is type(plain["L"]) and run.value == plain["L"], name
    for k in ("W", "v"):
        np.testing.assert_array_equal(data[k], INPUTS[k])  # the inputs are left as they were

    def loss(x, k):
        return float(_plain(cell, {**INPUTS, k: x})["L"])

    read = [k for k in ("W", "v") if k in run.grads]
    assert "W" in read and ("v" in read) == ("v" in cell), name
    for k in read:
        want = central(lambda x: loss(x, k), INPUTS[k].copy())
        np.testing.assert_allclose(run.grads[k], want, rtol=1e-6, atol=1e-7, err_msg=name)
    assert run.trace.check().passed, name


def test_an_element_and_its_arithmetic_are_numpy_float64s_to_the_cell(ip):
    """What the cell sees of ``P[i, j]`` and of numbers made from it is numpy's float64: its
    type's name, repr and dtype, as in the plain cell."""
    cell = (
        "p = W[1, 2]\nq = -np.log(abs(p)) * 2.0\nr = np.sum(W[0]) + q\n"
        "seen = [type(x).__name__ for x in (p, q, r)] + [repr(q), str(r), q.dtype.name]\n"
        "L = r"
    )
    ip.user_ns.update(np=np, W=INPUTS["W"].copy())
    assert ip.run_cell("%%autograd -q\n" + cell).success
    seen = ip.user_ns["seen"]
    assert seen == _plain(cell, INPUTS)["seen"]
    assert seen[:3] == ["float64"] * 3
    assert type(ip.user_ns["r"]) is np.float64  # plain again after the cell


LOUD = (
    "s = 0.0\nfor i in range(5):\n    p = W[0, i % 3] * 0.0\n"
    "    s += np.log(p) + W[1, 0] / p\nL = s"
)


def _warned(ip, prefix):
    ip.user_ns.update(np=np, W=INPUTS["W"].copy())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        assert ip.run_cell(prefix + LOUD).success
    return [str(w.message) for w in caught if w.category is RuntimeWarning]


def test_numpy_warnings_in_a_loop_are_shown_once_a_line_as_in_plain_code(ip):
    plain = _warned(ip, "")
    assert len(plain) == 3  # divide by zero in log, in scalar divide; invalid value in add
    assert _warned(ip, "%%autograd -q\n") == plain


def test_an_error_state_that_raises_raises_numpy_s_error(ip):
    cell = "with np.errstate(divide='raise'):\n    L = np.log(W[0, 0] * 0.0)"
    ip.user_ns.update(np=np, W=INPUTS["W"].copy())
    result = ip.run_cell("%%autograd -q\n" + cell)
    assert isinstance(result.error_in_exec, FloatingPointError)
    assert str(result.error_in_exec) == "divide by zero encountered in log"


def test_a_number_of_arrays_written_into_an_array_is_no_conversion(ip):
    """``K[i, j] = np.dot(W[i], W[j])``: the number stays in the graph through the write, so
    the run counts no conversion to plain numbers; its gradient is the plain cell's."""
    cell = (
        "K = np.zeros((3, 3))\nfor i in range(3):\n    for j in range(3):\n"
        "        K[i, j] = np.dot(W[i], W[j])\nL = np.sum(K * K)"
    )
    ip.user_ns.update(np=np, W=INPUTS["W"].copy())
    assert ip.run_cell("%%autograd -q\n" + cell).success
    trace = gradmagic.last
    assert trace.float_conversions == 0
    want = central(lambda x: float(_plain(cell, {"W": x})["L"]), INPUTS["W"].copy())
    np.testing.assert_allclose(trace.grads_of("W"), want, rtol=1e-6, atol=1e-7)
