"""Gradients of stateful cells against central differences of the plain code.

Each case is a plain set-up cell (the data and objects), then cells run in turn: a
magic cell's gradients are compared, input by input (names and paths such as
``w[0]`` or ``weights[('a', 'b')]``), with central differences of the same cell run
plainly from a copy of the state it started from; a plain cell in between changes the
state, as a training loop does. The state each cell leaves is compared with the plain
run's too.
"""

import ast
import copy
import math

import pytest

import gradmagic
from fidelity_corpus import deep_state

pytestmark = pytest.mark.usefixtures("ip")

DIJKSTRA = (
    """import heapq
weights = {('a', 'b'): 1.5, ('b', 'c'): 2.0, ('a', 'c'): 4.25, ('c', 'd'): 0.5,
           ('b', 'd'): 3.0}
graph = {}
for (u, v), w in weights.items():
    graph.setdefault(u, []).append((v, w))
""",
    [
        """dist = {'a': 0.0}
heap = [(0.0, 'a')]
done = set()
while heap:
    d, u = heapq.heappop(heap)
    if u in done:
        continue
    done.add(u)
    for v, w in graph.get(u, []):
        nd = d + weights[(u, v)]
        if v not in dist or nd < dist[v]:
            dist[v] = nd
            heapq.heappush(heap, (nd, v))
dist['d'] * 2.0"""
    ],
)

ACCOUNT = (
    """class Account:
    def __init__(self, balance):
        self.balance = balance
        self.history = []
    def grow(self, rate, years):
        for _ in range(years):
            self.balance = self.balance * (1 + rate)
            self.history.append(self.balance)
        return self.balance
acct = Account(100.0)
rate = 0.05
""",
    ["acct.grow(rate, 3)", "acct.balance = acct.balance - 10.0", "acct.grow(rate, 2) / 10.0"],
)

MLP = (
    """import random
random.seed(3)
params = {'W': [[random.uniform(-1, 1) for _ in range(2)] for _ in range(3)],
          'b': [0.1, -0.2, 0.05], 'v': [0.5, -0.5, 0.25]}
data = [([1.0, 2.0], 0.5), ([-1.0, 0.5], -0.25)]
""",
    [
        """def forward(x):
    h = [max(0.0, sum(w * xi for w, xi in zip(row, x)) + b)
         for row, b in zip(params['W'], params['b'])]
    return sum(v * hi for v, hi in zip(params['v'], h))
loss = sum((forward(x) - y) ** 2 for x, y in data)
loss""",
        """for row in params['W']:
    for j in range(len(row)):
        row[j] = row[j] - 0.01 * row[j]""",
        """loss = sum((forward(x) - y) ** 2 for x, y in data)
loss""",
    ],
)

DETERMINANT = (
    """A = [[2.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 4.0]]
""",
    [
        """def det(m):
    m = [row[:] for row in m]
    n, d = len(m), 1.0
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(m[r][i]))
        if p != i:
            m[i], m[p] = m[p], m[i]
            d = -d
        d = d * m[i][i]
        for r in range(i + 1, n):
            f = m[r][i] / m[i][i]
            for c in range(i, n):
                m[r][c] = m[r][c] - f * m[i][c]
    return d
det(A)"""
    ],
)

GRID_DP = (
    """cost = {(i, j): 1.0 + 0.5 * ((i * 3 + j * 7) % 5) for i in range(3) for j in range(3)}
""",
    [
        """best = {}
for i in range(3):
    for j in range(3):
        options = [best[(i - 1, j)]] if i else []
        options += [best[(i, j - 1)]] if j else []
        best[(i, j)] = cost[(i, j)] + (min(options) if options else 0.0)
best[(2, 2)]"""
    ],
)

CIRCLE = (
    """import math
shapes = [{'kind': 'circle', 'r': 1.5}, {'kind': 'circle', 'r': 0.25}]
""",
    ["sum(math.pi * s['r'] ** 2 for s in shapes)"],
)

PROJECTION = (
    """point = [1.0, 2.0, 3.0]
camera = {'f': 2.0, 'shift': [0.5, -0.5]}
""",
    [
        """x, y, z = point
u = camera['f'] * x / z + camera['shift'][0]
v = camera['f'] * y / z + camera['shift'][1]
u * u + v * v"""
    ],
)

CASES = {
    "dijkstra": DIJKSTRA,
    "account": ACCOUNT,
    "mlp": MLP,
    "determinant": DETERMINANT,
    "grid_dp": GRID_DP,
    "circle": CIRCLE,
    "projection": PROJECTION,
}


_SHELL = frozenset({"In", "Out", "exit", "quit", "get_ipython"})


def _user_state(ns, baseline):
    """The names of ``ns`` not in ``baseline`` (or bound to something else there)."""
    return {
        k: v
        for k, v in ns.items()
        if not k.startswith("_") and (k not in baseline or v is not baseline[k])
    }


def _copy(state):
    """A deep copy of the data in ``state`` (modules and functions shared)."""
    memo = {id(v): v for v in state.values() if isinstance(v, type(math)) or callable(v)}
    return {k: copy.deepcopy(v, memo) for k, v in state.items()}


def _assign(target, value, ns):
    """``<target> = value`` in ``ns``; a tuple on the way is rebuilt with the new item."""
    if isinstance(target, ast.Name):
        ns[target.id] = value
        return
    owner = eval(compile(ast.Expression(target.value), "<path>", "eval"), ns)
    if isinstance(target, ast.Attribute):
        setattr(owner, target.attr, value)
        return
    key = eval(compile(ast.Expression(target.slice), "<path>", "eval"), ns)
    if isinstance(owner, tuple):
        _assign(target.value, owner[:key] + (value,) + owner[key + 1 :], ns)
    else:
        owner[key] = value


def _plain_value(setup_state, cell, path, value):
    """The cell's value run plainly from a copy of ``setup_state`` with ``path`` set."""
    ns = _copy(setup_state)
    ns["__builtins__"] = __builtins__
    _assign(ast.parse(path, mode="eval").body, value, ns)
    body, _, last = cell.rstrip().rpartition("\n")
    exec(compile(body, "<plain>", "exec"), ns)
    return float(eval(compile(last, "<plain>", "eval"), ns))


@pytest.mark.parametrize("case", list(CASES))
def test_stateful_cells_have_the_plain_codes_gradients_and_state(ip, case):
    setup, cells = CASES[case]
    baseline = dict(ip.user_ns)
    plain_ns = {"__builtins__": __builtins__, "__name__": "__main__"}
    exec(setup, plain_ns)
    assert ip.run_cell(setup).success
    checked = 0
    for k, cell in enumerate(cells):
        before = _copy(
            {k: v for k, v in ip.user_ns.items() if not k.startswith("_") and k not in _SHELL}
        )
        magic = k % 2 == 0
        result = ip.run_cell(f"%%autograd -q\n{cell}" if magic else cell)
        assert result.success, result.error_in_exec
        body, _, last = cell.rstrip().rpartition("\n")
        if magic and body:
            exec(compile(body, "<plain>", "exec"), plain_ns)
            plain_value = eval(compile(last, "<plain>", "eval"), plain_ns)
        elif magic:
            plain_value = eval(compile(last, "<plain>", "eval"), plain_ns)
        else:
            exec(compile(cell, "<plain>", "exec"), plain_ns)
        state = _user_state(ip.user_ns, baseline)
        for name, v in _user_state(plain_ns, {}).items():
            if name in state and not callable(v) and not isinstance(v, type(math)):
                magic_v = state[name]
                if type(magic_v).__module__ == "numpy" or not hasattr(magic_v, "grad"):
                    assert deep_state(magic_v) == deep_state(v), name
        if not magic:
            continue
        trace = gradmagic.last
        assert trace is not None and trace.value == pytest.approx(plain_value, rel=1e-12)
        for node in trace.leaves:
            if node.is_constant or node.label not in trace.grads:
                continue
            path = node.label
            try:
                x = eval(path, dict(before))
            except Exception:
                continue  # a name local to the cell: its number is the cell's own
            if type(x) is not float:
                continue
            h = 1e-6 * max(1.0, abs(x))
            numeric = (
                _plain_value(before, cell, path, x + h) - _plain_value(before, cell, path, x - h)
            ) / (2 * h)
            assert trace.grads[path] == pytest.approx(numeric, rel=1e-4, abs=1e-6), path
            checked += 1
        # the check, which runs the cell again, agrees and leaves every value as it was
        kept = _digests(ip.user_ns, baseline)
        report = trace.check()
        assert report.oracle == "code" and report.passed, (report.verdict, report.notes)
        assert _digests(ip.user_ns, baseline) == kept
    assert checked >= 1, "no input of the data was differentiated"


def _digests(ns, baseline) -> dict:
    return {
        name: deep_state(v)
        for name, v in _user_state(ns, baseline).items()
        if not callable(v) and not isinstance(v, type(math))
    }
