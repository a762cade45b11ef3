"""A backpropagation lecture's notebook, cell by cell, in the manner of the micrograd lectures.

Written here for the tests: the first half grows a learner's scalar ``Value`` class one
method at a time (the derivative by hand, the chain rule by hand, ``_backward``
closures, a topological sort, the ``=``-for-``+=`` slip and its fix); the second half
builds a neuron, a layer and an MLP from it and trains the MLP with the lecture's
loop (``p.grad = 0.0``, ``loss.backward()``, ``p.data += -lr * p.grad``).

``CELLS`` is the notebook in order. ``JUDGED`` maps the index of each cell that ends
in a learner's ``Value`` after calling its ``backward()`` to whether the learner's
engine is right at that point of the notebook.
"""

import learner_engines

VALUE_V1 = """
class Value:
    def __init__(self, data, _children=(), _op="", label=""):
        self.data = data
        self.grad = 0.0
        self._prev = set(_children)
        self._op = _op
        self.label = label

    def __repr__(self):
        return f"Value(data={self.data})"

    def __add__(self, other):
        return Value(self.data + other.data, (self, other), "+")

    def __mul__(self, other):
        return Value(self.data * other.data, (self, other), "*")
"""

# the chain rule as closures, grown twice: first with the slip (= where += belongs),
# then fixed, with numbers on either side and the other operations (see _grown)
_CLOSURES = """
import math

class Value:
    def __init__(self, data, _children=(), _op="", label=""):
        self.data = data
        self.grad = 0.0
        self._backward = lambda: None
        self._prev = set(_children)
        self._op = _op
        self.label = label

    def __repr__(self):
        return f"Value(data={self.data})"

    def __add__(self, other):
        WRAP
        out = Value(self.data + other.data, (self, other), "+")
        def _backward():
            self.grad SET 1.0 * out.grad
            other.grad SET 1.0 * out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        WRAP
        out = Value(self.data * other.data, (self, other), "*")
        def _backward():
            self.grad SET other.data * out.grad
            other.grad SET self.data * out.grad
        out._backward = _backward
        return out

    def tanh(self):
        x = self.data
        t = (math.exp(2 * x) - 1) / (math.exp(2 * x) + 1)
        out = Value(t, (self,), "tanh")
        def _backward():
            self.grad SET (1 - t**2) * out.grad
        out._backward = _backward
        return out

    def backward(self):
        topo, visited = [], set()
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
MORE"""

_MORE = """
    def __pow__(self, other):
        assert isinstance(other, (int, float)), "only int or float powers"
        out = Value(self.data**other, (self,), f"**{other}")
        def _backward():
            self.grad += other * self.data ** (other - 1) * out.grad
        out._backward = _backward
        return out

    def __rmul__(self, other):
        return self * other

    def __radd__(self, other):
        return self + other

    def __truediv__(self, other):
        return self * other**-1

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-other)

    def exp(self):
        x = self.data
        out = Value(math.exp(x), (self,), "exp")
        def _backward():
            self.grad += out.data * out.grad
        out._backward = _backward
        return out
"""


def _grown(fixed: bool) -> str:
    wrap = "other = other if isinstance(other, Value) else Value(other)" if fixed else ""
    text = _CLOSURES.replace("SET", "+=" if fixed else "=").replace("MORE", _MORE if fixed else "")
    return text.replace("WRAP", wrap)


VALUE_V2, VALUE_V3 = _grown(False), _grown(True)

NEURON = """
x1 = Value(2.0, label="x1"); x2 = Value(0.0, label="x2")
w1 = Value(-3.0, label="w1"); w2 = Value(1.0, label="w2")
b = Value(6.8813735870195432, label="b")
x1w1 = x1 * w1; x1w1.label = "x1*w1"
x2w2 = x2 * w2; x2w2.label = "x2*w2"
n = x1w1 + x2w2 + b; n.label = "n"
"""

MLP = learner_engines.MLP.replace("Num(", "Value(")  # Neuron, Layer, MLP of Values

CELLS = [
    "import math\nimport numpy as np",
    "def f(x):\n    return 3 * x**2 - 4 * x + 5",
    "f(3.0)",
    "xs = np.arange(-5, 5, 0.25)\nys = f(xs)\nys[:4]",
    "h = 0.000001\nx = 2 / 3\n(f(x + h) - f(x)) / h",
    "a = 2.0\nb = -3.0\nc = 10.0\nd = a * b + c\nprint(d)",
    "h = 0.0001\nd1 = a * b + c\nc += h\nd2 = a * b + c\nprint('d1', d1)\nprint('d2', d2)\n"
    "print('slope', (d2 - d1) / h)",
    VALUE_V1,
    "a = Value(2.0, label='a')\nb = Value(-3.0, label='b')\nc = Value(10.0, label='c')\n"
    "e = a * b; e.label = 'e'\nd = e + c; d.label = 'd'\nf = Value(-2.0, label='f')\n"
    "L = d * f; L.label = 'L'\nL",
    "d._prev, d._op",
    # the chain rule by hand, then nudging the leaves along their gradients
    "L.grad = 1.0\nf.grad = 4.0\nd.grad = -2.0\nc.grad = -2.0\ne.grad = -2.0\n"
    "a.grad = -2.0 * -3.0\nb.grad = -2.0 * 2.0",
    "a.data += 0.01 * a.grad\nb.data += 0.01 * b.grad\nc.data += 0.01 * c.grad\n"
    "f.data += 0.01 * f.grad\ne = a * b\nd = e + c\nL = d * f\nprint(L.data)",
    VALUE_V2,
    NEURON + "o = n.tanh(); o.label = 'o'\no.backward()\no",
    "[(v.label, round(v.grad, 6)) for v in (x1, x2, w1, w2, b, n)]",
    # the slip shows when a node is used twice
    "a = Value(3.0, label='a')\nb = a + a; b.label = 'b'\nb.backward()\nb",
    "a.grad",
    "a = Value(-2.0, label='a')\nb = Value(3.0, label='b')\nd = a * a; d.label = 'd'\n"
    "f = d * b; f.label = 'f'\nf.backward()\nf",
    VALUE_V3,
    "a = Value(3.0, label='a')\nb = a + a; b.label = 'b'\nb.backward()\nb",
    "a.grad",
    # tanh written with exp, pow and division
    NEURON + "e = (2 * n).exp()\no = (e - 1) / (e + 1); o.label = 'o'\no.backward()\no",
    "[(v.label, round(v.grad, 6)) for v in (x1, x2, w1, w2, b)]",
    "a = Value(2.0)\nb = 2 * a + 1\nc = a / 4 - a**3\n(b * c).exp()",
    MLP,
    "random.seed(1337)\nx = [2.0, 3.0, -1.0]\nn = MLP(3, [4, 4, 1])\nn(x)",
    "xs = [[2.0, 3.0, -1.0], [3.0, -1.0, 0.5], [0.5, 1.0, 1.0], [1.0, 1.0, -1.0]]\n"
    "ys = [1.0, -1.0, -1.0, 1.0]\nypred = [n(x) for x in xs]\n"
    "loss = sum((yout - ygt)**2 for ygt, yout in zip(ys, ypred))\nloss.backward()\nloss",
    "n.layers[0].neurons[0].w[0].grad, len(n.parameters())",
    "for k in range(8):\n"
    "    ypred = [n(x) for x in xs]\n"
    "    loss = sum((yout - ygt)**2 for ygt, yout in zip(ys, ypred))\n"
    "    for p in n.parameters():\n"
    "        p.grad = 0.0\n"
    "    loss.backward()\n"
    "    for p in n.parameters():\n"
    "        p.data += -0.05 * p.grad\n"
    "    print(k, round(loss.data, 10))\n"
    "loss",
    "ypred",
]

# cell index -> is the learner's engine right there (the = slip: cells 15 and 17)
JUDGED = {
    13: True,
    15: False,
    17: False,
    19: True,
    21: True,
    23: True,
    25: True,
    26: True,
    28: True,
}
