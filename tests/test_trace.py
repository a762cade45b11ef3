"""The columnar Trace against a node-by-node reading of the live graph, and the
vectorised check against per-leaf finite differences done the slow way."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gradmagic import Tensor, Value
from gradmagic.analysis import replay as replay_module
from gradmagic.analysis.check import check
from gradmagic.analysis.trace import COLUMNS
from gradmagic.analysis.numbers import all_finite
from gradmagic.analysis.trace import Trace
from gradmagic.core.ops import OPS
from gradmagic.core.ops import real

UNARY = sorted(name for name, op in OPS.items() if op.arity == 1)
BINARY = sorted(name for name, op in OPS.items() if op.arity == 2 and name != "roundn")
SMOOTH_UNARY = ["tanh", "sin", "cos", "neg", "sigmoid"]
SMOOTH_BINARY = ["+", "-", "*"]

leaf_value = st.one_of(st.floats(-3, 3, allow_nan=False), st.integers(-4, 4))


@st.composite
def graphs(draw, unary=UNARY, binary=BINARY, max_ops=25):
    """A random scalar graph: (target, leaves); some leaves named, some ints, some repeated."""
    n_leaves = draw(st.integers(1, 5))
    leaves = [
        Value(draw(leaf_value), label=draw(st.sampled_from(["", f"x{i}", "w"])))
        for i in range(n_leaves)
    ]
    nodes = list(leaves)
    for k in range(draw(st.integers(1, max_ops))):
        if draw(st.booleans()):
            a = draw(st.sampled_from(nodes))
            out = _apply(draw(st.sampled_from(unary)), a)
        else:
            op = draw(st.sampled_from(binary))
            a, b = draw(st.sampled_from(nodes)), draw(st.sampled_from(nodes))
            out = _apply(op, a, b)
        if draw(st.booleans()):
            out.label = draw(st.sampled_from(["h", "y", f"t{k}"]))
        nodes.append(out)
    target = nodes[-1]
    for v in nodes[:-1]:  # tie everything into one target, so every node is in the graph
        target = target + v * 0.5
    return target, leaves


def _apply(name, a, b=None):
    from gradmagic.core.engine import apply

    with np.errstate(all="ignore"):
        return apply(name, a) if b is None else apply(name, a, b)


def _same(x, y):
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return x == y and type(x) is type(y)


def assert_matches_live(trace, target):
    """Every row of the trace equals the live node it was read from."""
    order = Value.topo(target)
    index = {id(v): i for i, v in enumerate(order)}
    assert len(trace.nodes) == trace.n == len(order)
    for i, v in enumerate(order):
        node = trace.nodes[i]
        assert node.index == i
        assert node.label == v.label and node.op == v.op
        assert _same(node.data, v.data), (i, node.data, v.data)
        assert _same(node.grad, v.grad) or (real(node.grad) == real(v.grad)), (i,)
        assert node.parents == tuple(index[id(p)] for p in v.parents)
        assert node.kink == bool(v.kink)
        assert node.is_leaf == v.is_leaf
        constant = v.is_leaf and (
            not getattr(v, "requires_grad", True)
            or (not v.label and not isinstance(v.data, np.ndarray))
        )
        assert node.is_constant == constant
        assert node.finite == (all_finite(v.data) if constant else v.finite)
        assert node.shape == (v.data.shape if isinstance(v.data, np.ndarray) else None)
        if isinstance(v, Value):
            local = v.local_grads()
            assert len(node.local) == len(local)
            # an int too big for a float is read as ±inf, as the trace's float columns hold it
            assert all(_same(real(a), real(b)) for a, b in zip(node.local, local))
    assert trace.target.index == trace.n - 1 and _same(trace.value, target.data)


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_columns_equal_a_node_by_node_reading(graph):
    target, _ = graph
    with np.errstate(all="ignore"):
        target.backward()
    trace = Trace(target)
    assert_matches_live(trace, target)
    # the same walk given by the caller gives the same columns
    again = Trace(target, order=Value.topo(target))
    for column in COLUMNS:
        np.testing.assert_array_equal(getattr(trace, column), getattr(again, column))


def test_op_entries_are_numbered_in_order_of_first_use_as_the_node_reading_numbers_them():
    """The walk's op codes (bytes) and a node-by-node reading give the same numbering,
    also for a leaf that carries an op entry (numbered by identity)."""
    x, w = Value(0.5, label="x"), Value(-1.5, label="w")
    y = ((x * w).tanh() - x) * (w + 2.0)
    odd = Value(1.5, label="odd")
    odd._op = y._op  # a leaf with an entry: made by hand, read as the live node says
    y.backward()
    for target in (y, y + odd):  # (no backward through the hand-made leaf)
        a, b = Trace(target), Trace(target, order=Value.topo(target))
        assert [e.name for e in a.ops] == [e.name for e in b.ops]
        np.testing.assert_array_equal(a.op_code, b.op_code)
    trace = Trace(y)
    assert sorted(e.name for e in trace.ops) == ["*", "+", "-", "tanh"]
    firsts = [int(np.argmax(trace.op_code == c)) for c in range(len(trace.ops))]
    assert firsts == sorted(firsts)  # numbered by first use


def test_a_mixed_graph_with_tensors_matches_the_live_nodes():
    W = Tensor(np.array([[0.5, -1.0], [2.0, 0.0]]), label="W")
    C = Tensor(np.ones((2, 2)), label="C", requires_grad=False)
    v = Value(3.0, label="v")
    out = ((W * C).relu().sum() * v + v**2).relu()
    out.backward()
    trace = Trace(out)
    assert_matches_live(trace, out)
    assert trace.node("C").is_constant and not trace.node("C").requires_grad
    assert trace.node("W").shape == (2, 2) and trace.node("W").local is None
    assert any(trace.nodes[i].kink for i in range(trace.n))  # relu at the 0 of W


def test_a_trace_is_unaffected_by_later_changes_to_live_nodes():
    x, w = Value(0.5, label="x"), Value(-1.5, label="w")
    y = (x * w).tanh() + x**2
    y.label = "y"
    y.backward()
    trace = Trace(y)
    before = (trace.values, trace.grads, trace.check().passed)
    x.data, w.data, x.grad = 10.0, 3.0, 99.0  # an optimizer step, a hand edit
    z = x * x * w
    z.backward()  # another backward over the same leaves
    x.label = "renamed"
    assert (trace.values, trace.grads) == before[:2]
    assert trace.check(eps=1e-7).passed and before[2]
    assert trace.node("x").data == 0.5 and trace.node("x").grad == pytest.approx(
        -1.5 * (1 - math.tanh(-0.75) ** 2) + 1.0
    )
    T = Tensor(np.array([1.0, -2.0]), label="T")
    L = (T * T).sum()
    L.backward()
    tt = Trace(L)
    T.data[0] = 7.0
    T.grad[1] = 0.0
    assert tt.node("T").data.tolist() == [1.0, -2.0] and tt.node("T").grad.tolist() == [2.0, -4.0]


def test_a_function_run_trace_keeps_its_arrays_when_the_user_writes_into_them_later():
    from gradmagic import autograd

    kept = []

    def f(w, x):
        h = np.tanh(x @ w + 0.5)
        kept.append(h)  # an intermediate the user keeps, and a view of another
        kept.append((h * h)[1:])
        z = h * w.sum()
        return np.sum(z * z), z

    def loss(w, x):
        return f(w, x)[0]

    for fn in (loss, lambda w, x: f(w, x)[0]):  # its text rewritten, or called as it is
        w, x = np.array([0.3, -0.2]), np.array([[1.0, 2.0], [0.5, -1.0], [2.0, 0.1]])
        plain = f(w.copy(), x.copy())[0]
        run = autograd(fn, check=False)(w=w, x=x)
        data = {i: a.copy() for i, a in run.trace.tensor_data.items()}
        for a in (*kept, w, x):
            a[...] = 7.0
        assert all(np.array_equal(run.trace.tensor_data[i], a) for i, a in data.items())
        assert run.value == plain and len(data) >= 8


def test_ints_stay_ints_and_huge_ints_read_as_inf():
    n = Value(3, label="n")
    big = Value(10**400, label="big")
    y = n * 2 + big * 0
    y.backward()
    trace = Trace(y)
    assert trace.node("n").data == 3 and type(trace.node("n").data) is int
    assert trace.node("big").data == 10**400 and trace.data[trace.node("big").index] == math.inf
    assert not trace.node("big").finite


def traced_walk(target) -> Trace:
    """The Trace as the magic makes it: one walk for backward and the trace."""
    from gradmagic.core.engine import backward, walk

    w = walk(target, zero=True)
    backward(target, 1.0, w)
    return Trace(target, walk=w)


def test_every_kind_of_int_reads_back_as_it_was_from_a_walked_trace():
    # small ints are read back from the float column (a flag each), the rest kept as they are
    values = [3, -7, 2**53 - 1, 2**53 + 1, -(2**60) - 1, 10**400, 0]
    leaves = [Value(v, label=f"n{k}") for k, v in enumerate(values)]
    y = leaves[0]
    for v in leaves[1:]:
        y = y + v * 0
    y.backward()
    for trace in (traced_walk(y), Trace(y, order=y.topo())):
        for k, v in enumerate(values):
            node = trace.node(f"n{k}")
            assert node.data == v and type(node.data) is type(v), (k, node.data)
            assert node.index in trace.exact and trace.exact[node.index] == v
        ints = {i for i in range(trace.n) if isinstance(trace.nodes[i].data, int)}
        assert set(trace.exact) == ints and len(trace.exact) == len(ints)
        assert trace.exact.get(trace.n + 5) is None and (trace.n + 5) not in trace.exact
        node = trace.node("n0")
        node.data = 2.5  # a test's edit: no longer an int
        assert node.index not in trace.exact and node.data == 2.5
        node.data = 11
        assert trace.exact[node.index] == 11 and type(node.data) is int


def test_a_kept_trace_costs_under_48_bytes_a_node():
    x, w = Value(0.3, label="x"), Value(0.7, label="w")
    s = x
    for _ in range(2000):
        s = s * w + x
    s.backward()
    trace = Trace(s)
    assert trace.nbytes / trace.n <= 48


def _float_replay(trace, leaf: int, value: float) -> float:
    """The target with one leaf changed, node by node on Python floats (no numpy)."""
    vals = []
    for node in trace.nodes:
        if node.index == leaf:
            vals.append(value)
        elif not node.parents:
            vals.append(node.data)
        else:
            vals.append(node.opdef.f(*[vals[p] for p in node.parents]))
    return vals[-1]


@settings(max_examples=40, deadline=None)
@given(
    graphs(unary=SMOOTH_UNARY, binary=SMOOTH_BINARY, max_ops=15),
    st.sampled_from([1e-6, 1e-4]),
    st.sampled_from([0, 3]),
)
def test_vectorised_check_agrees_with_per_leaf_finite_differences(graph, eps, float_slots):
    """Both replays (numpy columns; plain floats for a few leaves) against the slow way."""
    replay_module.FLOAT_POINTS, saved = float_slots, replay_module.FLOAT_POINTS
    try:
        _check_against_per_leaf(graph, eps)
    finally:
        replay_module.FLOAT_POINTS = saved


def _check_against_per_leaf(graph, eps):
    target, leaves = graph
    for i, leaf in enumerate(leaves):  # unnamed leaves are constants, not checked
        leaf.label = leaf.label or f"u{i}"
    target.backward()
    trace = Trace(target)
    report = check(trace, eps=eps)
    assert report.rows
    for row in report.rows:
        x = trace.nodes[row.index].data
        up, down = x + eps, x - eps
        slow = (_float_replay(trace, row.index, up) - _float_replay(trace, row.index, down)) / (
            (up - x) + (x - down)
        )
        assert row.numeric == pytest.approx(slow, rel=1e-6, abs=1e-6 * max(1, abs(trace.value)))
        assert row.analytic == trace.grad[row.index]
