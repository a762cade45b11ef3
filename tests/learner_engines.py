"""Autograd engines as learners write them, for the tests of the learner's engine.

``SCALAR`` is a scalar engine in the style of the micrograd lecture (a ``Num`` class with
``data``, ``grad``, ``_prev``, ``_op``, ``label``, a ``_backward`` closure per op and a
``backward()`` over a topological order); ``BUGS`` plants the lecture's classic mistakes
in it, each as (the correct line, the wrong one). ``ARRAYS`` is a numpy tensor engine
whose parents hang off a ``_ctx``; ``NODES`` keeps its parents in ``parents`` and
differentiates with a free function over ``sorted_graph``.
"""

SCALAR = """
import math

class Num:
    def __init__(self, data, _prev=(), _op="", label=""):
        self.data = data
        self.grad = 0.0
        self._prev = set(_prev)
        self._op = _op
        self.label = label
        self._backward = lambda: None

    def __repr__(self):
        return f"Num(data={self.data})"

    @staticmethod
    def wrap(x):
        return x if isinstance(x, Num) else Num(x)

    def __add__(self, other):
        other = Num.wrap(other)
        out = Num(self.data + other.data, (self, other), "+")
        def step():
            self.grad += out.grad
            other.grad += out.grad
        out._backward = step
        return out

    def __mul__(self, other):
        other = Num.wrap(other)
        out = Num(self.data * other.data, (self, other), "*")
        def step():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = step
        return out

    def __pow__(self, k):
        out = Num(self.data ** k, (self,), f"**{k}")
        def step():
            self.grad += k * self.data ** (k - 1) * out.grad
        out._backward = step
        return out

    def tanh(self):
        t = (math.exp(2 * self.data) - 1) / (math.exp(2 * self.data) + 1)
        out = Num(t, (self,), "tanh")
        def step():
            self.grad += (1 - t ** 2) * out.grad
        out._backward = step
        return out

    def exp(self):
        out = Num(math.exp(self.data), (self,), "exp")
        def step():
            self.grad += out.data * out.grad
        out._backward = step
        return out

    def __radd__(self, other):
        return self + other

    def __rmul__(self, other):
        return self * other

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-other)

    def __truediv__(self, other):
        return self * other ** -1

    def backward(self):
        order, seen = [], set()
        def visit(v):
            if v not in seen:
                seen.add(v)
                for p in v._prev:
                    visit(p)
                order.append(v)
        visit(self)
        self.grad = 1.0
        for v in reversed(order):
            v._backward()
"""

BUGS = {
    # the lecture's own: = where += belongs, seen when a number is used twice (a + a)
    "add_overwrites": (
        "            self.grad += out.grad\n            other.grad += out.grad\n",
        "            self.grad = out.grad\n            other.grad = out.grad\n",
    ),
    "tanh_derivative": ("(1 - t ** 2) * out.grad", "(1 - t) * out.grad"),
    "pow_derivative": ("k * self.data ** (k - 1) * out.grad", "k * self.data ** k * out.grad"),
}


def buggy(bug: str) -> str:
    right, wrong = BUGS[bug]
    assert SCALAR.count(right) == 1, bug
    return SCALAR.replace(right, wrong)


ARRAYS = """
import numpy as np

class Ctx:
    def __init__(self, parents, grads):
        self.parents = parents
        self.grads = grads

class Tensor:
    def __init__(self, data, _ctx=None):
        self.data = np.asarray(data, dtype=float)
        self.grad = None
        self._ctx = _ctx

    def __add__(self, other):
        return Tensor(self.data + other.data,
                      Ctx((self, other), (lambda g: g, lambda g: g)))

    def __mul__(self, other):
        a, b = self.data, other.data
        return Tensor(a * b, Ctx((self, other), (lambda g: g * b, lambda g: g * a)))

    def dot(self, other):
        a, b = self.data, other.data
        return Tensor(a @ b, Ctx((self, other), (lambda g: g @ b.T, lambda g: a.T @ g)))

    def tanh(self):
        t = np.tanh(self.data)
        return Tensor(t, Ctx((self,), (lambda g: g * (1 - t ** 2),)))

    def sum(self):
        shape = self.data.shape
        return Tensor(self.data.sum(), Ctx((self,), (lambda g: g * np.ones(shape),)))

    def backward(self):
        order, seen = [], set()
        def visit(v):
            if id(v) not in seen:
                seen.add(id(v))
                if v._ctx is not None:
                    for p in v._ctx.parents:
                        visit(p)
                order.append(v)
        visit(self)
        self.grad = np.ones_like(self.data)
        for v in reversed(order):
            if v._ctx is None:
                continue
            for p, rule in zip(v._ctx.parents, v._ctx.grads):
                g = rule(v.grad)
                p.grad = g if p.grad is None else p.grad + g
"""

NODES = """
class Node:
    def __init__(self, data, parents=(), local=()):
        self.data = data
        self.grad = 0.0
        self.parents = list(parents)
        self.local = list(local)

    def __add__(self, other):
        return Node(self.data + other.data, [self, other], [1.0, 1.0])

    def __mul__(self, other):
        return Node(self.data * other.data, [self, other], [other.data, self.data])

def sorted_graph(root):
    order, seen = [], set()
    def visit(v):
        if id(v) not in seen:
            seen.add(id(v))
            for p in v.parents:
                visit(p)
            order.append(v)
    visit(root)
    return order

def differentiate(root):
    nodes = sorted_graph(root)
    root.grad = 1.0
    for v in reversed(nodes):
        for p, d in zip(v.parents, v.local):
            p.grad += d * v.grad
"""

MLP = """
import random

class Neuron:
    def __init__(self, nin):
        self.w = [Num(random.uniform(-1, 1)) for _ in range(nin)]
        self.b = Num(random.uniform(-1, 1))

    def __call__(self, x):
        act = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)
        return act.tanh()

    def parameters(self):
        return self.w + [self.b]

class Layer:
    def __init__(self, nin, nout):
        self.neurons = [Neuron(nin) for _ in range(nout)]

    def __call__(self, x):
        outs = [n(x) for n in self.neurons]
        return outs[0] if len(outs) == 1 else outs

    def parameters(self):
        return [p for n in self.neurons for p in n.parameters()]

class MLP:
    def __init__(self, nin, nouts):
        sizes = [nin] + nouts
        self.layers = [Layer(sizes[i], sizes[i + 1]) for i in range(len(nouts))]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]
"""
