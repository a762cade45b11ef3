"""Write the demo notebooks' cells (without outputs) into demo_notebooks/.

The notebooks are kept as this script's text so their content is reviewable
in a diff; `make notebooks` then executes them and saves their outputs and
widget state (python -m gradmagic.demo --save).
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

OUT = Path(__file__).resolve().parent.parent / "demo_notebooks"


def notebook(name: str, cells: list) -> None:
    nb = new_notebook(
        cells=[
            new_markdown_cell(text) if kind == "md" else new_code_cell(text) for kind, text in cells
        ]
    )
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    OUT.mkdir(exist_ok=True)
    path = OUT / name
    if path.exists():  # keep saved outputs of cells whose source did not change
        old = nbformat.read(path, as_version=4)
        saved = {c.source: c for c in old.cells if c.cell_type == "code"}
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.source in saved:
                cell.outputs = saved[cell.source].outputs
                cell.execution_count = saved[cell.source].execution_count
        if "widgets" in old.metadata:
            nb.metadata["widgets"] = old.metadata["widgets"]
    nbformat.write(nb, path)
    print("wrote", path)


TOUR = [
    (
        "md",
        """# A guided tour of backpropagation

`%%autograd` runs a cell with every number turned into a node of a computation graph, calls
`backward()` on the cell's last expression and shows what happened: the graph, each node's value
and gradient, and a numerical check (finite differences) beside every gradient.

Load the extension once per notebook:""",
    ),
    ("code", "%load_ext gradmagic"),
    (
        "md",
        """## 1. A single expression

$f(x, y) = 3x^2 + xy + 5y^2$. By hand: $\\partial f/\\partial x = 6x + y = 15$ and
$\\partial f/\\partial y = x + 10y = 32$ at $(2, 3)$. Open the **Graph** tab to see how the
expression was built, **Gradients** for the numbers, **Check** for the finite differences.""",
    ),
    ("code", "%%autograd\nx = 2.0\ny = 3.0\nf = 3*x**2 + x*y + 5*y**2\nf"),
    ("md", "After the cell, `x` and `y` are nodes of the graph and carry their gradients:"),
    ("code", "x.grad, y.grad"),
    (
        "md",
        """## 2. The chain rule, one step at a time

The walk-through from *The spelled-out intro to neural networks and backpropagation*:
$L = (a b + c) f$. Move the slider in the **Backward** tab: each step takes one node, in reverse
topological order, and hands its gradient to its parents, multiplied by the local derivative.
Pick a node to see its local derivative and the gradient flowing into it.""",
    ),
    ("code", "%%autograd\na = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f\nL"),
    (
        "md",
        """## 3. A neuron

A tanh neuron with two inputs. The bias was chosen so that the output is $1/\\sqrt 2$; then
$\\partial o/\\partial n = 1 - o^2 = 0.5$ and every other gradient follows from it.""",
    ),
    (
        "code",
        "%%autograd\nx1 = 2.0\nx2 = 0.0\nw1 = -3.0\nw2 = 1.0\nb = 6.8813735870195432\n"
        "n = x1*w1 + x2*w2 + b\no = n.tanh()\no",
    ),
    (
        "md",
        """The same neuron written with `math.tanh` keeps the graph too: `%%autograd` maps `math`
functions onto the engine.""",
    ),
    ("code", "import math"),
    ("code", "%%autograd\no = math.tanh(x1*w1 + x2*w2 + b)"),
    (
        "md",
        """## 4. A value used twice

When a node feeds two places, its gradient is the **sum** of what flows back along each path.
Forgetting to accumulate is the classic backprop bug: here $b = a + a$, so
$\\partial b/\\partial a = 2$, not 1.""",
    ),
    ("code", "%%autograd\na = 3.0\nb = a + a\nb"),
    (
        "md",
        """## 5. Your own code

Functions, loops and comprehensions work as in plain Python; the magic only changes numbers into
nodes. Here a polynomial is evaluated with Horner's rule.""",
    ),
    (
        "code",
        "%%autograd --rankdir TB\ndef horner(coeffs, t):\n    acc = 0.0\n    for c in coeffs:\n"
        "        acc = acc * t + c\n    return acc\n\nt = 0.5\np = horner([2.0, -1.0, 3.0], t)\np",
    ),
    (
        "md",
        """## 6. Non-differentiable points and branches

`relu` has no derivative at 0: the engine uses the subgradient 0 and the view marks the node.
A comparison on a node makes the run depend on its value; the check then says it holds for this
branch only.""",
    ),
    ("code", "%%autograd\nz = 0.0\nr = z.relu() + (z*z if z > -1 else z)\nr"),
    (
        "md",
        """## 7. Without the magic

Everything above is the engine `gradmagic.Value`, which works in plain Python too:""",
    ),
    (
        "code",
        "from gradmagic import Value\n\na = Value(2.0, label='a')\nb = Value(-3.0, label='b')\n"
        "L = (a * b + a).tanh()\nL.backward()\na.grad, b.grad",
    ),
]

MLP = [
    (
        "md",
        """# Training a small network with `gradmagic.nn`

A two-layer perceptron learns to separate two interleaved half-moons. Then `%%autograd` looks
inside one training step.""",
    ),
    (
        "code",
        "%load_ext gradmagic\nimport numpy as np\nfrom gradmagic.nn import MLP, hinge_loss, accuracy\n"
        "from gradmagic.optim import SGD",
    ),
    (
        "md",
        "Two interleaved half-moons, 120 noisy points labelled -1 and +1 (`gradmagic.data` makes them with numpy):",
    ),
    (
        "code",
        "from gradmagic.data import two_moons\nX, y = two_moons(120, noise=0.1, seed=0)\nlen(X), X[0], y[0]",
    ),
    (
        "code",
        "net = MLP(2, [16, 16, 1], activation='relu', seed=1)\nopt = SGD(net.parameters(), lr=0.05, momentum=0.9)\n"
        "for step in range(60):\n    scores = [net(x) for x in X]\n    loss = hinge_loss(scores, y)\n"
        "    loss.backward()\n    opt.step()\n    if step % 10 == 0:\n"
        "        print(f'step {step:2d}  loss {loss.data:.3f}  accuracy {accuracy(scores, y):.0%}')\n"
        "print(f'final accuracy {accuracy([net(x) for x in X], y):.0%}')",
    ),
    (
        "md",
        """## One step under the microscope

The point the network finds hardest (smallest margin $y \\cdot \\text{score}$), and the hinge
loss on it, with the network's weights entering as leaves. The graph has about a thousand nodes,
more than the default `--max-nodes 150`, so the Graph tab shows a summary around the loss; the
Gradients and Check tabs list every node.""",
    ),
    (
        "code",
        "hardest = min(range(len(X)), key=lambda i: y[i] * net(X[i]).data)\nhardest, y[hardest]",
    ),
    ("code", "%%autograd\nscore = net(X[hardest])\nloss = (1 - y[hardest] * score).relu()\nloss"),
    (
        "md",
        """The trace of that run is `gradmagic.last`: the weights with the largest gradients are the
ones the next SGD step moves most.""",
    ),
    (
        "code",
        "import gradmagic\ntrace = gradmagic.last\nbiggest = sorted(trace.grads.items(), key=lambda kv: -abs(kv[1]))[:5]\n"
        "for name, g in biggest:\n    print(f'{name:12s} {g:+.4f}')\nprint(trace.check().passed)",
    ),
]

HOMEWORK = [
    (
        "md",
        """# Homework: gradients by hand, checked by gradmagic

The teacher asks for derivatives worked out on paper; `%%autograd --expect` compares the answers
with the engine's gradients and says which are right. For graders, `gradmagic.grade` runs the same
check without a display, for nbgrader or otter-grader test cells.""",
    ),
    ("code", "%load_ext gradmagic\nimport gradmagic"),
    (
        "md",
        """## Question 1 (teacher)

Let $q = x y + z$ and $L = q^2$, at $x = 3$, $y = -2$, $z = 10$.
Derive by hand $\\partial L/\\partial x$, $\\partial L/\\partial y$, $\\partial L/\\partial z$, and
the value of $L$. Put your answers in the dict `answers`: a name is the gradient of $L$ with
respect to that variable, `"L.data"` is the value of $L$.""",
    ),
    (
        "md",
        """## Your answer (student)

By the chain rule, $\\partial L/\\partial q = 2q = 8$, so $\\partial L/\\partial x = 8y$,
$\\partial L/\\partial y = 8x$ and $\\partial L/\\partial z = 8$.""",
    ),
    ("code", 'answers = {"x": -16, "y": 24, "z": 8, "L.data": 16}'),
    (
        "md",
        """Check them: `--expect answers` compares each entry with the engine. The **Answers**
tab opens first, with the verdict on top.""",
    ),
    ("code", "%%autograd --expect answers\nx = 3.0\ny = -2.0\nz = 10.0\nq = x*y + z\nL = q**2\nL"),
    (
        "md",
        """## A wrong answer

Forgetting the outer derivative $2q$ is the classic slip: it gives $\\partial L/\\partial x = y$,
$\\partial L/\\partial y = x$, $\\partial L/\\partial z = 1$. The answers can also be written
inline. Each wrong entry is marked ✗ with the engine's number and the difference; the cell still
runs to the end, so a notebook of answers never stops on a wrong one.""",
    ),
    (
        "code",
        '%%autograd --expect "x=-2, y=3, z=1, L.data=16"\n'
        "x = 3.0\ny = -2.0\nz = 10.0\nq = x*y + z\nL = q**2\nL",
    ),
    (
        "md",
        """## A second opinion

`--torch` replays the same graph in PyTorch (float64) and adds its gradients to the **Check**
tab. Without PyTorch installed, the option says how to install it and the rest works.""",
    ),
    ("code", "%%autograd --torch\nx = 3.0\ny = -2.0\nz = 10.0\nq = x*y + z\nL = q**2\nL"),
    (
        "md",
        """## For the teacher: a hidden test cell

In nbgrader, a cell like the next one is an autograded test (the lines between the
`HIDDEN TESTS` markers are removed from the students' copy). `gradmagic.grade` runs the
question's code through the same rewrite and engine as `%%autograd`, without a display, in a
separate fresh Python process, and writes nothing to stderr; `assert_passed()` fails the test
with one line per wrong answer. Here it grades the student's hand-derived `answers` against the
teacher's code; the next section grades a student's code.""",
    ),
    (
        "code",
        '### BEGIN HIDDEN TESTS\nQUESTION = """\nx = 3.0\ny = -2.0\nz = 10.0\nq = x*y + z\n'
        'L = q**2\nL\n"""\ngradmagic.grade(QUESTION, answers).assert_passed()\n'
        "### END HIDDEN TESTS",
    ),
    (
        "md",
        """What a wrong submission reports (in a test cell, `assert_passed()` would raise with
this message):""",
    ),
    (
        "code",
        'wrong = {"x": -2, "y": 3, "z": 1, "L.data": 16}\nreport = gradmagic.grade(QUESTION, wrong)\n'
        "print(report)\nreport.passed",
    ),
    (
        "md",
        """When the graded code itself fails, the report says what went wrong and on which line,
instead of crashing the grader. `report.to_dict()` has the same content for otter-grader or a
spreadsheet.""",
    ),
    (
        "code",
        'broken = gradmagic.grade("x = 3.0\\nq = x*y\\nL = q**2", {"x": -16})\n'
        'print(broken)\nbroken.to_dict()["error"]',
    ),
    (
        "md",
        """## Grading a student's code, safely

When the student writes the code, the teacher's numbers are the expected answers. In a hidden
test right after the student's `%%autograd` cell, `gradmagic.last.source` is that cell's code:

```python
### BEGIN HIDDEN TESTS
gradmagic.grade(gradmagic.last.source, {"x": -16, "y": 24, "z": 8, "L.data": 16}).assert_passed()
### END HIDDEN TESTS
```

The code runs in a fresh Python process with a time limit (`timeout=`, 10 s by default) and a
memory limit (`memory=`, 1024 MiB); that process never sees the expected numbers, and the
report is built and judged in the grader's process. In otter-grader the same call goes into a
test file's doctest. `report.outcome` says what happened: here the student cubed instead of
squaring.""",
    ),
    (
        "code",
        'student = "x = 3.0\\ny = -2.0\\nz = 10.0\\nq = x*y + z\\nL = q**3\\nL"\n'
        'cubed = gradmagic.grade(student, {"x": -16, "y": 24, "z": 8, "L.data": 16})\n'
        "print(cubed)\ncubed.outcome",
    ),
    (
        "md",
        """Code that loops forever, exits the process, exhausts memory or interrupts itself gets a
failing report that says why, and the grader goes on to the next submission (here with a
2-second limit). `grade(..., isolate=False)` runs in the grader's own process instead: faster,
but unsafe for untrusted code.""",
    ),
    (
        "code",
        'hostile = ["while True:\\n    pass", "import os\\nos._exit(0)",\n'
        '           "big = bytearray(64 << 30)", "raise KeyboardInterrupt"]\n'
        "for code in hostile:\n"
        "    r = gradmagic.grade(code, answers, timeout=2)\n"
        '    print(f"{r.outcome:8} {r.error.splitlines()[0]}")',
    ),
]

TENSORS = [
    (
        "md",
        """# Tensors: backpropagation on numpy arrays

`%%autograd` also works on numpy code. A float array the cell reads from the notebook, or makes
with `np.array`, `np.zeros`, `rng.normal`..., becomes a `gradmagic.Tensor` leaf named after its
variable; `@`, `.T`, `.sum()`, `np.mean`, `np.exp`, `np.tanh`, indexing and reshaping keep the
graph, one numpy operation per node. After the cell each array has a `.grad` of its own shape.""",
    ),
    ("code", "%load_ext gradmagic\nimport numpy as np\nimport gradmagic"),
    (
        "md",
        """## 1. Linear regression in one cell

Fifty points with two features, and targets from a known line plus noise. These are plain numpy
arrays, made in an ordinary cell:""",
    ),
    (
        "code",
        "rng = np.random.default_rng(0)\nN = 50\nX = rng.normal(size=(N, 2))\n"
        "Y = X @ np.array([[2.0], [-1.0]]) + 0.1 * rng.normal(size=(N, 1))\nX.shape, Y.shape",
    ),
    (
        "md",
        """The model is $P = XW$ and the loss the mean squared error
$L = \\frac1N \\sum_i (P_i - Y_i)^2$. The cell is plain numpy; `X` and `Y` enter as leaves and
`W` is made in the cell. The **Gradients** tab shows each node's shape and gradient, the **Check**
tab compares the gradients with finite differences of the recorded graph.""",
    ),
    ("code", "%%autograd\nW = np.array([[0.5], [-0.3]])\nP = X @ W\nL = np.mean((P - Y) ** 2)"),
    (
        "md",
        """By hand: $\\partial L/\\partial P = \\frac2N (P - Y)$ and, through the matrix product,
$\\partial L/\\partial W = X^\\top \\, \\partial L/\\partial P = \\frac2N X^\\top (P - Y)$.
The names now hold the tensors of the run; their `.data` are the arrays:""",
    ),
    (
        "code",
        "closed_form = 2 / N * X.data.T @ (P.data - Y.data)\n"
        "print(W.grad)\nprint(closed_form)\nnp.allclose(W.grad, closed_form)",
    ),
    (
        "md",
        """Every gradient has the shape of its array: `X.grad` says how the loss would change with
each input feature, `P.grad` with each prediction.""",
    ),
    (
        "code",
        "trace = gradmagic.last\n"
        "for name, g in trace.grads.items():\n"
        "    print(f'{name}: shape {g.shape}, norm {np.linalg.norm(g):.4f}')",
    ),
    (
        "md",
        """## 2. A large leaf

The numerical check runs your code again with elements moved one at a time. For a large array
it moves a seeded random sample of them (8 elements) and all of them at once along a random
direction, and says so in the **Check** tab.""",
    ),
    ("code", "%%autograd\nA = rng.normal(size=(100, 50))\nL = (np.tanh(A) ** 2).mean()"),
    (
        "code",
        "report = gradmagic.last.check()\nprint(report.passed)\nprint(*report.notes, sep='\\n')",
    ),
    (
        "md",
        """## 3. A network on ten classes

Ten blobs in the plane, 30 points each. `gradmagic.nn` has tensor layers (`Linear`, `ReLU`,
`Sequential`) whose parameters are tensors, and `gradmagic.nn.cross_entropy` is the mean
negative log-likelihood of the right class under a softmax.""",
    ),
    (
        "code",
        "import gradmagic.nn as nn\nfrom gradmagic.optim import Adam\n"
        "from gradmagic.nn import cross_entropy\n\n"
        "centres = rng.normal(scale=4.0, size=(10, 2))\ny = np.repeat(np.arange(10), 30)\n"
        "Xb = centres[y] + rng.normal(size=(300, 2))\n"
        "net = nn.Sequential(nn.Linear(2, 32, seed=0), nn.ReLU(), nn.Linear(32, 10, seed=1))\n"
        "net",
    ),
    ("md", "A few Adam steps on the whole batch, in plain Python:"),
    (
        "code",
        "opt = Adam(net.parameters(), lr=0.05)\n"
        "for step in range(41):\n"
        "    logits = net(Xb)\n"
        "    loss = cross_entropy(logits, y)\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    if step % 10 == 0:\n"
        "        accuracy = (logits.data.argmax(axis=1) == y).mean()\n"
        "        print(f'step {step:2d}  loss {loss.item():.3f}  accuracy {accuracy:.0%}')",
    ),
    (
        "md",
        """## One step under the microscope

The next step's forward pass as an `%%autograd` cell: the graph has a handful of nodes, each a
whole array. The parameters are named by their position in the `Sequential` (`0.W`, `2.b`), and
the check samples the larger ones.""",
    ),
    ("code", "%%autograd\nlogits = net(Xb)\nL = cross_entropy(logits, y)"),
    (
        "md",
        """The gradients the cell computed are in the parameters' `.grad`, so the optimizer can take
this very step; the loss goes down.""",
    ),
    (
        "code",
        "for p in net.parameters():\n"
        "    print(f'{p.label:4s} shape {str(p.shape):8s} gradient norm {np.linalg.norm(p.grad):.4f}')\n"
        "before = L.item()\nopt.step()\nafter = cross_entropy(net(Xb), y).item()\n"
        "print(f'loss {before:.4f} -> {after:.4f}')",
    ),
]

TEACHING = [
    (
        "md",
        """# Three ways to read backpropagation

The seed's example, $f(x, y) = 3x^2 + xy + 5y^2$ at $(2, 3)$, written as in the micrograd lecture,
one named node per step. By hand, $\\partial f/\\partial x = 6x + y = 15$ and
$\\partial f/\\partial y = x + 10y = 32$. This notebook reads the same run three ways: forward mode
against reverse mode, the topological walk that orders backward, and the chain rule as a sum over
paths. The widget of an `%%autograd` run has them as tabs; here they are also called one by one.""",
    ),
    ("code", "%load_ext gradmagic\nimport gradmagic\nfrom gradmagic.views import teaching"),
    (
        "code",
        "%%autograd\nx = 2.0\ny = 3.0\na = 3*x**2\nb = x*y\nc = 5*y**2\nd = a + b\nf = d + c\nf",
    ),
    (
        "md",
        """## 1. Forward mode, run for real

Forward mode seeds $dx/dx = 1$ and $dy/dx = 0$ and carries the tangents through the graph, parents
first: each node adds $\\partial\\text{node}/\\partial\\text{parent} \\times$ the parent's tangent.
`trace.jvp` returns every node's tangent, by node index and by name:""",
    ),
    ("code", "t = gradmagic.last.jvp({'x': 1})\nt.by_name"),
    (
        "md",
        """One forward pass gives the derivative with respect to **one** input; reverse mode
(`backward()`) gives every input's gradient in one pass. The view counts both and checks that they
agree on every gradient; `step` stops the pass after that many nodes.""",
    ),
    ("code", "teaching.forward(gradmagic.last, 'x')"),
    ("code", "teaching.forward(gradmagic.last, 'y', step=3)"),
    (
        "md",
        """## 2. The topological walk

Backward must handle a node only after every node computed from it. micrograd's `build_topo`
finds such an order with a depth-first walk from the output: visit a node, walk into its inputs,
then append it. Printed as the seed prints it, `v` after each visit and `t` after each append.
With a `step`, the node being visited is green and the recursion stack blue. `g` is computed by
the cell but `f` does not depend on it: the walk never reaches it.""",
    ),
    (
        "code",
        "%%autograd -q\nx = 2.0\ny = 3.0\na = 3*x**2\nb = x*y\nc = 5*y**2\nd = a + b\n"
        "g = 10*x\nf = d + c\nf",
    ),
    ("code", "teaching.walk_view(gradmagic.last, step=6)"),
    (
        "md",
        """## 3. The chain rule as a sum over paths

$\\partial f/\\partial x$ is the sum, over every path from $x$ to $f$, of the product of the local
derivatives along it: $1 \\cdot 1 \\cdot 3 \\cdot (2x) + 1 \\cdot 1 \\cdot y = 12 + 3 = 15$. The seed
also writes a third term, $5 \\cdot 0$: it is $c = 5y^2$'s share, zero because $y^2$ does not
depend on $x$. No path leads from $x$ into $c$, so the view lists it under the branches that do not
depend on $x$ instead of as a path.""",
    ),
    ("code", "teaching.paths_view(gradmagic.last, 'x')"),
    (
        "md",
        """When a value is reused, paths multiply: each `v = v + v` doubles them. The view counts
them exactly without listing them, shows the largest contributions, and says why reverse mode
never enumerates them.""",
    ),
    ("code", "%%autograd -q\nv = 1.5\nfor _ in range(40):\n    v = v + v\nv"),
    ("code", "teaching.paths_view(gradmagic.last)  # the run's one input"),
]

# The notebooks' formulas are written in TeX above and saved as Unicode text: they then read the
# same in JupyterLab, on GitHub and in the offline HTML of `make demo HEADLESS=1` (which has no
# MathJax, and showed the raw $...$).
_TEX = [
    (r"\frac1N", "(1/N)"),
    (r"\frac2N", "(2/N)"),
    (r"\sum_i", "Σᵢ"),
    (r"^\top", "ᵀ"),
    (r"\partial ", "∂"),
    (r"\partial", "∂"),
    (r"\cdot", "·"),
    (r"\times", "×"),
    (r"\sqrt ", "√"),
    (r"\,", ""),
    ("^2", "²"),
    ("_i", "ᵢ"),
]


def plain_maths(text: str) -> str:
    """``$...$`` formulas as italic Unicode text (``$\\partial f/\\partial x$`` → *∂f/∂x*)."""
    import re

    def one(match):
        tex = match.group(1)
        tex = re.sub(r"\\text\{([^}]*)\}", r"\1", tex)
        for old, new in _TEX:
            tex = tex.replace(old, new)
        if "\\" in tex or "$" in tex:
            raise ValueError(f"no plain form for the formula {match.group(0)!r}")
        return "*" + " ".join(tex.split()) + "*"

    return re.sub(r"\$([^$]+)\$", one, text)


NOTEBOOKS = {
    name: [(kind, plain_maths(text) if kind == "md" else text) for kind, text in cells]
    for name, cells in {
        "01_backprop_tour.ipynb": TOUR,
        "02_training_mlp.ipynb": MLP,
        "03_homework.ipynb": HOMEWORK,
        "04_tensors.ipynb": TENSORS,
        "05_teaching.ipynb": TEACHING,
    }.items()
}

if __name__ == "__main__":
    for name, cells in NOTEBOOKS.items():
        notebook(name, cells)
