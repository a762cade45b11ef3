"""Tests of the %%autograd magic, run through a real IPython shell."""

import contextlib
import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from IPython.core.error import UsageError

import gradmagic
from gradmagic.analysis.options import Options
from gradmagic.core.engine import Value
from gradmagic.analysis.trace import Trace

from cells_corpus import CELLS

TEXTBOOK = Path(__file__).parents[2] / "shared/cases/textbook.json"

# the textbook cells, inlined so they run even without the shared file
INLINE_TEXTBOOK = [
    (
        "L = d*f walk-through",
        "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f\nL",
        [["L.data", -8.0], ["a.grad", 6.0], ["b.grad", -4.0], ["c.grad", -2.0], ["f.grad", 4.0]],
    ),
    (
        "tanh neuron",
        "x1 = 2.0\nx2 = 0.0\nw1 = -3.0\nw2 = 1.0\nb = 6.8813735870195432\n"
        "n = x1*w1 + x2*w2 + b\no = n.tanh()\no",
        [
            ["o.data", 0.7071067811865476],
            ["x1.grad", -1.5],
            ["w1.grad", 1.0],
            ["x2.grad", 0.5],
            ["w2.grad", 0.0],
        ],
    ),
    (
        "quadratic in two variables",
        "x = 2.0\ny = 3.0\nf = 3*x**2 + x*y + 5*y**2\nf",
        [["f.data", 63.0], ["x.grad", 15.0], ["y.grad", 32.0]],
    ),
    ("a value used twice", "a = 3.0\nb = a + a\nb", [["b.data", 6.0], ["a.grad", 2.0]]),
]

RUNTIME_NAMES = ("_runtime", "RT.", "labelled(", "literal(", "shown(", "ints(", "\\x00", "\x00")


def autograd(ip, body, options="-q", **kw):
    """Run ``%%autograd options`` over ``body``; returns the ExecutionResult."""
    return ip.run_cell(f"%%autograd {options}\n{body}", **kw)


def check_values(ip, checks):
    for expression, expected in checks:
        assert eval(expression, ip.user_ns) == pytest.approx(expected, abs=1e-9), expression


# --------------------------------------------------------------------------- textbook
@pytest.mark.parametrize("name, cell, checks", INLINE_TEXTBOOK, ids=[c[0] for c in INLINE_TEXTBOOK])
def test_textbook_cells_inline(ip, name, cell, checks):
    assert autograd(ip, cell).success
    check_values(ip, checks)
    assert gradmagic.last.value == pytest.approx(checks[0][1])


def test_textbook_cells_from_shared_file(ip):
    if not TEXTBOOK.exists():
        pytest.skip(f"{TEXTBOOK} is absent")
    cases = json.loads(TEXTBOOK.read_text())["cases"]
    assert cases
    for case in cases:
        assert autograd(ip, case["cell"]).success, case["name"]
        check_values(ip, case["checks"])


def test_gradients_match_torch(ip):
    torch = pytest.importorskip("torch")
    assert autograd(
        ip,
        "import math\nx = 0.7\ny = -1.3\n"
        "z = math.tanh(x * y) + math.exp(x) / (1 + y ** 2) - math.log(x) * y",
    ).success
    tx = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    ty = torch.tensor(-1.3, dtype=torch.float64, requires_grad=True)
    tz = torch.tanh(tx * ty) + torch.exp(tx) / (1 + ty**2) - torch.log(tx) * ty
    tz.backward()
    assert ip.user_ns["z"].data == pytest.approx(tz.item(), rel=1e-12)
    assert ip.user_ns["x"].grad == pytest.approx(tx.grad.item(), rel=1e-12)
    assert ip.user_ns["y"].grad == pytest.approx(ty.grad.item(), rel=1e-12)


def test_gradients_match_finite_differences(ip):
    body = "import math\nu = {u}\nv = 0.4\nr = math.sqrt(u * u + v) * math.sin(u) - u / v"
    assert autograd(ip, body.format(u=1.1)).success
    analytic = ip.user_ns["u"].grad
    h = 1e-6
    values = []
    for u in (1.1 + h, 1.1 - h):
        autograd(ip, body.format(u=u))
        values.append(ip.user_ns["r"].data)
    assert analytic == pytest.approx((values[0] - values[1]) / (2 * h), rel=1e-6)


# --------------------------------------------------------------------------- result
def test_the_result_is_a_trace_held_by_out_and_gradmagic_last(ip):
    result = autograd(ip, "a = 2.0\nb = a * a + 1\nb", options="", store_history=True)
    trace = result.result
    assert isinstance(trace, Trace) and trace is gradmagic.last
    assert ip.user_ns["Out"][result.execution_count] is trace
    assert trace.value == 5.0 and trace.grads == {"a": 4.0, "b": 1.0}
    assert [n.label for n in trace.nodes][-1] == "b" and trace.target.op == "+"
    assert {n.label: n.data for n in trace.nodes if n.label} == {"a": 2.0, "b": 5.0}


def test_a_cell_of_ints_keeps_every_int_exact_in_its_trace(ip):
    # the magic's int nodes, small, past 2**53 and past a float's range, read back as the
    # ints plain Python computes
    body = (
        "x = 3\nbig = 2 ** 60 + 1\nhuge = 10 ** 400\ns = x\nfor _ in range(20):\n"
        "    s = s * 2 - s + x\nt = s + big * 0 + (huge - huge) + big - big\nt"
    )
    plain = {}
    exec(body, {}, plain)
    assert autograd(ip, body).success
    trace = gradmagic.last
    assert trace.target.data == plain["t"] and type(trace.target.data) is int
    for name in ("x", "big", "huge", "s"):
        node = trace.node(name)
        assert node.data == plain[name] and type(node.data) is int, name
    assert trace.data[trace.node("huge").index] == float("inf")
    assert all(type(node.data) is int for node in trace.nodes)
    assert len(trace.exact) == trace.n


def test_quiet_returns_nothing_but_keeps_the_trace(ip):
    result = autograd(ip, "a = 2.0\na * 3", store_history=True)
    assert result.result is None and gradmagic.last.value == 6.0


def test_a_trailing_semicolon_silences_the_value(ip):
    result = autograd(ip, "a = 2.0\na * 3;", options="", store_history=True)
    assert result.result is None and gradmagic.last.value == 6.0


def test_options_are_stored_in_the_trace(ip):
    assert autograd(
        ip,
        "a = 1.0\nb = a * 2",
        options="-q --eps 1e-4 --atol 0.01 --rtol 0.2 "
        "--no-check --rankdir TB --max-nodes 20 --torch "
        '--expect "a=2, b.data=2.0"',
    ).success
    assert gradmagic.last.options == Options(
        **{
            "target": None,
            "no_check": True,
            "eps": 1e-4,
            "atol": 0.01,
            "rtol": 0.2,
            "expect": {"a": 2.0, "b.data": 2.0},
            "rankdir": "TB",
            "max_nodes": 20,
            "torch": True,
            "quiet": True,
        }
    )


def test_defaults_of_the_options(ip):
    assert autograd(ip, "a = 1.0\na + 1").success
    opts = gradmagic.last.options
    assert (opts.eps, opts.atol, opts.rtol, opts.rankdir, opts.max_nodes) == (
        1e-6,
        1e-5,
        1e-3,
        None,
        150,
    )  # rankdir None: the view picks
    assert opts.expect is None and not opts.no_check and not opts.torch


def test_expect_from_a_dict_and_arithmetic(ip):
    ip.user_ns["answers"] = {"a": 6, "b.data": -4 / 3}
    autograd(ip, "a = 1.0\nb = a * 2", options="-q --expect answers")
    assert gradmagic.last.options.expect == {"a": 6.0, "b.data": -4 / 3}
    autograd(ip, "a = 1.0\nb = a * 2", options="-q --expect 'a=-4/3, b = 2**3'")
    assert gradmagic.last.options.expect == {"a": -4 / 3, "b": 8.0}


@pytest.mark.parametrize(
    "options, message",
    [
        ("--eps abc", "invalid float value"),
        ("--eps -1", "--eps must be positive"),
        ("--rankdir XY", "invalid choice"),
        ("--max-nodes 0", "at least 1"),
        ("--frobnicate", "unrecognized arguments"),
        ("-t 1x", "variable name"),
        ('--expect "a=six"', "'six' is not a number"),
        ('--expect "a 6"', "is not NAME=NUMBER"),
        ('--expect "1a=6"', "not a variable name"),
        ("--expect nosuchdict", "no variable 'nosuchdict'"),
        ("stray words", "unexpected text"),
    ],
)
def test_bad_options_raise_usage_error_with_help(ip, options, message):
    with pytest.raises(UsageError) as e:
        ip.run_cell_magic("autograd", options, "a = 1.0")
    assert message in str(e.value)
    assert "--max-nodes" in str(e.value) and "--expect" in str(e.value)  # the help text


def test_help_lists_the_options(ip):
    doc = ip.find_cell_magic("autograd").__doc__
    for option in (
        "-t NAME, --target NAME",
        "--no-check",
        "--eps",
        "--atol",
        "--rtol",
        "--expect SPEC",
        "--rankdir",
        "--max-nodes N",
        "--torch",
        "-q, --quiet",
    ):
        assert option in doc
    info = ip.object_inspect_text("%%autograd")
    assert "--expect" in info and "backward()" in info
    flat = " ".join(doc.split())
    assert "tolerance of the check and of --expect" in flat
    assert "with -q it returns None; the Trace is in gradmagic.last" in flat
    assert doc.lstrip().startswith("%autograd [-t NAME]") and "::" not in doc  # plain text


@pytest.mark.parametrize(
    "line, options, expression",
    [
        ('-q --expect "a=1, b=2" a*b', '-q --expect "a=1, b=2"', "a*b"),
        (
            "--no-check --torch -t L --max-nodes 5 x + 1",
            "--no-check --torch -t L --max-nodes 5",
            "x + 1",
        ),
        ("--atol=1e-3 --rtol 0.1 --eps 1e-4 y", "--atol=1e-3 --rtol 0.1 --eps 1e-4", "y"),
        ("--rankdir TB --quiet -x", "--rankdir TB --quiet", "-x"),
    ],
)
def test_the_line_form_splits_options_from_the_expression(line, options, expression):
    from gradmagic.notebook.magic import _split_line

    assert _split_line(line) == (options, expression)


# --------------------------------------------------------------------------- target
def test_target_is_the_last_assignment(ip):
    autograd(ip, "a = 2.0\nL = a ** 3")
    assert gradmagic.last.target.label == "L" and ip.user_ns["a"].grad == 12.0


def test_target_option_overrides(ip):
    autograd(ip, "a = 2.0\nL = a ** 3\nM = a * 5\nprint('done')", options="-q -t L")
    assert gradmagic.last.target.label == "L" and ip.user_ns["a"].grad == 12.0


def test_target_of_the_line_form(ip):
    ip.user_ns["p"] = 1.5
    result = ip.run_cell("%autograd -q p * p + 2 * p")
    assert result.success
    assert gradmagic.last.value == 5.25 and ip.user_ns["p"].grad == 5.0


def test_a_run_with_no_target_puts_back_the_numbers_it_read(ip, capsys):
    ip.user_ns.update(x=3.0, A=np.array([1.0, 2.0]))
    assert autograd(ip, "y = x * 2\nB = A * x\nprint('no target')", options="").success
    assert "nothing to differentiate" in capsys.readouterr().out and gradmagic.last is None
    assert type(ip.user_ns["x"]) is float and ip.user_ns["x"] == 3.0
    assert type(ip.user_ns["A"]) is np.ndarray and ip.user_ns["A"].tolist() == [1.0, 2.0]


def test_a_result_that_is_not_a_value_gives_a_one_line_notice(ip, capsys):
    assert autograd(ip, "a = 2.0\nprint('hello')", options="").success
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "hello",
        "%%autograd: the cell's value is None, not a Value, so there is nothing to differentiate",
    ]
    assert gradmagic.last is None and "Traceback" not in out


@pytest.mark.parametrize(
    "body, options, words",
    [
        ("s = 'text'", "", "s is a str ('text'), not a Value"),
        ("for i in range(2):\n    pass", "", "does not end with an expression"),
        ("a = 1.0", "-t nothere", "no variable 'nothere'"),
    ],
)
def test_other_notices(ip, capsys, body, options, words):
    assert autograd(ip, body, options=options).success
    out = capsys.readouterr().out
    assert words in out and len(out.splitlines()) == 1 and gradmagic.last is None


def test_quiet_silences_the_notice(ip, capsys):
    assert autograd(ip, "x = 'no number'").success
    assert capsys.readouterr().out == ""


# --------------------------------------------------------------------------- names and runs
def test_numbers_from_earlier_cells_become_labelled_leaves(ip):
    ip.user_ns["np"] = np
    ip.run_cell("w = 3.0\nk = 2\ns = np.float64(0.5)\nflag = True", store_history=False)
    autograd(ip, "L = w * w * k + s + flag")
    w, k, s = (ip.user_ns[n] for n in "wks")
    assert (w.label, w.grad, w.is_leaf) == ("w", 12.0, True)
    # an int and a numpy float are their own types again; their gradients are the trace's
    assert (type(k), k, type(s), s) == (int, 2, np.float64, 0.5)
    assert (gradmagic.last.grads["k"], gradmagic.last.grads["s"]) == (9.0, 1.0)
    assert ip.user_ns["flag"] is True


def test_numbers_with_other_arithmetic_are_not_lifted_a_float32_is(ip):
    from fractions import Fraction

    ip.user_ns.update(
        h=np.float32(0.1), q=Fraction(1, 3), i8=np.int8(100), Fraction=Fraction, np=np
    )
    assert autograd(
        ip, "a = h * 2\nb = q + Fraction(1, 6)\nc = i8 + np.int8(27)\nL = a * 1.0"
    ).success
    assert isinstance(ip.user_ns["h"], np.float32) and ip.user_ns["a"] == np.float32(0.1) * 2
    assert gradmagic.last.grads["h"] == 2.0 and gradmagic.last.grads["h"].dtype == np.float32
    assert ip.user_ns["b"] == Fraction(1, 2) and type(ip.user_ns["i8"]) is np.int8


def test_the_magic_itself_decides_no_branches(ip):
    ip.user_ns["np"] = np
    assert autograd(
        ip,
        "import random\nx = random.random()\nxs = [x, 2.0]\nprint(xs, f'{x}')\n"
        "n = len(xs)\nm = sum(xs) / n\nz = np.zeros(n)\nL = m * x",
    ).success
    assert gradmagic.last.branch_events == 0


def test_values_from_earlier_runs_enter_as_fresh_leaves(ip):
    autograd(ip, "a = 2.0\nb = a * 3")
    old_a, old_b = ip.user_ns["a"], ip.user_ns["b"]
    autograd(ip, "c = b * 2")
    b = ip.user_ns["b"]
    assert b is not old_b and b.is_leaf and b.data == 6.0 and b.label == "b"
    assert b.grad == 2.0 and old_a.grad == 3.0  # the old graph is not touched
    assert [n.label for n in gradmagic.last.nodes if n.is_leaf and n.label] == ["b"]


def test_running_a_cell_twice_gives_the_same_gradients(ip):
    ip.user_ns["w"] = 0.5
    body = "xs = [1.0, 2.0, 3.0]\nL = sum((w * x - 1) ** 2 for x in xs)"
    autograd(ip, body)
    first = dict(gradmagic.last.grads), ip.user_ns["w"].grad
    autograd(ip, body)
    assert (gradmagic.last.grads, ip.user_ns["w"].grad) == first
    assert first[1] == pytest.approx(2 * sum((0.5 * x - 1) * x for x in (1, 2, 3)))


def test_names_read_only_as_integers_stay_plain(ip):
    ip.run_cell("n = 3\nidx = 1", store_history=False)
    autograd(
        ip,
        "xs = [2.0] * n\ntotal = sum(xs[:n]) + xs[idx]\nfor i in range(n):\n"
        "    total = total * 1.5",
    )
    assert type(ip.user_ns["n"]) is int and type(ip.user_ns["idx"]) is int
    # no target (the cell ends with a loop): every name holds what plain Python binds
    assert ip.user_ns["total"] == 8.0 * 1.5**3 and type(ip.user_ns["total"]) is float


def test_functions_defined_in_a_cell_keep_working_in_plain_cells(ip):
    autograd(ip, "def f(x):\n    y = 2.0 * x\n    return y + 1\nz = f(3.0)")
    assert ip.user_ns["z"].data == 7.0
    ip.user_ns["Value"] = Value
    assert ip.run_cell("plain = f(4.0)\nvia_value = f(Value(1.0))").success
    assert ip.user_ns["plain"] == 9.0 and type(ip.user_ns["plain"]) is float
    assert ip.user_ns["via_value"].data == 3.0
    assert ip.user_ns["via_value"].parents[0].label == "y"


def test_a_node_bound_at_the_end_takes_its_name(ip):
    autograd(ip, "def loss(p):\n    out = p * p\n    return out\nq = 3.0\nL = loss(q)")
    assert ip.user_ns["L"].label == "L" and gradmagic.last.grads["L"] == 1.0


def test_branches_and_conversions_are_counted(ip):
    autograd(ip, "x = 2.0\ny = x * 3 if x > 0 else -x")
    assert gradmagic.last.branch_events == 1 and gradmagic.last.branch_dependent
    assert gradmagic.last.float_conversions == 0 and gradmagic.last.warnings == []


def test_a_cut_graph_is_reported_with_its_line(ip):
    ip.user_ns.update(np=np, math=math)
    autograd(
        ip,
        "x = 0.5\ny = math.asin(x) + x\nz = np.zeros(2)\nz[0] = x\nv = np.array([x, y])"
        "\nL = y + v.sum()",
    )
    trace = gradmagic.last
    assert trace.float_conversions == 2  # math.asin's x and z[0] = x
    assert trace.warnings == [  # np.array([x, y]) keeps the graph: no cut there
        "line 3: math.asin has no gradient rule: 'x' entered it as a plain number, so "
        "no gradient flows through it",
        "a Value or Tensor was converted to plain numbers by code outside the graph (e.g. a "
        "library function or storing into a numpy float array), so no gradient flows through "
        "those numbers",
    ]
    assert isinstance(ip.user_ns["z"], np.ndarray)  # changed in place: not a Tensor
    assert trace.grads["x"] == 3.0  # L = 2y + x, y = asin(x) (cut) + x


def test_numbers_packed_into_bytes_are_a_named_cut(ip):
    # the fast inverse square root reads its float's bits: the derivative of the plain
    # function is not the graph's, and the trace says where the numbers left it
    autograd(
        ip,
        "import struct\nx = 4.1\ni = struct.unpack('>i', struct.pack('>f', x))[0]\n"
        "y = struct.unpack('>f', struct.pack('>i', 0x5F3759DF - (i >> 1)))[0]\n"
        "y * (1.5 - 0.5 * x * y * y)",
    )
    trace = gradmagic.last
    assert trace.warnings[0].startswith("line 4: struct.pack computes outside the graph: 'x'")


def test_no_new_names_and_no_ast_transformers(ip):
    transformers = list(ip.ast_transformers)
    before = set(ip.user_ns)
    autograd(ip, "a = 1.0\nb = a + 1")
    assert set(ip.user_ns) - before == {"a", "b"}
    assert ip.ast_transformers == transformers
    assert ip.run_cell("plain_number = 2.0").success
    assert type(ip.user_ns["plain_number"]) is float


def test_unload_removes_the_magics_and_load_restores_them(ip):
    autograd(ip, "def f(x):\n    return 2.0 * x + 1.0\ny = f(1.0)")
    ip.run_line_magic("unload_ext", "gradmagic")
    try:
        assert ip.find_cell_magic("autograd") is None and ip.find_line_magic("autograd") is None
        assert "AutogradMagics" not in ip.magics_manager.registry
        assert not ip.run_cell("%%autograd\na = 1.0").success
        assert ip.run_cell("z = f(2.0)").success and ip.user_ns["z"] == 5.0
    finally:
        ip.run_line_magic("load_ext", "gradmagic")
    assert ip.find_cell_magic("autograd") is not None
    assert autograd(ip, "a = 1.0\na * 2").success


# --------------------------------------------------------------------------- errors
def test_an_exception_shows_the_users_line_only(ip, capsys):
    ip.user_ns["w"] = 4.0
    result = autograd(ip, "a = w * 2\nb = a / missing\nc = 1", options="")
    assert isinstance(result.error_in_exec, NameError) and not result.success
    shown = capsys.readouterr().out
    assert "----> 3 b = a / missing" in shown and "      1 %%autograd" in shown
    assert "NameError: name 'missing' is not defined" in shown
    assert not any(name in shown for name in RUNTIME_NAMES), shown
    assert "run_cell_magic" not in shown and "magic.py" not in shown
    # the namespace as plain Python leaves it: a and b were made, w was not touched
    assert ip.user_ns["w"] == 4.0 and type(ip.user_ns["w"]) is float
    assert ip.user_ns["a"] == 8.0 and type(ip.user_ns["a"]) is float
    assert "b" not in ip.user_ns and "c" not in ip.user_ns
    assert gradmagic.last is None


def test_a_cell_whose_graph_outgrows_its_memory_is_stopped_at_its_line(ip, capsys, monkeypatch):
    from gradmagic.notebook import memory

    monkeypatch.setattr(memory, "MOST", 40 << 20)  # (a loop of ~10^5 steps passes it)
    ip.user_ns["w"] = 0.5
    loop = "s = 0.0\nfor i in range(3 * 10**6):\n    s = s * 0.999 + w\nt = 1"
    result = autograd(ip, loop, options="")
    assert isinstance(result.error_in_exec, memory.GraphMemoryError) and not result.success
    shown = capsys.readouterr().out
    assert "----> 4     s = s * 0.999 + w" in shown and "stopped the cell" in shown
    assert "memory.py" not in shown and "run_cell_magic" not in shown
    # the names hold plain values, as after Ctrl-C; later cells run as usual
    assert type(ip.user_ns["s"]) is float and type(ip.user_ns["i"]) is int
    assert ip.user_ns["w"] == 0.5 and type(ip.user_ns["w"]) is float and "t" not in ip.user_ns
    assert ip.run_cell("u = s * 2").success and type(ip.user_ns["u"]) is float
    assert autograd(ip, "v = w * 3.0\nv").success  # the next recorded cell is not stopped
    assert gradmagic.last.grads["w"] == 3.0


@pytest.mark.parametrize(
    "swallow",
    [
        # a gc callback runs Python code between two lines of the cell: the stop can land in
        # it and be printed as unraisable instead of stopping the cell
        "import gc\ngc.callbacks.append(lambda phase, info: [0] * 8)\n",
        "",
    ],
    ids=["gc callback", "plain"],
)
def test_a_memory_stop_is_neither_swallowed_nor_taken_for_the_cells_error(
    ip, capsys, monkeypatch, swallow
):
    import gc

    from gradmagic.notebook import memory

    monkeypatch.setattr(gc, "callbacks", list(gc.callbacks))
    ip.user_ns["w"] = 0.5
    # the cell's own handlers are for its own errors: plainly, none is raised here
    loop = (
        swallow + "s, caught = 0.0, 0\nfor i in range(3 * 10**6):\n"
        "    try:\n        s = s * 0.999 + w\n"
        "    except Exception:\n        caught += 1\n    except MemoryError:\n        caught += 1\n"
        "t = 1"
    )
    result = autograd(ip, loop, options="--max-memory 0.04")  # 40 MB: ~10^5 steps
    assert isinstance(result.error_in_exec, memory.GraphMemoryError), result.error_in_exec
    assert ip.user_ns["caught"] == 0 and ip.user_ns["i"] < 3 * 10**6 - 1
    assert "more than 41 MB bigger" in capsys.readouterr().out


PROFILED_AFTER_CELLS = """
import cProfile, faulthandler
faulthandler.dump_traceback_later(60, exit=True)
import gradmagic
from gradmagic.notebook import memory
print(gradmagic.autograd("y = w * 3.0\\ny")(w=0.5).grads["w"])
memory.MOST = 40 << 20
try:
    gradmagic.autograd("s = 0.0\\nfor i in range(3 * 10**6):\\n    s = s * 0.999 + w\\ns")(w=0.5)
except memory.GraphMemoryError:
    print("stopped")
def f():
    total = 0
    for i in range(1000):
        total += i
    return total
profile = cProfile.Profile()
profile.enable()
print(f())
profile.disable()
"""


def test_a_profiler_runs_after_recorded_and_stopped_cells():
    # the watcher's way of stopping a cell must leave the interpreter as it was: a profiler
    # (%prun, cProfile) or debugger started after a cell once spun for ever
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", PROFILED_AFTER_CELLS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["3.0", "stopped", "499500"], done.stdout


def test_the_traceback_names_the_cell_by_its_prompt_number(ip, capsys):
    result = autograd(ip, "a = 1.0\nb = a / nope", options="", store_history=True)
    assert f"Cell In[{result.execution_count}], line 3" in capsys.readouterr().out


def test_an_exception_in_a_function_of_the_cell_shows_both_lines(ip, capsys):
    result = autograd(
        ip, "import math\ndef f(x):\n    return math.exp(x, 2)\ny = f(1.0)", options=""
    )
    assert isinstance(result.error_in_exec, TypeError)
    shown = capsys.readouterr().out
    assert "----> 5 y = f(1.0)" in shown and "----> 4     return math.exp(x, 2)" in shown
    assert not any(name in shown for name in RUNTIME_NAMES), shown


def test_a_syntax_error_points_at_the_users_text(ip, capsys):
    ip.user_ns["w"] = 4.0
    result = autograd(ip, "a = w * 2\nb = a +\nc = 1", options="")
    assert isinstance(result.error_in_exec, SyntaxError)
    shown = capsys.readouterr().out
    assert "line 3" in shown and "b = a +" in shown and "SyntaxError" in shown
    assert not any(name in shown for name in RUNTIME_NAMES)
    assert ip.user_ns["w"] == 4.0 and "a" not in ip.user_ns


def test_an_error_in_the_line_form_stops_the_cell(ip, capsys):
    result = ip.run_cell("%autograd -q undefined_thing * 2\nafter = 1")
    assert isinstance(result.error_in_exec, NameError) and "after" not in ip.user_ns
    shown = capsys.readouterr().out
    assert "undefined_thing * 2" in shown
    assert not any(name in shown for name in RUNTIME_NAMES)


def test_the_line_form_alone_shows_only_its_line(ip, capsys):
    result = ip.run_cell("%autograd -q undefined_thing * 2")
    assert isinstance(result.error_in_exec, NameError)
    shown = capsys.readouterr().out
    assert "----> 1 %autograd -q undefined_thing * 2" in shown
    assert "run_line_magic" not in shown and "skipping hidden" not in shown


def test_a_direct_call_inside_a_longer_cell_raises(ip):
    result = ip.run_cell(
        "get_ipython().run_cell_magic('autograd', '-q', 'a = 1.0\\nb = a / nope')\nafter = 1"
    )
    assert isinstance(result.error_in_exec, NameError) and "after" not in ip.user_ns
    with pytest.raises(NameError):
        ip.run_cell_magic("autograd", "-q", "a = 1.0\nb = a / nope")


def test_a_syntax_error_in_the_line_form_points_into_the_line(ip, capsys):
    result = ip.run_cell("%autograd -q 2 *")
    assert isinstance(result.error_in_exec, SyntaxError)
    shown = capsys.readouterr().out
    assert "%autograd -q 2 *\n" in shown and shown.index("^") > shown.index("%autograd")


def test_exotic_objects_in_the_namespace_are_left_alone(ip):
    class Touchy:
        def __getattribute__(self, name):
            raise RuntimeError("do not touch")

    ip.user_ns["touchy"] = Touchy()
    assert autograd(ip, "a = 2.0\nb = a * a").success
    assert ip.user_ns["a"].grad == 4.0


def test_exceptions_from_the_engine_keep_their_message(ip, capsys):
    result = autograd(ip, "i = 1.5\nxs = [1, 2, 3]\nv = xs[i]", options="")
    assert isinstance(result.error_in_exec, TypeError)
    shown = capsys.readouterr().out
    assert "----> 4 v = xs[i]" in shown
    assert "TypeError: list indices must be integers or slices, not float" in shown


# --------------------------------------------------------------------------- corpus
def _normal(x):
    """A comparable form of a namespace value: numbers, strings, bools, containers."""
    if isinstance(x, Value):
        return _normal(x.data)
    if hasattr(x, "data") and isinstance(x.data, np.ndarray):  # a Tensor
        return _normal(x.data)
    if isinstance(x, np.ndarray):
        return ("array", x.tolist()) if x.ndim else _normal(x.item())
    if isinstance(x, np.generic):
        return _normal(x.item())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_normal(e) for e in x])
    if isinstance(x, dict):
        return ("dict", [(_normal(k), _normal(v)) for k, v in x.items()])
    if isinstance(x, (set, frozenset)):
        return ("set", sorted(repr(_normal(e)) for e in x))
    if isinstance(x, (bool, int, float, str)) or x is None:
        return (type(x).__name__, "nan" if x != x else x)
    if type(x).__module__ == "__main__" and hasattr(x, "__dict__"):
        return ("object", _normal(vars(x)))
    return None  # functions, modules, generators: not compared


@pytest.mark.parametrize("name, source", CELLS, ids=[c[0] for c in CELLS])
def test_corpus_cell_computes_as_plain_python(ip, name, source):
    plain = {"__name__": "__main__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, "<plain>", "exec"), plain)
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        result = autograd(ip, source.lstrip("\n"))
    assert result.success, shown.getvalue()
    assert shown.getvalue() == printed.getvalue()
    compared = 0
    for key, value in plain.items():
        expected = _normal(value)
        if key.startswith("__") or expected is None:
            continue
        assert _normal(ip.user_ns[key]) == expected, key
        compared += 1
    assert compared > 0


def test_corpus_is_big_enough():
    assert len(CELLS) >= 40 and len({name for name, _ in CELLS}) == len(CELLS)


# --------------------------------------------------------------------------- tensors
def test_float_arrays_become_array_leaves(ip):
    from gradmagic.core.array import Array

    ip.user_ns.update(np=np, X=np.array([[1.0, 2.0], [3.0, 4.0]]), idx=np.array([0, 1]))
    assert autograd(
        ip, "W = np.ones((2, 1))\nb = np.array([0.5])\nL = ((X @ W + b) ** 2).sum()"
    ).success
    X, W, b, L = (ip.user_ns[n] for n in ("X", "W", "b", "L"))
    assert all(type(t) is Array for t in (X, W, b)) and type(L) is np.float64
    assert all(isinstance(t, np.ndarray) for t in (X, W, b))
    assert (X.label, W.label, b.label) == ("X", "W", "b")
    out = np.array([[1.0, 2.0], [3.0, 4.0]]) @ np.ones((2, 1)) + 0.5
    assert L == pytest.approx((out**2).sum())
    assert W.grad == pytest.approx(2 * np.array([[1.0, 2.0], [3.0, 4.0]]).T @ out)
    assert b.grad == pytest.approx(2 * out.sum(axis=0))
    assert isinstance(ip.user_ns["idx"], np.ndarray)  # int arrays stay arrays


def test_a_tensor_target_must_be_one_number(ip, capsys):
    pytest.importorskip("gradmagic.core.tensor")
    ip.user_ns["np"] = np
    assert autograd(ip, "v = np.ones(3)\nv * 2", options="").success
    assert "reduce it to one number" in capsys.readouterr().out
    assert gradmagic.last is None


# --------------------------------------------------------------------------- answers and torch
WALK = "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f\nL"


def shown(ip, body, options):
    """The display bundle of an %%autograd cell (run with its output kept)."""
    result = autograd(ip, body, options=options, store_history=True)
    assert result.success and result.error_in_exec is None
    published = []  # the static copy the display publishes before the widget
    ip.display_pub.publish = lambda data, **kwargs: published.append(data)
    try:
        bundle = ip.display_formatter.format(result.result)[0]
    finally:
        del ip.display_pub.publish
    return {**bundle, **published[-1]}  # the static copy's text (the live view's is one line)


def test_expect_shows_answers_and_a_wrong_one_is_not_an_error(ip):
    bundle = shown(ip, WALK, '--expect "a=6, b=4, L.data=-8, nope=1"')
    text = bundle["text/plain"]
    assert "✗ 2 of 4 correct" in text
    (b_line,) = [ln for ln in text.splitlines() if "∂L/∂b" in ln]
    assert b_line.startswith("✗") and "-8" in b_line  # got − expected
    assert "no node named 'nope'" in text
    assert "<summary><b>Answers</b></summary>" in bundle["text/html"]


def test_expect_from_a_dict_in_the_namespace_is_checked(ip):
    ip.user_ns["answers"] = {"a": 6, "b": -4, "c": -2, "f": 4, "L.data": -8}
    bundle = shown(ip, WALK, "--expect answers")
    assert "✓ 5 of 5 correct" in bundle["text/plain"]
    assert gradmagic.last.expect(ip.user_ns["answers"]).passed


def test_expect_uses_the_cells_tolerances(ip):
    assert "✗ 0 of 1 correct" in shown(ip, WALK, '--expect "a=6.01"')["text/plain"]
    assert "✓ 1 of 1 correct" in shown(ip, WALK, '--expect "a=6.01" --atol 0.02')["text/plain"]
    assert "✓ 1 of 1 correct" in shown(ip, WALK, '--expect "a=6.01" --rtol 0.01')["text/plain"]


def test_torch_option_adds_pytorchs_gradients(ip):
    pytest.importorskip("torch")
    text = shown(ip, WALK, "--torch")["text/plain"]
    assert "PyTorch" in text and "agrees on all 4 gradients" in text
    assert "|torch − analytic|" in text


def test_torch_option_without_torch_says_how_to_install(ip, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    bundle = shown(ip, WALK, "--torch")
    (line,) = [ln for ln in bundle["text/plain"].splitlines() if "torch" in ln]
    assert "pip install torch" in line and "gradmagic[torch]" in line
    assert "gradients match finite differences" in bundle["text/plain"]


def test_expect_from_a_dict_may_hold_arrays_for_tensors(ip):
    ip.user_ns["answers"] = {"W": [[1.0, -1.0]], "x": np.array([2.0, 3.0])}
    bundle = shown(
        ip,
        "from gradmagic import tensor\nW = tensor([[2.0, 3.0]])\n"
        "x = tensor([1.0, -1.0])\nL = (W @ x).sum()",
        "--expect answers",
    )
    assert "✓ 2 of 2 correct" in bundle["text/plain"]
    ip.user_ns["answers"] = {"W": [[1.0, "x"]]}
    with pytest.raises(UsageError, match="is not a number"):
        ip.run_line_magic("autograd", "--expect answers 1.0 * 2")


def test_an_op_from_the_table_reaches_every_layer(ip):
    """atan is one entry in core.ops (and core.tensor_ops): the cell's math.atan, np.arctan on
    a number and on an array keep the graph, the check replays it and PyTorch agrees."""
    ip.user_ns.update(np=np, math=math)
    assert autograd(
        ip,
        "x = 0.5\nA = np.array([0.2, -1.5])\n"
        "L = math.atan(x) * np.arctan(x) + np.arctan(A * x).sum()",
        options="-q --torch",
    ).success
    trace = gradmagic.last
    a = np.array([0.2, -1.5])
    expected = 2 * math.atan(0.5) / (1 + 0.25) + float(np.sum(a / (1 + (a * 0.5) ** 2)))
    assert trace.grads["x"] == pytest.approx(expected, rel=1e-12)
    assert trace.warnings == [] and trace.check().passed
    pytest.importorskip("torch")  # the last layer, the PyTorch replay, needs the torch extra
    from gradmagic.analysis import torchcheck

    assert torchcheck.compare(trace).error is None
    assert all(row.agrees for row in torchcheck.compare(trace).rows)


def test_a_number_made_by_float_and_named_is_an_input(ip):
    autograd(ip, "x = float(3)\ny = 2.0\nx * y")
    trace = gradmagic.last
    assert trace.grads["x"] == 2.0 and trace.grads["y"] == 3.0
    assert type(ip.user_ns["x"]).__name__ == "float" and ip.user_ns["x"] == 3.0
    autograd(ip, "z = float('inf')\nz * 2.0")
    assert "z" in gradmagic.last.grads
