"""The micrograd lecture's two notebooks, cell by cell, plainly and under ``%%autograd -q``.

The cells follow the lecture's steps: a derivative by hand, a ``Value`` class grown in three
definitions (arithmetic; gradients, labels and a closure per op; ``backward()`` over a
topological order), gradients set by hand and by ``_backward()`` calls, a neuron, the
``a + a`` lesson; then ``Neuron``, ``Layer``, ``MLP`` and the training loop
(``p.grad = 0.0``, ``loss.backward()``, ``p.data += -0.1 * p.grad``), with no drawing.
Every cell prints the same under the magic, and leaves the same state; each cell that
ends in a ``Value`` after ``backward()`` exists gets true gradients (central differences of
the plain cells) and a verdict on the learner's ``.grad``.
"""

import ast
import contextlib
import io
import re

import pytest
from IPython.lib.pretty import pretty

import gradmagic

pytestmark = pytest.mark.usefixtures("ip")

ARITHMETIC = """
class Value:
    def __init__(self, data, _children=(), _op=''):
        self.data = data
        self._prev = set(_children)
        self._op = _op

    def __repr__(self):
        return f"Value(data={self.data})"

    def __add__(self, other):
        return Value(self.data + other.data, (self, other), '+')

    def __mul__(self, other):
        return Value(self.data * other.data, (self, other), '*')
"""

CLOSURES = """
import math

class Value:
    def __init__(self, data, _children=(), _op='', label=''):
        self.data = data
        self.grad = 0.0
        self._backward = lambda: None
        self._prev = set(_children)
        self._op = _op
        self.label = label

    def __repr__(self):
        return f"Value(data={self.data})"

    def __add__(self, other):
        out = Value(self.data + other.data, (self, other), '+')
        def _backward():
            self.grad = 1.0 * out.grad
            other.grad = 1.0 * out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        out = Value(self.data * other.data, (self, other), '*')
        def _backward():
            self.grad = other.data * out.grad
            other.grad = self.data * out.grad
        out._backward = _backward
        return out

    def tanh(self):
        x = self.data
        t = (math.exp(2 * x) - 1) / (math.exp(2 * x) + 1)
        out = Value(t, (self,), 'tanh')
        def _backward():
            self.grad = (1 - t ** 2) * out.grad
        out._backward = _backward
        return out
"""

FULL = """
import math

class Value:
    def __init__(self, data, _children=(), _op='', label=''):
        self.data = data
        self.grad = 0.0
        self._backward = lambda: None
        self._prev = set(_children)
        self._op = _op
        self.label = label

    def __repr__(self):
        return f"Value(data={self.data})"

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), '+')
        def _backward():
            self.grad += 1.0 * out.grad
            other.grad += 1.0 * out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), '*')
        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = _backward
        return out

    def __pow__(self, other):
        assert isinstance(other, (int, float)), "only int/float powers for now"
        out = Value(self.data ** other, (self,), f'**{other}')
        def _backward():
            self.grad += other * (self.data ** (other - 1)) * out.grad
        out._backward = _backward
        return out

    def __rmul__(self, other):
        return self * other

    def __radd__(self, other):
        return self + other

    def __truediv__(self, other):
        return self * other ** -1

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-other)

    def tanh(self):
        x = self.data
        t = (math.exp(2 * x) - 1) / (math.exp(2 * x) + 1)
        out = Value(t, (self,), 'tanh')
        def _backward():
            self.grad += (1 - t ** 2) * out.grad
        out._backward = _backward
        return out

    def exp(self):
        x = self.data
        out = Value(math.exp(x), (self,), 'exp')
        def _backward():
            self.grad += out.data * out.grad
        out._backward = _backward
        return out

    def backward(self):
        topo = []
        visited = set()
        def build_topo(v):
            if v not in visited:
                visited.add(v)
                for child in v._prev:
                    build_topo(child)
                topo.append(v)
        build_topo(self)
        self.grad = 1.0
        for node in reversed(topo):
            node._backward()
"""

NEURON = "\n".join(
    [
        "x1 = Value(2.0, label='x1')",
        "x2 = Value(0.0, label='x2')",
        "w1 = Value(-3.0, label='w1')",
        "w2 = Value(1.0, label='w2')",
        "b = Value(6.8813735870195432, label='b')",
        "x1w1 = x1*w1; x1w1.label = 'x1*w1'",
        "x2w2 = x2*w2; x2w2.label = 'x2*w2'",
        "x1w1x2w2 = x1w1 + x2w2; x1w1x2w2.label = 'x1*w1 + x2*w2'",
        "n = x1w1x2w2 + b; n.label = 'n'",
    ]
)

FIRST = [  # the first notebook: a derivative, then a Value grown step by step
    "import math\n\ndef f(x):\n    return 3*x**2 - 4*x + 5",
    "f(3.0)",
    "h = 0.000001\nx = 2/3\n(f(x + h) - f(x))/h",
    "h = 0.0001\na = 2.0\nb = -3.0\nc = 10.0\nd1 = a*b + c\nc += h\nd2 = a*b + c\n"
    "print('d1', d1)\nprint('d2', d2)\nprint('slope', (d2 - d1)/h)",
    ARITHMETIC,
    "a = Value(2.0)\nb = Value(-3.0)\nc = Value(10.0)\nd = a*b + c\n"
    "print(sorted(v.data for v in d._prev), d._op)\nd",
    CLOSURES,
    "a = Value(2.0, label='a')\nb = Value(-3.0, label='b')\nc = Value(10.0, label='c')\n"
    "e = a*b; e.label = 'e'\nd = e + c; d.label = 'd'\nf = Value(-2.0, label='f')\n"
    "L = d * f; L.label = 'L'\nL",
    # gradients by hand, as the lecture first finds them
    "L.grad = 1.0\nf.grad = 4.0\nd.grad = -2.0\nc.grad = -2.0\ne.grad = -2.0\n"
    "a.grad = -2.0 * -3.0\nb.grad = -2.0 * 2.0\nL",
    "a.data += 0.01 * a.grad\nb.data += 0.01 * b.grad\nc.data += 0.01 * c.grad\n"
    "f.data += 0.01 * f.grad\ne = a * b\nd = e + c\nL = d * f\nprint(L.data)\nL",
    NEURON + "\no = n.tanh(); o.label = 'o'\no",
    # backward by hand, one _backward() after another
    "o.grad = 1.0\no._backward()\nn._backward()\nb._backward()\nx1w1x2w2._backward()\n"
    "x2w2._backward()\nx1w1._backward()\nprint(x1.grad, w1.grad, x2.grad, w2.grad)\no",
    FULL,
    NEURON + "\no = n.tanh(); o.label = 'o'\no.backward()\nprint(x1.grad, w1.grad)\no",
    # tanh written as exponentials: the same gradients through more nodes
    NEURON + "\ne = (2*n).exp()\no = (e - 1) / (e + 1); o.label = 'o'\no.backward()\n"
    "print(x1.grad, w1.grad)\no",
    # the lesson of a + a: with += both uses count
    "a = Value(3.0, label='a')\nb = a + a; b.label = 'b'\nb.backward()\nprint(a.grad)\nb",
    "a = Value(-2.0, label='a')\nb = Value(3.0, label='b')\nd = a * b; d.label = 'd'\n"
    "e = a + b; e.label = 'e'\nf = d * e; f.label = 'f'\nf.backward()\nprint(a.grad, b.grad)\nf",
    "a = Value(2.0)\nb = Value(4.0)\nprint(a - b, a / b, a * 2, 2 * a, a + 1, a.exp())\na / b",
]

MLP = """
import random

class Neuron:
    def __init__(self, nin):
        self.w = [Value(random.uniform(-1, 1)) for _ in range(nin)]
        self.b = Value(random.uniform(-1, 1))

    def __call__(self, x):
        act = sum((wi*xi for wi, xi in zip(self.w, x)), self.b)
        out = act.tanh()
        return out

    def parameters(self):
        return self.w + [self.b]

class Layer:
    def __init__(self, nin, nout):
        self.neurons = [Neuron(nin) for _ in range(nout)]

    def __call__(self, x):
        outs = [n(x) for n in self.neurons]
        return outs[0] if len(outs) == 1 else outs

    def parameters(self):
        return [p for neuron in self.neurons for p in neuron.parameters()]

class MLP:
    def __init__(self, nin, nouts):
        sz = [nin] + nouts
        self.layers = [Layer(sz[i], sz[i+1]) for i in range(len(nouts))]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]
"""

SECOND = [  # the second notebook: a net of them, its loss, training
    FULL,
    MLP,
    "random.seed(1337)\nx = [2.0, 3.0, -1.0]\nn = MLP(3, [4, 4, 1])\nn(x)",
    "xs = [\n  [2.0, 3.0, -1.0],\n  [3.0, -1.0, 0.5],\n  [0.5, 1.0, 1.0],\n  [1.0, 1.0, -1.0],\n]\n"
    "ys = [1.0, -1.0, -1.0, 1.0]\nypred = [n(x) for x in xs]\nypred",
    "loss = sum((yout - ygt)**2 for ygt, yout in zip(ys, ypred))\nloss",
    "loss.backward()\nprint(n.layers[0].neurons[0].w[0].grad)\nloss",
    "print(len(n.parameters()))\nfor p in n.parameters():\n    p.data += -0.01 * p.grad\n"
    "ypred = [n(x) for x in xs]\nloss = sum((yout - ygt)**2 for ygt, yout in zip(ys, ypred))\nloss",
    "for k in range(8):\n    ypred = [n(x) for x in xs]\n"
    "    loss = sum((yout - ygt)**2 for ygt, yout in zip(ys, ypred))\n"
    "    for p in n.parameters():\n        p.grad = 0.0\n    loss.backward()\n"
    "    for p in n.parameters():\n        p.data += -0.1 * p.grad\n    print(k, loss.data)\nloss",
    "ypred",
]


TRUTHS = {  # (cell, an input of its graph, the number the cell writes for it, if it does)
    "first": [
        (9, "a", None),
        (9, "f", None),
        (10, "w1", "-3.0, label='w1'"),
        (14, "x1", "2.0, label='x1'"),
        (16, "a", "-2.0, label='a'"),
    ],
    "second": [(6, "n.layers[0].neurons[1].w[2]", None), (6, "n.layers[1].neurons[0].b", None)],
}


def _split(cell):
    """The cell's statements and its last expression (None if it ends in a statement)."""
    tree = ast.parse(cell)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        return tree, ast.Expression(tree.body.pop().value)
    return tree, None


def _plain(cells, ns=None):
    """Each cell's printout, value and the state after it, run plainly in one namespace."""
    ns = {"__name__": "__main__"} if ns is None else ns
    out = []
    for cell in cells:
        body, last = _split(cell)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(body, "<plain>", "exec"), ns)
            value = eval(compile(last, "<plain>", "eval"), ns) if last else None
        out.append((printed.getvalue(), value, _state(ns, list(ns))))
    return out


def _state(ns, names) -> dict:
    """The names' values as plain data: numbers (to 10 digits) with their types, each
    Value by its data and grad with their types, and the Values a net holds."""
    found = {}

    def number(x):
        return (round(x, 10) if isinstance(x, float) else x), type(x).__name__

    def seen(v, path, depth):
        kind = type(v).__name__
        if kind == "Value":
            found[path] = number(v.data) + number(getattr(v, "grad", None))
        elif isinstance(v, (int, float, str)):
            found[path] = number(v)
        elif isinstance(v, (list, tuple)) and depth < 6:
            for i, e in enumerate(v):
                seen(e, f"{path}[{i}]", depth + 1)
        elif kind in ("Neuron", "Layer", "MLP") and depth < 6:
            for k, e in vars(v).items():
                seen(e, f"{path}.{k}", depth + 1)

    for name in names:
        if not name.startswith("_") and name in ns:
            seen(ns[name], name, 0)
    return found


def _text(printed: str) -> tuple:
    """A printout as its words and its numbers (to 12 digits: the lecture's sets of parents
    are ordered by address, so a gradient's sum may add in another order run to run)."""
    number = r"-?\d+\.\d+(?:e-?\d+)?"
    numbers = [pytest.approx(float(x), rel=1e-12, abs=1e-15) for x in re.findall(number, printed)]
    return re.sub(number, "#", printed), numbers


def _numeric(cells, k, path, written, h=1e-6):
    """d (cell k's value).data / d (path).data, by central differences of the plain cells:
    ``path`` names an object the cells before k made (``n.layers[0].neurons[0].w[0]``) or,
    with ``written`` (``"2.0, label='x1'"``), one cell k makes from the number written there."""

    def at(d):
        ns = {"__name__": "__main__"}
        _plain(cells[:k], ns)
        cell = cells[k]
        if written is None:
            eval(path, ns).data += d
        else:
            assert cell.count(written) == 1, written
            number, _, rest = written.partition(",")
            cell = cell.replace(written, f"{float(number) + d!r},{rest}")
        return _plain([cell], ns)[-1][1].data

    return (at(h) - at(-h)) / (2 * h)


@pytest.mark.parametrize("notebook", ["first", "second"])
def test_the_lecture_runs_cell_by_cell_as_it_does_plainly(ip, capsys, notebook):
    cells = FIRST if notebook == "first" else SECOND
    want = _plain(cells)
    names = {path.split("[")[0].split(".")[0] for path in want[-1][2]}
    judged, traces = 0, []
    for k, cell in enumerate(cells):
        capsys.readouterr()
        result = ip.run_cell("%%autograd -q\n" + cell)
        assert result.success, (k, result.error_in_exec)
        printed, value, state = want[k]
        out = capsys.readouterr().out  # (a value the magic does not differentiate: shown)
        shown = re.search(r"^Out\[\d+\]: ", out, flags=re.M)
        assert _text(out[: shown.start() if shown else None]) == _text(printed), k
        assert not shown or _text(out[shown.end() :].strip()) == _text(pretty(value)), k
        assert _state(ip.user_ns, names) == state, k
        trace = gradmagic.last
        traces.append(trace)
        if trace is None:  # (nothing to differentiate: a definition, a list, a Value with no grad)
            assert not hasattr(value, "grad") and not isinstance(value, float), k
            continue
        plain_value = value.data if hasattr(value, "data") else value
        assert trace.value == pytest.approx(plain_value, rel=1e-12), k
        if "backward()" in cell and "def backward" not in cell:  # their engine, judged
            assert trace.claims is not None and trace.claims.passed, (k, trace.claims.verdict)
            judged += 1
    assert judged >= 2
    # the true gradients, against central differences of the plain cells
    for k, path, written in TRUTHS[notebook]:
        want = _numeric(cells, k, path, written)
        assert traces[k].grads[path] == pytest.approx(want, rel=1e-5, abs=1e-9), path
