"""Hostile cells: plain Python that a lifted number must not break (issue #12, one group per item).

Each entry is ``(item, source)``; tests/test_fidelity.py runs every cell plainly and
under ``%%autograd`` in fresh namespaces and compares what each printed, the
exception it raised (type and message), and the ``repr``, type name and JSON
text of every name it left. Earlier cells of the same group run first (as a
notebook's earlier cells would), plainly in both runs.
"""

CELLS = [
    # 1. integer operations
    (1, "x = 6\nx >>= 1\nprint(x, type(x).__name__)"),
    (1, "n = 5\ny = 3 << n\nz = n.bit_length()\nprint(y, z, n.numerator, n.denominator)"),
    (1, "n = 5\nprint(pow(2, n, 7), pow(n, 2, 3), n ^ 3, n & 6, n | 8, ~n)"),
    (1, "import time\nt = 0.01\ntime.sleep(t)\nprint('slept', t)"),
    (1, "n = 10\nprint(n.to_bytes(2, 'big'), int.from_bytes(b'\\x01\\x00', 'big') + n)"),
    (1, "xs = list(range(10))\nk = 3\nprint(xs[k], xs[k:k + 2], xs[-k], 'ab' * k, [0] * k)"),
    (1, "n = 7\nprint(hex(n), oct(n), bin(n), chr(65 + n), f'{n:08b}', '%x' % n)"),
    (
        1,
        "import math\nn = 12\nprint(math.factorial(n // 3), math.gcd(n, 8), math.comb(n, 2), math.isqrt(n))",
    ),
    (1, "a = 17\nb = 5\nq, r = divmod(a, b)\nprint(q, r, a // b, a % b, -a // b, -a % b)"),
    # 2. types that library code checks
    (
        2,
        "n = 3\nif not isinstance(n, int):\n    raise TypeError('need an int')\nprint(isinstance(n, int), isinstance(2.5, float))",
    ),
    (2, "x = 2.5\nprint(type(x) is float, type(x).__name__, type(3) is int, type(x) == float)"),
    (
        2,
        "def kind(v):\n    match v:\n        case bool():\n            return 'bool'\n        case int():\n            return 'int'\n        case float():\n            return 'float'\n    return 'other'\nprint(kind(3), kind(2.5), kind(True))",
    ),
    (2, "import json\nx = 1.5\nn = 2\nprint(json.dumps({'x': x, 'n': n, 'l': [x, n]}))"),
    (2, "import struct\nx = 0.1\nprint(struct.pack('d', x), struct.pack('i', 7))"),
    (2, "from decimal import Decimal\nn = 3\nprint(Decimal('1.1') + n, Decimal(n) / 4)"),
    (
        2,
        "from datetime import timedelta\nn = 2\nx = 1.5\nprint(timedelta(1) * n, timedelta(hours=x))",
    ),
    (2, "x = 2.5\nprint(x.hex(), x.is_integer(), x.as_integer_ratio(), float.fromhex(x.hex()))"),
    (
        2,
        "import numbers\nx = 2.0\nprint(isinstance(x, numbers.Real), isinstance(x, numbers.Integral))",
    ),
    (
        2,
        "import pickle, copy\nx = 2.5\ny = pickle.loads(pickle.dumps(x))\nz = copy.deepcopy([x])\nprint(y, z, type(y).__name__)",
    ),
    (2, "x = 0.5\nprint(repr(x), str(x), format(x, '.3f'), f'{x!r}', '%.2e' % x, ascii(x))"),
    # 3. other number types
    (3, "x = 2.0\nz = x + 1j\nb = 3.0\nw = -b + 2j\nprint(z, w, type(z).__name__, abs(z))"),
    (
        3,
        "from fractions import Fraction\nn = 2\nr = Fraction(1, 3) + n\nprint(r, type(r).__name__)",
    ),
    (3, "import numpy as np\nx = np.float32(0.1) * 3\nprint(repr(x), x.dtype)"),
    (3, "import numpy as np\nx = 2.0\ny = np.float64(1.5) * x\nprint(repr(y), type(y).__name__)"),
    (3, "x = 2.0\nprint(complex(x), complex(x, 1), x.conjugate(), x.real, x.imag)"),
    (3, "import cmath\nx = -4.0\nprint(cmath.sqrt(x), cmath.phase(x))"),
    (
        3,
        "from fractions import Fraction\nx = 0.75\nprint(Fraction(x), Fraction(x).limit_denominator(3))",
    ),
    # 4. exceptions
    (4, "try:\n    y = 1 / 0.0\nexcept ZeroDivisionError as e:\n    print('caught', e)"),
    (4, "x = 1.0\ny = x % 0"),
    (4, "n = 2\ny = n // 0"),
    (4, "x = 0.0\ny = x ** -1"),
    (4, "x = 10.0\ny = x ** 400"),
    (4, "x = float(10 ** 234)\ny = x ** 2"),
    (4, "x = -8.0\ny = x ** (1 / 3)\nprint(y, type(y).__name__)"),
    (4, "import math\nx = -1.0\ntry:\n    math.log(x)\nexcept ValueError as e:\n    print(e)"),
    (4, "import math\nx = 1000.0\ntry:\n    math.exp(x)\nexcept OverflowError as e:\n    print(e)"),
    (4, "x = 2.0\nxs = [1, 2, 3]\ny = xs[x]"),
    (4, "x = 1e308\ny = x * 10\nprint(y, y - y)"),
    (4, "x = 5\ny = x / 0"),
    (4, "import math\nx = float('nan')\nprint(x == x, math.isnan(x), x != x)"),
    (4, "n = 10\nprint(2 ** -n, (-2) ** n, 0 ** 0, 0.0 ** 0.0)"),
    # 5. mutation through library calls
    (5, "import random\nrandom.seed(1)\nxs = [1.0, 2.0, 3.0, 4.0]\nrandom.shuffle(xs)\nprint(xs)"),
    (
        5,
        "import heapq\nh = [3.0, 1.0]\nheapq.heapify(h)\nheapq.heappush(h, 2.0)\nprint(h, heapq.heappop(h))",
    ),
    (
        5,
        "import bisect\nxs = [1.0, 2.0, 4.0]\nbisect.insort(xs, 3.0)\nprint(xs, bisect.bisect(xs, 2.5))",
    ),
    (5, "import operator\nxs = [1.0, 2.0]\noperator.setitem(xs, 0, 5.0)\nprint(xs)"),
    (5, "xs = [3.0, 1.0, 2.0]\nxs.sort()\nys = sorted([2, 1])\nxs.append(0.5)\nprint(xs, ys)"),
    (5, "d = {}\nd.setdefault('a', []).append(1.5)\nd.update(b=2)\nprint(d)"),
    # 6. arrays
    (6, "import numpy as np\nW = np.ones(3)\nV = W\nW += 1\nprint(V is W, V)"),
    (6, "import numpy as np\nA = np.block([[np.eye(2), np.zeros((2, 1))]])\nprint(A)"),
    (
        6,
        "import numpy as np\nX, Y = np.meshgrid(np.arange(2.0), np.arange(3.0))\nprint(X.shape, Y.sum())",
    ),
    (
        6,
        "import numpy as np\nA = np.array([[2.0, 1.0], [1.0, 3.0]])\nb = np.array([1.0, 2.0])\nprint(np.linalg.solve(A, b), np.linalg.inv(A))",
    ),
    (
        6,
        "import numpy as np\na = np.arange(6.0).reshape(2, 3)\nprint(np.einsum('ij->j', a), np.array2string(a))",
    ),
    (
        6,
        "import numpy as np\na = np.linspace(0.0, 1.0, 5)\nb = a.astype(np.float32)\nprint(b.dtype, b)",
    ),
    (
        6,
        "import numpy as np\na = np.ones(3)\nout = np.empty(3)\nnp.multiply(a, 2.0, out=out)\nprint(out)",
    ),
    (
        6,
        "import numpy as np\nxx = np.array([3.0, 1.0, 2.0])\nprint(range(int(xx.min()), 4), xx.min(), type(xx.min()).__name__)",
    ),
    (6, "import numpy as np\nX = np.arange(4.0)\ns = X.sum()\nprint(repr(s), type(s).__name__)"),
    (
        6,
        "import numpy as np\nT = np.array([3.0, 1.0, 2.0])\nT.sort()\nU = np.zeros(2)\nU.fill(7.0)\nprint(T, U)",
    ),
    (6, "import numpy as np\nT = np.ones(2)\nprint(isinstance(T, np.ndarray), type(T).__name__)"),
    (6, "import numpy as np\nx = 2.0\nA = np.ones(3) * x\nprint(A.dtype, A)"),
    (
        6,
        "import numpy as np\na = np.array([1.0, 0.0])\nwith np.errstate(divide='ignore'):\n    b = 1.0 / a\nprint(b)",
    ),
    (6, "import numpy as np\nx = np.arange(3.0)\nprint(x.tolist(), list(x), x[1], repr(x[1]))"),
    (6, "import numpy as np\nw = np.arange(4.0)\nv = np.sum(w)\nm = w - v / 4\nm -= 1.0\nv"),
    (
        6,
        "import numpy as np\no = np.array([0], dtype='d')\np = np.cos([0.1], o)\nprint(p is o, o)\no.sum()",
    ),
    (
        6,
        "import numpy as np\nx = np.arange(3.0)\nprint(np.atleast_1d(x) is x, np.atleast_2d(x).base is x, np.asarray(x) is x)\nx.sum()",
    ),
    (
        6,
        "import numpy as np\nb = np.array([[1.0, 5.0], [3.0, 2.0]])\nprint(np.max(b, where=[[True, False], [True, True]], initial=-1.0), np.iterable(b.sum()))\nb.max()",
    ),
    (
        6,
        "import numpy as np\na = np.ones((2, 2, 2))\nprint(np.dot(a, np.ones((2, 3))).shape, repr(a.T[0, 0]))\na.sum()",
    ),
    (
        6,
        "import numpy as np\nout = np.zeros((2, 2))\nout.flat = [1.0, 2.0, 3.0, 4.0]\nrow = out[0]\nrow[:] = 9.0\nprint(out)\nout.sum()",
    ),
    (
        6,
        "import numpy as np\nA = np.ones(3)\nB = A.reshape(3, 1)\nB[0, 0] = 5.0\nprint(A, B.base is A)\n(A * 2).sum()",
    ),
    (
        6,
        "import numpy as np\nw = np.array([1.0, 2.0])\nwith np.errstate(all='raise'):\n    try:\n        np.log(w - 3.0)\n    except FloatingPointError as e:\n        print('raised', e)\nw.sum()",
    ),
    # 7. names from earlier cells, read in calls
    (7, "sum(map(lambda t: t * t, [x, x + 1]))"),
    (7, "y = max(x, 0.5) + min([x, 2.0])\nprint(y)"),
    (7, "vals = [v * 2 for v in (x, x + 1)]\nprint(vals, sum(vals))"),
    # 8. silent cuts: plain values must still be exact
    (8, "import numpy as np\nx = 0.5\ny = np.arctan(x) + x\nprint(y)"),
    (8, "import statistics\nx = 0.5\ny = 0.7\nz = statistics.mean([x, y]) * x\nprint(z)"),
    (8, "import math\nx = 0.3\ny = math.atan2(x, 1.0) + math.erf(x)\nprint(y)"),
    # 9. leaks into later plain cells (checked by test_nothing_leaks)
    (9, "def f(v):\n    return v * 2.0 + 1\ny = f(3.0)\nprint(y)"),
    # 10. error text
    (10, "x = 1.5\ny = x <= 'a'"),
    (10, "x = 1.5\nfor c in x:\n    pass"),
    (10, "m = 2.0\nd = {}\ny = d[m]"),
    (10, "n = 3\ny = n + 'a'"),
    (10, "x = 2.5\ny = len(x)"),
    (10, "x = 2.5\ny = x()"),
    (10, "x = 2.5\ny = x.foo"),
    (10, "x = 2.5\ny = [1, 2][x]"),
    # 11. the user's own classes get plain numbers
    (
        11,
        "class Value:\n    def __init__(self, data):\n        self.data = data\n    def __repr__(self):\n        return f'Value(data={self.data})'\n"
        "    def __add__(self, o):\n        return Value(self.data + o.data)\na = Value(2.0)\nb = Value(-3.0)\nc = a + b\nprint(a, c, type(a.data).__name__)",
    ),
    (
        11,
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: float\n    y: float = 0.0\np = P(1.5, 2)\nprint(p, type(p.x) is float)",
    ),
    # 12. identity and integers as data
    (
        12,
        "class Node:\n    def __init__(self, v):\n        self.value = v\n"
        "tree = [Node(10), Node(20), Node(300)]\n"
        "def find(v):\n    for n in tree:\n        if n.value is v:\n            return n\n"
        "x = 10\ny = 300\nprint(find(x) is not None, find(y) is not None, find(20).value, find(5))",
    ),
    (
        12,
        "def perfect(n):\n    return sum(i for i in range(1, n // 2 + 1) if n % i == 0) == n\n"
        "print(perfect(8128), perfect(8127), [k for k in range(2, 500) if perfect(k)])",
    ),
    (
        12,
        "import functools\n@functools.lru_cache\ndef fib(k):\n    return k if k < 2 else fib(k - 1) + fib(k - 2)\n"
        "_seen = [fib(k) for k in range(30)]\n__last__ = fib(29)\nprint(_seen[-3:], __last__, fib.cache_info())",
    ),
    (
        12,
        "import sys\nx = 1.5\nn = 3\nv = [x, n]\n"
        "print(sys.getsizeof(x) == sys.getsizeof(1.5), sys.getsizeof(n), sys.getsizeof(v))",
    ),
    (
        8,
        "import math\nx = 0.5\nz = complex(x, 2.0)\ny = math.exp2(x) + abs(z) + math.fmod(x, 0.3)\n"
        "print(z, y, math.atan2(x, -1.0), math.copysign(x, -0.0), math.cbrt(-x))",
    ),
]
