"""Arrays in an %%autograd cell are numpy's own ndarrays (issue #12, the array side).

A float array the cell reads or makes is a ``gradmagic.core.array.Array``: an ndarray
subclass that is also a node. These tests check each way it must behave as the plain
array would (aliases, ``out=``, in-place writes, identity, types and reprs after the cell,
later plain cells) and that the gradients it gives match central differences of the
plain cell.
"""

import json
import warnings

import numpy as np
import pytest

import gradmagic
from gradmagic.core.array import Array
from numeric import central

pytestmark = pytest.mark.usefixtures("ip")


def autograd(ip, body, options="-q"):
    return ip.run_cell(f"%%autograd {options}\n{body}")


def plain_run(source, ns):
    """``source`` run as plain Python in a copy of ``ns`` (arrays copied); the namespace."""
    ns = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in ns.items()}
    exec(compile(source, "<plain>", "exec"), ns)
    return ns


def leaf(trace, label):
    """The gradient of the leaf labelled ``label`` (the array as the cell first read it)."""
    (node,) = [n for n in trace.nodes if n.label == label and n.is_leaf and n.index >= 0]
    return node.grad


# --------------------------------------------------------------------------- aliases, in place
def test_an_alias_sees_an_in_place_change_and_so_does_the_users_array(ip):
    original = np.ones(3)
    ip.user_ns.update(np=np, W=original, keep=original)
    assert autograd(ip, "V = W\nW += 1\nL = (V * W).sum()").success
    ns = ip.user_ns
    assert ns["V"] is ns["W"]  # one object, as in plain Python
    assert original.tolist() == [2.0, 2.0, 2.0]  # the user's own memory was written
    assert ns["keep"] is original and type(ns["keep"]) is np.ndarray
    # d/dW0 of sum((W0 + 1)²) = 2 (W0 + 1)
    assert leaf(gradmagic.last, "W").tolist() == [4.0, 4.0, 4.0]
    assert gradmagic.last.check().passed


CELLS = [  # (name, cell, the array the cell reads); L is the target
    ("iadd_after_use", "y = W * 3.0\nW += 1.0\nL = (y * W).sum()"),
    ("imul_twice", "W *= 2.0\nW -= 0.5\nL = (W * W).sum()"),
    (
        "out_of_a_ufunc",
        "o = np.empty(3)\nr = np.multiply(W, 2.0, out=o)\nL = (r * W).sum() + o.sum()",
    ),
    ("setitem", "V = W * 1.0\nV[0] = 5.0\nL = (V * W).sum()"),
    ("views", "V = W.reshape(3, 1)\nT = V.T\nL = (T @ V).sum() + W[1:].sum() * W[0]"),
    ("reductions", "L = np.var(W) + W.std() + np.mean(W, axis=0) + W.max() + np.linalg.norm(W)"),
    ("clip_where", "L = np.clip(W, -0.5, 0.9).sum() + np.where(W > 0, W, 2.0 * W).sum()"),
    ("scalar_nodes", "s = W.sum()\nt = s * 2.0 + s ** 2\nL = t / (1.0 + np.exp(-s))"),
    ("mixed_with_numbers", "x = 2.0\nA = np.ones(3) * x\nL = (A * W).sum() * x"),
    ("cumsum_atleast", "L = np.cumsum(W)[-1] * np.atleast_2d(W)[0, 2] + np.sum(W.ravel() ** 3)"),
    # a view used, then the array it views written in place: what was computed from the
    # view keeps its old numbers (a training loop's `dz @ W2.T` before `W2 -= lr * g`)
    ("view_then_write", "x = W * 1.0\nd = x * W[::-1]\nW -= 0.5\nL = (d * d).sum()"),
    ("view_of_view_then_write", "V = W.reshape(3, 1).T\nd = V * V[:, ::-1]\nW *= 3.0\nL = d.sum()"),
    (
        "named_view_then_setitem",
        "V = W[1:]\nd = (V * V).sum()\nW[1] = 7.0\nL = d + (V * W[1:]).sum()",
    ),
    (
        "training_step",
        "A = np.outer(W, W)\nfor _ in range(2):\n    g = A @ W.T\n    W -= 0.1 * g\n"
        "L = (A @ W).sum()",
    ),
]


@pytest.mark.parametrize("name, cell", CELLS, ids=[c[0] for c in CELLS])
def test_array_cells_give_the_gradient_of_the_plain_cell(ip, name, cell):
    W0 = np.array([0.3, -1.2, 0.8])
    ip.user_ns.update(np=np, W=W0.copy())
    assert autograd(ip, cell).success, name
    trace = gradmagic.last

    def f(w):
        return float(plain_run(cell, {"np": np, "W": w})["L"])

    assert trace.value == pytest.approx(f(W0), rel=1e-13)  # plain Python's number
    plain = plain_run(cell, {"np": np, "W": W0.copy()})["L"]
    assert type(trace.value) is type(plain), (type(trace.value), type(plain))
    np.testing.assert_allclose(leaf(trace, "W"), central(f, W0), rtol=1e-6, atol=1e-8)
    assert trace.check().passed


ELEMENT_READS = """
V = W * 1.0
s = 0.0
for k in range(len(idx)):
    i, j = idx[k]
    s += V[i, j] * W[j % 6, i % 8]
R = V.reshape(48)  # (its gradient reaches V first, and becomes V's own)
L = R.sum() * 0.5 + s + W[[0, 0, 5], [1, 1, 7]].sum() + np.tanh(W[W > 0.9]).sum()
L = L + (W[2, 1:4] ** 2).sum()
"""


def test_element_reads_of_a_bigger_array_give_the_gradient_of_the_plain_cell(ip):
    # (a few elements of a big array are added into its gradient in place: the other
    # nodes sharing that gradient's memory must keep theirs)
    rng = np.random.default_rng(5)
    W0 = rng.random((6, 8))
    idx = [(int(i), int(j)) for i, j in rng.integers(0, 6, (40, 2))] + [(1, 2)] * 3
    ip.user_ns.update(np=np, W=W0.copy(), idx=idx)
    assert autograd(ip, ELEMENT_READS).success
    trace = gradmagic.last

    def f(w):
        return float(plain_run(ELEMENT_READS, {"np": np, "W": w, "idx": idx})["L"])

    assert trace.value == pytest.approx(f(W0), rel=1e-13)
    np.testing.assert_allclose(leaf(trace, "W"), central(f, W0), rtol=1e-6, atol=1e-8)
    dV = np.full((6, 8), 0.5)
    for i, j in idx:
        dV[i, j] += W0[j % 6, i % 8]
    (v,) = [n for n in trace.nodes if n.label == "V"]
    (r,) = [n for n in trace.nodes if n.label == "R"]
    np.testing.assert_allclose(v.grad, dV, rtol=1e-12)
    assert r.grad.tolist() == [0.5] * 48
    assert trace.check().passed


def test_a_write_with_no_rule_is_done_and_reported(ip):
    ip.user_ns.update(np=np)
    assert autograd(
        ip,
        "T = np.array([3.0, 1.0, 2.0])\nU = T * 2.0\nT.sort()\n"
        "Z = np.zeros(2)\nZ.fill(7.0)\nL = (U * T).sum() + Z.sum()",
    ).success
    ns = ip.user_ns
    assert ns["T"].tolist() == [1.0, 2.0, 3.0] and ns["Z"].tolist() == [7.0, 7.0]
    assert any(".sort() changes 'T' in place" in w for w in gradmagic.last.warnings)
    assert not any("'Z'" in w for w in gradmagic.last.warnings)  # nothing used Z before


def test_flat_assignment_and_out_write_into_the_array(ip):
    ip.user_ns["np"] = np
    assert autograd(
        ip,
        "x = np.array([[1.0], [2.0]])\ny = np.array([4.0, 5.0])\n"
        "b = np.broadcast(x, y)\nout = np.empty(b.shape)\n"
        "out.flat = [u + v for (u, v) in b]\nL = out.sum()",
    ).success
    assert ip.user_ns["out"].tolist() == [[5.0, 6.0], [6.0, 7.0]]
    assert autograd(
        ip, "o1 = np.array([0], dtype='d')\no2 = np.cos([0.1], o1)\nsame = o2 is o1\nL = o1.sum()"
    ).success
    assert ip.user_ns["same"] is True and ip.user_ns["o1"].tolist() == [np.cos(0.1)]


# --------------------------------------------------------------------------- identity
def test_functions_that_return_their_argument_return_the_node(ip):
    ip.user_ns.update(np=np, x=np.arange(3.0))
    assert autograd(
        ip,
        "a = np.atleast_1d(x) is x\nb = np.ascontiguousarray(x) is x\n"
        "c = np.atleast_2d(x).base is x\nd = np.asarray(x) is x\n"
        "e = np.asanyarray(x) is x\nL = x.sum()",
    ).success
    assert all(ip.user_ns[k] is True for k in "abcde")


# --------------------------------------------------------------------------- types and reprs
def test_arrays_and_their_numbers_look_like_numpys_in_and_after_the_cell(ip, capsys):
    ip.user_ns["np"] = np
    body = (
        "W = np.array([1.5, -2.0])\nprint(repr(W), W, type(W).__name__, "
        "isinstance(W, np.ndarray))\ns = W.sum()\nprint(repr(s), type(s).__name__, "
        "isinstance(s, np.float64), np.iterable(s), np.iterable(W))\nL = s * 2.0"
    )
    exec(compile(body, "<plain>", "exec"), {"np": np})
    printed = capsys.readouterr().out
    assert autograd(ip, body).success
    assert capsys.readouterr().out == printed
    W, s, L = (ip.user_ns[k] for k in ("W", "s", "L"))
    assert type(W) is Array and type(s) is np.float64 and type(L) is np.float64
    assert type(W).__name__ == "ndarray" and type(W).__module__ == "numpy"
    assert repr(W) == "array([ 1.5, -2. ])" and repr(L) == "np.float64(-1.0)"
    assert json.dumps(L) == "-1.0" and W.grad.tolist() == [2.0, 2.0]
    assert W.data.__class__ is np.ndarray and W.data.tolist() == [1.5, -2.0]


def test_later_plain_cells_get_plain_arrays_and_numbers(ip):
    ip.user_ns["np"] = np
    assert autograd(ip, "W = np.array([[1.0, 2.0], [3.0, 4.0]])\nL = (W ** 2).sum()").success
    assert ip.run_cell(
        "r = [W * 2, W[0], W.T, W.reshape(-1), np.exp(W), W.sum(), W @ W, W.copy(), "
        "L * 2, L + 1.0, np.sqrt(L), W[0, 1], list(W)[0], W.mean(axis=0), -W, W.astype(int)]"
    ).success
    for x in ip.user_ns["r"]:
        assert type(x) in (np.ndarray, np.float64, np.int64), (type(x), x)
    assert ip.run_cell("W[0, 0] = 10.0\nW += 1").success  # plain numpy code on the kept array
    assert ip.user_ns["W"].tolist() == [[11.0, 3.0], [4.0, 5.0]]
    assert gradmagic.last.grads["W"].tolist() == [[2.0, 4.0], [6.0, 8.0]]  # the run is kept


def test_numpys_warnings_name_the_users_line(ip):
    ip.user_ns.update(np=np, W=np.array([1.0, 2.0]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert autograd(ip, "a = W * 2.0\nb = np.log(a - 3.0)\nL = np.nansum(b)").success
    (w,) = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert "invalid value encountered in log" in str(w.message)
    assert w.lineno == 3 and "gradmagic" not in w.filename


def _warned(ip, cell, first=0):
    """The warnings a cell gives (every one shown; a line of the cell counted from ``first``),
    and the error it raises, if any."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ip.run_cell(cell)
    error = result.error_in_exec
    mine = [w.filename.startswith("<ipython") for w in caught]  # (else numpy's own file)
    return [(w.category, str(w.message), w.lineno - first * c) for w, c in zip(caught, mine)], (
        type(error).__name__ if error is not None else None,
        str(error) if error is not None else None,
    )


@pytest.mark.parametrize(
    "body",
    [
        # a node's numpy scalar arithmetic and ufuncs, warned about once each time they run
        "s = W.sum()\nfor k in range(3):\n    t = s / 0.0\n    u = np.log(s - s)\nL = s * 2",
        # the user's own error state, set in the cell, obeyed by the nodes' numpy calls
        "np.seterr(divide='ignore')\ns = W.sum()\nt = s / 0.0\nu = np.log(W - 1.0)\n"
        "r = np.sqrt(s - 10.0)\nnp.seterr(divide='warn')\nv = np.log(W - 1.0)\nL = np.sum(W * 2)",
        "with np.errstate(all='raise'):\n    s = W.sum()\n    t = s / 0.0\nL = s",
        "with np.errstate(invalid='ignore', divide='warn'):\n    u = np.sqrt(W - 2.0)\n"
        "    v = np.log(W - 1.0)\nL = np.sum(W)",
        # reductions and products that overflow (numpy's own file named), a max of nan
        "big = W * 1e308\nt = np.sum(big)\nm = np.max(np.log(W - 1.5))\nL = np.sum(W)",
        "p = np.prod(W * 1e200)\nq = np.dot(W * 1e200, W * 1e200)\nL = np.sum(W)",
    ],
)
def test_numpys_error_state_and_warnings_are_a_plain_cells(ip, body):
    """numpy's floating-point warnings and errors in a recorded cell are the plain cell's:
    the same messages, categories and lines (the magic's line counted), the user's
    ``np.seterr`` and ``np.errstate`` obeyed, whatever the engine does to be quick."""
    ip.user_ns.update(np=np, W=np.array([1.0, 2.0, 3.0]))
    plain = _warned(ip, body)
    np.seterr(all="warn", under="ignore")
    ip.user_ns.update(W=np.array([1.0, 2.0, 3.0]))
    magic = _warned(ip, "%%autograd -q\n" + body, first=1)
    np.seterr(all="warn", under="ignore")
    assert magic == plain
    assert plain[0] or plain[1][0]


# --------------------------------------------------------------------------- numpy functions
def test_numpy_functions_without_a_rule_compute_as_numpy_and_say_so(ip):
    ip.user_ns.update(np=np, A=np.array([[2.0, 1.0], [1.0, 3.0]]), b=np.array([1.0, 2.0]))
    cell = (
        "x = np.linalg.solve(A, b)\ni = np.linalg.inv(A)\nB = np.block([[A, A]])\n"
        "e = np.einsum('ij->j', A)\nX, Y = np.meshgrid(b, b)\nt = np.array2string(A)\n"
        "f = A.astype(np.complex64)\nm = np.max(A, where=[[True, False], [True, True]], "
        "initial=0.0)\nd = np.dot(np.ones((2, 2, 2)), np.ones((2, 2)))\n"
        "L = (x * b).sum() + (A * A).sum()"
    )
    expected = plain_run(cell, {"np": np, "A": ip.user_ns["A"], "b": ip.user_ns["b"]})
    assert autograd(ip, cell).success
    for k in ("x", "i", "B", "e", "X", "Y", "t", "f", "m", "d"):
        got, want = ip.user_ns[k], expected[k]
        assert repr(got) == repr(want) and type(got).__name__ == type(want).__name__, k
    warned = " ".join(gradmagic.last.warnings)
    assert "numpy.block has no gradient rule" in warned
    assert "solve" not in warned and "einsum" not in warned  # these have rules
    assert "astype(complex64)" in warned
    # A enters the graph through solve and A * A
    A0, b0 = np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([1.0, 2.0])
    want = central(lambda a: float((np.linalg.solve(a, b0) * b0).sum() + (a * a).sum()), A0)
    np.testing.assert_allclose(gradmagic.last.grads["A"], want, rtol=1e-6)


def test_an_array_times_a_number_node_is_a_float_array(ip):
    ip.user_ns["np"] = np
    assert autograd(ip, "x = 2.0\nA = np.ones(3) * x\nL = A.sum()").success
    assert ip.user_ns["A"].dtype == np.float64 and ip.user_ns["x"].grad == 3.0


def test_an_array_the_cell_writes_into_is_still_an_input(ip):
    """``W[1] = 7.0`` in the cell: ``W`` is lent as a leaf all the same (it views the user's
    memory, which the write changes as in plain Python), so the gradient reaches it."""
    original = np.array([0.3, -1.2, 0.8])
    ip.user_ns.update(np=np, W=original)
    assert autograd(ip, "V = W[:2]\nd = (V * V).sum()\nW[1] = 7.0\nL = d * W.sum()").success
    assert original.tolist() == [0.3, 7.0, 0.8]  # the user's own memory was written
    assert np.shares_memory(ip.user_ns["W"], original)

    def f(w):
        return float(
            plain_run(
                "V = W[:2]\nd = (V * V).sum()\nW[1] = 7.0\nL = d * W.sum()", {"np": np, "W": w}
            )["L"]
        )

    W0 = np.array([0.3, -1.2, 0.8])
    np.testing.assert_allclose(leaf(gradmagic.last, "W"), central(f, W0), rtol=1e-6, atol=1e-8)


def test_each_gradient_and_value_the_trace_keeps_is_its_own(ip):
    """Gradients that are one array in the sweep (``a + 1`` passes its gradient on as it is)
    and numbers the user's arrays hold are kept apart: changing one, or the user's arrays
    after the cell, changes nothing else the trace shows."""
    ip.user_ns.update(np=np, W=np.array([1.0, -2.0, 3.0]))
    assert autograd(ip, "a = W + 1.0\nb = a - 2.0\nc = b[0] * 2.0\nL = (b * 3.0).sum() + c").success
    trace = gradmagic.last
    grads = {name: np.array(g, copy=True) for name, g in trace.grads.items()}
    values = {name: np.array(v, copy=True) for name, v in trace.values.items()}
    for name in ("a", "b"):
        trace.grads[name] *= 0.0  # one gradient changed in place...
        changed = [n for n, g in trace.grads.items() if not np.array_equal(g, grads[n])]
        assert changed == [name], changed  # ... and no other
        grads[name] = trace.grads[name].copy()
    ip.user_ns["W"][:] = 7.0
    ip.user_ns["a"][:] = 7.0
    for name, v in trace.values.items():
        assert np.array_equal(v, values[name]), name
    assert grads["W"].tolist() == [5.0, 3.0, 3.0]
