"""gradmagic.autograd: the magic's run for a function or a cell's source, without a magic."""

from __future__ import annotations

import math
import shutil
import traceback

import numpy as np
import pytest

import gradmagic
from gradmagic import autograd
from gradmagic.analysis.trace import Trace
from numeric import central

SCALE = 2.0  # a number the function reads from its module: a parameter, as in a notebook


def tanh_loss(w, b):
    return (math.tanh(w * SCALE + b) - 0.5) ** 2


def mixed(x, *rest, k=2.0, **named):
    total = np.sum(x**2) * k + math.exp(named.get("z", 0.0))
    for r in rest:
        total = total + r * r
    return total


OFFSET = 0.25  # read only by a function inside the function


def shifted(x, k=SCALE):
    def inner(v):
        return v * OFFSET

    return np.sum(inner(x) * k)


def test_the_module_numbers_a_function_reads_by_its_defaults_and_inner_code():
    x = np.array([1.0, -2.0, 3.0])
    run = autograd(shifted)(x)
    assert run.value == shifted(x)
    assert np.allclose(run.grads["x"], OFFSET * SCALE) and run.grads["k"] == np.sum(x) * OFFSET
    assert run.grads["OFFSET"] == pytest.approx(np.sum(x) * SCALE, rel=1e-12)


def test_a_function_gives_value_and_gradients_against_central_differences(numgrad):
    run = autograd(tanh_loss)(0.5, b=-1.0)
    assert isinstance(run.trace, Trace) and run.trace is gradmagic.last
    assert run.value == pytest.approx(tanh_loss(0.5, -1.0), rel=1e-15)
    dw, db = numgrad(lambda v: tanh_loss(*v), [0.5, -1.0])
    assert run.grads["w"] == pytest.approx(dw, rel=1e-6)
    assert run.grads["b"] == pytest.approx(db, rel=1e-6)
    # the module's number is a leaf too, named as the code names it
    [ds] = numgrad(lambda v: (math.tanh(0.5 * v[0] - 1.0) - 0.5) ** 2, [SCALE])
    assert run.grads["SCALE"] == pytest.approx(ds, rel=1e-6)
    assert run.check().passed
    # math.tanh joined the graph (the function's source was rewritten): no cut
    assert run.trace.warnings == [] and not run.trace.cut_notes


def test_the_trace_is_the_one_the_magic_makes(ip):
    cell = "w = 0.5\nb = -1.0\nL = (math.tanh(w * SCALE + b) - 0.5) ** 2\nL"
    ip.user_ns.update(math=math, SCALE=SCALE)
    assert ip.run_cell("%%autograd -q\n" + cell).success
    magic = gradmagic.last
    run = autograd(tanh_loss)(0.5, -1.0)
    assert run.value == magic.value
    for name in ("w", "b", "SCALE"):
        assert run.grads[name] == magic.grads[name]
    ours = sorted(n.op for n in run.nodes)
    theirs = sorted(n.op for n in magic.nodes)
    assert ours == theirs  # the same operations, node for node


def test_arrays_varargs_and_keywords():
    x = np.array([1.0, -2.0, 0.5])
    run = autograd(mixed)(x, 3.0, k=1.5, z=0.25)
    assert run.value == pytest.approx(mixed(x, 3.0, k=1.5, z=0.25), rel=1e-15)
    np.testing.assert_allclose(
        run.grads["x"], central(lambda v: mixed(v, 3.0, k=1.5, z=0.25), x), rtol=1e-6
    )
    assert run.grads["k"] == pytest.approx(float(np.sum(x**2)), rel=1e-12)
    assert run.check().passed
    # the caller's array and numbers are left as they were
    assert type(x) is np.ndarray and x.tolist() == [1.0, -2.0, 0.5]


def product(x, y):
    return np.sum(x * y) + 1.0


@pytest.mark.parametrize("shared", [0.6, np.array([1.0, -2.0, 0.5])], ids=["float", "array"])
def test_one_object_passed_for_two_parameters_is_two_inputs(shared):
    """``f(a, a)``: each parameter's own gradient, holding the other fixed (as autograd
    gives it), never one leaf under the first name with the sum of both."""
    run = autograd(product)(shared, shared)
    for name in ("x", "y"):
        np.testing.assert_allclose(
            run.grads[name], central(lambda v: product(v, shared), np.array(shared)), rtol=1e-6
        )
    assert run.check().passed
    assert run.value == pytest.approx(product(shared, shared), rel=1e-15)


def test_a_cells_source_with_its_inputs():
    run = autograd("e = a*b\nd = e + 10.0\nL = d * -2.0\nL")(a=2.0, b=-3.0)
    expected = {"a": 6.0, "b": -4.0, "e": -2.0, "d": -2.0, "L": 1.0}
    assert {k: run.grads[k] for k in expected} == expected
    assert run.value == -8.0
    assert run.expect({"a": 6, "b": -4, "L.data": -8}).passed
    assert not run.expect({"a": 5}).passed


def test_options_are_keywords():
    run = autograd("x = 3.0\ny = x * x\nz = y + 1.0", target="y", check=False, expect="x=6")(x=3.0)
    assert run.value == 9.0 and run.grads["x"] == 6.0
    assert run.trace.options.no_check and run.trace.options.expect == {"x": 6.0}
    with pytest.raises(ValueError, match="eps"):
        autograd(tanh_loss, eps=0)
    with pytest.raises(ValueError, match="rankdir"):
        autograd(tanh_loss, rankdir="XY")
    with pytest.raises(TypeError, match="function or a cell"):
        autograd(3.0)
    with pytest.raises(TypeError, match=r"tanh_loss\(\)"):
        autograd(tanh_loss)(1.0, 2.0, 3.0)
    with pytest.raises(TypeError, match="nothing to differentiate"):
        autograd("x = 'text'\nx")()


def test_a_decorated_function_and_a_closure():
    c = 5.0

    @autograd
    def f(x):
        return c * x * x + 1.0

    run = f(3.0)
    assert run.value == 46.0 and run.grads["x"] == 30.0 and run.grads["c"] == 9.0
    assert f.__name__ == "f"


def test_a_lambda_runs_as_it_is():
    run = autograd(lambda x, y: x * y + x)(2.0, 5.0)
    assert run.value == 12.0 and (run.grads["x"], run.grads["y"]) == (6.0, 2.0)


def test_an_error_points_at_the_users_line():
    def broken(x):
        y = x * 2.0
        return y / 0.0

    with pytest.raises(ZeroDivisionError) as info:
        autograd(broken)(1.0)
    frames = traceback.extract_tb(info.value.__traceback__)
    last = frames[-1]
    assert last.line == "return y / 0.0" and last.name == "broken"
    assert last.lineno == broken.__code__.co_firstlineno + 2
    assert not any("gradmagic/core" in f.filename or "magic.py" in f.filename for f in frames)


def test_a_cut_is_named_where_a_function_has_no_rule():
    def cut(x):
        return math.lgamma(x) * x

    run = autograd(cut)(0.5)
    assert any("lgamma" in w for w in run.trace.warnings)


def test_the_view_is_the_magics_widget():
    anywidget = pytest.importorskip("anywidget")
    run = autograd(tanh_loss)(0.5, -1.0)
    view = run.view()
    assert isinstance(view, anywidget.AnyWidget)
    assert '"tabs"' in view.data and "Check" in view.data
    bundle = run._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "text/html" in bundle
    assert "nodes" in bundle["text/plain"] and "Check" in bundle["text/html"]
    if shutil.which("dot"):
        assert "<img" in bundle["text/html"]  # the graph, drawn by dot


def test_the_target_is_named_after_the_function():
    run = autograd(tanh_loss)(0.5, -1.0)
    assert run.trace.target.label == "tanh_loss" and run.grads["tanh_loss"] == 1.0
    assert autograd(lambda x: x * 3.0)(2.0).trace.target.label == "result"

    def x(x):  # a parameter named as its function: called as it is, still right
        return x * x

    assert autograd(x)(3.0).grads["x"] == 6.0


def test_in_marimo_a_run_shows_as_the_views_anywidget():
    mo = pytest.importorskip("marimo")
    pytest.importorskip("anywidget")
    run = autograd(tanh_loss)(0.5, -1.0)
    shown = run._display_()  # what marimo shows for a Run that ends a cell
    assert isinstance(shown, mo.ui.anywidget)
    assert '"tabs"' in shown.widget.data


TORCH_CELL = """import torch
W = torch.linspace(-1.0, 1.0, 6).reshape(3, 2).requires_grad_()
h = torch.tanh(x @ W)
loss = (h ** 2).sum()
loss.backward()
loss"""


def test_a_pytorch_cells_source_is_recorded_as_the_magic_records_it(ip):
    torch = pytest.importorskip("torch")
    x = torch.linspace(-2.0, 2.0, 12).reshape(4, 3)
    run = autograd(TORCH_CELL)(x=x)
    assert run.is_torch and gradmagic.last is run.trace
    # the cell ran as it is: its numbers are the plain run's
    plain = {"x": x}
    exec(TORCH_CELL, plain)
    assert run.value == pytest.approx(plain["loss"].item(), rel=1e-12)
    assert np.array_equal(run.grads["W"], plain["W"].grad.numpy())
    assert run.checks["whole"]["status"] == "pass"
    # and the magic's record of the same cell says the same
    ip.user_ns["x"] = x
    assert ip.run_cell("%%autograd -q\n" + TORCH_CELL).success
    magic = gradmagic.last
    assert type(magic) is type(run.trace) and magic.value == run.value
    assert [op.name for op in magic.ops] == [op.name for op in run.trace.ops]
    assert np.array_equal(magic.grads["W"], run.grads["W"])


def test_a_function_of_tensors_is_recorded_and_shows_the_pytorch_view():
    torch = pytest.importorskip("torch")
    pytest.importorskip("anywidget")

    def score(W, x):
        return torch.tanh(x @ W).pow(2).sum()

    W = torch.linspace(-1.0, 1.0, 6).reshape(3, 2).requires_grad_()
    x = torch.linspace(-2.0, 2.0, 12).reshape(4, 3)
    run = autograd(score)(W, x)
    assert run.is_torch and run.trace.names[run.trace.target] == "score"
    # the gradient the record kept is torch's own, which central differences confirm
    numeric = central(
        lambda w: float(score(torch.tensor(w), x.double())), W.detach().double().numpy()
    )
    assert np.allclose(run.grads["W"], numeric, rtol=1e-4, atol=1e-6)
    view = run.view()
    assert '"PyTorch run: target score' in view.data
    bundle = run._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "text/html" in bundle


def test_a_pytorch_source_with_nothing_to_differentiate_says_so():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="nothing to differentiate"):
        autograd("import torch\nn = 3")()
    assert torch is not None


def test_a_parameter_that_does_not_reach_the_value_has_gradient_zero():
    """As autograd gives it: 0 in the input's shape, for each number the arguments hold that
    the value does not depend on (a step function's input, an unused item of a dict)."""
    x = np.array([0.7, -0.2])
    run = autograd(lambda x, y, d: np.sum(np.floor(x)) + d["a"] * 2.0)(x, 3.0, {"a": 1.5, "b": 2.5})
    assert run.grads["y"] == 0.0 and run.grads_of("d") == {"a": 2.0, "b": 0.0}
    np.testing.assert_array_equal(run.grads["x"], np.zeros(2))
    assert run.grads["x"].shape == x.shape and run.check().passed


def test_a_default_that_names_a_local_of_the_function_that_made_it():
    def make():
        red = np.sum

        def f(a, r=red, *, k=red):
            return r(a * a) + k(a)

        return f

    a = np.array([1.0, 2.0])
    run = autograd(make(), check=False)(a)
    np.testing.assert_allclose(run.grads["a"], 2 * a + 1)


def test_an_array_result_is_refused_a_constant_one_has_gradient_zero():
    """As HIPS autograd's grad: a gradient is of one number; a constant has gradient 0."""
    with pytest.raises(TypeError, match=r"shape \(2,\); reduce it to one number"):
        autograd(lambda x: np.sin(x))(np.array([0.1, 0.2]))

    def constant(x):
        return 3.0

    run = autograd(constant, check=False)(np.array([0.1, 0.2]))
    assert run.value == 3.0 and np.array_equal(run.grads["x"], [0.0, 0.0])
    # an input whose numbers are not followed is named when nothing is left to differentiate
    with pytest.raises(TypeError, match="'x' holds a complex64 array"):
        autograd(lambda x: np.sum(np.abs(x)))(np.ones(2, np.complex64))
    if np.dtype(np.longdouble) != np.float64:
        with pytest.raises(TypeError, match=f"'x' holds a {np.dtype(np.longdouble).name} array"):
            autograd(lambda x: np.sum(x))(np.ones(2, np.longdouble))


def test_a_function_called_as_it_is_warns_of_math_calls_only():
    """numpy's np.sin keeps a number node's graph; math.sin reads it as a plain float."""
    run = autograd(lambda x: np.sin(x) * 2.0, check=False)(0.5)
    assert run.grads["x"] == pytest.approx(2 * math.cos(0.5)) and not run.trace.warnings
    run = autograd(lambda x: math.sin(x) + x, check=False)(0.5)
    assert any("calls sin" in w for w in run.trace.warnings)
