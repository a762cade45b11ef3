"""Cells of plain Python that must compute the same under ``%%autograd``.

Each entry is ``(name, source)``. tests/test_magic.py runs every cell twice,
once with plain ``exec`` and once through the magic, and compares what each
printed and the numbers, strings and bools each left in its namespace.
"""

CELLS = [
    (
        "arithmetic",
        """
a = 7
b = 2
q, r = a // b, a % b
t = a / b
p = a ** b
n = -a // b
m = -7 % 3
f = 2 ** -1
g = 10 ** 20
h = 0.1 + 0.2
print(q, r, t, p, n, m, f, g, h)
""",
    ),
    (
        "negative and float literals",
        """
x = -2.5
y = +3
z = 1e-3 * -4
w = 1_000_000 // 7
print(x, y, z, w, -x, abs(x))
""",
    ),
    (
        "divmod and rounding",
        """
d = divmod(17, 5)
e = divmod(-7.5, 2)
r1 = round(2.675, 2)
r2 = round(2.5)
r3 = round(3.14159, 3)
r4 = round(1234.5, -2)
print(d, e, r1, r2, r3, r4, isinstance(r2, int))
""",
    ),
    (
        "integer contexts",
        """
xs = [10, 20, 30, 40, 50]
first = xs[0]
last = xs[-1]
middle = xs[1:4]
step = xs[::2]
k = 2
picked = xs[k] + xs[k + 1]
rep = "ab" * 3
rep2 = 2 * "-"
count = 3
line = "=" * count
zeros = [0.0] * count
d = {1: "one", 2.5: "two and a half"}
print(first, last, middle, step, picked, rep, rep2, line, zeros, d[1], d[2.5])
""",
    ),
    (
        "range and enumerate",
        """
n = 5
total = 0
for i in range(n):
    total += i * i
pairs = [(i, c) for i, c in enumerate("abc", 1)]
back = list(range(n - 1, -1, -2))
print(total, pairs, back, len(range(2, 11, 3)))
""",
    ),
    (
        "string formatting",
        """
x = 3.14159
n = 42
s1 = f"{x:.2f} {n:05d} {x!r} {n:x}"
s2 = "{:>8.3f}|{:<5d}|".format(x, n)
s3 = "%d items at %.1f%%" % (n, x)
s4 = "%s and %r" % (x, n)
width = 7
s5 = f"[{x:{width}.2f}]"
print(s1, s2, s3, s4, s5, sep="\\n")
""",
    ),
    (
        "printing containers",
        """
xs = [1.5, 2, -3.25]
t = (1, 2.0)
d = {"a": 1.0, "b": [2, 3]}
print(xs, t, d, {4, 5})
print(repr(xs), str(t), str(1.0), repr(2))
print(*xs, sep=", ")
""",
    ),
    (
        "bools stay bools",
        """
a = 3 > 2
b = 2.0 == 2
c = True + 1
d = not 0
e = 1 < 2 < 3
f = isinstance(2.0, float) and isinstance(3, int)
g = [1, 0, 2].count(0)
print(a, b, c, d, e, f, g, type(a).__name__, type(c).__name__)
""",
    ),
    (
        "functions and lambdas",
        """
def square(x):
    return x * x

def poly(x, a=2.0, b=-1.0):
    return a * x ** 2 + b * x + 1

cube = lambda x: x * x * x
s = square(3.0)
p = poly(2.0)
p2 = poly(1.5, b=3)
c = cube(2)
print(s, p, p2, c)
""",
    ),
    (
        "closures and nonlocal",
        """
def counter(start):
    value = start
    def step(by=1):
        nonlocal value
        value += by
        return value
    return step

tick = counter(10)
tick()
tick(2.5)
now = tick()
print(now)
""",
    ),
    (
        "recursion",
        """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)

f10 = fib(10)
f5 = fact(5)
print(f10, f5)
""",
    ),
    (
        "while loop",
        """
x = 100.0
steps = 0
while x > 1:
    x = x / 3
    steps += 1
print(x, steps)
""",
    ),
    (
        "gradient descent by hand",
        """
w = 5.0
lr = 0.1
for _ in range(20):
    grad = 2 * (w - 3)
    w = w - lr * grad
print(round(w, 6), w)
""",
    ),
    (
        "comprehensions",
        """
squares = [x ** 2 for x in range(6)]
evens = {x for x in range(10) if x % 2 == 0}
table = {x: x / 2 for x in range(4)}
gen = sum(x * 0.5 for x in range(5))
nested = [[i * j for j in range(3)] for i in range(3)]
print(squares, sorted(evens), table, gen, nested)
""",
    ),
    (
        "math module",
        """
import math
a = math.exp(1.0)
b = math.log(10.0)
c = math.log(8, 2)
d = math.sqrt(2)
e = math.sin(0.5) + math.cos(0.5) + math.tan(0.25)
f = math.tanh(0.3)
g = math.pow(2, 10)
h = math.fabs(-3)
print(a, b, c, d, e, f, g, h)
""",
    ),
    (
        "more math",
        """
import math
a = math.log2(8)
b = math.log10(1000)
c = math.log1p(1e-10)
d = math.expm1(1e-10)
e = math.hypot(3, 4)
f = math.sinh(1.0) + math.cosh(1.0)
g = math.degrees(math.pi) + math.radians(180)
h = math.fsum([0.1] * 10)
print(a, b, c, d, e, f, g, h)
""",
    ),
    (
        "math without gradients",
        """
import math
a = math.atan(1.0)
b = math.floor(2.7) + math.ceil(2.1) + math.trunc(-2.5)
c = math.factorial(6)
d = math.comb(5, 2)
e = math.gcd(12, 18)
f = math.isclose(0.1 + 0.2, 0.3)
g = math.isfinite(1e308 * 10)
h = math.erf(0.5)
print(a, b, c, d, e, f, g, h)
""",
    ),
    (
        "from math import",
        """
from math import exp, log, sqrt as root, pi
a = exp(2)
b = log(a)
c = root(16)
area = pi * 2.0 ** 2
print(a, b, c, area)
""",
    ),
    (
        "builtins on numbers",
        """
xs = [3, -1.5, 2, 7.25]
print(sum(xs), min(xs), max(xs), abs(-4), pow(2, 5), pow(2, 10, 7), sorted(xs))
m = max(0.0, -2.0)
r = min(1, 2.5)
f = float(3)
i = int(7.9)
print(m, r, f, i, float("1.5"), int("12"), bool(0.0))
""",
    ),
    (
        "statistics by hand",
        """
data = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
n = len(data)
mean = sum(data) / n
var = sum((x - mean) ** 2 for x in data) / n
std = var ** 0.5
print(mean, var, std)
""",
    ),
    (
        "zip and dot product",
        """
w = [0.5, -1.0, 2.0]
x = [1.0, 2.0, 3.0]
dot = sum(wi * xi for wi, xi in zip(w, x))
b = 0.25
out = dot + b
act = out if out > 0 else 0.0
print(dot, out, act)
""",
    ),
    (
        "tuple unpacking and swap",
        """
a, b = 1.5, 2.5
a, b = b, a
first, *rest = [1, 2, 3, 4]
(c, d), e = (3, 4), 5
x = y = 7.0
print(a, b, first, rest, c, d, e, x, y)
""",
    ),
    (
        "augmented assignment",
        """
s = 1
s += 2
s *= 3.5
s -= 0.5
s /= 2
s **= 2
n = 17
n //= 3
n %= 4
xs = [1, 2]
xs += [3]
xs[0] += 10
print(s, n, xs)
""",
    ),
    (
        "bitwise on ints",
        """
a = 6 & 3
b = 6 | 3
c = 6 ^ 3
d = 1 << 4
e = 256 >> 2
f = ~5
n = 3
g = 1 << n
print(a, b, c, d, e, f, g)
""",
    ),
    (
        "classes",
        """
class Account:
    rate = 0.05

    def __init__(self, balance=100.0):
        self.balance = balance

    def grow(self, years=1):
        for _ in range(years):
            self.balance = self.balance * (1 + self.rate)
        return self.balance

acct = Account(200.0)
final = acct.grow(3)
print(round(final, 4), acct.balance)
""",
    ),
    (
        "dict of parameters",
        """
config = {"lr": 0.1, "steps": 3, "name": "sgd"}
theta = 1.0
for step in range(config["steps"]):
    theta -= config["lr"] * theta
summary = f"{config['name']}: {theta:.4f} after {config['steps']} steps"
print(summary, theta)
""",
    ),
    (
        "sorting with keys",
        """
scores = {"a": 3.5, "b": 1.25, "c": 2.0}
ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
best = max(scores, key=scores.get)
low = min(scores.values())
print(ranked, best, low)
""",
    ),
    (
        "try and except",
        """
def parse(text):
    try:
        return float(text)
    except ValueError:
        return -1.0

a = parse("2.5")
b = parse("oops")
try:
    [1, 2, 3][10]
except IndexError as e:
    msg = str(e)
print(a, b, msg)
""",
    ),
    (
        "generators",
        """
def countdown(n):
    while n > 0:
        yield n
        n -= 1

values = list(countdown(4))
halves = [v / 2 for v in countdown(3)]
print(values, halves, next(countdown(2)))
""",
    ),
    (
        "match statement",
        """
def describe(x):
    match x:
        case 0:
            return "zero"
        case 1 | 2:
            return "small"
        case [a, b]:
            return f"pair {a + b}"
        case _:
            return "other"

kinds = [describe(v) for v in (0, 2, [1.5, 2], 9)]
print(kinds)
""",
    ),
    (
        "walrus",
        """
data = [1.0, 4.0, 9.0, 16.0]
roots = [r for x in data if (r := x ** 0.5) > 1.5]
if (n := len(data)) > 3:
    big = n * 2
print(roots, big, r)
""",
    ),
    (
        "random with a seed",
        """
import random
random.seed(0)
a = random.random()
b = random.uniform(-1, 1)
c = random.randint(1, 6)
d = random.choice([10, 20, 30])
e = random.gauss(0, 1)
print(a, b, c, d, e)
""",
    ),
    (
        "matrix as lists",
        """
A = [[1.0, 2.0], [3.0, 4.0]]
B = [[0.5, -1.0], [2.0, 0.0]]
C = [[sum(A[i][k] * B[k][j] for k in range(2)) for j in range(2)] for i in range(2)]
trace = C[0][0] + C[1][1]
print(C, trace)
""",
    ),
    (
        "numpy on scalars",
        """
import numpy as np
a = np.exp(1.0)
b = np.tanh(0.5) + np.sqrt(4.0)
c = np.log1p(0.5)
d = np.maximum(-1.0, 0.0)
e = np.float64(2.5) * 2
print(a, b, c, d, e)
""",
    ),
    (
        "numpy arrays",
        """
import numpy as np
v = np.array([1.0, 2.0, 3.0])
u = v * 2 + 1
s = u.sum()
m = np.mean(u)
z = np.zeros(3)
r = np.arange(4)
l = np.linspace(0, 1, 5)
print(u, s, m, z, r, l, r[2], v.shape)
""",
    ),
    (
        "numpy with ints",
        """
import numpy as np
n = 3
eye = np.eye(n)
col = np.ones((n, 1))
idx = np.array([2, 0])
picked = np.arange(10)[idx]
print(eye.sum(), col.shape, picked, eye[1, 1])
""",
    ),
    (
        "strings and numbers",
        """
s = "gradient"
part = s[2:5]
caps = s.upper().center(12, "*")
n = s.count("a")
pieces = "a,b,c,d".split(",", 2)
padded = str(7).zfill(3)
print(part, caps, n, pieces, padded, len(s) * 2)
""",
    ),
    (
        "big ints",
        """
big = 2 ** 100
mod = big % 97
digits = len(str(big))
half = big // 2
print(big, mod, digits, half > 10 ** 29)
""",
    ),
    (
        "chained comparisons and conditionals",
        """
x = 0.7
label = "low" if x < 0.3 else "mid" if x < 0.8 else "high"
inside = 0 <= x <= 1
sign = (x > 0) - (x < 0)
print(label, inside, sign)
""",
    ),
    (
        "global in function",
        """
calls = 0
def bump(by):
    global calls
    calls += by
    return calls

bump(1)
bump(2.5)
print(calls)
""",
    ),
    (
        "sigmoid neuron by hand",
        """
import math
x1, x2 = 2.0, 0.0
w1, w2 = -3.0, 1.0
b = 6.8813735870195432
n = x1 * w1 + x2 * w2 + b
o = math.tanh(n)
s = 1 / (1 + math.exp(-n))
print(o, s)
""",
    ),
    (
        "softmax of a list",
        """
import math
logits = [2.0, 1.0, 0.1]
exps = [math.exp(z) for z in logits]
total = sum(exps)
probs = [e / total for e in exps]
loss = -math.log(probs[0])
print([round(p, 4) for p in probs], loss)
""",
    ),
    (
        "mean squared error",
        """
ys = [1.0, -1.0, -1.0, 1.0]
preds = [0.8, -0.7, -1.2, 0.9]
loss = sum((yp - yt) ** 2 for yp, yt in zip(preds, ys)) / len(ys)
worst = max(abs(yp - yt) for yp, yt in zip(preds, ys))
print(loss, worst)
""",
    ),
]


# The 20-step tanh recurrence of issue #14 (its layout once took 46 s in dot): the browser test
# draws it and the view-budget test times its display.
RECURRENCE = """%%autograd --max-nodes 300
w1, w2, b, c = 0.5, -0.3, 0.1, 0.7
h = 0.0
s = 0.0
for t in range(20):
    x = 0.1 * t
    h = (w1*h + w2*x + b).tanh()
    s = s + h*c
s"""


# micrograd's Neuron, Layer and MLP written in a cell, and a 3-15-15-1 model of them: the
# big graph of the browser tests and of benchmarks/bench_groups.py
MICROGRAD_MLP = """class Neuron:
    def __init__(self, nin):
        self.w = [random.uniform(-1, 1) for _ in range(nin)]
        self.b = 0.0
    def __call__(self, x):
        return math.tanh(sum((wi * xi for wi, xi in zip(self.w, x)), self.b))
class Layer:
    def __init__(self, nin, nout):
        self.neurons = [Neuron(nin) for _ in range(nout)]
    def __call__(self, x):
        return [n(x) for n in self.neurons]
class MLP:
    def __init__(self, nin, nouts):
        sz = [nin] + nouts
        self.layers = [Layer(sz[i], sz[i + 1]) for i in range(len(nouts))]
    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x[0]
model = MLP(3, [15, 15, 1])
"""

# a Gram matrix filled element by element, as students write it (X: (n, 3) floats, ell the
# length scale): the element-writes tests check it, bench_magic times it
GRAM = """
K = np.zeros((n, n))
for i in range(n):
    for j in range(n):
        d = X[i] - X[j]
        K[i, j] = np.exp(-np.dot(d, d) / (2 * ell**2))
L = np.linalg.slogdet(K + 1e-3 * np.eye(n))[1]
L
"""
