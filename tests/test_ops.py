"""Every op of the table against finite differences, numpy replay and PyTorch.

The per-op tests iterate over ``ops.OPS``, so a new entry is tested as soon as
it is added (give it safe input points in ``POINTS`` if the defaults are not
in its domain). The property tests build random expression graphs, with reused
nodes, deep nesting and plain-number constants on either side, and compare
their gradients with finite differences and with PyTorch float64.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gradmagic.core.engine import Value, apply
from gradmagic.core.ops import OPS, real

# Input points away from each op's kinks, jumps and domain edges.
DEFAULT_POINTS = {1: [(0.3,), (-0.7,), (1.3,)], 2: [(0.7, 1.3), (-1.3, 0.6)]}
POINTS = {
    "log": [(0.5,), (2.0,)],
    "sqrt": [(0.5,), (2.0,)],
    "**": [(1.3, 2.0), (0.7, -1.5), (2.5, 0.3)],
}


def _cases():
    for name, op in OPS.items():
        for point in POINTS.get(name, DEFAULT_POINTS[op.arity]):
            yield pytest.param(name, point, id=f"{name}{point}")


def test_the_table_is_consistent():
    for name, op in OPS.items():
        assert op.name == name and op.arity in (1, 2) and op.rule and op.symbol
    assert set(POINTS) <= set(OPS), "POINTS names an op the table does not have"


@pytest.mark.parametrize("name, point", list(_cases()))
def test_op_gradient_matches_central_differences(name, point, numgrad):
    leaves = [Value(x) for x in point]
    out = apply(name, *leaves)
    out.backward()
    expected = numgrad(lambda xs: apply(name, *xs).data, point)
    for leaf, fd in zip(leaves, expected):
        assert leaf.grad == pytest.approx(fd, rel=1e-6, abs=1e-7), (name, point)
    assert out.local_grads() == pytest.approx(tuple(leaf.grad for leaf in leaves))
    assert out.op == name and out.opdef is OPS[name] and out.parents == tuple(leaves)


def test_local_grads_reads_a_huge_int_as_infinity():
    big = 10**400  # no float holds it: df raises OverflowError, local_grads retries
    assert OPS["/"].local_grads(1.0, big, 0.0) == (0.0, 0.0)  # as if big were inf
    assert OPS["exp"].local_grads(1.0, math.e) == (math.e,)


@pytest.mark.parametrize("name, point", list(_cases()))
def test_numpy_forward_matches_float_forward(name, point):
    op = OPS[name]
    # a leading perturbation axis, as the numerical check replays with
    arrays = [np.array([x, x + 0.01]) for x in point]
    replay = op.np(*arrays)
    for k in range(2):
        assert replay[k] == pytest.approx(op.f(*(float(a[k]) for a in arrays)), rel=1e-12)


@pytest.mark.parametrize("name", [n for n, op in OPS.items() if op.kink is not None])
def test_kinked_ops_flag_zero_and_use_a_subgradient(name):
    x = Value(0.0)
    out = apply(name, x)
    out.backward()
    assert out.kink
    assert x.grad == 0.0  # the subgradient both relu and abs use at 0
    away = apply(name, Value(0.5))
    assert not away.kink


SPECIAL = [
    0,
    0.0,
    -0.0,
    1,
    -1,
    2.5,
    -2.5,
    3,
    10**400,
    -(10**400),
    1e308,
    -1e308,
    math.inf,
    -math.inf,
    math.nan,
    5e-324,
]


def _too_slow_in_python_too(name, args):
    # 3 ** (10 ** 400) is an exact int Python would compute forever
    return name == "**" and all(type(a) is int for a in args) and abs(args[1]) > 10**6


@pytest.mark.parametrize("name", list(OPS))
def test_special_values_never_raise_and_are_flagged(name):
    """nan, ±inf, -0.0 and ints too big for a float: no exception, honest flags."""
    op = OPS[name]
    for args in itertools.product(SPECIAL, repeat=op.arity):
        if _too_slow_in_python_too(name, args):
            continue
        leaves = [Value(a) for a in args]
        out = apply(name, *leaves)
        out.backward()
        data_finite = math.isfinite(real(out.data)) and not (
            type(out.data) is int and abs(out.data) > 1e308
        )
        if not data_finite:
            assert not out.finite, (name, args)
        assert isinstance(out.kink, bool)
        for leaf in leaves:
            assert isinstance(leaf.grad, float), (name, args)


def test_ints_too_big_for_a_float_read_as_infinite():
    huge = Value(10**400)
    assert (huge * 1.5).data == math.inf
    assert (1.5 / huge).data == 0.0
    assert huge.exp().data == math.inf and (-huge).exp().data == 0.0
    assert huge.sigmoid().data == 1.0 and huge.tanh().data == 1.0
    assert (0.5**huge).data == 0.0
    assert (huge * 3).data == 3 * 10**400  # int with int stays exact, as in Python
    assert float(huge) == math.inf
    y = huge * 2.0
    y.backward()
    assert huge.grad == 2.0


# --------------------------------------------------------------- random expression graphs
# Each template applies one op (sometimes onto a guard that keeps it in its
# domain) and is written so that it runs on Values and torch tensors alike.
UNARY_T = {
    "neg": lambda a: -a,
    "abs": lambda a: abs(a),
    "exp": lambda a: a.exp(),
    "log": lambda a: (a * a + 0.5).log(),
    "sqrt": lambda a: (a * a + 0.5).sqrt(),
    "tanh": lambda a: a.tanh(),
    "sigmoid": lambda a: a.sigmoid(),
    "relu": lambda a: a.relu(),
    "sin": lambda a: a.sin(),
    "cos": lambda a: a.cos(),
    "square": lambda a: a**2,
    "cube": lambda a: a**3,
    "two_to": lambda a: 2**a,
}
BINARY_T = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / (b * b + 0.5),
    "**": lambda a, b: (a * a + 0.5) ** b,
}
KINKED = ("relu", "abs")


@st.composite
def programs(draw):
    """(number of inputs, steps): a step is (template, operand, operand, mode).

    Operands index the inputs and earlier results (so nodes get reused);
    ``mode`` puts a plain-number constant on the left or right, or none.
    """
    n_inputs = draw(st.integers(1, 3))
    n_steps = draw(st.integers(1, 25))
    steps = []
    for k in range(n_steps):
        pool = n_inputs + k
        # favour the latest node, which makes long chains (deep nesting)
        i = draw(st.one_of(st.just(pool - 1), st.integers(0, pool - 1)))
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(sorted(UNARY_T))), i, None, None))
        else:
            j = draw(st.integers(0, pool - 1))
            mode = draw(st.sampled_from(["nodes", "const-left", "const-right"]))
            const = draw(st.floats(0.1, 3) | st.floats(-3, -0.1))
            steps.append((draw(st.sampled_from(sorted(BINARY_T))), i, j, (mode, const)))
    inputs = draw(st.lists(st.floats(-2, 2, allow_nan=False), min_size=n_inputs, max_size=n_inputs))
    return steps, inputs


def run(steps, inputs):
    """The program's nodes, inputs first (they may be Values or tensors)."""
    pool = list(inputs)
    for name, i, j, const in steps:
        if j is None:
            pool.append(UNARY_T[name](pool[i]))
            continue
        mode, c = const
        a, b = pool[i], pool[j]
        if mode == "const-left":
            a = c
        elif mode == "const-right":
            b = c
        pool.append(BINARY_T[name](a, b))
    return pool


def _kink_pattern(out):
    """Which side of 0 each relu/abs input is on."""
    return tuple(v.parents[0].data > 0 for v in out.topo() if v.op in KINKED)


def _assume_tame(out):
    nodes = out.topo()
    assume(all(abs(v.data) < 1e3 for v in nodes))
    assume(all(abs(v.parents[0].data) > 1e-3 for v in nodes if v.op in KINKED))


# numgrad is a stateless function, so sharing it across examples is safe
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture],
)
@given(program=programs())
def test_random_graphs_match_finite_differences(program, numgrad):
    steps, xs = program
    leaves = [Value(x, label=f"x{i}") for i, x in enumerate(xs)]
    out = run(steps, leaves)[-1]
    assume(isinstance(out, Value))
    _assume_tame(out)
    out.backward()
    pattern = _kink_pattern(out)
    patterns = []

    def f(values):
        o = run(steps, [Value(v) for v in values])[-1]
        patterns.append(_kink_pattern(o))
        return o.data

    fd = numgrad(f, xs)
    assume(all(p == pattern for p in patterns))  # no relu/abs crossed its kink
    for leaf, expected in zip(leaves, fd):
        assert math.isclose(leaf.grad, expected, rel_tol=1e-4, abs_tol=1e-5 * (1 + abs(out.data)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(programs())
def test_random_graphs_match_pytorch_float64(program):
    torch = pytest.importorskip("torch")
    steps, xs = program
    leaves = [Value(x) for x in xs]
    out = run(steps, leaves)[-1]
    assume(isinstance(out, Value))
    _assume_tame(out)
    out.backward()
    tensors = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
    t_out = run(steps, tensors)[-1]
    t_out.backward()
    assert out.data == pytest.approx(t_out.item(), rel=1e-9, abs=1e-12)
    scale = 1 + max(abs(leaf.grad) for leaf in leaves)
    for leaf, t in zip(leaves, tensors):
        t_grad = 0.0 if t.grad is None else t.grad.item()
        assert leaf.grad == pytest.approx(t_grad, rel=1e-7, abs=1e-9 * scale)


@pytest.mark.parametrize(
    "base, exponent", [(-2.0, 3), (-2.0, 2), (-1.5, -3), (0.0, 2), (0.0, 1), (0.0, 3.5), (2.0, 0)]
)
def test_pow_edge_cases_match_pytorch(base, exponent, torch64):
    torch = torch64
    x = Value(base)
    out = x**exponent
    out.backward()
    tx = torch.tensor(base, requires_grad=True)
    t_out = tx**exponent
    t_out.backward()
    assert out.data == pytest.approx(t_out.item())
    assert x.grad == pytest.approx(tx.grad.item())
    assert math.isfinite(x.grad)


def test_the_replays_of_rounding_ops_round_as_python_does():
    # the check replays a graph with each op's numpy forward: round(x, n) for any n (digits
    # past a float's, under the smallest one, non-finite), and the int-valued roundings
    # give +0 (an int has no -0: 1 / trunc(-0.3) is inf)
    roundn = OPS["roundn"]
    xs = [
        0.0,
        -0.0,
        2.5,
        -3.14159,
        1e300,
        -1e-300,
        12345.678,
        math.inf,
        -math.inf,
        math.nan,
        5e-324,
        1e-310,
    ]
    ns = [
        0,
        2,
        -1,
        -3,
        15,
        300,
        309,
        315,
        400,
        5e5,
        -308,
        -310,
        -400,
        -5e5,
        2.7,
        -0.97,
        math.nan,
        math.inf,
        -math.inf,
    ]
    for x, n in itertools.product(xs, ns):
        want = roundn.f(x, n)
        got = float(roundn.np(np.float64(x), np.float64(n)))
        assert (got == want and math.copysign(1, got) == math.copysign(1, want)) or (
            got != got and want != want
        ), (x, n, want, got)
    for name in ("round", "floor", "ceil", "trunc"):
        op = OPS[name]
        for x in (-0.3, -0.0, 0.2, -2.5, 7.9):
            got, want = float(op.np(np.float64(x))), float(op.f(x))
            assert got == want and math.copysign(1, got) == math.copysign(1, want), (name, x)
