"""Writes into an array's elements in a recorded cell: gradients and what they cost.

``K[i, j] = y`` in a loop is how students fill a matrix or a dynamic programming table.
Each cell below is run by the magic and as plain Python; the gradient of ``L`` with
respect to the array ``W`` it reads must match central differences of the plain cell, and
the numerical check must pass. The cost of a fill loop must grow with what it writes,
not with the array times the number of writes.
"""

import numpy as np
import pytest

import gradmagic
from cells_corpus import GRAM
from numeric import central

W0 = np.array(
    [[0.3, -1.2, 0.8], [0.5, 0.1, -0.4], [1.1, -0.7, 0.2], [-0.6, 0.9, 0.35]]
)  # the array every cell reads

CELLS = [  # (name, cell): L is the target
    (
        "fill_loop",
        "K = np.zeros((4, 4))\n"
        "for i in range(4):\n"
        "    for j in range(4):\n"
        "        d = W[i] - W[j]\n"
        "        K[i, j] = np.exp(-np.dot(d, d) / 2.0)\n"
        "L = np.linalg.slogdet(K + 0.1 * np.eye(4))[1]",
    ),
    (  # later writes overwrite parts of earlier ones: those values lose their gradient
        "overlapping_writes",
        "V = W * 1.0\n"
        "V[0, :] = W[1] * 2.0\n"
        "V[:, 1] = W[2, 1] ** 2\n"
        "V[0, 1] = np.sin(W[3, 0])\n"
        "V[1:3, 0] = W[0, :2] * W[3, 2]\n"
        "L = (V * V).sum()",
    ),
    (  # each element read back is the value written there last
        "write_read_write",
        "V = np.zeros(5)\n"
        "V[0] = W[0, 0]\n"
        "for k in range(1, 5):\n"
        "    V[k] = V[k - 1] * W[k % 4, 1] + 1.0\n"
        "    V[k - 1] = V[k - 1] * 0.5 + V[k]\n"
        "L = (V ** 2).sum()",
    ),
    (  # a whole read between writes: what was computed from it keeps the old numbers
        "read_all_between_writes",
        "V = W * 1.0\n"
        "V[1, 1] = 3.0 * W[0, 0]\n"
        "s = V.sum()\n"
        "V[1, 1] = s\n"
        "V[2] = V[1] * 2.0\n"
        "V[3, 2] = V[2, 0] * V[1, 1]\n"
        "L = (V ** 2).sum() + s",
    ),
    (  # a value computed from a view of the array, written into the array: the view's
        # read closes the run of writes, or the value would depend on its own node
        "value_read_through_a_view",
        "K = np.zeros((3, 3))\n"
        "K[0, 0] = W[0, 0]\n"
        "r = K[0]\n"
        "K[0, 1] = W[1, 1] * 2.0\n"
        "K[1, 1] = r.sum() * W[2, 2]\n"
        "L = (K * K).sum() + r[1]",
    ),
    (  # a view taken, then the array written: the view follows the array, as numpy's does
        "view_then_element_writes",
        "V = W * 1.0\n"
        "R = V[1]\n"
        "s = (R * R).sum()\n"
        "for j in range(3):\n"
        "    V[1, j] = W[0, j] * s\n"
        "L = s + (R * W[2]).sum() + V.sum()",
    ),
    (
        "fancy_and_mask_writes",
        "V = W * 1.0\n"
        "V[[0, 2], [1, 1]] = W[1, 2] * 5.0\n"
        "V[[3, 1], [0, 2]] = W[0, :2] ** 2\n"
        "V[W > 0.6] = 0.25\n"
        "V[V < -0.5] = W[2, 2]\n"
        "L = (V * V).sum() + V[0, 1] * V[3, 0]",
    ),
    (  # broadcast values, constants, and elements read back from a broadcast
        "broadcast_and_constant_writes",
        "V = np.zeros((3, 4))\n"
        "V[1] = W[0, 0]\n"
        "V[:, 2] = W[1]\n"
        "V[0, :3] = W[2]\n"
        "V[2, 3] = 7.0\n"
        "V[2, :2] = 1.5\n"
        "L = (V * V).sum() + V[1, 1] * 2.0 + V[2, 3] * V[0, 2]",
    ),
    (
        "add_into_an_element",
        "V = W * 1.0\n"
        "for k in range(6):\n"
        "    V[k % 3, 1] += W[k % 4, 2] * V[(k + 1) % 3, 0]\n"
        "    V[k % 4, 2] *= 0.5\n"
        "L = (V ** 2).sum()",
    ),
    (  # an int array written and used: plain numbers, the float array a node
        "int_array_beside",
        "M = np.zeros((4, 3), dtype=int)\n"
        "M[0, 1] = 2\n"
        "M[2] = 3\n"
        "V = W * M\n"
        "V[1, 1] = W[0, 0]\n"
        "L = (V ** 2).sum()",
    ),
    (  # an edit distance with float costs: a table filled from what it holds
        "edit_distance_table",
        "a, b = W[0] * 2.0, W[1] + W[2]\n"
        "D = np.zeros((4, 4))\n"
        "for i in range(1, 4):\n"
        "    D[i, 0] = D[i - 1, 0] + a[i - 1] ** 2\n"
        "    D[0, i] = D[0, i - 1] + b[i - 1] ** 2\n"
        "for i in range(1, 4):\n"
        "    for j in range(1, 4):\n"
        "        D[i, j] = min(D[i - 1, j] + a[i - 1] ** 2, D[i, j - 1] + b[j - 1] ** 2,\n"
        "                      D[i - 1, j - 1] + (a[i - 1] - b[j - 1]) ** 2)\n"
        "L = D[3, 3]",
    ),
    (  # a Viterbi table in float: each element from the whole previous row
        "viterbi_table",
        "T = np.zeros((4, 3))\n"
        "T[0] = W[0]\n"
        "for t in range(1, 4):\n"
        "    for s in range(3):\n"
        "        T[t, s] = np.max(T[t - 1] + W[:3, s]) + W[t, s]\n"
        "L = T[3].sum() + np.log(np.exp(T).sum())",
    ),
    (  # an in-place operation between element writes
        "in_place_between_writes",
        "V = W * 1.0\n"
        "V[0, 0] = W[1, 1] * 3.0\n"
        "V *= W\n"
        "V[0, 1] = V[0, 0] + 1.0\n"
        "V += 1.0\n"
        "V[2, 2] = V[0, 1] ** 2\n"
        "L = (V ** 2).sum()",
    ),
]


def plain(cell, w):
    ns = {"np": np, "W": w.copy()}
    exec(compile(cell, "<plain>", "exec"), ns)
    return float(ns["L"])


@pytest.mark.parametrize("name, cell", CELLS, ids=[c[0] for c in CELLS])
def test_element_writes_give_the_gradient_of_the_plain_cell(name, cell):
    run = gradmagic.autograd(cell + "\nL")(np=np, W=W0.copy())
    assert run.value == pytest.approx(plain(cell, W0), rel=1e-13)
    np.testing.assert_allclose(
        run.grads["W"], central(lambda w: plain(cell, w), W0), rtol=1e-6, atol=1e-8
    )
    assert run.check().passed


@pytest.mark.parametrize("name, cell", CELLS, ids=[c[0] for c in CELLS])
def test_element_writes_replayed_by_pytorch_give_the_same_gradients(name, cell):
    pytest.importorskip("torch")
    from gradmagic.analysis.torchcheck import compare

    run = gradmagic.autograd(cell + "\nL", check=False)(np=np, W=W0.copy())
    assert compare(run.trace).passed


def test_a_fill_loop_keeps_numbers_in_proportion_to_what_it_writes():
    # copying the matrix at each of its n² writes kept n⁴ numbers (20 MB here, 3 GB at 100)
    n = 40
    X = np.random.default_rng(0).random((n, 3))
    run = gradmagic.autograd(GRAM, check=False)(np=np, X=X, n=n, ell=0.7)
    kept = sum(a.size for a in run.trace.tensor_data.values())
    assert kept < 40 * n * n, kept
    plain_ns = {"np": np, "X": X, "n": n, "ell": 0.7}
    exec(GRAM, plain_ns)
    assert run.value == pytest.approx(float(plain_ns["L"]), rel=1e-12)


def test_the_fill_loops_gradient_matches_central_differences():
    n = 6
    X = np.random.default_rng(1).random((n, 3))

    def f(ell):
        ns = {"np": np, "X": X, "n": n, "ell": float(ell[0])}
        exec(GRAM, ns)
        return float(ns["L"])

    run = gradmagic.autograd(GRAM)(np=np, X=X, n=n, ell=0.7)
    assert run.grads["ell"] == pytest.approx(central(f, np.array([0.7]))[0], rel=1e-6)
    np.testing.assert_allclose(
        run.grads["X"],
        central(lambda x: _gram_of(x, n), X),
        rtol=1e-5,
        atol=1e-7,
    )
    assert run.check().passed


def _gram_of(X, n):
    ns = {"np": np, "X": X, "n": n, "ell": 0.7}
    exec(GRAM, ns)
    return float(ns["L"])
