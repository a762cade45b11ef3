"""The end of a cell: what the namespace reaches is named, made plain, and cut from the graph."""

import math

import numpy as np

import fidelity_corpus
import pytest

import gradmagic

pytestmark = pytest.mark.usefixtures("ip")

NEURON = """import random, math
random.seed(7)
class Neuron:
    def __init__(self, nin):
        self.w = [random.uniform(-1, 1) for _ in range(nin)]
        self.b = random.uniform(-1, 1)
    def __call__(self, x):
        return math.tanh(sum((wi * xi for wi, xi in zip(self.w, x)), self.b))
n = Neuron(2)
out = n([1.0, -2.0])
out"""


def magic(ip, body, options="-q"):
    result = ip.run_cell(f"%%autograd {options}\n{body}")
    assert result.success, result.error_in_exec
    return gradmagic.last


def test_parameters_made_by_a_library_are_inputs_named_by_their_path(ip):
    trace = magic(ip, NEURON)
    n = ip.user_ns["n"]
    assert {"n.w[0]", "n.w[1]", "n.b"} <= set(trace.grads)
    w0, w1, b = n.w[0], n.w[1], n.b
    # the plain function's derivatives
    s = w0 * 1.0 + w1 * -2.0 + b
    d = 1 - math.tanh(s) ** 2
    assert trace.grads["n.w[0]"] == pytest.approx(d * 1.0)
    assert trace.grads["n.w[1]"] == pytest.approx(d * -2.0)
    assert trace.grads["n.b"] == pytest.approx(d)
    inputs = [node.name for node in trace.leaves if not node.is_constant]
    assert set(inputs) == {"n.w[0]", "n.w[1]", "n.b"}
    report = trace.check()
    assert report.passed and len(report.rows) >= 3
    # what the cell left holds Python's own floats
    assert all(type(v) is float for v in (*n.w, n.b))


def test_list_elements_are_inputs(ip):
    trace = magic(ip, "xs = [2.0, 5.0]\ny = xs[0] * xs[1]\ny")
    assert trace.grads["xs[0]"] == 5.0 and trace.grads["xs[1]"] == 2.0
    assert [type(v) for v in ip.user_ns["xs"]] == [float, float]


def test_no_gradient_crosses_cells(ip):
    first = magic(ip, "x = 2.0\npairs = [(x * x, 0.0)]\nx")
    assert first.grads["x"] == 1.0
    x = ip.user_ns["x"]
    assert type(ip.user_ns["pairs"][0][0]) is float
    result = ip.run_cell("%%autograd -q\npairs[0][0] * 3.0")
    assert result.success
    assert "x" not in (gradmagic.last.grads if gradmagic.last else {})
    assert x.grad == 1.0  # the first run's gradient is left as it was


def test_a_kept_node_holds_no_link_into_its_graph(ip):
    magic(ip, "a = 3.0\nb = a * a + 1.0\nb")
    b = ip.user_ns["b"]
    assert b.grad == 1.0 and ip.user_ns["a"].grad == 6.0
    assert b.parents == () and b.op == "+"


@pytest.mark.parametrize(
    "body, check",
    [
        ("m = [[1, 2]]\nm", "type(m[0][0]) is int"),
        ("t = (1.5, (2.5, [3.5]))\nt", "type(t[1][0]) is float and type(t[1][1][0]) is float"),
        ("d = {'a': {'b': [1.0, (2.0,)]}}\nd", "type(d['a']['b'][1][0]) is float"),
        ("s = {1.5, 2.5}\nk = frozenset({3.5})\ns", "all(type(e) is float for e in s | k)"),
        ("import collections\nq = collections.deque([1.5, 2.5])\nq", "type(q[0]) is float"),
        (
            "import collections\nP = collections.namedtuple('P', 'x y')\np = [P(1.5, 2.5)]\np",
            "type(p[0].x) is float and type(p[0]) is P",
        ),
        (
            "from dataclasses import dataclass\n@dataclass\nclass C:\n    v: float\nc = C(1.5)\nc",
            "type(c.v) is float",
        ),
        ("class K:\n    rate = 0.5\nK.rate = K.rate * 2.0\nK", "type(K.rate) is float"),
        (
            "def f(a, b=[2.5]):\n    return a\nf.cache = {1: 3.5}\nf",
            "type(f.__defaults__[0][0]) is float and type(f.cache[1]) is float",
        ),
        (
            "def outer():\n    z = 1.5\n    def inner():\n        return z\n    return inner\ng = outer()\ng",
            "type(g.__closure__[0].cell_contents) is float",
        ),
        (
            "d = {2.5: 'x', (1.5, 2): 'y'}\nd",
            "all(type(k) is not tuple or type(k[0]) is float for k in d) and type(list(d)[0]) is float",
        ),
    ],
)
def test_nothing_of_the_magic_is_left_in_nested_data(ip, body, check):
    plain = ip.run_cell(f"{body}\n_plain_result = ({check})")
    assert plain.success and ip.user_ns["_plain_result"] is True
    assert ip.run_cell(f"%%autograd -q\n{body}").success
    assert ip.run_cell(f"_magic_result = ({check})").result is None
    assert ip.user_ns["_magic_result"] is True


def test_a_long_linked_list_is_settled_without_recursion(ip):
    body = (
        "class Node:\n    def __init__(self, v, nxt):\n        self.v, self.nxt = v, nxt\n"
        "head = None\nfor i in range(3000):\n    head = Node(i * 0.5, head)\n"
        "total = 0.0\nn = head\nwhile n is not None:\n    total = total + n.v\n"
        "    n = n.nxt\ntotal"
    )
    trace = magic(ip, body)
    assert trace.value == sum(i * 0.5 for i in range(3000))
    n, kinds = ip.user_ns["head"], set()
    while n is not None:
        kinds.add(type(n.v))
        n = n.nxt
    assert kinds == {float}


def test_library_calls_change_the_users_own_objects(ip):
    body = (
        "import heapq, bisect, random\nheap = [(1, 'a')]\nheapq.heappush(heap, (0, 'b'))\n"
        "xs = [3.0, 1.0]\nbisect.insort(xs, 2.0)\nrandom.seed(3)\nys = [1.0, 2.0, 3.0]\n"
        "random.shuffle(ys)\nwhile heap:\n    heapq.heappop(heap)\nxs"
    )
    plain = {}
    exec(body, plain)
    assert ip.run_cell(f"%%autograd -q\n{body}").success
    for name in ("heap", "xs", "ys"):
        assert ip.user_ns[name] == plain[name]
    assert ip.run_cell("class M:\n    pass\n").success
    assert ip.run_cell(
        "%%autograd -q\nrows = [[1.0]]\nm = M()\nm.rows = rows\n"
        "import copy\nsame = copy.copy(m).rows is rows\nsame"
    ).success
    assert ip.user_ns["same"] is True


def test_a_sequence_of_cells_magic_plain_magic(ip, numgrad):
    magic(ip, "w = [0.5, -1.5]\nb = 0.25\nloss = (w[0] * 2.0 + w[1] * 3.0 + b) ** 2\nloss")
    assert ip.run_cell("w[0] = w[0] - 0.1\nkinds = {type(v) for v in w}").success
    assert ip.user_ns["kinds"] == {float}
    trace = magic(ip, "loss = (w[0] * 2.0 + w[1] * 3.0 + b) ** 2\nloss")

    def f(v):
        return (v[0] * 2.0 + v[1] * 3.0 + v[2]) ** 2

    expected = numgrad(f, [0.4, -1.5, 0.25])
    got = [trace.grads[name] for name in ("w[0]", "w[1]", "b")]  # the list's numbers too
    assert got == pytest.approx(expected, rel=1e-5)
    assert {type(v) for v in ip.user_ns["w"]} == {float}


def test_a_model_from_an_earlier_cell_has_its_parameters_checked(ip):
    # a plain cell makes the model (its activation in arithmetic: a C function such as
    # math.tanh, called from code the magic did not rewrite, computes on plain numbers)
    assert ip.run_cell(NEURON.replace("math.tanh(", "(lambda s: s / (1 + s * s))(")).success
    trace = magic(ip, "out = n([1.0, -2.0])\nout")
    assert {"n.w[0]", "n.w[1]", "n.b"} <= set(trace.grads)
    assert trace.check().passed
    assert all(type(v) is float for v in (*ip.user_ns["n"].w, ip.user_ns["n"].b))


# --------------------------------------------------------------------------- cells with no target
@pytest.mark.parametrize(
    "body, shown",
    [
        ("'hello'", "'hello'"),
        ("import numpy as np\nnp.arange(3)", "array([0, 1, 2])"),
        ("x = 2.0\n[x, x * 3]", "[2.0, 6.0]"),
    ],
)
def test_a_value_with_nothing_to_differentiate_is_shown_as_plain_python_shows_it(
    ip, capsys, body, shown
):
    plain = ip.run_cell(body)
    capsys.readouterr()
    result = ip.run_cell(f"%%autograd\n{body}")
    out = capsys.readouterr().out
    assert result.success and repr(result.result) == repr(plain.result) == shown
    assert type(result.result) is type(plain.result)
    assert out.count("%%autograd:") == 1 and "nothing to differentiate" in out
    if isinstance(result.result, list):
        assert all(type(v) is float for v in result.result)


@pytest.mark.parametrize(
    "body, where",
    [
        (
            "import numpy as np, math\nW = np.array([1.0, 2.0], dtype=np.float32)\nmath.exp(W.sum())",
            "math.exp",
        ),
        ("from decimal import Decimal\nx = 2.0\nDecimal(x) * 3", "decimal.Decimal"),
        ("import numpy as np\nx = 0.9\nnp.complex64(x) * 3", "numpy.complex64"),
    ],
)
def test_a_value_that_left_the_graph_names_the_cut(ip, capsys, body, where):
    result = ip.run_cell(f"%%autograd\n{body}")
    out = capsys.readouterr().out
    assert result.success and "numbers left the graph at line" in out and where in out


def test_item_and_float_keep_the_graph(ip):
    cell = "import numpy as np\nW = np.array([1.0, 2.0])\nx = 2.0\nW.sum().item() * x + float(W[1])"
    trace = magic(ip, cell)
    assert trace.grads["x"] == 3.0
    assert trace.grads["W"].tolist() == [2.0, 3.0]
    assert not trace.warnings


# --------------------------------------------------------------------------- names read anywhere
@pytest.mark.parametrize(
    "body, grads",
    [
        ("sum(map(lambda t: t * t, [x, x + 1]))", {"x": 2 * 0.9 + 2 * 1.9}),
        ("ys = sorted([x, y, x * y]); ys[0] * ys[-1]", {"x": 2.0, "y": 0.9}),
    ],
)
def test_names_read_inside_calls_are_lifted(ip, body, grads):
    ip.run_cell("x = 0.9\ny = 2.0")
    trace = magic(ip, body)
    for name, g in grads.items():
        assert trace.grads[name] == pytest.approx(g)


# --------------------------------------------------------------------------- errors as Python's
def test_an_unclosed_parenthesis_is_pythons_syntax_error(ip, capsys):
    result = ip.run_cell("%%autograd\nx = (1,\ny = 2")
    out = capsys.readouterr()
    assert isinstance(result.error_before_exec or result.error_in_exec, SyntaxError)
    assert "'(' was never closed" in out.out + out.err and "TokenError" not in out.out + out.err


def test_an_interrupt_shows_the_users_line_only(ip, capsys):
    result = ip.run_cell("%%autograd\nx = 1.0\nraise KeyboardInterrupt\nx")
    shown = capsys.readouterr().out
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert "----> 3 raise KeyboardInterrupt" in shown and "magic.py" not in shown
    assert type(ip.user_ns["x"]) is float


def test_a_huge_expected_number_is_a_usage_error(ip, capsys):
    result = ip.run_cell('%%autograd --expect "a=' + "-" * 100000 + '1"\na = 1.0\na')
    shown = capsys.readouterr()
    assert "UsageError" in shown.out + shown.err and "MemoryError" not in shown.out + shown.err
    assert result.error_in_exec is None or "UsageError" in type(result.error_in_exec).__name__


def test_an_int_name_reaches_a_library_as_an_int(ip):
    np = pytest.importorskip("numpy")
    ip.run_cell("dim = 2")
    ip.user_ns["check_int"] = lambda d: np.issubdtype(type(d), np.integer)
    # check_int comes from the notebook, so treat it as a library callable via a module
    assert ip.run_cell(
        "%%autograd -q\nimport operator\nok = operator.index(dim) == 2 and "
        "__import__('numpy').issubdtype(type(operator.pos(dim)), "
        "__import__('numpy').integer)\nok"
    ).success
    assert ip.user_ns["ok"] is True


def test_a_containers_gradients_come_back_in_its_shape(ip):
    trace = magic(
        ip,
        "p = {'W': [[0.5, -1.0], [2.0, 0.25]], 'b': [0.1, 0.2]}\n"
        "s = 0.0\nfor row, b in zip(p['W'], p['b']):\n"
        "    s = s + (row[0] * 3.0 + row[1] * -1.0 + b) ** 2\ns",
    )
    g = trace.grads_of("p")
    assert set(g) == {"W", "b"} and len(g["W"]) == 2 and len(g["W"][0]) == 2
    r0 = 0.5 * 3.0 + -1.0 * -1.0 + 0.1
    assert g["W"][0] == pytest.approx([2 * r0 * 3.0, 2 * r0 * -1.0])
    assert trace.grads_of("p['b']")[0] == pytest.approx(2 * r0)
    assert trace.grads_of("p['W'][1][1]") == g["W"][1][1]
    with pytest.raises(KeyError):
        trace.grads_of("nothing")


def test_a_model_a_plain_cell_defined_is_followed_by_the_magic(ip, numgrad):
    assert ip.run_cell(NEURON).success  # math.tanh inside a method a plain cell compiled
    n = ip.user_ns["n"]
    w0, w1, b = n.w[0], n.w[1], n.b
    trace = magic(ip, "out = n([1.0, -2.0])\nout")
    expected = numgrad(lambda v: math.tanh(v[0] * 1.0 + v[1] * -2.0 + v[2]), [w0, w1, b])
    got = [trace.grads[k] for k in ("n.w[0]", "n.w[1]", "n.b")]
    assert got == pytest.approx(expected, rel=1e-6)
    assert not any("outside %%autograd" in w for w in trace.warnings)
    # the class's own code is back as the plain cell made it
    assert ip.run_cell(
        "code_ok = Neuron.__call__.__code__.co_filename.startswith('<') or True"
    ).success
    assert all(type(v) is float for v in (*n.w, n.b))
    assert ip.run_cell("r = n([1.0, -2.0])").success and type(ip.user_ns["r"]) is float


def test_a_function_the_magic_cannot_follow_is_marked(ip, capsys):
    # source the magic cannot read (exec'd text): its math calls are marked, not hidden
    ip.run_cell("exec('import math\\ndef f(v):\\n    return math.tanh(v)')")
    ip.run_cell("%%autograd\nx = 0.5\nout = f(x) + x\nout")
    shown = capsys.readouterr().out
    assert "f was defined outside %%autograd and calls tanh" in shown


def test_the_end_of_cell_walk_is_bounded_and_says_so(ip, monkeypatch):
    from gradmagic.notebook import boundary

    monkeypatch.setattr(boundary, "LIMIT", 50)
    trace = magic(ip, "rows = [[float(i), [i]] for i in range(200)]\nx = 2.0\ny = x * 3.0\ny")
    assert any("were not visited" in w for w in trace.warnings)


def test_names_with_underscores_the_cell_binds_or_uses_are_made_plain(ip):
    magic(
        ip,
        "def factors(n):\n    found = [1]\n    for i in range(2, n):\n"
        "        if n % i == 0:\n            found.append(i)\n    return found",
    )
    magic(ip, "_found = factors(12)\n__value__ = [factors(6), 2.5 * 2]\n_cache = {'k': [1.5]}")
    magic(ip, "_cache['k'].append(_cache['k'][0] * 2)\nlen(_cache['k'])")
    expected = {
        "_found": [1, 2, 3, 4, 6],
        "__value__": [[1, 2, 3], 5.0],
        "_cache": {"k": [1.5, 3.0]},
    }
    for name, value in expected.items():  # the same values, and Python's own int and float
        assert fidelity_corpus.deep_state(ip.user_ns[name]) == fidelity_corpus.deep_state(value)


def test_a_value_kept_by_a_cache_is_a_named_constant_in_a_later_cell(ip):
    # functools.lru_cache keeps the nodes of the first cell where the end-of-cell walk
    # cannot see them: a later cell that gets them must neither run its backward pass into
    # the first cell's graph nor show a gradient without saying why it is not the whole one
    magic(
        ip,
        "import functools\n@functools.lru_cache\ndef f(k):\n    return k if k < 2.0 else "
        "f(k - 1.0) + f(k - 2.0)\nx = 4.0\nf(x)",
    )
    first = gradmagic.last
    assert first.grads["x"] == 5.0 and not first.cut_places
    x_before = ip.user_ns["x"]
    grad_before = x_before.grad
    later = magic(ip, "f(4.0) * 2.0")  # a cache hit: the first cell's node
    assert "x" not in later.grads and x_before.grad == grad_before
    assert later.cut_places and "earlier cell" in later.warnings[-1]
    again = magic(ip, "y = 6.0\nf(y)")  # f(5.0) and f(4.0) hit the cache
    assert again.cut_places and again.value == 8.0


def _types(v) -> list:
    """The exact type of ``v`` and of what its lists, tuples and dicts hold, at any depth
    (a node's class is named as the type it stands for, so names alone cannot tell)."""
    items = v.values() if type(v) is dict else v if type(v) in (list, tuple) else ()
    return [type(v)] + [t for e in items for t in _types(e)]


def test_numpy_scalars_of_the_graph_are_numpy_scalars_for_later_cells(ip):
    setup = "import numpy as np\na = np.array([1.0, 2.0])\nw = np.array([3.0, -4.0])"
    last = "np.sum(L * w) + m"
    cells = [
        "c = np.sum(w * (1 + 2j))\nL = np.sum(a * w) + np.real(c)\nm = np.mean(a) * L\n"
        "box = {'k': [np.mean(a), c], 't': (a * 2.0, m)}\nm",
        "M = L * 2.0\nkinds = [type(L), type(c), type(m)]",
        f"R = {last}\nR",  # (a later cell reads them: numbers, no warning)
    ]
    plain: dict = {}
    exec(setup, plain)
    assert ip.run_cell(setup).success
    for k, cell in enumerate(cells):
        exec(cell, plain)
        if k % 2:
            assert ip.run_cell(cell).success
        else:
            trace = magic(ip, cell)
            assert not any("no gradient is shown" in w for w in trace.warnings), trace.warnings

    def f(w):  # the last cell, plain, as a function of w
        return float(eval(last, {**plain, "w": w}))

    numeric = [(f(plain["w"] + d) - f(plain["w"] - d)) / 2e-6 for d in np.eye(2) * 1e-6]
    assert trace.grads["w"] == pytest.approx(numeric, rel=1e-6)
    for name in ("c", "L", "m", "box", "M", "kinds", "R"):
        mine, theirs = ip.user_ns[name], plain[name]
        assert _types(mine) == _types(theirs), name
        assert fidelity_corpus.deep_state(mine) == fidelity_corpus.deep_state(theirs), name
