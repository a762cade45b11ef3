"""The numerical check (gradmagic.analysis.check): replayed finite differences and reports."""

import dataclasses
import json
import math
import operator
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from gradmagic import Value
from gradmagic.analysis import check as check_module, replay as replay_module
from gradmagic.analysis.check import CheckReport, check, expect
from gradmagic.analysis.perturb import choose
from gradmagic.analysis.replay import GroupedProgram, Replay
from gradmagic.core.engine import apply
from gradmagic.nn import MLP
from gradmagic.core.ops import OPS
from gradmagic.analysis.trace import Trace
from gradmagic.core.tensor import Tensor
from gradmagic.views.render import report_html


def traced(target, **kwargs):
    target.backward()
    return Trace(target, **kwargs)


def leaf(x, label):
    return Value(x, label=label)


def walkthrough():
    """micrograd's L = (a*b + c) * f, gradients known by hand."""
    a, b, c, f = leaf(2.0, "a"), leaf(-3.0, "b"), leaf(10.0, "c"), leaf(-2.0, "f")
    e = a * b
    d = e + c
    L = d * f
    L.label = "L"
    return traced(L)


def row(report, name):
    (found,) = [r for r in report.rows if r.name == name]
    return found


# --------------------------------------------------------------------------- correct graphs
def test_walkthrough_passes_with_numeric_slopes_beside_hand_gradients():
    report = check(walkthrough())
    assert report.passed and report.kind == "check"
    hand = {"a": 6.0, "b": -4.0, "c": -2.0, "f": 4.0}
    assert {r.name for r in report.rows} == set(hand)
    for name, grad in hand.items():
        r = row(report, name)
        assert r.analytic == grad
        assert r.numeric == pytest.approx(grad, rel=1e-7)
        assert r.abs_err == pytest.approx(abs(r.analytic - r.numeric), abs=1e-15)
        assert r.bound == pytest.approx(1e-5 + 1e-3 * abs(r.numeric))
        assert r.status == "pass"
    assert "all 4 gradients match" in report.verdict


def test_trace_check_uses_options_for_tolerances():
    a = leaf(2.0, "a")
    trace = traced(a * a, options={"eps": 1e-3, "atol": 0.0, "rtol": 0.0})
    report = trace.check()
    assert report.eps == 1e-3 and report.atol == 0.0 and report.rtol == 0.0
    assert row(report, "a").bound == 0.0
    assert trace.check(eps=1e-4).eps == 1e-4


def test_named_leaves_are_checked_and_unnamed_constants_are_not():
    x = leaf(3, "x")  # an int leaf
    y = x**2 + 5 * x  # 2 and 5 become unnamed constant leaves
    trace = traced(y)
    assert sorted(n.name for n in trace.leaves if n.is_constant) == ["2", "5"]
    report = check(trace)
    assert [r.name for r in report.rows] == ["x"]
    assert row(report, "x").numeric == pytest.approx(11.0, rel=1e-7)
    n = leaf(2, "n")  # a named exponent is an input: checked
    report = check(traced(x**n))
    assert row(report, "n").numeric == pytest.approx(9 * math.log(3), rel=1e-6)
    assert report.passed


def test_squared_negative_residual_is_not_flagged():
    """(p - t)**2 with p < t: d/d2 of a negative base is nan, but 2 is a constant."""
    p, t = leaf(1.0, "p"), leaf(3.0, "t")
    trace = traced((p - t) ** 2)
    two = trace.nodes[[n.name for n in trace.nodes].index("2")]
    assert two.is_constant and math.isnan(two.grad) and two.finite
    report = check(trace)
    assert report.passed and not report.flagged, report.verdict
    assert row(report, "p").analytic == -4.0 and row(report, "t").analytic == 4.0
    # the same with a named exponent is flagged: its gradient is nan
    k = leaf(2.0, "k")
    trace = traced((p - t) ** k)
    assert not trace.node("k").finite
    assert [r.name for r in check(trace).flagged] == ["k"]


def test_values_and_grads_pick_the_same_node_for_a_reused_name():
    x = leaf(1.5, "x")
    y = x
    for _ in range(3):  # y = y * 2 in a loop: four nodes labelled y
        y = y * 2.0
        y.label = "y"
    out = y * y
    out.label = "out"
    first = traced(out, bindings={"y": x * 1.0})  # a binding off the graph is ignored
    trace = traced(out, bindings={"x": x, "y": y})
    for t in (first, trace):
        assert t.values == {"x": 1.5, "y": 12.0, "out": 144.0}
        assert t.grads == {"x": 192.0, "y": 24.0, "out": 1.0}
        assert t.values["y"] == t.node("y").data


def test_target_that_is_a_leaf():
    report = check(traced(leaf(1.5, "x")))
    assert report.passed and row(report, "x").numeric == pytest.approx(1.0)


def test_mlp_with_hinge_and_l2_passes():
    net = MLP(2, [4, 4, 1], seed=3)
    x = [leaf(0.3, "x0"), leaf(-0.8, "x1")]
    loss = (1 - 1 * net(x)).relu() + 1e-4 * sum(p * p for p in net.parameters())
    trace = traced(loss)
    report = check(trace)
    assert report.passed, report.verdict
    inputs = [n.index for n in trace.leaves if not n.is_constant]
    assert sorted(r.index for r in report.rows) == inputs
    assert len(inputs) == len(net.parameters()) + 2  # the 1s and 1e-4 are constants


@settings(max_examples=40, deadline=None)
@given(
    st.floats(0.2, 3.0),
    st.floats(-2.0, 2.0),
    st.sampled_from(["tanh", "sigmoid", "exp", "sin", "cos", "log", "sqrt"]),
)
def test_random_smooth_expressions_pass(x0, y0, name):
    x, y = leaf(x0, "x"), leaf(y0, "y")
    z = getattr(x * y + x, name)() if name not in ("log", "sqrt") else getattr(x * x + 1, name)()
    out = z * y - x / (1 + y * y)
    assert check(traced(out)).passed


def test_numeric_slopes_match_pytorch_float64():
    torch = pytest.importorskip("torch")
    x, y = leaf(0.7, "x"), leaf(-1.3, "y")
    out = (x * y).tanh() * x.exp() + y**2 / x
    report = check(traced(out))
    tx = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    ty = torch.tensor(-1.3, dtype=torch.float64, requires_grad=True)
    ((tx * ty).tanh() * tx.exp() + ty**2 / tx).backward()
    assert row(report, "x").numeric == pytest.approx(tx.grad.item(), rel=1e-6)
    assert row(report, "y").numeric == pytest.approx(ty.grad.item(), rel=1e-6)


# --------------------------------------------------------------------------- wrong derivatives
def made_by(op):
    """``op`` (an op table entry, or a copy with a wrong rule) as a function of Values: the
    node :func:`~gradmagic.core.engine.apply` makes with the entry, linked to its parents."""

    def make(*parents):
        return apply(op, *parents)

    return make


def wrong_tanh():
    """tanh whose table entry (a copy) says the derivative is 1 - out (it is 1 - out²)."""
    return made_by(dataclasses.replace(OPS["tanh"], df=lambda x, out: 1.0 - out))


def test_a_wrong_derivative_in_a_copied_op_is_caught():
    x, w = leaf(0.5, "x"), leaf(-1.2, "w")
    n = x * w + 0.3
    out = wrong_tanh()(n) * 2.0
    report = check(traced(out))
    assert OPS["tanh"].df(0.1, math.tanh(0.1)) != 1.0 - math.tanh(0.1)  # table untouched
    assert not report.passed
    assert row(report, "x").status == "fail" and row(report, "w").status == "fail"
    true_dx = 2.0 * (1 - math.tanh(-0.3) ** 2) * -1.2
    assert row(report, "x").numeric == pytest.approx(true_dx, rel=1e-6)
    assert row(report, "x").analytic != pytest.approx(true_dx, rel=1e-3)
    assert "disagree" in report.verdict


def test_a_wrong_binary_derivative_fails_only_the_leaves_it_feeds():
    bad_mul = made_by(dataclasses.replace(OPS["*"], df=lambda x, y, out: (x, y)))
    a, b, c = leaf(2.0, "a"), leaf(5.0, "b"), leaf(7.0, "c")
    out = bad_mul(a, b) + c * c
    report = check(traced(out))
    assert {r.name: r.status for r in report.rows} == {"a": "fail", "b": "fail", "c": "pass"}


def test_assert_passed_names_the_worst_node_with_expected_got_and_tolerance():
    bad_mul = made_by(dataclasses.replace(OPS["*"], df=lambda x, y, out: (x, y)))
    a, b = leaf(2.0, "a"), leaf(50.0, "b")
    # da = 2 (should be 50) and db = 50 (should be 2): both off by 48, but b's
    # tolerance is the tighter one, so b is the worst
    report = check(traced(bad_mul(a, b)))
    with pytest.raises(AssertionError) as info:
        report.assert_passed()
    message = str(info.value)
    worst = message.split("worst:")[1].split("\n")[0]
    assert "'b'" in worst and "expected 2 " in worst and "got 50 " in worst
    assert "tolerance 0.00201" in worst  # 1e-5 + 1e-3 * 2
    assert "'a'" in message.split("worst:")[1].split("\n")[1]  # listed among the others


def test_assert_passed_is_silent_when_passed():
    walkthrough_report = check(walkthrough())
    assert walkthrough_report.assert_passed() is None


def test_replay_mismatch_is_reported_and_fails(monkeypatch):
    """An op whose numpy forward disagrees with its float forward (the numpy replay:
    a check of a few leaves replays on floats, with the forward the engine ran)."""
    odd_exp = made_by(dataclasses.replace(OPS["exp"], np=np.expm1))
    x = leaf(0.5, "x")
    trace = traced(odd_exp(x) * 3.0)
    assert check(trace).replay_ok  # the float replay runs the engine's own forward
    monkeypatch.setattr(replay_module, "FLOAT_POINTS", 0)
    report = check(trace)
    assert not report.replay_ok and not report.passed
    (note,) = [n for n in report.notes if n.startswith("Replay mismatch")]
    exp_node = next(n for n in trace.nodes if n.op == "exp")
    assert f"node #{exp_node.index} '(exp)'" in note
    with pytest.raises(AssertionError, match="Replay mismatch"):
        report.assert_passed()
    recorded, replayed = report.replay
    assert recorded == pytest.approx(3 * math.exp(0.5))
    assert replayed == pytest.approx(3 * math.expm1(0.5))
    assert "≠ recorded" in str(report)
    trace.nodes[-1].data = 1.0  # a changed snapshot: the float replay says so too
    monkeypatch.setattr(replay_module, "FLOAT_POINTS", 3)
    assert not check(trace).replay_ok


def test_leaf_changed_after_the_run_does_not_change_the_check():
    a = leaf(2.0, "a")
    trace = traced(a * a)
    a.data = 100.0  # an optimizer step after the run: the snapshot is what counts
    report = check(trace)
    assert report.replay_ok and row(report, "a").numeric == pytest.approx(4.0)


# --------------------------------------------------------------------------- flags
def test_relu_at_zero_is_flagged_as_kink_not_failed():
    x, y = leaf(0.0, "x"), leaf(3.0, "y")
    report = check(traced(x.relu() * y))
    r = row(report, "x")
    assert r.status == "kink"
    assert "relu" in r.note and "one-sided" in r.note
    assert report.passed and r in report.flagged
    assert "flagged" in report.verdict


def test_abs_at_zero_passes_with_a_note():
    """The central difference of |x| at 0 is 0, which is the subgradient used."""
    x = leaf(0.0, "x")
    r = row(check(traced(abs(x) + 1.0)), "x")
    assert r.status == "pass" and r.note.startswith("passes abs")


def test_wrong_derivative_is_not_excused_by_an_unrelated_kink():
    x, z = leaf(0.4, "x"), leaf(0.0, "z")
    out = wrong_tanh()(x) + z.relu()
    report = check(traced(out))
    assert row(report, "x").status == "fail"
    assert row(report, "z").status == "kink"


def test_jump_in_a_piecewise_constant_op_is_flagged():
    x = leaf(2.0, "x")  # floor jumps at 2
    r = row(check(traced(x.__floor__() + x)), "x")
    assert r.status == "kink" and "jump" in r.note


@pytest.mark.parametrize(
    "make, expect_note",
    [
        (lambda x: x.log(), "target is not finite"),  # log(-1) = nan
        (lambda x: (x + 1.0).sqrt(), "analytic gradient is inf"),  # sqrt at 0
    ],
)
def test_non_finite_values_are_flagged(make, expect_note):
    x = leaf(-1.0, "x")
    report = check(traced(make(x)))
    r = row(report, "x")
    assert r.status == "nonfinite" and expect_note in r.note
    assert report.passed and r in report.flagged


def test_eps_too_small_for_a_big_leaf_is_explained():
    x = leaf(1e12, "x")
    r = row(check(traced(x * 2.0), eps=1e-6), "x")
    assert r.status == "nonfinite" and "eps is too small" in r.note


@pytest.mark.parametrize("big", [1e8, 1e12, 1e17])
@pytest.mark.parametrize("leaves", [1, 12])  # replayed on floats, then on arrays
def test_a_slope_the_targets_rounding_hides_is_measured_again_or_unresolved(big, leaves):
    # big + sum(x*x): central differences of a target this large lose the slope in its
    # rounding (1e12 + x*x moves by 8e-6 at eps 1e-6, its ulp is 1.2e-4). Such a row is
    # measured again with a step the rounding cannot hide it in, up to 10^4 eps (1e8, 1e12);
    # past that (1e17) it is unresolved: flagged, no verdict, not a failure
    xs = [leaf(2.0 + k, f"x{k}") for k in range(leaves)]
    report = check(traced(big + sum(x * x for x in xs)))
    assert report.passed, report.verdict
    x0 = row(report, "x0")
    if big < 1e15:
        assert x0.status == "pass" and x0.note.startswith("measured with eps "), x0
        assert any("measured again with eps" in n for n in report.notes), report.notes
        assert not report.flagged
    else:
        assert x0.status == "unresolved" and x0.abs_err > x0.bound, x0
        assert "±" in x0.note and "larger eps" in x0.note
        assert report.flagged and "unresolved" in report.verdict
    assert all(r.status in ("pass", "unresolved") for r in report.rows)  # never a failure


def test_a_sum_of_everyday_products_is_not_lost_in_its_rounding():
    # 400 products of numbers up to 400: a total of 2e7, whose partial sums round by 1e-8 or
    # so; at eps 1e-6 the start value's slope came out a few parts in 1,000 off (a
    # "failure" before the rounding was allowed for); measured again it is 1 to 1e-6
    s = leaf(0.0, "s")
    total = s
    for k in range(400):
        total = total + (0.5 + k) * (1.0 * k)
    report = check(traced(total))
    r = row(report, "s")
    assert r.status == "pass" and r.note.startswith("measured with eps"), r
    assert abs(r.numeric - 1.0) < 1e-5  # (1.0000009; 0.99838 at eps 1e-6)


def test_large_numbers_that_cancel_on_the_way_are_measured_again():
    # (1e12 + x) - 1e12 is 2, but carries 1e12's rounding: at eps 1e-6 the difference is 0
    # or 61, not 1; (1e17 + x) - 1e17 carries too much for any step up to 10^4 eps
    x = leaf(2.0, "x")
    r = row(check(traced((1e12 + x) - 1e12)), "x")
    assert r.status == "pass" and r.note.startswith("measured with eps 0.01"), r
    r = row(check(traced((1e17 + x) - 1e17)), "x")
    assert r.status == "unresolved" and "1e+17" in r.note, r


def test_a_wrong_derivative_larger_than_the_rounding_still_fails():
    x = leaf(0.4, "x")
    report = check(traced(1e8 + wrong_tanh()(x)))  # off by 0.24; rounding: about 0.04
    assert row(report, "x").status == "fail" and not report.passed


def test_branch_dependent_runs_say_the_check_holds_for_this_branch():
    x = leaf(2.0, "x")
    report = check(traced(x * x, branch_events=3))
    assert report.passed
    assert any("this branch" in n and "3" in n for n in report.notes)
    assert "this branch" in str(report)


def test_float_conversions_are_mentioned():
    x = leaf(2.0, "x")
    report = check(traced(x * 3.0, float_conversions=1))
    assert any(
        "Value or Tensor was converted to plain numbers during the run (1 time)" in n
        for n in report.notes
    ), report.notes


# --------------------------------------------------------------------------- size and sampling
def test_sampling_leaves_keeps_named_ones_and_says_so():
    xs = [leaf(0.1 * i, f"x{i}") for i in range(30)]
    total = xs[0]
    for x in xs[1:]:
        total = total + x * x
    report = check(traced(total), max_leaves=8)
    alone = [r for r in report.rows if r.index is not None]
    assert len(alone) == 8 and len(report.rows) == 9  # and all 30 at once
    (joint,) = [r for r in report.rows if r.index is None]
    assert joint.name == "all 30 leaves at once" and joint.count == 30 and joint.status == "pass"
    assert any(
        "Checked 8 of 30 leaves one by one" in n and "all 30 at once" in n for n in report.notes
    )
    assert report.passed
    assert report.verdict == (
        "all 8 gradients match finite differences; all 30 leaves at once: agree"
    )
    again = check(Trace(total), max_leaves=8)
    assert [r.index for r in again.rows] == [r.index for r in report.rows]  # seeded
    assert [r.numeric for r in again.rows] == [r.numeric for r in report.rows]


def test_replay_in_several_chunks_matches_one_chunk(monkeypatch):
    xs = [leaf(0.3 + 0.1 * i, f"x{i}") for i in range(12)]
    out = xs[0]
    for x in xs[1:]:
        out = (out * x).tanh() + x
    trace = traced(out)
    whole = check(trace)
    monkeypatch.setattr(replay_module, "CHUNK", 3 * len(trace.nodes))  # one point a chunk
    parts = check(trace)
    assert [r.numeric for r in parts.rows] == pytest.approx(
        [r.numeric for r in whole.rows], rel=1e-12
    )
    assert parts.passed


@pytest.mark.parametrize(
    "kwargs", [{"eps": 0}, {"eps": -1e-6}, {"atol": -1}, {"rtol": float("nan")}, {"max_leaves": 0}]
)
def test_bad_settings_get_a_clear_message(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        check(walkthrough(), **kwargs)


# --------------------------------------------------------------------------- the replays
UNARY_OPS = sorted(name for name, op in OPS.items() if op.arity == 1)
BINARY_OPS = sorted(name for name, op in OPS.items() if op.arity == 2)


@st.composite
def scalar_graphs(draw, max_leaves=6, max_ops=40, min_inputs=0):
    """A random scalar graph over every op: named and unnamed leaves (the first
    ``min_inputs`` named: inputs), reused nodes, several nodes per level (the target sums
    the last few)."""
    n = draw(st.integers(max(1, min_inputs), max(max_leaves, min_inputs)))
    pool = [
        leaf(
            draw(st.floats(-3, 3, allow_nan=False)),
            f"x{i}" if i < min_inputs else draw(st.sampled_from(["", f"x{i}"])),
        )
        for i in range(n)
    ]
    for _ in range(draw(st.integers(1, max_ops))):
        a = draw(st.sampled_from(pool))
        if draw(st.booleans()):
            name = draw(st.sampled_from(UNARY_OPS))
            out = apply(name, a)
        else:
            name = draw(st.sampled_from(BINARY_OPS))
            b = draw(st.sampled_from(pool + [leaf(draw(st.floats(-2, 2)), "")]))
            out = apply(name, a, b)
        pool.append(out)
    target = pool[-1]
    for v in pool[-5:-1]:
        target = target + v
    return traced(target)


def measured(replay, perturbation, engine, eps=1e-6):
    with np.errstate(all="ignore"):
        m = replay.measure(perturbation, eps, engine=engine)
    return [np.asarray(x, dtype=float) for x in (m.f0, m.numeric, m.fwd, m.bwd, m.steps)]


@settings(max_examples=60, deadline=None)
@given(scalar_graphs(), st.sampled_from([1e-6, 1e-3]))
def test_level_grouped_replay_equals_the_node_by_node_replay(trace, eps):
    """Every op, kinks and non-finite values included: the same numbers, bit for bit
    (the same numpy forwards on the same inputs), one chunk or several."""
    replay = Replay(trace)
    slots, _ = choose(trace, None, 200, 0)
    assume(len(slots) and trace.n > 1)
    nodes = measured(replay, slots, "nodes", eps)
    groups = measured(replay, slots, "groups", eps)
    for a, b in zip(nodes, groups):
        np.testing.assert_array_equal(a, b)
    saved = replay_module.GROUP_CHUNK
    replay_module.GROUP_CHUNK = 3 * trace.n  # one point a chunk
    try:
        for a, b in zip(nodes, measured(replay, slots, "groups", eps)):
            np.testing.assert_array_equal(a, b)
    finally:
        replay_module.GROUP_CHUNK = saved


@settings(max_examples=40, deadline=None)
@given(scalar_graphs(min_inputs=3), st.sampled_from([1e-6, 1e-3]))
def test_every_replay_moves_all_the_leaves_at_once_alike(trace, eps):
    """A sample of one leaf and the direction: the node and group replays bit for bit, the
    float replay to the last bits of the target; the joint row's analytic side is the
    gradient times the move."""
    replay = Replay(trace)
    slots, _ = choose(trace, 1, 200, 0)
    assume(len(slots.signs) == 1 and trace.n > 1)
    nodes = measured(replay, slots, "nodes", eps)
    for a, b in zip(nodes, measured(replay, slots, "groups", eps)):
        np.testing.assert_array_equal(a, b)
    if replay.floats_ok and np.all(np.abs(trace.data[np.isfinite(trace.data)]) < 1e6):
        f0, numeric, *_ = measured(replay, slots, "floats", eps)  # (numbers of everyday size:
        if np.isfinite(f0):  # see test_level_grouped_check_agrees_with_the_float_replay)
            np.testing.assert_allclose(f0, nodes[0], rtol=1e-9, atol=1e-12)
    report = check(trace, max_leaves=1, eps=eps)
    (joint,) = [r for r in report.rows if r.index is None]
    up, down = slots.moved(trace.data, eps)
    with np.errstate(all="ignore"):
        along = float((up - down)[0] @ trace.grad[slots.spread] / (2 * eps))
    if joint.note.startswith("measured with eps"):  # measured again with a larger step
        assert joint.analytic == pytest.approx(along, rel=1e-6, abs=1e-9, nan_ok=True)
    else:  # to the last bits of the products' sizes (a sum in another order than @)
        with np.errstate(all="ignore"):
            size = float(np.abs((up - down)[0] * trace.grad[slots.spread]).sum() / (2 * eps))
        assert joint.analytic == pytest.approx(along, rel=1e-12, abs=1e-12 * size, nan_ok=True)
    assert joint.count == len(slots.spread) >= 2


def chained(kind: str, n: int = 12):
    """A graph whose tail is a chain of one op (``sum()`` of products, a running product or
    difference), with the variants the accumulate must leave alone: a link whose other
    operand is an earlier link, the running value as the second operand, x op x."""
    xs = [leaf(0.5 + 0.1 * i, f"x{i}") for i in range(n)]
    terms = [x * x for x in xs]
    op = {"add": operator.add, "mul": operator.mul, "sub": operator.sub}[kind]
    acc = terms[0]
    links = []
    for k, t in enumerate(terms[1:], 1):
        if k == 5:
            acc = op(acc, links[1])  # the other operand is in the chain itself
        elif k == 7:
            acc = op(t, acc)  # the running value second
        elif k == 9:
            acc = op(acc, acc)
        else:
            acc = op(acc, t)
        links.append(acc)
    return traced(acc.relu() + xs[0])


@pytest.mark.parametrize("kind", ["add", "mul", "sub"])
def test_a_chain_replays_by_groups_bit_for_bit(kind):
    trace = chained(kind, 40)
    replay = Replay(trace)
    assert GroupedProgram.make(trace, replay.op_rows, min_size=0) is not None
    slots, _ = choose(trace, None, 200, 0)
    nodes = measured(replay, slots, "nodes")
    for a, b in zip(nodes, measured(replay, slots, "groups")):
        np.testing.assert_array_equal(a, b)
    assert check(trace, max_leaves=None).passed


def test_a_sum_of_squares_is_replayed_by_groups():
    # a group of squares, then a call a +: auto replays it by groups and stays within the
    # budget
    xs = [leaf(0.01 * i - 1.0, f"x{i}") for i in range(300)]
    trace = traced(sum(x * x for x in xs))
    replay = Replay(trace)
    grouped = replay.grouped()
    assert grouped is not None and grouped.calls < len(replay.op_rows) * 0.6, grouped
    slots, _ = choose(trace, None, 200, 0)
    for a, b in zip(measured(replay, slots, "nodes"), measured(replay, slots, "groups")):
        np.testing.assert_array_equal(a, b)
    report = check(trace)
    assert report.passed and 16 <= len(report.rows) < 300  # sampled within the budget
    # a running value (a tanh between the +s) is not worth groups
    acc = xs[0]
    for x in xs[1:]:
        acc = (acc + x * x).tanh()
    assert Replay(traced(acc)).grouped() is None


@settings(max_examples=30, deadline=None)
@given(scalar_graphs(max_ops=15))
def test_level_grouped_check_agrees_with_the_float_replay(trace):
    """Against the engine's own float forwards, leaf by leaf (numpy may differ in the
    last bits, so: close, and the same status where both are clear)."""
    replay = Replay(trace)
    slots, _ = choose(trace, None, 200, 0)
    assume(len(slots) and trace.n > 1 and replay.floats_ok)
    f0, numeric, *_ = measured(replay, slots, "groups")
    g0, slow, *_ = measured(replay, slots, "floats")
    assume(np.all(np.isfinite(slow)) and np.isfinite(g0) and abs(g0) < 1e6)
    # (numpy's and math's tanh, exp... may differ in the last bit, which a huge number on
    # the way, 1e274 % 0.64, turns into any difference at all: numbers of everyday size only)
    assume(np.all(np.abs(trace.data[np.isfinite(trace.data)]) < 1e6))
    np.testing.assert_allclose(f0, g0, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(numeric, slow, rtol=1e-4, atol=1e-4)


def demo_network(points=1, wrong=False):
    """micrograd's demo: an MLP 2-16-16-1 (relu), hinge loss and L2, on ``points`` points;
    the inputs of point ``i`` are bound to ``p{i}x0`` and ``p{i}x1``."""
    from gradmagic import nn
    from gradmagic.data import two_moons

    X, y = two_moons(points, noise=0.1, seed=1)
    net = nn.MLP(2, [16, 16, 1], activation="relu", seed=1337)
    inputs = [[leaf(a, "x0"), leaf(b, "x1")] for a, b in X]
    scores = [net(x) for x in inputs]
    if wrong:  # the last score through a tanh whose derivative is wrong
        scores[-1] = wrong_tanh()(scores[-1])
    loss = nn.hinge_loss(scores, y) + 1e-4 * sum(p * p for p in net.parameters())
    return traced(loss, bindings={f"p{i}x{j}": x[j] for i, x in enumerate(inputs) for j in (0, 1)})


def test_a_network_is_replayed_by_groups_and_sampled_within_the_budget():
    trace = demo_network()
    grouped = Replay(trace).grouped()
    assert grouped is not None and grouped.calls < trace.n / 4
    report = check(trace)
    assert report.passed, report.verdict
    n_inputs = sum(not n.is_constant for n in trace.leaves)
    assert 16 <= len(report.rows) < n_inputs == 339
    (note,) = [n for n in report.notes if n.startswith("Checked")]
    assert (
        f"of {n_inputs} leaves one by one (a random sample of the {n_inputs} named ones, "
        "seed 0) and all 339 at once along a random direction, to keep it within"
    ) in note
    assert "max_leaves=None" in note
    assert [r.index for r in check(trace).rows] == [r.index for r in report.rows]  # seeded
    every = check(trace, max_leaves=None)
    assert every.passed and len(every.rows) == n_inputs
    assert not any(n.startswith("Checked") for n in every.notes)
    same = {r.index: r.numeric for r in every.rows}
    assert all(same[r.index] == r.numeric for r in report.rows if r.index is not None)


def test_a_big_graph_whose_last_nodes_are_deep_is_not_compiled_into_groups(monkeypatch):
    # the last PROBE op nodes decide: a loop's last steps are one node a level (no groups,
    # the rest's levels are not computed); a network's last layers are not
    monkeypatch.setattr(replay_module, "PROBE", 256)
    probes = []
    levels = replay_module.group_levels
    monkeypatch.setattr(
        replay_module,
        "group_levels",
        lambda *a, **k: probes.append(k.get("probe", False)) or levels(*a, **k),
    )
    x, w = leaf(0.3, "x"), leaf(0.7, "w")
    s = x
    for _ in range(400):
        s = (s * w + x).tanh()
    assert Replay(traced(s)).grouped() is None
    assert probes == [True]  # only the probe's levels were computed
    probes.clear()
    assert Replay(demo_network(points=3)).grouped() is not None
    assert probes == [True, False]


@pytest.mark.parametrize("deep", [False, True])
def test_a_wrong_gradient_outside_the_sample_fails_all_the_leaves_at_once(deep):
    # 300 leaves, 8 checked one by one; the one whose derivative is wrong is not among them,
    # but moving every leaf at once along a random direction shows it
    xs = [leaf(0.3 + 0.001 * i, f"x{i}") for i in range(300)]

    def build(bad):
        if deep:  # a running value: no groups, replayed on floats
            acc = xs[0]
            for k, x in enumerate(xs[1:], 1):
                acc = (acc * 0.5 + (wrong_tanh()(x) if k == bad else x * x)).tanh()
            return traced(acc)
        return traced(sum(wrong_tanh()(x) if k == bad else x * x for k, x in enumerate(xs)))

    sampled = {r.name for r in check(build(-1), max_leaves=8).rows if r.index is not None}
    bad = next(k for k in range(299, 0, -1) if f"x{k}" not in sampled)
    report = check(build(bad), max_leaves=8)
    alone = [r for r in report.rows if r.index is not None]
    assert len(alone) == 8 and all(r.status == "pass" for r in alone)
    (joint,) = [r for r in report.rows if r.index is None]
    assert joint.status == "fail" and not report.passed, joint
    assert "all 300 leaves at once: disagree" in report.verdict
    trace = build(bad)
    replay = Replay(trace)
    assert (replay.grouped() is None) == deep
    # every replay moves the leaves alike: numpy's bit for bit, the float one (math.tanh
    # is not numpy's) to the last bits of the target, over 2 eps
    slots, _ = choose(trace, 8, 200, 0)
    assert len(slots.signs) == 1 and len(slots) == 9
    nodes = measured(replay, slots, "nodes")
    if not deep:
        for a, b in zip(nodes, measured(replay, slots, "groups")):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(nodes, measured(replay, slots, "floats")):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-8)


def test_the_grouped_replay_finds_a_wrong_derivative_in_a_network():
    trace = demo_network(points=3, wrong=True)
    assert Replay(trace).grouped() is not None
    report = check(trace, max_leaves=None)
    assert not report.passed
    failed = {r.name for r in report.failures}
    assert failed and failed <= {n.name for n in trace.leaves}
    # the hidden layer of the network feeds every score: its weights disagree
    assert any(name.startswith("L0.") for name in failed), failed
    # the inputs of the last point go through the wrong tanh, the others do not
    status = {r.index: r.status for r in report.rows}
    where = trace.bindings
    assert status[where["p2x0"]] == status[where["p2x1"]] == "fail"
    assert {status[where[f"p{i}x{j}"]] for i in (0, 1) for j in (0, 1)} == {"pass"}


# --------------------------------------------------------------------------- array leaves
def sampled_elements(trace, index):
    """The flat elements of leaf ``index`` that check() perturbs (seeded)."""
    slots, _ = choose(trace, "auto", 200, 0)
    return slots.elem[slots.node == index].tolist()


def weighted_square_sum(shape, wrong_at=None):
    """out = sum(W**2 * C) on Tensors: dout/dW = 2 W C; ``wrong_at``: that element of W's
    gradient made 0.5 too large after backward, as a wrong rule would."""
    rng = np.random.default_rng(1)
    w = Tensor(rng.normal(size=shape), label="W")
    c = Tensor(rng.uniform(0.5, 1.5, size=shape), label="C")
    out = (w**2 * c).sum()
    out.backward()
    assert np.allclose(w.grad, 2 * w.data * c.data) and np.allclose(c.grad, w.data**2)
    if wrong_at is not None:
        grad = w.grad.copy()
        grad[wrong_at] += 0.5
        w.grad = grad
    return Trace(out), w


def test_array_leaves_get_one_summary_row_each():
    trace, _ = weighted_square_sum((3, 4))
    report = check(trace)
    assert report.passed
    assert [r.name for r in report.rows] == ["C", "W"] or sorted(r.name for r in report.rows) == [
        "C",
        "W",
    ]
    w = row(report, "W")
    assert w.count == 12 and "all 12 elements" in w.note


def test_large_array_leaves_are_sampled_and_a_wrong_element_is_found():
    trace, _ = weighted_square_sum((30, 30), wrong_at=None)
    report = check(trace)
    w = row(report, "W")
    assert w.count == 200 and "200 of 900" in w.note
    assert any("W: 200 of its 900 elements" in n for n in report.notes)
    # the sample is seeded: a wrong element inside it is always caught
    sampled = sampled_elements(trace, trace.node("W").index)
    bad = np.unravel_index(sampled[17], (30, 30))
    trace, _ = weighted_square_sum((30, 30), wrong_at=bad)
    w = row(check(trace), "W")
    assert w.status == "fail" and str(tuple(int(i) for i in bad)) in w.note


# --------------------------------------------------------------------------- the report
def test_to_dict_is_json_ready_and_complete():
    report = check(walkthrough())
    data = report.to_dict()
    assert data["passed"] is True and data["kind"] == "check"
    assert data["eps"] == 1e-6 and data["atol"] == 1e-5 and data["rtol"] == 1e-3
    assert len(data["rows"]) == 4
    first = data["rows"][0]
    assert set(first) >= {
        "name",
        "node",
        "analytic",
        "numeric",
        "abs_err",
        "rel_err",
        "bound",
        "status",
        "note",
    }
    assert json.loads(json.dumps(data))["verdict"] == report.verdict
    assert data["replay"] == {"recorded": -8.0, "replayed": -8.0}
    assert "replayed target -8 = recorded" in str(report)


def test_text_and_html_views_show_the_bound_and_worst_first():
    bad_mul = made_by(dataclasses.replace(OPS["*"], df=lambda x, y, out: (x, y)))
    a, b, c = leaf(2.0, "a"), leaf(50.0, "b"), leaf(1.0, "c")
    report = check(traced(bad_mul(a, b) + c))
    text = str(report)
    lines = text.splitlines()
    assert lines[0].startswith("✗")
    body = [ln for ln in lines if ln.startswith(("a ", "b ", "c "))]
    assert [ln[0] for ln in body] == ["b", "a", "c"]  # worst first (largest err/bound)
    assert "bound" in text
    page = report_html(report)
    assert page.index(">b<") < page.index(">a<") < page.index(">c<")
    assert "0.00201" in page and "<table" in page  # b's bound
    assert repr(report).startswith("<CheckReport:")


# --------------------------------------------------------------------------- expect
def test_expect_verdict_unknown_names_and_data_keys():
    trace = walkthrough()
    report = expect(
        trace, {"a": 6.0, "b.grad": -4, "L.data": -8.0, "c": 99.0, "zz": 1.0}, atol=1e-9, rtol=0
    )
    assert isinstance(report, CheckReport) and report.kind == "expect"
    assert report.verdict == "3 of 5 correct"
    assert not report.passed
    statuses = {r.name: r.status for r in report.rows}
    assert statuses == {"a": "pass", "b.grad": "pass", "L.data": "pass", "c": "fail", "zz": "error"}
    assert row(report, "zz").note == "no node named 'zz'"
    assert row(report, "c").got == -2.0 and row(report, "c").expected == 99.0
    with pytest.raises(AssertionError, match="'zz'.*no node named"):
        report.assert_passed()
    assert report.to_dict()["rows"][0].keys() >= {"got", "expected"}


def test_expect_accepts_pairs_and_uses_trace_tolerances():
    trace = walkthrough()
    trace.options.atol, trace.options.rtol = 0.5, 0.0
    report = trace.expect([("a", 6.4), ("f", 4)])
    assert report.passed and report.verdict == "2 of 2 correct"


def test_expect_bad_expected_values_are_error_rows():
    trace = walkthrough()
    report = expect(trace, {"a": "six", "b": [1.0, 2.0]})
    assert [r.status for r in report.rows] == ["error", "error"]
    assert "not a number" in report.rows[0].note and "shape" in report.rows[1].note
    with pytest.raises(TypeError, match="pairs"):
        expect(trace, [("a", 1.0, 2.0)])


def test_with_zero_tolerance_the_worst_element_is_the_largest_difference():
    tensor = pytest.importorskip("gradmagic.core.tensor")
    W = tensor.Tensor([1.0, 2.0, 3.0], label="W")
    trace = traced((W * W).sum())  # grad 2W = [2, 4, 6]
    report = expect(trace, {"W": [2.1, 4.0, 7.0]}, atol=0.0, rtol=0.0)
    (r,) = report.rows
    assert r.status == "fail" and r.abs_err == pytest.approx(1.0) and "(2,)" in r.note
    # the check's array row too: element 1 is off by 0.5, element 0 by 0.1
    w = tensor.Tensor([1.0, 2.0, 3.0], label="W")
    out = (w**2).sum()
    out.backward()
    w.grad = w.grad + np.array([0.1, 0.5, 0.0])
    r = row(check(Trace(out), atol=0.0, rtol=0.0), "W")
    assert r.abs_err == pytest.approx(0.5, rel=1e-6)
    assert "worst element (1,)" in r.note
    # and rows of a report: the larger difference first
    a, b = leaf(1.0, "a"), leaf(1.0, "b")
    report = expect(traced(a * b), {"a": 1.2, "b": 3.0}, atol=0.0, rtol=0.0)
    assert [r.name for r in report.worst_first()] == ["b", "a"]


def test_expect_compares_nan_with_nan():
    x = leaf(-1.0, "x")
    y = x.log()
    y.label = "y"
    trace = traced(y)
    assert expect(trace, {"y.data": float("nan"), "x.data": -1.0}).passed
    assert not expect(trace, {"x.grad": float("nan")}).passed  # the grad is -1


# --------------------------------------------------------------------------- real tensors
def tensor_net_trace(nin=4, hidden=30):
    tensor = pytest.importorskip("gradmagic.core.tensor")
    tensor_nn = pytest.importorskip("gradmagic.nn.tensor")
    net = tensor_nn.Sequential(
        tensor_nn.Linear(nin, hidden, seed=0), tensor_nn.ReLU(), tensor_nn.Linear(hidden, 3, seed=1)
    )
    X = tensor.Tensor(
        np.random.default_rng(0).normal(size=(8, nin)), label="X", requires_grad=False
    )
    loss = tensor.cross_entropy(net(X), [0, 1, 2, 0, 1, 2, 0, 1])
    return traced(loss)


def test_tensor_network_check_passes_and_skips_constant_inputs():
    trace = tensor_net_trace()
    report = check(trace)
    assert report.passed, str(report)
    assert sorted(r.name for r in report.rows) == ["0.W", "0.b", "2.W", "2.b"]
    # X is named, so its note says it is not checked; the unnamed class labels are not listed
    assert [n for n in report.notes if "constant" in n] == [
        "1 named constant (requires_grad=False: X) not checked."
    ]
    assert row(report, "0.W").count == 120


def test_unnamed_tensor_constants_get_no_note():
    tensor = pytest.importorskip("gradmagic.core.tensor")
    x = tensor.Tensor([1.0, -2.0, 3.0], label="x")
    loss = (x**2 * 1.0 + np.array([0.5, 0.5, 0.5])).sum()  # three unnamed constants
    report = check(traced(loss))
    assert report.passed and [r.name for r in report.rows] == ["x"]
    assert not any("constant" in n for n in report.notes), report.notes


def test_tensor_leaf_sampling_and_a_wrong_gradient_element():
    trace = tensor_net_trace(nin=10, hidden=40)  # 0.W has 400 elements
    w = trace.node("0.W")
    sampled = sampled_elements(trace, w.index)
    assert len(sampled) == 200
    where = np.unravel_index(sampled[3], w.shape)
    w.grad[where] += 0.1  # a wrong analytic gradient in the snapshot
    r = row(check(trace), "0.W")
    assert r.status == "fail" and str(tuple(int(i) for i in where)) in r.note
    assert "200 of 400 elements" in r.note


def test_mixed_value_and_tensor_graph():
    tensor = pytest.importorskip("gradmagic.core.tensor")
    a = leaf(0.5, "a")
    T = tensor.Tensor([[1.0, 2.0], [3.0, -1.0]], label="T")
    report = check(traced((T * a).tanh().sum() * a))
    assert report.passed and sorted(r.name for r in report.rows) == ["T", "a"]


# --------------------------------------------------------------------------- assert messages
def test_assert_passed_names_every_wrong_answer_with_expected_got_and_tolerance():
    report = expect(walkthrough(), {"a": 6.0, "b": 4.0, "c": 2.0, "f": 40.0, "zz": 1.0})
    with pytest.raises(AssertionError) as info:
        report.assert_passed()
    lines = str(info.value).splitlines()
    assert lines[0] == "1 of 5 correct"
    assert "atol 1e-05" in lines[1] and "rtol 0.001" in lines[1]
    for name, want, got, bound in (
        ("b", "4", "-4", "0.00401"),
        ("c", "2", "-2", "0.00201"),
        ("f", "40", "4", "0.04001"),
    ):
        (line,) = [ln for ln in lines if ln.startswith(f"- '{name}'")]
        assert f"expected {want}," in line and f"got {got};" in line
        assert f"tolerance {bound}" in line
    assert any("'zz'" in ln and "no node named" in ln for ln in lines)
    assert not any("'a'" in ln for ln in lines)


def test_assert_passed_lists_at_most_a_screenful():
    a = leaf(1.0, "a")
    total = a * 0.0
    for k in range(30):
        total = total + leaf(float(k), f"x{k}") * a
    report = expect(traced(total), {f"x{k}": 99.0 for k in range(30)})
    with pytest.raises(AssertionError) as info:
        report.assert_passed()
    message = str(info.value)
    described = [ln for ln in message.splitlines() if ln.startswith("- ")]
    assert len(described) == check_module.ASSERT_ROWS
    assert f"(and {30 - check_module.ASSERT_ROWS} more:" in message


def test_an_error_fails_the_report_and_is_in_every_view():
    report = check_module.unanswered({"a": 1.0, "b": 2.0}, "The cell raised KeyError on line 3")
    assert not report.passed and report.error.startswith("The cell raised")
    assert [r.status for r in report.rows] == ["error", "error"]
    assert report.verdict == "0 of 2 correct; the cell could not be run"
    assert "KeyError on line 3" in str(report) and "KeyError on line 3" in report_html(report)
    with pytest.raises(AssertionError, match="KeyError on line 3"):
        report.assert_passed()
    assert json.loads(json.dumps(report.to_dict()))["error"] == report.error


def test_expected_pairs_accepts_mappings_and_pairs_only():
    from types import MappingProxyType

    assert check_module.expected_pairs(MappingProxyType({"a": 1})) == [("a", 1)]
    assert check_module.expected_pairs(iter([("a", 1), ("b.data", 2)])) == [("a", 1), ("b.data", 2)]
    for bad in ("a=1", 3, None):
        with pytest.raises(TypeError, match="dict or"):
            check_module.expected_pairs(bad)


# --------------------------------------------------------------------------- PyTorch
def test_every_op_has_a_torch_counterpart():
    torch = pytest.importorskip("torch")
    from gradmagic.core.tensor_ops import TENSOR_OPS

    # every entry names its torch function, and it computes what the entry's forward does
    for op in OPS.values():
        f = op.torch_function(torch)
        args = (1.7, 0.6)[: op.arity] if op.name != "roundn" else (1.234, 2)
        theirs = f(*[torch.tensor(float(a), dtype=torch.float64) for a in args])
        assert float(theirs) == pytest.approx(float(op.f(*args)), rel=1e-12), op.name
    for op in TENSOR_OPS.values():
        assert op.torch_function(torch) is not None, op.name
    x = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]])
    for name in ("exp", "tanh", "sin", "cos", "abs", "neg", "sigmoid", "relu"):
        op = TENSOR_OPS[name]
        theirs = op.torch_function(torch)(torch.tensor(x)).numpy()
        np.testing.assert_allclose(theirs, op.f(x), rtol=1e-12, err_msg=name)
    for name, params in (
        ("sum", {"axis": (1,), "keepdims": False}),
        ("max", {"axis": None, "keepdims": True}),
        ("softmax", {"axis": 1}),
        ("cumsum", {"axis": 0}),
        ("transpose", {"axes": None}),
        ("reshape", {"shape": (3, 2)}),
        ("getitem", {"index": (slice(None), np.array([0, 2])), "basic": False}),
    ):
        op = TENSOR_OPS[name]
        theirs = op.torch_function(torch)(torch.tensor(x), **params).numpy()
        np.testing.assert_allclose(theirs, op.f(x, **params), rtol=1e-12, err_msg=name)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.sampled_from(["exp", "tanh", "sigmoid", "sin", "cos", "relu", "abs"]),
        min_size=1,
        max_size=4,
    ),
    st.floats(-2, 2),
    st.floats(0.5, 3),
)
def test_torch_replay_matches_the_engine_on_scalar_graphs(names, x0, y0):
    torch = pytest.importorskip("torch")
    from gradmagic.analysis import torchcheck

    x, y = leaf(x0, "x"), leaf(y0, "y")
    z = x * y + x / y - y**2.5 + (x % y) + (x // y)
    for name in names:
        z = (abs(z) if name == "abs" else getattr(z, name)()) * y
    trace = traced(z)
    assume(all(n.finite for n in trace.nodes))  # overflow: inf and nan may differ in kind
    comparison = torchcheck.compare(trace)
    assert comparison.error is None and comparison.version == torch.__version__.split("+")[0]
    np.testing.assert_allclose(comparison.value, z.data, rtol=1e-12, atol=1e-12)
    for r in comparison.rows:
        np.testing.assert_allclose(
            r.torch, trace.nodes[r.index].grad, rtol=1e-9, atol=1e-12, err_msg=str(r)
        )
        assert r.agrees
    assert {r.name for r in comparison.rows} >= {"x", "y"}


def test_torch_replay_of_tensor_ops_and_a_disagreement():
    pytest.importorskip("torch")
    from gradmagic.analysis import torchcheck
    from gradmagic.core.tensor import Tensor

    W = Tensor([[0.1, -0.4, 0.3], [0.7, 0.2, -0.5]], label="W")
    x = Tensor([1.0, -2.0, 0.5], label="x")
    s = leaf(0.3, "s")
    h = (W @ x).tanh() * s
    L = (
        h.softmax(0).log().sum()
        + W.T[1:, 0].mean()
        + W.max(axis=1).sum()
        + W.reshape(3, 2)[[0, 0, 2]].sum()
        + (W**2).sum(axis=0).sum()
    )
    trace = traced(L)
    comparison = torchcheck.compare(trace)
    assert comparison.passed, comparison.verdict
    assert {r.name for r in comparison.rows} == {"W", "x", "s"}
    by_name = {r.name: r for r in comparison.rows}
    np.testing.assert_allclose(by_name["W"].torch, trace.node("W").grad, rtol=1e-10)
    assert "agrees on all 3 gradients" in comparison.verdict
    trace.nodes[trace.node("s").index].grad += 1.0  # as if backward had a bug
    worse = torchcheck.compare(trace)
    assert not worse.passed and "disagrees on 1 of 3" in worse.verdict
    assert worse.by_index[trace.node("s").index].diff == pytest.approx(1.0)


def test_torch_replays_cumsum_floor_division_and_modulo():
    pytest.importorskip("torch")
    from gradmagic.analysis import torchcheck
    from gradmagic.core.tensor import Tensor

    W = Tensor([[0.3, -1.7], [2.5, 0.9]], label="W")
    L = (
        (W.cumsum() ** 2).sum()
        + (W.cumsum(axis=1) * W).sum()
        + (W % 0.7).sum()
        + (W // 0.7 * W).sum()
    )
    comparison = torchcheck.compare(traced(L))
    assert comparison.passed, comparison.verdict
    assert comparison.value == pytest.approx(float(L.data), rel=1e-12)


def test_torch_missing_or_an_unknown_op_is_a_message(monkeypatch):
    from gradmagic.analysis import torchcheck

    trace = walkthrough()
    monkeypatch.setitem(sys.modules, "torch", None)
    missing = torchcheck.compare(trace)
    assert missing.error == torchcheck.INSTALL and not missing.passed and not missing.rows
    assert "pip install torch" in missing.verdict and "gradmagic[torch]" in missing.verdict
    assert "\n" not in missing.verdict
    monkeypatch.undo()
    pytest.importorskip("torch")
    code = trace.op_code[-1]  # the target's op entry, renamed in the snapshot
    trace.ops[code] = dataclasses.replace(trace.ops[code], name="frobnicate", torch=None)
    unknown = torchcheck.compare(trace)
    assert "'frobnicate'" in unknown.error and "nothing was compared" in unknown.error


def wide(values):
    """A graph as wide as it has inputs (a level of each op for all of them, then their sum)."""
    xs = [leaf(v, f"x{i}") for i, v in enumerate(values)]
    return traced(sum(((x * x + x).relu() * 0.5 for x in xs), leaf(0.0, "")))


@pytest.mark.parametrize("kind", ["add", "mul"])
def test_the_float_replay_gives_the_numpy_replays_numbers(kind):
    """The float replay (the engine's own forwards, a pass per point) and numpy's node by node:
    the same numbers, with unary ops (relu) among the binary ones or not."""
    a, b = leaf(0.3, "a"), leaf(0.7, "b")
    arithmetic = traced((a * b + a) * 0.5 - (a - b * 2.0) * 0.25)  # binary ops only
    for trace in (chained(kind, 12), wide([0.25 * i - 1.1 for i in range(3)]), arithmetic):
        replay = Replay(trace)
        slots, _ = choose(trace, None, 200, 0)
        floats = measured(replay, slots, "floats")
        for x, y in zip(floats, measured(replay, slots, "nodes")):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
        assert np.isfinite(floats[1]).all()


# --------------------------------------------------------------------------- nothing checked
def test_a_check_of_a_graph_without_inputs_says_nothing_was_checked():
    c = Value(2.0)  # an unnamed number: a constant, not an input
    report = check(traced(c * 3.0 + 1.0))
    assert report.rows == []
    assert report.verdict.startswith("nothing checked: ") and "no input" in report.verdict
    assert "0 gradients" not in report.verdict and "match" not in report.verdict
    assert report.to_dict()["checked"] == 0 and report.to_dict()["unchecked"]
    text, page = str(report), report_html(report)
    assert "✓" not in text and "✓" not in page and "nothing checked" in text


def test_an_empty_expect_says_nothing_was_compared():
    report = expect(walkthrough(), {})
    assert report.verdict == "nothing compared: no expected answers were given"
    assert "✓" not in str(report)


def test_trace_check_takes_max_leaves_and_keeps_the_last_report():
    xs = [leaf(0.1 * i, f"x{i}") for i in range(300)]
    trace = traced(sum(((x * x + x).relu() * 0.5 for x in xs), leaf(0.0, "")))
    every = trace.check(max_leaves=None)
    assert every.passed and len(every.rows) == 300
    assert trace.check(max_leaves=None) is every  # kept
    some = trace.check(max_leaves=5)
    assert len([r for r in some.rows if r.index is not None]) == 5
    assert trace.check(max_leaves=None) is not every and len(trace.check().rows) < 300


def test_an_infinite_expected_answer_is_met_only_by_that_infinity():
    from gradmagic.analysis.check import differences

    _, _, close = differences(
        [5.0, np.inf, -np.inf, np.inf], [np.inf, np.inf, np.inf, 1.0], atol=1e-5, rtol=1e-3
    )
    assert close.tolist() == [False, True, False, False]
