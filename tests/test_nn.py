"""The small neural-network library and the optimizers."""

import math

import numpy as np
import pytest

from gradmagic.data import two_moons
from gradmagic.core.engine import Value, no_grad
from gradmagic.nn import MLP, Layer, Module, Neuron, accuracy, hinge_loss, mse_loss
from gradmagic.optim import SGD, Adam


# --------------------------------------------------------------- modules
@pytest.mark.parametrize(
    "activation, fn",
    [("tanh", math.tanh), ("relu", lambda z: max(z, 0.0)), ("linear", lambda z: z)],
)
def test_neuron_computes_activation_of_w_dot_x_plus_b(activation, fn):
    n = Neuron(3, activation)
    n.b.data = 0.25
    x = [0.5, -1.0, 2.0]
    z = sum(w.data * xi for w, xi in zip(n.w, x)) + 0.25
    assert n(x).data == pytest.approx(fn(z))
    assert len(n.parameters()) == 4 and n.parameters()[-1] is n.b


def test_neuron_rejects_bad_arguments_clearly():
    with pytest.raises(ValueError, match="activation must be one of"):
        Neuron(2, "sigmoidal")
    with pytest.raises(ValueError, match="nin must be a positive int"):
        Neuron(0)
    with pytest.raises(ValueError, match="takes 2 inputs, got 3"):
        Neuron(2)([1.0, 2.0, 3.0])


def test_layer_has_nout_neurons():
    layer = Layer(3, 4, "tanh")
    out = layer([0.1, 0.2, 0.3])
    assert len(out) == 4 and all(isinstance(o, Value) for o in out)
    assert len(layer.parameters()) == 4 * 4
    assert isinstance(Layer(3, 1)([0.1, 0.2, 0.3]), Value)  # one neuron: one Value
    with pytest.raises(ValueError, match="nout must be a positive int"):
        Layer(3, 0)


def test_mlp_shape_activations_and_seed():
    net = MLP(2, [16, 16, 1], seed=0)
    assert len(net.parameters()) == 16 * 3 + 16 * 17 + 17
    assert [n.activation for layer in net.layers for n in layer.neurons[:1]] == [
        "relu",
        "relu",
        "linear",
    ]
    same, other = MLP(2, [16, 16, 1], seed=0), MLP(2, [16, 16, 1], seed=1)
    assert [p.data for p in same.parameters()] == [p.data for p in net.parameters()]
    assert [p.data for p in other.parameters()] != [p.data for p in net.parameters()]
    assert isinstance(net([0.5, -0.5]), Value)
    assert len(MLP(2, [3, 2], seed=0)([0.5, -0.5])) == 2
    assert isinstance(MLP(2, [1, 1], seed=0)([0.5, -0.5]), Value)  # a 1-wide hidden layer
    with pytest.raises(ValueError, match="at least one layer"):
        MLP(2, [])


def test_mlp_gradient_matches_finite_differences():
    net = MLP(3, [4, 4, 1], activation="tanh", seed=2)
    x = [0.3, -0.2, 0.9]
    out = net(x)
    out.backward()
    for p in net.parameters()[::5]:
        before, h = p.data, 1e-6
        p.data = before + h
        up = net(x).data
        p.data = before - h
        down = net(x).data
        p.data = before
        assert p.grad == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-8)


def test_zero_grad_clears_every_parameter():
    net = MLP(2, [3, 1], seed=0)
    net([1.0, 2.0]).backward()
    assert any(p.grad != 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad == 0.0 for p in net.parameters())
    assert Module().parameters() == []


def test_module_and_optimizer_zero_scalar_and_array_gradients_alike():
    tensor = pytest.importorskip("gradmagic.core.tensor")

    class Pair(Module):
        def __init__(self):
            self.v, self.T = Value(1.0), tensor.Tensor([[1.0, 2.0]])

        def parameters(self):
            return [self.v, self.T]

    for clear in (lambda m: m.zero_grad(), lambda m: SGD(m.parameters()).zero_grad()):
        m = Pair()
        (m.T * m.v).sum().backward()
        assert m.v.grad == 3.0 and m.T.grad.tolist() == [[1.0, 1.0]]
        clear(m)
        assert m.v.grad == 0.0 and m.T.grad.shape == (1, 2) and not m.T.grad.any()


def test_losses_and_accuracy():
    preds = [Value(1.0), Value(-0.5), Value(2.0)]
    mse = mse_loss(preds, [0.0, 0.5, 2.0])
    assert mse.data == pytest.approx((1.0 + 1.0 + 0.0) / 3)
    mse.backward()
    assert [p.grad for p in preds] == pytest.approx([2 / 3, -2 / 3, 0.0])
    hinge = hinge_loss(preds, [1, 1, -1])  # margins 1*1, 1*-0.5, -1*2
    assert hinge.data == pytest.approx((0.0 + 1.5 + 3.0) / 3)
    hinge.backward()
    assert [p.grad for p in preds] == pytest.approx([0.0, -1 / 3, 1 / 3])
    assert accuracy(preds, [1, 1, -1]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="as many targets as predictions"):
        mse_loss(preds, [1.0])
    with pytest.raises(ValueError, match="as many targets as predictions"):
        hinge_loss([], [])


# --------------------------------------------------------------- optimizers
class ArrayParam:
    """An array-valued parameter, as a tensor presents itself to an optimizer."""

    def __init__(self, data):
        self.data = np.array(data, dtype=float)
        self.grad = np.zeros_like(self.data)


TARGET = np.array([1.0, -2.0, 0.5])
WEIGHT = np.array([1.0, 3.0, 0.5])


def _quadratic_grads(xs):
    """Gradient of sum(w * (x - t)**2)."""
    return 2 * WEIGHT * (np.asarray(xs) - TARGET)


def _run(make_opt, steps, array):
    start = [0.0, 0.0, 0.0]
    if array:
        params = [ArrayParam(start)]
        opt = make_opt(params)
        for _ in range(steps):
            params[0].grad = _quadratic_grads(params[0].data)
            opt.step()
        return list(params[0].data)
    params = [Value(x) for x in start]
    opt = make_opt(params)
    for _ in range(steps):
        loss = sum(w * (p - t) ** 2 for p, w, t in zip(params, WEIGHT, TARGET))
        loss.backward()
        opt.step()
    return [p.data for p in params]


@pytest.mark.parametrize(
    "make_opt",
    [
        lambda ps: SGD(ps, lr=0.05),
        lambda ps: SGD(ps, lr=0.05, momentum=0.9),
        lambda ps: Adam(ps, lr=0.1),
    ],
    ids=["sgd", "momentum", "adam"],
)
def test_optimizers_minimise_a_quadratic_on_scalars_and_arrays_alike(make_opt):
    scalars = _run(make_opt, 200, array=False)
    arrays = _run(make_opt, 200, array=True)
    assert scalars == pytest.approx(arrays, rel=1e-12)
    assert scalars == pytest.approx(list(TARGET), abs=1e-3)


def test_sgd_step_by_hand():
    p = Value(1.0)
    opt = SGD([p], lr=0.1, momentum=0.5)
    p.grad = 2.0
    opt.step()
    assert p.data == pytest.approx(1.0 - 0.1 * 2.0)
    p.grad = 2.0
    opt.step()  # velocity 0.5 * 2 + 2 = 3
    assert p.data == pytest.approx(0.8 - 0.1 * 3.0)
    opt.zero_grad()
    assert p.grad == 0.0


def test_adam_first_step_moves_each_parameter_by_lr_against_its_gradient_sign():
    ps = [Value(1.0), Value(1.0), Value(1.0)]
    for p, g in zip(ps, (5.0, -0.01, 300.0)):
        p.grad = g
    Adam(ps, lr=0.01).step()
    assert [p.data for p in ps] == pytest.approx([0.99, 1.01, 0.99], rel=1e-6)


def _torch_run(torch, opt_cls, steps, **kw):
    x = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = opt_cls([x], **kw)
    for _ in range(steps):
        opt.zero_grad()
        loss = (torch.tensor(WEIGHT) * (x - torch.tensor(TARGET)) ** 2).sum()
        loss.backward()
        opt.step()
    return x.detach().tolist()


@pytest.mark.parametrize(
    "name, kw",
    [("Adam", dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6)), ("SGD", dict(lr=0.02, momentum=0.7))],
)
def test_optimizers_match_pytorch(name, kw):
    torch = pytest.importorskip("torch")
    ours = _run(lambda ps: {"Adam": Adam, "SGD": SGD}[name](ps, **kw), 25, array=False)
    theirs = _torch_run(torch, getattr(torch.optim, name), 25, **kw)
    assert ours == pytest.approx(theirs, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        lambda: SGD([], lr=0.1),
        lambda: SGD([Value(1.0)], lr=0.0),
        lambda: SGD([Value(1.0)], lr=0.1, momentum=1.0),
        lambda: Adam([Value(1.0)], lr=-1),
        lambda: Adam([Value(1.0)], betas=(0.9, 1.0)),
        lambda: Adam([Value(1.0)], betas=(0.9,)),
        lambda: Adam([Value(1.0)], eps=-1e-8),
    ],
)
def test_optimizers_reject_bad_settings(make):
    with pytest.raises(ValueError):
        make()


# --------------------------------------------------------------- training
def test_an_mlp_learns_two_moons():
    X, y = two_moons(100, noise=0.1, seed=0)
    net = MLP(2, [16, 16, 1], seed=0)
    opt = Adam(net.parameters(), lr=0.05)
    losses = []
    for _ in range(40):
        scores = [net(x) for x in X]
        loss = hinge_loss(scores, y) + 1e-4 * sum(p * p for p in net.parameters())
        loss.backward()
        opt.step()
        losses.append(loss.data)
    with no_grad():
        final = accuracy([net(x) for x in X], y)
    assert final >= 0.95
    assert losses[-1] < 0.25 * losses[0]
