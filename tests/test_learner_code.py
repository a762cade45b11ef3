"""The learner's own code beyond an engine: numbers written as a function's arguments,
answers held in arrays and objects (``--expect``), all against the plain code."""

import numpy as np
import pytest

import gradmagic

pytestmark = pytest.mark.usefixtures("ip")

F = "def f(x, scale=1.0):\n    return scale * (3*x**2 - 4*x + 5)\n"


def central(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("where", ["plain cell", "magic cell"])
def test_a_float_written_as_an_argument_is_an_input_named_by_its_parameter(ip, where):
    ns: dict = {}
    exec(F, ns)
    f = ns["f"]
    if where == "plain cell":
        assert ip.run_cell(F).success
        cell = "f(3.0)"
    else:
        cell = F + "f(3.0)"
    assert ip.run_cell(f"%%autograd -q\n{cell}").success
    trace = gradmagic.last
    assert trace.value == f(3.0)
    assert trace.grads == {"x": pytest.approx(central(f, 3.0), rel=1e-6)}
    assert trace.grads["x"] == pytest.approx(14.0)
    assert trace.check().passed

    assert ip.run_cell("%%autograd -q\nf(-1.5, scale=2.0)").success
    trace = gradmagic.last
    assert trace.grads["x"] == pytest.approx(central(lambda x: f(x, scale=2.0), -1.5), rel=1e-6)
    assert trace.grads["scale"] == pytest.approx(central(lambda s: f(-1.5, scale=s), 2.0))


def test_an_argument_inside_a_function_stays_a_constant(ip):
    assert ip.run_cell(F).success
    assert ip.run_cell("%%autograd -q\ndef g():\n    return f(2.0)\ny = g()\ny").success
    assert "x" not in gradmagic.last.grads and ip.user_ns["y"] == 9.0


SETUP = """import numpy as np
class Net:
    def __init__(self):
        self.params = {'W1': np.array([[1.0, 2.0], [3.0, -1.0]]), 'b1': np.array([0.5, -0.5])}
net = Net()
x = np.array([1.0, -2.0])
"""
FORWARD = "h = np.tanh(net.params['W1'] @ x + net.params['b1'])\n(h * h).sum()"


def _plain_forward(W1, b1, x):
    h = np.tanh(W1 @ x + b1)
    return float((h * h).sum())


def _numeric(values: dict, name: str) -> np.ndarray:
    """d forward / d values[name] by central differences, element by element."""
    out = np.zeros_like(values[name])
    for i in np.ndindex(out.shape):
        moved = {k: v.copy() for k, v in values.items()}
        moved[name][i] += 1e-6
        up = _plain_forward(**moved)
        moved[name][i] -= 2e-6
        out[i] = (up - _plain_forward(**moved)) / 2e-6
    return out


def test_expect_reads_arrays_and_paths_by_name(ip):
    assert ip.run_cell(SETUP).success
    values = {
        "W1": ip.user_ns["net"].params["W1"].copy(),
        "b1": ip.user_ns["net"].params["b1"].copy(),
        "x": ip.user_ns["x"].copy(),
    }
    ip.user_ns["grads"] = {k: _numeric(values, k) for k in ("W1", "b1")}
    ip.user_ns["dx"] = _numeric(values, "x")
    spec = "net.params['W1']=grads['W1'], net.params['b1'] = grads['b1'], x=dx"
    assert ip.run_cell(f'%%autograd -q --expect "{spec}"\n{FORWARD}').success
    trace = gradmagic.last
    assert set(trace.options.expect) == {"net.params['W1']", "net.params['b1']", "x"}
    report = trace.expect(trace.options.expect)
    assert report.passed and len(report.rows) == 3, report.verdict
    assert np.array_equal(ip.user_ns["net"].params["W1"], values["W1"])

    ip.user_ns["dx"] = ip.user_ns["dx"] + np.array([0.0, 0.5])  # one wrong element
    spec = "x=dx, net.params['b1']=grads['b1']"
    assert ip.run_cell(f'%%autograd -q --expect "{spec}"\n{FORWARD}').success
    report = gradmagic.last.expect(gradmagic.last.options.expect)
    assert [r.name for r in report.rows if not r.ok] == ["x"]
    assert "(1,)" in report.rows[0].note


@pytest.mark.parametrize(
    "spec, message",
    [
        ("x=nosuch", "'nosuch' is not a number"),
        ("x=net.nosuch", "cannot be read: AttributeError"),
        ("x()=1", "not a variable name"),
    ],
)
def test_expect_says_what_it_cannot_read(ip, spec, message):
    assert ip.run_cell(SETUP).success
    with pytest.raises(Exception) as e:
        ip.run_cell_magic("autograd", f'-q --expect "{spec}"', FORWARD)
    assert message in str(e.value)
