"""Learners' engines of other shapes: data behind a property, slots, a grad that starts as
None, a numpy engine with only ``@`` and ``sum``. Each is recognised, its ``.grad`` judged
against central differences of the plain code, and a planted slip caught."""

import numpy as np
import pytest

import gradmagic
from numeric import central

PROPERTY = """
class Node:
    __slots__ = ("_value", "grad", "_prev", "_backward")

    def __init__(self, value, parents=()):
        self._value, self.grad, self._prev = value, None, tuple(parents)
        self._backward = lambda: None

    @property
    def data(self):
        return self._value

    @data.setter
    def data(self, v):
        self._value = v

    def __mul__(self, other):
        out = Node(self.data * other.data, (self, other))
        def _backward():
            self.grad = (self.grad or 0.0) + other.data * out.grad
            other.grad = (other.grad or 0.0) + SLIP * out.grad
        out._backward = _backward
        return out

    def backward(self):
        order, seen = [], set()
        def visit(v):
            if id(v) not in seen:
                seen.add(id(v))
                for p in v._prev:
                    visit(p)
                order.append(v)
        visit(self)
        self.grad = 1.0
        for v in reversed(order):
            v._backward()
"""

MATMUL = """
import numpy as np

class T:
    def __init__(self, data, _prev=()):
        self.data = np.asarray(data, dtype=float)
        self.grad = np.zeros_like(self.data)
        self._prev, self._backward = _prev, lambda: None

    def __matmul__(self, other):
        out = T(self.data @ other.data, (self, other))
        def _backward():
            self.grad += out.grad @ SLIP
            other.grad += self.data.T @ out.grad
        out._backward = _backward
        return out

    def sum(self):
        out = T(self.data.sum(), (self,))
        def _backward():
            self.grad += np.ones_like(self.data) * out.grad
        out._backward = _backward
        return out

    def backward(self):
        topo, seen = [], set()
        def build(v):
            if id(v) not in seen:
                seen.add(id(v))
                for p in v._prev:
                    build(p)
                topo.append(v)
        build(self)
        self.grad = np.ones_like(self.data)
        for v in reversed(topo):
            v._backward()
"""

ENGINES = {  # name: (source, the right line, a slip, set-up, cell, inputs)
    "property_and_slots": (
        PROPERTY,
        "self.data",
        "other.data",
        "a = Node(1.5); b = Node(-2.0)",
        "c = a * b * a\nc.backward()\nc",
        ["a", "b"],
    ),
    "matmul_only": (
        MATMUL,
        "other.data.T",
        "other.data",
        "W = T(np.array([[1.0, 2.0], [3.0, 4.0]])); X = T(np.array([[0.5, 2.0], [-1.0, 1.5]]))",
        "s = ((W @ X) @ W).sum()\ns.backward()\ns",
        ["W", "X"],
    ),
}


def _plain(source, setup, cell, move=None):
    ns = {}
    exec(source, ns)
    exec(setup, ns)
    if move is not None:
        move(ns)
    exec(cell.rsplit("\n", 1)[0], ns)
    return ns


def _truth(source, setup, cell, name):
    """d target.data / d name.data by central differences of the plain code."""
    x0 = np.array(_plain(source, setup, "0\n0")[name].data, dtype=float)

    def target(x):
        def move(ns):
            ns[name].data = x if x.ndim else float(x)

        return float(np.sum(_plain(source, setup, cell, move)[cell.rsplit("\n", 1)[1]].data))

    return central(target, x0)


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("slipped", [False, True])
def test_an_engine_of_another_shape_is_judged(ip, engine, slipped):
    source, right, slip, setup, cell, inputs = ENGINES[engine]
    source = source.replace("SLIP", slip if slipped else right)
    assert ip.run_cell(source).success and ip.run_cell(setup).success
    assert ip.run_cell(f"%%autograd -q\n{cell}").success
    trace = gradmagic.last
    assert trace is not None and trace.claims is not None
    assert trace.claims.passed is not slipped, trace.claims.verdict
    assert trace.check().passed, str(trace.check())
    for name in inputs:
        want = _truth(source, setup, cell, name)
        assert np.allclose(trace.grads[name], want, rtol=1e-5, atol=1e-7), name
    plain = _plain(source, setup, cell)
    for name in inputs:  # the learner's own .grad, as plain code leaves it
        assert np.array_equal(ip.user_ns[name].grad, plain[name].grad), name
