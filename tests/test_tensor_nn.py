"""Tensor layers: shapes, gradients against PyTorch, and a network that learns."""

import numpy as np
import pytest

from gradmagic import optim
from gradmagic.nn import Module
from gradmagic.optim import SGD
from gradmagic.core.tensor import Tensor, cross_entropy
from gradmagic.nn.tensor import Linear, ReLU, Sequential, Tanh


def blobs(n_per_class=60, n_classes=10, seed=0):
    """Ten Gaussian blobs around a circle in the plane, with integer labels."""
    rng = np.random.default_rng(seed)
    angles = 2 * np.pi * np.arange(n_classes) / n_classes
    centers = 4.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    y = np.repeat(np.arange(n_classes), n_per_class)
    X = centers[y] + 0.35 * rng.normal(size=(len(y), 2))
    return X, y


def accuracy(net, X, y):
    return float(np.mean(np.argmax(net(X).data, axis=1) == y))


def test_linear_shapes_labels_and_initialisation():
    layer = Linear(3, 5, seed=0, label="enc")
    assert layer.W.shape == (3, 5) and layer.b.shape == (5,)
    assert [p.label for p in layer.parameters()] == ["enc.W", "enc.b"]
    assert np.abs(layer.W.data).max() <= 1 / np.sqrt(3)
    assert np.array_equal(Linear(3, 5, seed=0).W.data, layer.W.data)
    assert not np.array_equal(Linear(3, 5, seed=1).W.data, layer.W.data)
    out = layer(np.ones((7, 3)))
    assert isinstance(out, Tensor) and out.shape == (7, 5)
    np.testing.assert_allclose(out.data, np.ones((7, 3)) @ layer.W.data + layer.b.data)
    assert Linear(3, 5, bias=False).parameters()[0].shape == (3, 5)
    with pytest.raises(ValueError, match="positive sizes"):
        Linear(0, 2)


def test_sequential_names_parameters_by_position():
    net = Sequential(Linear(2, 4, seed=0), ReLU(), Linear(4, 3, seed=1), Tanh())
    assert [p.label for p in net.parameters()] == ["0.W", "0.b", "2.W", "2.b"]
    assert len(net) == 4 and isinstance(net[1], ReLU) and isinstance(net, Module)
    assert "Linear(2, 4" in repr(net)
    named = Sequential(Linear(2, 2, label="first"))
    assert named.parameters()[0].label == "first.W"
    with pytest.raises(TypeError, match="layers"):
        Sequential(3)


def test_network_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    X, y = blobs(n_per_class=3)
    net = Sequential(
        Linear(2, 8, seed=0), ReLU(), Linear(8, 6, seed=1), Tanh(), Linear(6, 10, seed=2)
    )
    loss = cross_entropy(net(X), y)
    loss.backward()

    params = [torch.tensor(p.data, requires_grad=True) for p in net.parameters()]
    h = torch.tensor(X)
    h = torch.relu(h @ params[0] + params[1])
    h = torch.tanh(h @ params[2] + params[3])
    ref = torch.nn.functional.cross_entropy(h @ params[4] + params[5], torch.tensor(y))
    ref.backward()
    assert loss.data == pytest.approx(ref.item(), rel=1e-12)
    for ours, theirs in zip(net.parameters(), params):
        np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-10, atol=1e-13)


def test_zero_grad_resets_tensor_gradients():
    net = Sequential(Linear(2, 3, seed=0))
    net(np.ones((4, 2))).sum().backward()
    assert net.parameters()[0].grad.any()
    net.zero_grad()
    assert all(not p.grad.any() and p.grad.shape == p.shape for p in net.parameters())


def _train(net, opt, X, y, steps):
    for _ in range(steps):
        loss = cross_entropy(net(X), y)
        loss.backward()
        opt.step()
    return float(loss.data)


def test_two_layer_network_learns_ten_blobs():
    X, y = blobs()
    net = Sequential(Linear(2, 32, seed=0), ReLU(), Linear(32, 10, seed=1))
    before = accuracy(net, X, y)
    first = float(cross_entropy(net(X), y).data)
    last = _train(net, SGD(net.parameters(), lr=0.5, momentum=0.9), X, y, steps=150)
    after = accuracy(net, X, y)
    assert before < 0.5
    assert after > 0.9
    assert last < first / 4
    Xt, yt = blobs(n_per_class=20, seed=1)  # fresh points from the same blobs
    assert accuracy(net, Xt, yt) > 0.9


def test_adam_trains_tensors_when_available():
    Adam = getattr(optim, "Adam", None)
    if Adam is None:
        pytest.skip("gradmagic.optim has no Adam yet")
    X, y = blobs()
    net = Sequential(Linear(2, 32, seed=0), ReLU(), Linear(32, 10, seed=1))
    _train(net, Adam(net.parameters(), lr=0.02), X, y, steps=150)
    assert accuracy(net, X, y) > 0.9


def test_sgd_step_on_tensors_is_plain_gradient_descent():
    W = Tensor([[1.0, -2.0]])
    (W * W).sum().backward()
    SGD([W], lr=0.25).step()
    np.testing.assert_allclose(W.data, [[0.5, -1.0]])
    assert W.is_leaf and W.data.dtype == np.float64
