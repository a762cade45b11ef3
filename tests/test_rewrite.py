"""Tests of gradmagic.notebook.rewrite: the cell rewrite, with nothing but the AST.

Most tests rewrite a snippet, link and run it in a fresh namespace and look at
what became a Value, what stayed a plain number and how nodes are labelled.
"""

import ast
import contextlib
import math

import numpy as np
import pytest

from gradmagic.core.engine import Value
from gradmagic.notebook import runtime as _runtime

from gradmagic.notebook.cell import _link
from gradmagic.notebook.rewrite import RUNTIME, Rewritten, rewrite


def run(source, ns=None, **kw):
    """Rewrite ``source``, run it in ``ns`` and return (namespace, final value)."""
    ns = {} if ns is None else ns
    rw = rewrite(source, **kw)
    with contextlib.ExitStack() as stack:
        if not _runtime.recording_now():  # a test may record the run itself
            stack.enter_context(_runtime.recording("<test>"))
        exec(_link(compile(rw.module, "<test>", "exec")), ns)
        value = eval(_link(compile(rw.final, "<test>", "eval")), ns) if rw.final else None
    return ns, value


class _Named(ast.NodeTransformer):
    def visit_Constant(self, node):
        return ast.Name("RT", ast.Load()) if node.value == RUNTIME else node


def text(source, **kw) -> str:
    """The rewritten module as source, the runtime spelled ``RT``."""
    return ast.unparse(_Named().visit(rewrite(source, **kw).module))


# --------------------------------------------------------------------------- purity
def test_rewrite_returns_an_ast_and_runs_nothing():
    rw = rewrite("raise SystemExit('ran')\nx = undefined_name\nx")
    assert isinstance(rw, Rewritten)
    assert isinstance(rw.module, ast.Module) and isinstance(rw.final, ast.Expression)
    assert rw.reads == {"undefined_name", "x", "SystemExit"}


def test_new_nodes_carry_the_users_line_numbers():
    rw = rewrite("a = 2.0\n\nb = a * 3\nprint(b)", first_line=2)
    nodes = list(ast.walk(rw.module)) + list(ast.walk(rw.final))
    assert {n.lineno for n in nodes if hasattr(n, "lineno")} == {2, 4, 5}


def test_syntax_error_points_at_the_users_line():
    with pytest.raises(SyntaxError) as e:
        rewrite("a = 1\nb = a +\n", filename="<cell>", first_line=2)
    assert e.value.lineno == 3 and e.value.filename == "<cell>"
    assert e.value.text.strip() == "b = a +"


# --------------------------------------------------------------------------- literals
def test_numeric_literals_become_leaves_bools_do_not():
    ns, _ = run("a = 2.0\nb = 3\nc = True\nd = 1j\ne = None\nf = 'x'")
    assert _runtime.is_node(ns["a"]) and ns["a"].data == 2.0 and ns["a"].is_leaf
    assert _runtime.is_node(ns["b"]) and type(ns["b"].data) is int
    assert _runtime.is_node(ns["d"]) and ns["d"] == 1j and ns["d"].is_leaf
    assert ns["c"] is True and ns["e"] is None and ns["f"] == "x"


def test_negative_literal_is_one_leaf():
    ns, _ = run("f = -2.0\ng = +3")
    assert ns["f"].is_leaf and ns["f"].data == -2.0 and ns["f"].label == "f"
    assert ns["g"].is_leaf and ns["g"].data == 3


def test_each_evaluation_of_a_literal_is_a_fresh_leaf():
    ns, _ = run("xs = [1.0 for _ in range(3)]")
    assert len({id(x) for x in ns["xs"]}) == 3


def test_literal_beside_a_non_literal_stays_plain():
    out = text("y = x * 2.0 + 1\nz = 2.0 * 3.0\nw = -1 - x")
    assert "x * 2.0 + 1" in out and "-1 - x" in out
    assert "RT.literal(2.0) * RT.literal(3.0)" in out


def test_integer_contexts_keep_plain_numbers():
    out = text(
        "a = xs[0] + xs[1:3] + d[2.5] + {1: 2}[1]\n"
        "s = {1, 2}\nb = 'ab' * 3\nc = [0.0] * 4\ne = '%d' % 5\n"
        "for i in range(10): pass\nr = round(x, 2)\nif x > 0: pass\n"
        "def f(x, n=3, *, k=1.5): pass\nbits = 6 & 3 | 1 << 2\nv = ~5\n"
    )
    for plain in (
        "xs[0]",
        "xs[1:3]",
        "d[2.5]",
        "{1: 2}[1]",
        "{1, 2}",
        "'ab' * 3",
        "* 4",
        "'%d' % 5",
        "range(10)",
        "round(x, 2)",
        "x > 0",
        "def f(x, n=3, *, k=1.5)",
        "6 & 3 | 1 << 2",
        "~5",
    ):
        assert plain in out, plain


def test_integer_contexts_take_int_values_as_ints():
    ns, _ = run(
        "n = 3\nline = '-' * n\nidx = list(range(n))\nfirst = [7, 8, 9][n - 1]\n"
        "shift = 1 << n\nr = round(2.71828, n)"
    )
    assert ns["line"] == "---" and ns["idx"] == [0, 1, 2] and ns["first"] == 9
    assert ns["shift"] == 8 and ns["r"] == 2.718 and type(ns["r"]) is float


def test_match_patterns_and_annotations_are_untouched():
    ns, _ = run(
        "def kind(x):\n    match x:\n        case 0: return 'zero'\n"
        "        case _: return 'other'\nk0 = kind(0)\nk1 = kind(1.5)\n"
        "a: int = 4\n"
    )
    assert ns["k0"] == "zero" and ns["k1"] == "other"
    assert ns["__annotations__"] == {"a": int} and ns["a"].data == 4


# --------------------------------------------------------------------------- display
def test_display_shows_numbers_not_values(capsys):
    ns, _ = run(
        "a = 1.5\nxs = [a, 2]\nprint(xs, {'k': a}, (a,), repr(a), str(xs))\n"
        "s = f'{a} {xs} {a:.3f} {a!r}'\nt = '%s %r %.2f' % (a, xs, a)\n"
        "u = '{} {}'.format(a, xs)"
    )
    assert capsys.readouterr().out == "[1.5, 2] {'k': 1.5} (1.5,) 1.5 [1.5, 2]\n"
    assert ns["s"] == "1.5 [1.5, 2] 1.500 1.5"
    assert ns["t"] == "1.5 [1.5, 2] 1.50" and ns["u"] == "1.5 [1.5, 2]"


def test_ipython_display_shows_the_number():
    shown = []
    ns, _ = run("a = 2.5\ndisplay(a, [a])", ns={"display": lambda *xs: shown.extend(xs)})
    assert shown == [2.5, [2.5]] and type(shown[0]) is float


def test_display_of_a_list_containing_itself():
    ns, _ = run("xs = [1.0]\nxs.append(xs)\ns = str(xs)")
    assert ns["s"] == "[1.0, [...]]"


# --------------------------------------------------------------------------- calls
def test_library_calls_get_plain_literals_and_int_values_as_ints():
    import random

    ns, _ = run(
        "import random\nrandom.seed(0)\nn = 4\nrandom.seed(n)\nu = random.random()\n"
        "z = np.zeros(n)\nr = np.arange(3)",
        ns={"np": np},
        plain_names={"np"},
    )
    random.seed(4)
    assert ns["u"].data == random.random() and ns["u"].label == "u"  # a leaf
    assert ns["r"].dtype.kind == "i" and list(ns["r"]) == [0, 1, 2]


def test_numpy_function_without_gradient_reports_the_cut():
    with _runtime.recording("<test>") as rec:
        ns, _ = run("a = 2.0\nv = np.polyval([a, 3.0], 2.0)", ns={"np": np}, plain_names={"np"})
    assert float(ns["v"]) == 7.0
    assert rec.cuts == [(2, "numpy.polyval took 'a' as a plain number")]


def test_math_functions_keep_the_graph():
    ns, _ = run(
        "import math\nx = 0.5\ny = math.exp(x) + math.log(x, 2) + math.sqrt(x)"
        " + math.tanh(x) + math.sin(x) * math.cos(x) + math.log2(x)"
        " + math.hypot(x, 1.0) + float(x) + math.pow(x, 2) + np.log1p(x)",
        ns={"np": np},
        plain_names={"np"},
    )
    x, y = ns["x"], ns["y"]
    y.backward()
    d = (1 / math.log(2)) / x.data
    expected = (
        math.exp(0.5)
        + 1 / (0.5 * math.log(2))
        + 0.5 / math.sqrt(0.5)
        + 1
        - math.tanh(0.5) ** 2
        + math.cos(1.0)
        + d
        + 0.5 / math.hypot(0.5, 1)
        + 1
        + 2 * 0.5
        + 1 / 1.5
    )
    assert x.grad == pytest.approx(expected, rel=1e-12)


def test_math_results_are_the_same_numbers_as_plain_python():
    ns, _ = run(
        "import math\na = math.log2(8)\nb = math.log10(1000)\nc = math.fsum([0.1] * 10)"
        "\nd = math.expm1(1e-10)\ne = math.pow(2, 10)\nf = float(3)"
    )
    # an int argument is data: math.log2(8) is computed on plain numbers, a node or not
    num = {k: getattr(ns[k], "data", ns[k]) for k in "abcdef"}
    assert (num["a"], num["b"], num["c"]) == (3.0, 3.0, 1.0)
    assert num["d"] == math.expm1(1e-10)
    assert num["e"] == 1024.0 and type(num["e"]) is float
    assert num["f"] == 3.0 and type(num["f"]) is float


def test_math_functions_fail_as_in_plain_python():
    for call, error in (
        ("math.log(x - 2)", ValueError),
        ("math.sqrt(-x)", ValueError),
        ("math.exp(x * 1000)", OverflowError),
    ):
        with pytest.raises(error):
            run(f"import math\nx = 2.0\ny = {call}")
    ns, _ = run("x = 2.0\ny = np.log(x - 2)", ns={"np": np}, plain_names={"np"})
    assert ns["y"].data == -math.inf  # numpy gives -inf, as in plain Python


def test_aliases_of_math_functions_dispatch():
    ns, _ = run(
        "from math import exp as e\nx = 1.0\ny = e(x)\nz = g(x)",
        ns={"g": math.tanh},
        math_names={"g"},
    )
    assert _runtime.is_node(ns["y"]) and ns["y"].op == "exp"
    assert _runtime.is_node(ns["z"]) and ns["z"].op == "tanh"


def test_function_without_gradient_rule_is_computed_and_recorded():
    with _runtime.recording("<test>") as rec:
        ns, _ = run("import math\nx = 1.0\ny = math.asin(x)")
    # a constant node (no link to x), of Python's type, marked as made by the cut
    y = ns["y"]
    assert y == math.asin(1.0) and _runtime.type_of(y) is float and y.is_leaf
    assert [(line, f) for node, line, _, f in rec.cut_nodes if node is y] == [(3, "math.asin")]
    assert rec.cuts == [(3, "math.asin has no gradient rule: 'x' entered it as a plain number")]


def test_isinstance_and_pow_follow_the_number():
    ns, _ = run(
        "x = 2.5\na = isinstance(x, float)\nb = isinstance(x, Value)\nc = pow(3, 4, 5)"
        "\nd = pow(x, 2)\ne = isinstance(3, int)",
        ns={"Value": Value},
    )
    assert ns["a"] is True and ns["b"] is False and ns["c"] == 1 and ns["d"].data == 6.25
    assert ns["e"] is True and type(ns["c"]) is int


def test_user_functions_get_values():
    ns, _ = run("def f(x):\n    return 3 * x ** 2\ny = f(2.0)")
    y = ns["y"]
    assert _runtime.is_node(y)
    y.backward()
    assert y.data == 12.0 and y.parents[1].grad == 3.0  # dy/d(x**2) through 3 * (.)


# --------------------------------------------------------------------------- labels
def test_assignments_label_nodes():
    ns, _ = run(
        "a, b = 2.0, -3.0\ne = a * b\nc = d = e + 1\ns = 0\ns += a\n"
        "for w in [1.5]:\n    pass\nif (m := a * 2) > 0: pass\nk: float = b - 1"
    )
    labels = {n: ns[n].label for n in "abecdswmk"}
    assert labels == {
        "a": "a",
        "b": "b",
        "e": "e",
        "c": "c",
        "d": "c",
        "s": "s",
        "w": "w",
        "m": "m",
        "k": "k",
    }


def test_a_labelled_node_keeps_its_label():
    ns, _ = run("a = 2.0\nb = a")
    assert ns["b"] is ns["a"] and ns["a"].label == "a"


def test_library_results_become_leaves():
    ns, _ = run(
        "import random\nx = random.random()\ng = np.random.default_rng(0)\n"
        "n = np.argmax(np.array([1, 3, 2]))",
        ns={"np": np},
        plain_names={"np"},
    )
    assert ns["x"].is_leaf and ns["x"].label == "x"
    assert ns["n"] == 1 and type(ns["n"]) is np.int64  # a numpy scalar keeps its type
    assert isinstance(ns["g"], np.random.Generator)


# --------------------------------------------------------------------------- reads and target
def test_reads_follow_python_scopes():
    rw = rewrite(
        "def f(x, y=q):\n    z = x + w\n    return z * g\n"
        "class C:\n    k = 1\n    j = k + h\n    def m(self):\n        return k\n"
        "lam = lambda t: t * u\nys = [v * 2 for v in vs]\nlen(n)\nxs[i]\nprint(p)"
    )
    # names given to builtins such as len, sorted and map are read: their numbers may
    # flow on (sum(map(f, [x, y])))
    assert {"w", "g", "h", "k", "u", "vs", "n"} <= rw.reads
    assert not {"x", "z", "t", "v", "q", "i", "p"} & rw.reads


def test_dict_and_set_comprehensions_keep_keys_plain_and_their_names_local():
    rw = rewrite("d = {k * 2: v * w for k, v in pairs}\ns = {2 * k for k in ks}")
    assert rw.reads == {"w", "pairs", "ks"}
    ns, _ = run(
        "w = 3.0\nd = {k * 2: v * w for k, v in zip(range(1, 3), [0.5, 1.5])}\n"
        "s = {2 * k for k in range(3)}",
        {},
    )
    assert list(ns["d"]) == [2, 4] and {type(k) for k in ns["d"]} == {int}
    assert all(_runtime.is_node(v) for v in ns["d"].values()) and ns["d"][4].data == 4.5
    ns["d"][4].backward()
    assert ns["w"].grad == 1.5
    assert ns["s"] == {0, 2, 4} and {type(e) for e in ns["s"]} == {int}


def test_final_expression_and_assigned_target():
    rw = rewrite("a = 1.0\na * 2")
    assert rw.final is not None and rw.target is None
    site, assign = rw.module.body  # the line's site is set, then the assignment runs
    assert ast.unparse(site).endswith(".site = '\\x00gradmagic.core.sites.cursor'.base + 0")
    assert isinstance(assign, ast.Assign) and assign.targets[0].id == "a"
    rw = rewrite("a = 1.0\nL = a * 2")
    assert rw.final is None and rw.target == "L"
    assert rewrite("a, b = 1, 2").target is None
    assert rewrite("for i in range(2): pass").target is None
    assert rewrite("x = 1\nx += 2").target == "x"
