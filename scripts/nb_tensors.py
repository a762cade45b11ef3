"""The cells of the demo notebook ``04_tensors.ipynb``: backprop on numpy arrays.

``TENSORS`` is a list of ("md" | "code", source) cells, in the format of the
lists in ``scripts/make_notebooks.py``, which writes the notebook.
"""

TENSORS = [
    ("md", """# Tensors: backpropagation on numpy arrays

`%%autograd` also works on numpy code. A float array the cell reads from the notebook, or makes
with `np.array`, `np.zeros`, `rng.normal`..., becomes a `gradmagic.Tensor` leaf named after its
variable; `@`, `.T`, `.sum()`, `np.mean`, `np.exp`, `np.tanh`, indexing and reshaping keep the
graph, one numpy operation per node. After the cell each array has a `.grad` of its own shape."""),
    ("code", "%load_ext gradmagic\nimport numpy as np\nimport gradmagic"),
    ("md", """## 1. Linear regression in one cell

Fifty points with two features, and targets from a known line plus noise. These are plain numpy
arrays, made in an ordinary cell:"""),
    ("code", "rng = np.random.default_rng(0)\nN = 50\nX = rng.normal(size=(N, 2))\n"
             "Y = X @ np.array([[2.0], [-1.0]]) + 0.1 * rng.normal(size=(N, 1))\nX.shape, Y.shape"),
    ("md", """The model is $P = XW$ and the loss the mean squared error
$L = \\frac1N \\sum_i (P_i - Y_i)^2$. The cell is plain numpy; `X` and `Y` enter as leaves and
`W` is made in the cell. The **Gradients** tab shows each node's shape and gradient, the **Check**
tab compares the gradients with finite differences of the recorded graph."""),
    ("code", "%%autograd\nW = np.array([[0.5], [-0.3]])\nP = X @ W\nL = np.mean((P - Y) ** 2)"),
    ("md", """By hand: $\\partial L/\\partial P = \\frac2N (P - Y)$ and, through the matrix product,
$\\partial L/\\partial W = X^\\top \\, \\partial L/\\partial P = \\frac2N X^\\top (P - Y)$.
The names now hold the tensors of the run; their `.data` are the arrays:"""),
    ("code", "closed_form = 2 / N * X.data.T @ (P.data - Y.data)\n"
             "print(W.grad)\nprint(closed_form)\nnp.allclose(W.grad, closed_form)"),
    ("md", """Every gradient has the shape of its array: `X.grad` says how the loss would change with
each input feature, `P.grad` with each prediction."""),
    ("code", "trace = gradmagic.last\n"
             "for name, g in trace.grads.items():\n"
             "    print(f'{name}: shape {g.shape}, norm {np.linalg.norm(g):.4f}')"),
    ("md", """## 2. A large leaf

The numerical check perturbs elements one at a time. For a large array it perturbs a seeded
random sample (at most 200 elements) and says so in the **Check** tab."""),
    ("code", "%%autograd\nA = rng.normal(size=(100, 50))\nL = (np.tanh(A) ** 2).mean()"),
    ("code", "report = gradmagic.last.check()\nprint(report.passed)\nprint(*report.notes, sep='\\n')"),
    ("md", """## 3. A network on ten classes

Ten blobs in the plane, 30 points each. `gradmagic.nn` has tensor layers (`Linear`, `ReLU`,
`Sequential`) whose parameters are tensors, and `gradmagic.tensor.cross_entropy` is the mean
negative log-likelihood of the right class under a softmax."""),
    ("code", "import gradmagic.nn as nn\nfrom gradmagic.optim import Adam\n"
             "from gradmagic.tensor import cross_entropy\n\n"
             "centres = rng.normal(scale=4.0, size=(10, 2))\ny = np.repeat(np.arange(10), 30)\n"
             "Xb = centres[y] + rng.normal(size=(300, 2))\n"
             "net = nn.Sequential(nn.Linear(2, 32, seed=0), nn.ReLU(), nn.Linear(32, 10, seed=1))\n"
             "net"),
    ("md", "A few Adam steps on the whole batch, in plain Python:"),
    ("code", "opt = Adam(net.parameters(), lr=0.05)\n"
             "for step in range(41):\n"
             "    logits = net(Xb)\n"
             "    loss = cross_entropy(logits, y)\n"
             "    opt.zero_grad()\n"
             "    loss.backward()\n"
             "    opt.step()\n"
             "    if step % 10 == 0:\n"
             "        accuracy = (logits.data.argmax(axis=1) == y).mean()\n"
             "        print(f'step {step:2d}  loss {loss.item():.3f}  accuracy {accuracy:.0%}')"),
    ("md", """## One step under the microscope

The next step's forward pass as an `%%autograd` cell: the graph has a handful of nodes, each a
whole array. The parameters are named by their position in the `Sequential` (`0.W`, `2.b`), and
the check samples the larger ones."""),
    ("code", "%%autograd\nlogits = net(Xb)\nL = cross_entropy(logits, y)"),
    ("md", """The gradients the cell computed are in the parameters' `.grad`, so the optimizer can take
this very step; the loss goes down."""),
    ("code", "for p in net.parameters():\n"
             "    print(f'{p.label:4s} shape {str(p.shape):8s} gradient norm {np.linalg.norm(p.grad):.4f}')\n"
             "before = L.item()\nopt.step()\nafter = cross_entropy(net(Xb), y).item()\n"
             "print(f'loss {before:.4f} -> {after:.4f}')"),
]
