"""Hostile cells for the number nodes, each kind found running real code (issue #12).

Each cell runs plainly and under ``%%autograd`` in fresh namespaces of one shell
(tests/fidelity_corpus.Runner compares what it printed, the exception it raised,
and the repr, type and JSON of every name it left). The kinds:

* library functions that read their caller's frame (``namedtuple`` and the
  functional ``Enum`` name their module from it, ``warnings.warn`` its line):
  a library call runs from the user's own frame;
* numpy scalars meeting number nodes: numpy's promotion (``np.float32(2) * x``
  stays float32, ``np.int64 - x`` works, ``np.int8(3) * n`` overflows as numpy does);
* math functions built from ops, given numpy float64 nodes (``np.ceil`` of one
  is a numpy float64, not an engine Value);
* floats a library gives (``math.pi``, ``random.random()``) used with an int node;
* ``x.__class__`` is Python's own type;
* recursion too deep: plain Python's message.
"""

import math
import re
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from fidelity_corpus import Runner
from gradmagic.notebook.magic import execute, prepare

pytestmark = pytest.mark.usefixtures("ip")

CELLS = [
    # the caller's frame
    "from collections import namedtuple\nP = namedtuple('P', 'x y')\np = P(1.5, 2)\n"
    "print(P.__module__, p, p.x * 2)",
    "import enum\nColor = enum.Enum('Color', 'RED GREEN')\nprint(Color.__module__, Color.RED)",
    "import typing\nT = typing.TypeVar('T')\nprint(T.__module__)",
    "import dataclasses\nQ = dataclasses.make_dataclass('Q', ['a'])\nprint(Q.__module__, Q(2.5))",
    # numpy scalars and number nodes
    "import numpy as np\na = np.int64(3)\nx = 2.5\ny = np.float64(x)\nprint(repr(a - y), repr(a * x))",
    "import numpy as np\nx = 3\nprint(repr(np.float32(0.1) * x), repr(np.int8(3) * x))",
    "import numpy as np\nx = 1.5\nz = np.float32(2.0) * x\nprint(repr(z), type(z).__name__)",
    "import numpy as np\nn = 300\ny = np.int8(3) * n",
    "import numpy as np\nx = 0.5\nprint(np.float16(x) + 1, repr(np.float16(x) * x))",
    "import numpy as np\nxs = np.array([1, 2, 3])\nn = 2\nprint(repr(xs[0] * n), repr(xs.sum() / n))",
    "import numpy as np\nv = np.int64(5)\nx = 0.5\nprint(repr(v + x), repr(x + v), repr(v ** 2), repr(divmod(v, 2)))",
    "import numpy as np\nx = 3.0\ny = np.float64(x)\nq, r = divmod(y, 2)\nprint(repr(q), repr(r), repr(2 ** y), repr(y % 2))",
    "import numpy as np\ns = np.str_('ab')\nn = 2\nprint(repr(s * n))",
    "import numpy as np\nx = 0.1\nprint(np.float32(x) == x, x == np.float32(x), np.float32(x) < x, "
    "x >= np.float16(x))",
    # math functions of numpy float64 nodes
    "import numpy as np\ndef softmax(v):\n    e = np.exp(v)\n    return e / np.sum(e)\n"
    "z = float(np.ceil(np.sum(softmax([1, 2, 3, 4]))))\nprint(repr(z))",
    "import numpy as np\nx = 2.0\ny = np.ceil(np.float64(x) / 3)\nw = np.floor(np.float64(x))\n"
    "print(repr(y), type(y).__name__, repr(w), repr(np.trunc(y)), repr(np.rint(y)))",
    "import math\nx = 2.7\nprint(math.floor(x), math.ceil(x), math.trunc(x), round(x), "
    "type(math.floor(x)).__name__)",
    # library floats with int nodes
    "import math\nn = 3\ny = math.pi * n\nprint(y, type(y).__name__)",
    "from math import pi, tau\nn = 2\ny = pi * n + tau\nprint(y, type(y).__name__)",
    "import random\nrandom.seed(3)\nn = 4\ny = random.random() * n\nprint(y)",
    "import math\nxs = [math.e, 2]\nprint(sum(xs), max(math.e, 3))",
    # types
    "x = 2.5\nn = 3\nprint(x.__class__, n.__class__.__name__, x.__class__ is float, n.__class__ is int)",
    "from fractions import Fraction\nn = 3\nr = Fraction(1, 3) * n + 1\nprint(r, type(r).__name__)",
    # recursion
    "def power(b, e):\n    if e == 0:\n        return 1\n    return b * power(b, e - 1)\ny = power(2, -1)",
]


@pytest.mark.parametrize("source", CELLS, ids=[str(i) for i in range(len(CELLS))])
def test_hostile_number_cell_behaves_as_plain_python(ip, source):
    differences = Runner(ip).run_docstring("scalars", {}, [SimpleNamespace(source=source)])
    assert not differences, (differences[0].plain, differences[0].magic)


# --------------------------------------------------------------------------- warnings
def _warnings_of(ip, cell):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    return [(w.category, str(w.message), w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize(
    "body",
    [
        "import numpy as np\nx = np.float64(2.0)\ny = x / 0\nL = x * 2.0",
        "import numpy as np\nx = np.float64(1e300)\ny = x * 1e10\nL = x * 2.0",
        "import numpy as np\nx = np.float64(2.0)\ny = np.float32(1e38) * 10 * x\nL = x * 2.0",
        "import warnings\nx = 2.0\nwarnings.warn('careful', UserWarning)\nL = x * 2.0",
    ],
)
def test_warnings_name_the_users_line(ip, body):
    """numpy's RuntimeWarning (and a library's warning) names the cell's line, as in a
    plain cell: the same text and category, the line counted with the %%autograd line."""
    plain = _warnings_of(ip, body)
    magic = _warnings_of(ip, "%%autograd -q\n" + body)
    assert plain and [(c, m) for c, m, _, _ in magic] == [(c, m) for c, m, _, _ in plain]
    for (_, _, file, line), (_, _, _, pline) in zip(magic, plain):
        assert line == pline + 1 and "gradmagic" not in file and file.startswith("<ipython")


# --------------------------------------------------------------------------- gradients
def _gradient_check(source, inputs):
    """The magic's gradients against central differences of the plain cell."""
    ns = dict(inputs)
    trace = execute(prepare(source, ns), ns, {"no_check": True})

    def plain(values):
        env = dict(zip(inputs, values))
        exec(compile(source, "<plain>", "exec"), env)
        return float(env["L"])

    for name, at in inputs.items():
        h = 1e-6 * max(1.0, abs(at))
        up = plain([v + h if k == name else v for k, v in inputs.items()])
        down = plain([v - h if k == name else v for k, v in inputs.items()])
        assert trace.grads[name] == pytest.approx((up - down) / (2 * h), rel=1e-5), name
    return trace


@pytest.mark.parametrize(
    "source",
    [
        "import math\nL = math.pi * n + n + x",
        "from math import pi, e\nL = pi * n * e + x",
        "import numpy as np\nL = np.pi * n ** 2 + x",
        "import math\nL = sum([math.tau, n]) * n + x",
        "import numpy as np\nL = np.float64(1.5) * n + x",
        "import numpy as np\nL = float(np.ceil(np.float64(x) * 3)) + x * n",
        "import math\ndef f(t):\n    return math.pi * t\nL = f(n) + f(x)",
        "import random\nrandom.seed(0)\nL = random.random() * n + x",
    ],
)
def test_library_floats_keep_int_nodes_in_the_graph(source):
    trace = _gradient_check(source, {"n": 3, "x": 0.7})
    assert not trace.warnings


def test_numpy_scalar_of_another_type_is_a_named_cut():
    ns = {"x": 1.5}
    trace = execute(
        prepare("import numpy as np\nL = float((np.complex64(2.0) * x).real) + x", ns),
        ns,
        {"no_check": True},
    )
    assert trace.grads["x"] == 1.0  # through `+ x` only
    assert any("complex64" in w and w.startswith("line 2: ") for w in trace.warnings)


def test_names_imported_from_a_module_stay_what_they_are():
    ns = {}
    trace = execute(
        prepare(
            "from math import pi, sqrt\nfrom numpy import float64\nL = float64(pi) * sqrt(2.0)", ns
        ),
        ns,
        {"no_check": True},
    )
    assert trace.value == pytest.approx(math.pi * math.sqrt(2.0))
    assert ns["pi"] is math.pi and ns["float64"] is np.float64


# --------------------------------------------------------------------------- cuts made visible
import statistics

from gradmagic.views import render


def _run(source, **inputs):
    ns = dict(inputs, math=math, np=np, statistics=statistics)
    return execute(prepare(source, ns), ns, {"no_check": True})


def test_a_cut_is_in_the_headline_and_on_the_node_it_made():
    """statistics.mean computes with exact fractions: d/dx of mean([x, y]) * x is 1.2 where
    the magic gives 0.6. The result says so where the user looks: the headline names the
    line and the function, the number the cut made is marked in the graph, the tables and
    the live view, and trace.warnings says who entered it."""
    trace = _run("m = 0.25\nz = statistics.mean([x, y]) * x + m", x=0.5, y=0.7)
    assert trace.grads["x"] == pytest.approx(0.6)  # the gradient misses the mean's share
    assert "✂ gradient cut at line 2 (statistics.mean)" in render.headline(trace)
    [(index, note)] = trace.cut_notes.items()
    node = trace.nodes[index]
    assert note == "line 2: statistics.mean" and node.cut == note
    assert node.data == pytest.approx(0.6) and node.is_leaf and trace.cut[index]
    assert trace.cut.sum() == 1
    dot = render.to_dot(trace)
    drawn = [line for line in dot.splitlines() if line.startswith(f"  v{index} ")]
    assert drawn and "✂ cut, line 2: statistics.mean" in drawn[0] and "dashed" in drawn[0]
    assert "✂ gradient cut at line 2 (statistics.mean)" in render.static_html(trace)
    assert "cut (line 2: statistics.mean)" in render.text(trace)
    pytest.importorskip("anywidget")
    from gradmagic.views import widget

    data = widget.payload(trace)
    assert "gradient cut at line 2" in data["headline"]
    assert any("gradient cut" in flag for flag in data["nodes"][str(index)]["flags"])


@pytest.mark.parametrize(
    "source, where",
    [
        ("L = math.erf(x) * x", "line 1 (math.erf)"),
        ("L = math.lgamma(x) + x", "line 1 (math.lgamma)"),
        ("L = math.ldexp(x, 2) + x", "line 1 (math.ldexp)"),
        ("A = np.polyval([x, 2.0], 1.5)\nL = A * x", "line 1 (numpy.polyval)"),
        ("L = np.interp(x, [0.0, 1.0], [0.0, 2.0]) + x", "line 1 (numpy.interp)"),
    ],
)
def test_every_cut_that_reaches_the_target_is_named_and_marked(source, where):
    trace = _run(source, x=0.4)
    assert f"gradient cut at {where}" in render.headline(trace)
    assert trace.cut_notes and all(n.startswith("line 1: ") for n in trace.cut_notes.values())


def test_a_cut_that_does_not_reach_the_target_is_only_a_warning():
    trace = _run("m = statistics.mean([x, y])\nL = x * y", x=0.5, y=0.7)
    assert "cut" not in render.headline(trace) and not trace.cut_notes
    assert trace.warnings[0].startswith("line 1: statistics.mean")
    assert trace.grads == pytest.approx({"x": 0.7, "y": 0.5, "L": 1.0})


@pytest.mark.parametrize(
    "source, expected",
    [
        ("L = np.arctan(x) + x", 1 / (1 + 0.25) + 1),  # the example: differentiated
        ("L = math.atan(x) * x", math.atan(0.5) + 0.5 / 1.25),
    ],
)
def test_functions_with_an_op_are_differentiated(source, expected):
    trace = _run(source, x=0.5)
    assert trace.grads["x"] == pytest.approx(expected) and not trace.warnings
    assert "cut" not in render.headline(trace)


@pytest.mark.parametrize(
    "call",
    [
        "math.atan2(x, 0.7)",
        "math.atan2(0.7, -x)",
        "math.atan2(-x, -0.2)",
        "np.arctan2(x, 0.7)",
        "math.copysign(x, -1.0)",
        "math.fmod(x * 7.0, 1.3)",
        "math.remainder(x * 7.0, 1.3)",
        "math.cbrt(x - 0.9)",
        "math.exp2(x)",
        "np.fmod(x * 7.0, 1.3)",
    ],
)
def test_functions_built_from_ops_match_central_differences(call, numgrad):
    trace = _run(f"L = {call} * 1.0", x=0.5)
    body = re.sub(r"\bx\b", "xs[0]", call)
    plain = eval(f"lambda xs: {body}", {"math": math, "np": np})
    assert not trace.warnings and trace.value == pytest.approx(float(plain([0.5])), abs=0)
    assert trace.grads["x"] == pytest.approx(numgrad(plain, [0.5])[0], rel=1e-6)
