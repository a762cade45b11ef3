"""A learner's homework module (``hw/layers.py`` beside the notebook, imported with
``from hw.layers import *``) is the learner's code: the same student functions give the
same gradients and verdicts imported as pasted into a cell, and both agree with central
differences of the plain code."""

import sys

import numpy as np
import pytest

import gradmagic
from gradmagic.notebook import own

pytestmark = pytest.mark.usefixtures("ip")

LAYERS = '''
import numpy as np


def conv_forward_naive(x, w, b, stride=1, pad=1):
    """A student's convolution: the output filled element by element."""
    N, C, H, W = x.shape
    F, _, HH, WW = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="constant")
    Ho = 1 + (H + 2 * pad - HH) // stride
    Wo = 1 + (W + 2 * pad - WW) // stride
    out = np.zeros((N, F, Ho, Wo))
    for n in range(N):
        for f in range(F):
            for i in range(Ho):
                for j in range(Wo):
                    window = xp[n, :, i * stride:i * stride + HH, j * stride:j * stride + WW]
                    out[n, f, i, j] = np.sum(window * w[f]) + b[f]
    return out


def svm_loss_naive(W, X, y, reg):
    """A student's multiclass SVM loss with loops, and their gradient dW."""
    dW = np.zeros(W.shape)
    loss = 0.0
    for i in range(X.shape[0]):
        scores = X[i].dot(W)
        correct = scores[y[i]]
        for j in range(W.shape[1]):
            if j == y[i]:
                continue
            margin = scores[j] - correct + 1
            if margin > 0:
                loss += margin
                dW[:, j] += X[i]
                dW[:, y[i]] -= X[i]
    loss /= X.shape[0]
    dW /= X.shape[0]
    loss += reg * np.sum(W * W)
    dW += 2 * reg * W
    return loss, dW


def rnn_forward(x, h0, Wx, Wh, b):
    """A student's RNN over time: each step's state written into an array of zeros."""
    N, T, D = x.shape
    h = np.zeros((N, T, h0.shape[1]))
    prev = h0
    for t in range(T):
        prev = np.tanh(x[:, t, :].dot(Wx) + prev.dot(Wh) + b)
        h[:, t, :] = prev
    return h


def affine_relu(x, w, b):
    return np.maximum(0, x.dot(w) + b)


class TwoLayerNet:
    """A student's net: its weights in ``self.params``."""

    def __init__(self, D, H, C, std=0.5):
        rng = np.random.RandomState(0)
        self.params = {
            "W1": std * rng.randn(D, H),
            "b1": np.zeros(H) + 0.1,
            "W2": std * rng.randn(H, C),
            "b2": np.zeros(C),
        }

    def loss(self, X, y):
        h = affine_relu(X, self.params["W1"], self.params["b1"])
        scores = h.dot(self.params["W2"]) + self.params["b2"]
        scores = scores - scores.max(axis=1, keepdims=True)
        p = np.exp(scores) / np.sum(np.exp(scores), axis=1, keepdims=True)
        return -np.mean(np.log(p[np.arange(X.shape[0]), y]))
'''

SETUP = """import numpy as np
rng = np.random.RandomState(1)
x = rng.randn(1, 2, 4, 4)
w = rng.randn(3, 2, 3, 3)
b = rng.randn(3)
X = rng.randn(5, 4)
W = 0.1 * rng.randn(4, 3)
y = np.array([0, 2, 1, 2, 0])
net = TwoLayerNet(4, 6, 3)
xs = rng.randn(2, 3, 4)
h0 = rng.randn(2, 5)
Wx = 0.5 * rng.randn(4, 5)
Wh = 0.5 * rng.randn(5, 5)
bh = rng.randn(5)
"""

CELLS = {
    "conv": ("out = conv_forward_naive(x, w, b)\n(out * out).sum()", ["x", "w", "b"]),
    "svm": ("loss, dW = svm_loss_naive(W, X, y, 0.1)\nloss", ["W"]),
    "net": ("net.loss(X, y)", ["net.params['W1']", "net.params['b2']"]),
    "rnn": ("h = rnn_forward(xs, h0, Wx, Wh, bh)\n(h * h).sum()", ["xs", "h0", "Wx", "Wh", "bh"]),
}


@pytest.fixture
def homework(tmp_path, monkeypatch):
    """The folder of a notebook with its homework package ``hw``, as the working directory."""
    (tmp_path / "hw").mkdir()
    (tmp_path / "hw" / "__init__.py").write_text("")
    (tmp_path / "hw" / "layers.py").write_text(LAYERS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    _forget_hw()  # (another test's package of that name)
    yield tmp_path
    _forget_hw()


def _forget_hw():
    for name in [n for n in sys.modules if n == "hw" or n.startswith("hw.")]:
        del sys.modules[name]


def plain_value(source, cell, path=None, index=None, h=0.0):
    ns = {"__builtins__": __builtins__, "__name__": "__main__"}
    exec(LAYERS, ns)
    exec(SETUP, ns)
    if path is not None:
        arr = eval(path, ns)
        arr[index] += h
    body, _, last = cell.rpartition("\n")
    exec(body, ns)
    return float(eval(last, ns))


def numeric(cell, path, index, h=1e-6):
    return (plain_value(None, cell, path, index, h) - plain_value(None, cell, path, index, -h)) / (
        2 * h
    )


def run(ip, how, cell):
    if how == "pasted":
        assert ip.run_cell(LAYERS).success
    else:
        assert ip.run_cell("from hw.layers import *").success
    assert ip.run_cell(SETUP).success
    assert ip.run_cell(f"%%autograd -q\n{cell}").success
    return gradmagic.last


@pytest.mark.parametrize("case", list(CELLS))
def test_imported_student_code_is_followed_as_pasted_code(ip, homework, case):
    cell, inputs = CELLS[case]
    traces = {how: run(ip, how, cell) for how in ("imported", "pasted")}
    imported, pasted = traces["imported"], traces["pasted"]
    assert imported.value == pytest.approx(plain_value(None, cell), rel=1e-12)
    assert imported.value == pasted.value
    rng = np.random.RandomState(2)
    for path in inputs:
        grad = np.asarray(imported.grads[path])
        np.testing.assert_allclose(grad, pasted.grads[path], rtol=1e-12, atol=1e-14)
        for k in rng.choice(grad.size, min(grad.size, 4), replace=False):
            index = np.unravel_index(k, grad.shape)
            assert grad[index] == pytest.approx(numeric(cell, path, index), rel=1e-4, abs=1e-7)
    report = imported.check()
    assert report.passed, report.verdict
    assert type(ip.user_ns["net"].params["W1"]) is np.ndarray  # plain again


def test_a_students_own_gradient_gets_the_same_verdict_imported(ip, homework):
    cell = CELLS["svm"][0]
    verdicts = {}
    for how in ("imported", "pasted"):
        trace = run(ip, how, cell)
        report = trace.expect({"W": ip.user_ns["dW"]})
        verdicts[how] = (report.passed, [r.status for r in report.rows])
    assert verdicts["imported"] == verdicts["pasted"] == (True, ["pass"])


def test_what_counts_as_the_learners_own_can_be_set(ip, homework, monkeypatch):
    assert ip.run_cell("from hw.layers import *").success
    assert own.is_own(ip.user_ns["conv_forward_naive"])
    assert not own.is_own(np.zeros) and not own.is_own(pytest.approx)
    monkeypatch.setattr(own, "FOLDERS", [])  # the notebook only: the module is a library
    assert not own.is_own(ip.user_ns["conv_forward_naive"])
    assert ip.run_cell(SETUP).success
    ip.run_cell("%%autograd -q\nout = conv_forward_naive(x, w, b)\n(out * out).sum()")
    assert "w" not in (gradmagic.last.grads if gradmagic.last is not None else {})


KEEPER = '''
import numpy as np

SEEN = []
_cache = {}


def scaled(x):
    """Keeps what it is given and what it made, in module globals."""
    SEEN.append(x)
    if x not in _cache:
        _cache[x] = x * 2 + np.tanh(x)
    return _cache[x]
'''


def test_what_a_learners_module_keeps_is_plain_after_the_cell(ip, homework):
    (homework / "hw" / "keeper.py").write_text(KEEPER)
    assert ip.run_cell("import hw.keeper as keeper").success
    assert ip.run_cell("%%autograd -q\nx = 0.5\ny = keeper.scaled(x) * keeper.scaled(x)\ny").success
    x = 0.5
    assert gradmagic.last.grads["x"] == pytest.approx(
        2 * (2 * x + np.tanh(x)) * (3 - np.tanh(x) ** 2)
    )
    keeper = sys.modules["hw.keeper"]
    assert [type(v) for v in keeper.SEEN] == [float, float]
    assert [(type(k), type(v)) for k, v in keeper._cache.items()] == [(float, np.float64)]
