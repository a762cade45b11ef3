"""The differentiable numpy functions and the inputs HIPS autograd's own test suite checks
(its test_numpy, test_scalar_ops, test_linalg, test_systematic, test_binary_ops, test_fft and
list, tuple and dict tests), written here as families of expressions: one family is one
expression, the grids its inputs and keywords are drawn from, and the range of its numbers.

Each case is a cell ``out = <expression>`` on the inputs ``a``, ``b``, ``c`` ...;
``tests/test_autograd_corpus.py`` differentiates ``sum(out * weights)`` with gradmagic,
with HIPS autograd and by central differences of the plain numpy code.

An input is a shape (an array of uniform numbers in the family's range), ``F`` (a Python
float), ``Z`` or ``("Z", shape)`` (complex), or a tuple, list or dict of inputs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

F = "F"  # a Python float
Z = "Z"  # a Python complex


@dataclass
class Family:
    name: str
    expr: str  # numpy code on the inputs a, b, c ... and the keywords' names
    inputs: list  # one grid of input specs per input
    keywords: dict = field(default_factory=dict)  # keyword → its grid
    lims: tuple | list = (-2.0, 2.0)  # one range, or one per input
    wrt: tuple = ()  # the inputs differentiated (all by default)
    distinct: bool = False  # two inputs of one case never take the same spec
    together: bool = False  # the inputs' grids are read in step (zip), not crossed

    def cases(self):
        names = "abcdefgh"[: len(self.inputs)]
        keys = list(self.keywords)
        grid = zip(*self.inputs) if self.together else itertools.product(*self.inputs)
        for specs in grid:
            if self.distinct and len(set(map(repr, specs))) < len(specs):
                continue
            for values in itertools.product(*(self.keywords[k] for k in keys)):
                yield Case(self, dict(zip(names, specs)), dict(zip(keys, values)))


@dataclass
class Case:
    family: Family
    specs: dict
    keywords: dict

    @property
    def complex(self) -> bool:
        return any(_has_complex(s) for s in self.specs.values())

    def lims(self, i):
        lims = self.family.lims
        return lims[i] if isinstance(lims[0], (list, tuple)) else lims

    @property
    def wrt(self):
        return self.family.wrt or tuple(self.specs)

    def __str__(self):
        shown = ", ".join(f"{k}={v}" for k, v in {**self.specs, **self.keywords}.items())
        return f"{self.family.name}({shown})"


def _has_complex(spec) -> bool:
    if spec == Z:
        return True
    if isinstance(spec, tuple) and spec and spec[0] == Z:
        return True
    if isinstance(spec, dict):
        return any(_has_complex(s) for s in spec.values())
    if isinstance(spec, (list, tuple)) and spec and not isinstance(spec[0], int):
        return any(_has_complex(s) for s in spec)
    return False


# the shapes the unary, binary and statistics checks use
ONE = [F, (2,), (3, 2), (1, 2)]
ONE_COMPLEX = [Z, (Z, (3, 2))]


def _unary(name, lims=(-2.0, 2.0), complex_too=True, expr=None):
    expr = expr or f"np.{name}(a)"
    out = [Family(name, expr, [ONE], lims=lims)]
    if complex_too:
        out.append(Family(name + "_complex", expr, [ONE_COMPLEX], lims=lims))
    return out


def _binary(name, expr, lims=((-2.0, 2.0), (-2.0, 2.0)), complex_too=True, distinct=False):
    out = [Family(name, expr, [ONE, ONE], lims=lims, distinct=distinct)]
    if complex_too:
        mixed = [F, Z, (2,), (Z, (3, 2)), (1, 2)]
        out.append(Family(name + "_complex", expr, [mixed, mixed], lims=lims, distinct=True))
    return out


def _stat(name):
    expr = f"np.{name}(a, axis=axis, keepdims=keepdims)"
    return [
        Family(name + "_number", f"np.{name}(a)", [[F, ()]]),
        Family(
            name,
            expr,
            [[(3,), (2, 3), (1, 3)]],
            {"axis": [None, 0], "keepdims": [True, False]},
        ),
        Family(name + "_rows", expr, [[(2, 3), (1, 3)]], {"axis": [1], "keepdims": [True, False]}),
        Family(name + "_complex", f"np.{name}(a)", [[Z, (Z, (2, 3))]]),
    ]


POS = (0.2, 2.0)
UNARY = (
    _unary("sin")
    + _unary("cos")
    + _unary("tan", (-1.1, 1.1))
    + _unary("abs", (0.1, 4.0))
    + _unary("absolute", (0.1, 4.0))
    + _unary("fabs", complex_too=False)
    + _unary("arccosh", (1.1, 4.0))
    + _unary("arcsinh", (-0.9, 0.9))
    + _unary("arctanh", (-0.9, 0.9))
    + _unary("arcsin", (-0.9, 0.9), complex_too=False)
    + _unary("arccos", (-0.9, 0.9), complex_too=False)
    + _unary("arctan", complex_too=False)
    + _unary("ceil", (-1.5, 1.5), complex_too=False)
    + _unary("floor", (-1.5, 1.5), complex_too=False)
    + _unary("cosh")
    + _unary("sinh")
    + _unary("tanh")
    + _unary("deg2rad", complex_too=False)
    + _unary("radians", complex_too=False)
    + _unary("rad2deg", complex_too=False, expr="np.rad2deg(a) / 50.0")
    + _unary("degrees", complex_too=False, expr="np.degrees(a) / 50.0")
    + _unary("exp")
    + _unary("exp2")
    + _unary("expm1")
    + _unary("log", POS)
    + _unary("log10", POS)
    + _unary("log1p", POS)
    + _unary("log2", POS)
    + _unary("sign", complex_too=False)
    + _unary("sqrt", (1.0, 3.0))
    + _unary("square", complex_too=False)
    + _unary("reciprocal", (0.5, 2.0), complex_too=False)
    + _unary("negative")
    + _unary("sinc", complex_too=False)
    + _unary("real")
    + _unary("real_if_close")
    + _unary("imag")
    + _unary("conj")
    + _unary("conjugate")
    + _unary("angle")
)

BINARY = (
    _binary("add", "np.add(a, b)")
    + _binary("operator_add", "a + b")
    + _binary("operator_sub", "a - b")
    + _binary("operator_mul", "a * b")
    + _binary("operator_div", "a / b", ((-2.0, 2.0), (0.8, 1.2)), complex_too=False)
    + _binary("operator_pow", "a ** b", ((1.1, 2.5), (-1.5, 1.5)), complex_too=False)
    + _binary("operator_mod", "a % b", ((-2.0, 2.0), (0.3, 2.0)), False, distinct=True)
    + _binary("logaddexp", "np.logaddexp(a, b)", complex_too=False)
    + _binary("logaddexp2", "np.logaddexp2(a, b)", complex_too=False)
    + _binary("true_divide", "np.true_divide(a, b)", ((-2.0, 2.0), (0.8, 1.2)), False)
    + _binary("true_divide_negative", "np.true_divide(a, b)", ((-2, 2), (-2.0, -0.3)), False)
    + _binary("remainder", "np.remainder(a, b)", ((-0.9, 0.9), (0.7, 1.9)), False, True)
    + _binary("mod", "np.mod(a, b)", ((-2.0, 2.0), (0.8, 2.1)), False, distinct=True)
    + _binary("mod_negative", "np.mod(a, b)", ((-2.0, 2.0), (-2.0, -0.3)), False, True)
    + _binary("arctan2", "np.arctan2(a, b)", complex_too=False)
    + _binary("hypot", "np.hypot(a, b)", complex_too=False)
    + _binary("power", "np.power(a, b)", ((1.1, 2.5), (-1.5, 1.5)), complex_too=False)
)

STATS = [f for name in ("sum", "mean", "max", "min", "prod", "var", "std") for f in _stat(name)]

PAIRS = [(1,), (1, 4), (3, 4)]
SHAPES = [
    Family(
        "transpose", "np.transpose(a, axes)", [[(2, 3, 4)]], {"axes": [None, (0, 1, 2), (2, 0, 1)]}
    ),
    Family("moveaxis", "np.moveaxis(a, s, d)", [[(2, 3, 4)]], {"s": [0, 1, 2], "d": [0, 1, 2]}),
    Family(
        "repeat",
        "np.repeat(a, r, axis=axis)",
        [[(2, 3, 4), (3, 1)]],
        {"r": [0, 1, 2], "axis": [None, 0, 1]},
    ),
    Family(
        "diff", "np.diff(a, n=n, axis=axis)", [[(5, 5), (5, 5, 5)]], {"n": [1, 2], "axis": [0, 1]}
    ),
    Family("diff_short", "np.diff(a, axis=axis)", [[(3, 1), (1, 1)]], {"axis": [0, 1]}),
    Family(
        "gradient", "np.gradient(a, axis=axis)", [[(5, 5), (5, 5, 5)]], {"axis": [None, 0, 1, -1]}
    ),
    Family(
        "gradient_axes", "np.gradient(a, axis=axis)", [[(5, 5, 5)]], {"axis": [(0, 1), (0, -1)]}
    ),
    Family("tile", "np.tile(a, reps)", [[(1, 2)]], {"reps": [(1, 2), (2, 3), (3, 2, 1)]}),
    Family("tile_flat", "np.tile(a, reps)", [[(1,)]], {"reps": [(2,), 2]}),
    Family("kron", "np.kron(a, b)", [[(5,), (5, 5), (5, 4, 3)], [(3,), (3, 3), (2, 3, 4)]]),
    Family("inner", "np.inner(a, b)", [[F, (3,), (2, 3)], [F, (3,), (4, 3)]]),
    Family("dot_numbers", "np.dot(a, b)", [[F, (3,), (2, 3), (2, 3, 4)], [F, ()]]),
    Family(
        "dot",
        "np.dot(a, b)",
        [
            [(3,), (2, 3), (2, 3), (2, 3, 4), (3,), (2, 3, 4)],
            [(3,), (3,), (3, 4), (4,), (2, 3, 2), (2, 4, 3)],
        ],
        together=True,
    ),
    Family("outer", "np.outer(a, b)", [[(3,)], [(3,), (2, 2)]]),
    Family("matmul", "np.matmul(a, b)", [[(3,), (2, 3), (2, 2, 3)], [(3,), (3, 4), (2, 3, 4)]]),
    Family("matmul_broadcast", "a @ b", [[(1, 2, 2)], [(3, 2, 1)]]),
    Family(
        "tensordot",
        "np.tensordot(a, b, axes=n)",
        [[(1, 3), (2, 3, 2), (2, 2)], [(3,), (2, 2, 4), (2, 2, 4)]],
        {"n": [0, 1]},
        together=True,
    ),
    Family("tensordot_two", "np.tensordot(a, b, axes=2)", [[(2, 3, 4)], [(3, 4), (3, 4, 2)]]),
    Family("tensordot_pairs", "np.tensordot(a, b, axes=([-1], [0]))", [[(2, 6)], [(6, 3)]]),
    Family("tensordot_number", "np.tensordot(a, b, axes=0)", [[(4,)], [()]]),
    Family("maximum", "np.maximum(a, b)", [PAIRS, PAIRS], distinct=True),
    Family("minimum", "np.minimum(a, b)", [PAIRS, PAIRS], distinct=True),
    Family("fmax", "np.fmax(a, b)", [PAIRS, PAIRS], distinct=True),
    Family("fmin", "np.fmin(a, b)", [PAIRS, PAIRS], distinct=True),
    Family("sort", "np.sort(a)", [[(1,), (7,)]]),
    Family("partition", "np.partition(a, k)", [[(7,), (14,)]], {"k": [0, 3, 6]}),
    Family("atleast_1d", "np.atleast_1d(a)", [[F, (1,), (7,), (2, 4)]]),
    Family("atleast_2d", "np.atleast_2d(a)", [[F, (1,), (7,), (2, 4, 5)]]),
    Family("atleast_3d", "np.atleast_3d(a)", [[F, (1,), (2, 4), (2, 4, 3, 5)]]),
    Family("trace", "np.trace(a, offset=k)", [[(5, 5), (4, 5), (3, 4, 5)]], {"k": [-1, 0, 1]}),
    Family("diag", "np.diag(a, k=k)", [[(5, 5), (5,)]], {"k": [-1, 0, 1]}),
    Family("tril", "np.tril(a, k=k)", [[(5, 5), (5, 5, 4)]], {"k": [-1, 0, 1]}),
    Family("triu", "np.triu(a, k=k)", [[(5, 5), (5, 5, 4)]], {"k": [-1, 0, 1]}),
    Family("swapaxes", "np.swapaxes(a, i, j)", [[(3, 4, 5)]], {"i": [0, 1, 2], "j": [0, 1, 2]}),
    Family(
        "rollaxis", "np.rollaxis(a, i, start=s)", [[(2, 3, 4)]], {"i": [0, 1, 2], "s": [0, 1, 2]}
    ),
    Family(
        "cross",
        "np.cross(a, b, axisa=i, axisb=j, axisc=k)",
        [[(2, 3, 3)], [(2, 3, 3)]],
        {"i": [-1, 1], "j": [-1, 1], "k": [-1, 0, 1]},
    ),
    Family("cross_axis", "np.cross(a, b, axis=k)", [[(3, 3, 3)], [(3, 3, 3)]], {"k": [0, -1, 1]}),
    Family(
        "cross_plane",
        "np.cross(a, b)",
        [[(4, 2), (4, 3), (4, 2)], [(2,), (3,), (4, 3)]],
        together=True,
    ),
    Family("pad", "np.pad(a, w, mode='constant')", [[(2,), (3, 2)]], {"w": [1, (1, 2)]}),
    Family("clip", "np.clip(a, lo, 0.8)", [[(3, 4)]], {"lo": [-0.5, None]}),
    Family("where", "np.where(a > 0, a * b, b ** 2)", [[(3, 4)], [(4,), (3, 4)]]),
    Family(
        "select",
        "np.select([a > 0.5, a < -0.5], [a * 2.0, b], default=d)",
        [[(3, 4)], [(3, 4), (4,)]],
        {"d": [0.0, -1.0]},
    ),
    Family("cumsum", "np.cumsum(a, axis=axis)", [[(3, 4), (2, 3, 2)]], {"axis": [None, 0, 1]}),
    Family("cumprod", "np.cumprod(a, axis=axis)", [[(3, 4)]], {"axis": [None, 0, 1]}),
    Family("flip_roll", "np.flip(a, axis=k) * np.roll(a, 2, axis=k)", [[(3, 4)]], {"k": [0, 1]}),
    Family("reshape", "np.reshape(a, s) * 2.0", [[(2, 3)]], {"s": [(6,), (3, 2), (-1, 1)]}),
    Family("squeeze_expand", "np.expand_dims(np.squeeze(a), k)", [[(3, 1, 2)]], {"k": [0, 1]}),
    Family("broadcast_to", "np.broadcast_to(a, (2, 3, 4))", [[(3, 1), (4,)]]),
    Family("linspace", "np.linspace(a, b, num=n)", [[F], [F]], {"n": [0, 1, 5]}),
    Family("append", "np.append(a, b, axis=k)", [[(2, 3)], [(1, 3)]], {"k": [None, 0]}),
    Family("append_lists", "np.append(a, b)", [[[F, F]], [[F]]]),
    Family("array_of_a_float", "np.array(a) * np.asarray(a)", [[F]]),
    Family(
        "split",
        "np.concatenate([p.ravel() ** 2 for p in np.split(a, s, axis=k)])",
        [[(4, 8)]],
        {"s": [4, [1, 2]], "k": [0, 1]},
    ),
    Family(
        "array_split",
        "np.concatenate([p.ravel() ** 2 for p in np.array_split(a, s, axis=k)])",
        [[(7, 7)]],
        {"s": [4, [3, 5]], "k": [0, 1]},
    ),
    Family("hsplit_vsplit", "np.hsplit(a, 2)[1].sum() * np.vsplit(a, 2)[0]", [[(4, 4), (4, 4, 4)]]),
    Family("dsplit", "np.dsplit(a, s)[0] ** 2", [[(4, 4, 4)]], {"s": [2, [1, 2]]}),
]

EINSUM = [
    Family("einsum_transpose", "np.einsum('ij->ji', a)", [[(1, 1), (4, 4), (3, 4)]]),
    Family("einsum_matmul", "np.einsum('ij,jk->ik', a, b)", [[(2, 3)], [(3, 4)]]),
    Family("einsum_matmul_complex", "np.einsum('ij,jk->ik', a, b)", [[(Z, (2, 3))], [(3, 4)]]),
    Family(
        "einsum_ellipsis_matmul",
        "np.einsum('...ij,...jk->...ik', a, b)",
        [[(2, 3), (2, 2, 3)], [(3, 4), (2, 3, 4)]],
    ),
    Family(
        "einsum_ellipsis_empty", "np.einsum('...ij,...jk->...ik', a, b)", [[(0, 2, 3)], [(0, 3, 4)]]
    ),
    Family("einsum_covsum", "np.einsum('ijk,lji->lki', a, b)", [[(3, 4, 4)], [(4, 4, 3)]]),
    Family(
        "einsum_ellipsis_head",
        "np.einsum('...jk,...lj->...lk', a, b)",
        [[(2, 2), (2, 2, 2)], [(2, 2), (2, 2, 2)]],
    ),
    Family(
        "einsum_ellipsis_tail",
        "np.einsum('jk...,lj...->lk...', a, b)",
        [[(3, 2), (3, 2, 4)], [(2, 3), (2, 3, 4)]],
    ),
    Family(
        "einsum_ellipsis_center",
        "np.einsum('j...k,lj...->lk...', a, b)",
        [[(2, 2), (2, 2, 2)], [(2, 2), (2, 2, 2)]],
    ),
    Family(
        "einsum_three",
        "np.einsum('ijk,lji,lli->lki', a, b, c)",
        [[(3, 4, 4)], [(4, 4, 3)], [(4, 4, 3)]],
    ),
    Family("einsum_sublists_transpose", "np.einsum(a, [0, 1], [1, 0])", [[(1, 1), (4, 4), (3, 4)]]),
    Family(
        "einsum_sublists_matmul", "np.einsum(a, [0, 1], b, [1, 2], [0, 2])", [[(2, 3)], [(3, 4)]]
    ),
    Family(
        "einsum_sublists_ellipsis",
        "np.einsum(a, [Ellipsis, 0, 1], b, [Ellipsis, 1, 2], [Ellipsis, 0, 2])",
        [[(2, 3), (2, 2, 3)], [(3, 4), (2, 3, 4)]],
    ),
    Family(
        "einsum_sublists_three",
        "np.einsum(a, [0, 1, 2], b, [3, 1, 0], c, [3, 3, 0], [3, 2, 0])",
        [[(3, 4, 4)], [(4, 4, 3)], [(4, 4, 3)]],
    ),
    Family("einsum_full_sum", "np.einsum('k,nk->', a, b)", [[(5,)], [(10, 5)]]),
    Family("einsum_partial_sum", "np.einsum('abcd->bd', a)", [[(3, 2, 3, 2)]]),
    Family("einsum_ellipsis_sum", "np.einsum('...k,...nk->...', a, b)", [[(3, 5)], [(3, 10, 5)]]),
    Family("einsum_implicit", "np.einsum('ij,k', a, b)", [[(3, 4)], [(3,)]]),
]

STACKS = [
    Family(
        "concatenate_tuple",
        "np.concatenate(a, axis=k)",
        [[((2, 2), (2, 2)), ((2, 2, 2), (2, 2, 2))]],
        {"k": [0, 1]},
    ),
    Family("concatenate_list", "np.concatenate(a, axis=0)", [[[(1,), (3,)]]]),
    Family("vstack", "np.vstack(a)", [[(2,), ((2,), (2,)), (2, 3), ((2, 4), (1, 4)), (2, 3, 4)]]),
    Family("hstack", "np.hstack(a)", [[(2,), ((2,), (2,)), (3, 2), ((3, 4), (3, 5)), (2, 3, 4)]]),
    Family("stack", "np.stack(a, axis=k)", [[((2,),), ((2,), (2,))]], {"k": [0, 1]}),
    Family("column_stack", "np.column_stack(a)", [[(2,), ((2,), (2,)), (2, 2), ((2, 2), (2, 2))]]),
    Family("dstack", "np.dstack(a)", [[((2, 3), (2, 3))]]),
]

LINALG = [
    Family("inv", "np.linalg.inv(a + 4.0 * np.eye(3))", [[(3, 3), (2, 3, 3)]]),
    Family("det", "np.linalg.det(a)", [[(3, 3), (2, 3, 3)]]),
    Family(
        "slogdet",
        "np.linalg.slogdet(a @ np.swapaxes(a, -1, -2) + np.eye(3))[1]",
        [[(3, 3), (2, 3, 3)]],
    ),
    Family("solve", "np.linalg.solve(a + 4.0 * np.eye(3), b)", [[(3, 3)], [(3,), (3, 2)]]),
    Family("cholesky", "np.linalg.cholesky(a @ a.T + 3.0 * np.eye(3))", [[(3, 3)]]),
    Family("eigh", "np.linalg.eigh(a @ np.swapaxes(a, -1, -2))[0]", [[(3, 3), (2, 3, 3)]]),
    Family(
        "eigh_vectors",
        "np.abs(np.linalg.eigh(a @ a.T + np.diag([0.0, 2.0, 4.0]))[1])",
        [[(3, 3)]],
    ),
    Family("eigh_triangle", "np.linalg.eigh(a, u)[0]", [[(3, 3), (2, 3, 3)]], {"u": ["L", "U"]}),
    Family(
        "eigh_triangle_vectors", "np.linalg.eigh(a, u)[1]", [[(4, 4), (2, 3, 3)]], {"u": ["L", "U"]}
    ),
    Family("eigvalsh_triangle", "np.linalg.eigvalsh(a, UPLO=u)", [[(3, 3)]], {"u": ["L", "U"]}),
    Family("svd_values", "np.linalg.svd(a, compute_uv=False)", [[(3, 2), (2, 3), (2, 3, 2)]]),
    Family("svd_thin", "np.abs(np.linalg.svd(a, full_matrices=False)[0])", [[(3, 2), (3, 3)]]),
    Family("pinv", "np.linalg.pinv(a)", [[(3, 2), (2, 3)]]),
    Family("norm", "np.linalg.norm(a)", [[(3,), (3, 4), (2, 3, 4)]]),
    Family(
        "norm_vector", "np.linalg.norm(a, ord=o)", [[(6,)]], {"o": [None, 1, 2, 3, np.inf, -np.inf]}
    ),
    Family(
        "norm_axis", "np.linalg.norm(a, axis=k)", [[(3, 4, 5)]], {"k": [0, 1, 2, (0, 1), (1, 2)]}
    ),
    Family("norm_matrix", "np.linalg.norm(a, ord=o)", [[(3, 4)]], {"o": ["fro", 1, -1, "nuc", 2]}),
    Family(
        "norm_nuclear_axes",
        "np.linalg.norm(a, ord='nuc', axis=k)",
        [[(3, 4, 2)]],
        {"k": [(0, 1), (2, 0)]},
    ),
    Family("matrix_power", "np.linalg.matrix_power(a, n)", [[(3, 3)]], {"n": [0, 2, 3, -2]}),
    Family("norm_complex", "np.linalg.norm(a)", [[(Z, (3, 4))]]),
    Family("svd_complex", "np.linalg.svd(a, compute_uv=False)", [[(Z, (3, 2))]]),
]

CONTAINERS = [
    Family("list_sum", "a[0] * a[1] + np.sum(a[2])", [[[F, F, (3,)]]]),
    Family("list_element_renamed", "np.sin(a[1]) * a[0]", [[[F, F]]]),
    Family("list_slice", "np.sum(np.array(a[1:])) * a[0]", [[[F, F, F]]]),
    Family("nested_list", "a[0][0] * a[1] + a[2]", [[[[F], F, F]]]),
    Family("tuple_sum", "a[0] * np.sum(a[1]) + a[2][0]", [[(F, (3,), (F,))]]),
    Family("tuple_of_arrays", "np.vstack(a) ** 2", [[((2, 3), (1, 3))]]),
    Family(
        "dict_values", "a['x'] * np.sum(a['y']) + a['z'][1]", [[{"x": F, "y": (3,), "z": [F, F]}]]
    ),
    Family(
        "dict_of_arrays", "np.dot(a['w'], a['v']) + a['b']", [[{"w": (2, 3), "v": (3,), "b": (2,)}]]
    ),
    Family("list_and_number", "np.sum(a) * b", [[[F, F, F]], [F]]),
    Family("complex_in_list", "np.abs(a[0]) * a[1]", [[[Z, F]]]),
]

MORE_LINALG = [
    Family(
        "eig",
        "np.abs(np.linalg.eig(a)[0])[..., None, :] * np.abs(np.linalg.eig(a)[1])",
        [[(4, 4), (2, 4, 4)]],
    ),
    Family("eig_complex", "np.linalg.eig(a)[0] + np.abs(np.linalg.eig(a)[1])", [[(Z, (4, 4))]]),
    Family("eigvals", "np.abs(np.linalg.eigvals(a))", [[(4, 4), (Z, (3, 3))]]),
    Family(
        "eigh_complex",
        "np.linalg.eigh(a, u)[0] + np.abs(np.linalg.eigh(a, u)[1])",
        [[(Z, (4, 4))]],
        {"u": ["L", "U"]},
    ),
    Family(
        "svd_complex_vectors",
        "np.abs(np.linalg.svd(a, full_matrices=False)[k])",
        [[(Z, (3, 2)), (Z, (2, 3)), (Z, (3, 3)), (Z, (2, 3, 2))]],
        {"k": [0, 2]},
    ),
    Family(
        "cholesky_stack",
        "np.linalg.cholesky(a @ np.swapaxes(a, -1, -2) + 3.0 * np.eye(3))",
        [[(2, 3, 3)]],
    ),
    Family("pinv_stack", "np.linalg.pinv(a)", [[(2, 5, 3), (5, 2), (2, 3, 5)]]),
    Family(
        "norm_complex_axes",
        "np.linalg.norm(a, ord=o, axis=k)",
        [[(Z, (3, 4, 2))]],
        {"o": [None, "nuc"], "k": [(0, 1)]},
    ),
]


def _fft(name, shapes, keywords=None, complex_in=False):
    grid = [(Z, s) for s in shapes] if complex_in else shapes
    kw = ", ".join(f"{k}={k}" for k in keywords or {})
    call = f"np.fft.{name}(a{', ' + kw if kw else ''})"
    return Family(f"fft_{name}", call, [grid], keywords or {})


FFT = [
    _fft("fft", [(5, 5)], {"n": [None, 3, 7], "axis": [-1, 0], "norm": [None, "ortho"]}),
    _fft("ifft", [(5, 5)], {"n": [None, 3, 7], "norm": [None, "forward"]}),
    _fft("fft", [(4, 3)], {"n": [None, 5]}, complex_in=True),
    _fft("rfft", [(4, 4), (5,)], {"n": [None, 3, 6], "axis": [-1, 0], "norm": [None, "ortho"]}),
    _fft("irfft", [(4, 3)], {"n": [None, 3, 6], "axis": [-1, 0], "norm": [None, "ortho"]}, True),
    _fft("fft2", [(5, 5), (3, 5, 5)], {"s": [None, (3, 7)]}),
    _fft("ifft2", [(5, 5)], {"s": [None, (3, 7)], "axes": [(-2, -1), (1, 0)]}),
    _fft("fftn", [(5, 5), (3, 4, 5)], {"s": [None, (3, 7)], "axes": [(0, 1), (1, 0)]}),
    _fft("ifftn", [(3, 4, 5)], {"axes": [None, (0, 2)]}),
    _fft("rfft2", [(4, 4), (4, 4, 4)], {"s": [None, (3, 6)]}),
    _fft("irfft2", [(4, 3), (4, 4, 3)], {"s": [None, (3, 6)]}, complex_in=True),
    _fft("rfftn", [(4, 4, 4)], {"axes": [None, (0, 1), (2, 0)]}),
    _fft("irfftn", [(4, 4, 3)], {"s": [None, (4, 5, 4)], "axes": [(0, 1, 2)]}, complex_in=True),
    _fft("fftshift", [(5, 5), (4, 4)], {"axes": [None, 1, (1, 0)]}),
    _fft("ifftshift", [(5, 5), (4, 4)], {"axes": [None, 0]}),
    Family("rfftn_picked", "np.fft.rfftn(a)[(0, 1, 0), (3, 2, 2)]", [[(4, 4, 4)]]),
    Family("irfftn_picked", "np.fft.irfftn(a)[(0, 1, 0), (3, 3, 2)]", [[(Z, (4, 4, 3))]]),
]

# test_numpy's own functions: indexing, np.r_ and np.c_, ties, arrays built of numbers
NUMPY_TESTS = [
    Family("index_ints", "a[3, 0, 1] * a[1, 2, 0]", [[(5, 6, 4)]]),
    Family("index_slices", "a[::-1, 2:4, :]", [[(5, 6, 4)]]),
    Family("index_lists", "a[[0, 1, 2], :, :]", [[(5, 6, 4)]]),
    Family("index_mixed", "a[3, 2:, [1, 3]]", [[(5, 6, 4)]]),
    Family("index_twice", "np.sum(a[[0, 1, 0]]) * np.sum(a[[0, 0]])", [[(3,)]]),
    Family("index_dot", "np.dot(a[:2], a[2:])", [[(4,)]]),
    Family("r_", "np.r_[a, b, a]", [[(3, 2)], [(3, 2)]], wrt=("a",)),
    Family("r_one", "np.r_[a] * np.r_[a, a][:3]", [[(3, 2)]]),
    Family("r_range", "np.r_[a, b, 1:10]", [[(10,)], [(10,)]], wrt=("a",)),
    Family("c_", "np.c_[a, b, a]", [[(3, 2), (3,)], [(3, 2), (3,)]], together=True),
    Family("r_numbers", "np.r_[a, 2.0, b] @ np.r_[b, a, a] * np.c_[a, b]", [[F], [F]]),
    Family("r_directive", "np.r_[d, a, b]", [[(3,)], [(3,)]], {"d": ["0,2", "1,2,0", "-1"]}),
    Family(
        "var_ddof",
        "np.var(a, axis=k, keepdims=kd, ddof=d) + np.std(a, axis=k, keepdims=kd, ddof=d)",
        [[(3,), (3, 4), (1, 3)]],
        {"k": [None], "kd": [True, False], "d": [0, 1]},
    ),
    Family(
        "var_ddof_rows",
        "np.var(a, axis=k, keepdims=kd, ddof=2) * np.std(a, axis=k, keepdims=kd, ddof=2)",
        [[(3, 4), (1, 3)]],
        {"k": [None, 1], "kd": [True, False]},
    ),
    Family(
        "max_ties", "np.max(np.array([[a, a], [a, 0.5]]), axis=1) + np.max(np.array([a, a]))", [[F]]
    ),
    Family(
        "min_ties",
        "np.min(np.array([[a, a, a], [a, 0.5, 0.5], [0.5, 0.5, 0.5], [a, a, 0.5]]), axis=0)",
        [[F]],
    ),
    Family(
        "maximum_ties",
        "np.maximum(np.array([a, a, 0.5]), np.array([[a, 0.5, a], [a, a, 0.5]])) + np.maximum(a, a)",
        [[F]],
    ),
    Family("array_of_numbers", "np.array([[a, a * 1.0, a + 2.5], [a**2, a, a / 2.0]])", [[F]]),
    Family("array_of_arrays", "np.array([a, a * 2.0, b])", [[(3, 2)], [(3, 2)]]),
    Family("sum_axes", "np.sum(a, axis=(1, 2)) + sum([a, a])[:, 0, 0]", [[(3, 4, 2)]]),
    Family("flips", "np.flipud(a) + np.fliplr(a) * np.rot90(a) + np.roll(a, 3)", [[(4, 4)]]),
    Family("methods", "a.reshape((2, 6)).ravel() * a.flatten() + a.T.ravel()", [[(3, 4)]]),
    Family("diagonal", "np.diagonal(a, offset=k, axis1=1, axis2=2)", [[(2, 3, 4)]], {"k": [0, 1]}),
    Family(
        "nan_to_num", "np.nan_to_num(a) * np.diagonal(np.diag(a, k), k)", [[(4,)]], {"k": [-1, 0]}
    ),
]

FAMILIES = (
    UNARY
    + BINARY
    + STATS
    + SHAPES
    + EINSUM
    + STACKS
    + LINALG
    + MORE_LINALG
    + FFT
    + NUMPY_TESTS
    + CONTAINERS
)


def all_cases():
    return [case for family in FAMILIES for case in family.cases()]
