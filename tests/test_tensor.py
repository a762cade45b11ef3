"""Tensor engine: every op against finite differences and PyTorch, replay, numpy dispatch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from gradmagic import no_grad
from gradmagic.core.engine import Value, state
from gradmagic.core.tensor import Tensor, cross_entropy, log_softmax, softmax, tensor
from gradmagic.core.tensor_ops import TENSOR_OPS
from gradmagic.analysis.trace import Trace

MASK = np.array(
    [[True, False, True, False], [False, False, True, True], [True, True, False, False]]
)
TARGETS = np.array([2, 0, 3])


def _setitem(a, b, *indices):
    """``a`` with ``a[index] = part`` for each index in turn, ``b``'s numbers split among them
    in order, as the op the magic records for an array written element by element."""
    from gradmagic.core.tensor import _apply, _operand

    a, b = _operand(a), _operand(b)
    writes, start = [], 0
    for index, shape in _parts(a.data, b.data, indices):
        stop = start + int(np.prod(shape))
        writes.append((index, start, stop, shape))
        start = stop
    return _apply(TENSOR_OPS["setitem"], a, b, {"writes": tuple(writes)})


def _parts(a, b, indices):
    """Each index and the shape its part of ``b`` has: all of ``b`` for one index, else
    ``b``'s numbers cut to the regions' sizes."""
    a, b = np.asarray(a), np.asarray(b)
    for index in indices:
        region = np.shape(a[index])
        if len(indices) == 1:
            yield index, (1,) * (len(region) - b.ndim) + b.shape
        else:
            yield index, region


def _torch_setitem(a, b, *indices):
    out, start = a.clone(), 0
    flat = b.reshape(-1)
    for index, shape in _parts(a.detach().numpy(), b.detach().numpy(), indices):
        stop = start + int(np.prod(shape))
        out[index] = flat[start:stop].reshape(shape) if len(indices) > 1 else b
        start = stop
    return out


class Case:
    """One op under test: our function, PyTorch's (same if None), input shapes, domain."""

    def __init__(self, name, ours, shapes, theirs=None, positive=False):
        self.name, self.ours, self.shapes = name, ours, shapes
        self.theirs = theirs or ours
        self.positive = positive

    def inputs(self, seed=0):
        rng = np.random.default_rng(seed)
        if self.positive:
            return [rng.uniform(0.5, 2.0, s) for s in self.shapes]
        return [rng.normal(size=s) for s in self.shapes]


def _tt():
    return pytest.importorskip("torch")


CASES = [
    Case("add", lambda a, b: a + b, [(3, 4), (3, 4)]),
    Case("sub", lambda a, b: a - b, [(3, 4), (3, 4)]),
    Case("mul", lambda a, b: a * b, [(3, 4), (3, 4)]),
    Case("div", lambda a, b: a / b, [(3, 4), (3, 4)], positive=True),
    Case("pow", lambda a, b: a**b, [(3, 4), (3, 4)], positive=True),
    Case("pow_const", lambda a: a**3, [(3, 4)]),
    Case("rpow", lambda a: 2.0**a, [(3, 4)]),
    Case("rsub_rdiv", lambda a: 1.0 - 3.0 / a, [(3, 4)], positive=True),
    Case("neg", lambda a: -a, [(3, 4)]),
    Case(
        "floordiv",
        lambda a, b: a // b,
        [(3, 4), (3, 4)],
        positive=True,
        theirs=lambda a, b: (a - a % b) / b,
    ),  # torch has no gradient for //; this is it
    Case("mod", lambda a, b: a % b, [(3, 4), (4,)], positive=True),
    Case(
        "rmod_rfloordiv",
        lambda a: 5.0 % a + 7.0 // a * a,
        [(3, 4)],
        positive=True,
        theirs=lambda a: 5.0 - (5.0 / a).floor() * a + (7.0 / a).floor() * a,
    ),
    Case("matmul", lambda a, b: a @ b, [(3, 4), (4, 2)]),
    Case("dot", lambda a, b: a.dot(b), [(3, 4), (4, 2)], lambda a, b: a @ b),
    Case("matmul_mv", lambda a, b: a @ b, [(3, 4), (4,)]),
    Case("matmul_vm", lambda a, b: a @ b, [(4,), (4, 2)]),
    Case("matmul_vv", lambda a, b: a @ b, [(4,), (4,)]),
    Case("matmul_batched", lambda a, b: a @ b, [(2, 3, 4), (4, 5)]),
    Case("matmul_broadcast", lambda a, b: a @ b, [(2, 1, 3, 4), (3, 4, 2)]),
    Case("matmul_v_batched", lambda a, b: a @ b, [(4,), (2, 4, 3)]),
    Case("sum", lambda a: a.sum(), [(3, 4)]),
    Case("sum_axis0", lambda a: a.sum(axis=0), [(3, 4)], lambda a: a.sum(dim=0)),
    Case(
        "sum_keepdims",
        lambda a: a.sum(axis=-1, keepdims=True),
        [(3, 4)],
        lambda a: a.sum(dim=-1, keepdim=True),
    ),
    Case("sum_axes", lambda a: a.sum(axis=(0, 2)), [(2, 3, 4)], lambda a: a.sum(dim=(0, 2))),
    Case("mean", lambda a: a.mean(), [(3, 4)]),
    Case("mean_axis1", lambda a: a.mean(axis=1), [(3, 4)], lambda a: a.mean(dim=1)),
    Case(
        "mean_keepdims",
        lambda a: a.mean(axis=0, keepdims=True),
        [(2, 3, 4)],
        lambda a: a.mean(dim=0, keepdim=True),
    ),
    Case("max", lambda a: a.max(), [(3, 4)], lambda a: a.amax()),
    Case("max_axis", lambda a: a.max(axis=1), [(3, 4)], lambda a: a.amax(dim=1)),
    Case(
        "max_keepdims",
        lambda a: a.max(axis=0, keepdims=True),
        [(3, 4)],
        lambda a: a.amax(dim=0, keepdim=True),
    ),
    Case("min_axis", lambda a: a.min(axis=-1), [(3, 4)], lambda a: a.amin(dim=-1)),
    Case("cumsum", lambda a: a.cumsum(axis=1), [(3, 4)], lambda a: a.cumsum(dim=1)),
    Case("cumsum_flat", lambda a: np.cumsum(a), [(3, 4)], lambda a: a.reshape(-1).cumsum(0)),
    Case(
        "std_var",
        lambda a: a.std(axis=0) + np.var(a, ddof=1),
        [(3, 4)],
        lambda a: a.std(dim=0, correction=0) + a.var(correction=1),
    ),
    Case("reshape", lambda a: a.reshape(4, 3), [(3, 4)]),
    Case("reshape_infer", lambda a: a.reshape((2, -1)), [(3, 4)], lambda a: a.reshape(2, -1)),
    Case("transpose_T", lambda a: a.T, [(3, 4)], lambda a: a.t()),
    Case(
        "transpose_axes", lambda a: a.transpose(1, 2, 0), [(2, 3, 4)], lambda a: a.permute(1, 2, 0)
    ),
    Case("copy", lambda a: a.copy() * a, [(3, 4)], lambda a: a.clone() * a),
    Case("getitem_int", lambda a: a[1], [(3, 4)]),
    Case("getitem_slice", lambda a: a[1:, ::2], [(3, 4)]),
    Case("getitem_repeat", lambda a: a[[0, 0, 2]], [(3, 4)]),
    Case("getitem_pairs", lambda a: a[[0, 1, 1], [2, 0, 2]], [(3, 4)]),
    Case(
        "getitem_mask",
        lambda a: a[MASK],
        [(3, 4)],
        lambda a: a[__import__("torch").from_numpy(MASK)],
    ),
    Case("getitem_newaxis", lambda a: a[None, ..., 1], [(3, 4)]),
    Case("getitem_split_advanced", lambda a: a[[0, 1], :, [1, 0]], [(2, 3, 4)]),
    Case(
        "setitem_slice",
        lambda a, b: _setitem(a, b, (slice(1, None), 2)),
        [(3, 4), (2,)],
        lambda a, b: _torch_setitem(a, b, (slice(1, None), 2)),
    ),
    Case(  # the second write overwrites part of the first
        "setitem_overlapping",
        lambda a, b: _setitem(a, b, (slice(0, 2), 1), (1, slice(None)), (2, 3)),
        [(3, 4), (7,)],
        lambda a, b: _torch_setitem(a, b, (slice(0, 2), 1), (1, slice(None)), (2, 3)),
    ),
    Case(
        "setitem_broadcast",
        lambda a, b: _setitem(a, b, (MASK,)),
        [(3, 4), ()],
        lambda a, b: _torch_setitem(a, b, (__import__("torch").from_numpy(MASK),)),
    ),
    Case("exp", lambda a: a.exp(), [(3, 4)]),
    Case("log", lambda a: a.log(), [(3, 4)], positive=True),
    Case("sqrt", lambda a: a.sqrt(), [(3, 4)], positive=True),
    Case("tanh", lambda a: a.tanh(), [(3, 4)]),
    Case("sin", lambda a: np.sin(a), [(3, 4)], lambda a: a.sin()),
    Case("atan", lambda a: np.arctan(a), [(3, 4)], lambda a: a.atan()),
    Case("cos", lambda a: a.cos(), [(3, 4)]),
    Case("sigmoid", lambda a: a.sigmoid(), [(3, 4)]),
    Case("relu", lambda a: a.relu(), [(3, 4)]),
    Case("abs", lambda a: abs(a), [(3, 4)]),
    Case("softmax", lambda a: a.softmax(axis=-1), [(3, 4)], lambda a: a.softmax(dim=-1)),
    Case("softmax_axis0", lambda a: softmax(a, axis=0), [(3, 4)], lambda a: a.softmax(dim=0)),
    Case("log_softmax", lambda a: log_softmax(a, axis=1), [(3, 4)], lambda a: a.log_softmax(dim=1)),
    Case(
        "cross_entropy",
        lambda a: cross_entropy(a, TARGETS),
        [(3, 4)],
        lambda a: __import__("torch").nn.functional.cross_entropy(
            a, __import__("torch").from_numpy(TARGETS)
        ),
    ),
    Case(
        "maximum",
        lambda a, b: np.maximum(a, b),
        [(3, 4), (3, 4)],
        lambda a, b: __import__("torch").maximum(a, b),
    ),
    Case(
        "minimum",
        lambda a, b: np.minimum(a, b),
        [(3, 4), (4,)],
        lambda a, b: __import__("torch").minimum(a, b),
    ),
    Case(
        "where",
        lambda a, b: np.where(MASK, a, b),
        [(3, 4), (3, 1)],
        lambda a, b: __import__("torch").where(__import__("torch").from_numpy(MASK), a, b),
    ),
]
IDS = [c.name for c in CASES]


def _run(case, arrays, seed=None):
    """Our op on fresh leaves, backpropagated with seed; returns (out, leaves)."""
    leaves = [Tensor(a, label=f"x{i}") for i, a in enumerate(arrays)]
    out = case.ours(*leaves)
    out.backward(np.ones(out.shape) if seed is None else seed)
    return out, leaves


def numeric_grads(fn, arrays, seed, eps=1e-6):
    """Central differences of sum(fn(arrays) * seed) for every element of every input."""

    def f(xs):
        with no_grad():
            return float(np.sum(fn(*[Tensor(x) for x in xs]).data * seed))

    grads = []
    for i, arr in enumerate(arrays):
        g = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            g[idx] = (f(plus) - f(minus)) / (2 * eps)
        grads.append(g)
    return grads


# --------------------------------------------------------------------------- every op
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_op_gradient_matches_finite_differences(case):
    arrays = case.inputs()
    with no_grad():
        shape = case.ours(*[Tensor(a) for a in arrays]).shape
    seed = np.random.default_rng(1).normal(size=shape)
    out, leaves = _run(case, arrays, seed)
    for leaf, num in zip(leaves, numeric_grads(case.ours, arrays, seed)):
        assert leaf.grad.shape == leaf.shape
        np.testing.assert_allclose(leaf.grad, num, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_op_matches_pytorch_float64(case):
    torch = _tt()
    arrays = case.inputs()
    ours, leaves = _run(case, arrays)
    theirs_in = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    theirs = case.theirs(*theirs_in)
    theirs.backward(torch.ones_like(theirs))
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    for leaf, t in zip(leaves, theirs_in):
        np.testing.assert_allclose(leaf.grad, t.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_replay_with_leading_axis_equals_forward(case):
    out, _ = _run(case, case.inputs())
    nodes = [v for v in out.topo() if v._op is not None]
    assert nodes, "the case records at least one op"
    rng = np.random.default_rng(2)
    K = 3
    for node in nodes:
        parents = [np.asarray(p.data, dtype=float) for p in node.parents]
        # K identical copies replay to the recorded data
        same = node._replay([np.broadcast_to(p, (K,) + p.shape) for p in parents])
        assert same.shape == (K,) + node.shape
        for k in range(K):
            np.testing.assert_allclose(same[k], node.data, rtol=1e-12, atol=1e-12)
        # K different perturbations replay to K separate forwards
        shaken = [p + 1e-3 * rng.normal(size=(K,) + p.shape) for p in parents]
        if node.op in ("log", "sqrt", "**"):
            shaken = [np.abs(s) for s in shaken]
        batch = node._replay(shaken)
        for k in range(K):
            args = [s[k] for s in shaken]
            np.testing.assert_allclose(
                batch[k], node._op.f(*args, **node.params), rtol=1e-12, atol=1e-12
            )


def test_every_table_entry_is_exercised():
    seen = set()
    for case in CASES:
        out, _ = _run(case, case.inputs())
        seen |= {v.op for v in out.topo() if v._op is not None}
    # the numpy functions' entries are exercised on array nodes in test_numpy_rules
    from test_numpy_rules import NEW_OPS

    assert seen == set(TENSOR_OPS) - NEW_OPS


def test_table_entries_are_complete():
    for name, op in TENSOR_OPS.items():
        assert op.name == name
        assert len(op.df) == op.arity
        assert op.rule and op.symbol


# --------------------------------------------------------------------------- broadcasting
BROADCAST_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "**": lambda a, b: a**b,
    "maximum": np.maximum,
    "%": lambda a, b: a % b,
}
SHAPE_PAIRS = {
    "scalar": [(), (3, 4)],
    "row": [(3, 4), (4,)],
    "column": [(3, 1), (3, 4)],
    "batch": [(2, 3, 4), (3, 4)],
    "outer": [(3, 1), (1, 4)],
}


@pytest.mark.parametrize("pair", SHAPE_PAIRS, ids=list(SHAPE_PAIRS))
@pytest.mark.parametrize("name", BROADCAST_OPS)
def test_broadcast_gradients_are_reduced_to_each_input(name, pair):
    for shapes in (SHAPE_PAIRS[pair], SHAPE_PAIRS[pair][::-1]):
        case = Case(name, BROADCAST_OPS[name], shapes, positive=name in ("/", "**", "%"))
        arrays = case.inputs(seed=3)
        out, leaves = _run(case, arrays)
        assert out.shape == np.broadcast_shapes(*shapes)
        for leaf, num in zip(leaves, numeric_grads(case.ours, arrays, np.ones(out.shape))):
            assert leaf.grad.shape == leaf.shape
            np.testing.assert_allclose(leaf.grad, num, rtol=1e-5, atol=1e-7)


@settings(max_examples=40, deadline=None)
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
    op=st.sampled_from(["+", "-", "*", "maximum"]),
)
def test_random_broadcast_shapes(shapes, op):
    rng = np.random.default_rng(4)
    arrays = [rng.normal(size=s) for s in shapes.input_shapes]
    A, B = Tensor(arrays[0]), Tensor(arrays[1])
    out = BROADCAST_OPS[op](A, B)
    assert out.shape == shapes.result_shape
    out.sum().backward()
    for leaf, num in zip(
        (A, B), numeric_grads(BROADCAST_OPS[op], arrays, np.ones(shapes.result_shape))
    ):
        assert leaf.grad.shape == leaf.shape
        np.testing.assert_allclose(leaf.grad, num, rtol=1e-5, atol=1e-7)


def test_numbers_and_arrays_on_either_side():
    T = Tensor([1.0, 2.0, 4.0], label="T")
    arr = np.array([3.0, 5.0, 7.0])
    for expr, expected in [
        (lambda: 2 - T, [-1, -1, -1]),
        (lambda: 8 / T, -8 / np.array([1.0, 4.0, 16.0])),
        (lambda: arr * T, arr),
        (lambda: T * arr, arr),
        (lambda: np.float64(3.0) * T, [3, 3, 3]),
        (lambda: [1.0, 1.0, 1.0] - T, [-1, -1, -1]),
    ]:
        out = expr()
        assert isinstance(out, Tensor)
        out.sum().backward()
        np.testing.assert_allclose(T.grad, expected)


# --------------------------------------------------------------------------- the seeds' example
def test_linear_regression_gradient_has_its_closed_form():
    rng = np.random.default_rng(5)
    N = 50
    Xd = rng.normal(size=(N, 2))
    Yd = Xd @ np.array([[2.0], [-1.0]]) + 0.1 * rng.normal(size=(N, 1))
    X, Y = Tensor(Xd, "X", requires_grad=False), Tensor(Yd, "Y", requires_grad=False)
    W = Tensor(rng.normal(size=(2, 1)), "W")
    P = X @ W
    L = ((P - Y) ** 2).mean()
    L.backward()
    closed = 2.0 / N * Xd.T @ (Xd @ W.data - Yd)
    np.testing.assert_allclose(W.grad, closed, rtol=1e-12)
    np.testing.assert_allclose(L.data, np.mean((Xd @ W.data - Yd) ** 2))
    assert not X.grad.any(), "a tensor that needs no gradient is left at zero"


# --------------------------------------------------------------------------- mixing with Value
def test_value_times_tensor_is_a_tensor_and_value_gets_a_float_grad():
    a, b = Value(1.5, label="a"), Value(-2.0, label="b")
    s = a * b  # a scalar graph feeding a tensor graph
    T = Tensor([[1.0, 2.0], [3.0, -1.0]], label="T")
    out = (s * T + a).tanh().sum() + (T / s).sum()
    assert isinstance(s * T, Tensor) and isinstance(T + a, Tensor) and isinstance(a - T, Tensor)
    out.backward()
    assert isinstance(a.grad, float) and isinstance(s.grad, float)

    def f(av, bv, t):
        sv = av * bv
        return float(np.sum(np.tanh(sv * t + av)) + np.sum(t / sv))

    eps = 1e-6
    Td = T.data
    assert a.grad == pytest.approx(
        (f(1.5 + eps, -2, Td) - f(1.5 - eps, -2, Td)) / (2 * eps), rel=1e-6
    )
    assert b.grad == pytest.approx(
        (f(1.5, -2 + eps, Td) - f(1.5, -2 - eps, Td)) / (2 * eps), rel=1e-6
    )
    np.testing.assert_allclose(
        T.grad,
        numeric_grads(lambda t: (s.data * t + a.data).tanh().sum() + (t / s.data).sum(), [Td], 1.0)[
            0
        ],
        rtol=1e-6,
    )


def test_value_exponent_and_base():
    v = Value(2.0, label="v")
    T = Tensor([1.0, 2.0, 3.0])
    (T**v).sum().backward()
    assert v.grad == pytest.approx(float(np.sum(T.data**2 * np.log(T.data))))
    np.testing.assert_allclose(T.grad, 2 * T.data)
    (v**T).sum().backward()
    assert v.grad == pytest.approx(float(np.sum(T.data * 2.0 ** (T.data - 1))))


def test_trace_snapshots_a_mixed_graph_with_shapes():
    v = Value(3.0, label="v")
    W = Tensor(np.ones((2, 3)), label="W")
    L = (W * v).sum(axis=0).relu().mean()
    L.label = "L"
    L.backward()
    tr = Trace(L)
    assert tr.target.shape == () and tr.node("W").shape == (2, 3)
    assert tr.node("v").shape is None and tr.grads["v"] == pytest.approx(2.0)
    np.testing.assert_allclose(tr.grads["W"], np.full((2, 3), 3.0 / 3))  # v / 3
    assert [n.op for n in tr.nodes if n.op] == ["*", "sum", "relu", "mean"]
    assert all(n.local is None for n in tr.nodes if n.shape is not None)
    W.data[0, 0] = 99.0  # the snapshot keeps its own copy
    assert tr.node("W").data[0, 0] == 1.0


# --------------------------------------------------------------------------- numpy dispatch
def test_numpy_functions_keep_the_graph():
    T = Tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], label="T")
    checks = [
        (np.exp(T), lambda t: np.exp(t)),
        (np.tanh(T), np.tanh),
        (np.sum(T), np.sum),
        (np.sum(T, axis=0), lambda t: np.sum(t, axis=0)),
        (np.mean(T), np.mean),
        (np.max(T, axis=1), lambda t: np.max(t, axis=1)),
        (np.maximum(T, 0), lambda t: np.maximum(t, 0)),
        (np.square(T), np.square),
        (np.abs(T), np.abs),
        (np.reshape(T, (3, 2)), lambda t: np.reshape(t, (3, 2))),
        (np.transpose(T), np.transpose),
        (np.dot(T, np.ones(3)), lambda t: np.dot(t, np.ones(3))),
        (np.ones(2) @ T, lambda t: np.ones(2) @ t),
        (np.linalg.norm(T), np.linalg.norm),
        (T.sum(), np.sum),
        (np.ravel(T), np.ravel),
    ]
    for out, reference in checks:
        assert isinstance(out, Tensor) and out._op is not None
        np.testing.assert_allclose(out.data, reference(T.data))
        seed = np.arange(1.0, out.size + 1).reshape(out.shape)
        out.backward(seed)
        num = numeric_grads(lambda t: Tensor(reference(t.data)), [T.data], seed)[0]
        np.testing.assert_allclose(T.grad, num, rtol=1e-5, atol=1e-7)


def test_comparisons_give_plain_boolean_arrays_and_count_as_branches():
    T = Tensor([1.0, -2.0, 3.0])
    before = state.branch_events
    mask = T > 0
    assert isinstance(mask, np.ndarray) and mask.dtype == bool
    assert list(mask) == [True, False, True]
    assert list(T == np.array([1.0, 0.0, 3.0])) == [True, False, True]
    assert isinstance(np.greater(T, 0), np.ndarray)
    assert int(np.argmax(T)) == 2
    assert state.branch_events == before + 4


def test_unsupported_numpy_functions_say_so():
    T = Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="numpy.convolve has no gradient rule"):
        np.convolve(T, T)
    with pytest.raises(TypeError, match="numpy.searchsorted has no gradient rule"):
        T.searchsorted(1.5)  # an array method without a rule: the same message
    with pytest.raises(TypeError, match="numpy.spacing has no gradient rule"):
        np.spacing(T)
    with pytest.raises(TypeError, match="in place"):
        a = np.zeros(2)
        a += T
    with pytest.raises(TypeError, match="dtype"):
        np.sum(T, dtype=np.float32)


def test_shape_functions_and_array_conversion():
    T = Tensor(np.zeros((2, 3)))
    assert np.shape(T) == (2, 3) and np.ndim(T) == 2 and np.size(T) == 6
    assert np.zeros_like(T).shape == (2, 3)
    before = state.float_conversions
    arr = np.asarray(T)
    assert isinstance(arr, np.ndarray) and arr.shape == (2, 3)
    assert state.float_conversions == before + 1


# --------------------------------------------------------------------------- grad mode
def test_no_grad_records_nothing():
    W = Tensor([1.0, 2.0], label="W")
    with no_grad():
        out = (W * 3).exp().sum()
    assert out.is_leaf and not out.requires_grad and out.parents == ()
    assert (W * 3).parents and (W * 3).requires_grad


def test_constants_record_nothing_and_get_no_gradient():
    X = Tensor([1.0, 2.0], requires_grad=False)
    assert (X * 2).is_leaf
    W = Tensor([3.0, 4.0])
    out = (X * 2 * W).sum()
    out.backward()
    np.testing.assert_allclose(W.grad, [2.0, 4.0])
    assert not X.grad.any()


def test_reused_node_accumulates_and_backward_is_idempotent():
    x = Tensor([1.0, -2.0, 3.0])
    y = (x * x + x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * x.data + 1)
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * x.data + 1)


def test_deep_chain_backward_is_iterative():
    x = Tensor(np.full(3, 0.1))
    y = x
    for _ in range(20000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad, np.full(3, 1.0001**20000))


def test_non_scalar_backward_needs_a_seed():
    T = Tensor([[1.0, 2.0]])
    out = T * 3
    with pytest.raises(ValueError, match=r"shape \(1, 2\) needs a gradient"):
        out.backward()
    with pytest.raises(ValueError, match=r"needs shape \(1, 2\)"):
        out.backward(np.ones(3))
    out.backward([[1.0, -1.0]])
    np.testing.assert_allclose(T.grad, [[3.0, -3.0]])
    Tensor([[5.0]]).exp().backward()  # one element: seeded with 1


# --------------------------------------------------------------------------- flags and facts
def test_kink_flags():
    assert Tensor([0.0, 1.0]).relu().kink
    assert not Tensor([0.5, 1.0]).relu().kink
    assert abs(Tensor([0.0, 1.0])).kink
    assert Tensor([2.0, 2.0, 1.0]).max().kink
    assert not Tensor([[2.0, 2.0], [1.0, 3.0]]).max(axis=0).kink
    assert np.maximum(Tensor([1.0, 2.0]), 2.0).kink
    assert not Tensor([1.0]).exp().kink


def test_max_ties_share_the_gradient_like_torch():
    T = Tensor([2.0, 2.0, 1.0])
    T.max().backward()
    np.testing.assert_allclose(T.grad, [0.5, 0.5, 0.0])


def test_finite_flag_and_no_warnings():
    T = Tensor([-1.0, 0.0, 1.0])
    with np.errstate(all="raise"):
        out = T.log()
        out.backward(np.ones(3))
    assert not out.finite and not T.finite
    assert np.isnan(out.data[0]) and out.data[1] == -np.inf
    assert Tensor([1.0]).finite


def test_node_protocol_facts():
    W = Tensor([[1.0, 2.0]], label="W")
    out = W.sum(axis=1, keepdims=True)
    assert W.is_leaf and W.op == "" and W.opdef is None and W.parents == ()
    assert out.op == "sum" and out.opdef is TENSOR_OPS["sum"] and out.parents == (W,)
    assert out.params == {"axis": (1,), "keepdims": True}
    assert out.local_grads() is None and out.shape == (1, 1)
    assert out.topo() == [W, out]
    assert W.data.dtype == np.float64 and W.grad.shape == W.shape
    assert "label='W'" in repr(W) and str(W) == str(W.data)
    assert isinstance(tensor([1, 2]), Tensor) and tensor([1, 2]).data.dtype == np.float64
    assert len(Tensor(np.zeros((4, 2)))) == 4 and [r.shape for r in Tensor(np.zeros((2, 3)))] == [
        (3,),
        (3,),
    ]
    assert float(Tensor(2.5)) == 2.5 and Tensor([[7.0]]).item() == 7.0


def test_data_is_copied_from_the_source_array():
    src = np.array([1.0, 2.0])
    T = Tensor(src)
    src[0] = 10.0
    assert T.data[0] == 1.0
    out = T * src  # the constant parent keeps the array as it was
    src[1] = 20.0
    assert out.parents[1].data[1] == 2.0


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: Tensor("abc"), TypeError, "must be numbers"),
        (lambda: Tensor([1j]), TypeError, "real"),
        (lambda: Tensor(np.array([1j])), TypeError, "complex"),
        (lambda: Tensor([[1.0], [2.0, 3.0]]), TypeError, "regular shape"),
        (lambda: Tensor([1.0], label=3), TypeError, "label"),
        (
            lambda: Tensor(np.ones((2, 3))) @ Tensor(np.ones((2, 3))),
            ValueError,
            r"@ cannot be applied to shapes \(2, 3\) and \(2, 3\)",
        ),
        (lambda: Tensor(np.ones(3)) + Tensor(np.ones(4)), ValueError, "shapes"),
        (lambda: Tensor(np.ones((2, 3))).sum(axis=2), ValueError, "axis 2 is out of range"),
        (lambda: Tensor(np.ones((2, 3))).reshape(4, 2), ValueError, "reshape"),
        (lambda: Tensor(np.ones((2, 3))).transpose(0, 0), ValueError, "repeated axis"),
        (lambda: Tensor(np.ones(3))[5], IndexError, r"shape \(3,\)"),
        (lambda: Tensor(np.ones(3))[1.5], IndexError, "float"),
        (lambda: Tensor(np.ones(3))[Tensor([0.0])], IndexError, "cannot be an index"),
        (lambda: float(Tensor(np.ones(3))), TypeError, "one element"),
        (lambda: bool(Tensor(np.ones(3))), ValueError, "ambiguous"),
        (lambda: Tensor(np.ones(3)) + "a", TypeError, "unsupported operand"),
        (lambda: cross_entropy(Tensor(np.ones((2, 3))), [0, 3]), ValueError, r"range\(3\)"),
        (lambda: cross_entropy(Tensor(np.ones((2, 3))), [0]), ValueError, r"shape \(2,\)"),
        (lambda: cross_entropy(Tensor(np.ones((2, 3))), [0.5, 1]), TypeError, "integer"),
    ],
)
def test_bad_input_gets_a_clear_message(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_indexing_with_values_as_ints():
    T = Tensor([1.0, 2.0, 3.0])
    i = Value(1)
    out = T[i] + T[Value(0) : Value(2)].sum()
    out.backward()
    np.testing.assert_allclose(T.grad, [1.0, 2.0, 0.0])


@pytest.mark.parametrize(
    "make",
    [
        lambda T, v: T * v,
        lambda T, v: v - T,
        lambda T, v: T**v,
        lambda T, v: v / T,
        lambda T, v: np.maximum(T, v),
        lambda T, v: np.where(T.data > 1, T, v),
    ],
    ids=["mul", "rsub", "pow", "rdiv", "maximum", "where"],
)
def test_replay_with_a_scalar_value_parent(make):
    T, v = Tensor([[0.5, 1.5, 2.0]]), Value(2.0)
    node = make(T, v)
    K = 4
    shifts = np.linspace(-0.1, 0.1, K)
    inputs = [T.data + shifts[:, None, None] if p is T else v.data + shifts for p in node.parents]
    assert [np.shape(x) for x in inputs if np.ndim(x) == 1] == [(K,)]
    batch = node._replay(inputs)
    for k in range(K):
        args = [x[k] for x in inputs]
        np.testing.assert_allclose(batch[k], node._op.f(*args, **node.params))


def test_shared_gradient_buffers_never_change_another_nodes_gradient():
    x = Tensor([1.0, 2.0], label="x")
    m = x * 1.0
    s = m + 0.0  # '+' hands its own gradient to m: m shares s's buffer at first
    out = (s + m * 3.0).sum()
    out.backward()
    np.testing.assert_allclose(s.grad, [1.0, 1.0])
    np.testing.assert_allclose(m.grad, [4.0, 4.0])
    np.testing.assert_allclose(x.grad, [4.0, 4.0])


def test_leaf_gradients_are_their_own_writable_arrays():
    W = Tensor([[1.0, 2.0]])
    out = W + 0.0
    out.sum().backward()  # sum's rule gives a read-only broadcast view
    assert W.grad.flags.writeable and W.grad.base is None
    assert not np.shares_memory(W.grad, out.grad)
    W.grad[0, 0] = 5.0
    assert out.grad[0, 0] == 1.0


def test_setting_grad_coerces_or_forgets():
    T = Tensor([[1.0, 2.0]])
    T.grad = 1.0
    assert T.grad.shape == (1, 2) and T.grad.dtype == np.float64
    T.grad = None
    assert not T.grad.any() and T.grad.shape == (1, 2)
    with pytest.raises(ValueError, match=r"shape \(1, 2\)"):
        T.grad = np.ones(3)


def test_a_leaf_can_be_changed_in_place_but_an_ops_result_cannot():
    T = Tensor([1.0, 2.0])
    T[0] = 5.0
    T[1:] = Tensor([7.0])
    assert T.data.tolist() == [5.0, 7.0] and T.is_leaf
    with pytest.raises(TypeError, match="the result of an op cannot be changed in place"):
        (T * 2.0)[0] = 5.0
    with pytest.raises(ValueError, match="too large"):
        Tensor(10**400)


def _numpy_setitem(a, b, *indices):
    out, start = a.copy(), 0
    for index, shape in _parts(a, b, indices):
        stop = start + int(np.prod(shape))
        out[index] = b.reshape(-1)[start:stop].reshape(shape) if len(indices) > 1 else b
        start = stop
    return out


NUMPY_FORMS = {  # the cases whose function is not also a numpy expression
    "setitem_slice": lambda a, b: _numpy_setitem(a, b, (slice(1, None), 2)),
    "setitem_overlapping": lambda a, b: _numpy_setitem(
        a, b, (slice(0, 2), 1), (1, slice(None)), (2, 3)
    ),
    "setitem_broadcast": lambda a, b: _numpy_setitem(a, b, (MASK,)),
    "exp": lambda a: np.exp(a),
    "log": lambda a: np.log(a),
    "sqrt": lambda a: np.sqrt(a),
    "tanh": lambda a: np.tanh(a),
    "cos": lambda a: np.cos(a),
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
    "relu": lambda a: a * (a > 0),
    "softmax": lambda a: np.exp(a) / np.exp(a).sum(axis=-1, keepdims=True),
    "softmax_axis0": lambda a: np.exp(a) / np.exp(a).sum(axis=0, keepdims=True),
    "log_softmax": lambda a: a - np.log(np.exp(a).sum(axis=1, keepdims=True)),
    "cross_entropy": lambda a: (
        -np.mean((a - np.log(np.exp(a).sum(axis=1, keepdims=True)))[np.arange(3), TARGETS])
    ),
}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_equals_plain_numpy(case):
    arrays = case.inputs()
    ours = case.ours(*[Tensor(a) for a in arrays])
    expected = NUMPY_FORMS.get(case.name, case.ours)(*arrays)
    assert isinstance(ours, Tensor) and not isinstance(expected, Tensor)
    np.testing.assert_allclose(ours.data, expected, rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------- copies and attributes
def test_copy_is_a_differentiable_identity_with_its_own_node():
    W = Tensor([[1.0, -2.0], [0.5, 3.0]], label="W")
    for make in (
        lambda t: t.copy(),
        np.copy,
        lambda t: t.astype(np.float64),
        lambda t: t.astype(float),
    ):
        V = make(W)
        assert isinstance(V, Tensor) and V is not W and V.op == "copy" and V.parents == (W,)
        assert V.data is not W.data and np.array_equal(V.data, W.data)
        (V * W).sum().backward()
        np.testing.assert_allclose(W.grad, 2 * W.data)  # through the copy and directly
        np.testing.assert_allclose(V.grad, W.data)
    with no_grad():
        assert W.copy().is_leaf and not W.copy().requires_grad


def test_astype_to_another_dtype_says_why_not():
    with pytest.raises(TypeError, match="float64.*T.data.astype"):
        Tensor([1.0]).astype(np.int64)


def test_array_attributes_are_forwarded():
    T = Tensor(np.arange(6.0).reshape(2, 3))
    assert (T.shape, T.ndim, T.size, T.dtype, T.nbytes) == ((2, 3), 2, 6, np.float64, 48)
    before = state.float_conversions
    assert T.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and Tensor(2.5).tolist() == 2.5
    assert state.float_conversions == before + 2
    flat = T.flatten()
    assert flat.shape == (6,) and flat.op == "reshape" and T.ravel().shape == (6,)
    flat.backward(np.arange(6.0))
    np.testing.assert_allclose(T.grad, np.arange(6.0).reshape(2, 3))


def test_argmax_and_argmin_are_plain_indices_counted_as_branches():
    T = Tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    before = state.branch_events
    assert T.argmax() == 3 and T.argmin() == 4
    np.testing.assert_array_equal(T.argmax(axis=1), [1, 0])
    np.testing.assert_array_equal(T.argmin(axis=-2), [0, 1, 0])
    assert state.branch_events == before + 4


def test_int_valued_values_work_as_shapes_and_axes_without_branch_events():
    # %%autograd lifts the literals in T.reshape(3, 2) or T.sum(axis=0) into Values
    T = Tensor(np.arange(6.0).reshape(2, 3))
    before = state.branch_events
    assert T.reshape(Value(3), Value(2)).shape == (3, 2)
    assert T.reshape(Value(-1)).shape == (6,)
    assert T.sum(axis=Value(0)).shape == (3,) and T.mean(Value(1), keepdims=True).shape == (2, 1)
    assert T.transpose(Value(1), Value(0)).shape == (3, 2)
    assert softmax(T, axis=Value(0)).shape == (2, 3)
    assert state.branch_events == before
    with pytest.raises(TypeError, match="shape must be integers"):
        T.reshape(Value(2.0), 3)


def test_floor_division_and_remainder_jump_at_multiples():
    a, b = Tensor([4.0, 5.0], label="a"), Tensor(2.0, label="b")
    assert (a // b).kink and (a % b).kink and not (Tensor([4.5]) % 2.0).kink
    (a % b).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0] and b.grad == -(2.0 + 2.0)  # −Σ⌊a/b⌋


def test_array_methods_without_their_own_forward_to_numpy():
    T = Tensor([[3.0, -1.0], [2.0, 5.0]])
    assert T.any() is np.True_ and T.round().tolist() == T.data.round().tolist()
    assert T.trace.__name__ == "trace"
    for name in ("sort", "partition", "put", "resize", "compress", "data_", "nosuch"):
        with pytest.raises(AttributeError, match=f"no attribute '{name}'"):
            getattr(T, name)  # in place on an ndarray, or no such method: not forwarded


def test_copy_and_pickle_do_not_recurse_through_getattr():
    import copy
    import pickle

    T = Tensor([1.0, 2.0], label="T", requires_grad=False)
    for other in (copy.copy(T), copy.deepcopy(T), pickle.loads(pickle.dumps(T))):
        assert other.label == "T" and other.data.tolist() == [1.0, 2.0]
        assert other.requires_grad is False and other is not T
    with pytest.raises(AttributeError):
        Tensor.__new__(Tensor).data  # noqa: B018 - an empty slot reads as missing, not as a method
