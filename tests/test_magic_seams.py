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
]


def plain(cell, w):
    ns = {"np": np, "W": w.copy()}
    exec(compile(cell, "<plain>", "exec"), ns)
    return float(ns["L"])


@pytest.mark.parametrize("name, cell", CELLS, ids=[c[0] for c in CELLS])
def test_the_gradient_of_the_plain_cell_with_no_cut(name, cell):
    run = gradmagic.autograd(cell + "\nL", check=False)(np=np, W=W0.copy())
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

    run = gradmagic.autograd(cell + "\nL", check=False)(np=np, W=W0.copy())
    assert compare(run.trace).passed


def test_float_and_item_give_python_floats_as_plain_code_does():
    cell = "a = float(W.sum())\nb = W.max().item()\nc = W[2:3, 0:1].item()\nL = a + b + c"
    run = gradmagic.autograd(cell + "\nL", check=False)(np=np, W=W0.copy())
    for name in "abc":
        assert type(run.values[name]) is float
