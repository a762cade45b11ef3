"""numpy functions on array nodes: every rule against central differences of plain numpy,
against PyTorch float64, and its replay with a leading perturbation axis.

Each case is plain numpy code. Run on plain arrays it is the reference (value and
central differences); run on array leaves while a cell is recorded it must give
numpy's own numbers, take a rule (no cut), and a gradient equal to the reference's.
"""

from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

from gradmagic.core.array import array_leaf, numpy_with_nodes
from gradmagic.core.engine import state
from gradmagic.core.tensor_ops import TENSOR_OPS


@contextmanager
def recording():
    """Array nodes record as in an %%autograd cell; the cuts they report are collected."""
    cuts = []
    before = state.recording, state.cut
    state.recording = True
    state.cut = lambda message, *rest: cuts.append(message)
    try:
        yield cuts
    finally:
        state.recording, state.cut = before


def _sym(a):
    return a @ a.T + a.shape[-1] * np.eye(a.shape[-1])


def _signless(usv):
    """U and Vh up to each singular pair's sign (which svd is free to choose), and S."""
    u, s, vh = usv
    return (
        np.sum(u * u[:1] * np.arange(1, u.shape[0] + 1)[:, None], axis=0)
        + np.sum(vh * vh[:, :1] * np.arange(1, vh.shape[1] + 1), axis=1) * s
    )


def _signless_torch(usv):
    import torch

    u, s, vh = usv
    return (u * u[:1] * torch.arange(1, u.shape[0] + 1)[:, None]).sum(0) + (
        vh * vh[:, :1] * torch.arange(1, vh.shape[1] + 1)
    ).sum(1) * s


class Case:
    """One numpy expression: ``ours`` on numpy arrays, ``theirs`` on torch tensors."""

    def __init__(self, name, ours, shapes, theirs=None, domain=(-2.0, 2.0), seed=0):
        self.name, self.ours, self.shapes, self.theirs = name, ours, shapes, theirs
        self.domain, self.seed = domain, seed

    def inputs(self, seed=None):
        rng = np.random.default_rng(self.seed if seed is None else seed)
        lo, hi = self.domain
        return [rng.uniform(lo, hi, s) for s in self.shapes]


def T(name):
    """torch's function ``name`` (a dotted path in torch)."""

    def f(*xs, **kw):
        import torch

        g = torch
        for part in name.split("."):
            g = getattr(g, part)
        return g(*xs, **kw)

    return f


COMPLEX_INSIDE = ("eig", "eigvals", "fft", "fft2")  # cases whose graph holds complex numbers
POS = (0.3, 2.0)
UNIT = (-0.9, 0.9)
CASES = [
    # elementwise, one input
    Case("tan", np.tan, [(3, 4)], T("tan"), UNIT),
    Case("arcsin", np.arcsin, [(3, 4)], T("asin"), UNIT),
    Case("arccos", np.arccos, [(3, 4)], T("acos"), UNIT),
    Case("sinh", np.sinh, [(3, 4)], T("sinh")),
    Case("cosh", np.cosh, [(3, 4)], T("cosh")),
    Case("arcsinh", np.arcsinh, [(3, 4)], T("asinh")),
    Case("arccosh", np.arccosh, [(3, 4)], T("acosh"), (1.2, 3.0)),
    Case("arctanh", np.arctanh, [(3, 4)], T("atanh"), UNIT),
    Case("log2", np.log2, [(3, 4)], T("log2"), POS),
    Case("log10", np.log10, [(3, 4)], T("log10"), POS),
    Case("log1p", np.log1p, [(3, 4)], T("log1p"), UNIT),
    Case("expm1", np.expm1, [(3, 4)], T("expm1")),
    Case("exp2", np.exp2, [(3, 4)], T("exp2")),
    Case("square", np.square, [(3, 4)], T("square")),
    Case("reciprocal", np.reciprocal, [(3, 4)], T("reciprocal"), POS),
    Case("cbrt", np.cbrt, [(3, 4)], lambda x: x.sign() * x.abs() ** (1 / 3), POS),
    Case(
        "sinc",
        lambda a: np.sinc(a * np.array([1.0, 0.0, 1.0, 1.0])),
        [(3, 4)],
        lambda a: T("sinc")(a * T("tensor")([1.0, 0.0, 1.0, 1.0])),
    ),
    Case("deg2rad", np.deg2rad, [(3, 4)], T("deg2rad")),
    Case("radians", np.radians, [(3, 4)], T("deg2rad")),
    Case("rad2deg", np.rad2deg, [(3, 4)], T("rad2deg")),
    Case("nan_to_num", lambda a: np.nan_to_num(np.where(a > 0, a, np.nan), nan=0.5), [(3, 4)]),
    # the complex parts of real numbers (complex inputs: tests/test_autograd_corpus.py)
    Case("conj", np.conj, [(3, 4)], T("conj")),
    Case("real", np.real, [(3, 4)], T("real")),
    Case("imag", lambda a: np.imag(a) + a, [(3, 4)], lambda a: a),
    Case("angle", np.angle, [(3, 4)], T("angle"), POS),
    # elementwise, two inputs
    Case("arctan2", np.arctan2, [(3, 4), (4,)], T("atan2")),
    Case("hypot", np.hypot, [(3, 4), (3, 1)], T("hypot")),
    Case("logaddexp", np.logaddexp, [(3, 4), (3, 4)], T("logaddexp")),
    Case("logaddexp2", np.logaddexp2, [(3, 4), ()], T("logaddexp2")),
    Case("fmax", np.fmax, [(3, 4), (3, 4)], T("fmax")),
    Case("fmin", np.fmin, [(3, 4), (4,)], T("fmin")),
    Case("copysign", np.copysign, [(3, 4), (3, 4)], T("copysign")),
    Case(
        "clip_arrays",
        lambda a, lo: np.clip(a, lo, 1.0),
        [(3, 4), (4,)],
        lambda a, lo: T("minimum")(T("maximum")(a, lo), T("tensor")(1.0)),
    ),
    # reductions
    Case("prod", np.prod, [(3, 4)], T("prod"), POS),
    Case("prod_axis", lambda a: np.prod(a, axis=1), [(3, 4)], lambda a: a.prod(dim=1)),
    Case("prod_axes_keepdims", lambda a: np.prod(a, axis=(0, 2), keepdims=True), [(2, 3, 2)]),
    Case(
        "prod_with_zero",
        lambda a: np.prod(a * np.array([1.0, 0.0, 1.0]), axis=-1),
        [(2, 3)],
        lambda a: (a * T("tensor")([1.0, 0.0, 1.0])).prod(dim=-1),
    ),
    Case("cumprod", lambda a: np.cumprod(a, axis=1), [(3, 4)], lambda a: a.cumprod(dim=1)),
    Case("cumprod_flat", np.cumprod, [(2, 3)], lambda a: a.reshape(-1).cumprod(0)),
    Case("cumprod_zero", lambda a: np.cumprod(a * np.array([1.0, 0.0, 1.0, 1.0])), [(4,)]),
    Case(
        "var_std",
        lambda a: np.var(a, axis=0) + np.std(a, ddof=1),
        [(3, 4)],
        lambda a: a.var(dim=0, correction=0) + a.std(correction=1),
    ),
    Case(
        "max_min_ties",
        lambda a: np.max(np.round(a), axis=0) + np.min(a, axis=1).sum(),
        [(3, 4)],
        lambda a: a.round().amax(dim=0) + a.amin(dim=1).sum(),
        (-1.0, 1.0),
    ),
    Case("median_odd", lambda a: np.median(a, axis=0), [(5, 3)], lambda a: a.median(dim=0).values),
    Case("median_even", np.median, [(2, 3)]),
    Case("diff", lambda a: np.diff(a, axis=0), [(4, 3)], lambda a: a.diff(dim=0)),
    Case("diff_twice_prepend", lambda a: np.diff(a, n=2, prepend=0.5), [(3, 4)]),
    Case(
        "gradient",
        lambda a: np.gradient(a, 0.5, axis=1),
        [(3, 4)],
        lambda a: T("gradient")(a, spacing=0.5, dim=1, edge_order=1)[0],
    ),
    Case("gradient_all_axes", lambda a: np.gradient(a)[0] * np.gradient(a)[1], [(3, 4)]),
    Case("trace_ptp", lambda a: np.trace(a) + np.ptp(a, axis=1), [(3, 3)]),
    Case("average", lambda a, w: np.average(a, axis=0, weights=w), [(3, 4), (3, 4)], None, POS),
    Case("cumsum", lambda a: np.cumsum(a, axis=0), [(3, 4)], lambda a: a.cumsum(dim=0)),
    # moving elements around
    Case("flip", lambda a: np.flip(a, axis=1), [(3, 4)], lambda a: a.flip(1)),
    Case("flip_all_lr_ud", lambda a: np.flip(a) + np.fliplr(a) * np.flipud(a), [(3, 4)]),
    Case("roll", lambda a: np.roll(a, 2, axis=1), [(3, 4)], lambda a: a.roll(2, 1)),
    Case(
        "roll_flat",
        lambda a: np.roll(a, -5),
        [(3, 4)],
        lambda a: a.reshape(-1).roll(-5).reshape(3, 4),
    ),
    Case("tile", lambda a: np.tile(a, (2, 1, 3)), [(3, 4)], lambda a: a.tile((2, 1, 3))),
    Case(
        "repeat",
        lambda a: np.repeat(a, 3, axis=0),
        [(3, 4)],
        lambda a: a.repeat_interleave(3, dim=0),
    ),
    Case("repeat_counts", lambda a: np.repeat(a, [1, 0, 2]), [(3,)]),
    Case("rot90", lambda a: np.rot90(a, 3), [(3, 4)], lambda a: a.rot90(3, (0, 1))),
    Case("moveaxis", lambda a: np.moveaxis(a, 0, -1), [(2, 3, 4)], lambda a: a.movedim(0, -1)),
    Case("swapaxes", lambda a: np.swapaxes(a, 0, 2), [(2, 3, 4)], lambda a: a.swapaxes(0, 2)),
    Case(
        "broadcast_to",
        lambda a: np.broadcast_to(a, (2, 3, 4)),
        [(3, 1)],
        lambda a: a.broadcast_to((2, 3, 4)),
    ),
    Case(
        "squeeze_expand",
        lambda a: np.expand_dims(np.squeeze(a), 0),
        [(3, 1, 4)],
        lambda a: a.squeeze().unsqueeze(0),
    ),
    Case("tril", lambda a: np.tril(a, -1), [(4, 4)], lambda a: a.tril(-1)),
    Case("triu", lambda a: np.triu(a, 1), [(3, 4)], lambda a: a.triu(1)),
    Case("diag_of_matrix", lambda a: np.diag(a), [(3, 4)], lambda a: a.diag()),
    Case("diag_of_vector", lambda a: np.diag(a, 1), [(3,)], lambda a: a.diag(1)),
    Case("diagonal", lambda a: np.diagonal(a, 1, 1, 2), [(2, 3, 4)], lambda a: a.diagonal(1, 1, 2)),
    Case(
        "pad",
        lambda a: np.pad(a, ((1, 2), (0, 1))),
        [(3, 4)],
        lambda a: T("nn.functional.pad")(a, (0, 1, 1, 2)),
    ),
    Case(
        "pad_reflect",
        lambda a: np.pad(a, 2, mode="reflect"),
        [(3, 4)],
        lambda a: T("nn.functional.pad")(a[None], (2, 2, 2, 2), mode="reflect")[0],
    ),
    Case(
        "pad_edge_wrap", lambda a: np.pad(a, 1, mode="edge") + np.pad(a, 1, mode="wrap"), [(3, 4)]
    ),
    Case("sort", lambda a: np.sort(a, axis=0), [(3, 4)], lambda a: a.sort(dim=0).values),
    Case(
        "sort_flat",
        lambda a: np.sort(a, axis=None),
        [(3, 4)],
        lambda a: a.reshape(-1).sort().values,
    ),
    Case(
        "partition",
        lambda a: np.partition(a, 2)[..., 2],
        [(3, 5)],
        lambda a: a.sort(dim=-1).values[..., 2],
    ),
    Case(
        "concatenate",
        lambda a, b: np.concatenate([a, b, a], axis=1),
        [(3, 4), (3, 2)],
        lambda a, b: T("cat")([a, b, a], dim=1),
    ),
    Case("concatenate_flat", lambda a, b: np.concatenate((a, b), axis=None), [(3, 4), (2,)]),
    Case(
        "stack",
        lambda a, b: np.stack([a, b], axis=-1),
        [(3, 4), (3, 4)],
        lambda a, b: T("stack")([a, b], dim=-1),
    ),
    Case("hstack_vstack", lambda a, b: np.hstack([a, b]).sum() + np.vstack([a, b]), [(4,), (4,)]),
    Case(
        "stacks_of_one_array",
        lambda a: (
            np.concatenate(
                [np.vstack(a).ravel(), np.hstack(a).ravel() ** 2, np.concatenate(a, 1).ravel() ** 3]
            )
            * np.stack(a, 1).sum()
        ),
        [(2, 3, 1)],
    ),
    Case("column_stack", lambda a, b: np.column_stack([a, b]), [(3,), (3, 2)]),
    Case("column_stack_of_one_array", np.column_stack, [(3, 2)]),
    Case("append_flat", lambda a, b: np.append(a, b), [(2, 2), (3,)]),
    Case("append_axis", lambda a, b: np.append(a, b, axis=0), [(2, 3), (1, 3)]),
    Case(
        "select",
        lambda a, b: np.select([a > 0.5, a < -0.5], [a * b, b], default=a**2),
        [(3, 4), (4,)],
    ),
    Case(
        "split", lambda a: np.split(a, [1, 3], axis=1)[1].sum() * np.array_split(a, 2)[0], [(3, 4)]
    ),
    Case(
        "hsplit_vsplit_dsplit",
        lambda a: (
            np.hsplit(a, 2)[1].sum() * np.vsplit(a, [1])[0]
            + np.dsplit(a[..., None] * np.ones(2), 2)[0][..., 0]
        ),
        [(2, 4)],
    ),
    Case(
        "rollaxis",
        lambda a: np.rollaxis(a, 2) * 2.0 + np.rollaxis(a, 0, 3).sum(),
        [(2, 3, 4)],
        lambda a: a.permute(2, 0, 1) * 2.0 + a.permute(1, 2, 0).sum(),
    ),
    Case("real", lambda a: np.real(a) * np.real_if_close(a), [(3,)], lambda a: a * a),
    # numbers spread into arrays
    Case(
        "linspace",
        lambda a: np.linspace(a[0], a[1], 5),
        [(2,)],
        lambda a: a[0] + (a[1] - a[0]) * T("arange")(5) / 4,
    ),
    # np.full has no numpy dispatch: the runtime calls it so
    Case("full", lambda a: numpy_with_nodes(np.full)((2, 3), a[1]), [(2,)]),
    # products
    Case("cross", np.cross, [(2, 3), (3,)], lambda a, b: T("linalg.cross")(a, b.expand(2, 3))),
    Case(
        "cross_axis",
        lambda a, b: np.cross(a, b, axis=0),
        [(3, 4), (3, 4)],
        lambda a, b: T("linalg.cross")(a, b, dim=0),
    ),
    Case("cross_axes", lambda a, b: np.cross(a, b, axisa=0, axisb=1, axisc=0), [(3, 2), (2, 3)]),
    Case(
        "einsum_ellipsis",
        lambda a, b: np.einsum("...ij,...jk->...ik", a, b),
        [(2, 3, 4), (4, 2)],
        lambda a, b: T("einsum")("...ij,...jk->...ik", a, b),
    ),
    Case(
        "einsum_ellipsis_broadcast",
        lambda a, b: np.einsum("...ij,...jk", a, b),
        [(2, 1, 3, 4), (5, 4, 2)],
    ),
    Case("einsum_ellipsis_middle", lambda a: np.einsum("i...i->...", a), [(3, 2, 3)]),
    Case("einsum_sublists", lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), [(3, 4), (4, 2)]),
    Case("einsum_sublist_ellipsis", lambda a: np.einsum(a, [Ellipsis, 0, 0]), [(2, 3, 3)]),
    Case(
        "einsum_matmul",
        lambda a, b: np.einsum("ij,jk->ik", a, b),
        [(3, 4), (4, 2)],
        lambda a, b: T("einsum")("ij,jk->ik", a, b),
    ),
    Case(
        "einsum_implicit",
        lambda a, b: np.einsum("ij,ij", a, b),
        [(3, 4), (3, 4)],
        lambda a, b: T("einsum")("ij,ij", a, b),
    ),
    Case(
        "einsum_trace_outer",
        lambda a, b: np.einsum("ii,j->j", a, b),
        [(3, 3), (4,)],
        lambda a, b: T("einsum")("ii,j->j", a, b),
    ),
    Case(
        "einsum_sum_inside",
        lambda a, b: np.einsum("ijk,k->i", a, b),
        [(2, 3, 4), (4,)],
        lambda a, b: T("einsum")("ijk,k->i", a, b),
    ),
    Case(
        "einsum_three",
        lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c),
        [(2, 3), (3, 4), (4, 2)],
        lambda a, b, c: T("einsum")("ij,jk,kl->il", a, b, c),
    ),
    Case(
        "einsum_one", lambda a: np.einsum("ij->j", a), [(3, 4)], lambda a: T("einsum")("ij->j", a)
    ),
    Case("inner", np.inner, [(2, 4), (3, 4)], T("inner")),
    Case("outer", np.outer, [(3,), (2, 2)], lambda a, b: T("outer")(a, b.reshape(-1))),
    Case("vdot", np.vdot, [(2, 3), (2, 3)], lambda a, b: (a * b).sum()),
    Case(
        "tensordot",
        lambda a, b: np.tensordot(a, b, axes=([0, 2], [2, 0])),
        [(2, 3, 4), (4, 5, 2)],
        lambda a, b: T("tensordot")(a, b, dims=([0, 2], [2, 0])),
    ),
    Case(
        "tensordot_int",
        lambda a, b: np.tensordot(a, b, 1),
        [(2, 3), (3, 4)],
        lambda a, b: T("tensordot")(a, b, dims=1),
    ),
    Case("kron", np.kron, [(2, 3), (2, 2)], T("kron")),
    Case("dot_nd", np.dot, [(2, 3, 4), (4, 2)], lambda a, b: a @ b),
    Case("dot_number_and_3d", np.dot, [(), (2, 3, 4)], lambda a, b: a * b),
    # linear algebra
    Case("inv", np.linalg.inv, [(3, 3)], T("linalg.inv"), seed=4),
    Case("det", np.linalg.det, [(3, 3)], T("linalg.det")),
    Case("det_stack", np.linalg.det, [(2, 3, 3)], T("linalg.det")),
    Case(
        "det_singular",
        lambda a: np.linalg.det(a * np.array([1.0, 1.0, 0.0])),
        [(3, 3)],
        lambda a: T("linalg.det")(a * T("tensor")([1.0, 1.0, 0.0])),
    ),
    Case(
        "slogdet", lambda a: np.linalg.slogdet(a)[1], [(3, 3)], lambda a: T("linalg.slogdet")(a)[1]
    ),
    Case("solve", np.linalg.solve, [(3, 3), (3,)], T("linalg.solve"), seed=4),
    Case("solve_matrix", np.linalg.solve, [(3, 3), (3, 2)], T("linalg.solve"), seed=4),
    Case(
        "cholesky",
        lambda a: np.linalg.cholesky(_sym(a)),
        [(3, 3)],
        lambda a: T("linalg.cholesky")(a @ a.T + 3 * T("eye")(3)),
    ),
    Case("cholesky_lower_only", lambda a: np.linalg.cholesky(a + 4 * np.eye(3)), [(3, 3)]),
    Case(
        "eigh",
        lambda a: np.linalg.eigh(_sym(a))[0] * 2 + (np.linalg.eigh(_sym(a))[1] ** 2).sum(axis=0),
        [(3, 3)],
        lambda a: (
            T("linalg.eigh")(a @ a.T + 3 * T("eye")(3))[0] * 2
            + (T("linalg.eigh")(a @ a.T + 3 * T("eye")(3))[1] ** 2).sum(dim=0)
        ),
        seed=2,
    ),
    Case(
        "eigh_vectors",
        lambda a: np.linalg.eigh(_sym(a))[1] * np.sign(np.linalg.eigh(_sym(a))[1][0]),
        [(3, 3)],
        None,
        seed=5,
    ),
    Case("eigh_lower_only", lambda a: np.linalg.eigvalsh(a), [(3, 3)], seed=1),
    Case("eigh_upper_only", lambda a: np.linalg.eigvalsh(a, UPLO="U"), [(3, 3)], seed=1),
    Case(
        "eigh_upper_vectors",
        lambda a: np.linalg.eigh(a, "U")[0] + (np.linalg.eigh(a, "U")[1] ** 2).sum(axis=-2),
        [(2, 3, 3)],
        seed=3,
    ),
    Case("svd_values", lambda a: np.linalg.svd(a, compute_uv=False), [(3, 4)], T("linalg.svdvals")),
    Case(
        "svd_thin",
        lambda a: _signless(np.linalg.svd(a, full_matrices=False)),
        [(4, 3)],
        lambda a: _signless_torch(T("linalg.svd")(a, full_matrices=False)),
    ),
    Case(
        "svd_wide",
        lambda a: _signless(np.linalg.svd(a, full_matrices=False)),
        [(2, 4)],
        lambda a: _signless_torch(T("linalg.svd")(a, full_matrices=False)),
    ),
    Case(
        "svd_square_full",
        lambda a: _signless(np.linalg.svd(a)),
        [(3, 3)],
        lambda a: _signless_torch(T("linalg.svd")(a)),
    ),
    Case("eig", lambda a: np.abs(np.linalg.eig(a)[0]) + np.abs(np.linalg.eig(a)[1]), [(3, 3)]),
    Case("eigvals", lambda a: np.real(np.linalg.eigvals(a)) ** 2, [(2, 3, 3)], seed=2),
    Case("fft", lambda a: np.real(np.fft.fft(a, axis=0)) + np.imag(np.fft.ifft(a, 5)), [(4, 5)]),
    Case(
        "fft2",
        lambda a: np.abs(np.fft.fftn(a, (3, 4), (0, 1))) + np.fft.irfft2(np.fft.rfft2(a)),
        [(3, 4)],
    ),
    Case("fftshift", lambda a: np.fft.fftshift(a) * np.fft.ifftshift(a, axes=1), [(3, 4)]),
    Case("pinv", np.linalg.pinv, [(4, 3)], T("linalg.pinv")),
    Case("pinv_wide", np.linalg.pinv, [(2, 3)], T("linalg.pinv")),
    Case("norm_default", np.linalg.norm, [(3, 4)], T("linalg.norm")),
    Case(
        "norm_vector_ords",
        lambda a: (
            np.linalg.norm(a, 1, axis=1) + np.linalg.norm(a, np.inf) + np.linalg.norm(a[0], 3)
        ),
        [(3, 4)],
    ),
    Case(
        "norm_nuclear_of_leading_axes",
        lambda a: np.linalg.norm(a, ord="nuc", axis=(0, 1)) + np.linalg.norm(a, 2, (2, 0)).sum(),
        [(3, 2, 4)],
    ),
    Case(
        "norm_matrix_ords",
        lambda a: (
            np.linalg.norm(a, 1)
            + np.linalg.norm(a, np.inf)
            + np.linalg.norm(a, "nuc")
            + np.linalg.norm(a, 2)
            + np.linalg.norm(a, -2)
        ),
        [(3, 4)],
    ),
]
IDS = [c.name for c in CASES]


def plain_value(case, arrays):
    return case.ours(*[a.copy() for a in arrays])


def node_run(case, arrays, seed):
    """The case on array leaves, backpropagated with ``seed``: (out, leaves, cuts)."""
    with recording() as cuts:
        leaves = [array_leaf(np.array(a), f"x{i}") for i, a in enumerate(arrays)]
        out = case.ours(*leaves)
        if np.shape(out) == ():
            out.backward()
        else:
            out.backward(seed)
    return out, leaves, cuts


def central(case, arrays, seed, eps=1e-6):
    grads = []
    for i, arr in enumerate(arrays):
        g = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            up = [a.copy() for a in arrays]
            down = [a.copy() for a in arrays]
            up[i][idx] += eps
            down[i][idx] -= eps
            g[idx] = (
                np.sum(plain_value(case, up) * seed) - np.sum(plain_value(case, down) * seed)
            ) / (2 * eps)
        grads.append(g)
    return grads


def _seed(shape):
    return np.random.default_rng(7).normal(size=shape) if shape != () else 1.0


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_value_is_numpys_and_gradient_matches_central_differences(case):
    arrays = case.inputs()
    want = plain_value(case, arrays)
    seed = _seed(np.shape(want))
    out, leaves, cuts = node_run(case, arrays, seed)
    assert not cuts, cuts
    assert out._op is not None, "the result is a node"
    np.testing.assert_array_equal(np.asarray(out), want)  # numpy's own numbers
    assert np.asarray(out).dtype == want.dtype
    for leaf, num in zip(leaves, central(case, arrays, seed)):
        np.testing.assert_allclose(leaf.grad, num, rtol=1e-5, atol=1e-7)


TORCH_CASES = [c for c in CASES if c.theirs is not None]


@pytest.mark.parametrize("case", TORCH_CASES, ids=[c.name for c in TORCH_CASES])
def test_gradient_matches_pytorch_float64(case):
    torch = pytest.importorskip("torch")
    arrays = case.inputs()
    want = plain_value(case, arrays)
    seed = _seed(np.shape(want))
    out, leaves, _ = node_run(case, arrays, seed)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        theirs_in = [torch.tensor(a, requires_grad=True) for a in arrays]
        theirs = case.theirs(*theirs_in)
        theirs.backward(torch.as_tensor(np.broadcast_to(seed, tuple(theirs.shape)).copy()))
    finally:
        torch.set_default_dtype(before)
    np.testing.assert_allclose(np.asarray(out), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    for leaf, t in zip(leaves, theirs_in):
        np.testing.assert_allclose(leaf.grad, t.grad.numpy(), rtol=1e-8, atol=1e-10)


def _nodes(out):
    seen, stack, order = set(), [out], []
    while stack:
        n = stack.pop()
        if id(n) in seen or n._op is None:
            continue
        seen.add(id(n))
        order.append(n)
        stack.extend(p for p in (n._a, n._b) if p is not None)
    return order


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_replay_with_a_leading_axis_equals_the_forward(case):
    arrays = case.inputs()
    out, _, _ = node_run(case, arrays, _seed(np.shape(plain_value(case, arrays))))
    rng = np.random.default_rng(3)
    for node in _nodes(out):
        if any(np.iscomplexobj(p.data) for p in (node, *node.parents)):
            continue  # (a graph holding complex numbers is not replayed)
        parents = [np.asarray(np.asarray(p.data), dtype=float) for p in node.parents]
        shaken = [p + 1e-4 * rng.normal(size=(3,) + p.shape) for p in parents]
        batch = node._replay(shaken)
        for k in range(3):
            one = node._op.f(*[s[k] for s in shaken], **node.params)
            np.testing.assert_allclose(batch[k], one, rtol=1e-12, atol=1e-12, err_msg=node.op)


NEW_OPS = {
    "tan",
    "arcsin",
    "arccos",
    "sinh",
    "cosh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "exp2",
    "square",
    "reciprocal",
    "cbrt",
    "deg2rad",
    "rad2deg",
    "nan_to_num",
    "conj",
    "real",
    "imag",
    "angle",
    "sinc",
    "arctan2",
    "hypot",
    "logaddexp",
    "logaddexp2",
    "fmax",
    "fmin",
    "copysign",
    "prod",
    "cumprod",
    "flip",
    "roll",
    "tile",
    "repeat",
    "rot90",
    "moveaxis",
    "broadcast_to",
    "tril",
    "triu",
    "diag",
    "diagonal",
    "pad",
    "sort",
    "concatenate",
    "pack",
    "einsum",
    "einsum1",
    "inv",
    "det",
    "logdet",
    "solve",
    "cholesky",
    "eigvalsh",
    "eigvecs",
    "eig",
    "svdvals",
    "svd_u",
    "svd_vh",
    "pinv",
}


def test_every_new_table_entry_is_exercised():
    seen = set()
    # np.array of a list holding nodes: what the cell runtime calls for it
    pack = Case("pack", lambda a: numpy_with_nodes(np.array)([a[0], 1.0, a[1]]), [(2,)])
    for case in CASES + [pack]:
        arrays = case.inputs()
        out, _, _ = node_run(case, arrays, _seed(np.shape(plain_value(case, arrays))))
        seen |= {n.op for n in _nodes(out)}
    assert NEW_OPS <= seen, NEW_OPS - seen
    assert NEW_OPS <= set(TENSOR_OPS)
    for name in NEW_OPS:
        op = TENSOR_OPS[name]
        assert op.rule and op.torch is not None and len(op.df) == op.arity, name


def test_every_entry_has_a_torch_function_that_computes_its_forward():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).uniform(0.2, 0.8, (3, 3))
    for name in NEW_OPS - {
        "eig",
        "svd_u",
        "svd_vh",
        "sinc",
        "pack",
        "concatenate",
        "einsum",
        "einsum1",
        "solve",
        "nan_to_num",
        "arctan2",
        "hypot",
        "logaddexp",
        "logaddexp2",
        "fmax",
        "fmin",
        "copysign",
        "prod",
        "cumprod",
        "flip",
        "roll",
        "tile",
        "repeat",
        "rot90",
        "moveaxis",
        "broadcast_to",
        "tril",
        "triu",
        "diag",
        "diagonal",
        "pad",
        "sort",
        "arccosh",
    }:
        op = TENSOR_OPS[name]
        a = _sym(x) if name in ("cholesky", "eigvalsh", "eigvecs") else x
        theirs = op.torch_function(torch)(torch.tensor(a)).numpy()
        ours = op.f(a)
        if name == "eigvecs":
            theirs, ours = np.abs(theirs), np.abs(ours)
        np.testing.assert_allclose(theirs, ours, rtol=1e-10, atol=1e-12, err_msg=name)


# --------------------------------------------------------------------------- random shapes
UNARY = ["tan", "arcsinh", "log1p", "expm1", "exp2", "square", "cbrt", "sinh", "arctan"]
BINARY = ["arctan2", "hypot", "logaddexp", "logaddexp2", "fmax", "fmin", "maximum", "power"]


def _check(fn, arrays):
    case = Case("random", fn, [a.shape for a in arrays])
    want = plain_value(case, arrays)
    seed = _seed(np.shape(want))
    out, leaves, cuts = node_run(case, arrays, seed)
    assert not cuts
    np.testing.assert_array_equal(np.asarray(out), want)
    for leaf, num in zip(leaves, central(case, arrays, seed)):
        assert leaf.grad.shape == leaf.shape
        np.testing.assert_allclose(leaf.grad, num, rtol=1e-5, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(BINARY),
    data=st.data(),
    shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
)
def test_binary_functions_on_random_broadcast_shapes(name, data, shapes):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    arrays = [rng.uniform(0.3, 1.5, s) for s in shapes.input_shapes]
    _check(getattr(np, name), arrays)


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(UNARY),
    shape=array_shapes(min_dims=0, max_dims=3, max_side=3),
    seed=st.integers(0, 2**16),
)
def test_unary_functions_on_random_shapes(name, shape, seed):
    x = np.random.default_rng(seed).uniform(0.3, 1.5, shape)
    _check(getattr(np, name), [x])


REDUCTIONS = ["prod", "sum", "mean", "var", "std", "max", "min", "median", "ptp"]


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(REDUCTIONS),
    shape=array_shapes(min_dims=1, max_dims=3, max_side=3),
    data=st.data(),
)
def test_reductions_with_random_axes_and_keepdims(name, shape, data):
    axes = data.draw(st.sets(st.integers(0, len(shape) - 1), max_size=len(shape)))
    axis = None if not axes else tuple(sorted(axes))
    if name in ("median", "ptp") and axis is not None:
        axis = axis[0]
    keepdims = data.draw(st.booleans())
    x = np.random.default_rng(data.draw(st.integers(0, 2**16))).uniform(0.5, 1.5, shape)
    n = x.size if axis is None else int(np.prod([shape[a] for a in np.atleast_1d(axis)]))
    # std of one number is sqrt(0): its gradient is nan (0 · ∞), as in PyTorch
    assume(name != "std" or n > 1)
    _check(lambda a: getattr(np, name)(a, axis=axis, keepdims=keepdims), [x])


MOVES = [
    lambda a, ax: np.flip(a, ax),
    lambda a, ax: np.roll(a, 1, ax),
    lambda a, ax: np.repeat(a, 2, ax),
    lambda a, ax: np.cumsum(a, ax),
    lambda a, ax: np.cumprod(a, ax),
    lambda a, ax: np.sort(a, ax),
    lambda a, ax: np.diff(a, axis=ax),
    lambda a, ax: np.concatenate([a, a * 2.0], ax),
    lambda a, ax: np.stack([a, a], ax),
    lambda a, ax: np.moveaxis(a, ax, 0),
]


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(0, len(MOVES) - 1),
    shape=array_shapes(min_dims=1, max_dims=3, max_side=3),
    data=st.data(),
)
def test_shape_functions_on_random_shapes_and_axes(k, shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = np.random.default_rng(data.draw(st.integers(0, 2**16))).uniform(0.5, 1.5, shape)
    _check(lambda a: MOVES[k](a, axis), [x])


# --------------------------------------------------------------------------- no derivative
def test_integer_valued_functions_give_numpys_values_and_no_cut():
    x = np.array([0.3, -1.2, 0.8, 0.3])
    with recording() as cuts:
        leaf = array_leaf(x.copy(), "x")
        for f in (np.argsort, np.argmax, np.argmin, np.unique, np.searchsorted):
            args = (leaf, 0.5) if f is np.searchsorted else (leaf,)
            got = f(*args)
            want = f(*((np.sort(x), 0.5) if f is np.searchsorted else (x,)))
            if f is np.searchsorted:
                got = f(np.sort(leaf), 0.5)
            np.testing.assert_array_equal(got, want)
            assert getattr(got, "_op", None) is None
    assert not cuts


def test_a_float32_result_is_numpys_and_a_node_a_complex64_one_a_cut():
    with recording() as cuts:
        leaf = array_leaf(np.array([1.0, 2.0]), "x")
        got = np.flip(leaf).astype(np.float32)
        (got * got).sum().backward()
        low = leaf.astype(np.complex64)
    assert got.dtype == np.float32 and got.tolist() == [2.0, 1.0] and got.grad.dtype == np.float32
    assert leaf.grad.dtype == np.float64 and leaf.grad.tolist() == [2.0, 4.0]
    assert low.dtype == np.complex64 and cuts and "complex64" in cuts[0]
    # a rule whose numpy result is complex64 (the transform of float32 numbers): a cut too
    with recording() as cuts:
        spectrum = np.fft.fft(got) * np.linalg.eig(np.array([[0, 1], [-1, 0]], np.float32) * got)[0]
    assert spectrum.dtype == np.complex64 and len(cuts) == 2
    assert "fft giving complex64" in cuts[0] and "eig giving" in cuts[1]


def test_svd_of_a_non_square_matrix_with_full_matrices_cuts_u_and_vh_and_says_so():
    a = np.random.default_rng(0).normal(size=(4, 2))
    with recording() as cuts:
        leaf = array_leaf(a.copy(), "a")
        u, s, vh = np.linalg.svd(leaf)
        s.sum().backward()
    want_u, want_s, want_vh = np.linalg.svd(a)
    assert np.array_equal(u, want_u) and np.array_equal(s, want_s)
    assert [c.split(" has")[0] for c in cuts] == [
        "the U of numpy.linalg.svd",
        "the Vh of numpy.linalg.svd",
    ]
    np.testing.assert_allclose(leaf.grad, want_u[:, :2] @ want_vh, rtol=1e-12)


# --------------------------------------------------------------------------- the view's checks
CHECKED = [c for c in CASES if c.name not in ("eigh_vectors",)]  # eigenvector signs flip


@pytest.mark.parametrize("case", CHECKED, ids=[c.name for c in CHECKED])
def test_the_numerical_check_and_the_torch_replay_pass_on_each_rule(case):
    """The trace of sum(f(x) * seed): its numerical check (the ops' batched replay) and
    the PyTorch replay (each entry's torch function) agree with the rules."""
    from gradmagic.analysis import torchcheck
    from gradmagic.analysis.trace import Trace

    arrays = case.inputs()
    want = plain_value(case, arrays)
    seed = _seed(np.shape(want))
    with recording():
        leaves = [array_leaf(np.array(a), f"x{i}") for i, a in enumerate(arrays)]
        out = case.ours(*leaves)
        target = np.sum(out * seed)
        target.backward()
    trace = Trace(target)
    report = trace.check()
    assert report.passed, str(report)
    if case.name.startswith("svd") and case.name != "svd_values" or case.name in COMPLEX_INSIDE:
        return  # U and V: torch picks other signs than LAPACK; complex numbers: not replayed
    pytest.importorskip("torch")
    comparison = torchcheck.compare(trace)
    assert comparison.passed, comparison.verdict


def test_a_singular_matrix_gives_numpys_error_or_a_nan_gradient_never_a_crash():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    with recording():
        leaf = array_leaf(a.copy(), "a")
        with pytest.raises(np.linalg.LinAlgError):  # numpy's own error, as in plain code
            np.linalg.inv(leaf)
        sign, logdet = np.linalg.slogdet(leaf)
        assert logdet == -np.inf and sign == 0.0
        logdet.backward()
    assert np.isnan(leaf.grad).all()


# --------------------------------------------------------------------------- coverage
# the numpy functions HIPS autograd's numpy_vjps.py and linalg.py give a derivative
HIPS_RULES = """abs absolute amax amin arccos arccosh arcsin arcsinh arctan arctanh array_split
atleast_1d atleast_2d atleast_3d broadcast_to clip concatenate conj conjugate cos cosh cumsum
deg2rad degrees diag diff dot dsplit einsum exp exp2 expand_dims expm1 fabs fliplr flipud full
hsplit inner kron log log10 log1p log2 matmul max min moveaxis nan_to_num negative pad
partition prod rad2deg radians ravel real real_if_close reciprocal repeat reshape roll rollaxis
rot90 sin sinh sort split sqrt square squeeze sum swapaxes tan tanh tensordot tile transpose
tril triu vsplit mean std var add multiply subtract divide maximum minimum fmax fmin logaddexp
logaddexp2 true_divide mod remainder power arctan2 hypot sinc trace where cross linspace outer
gradient
diagonal linalg.norm linalg.cholesky linalg.det linalg.eigh linalg.inv linalg.pinv
linalg.slogdet linalg.solve linalg.svd linalg.eig fft.fft fft.ifft fft.fft2 fft.ifft2 fft.fftn
fft.ifftn fft.rfft fft.irfft fft.rfft2 fft.irfft2 fft.rfftn fft.irfftn fft.fftshift
fft.ifftshift""".split()
# the ones it lists as having no gradient
HIPS_NO_GRADIENT = """floor ceil round rint around fix trunc all any argmax argmin argpartition
argsort argwhere nonzero flatnonzero count_nonzero searchsorted sign ndim shape floor_divide
logical_and logical_or logical_not logical_xor isfinite isinf isnan isneginf isposinf allclose
isclose array_equal array_equiv greater greater_equal less less_equal equal not_equal
iscomplexobj iscomplex size isreal zeros_like ones_like empty_like full_like""".split()
# its rules this package has not (each listed in docs/numpy.md with the reason)
NOT_HERE = {"angle", "imag"}  # angle, imag: values of a real array


def _numpy(name):
    f = np
    for part in name.split("."):
        f = getattr(f, part)
    return f


def test_every_function_of_hips_autograds_lists_has_a_rule_or_a_reason():
    from gradmagic.core import array, tensor

    rules = set(array.FUNCTION_RULES) | array._UFUNC_EXTRA
    values = array._VALUE_FUNCTIONS | tensor._UFUNC_VALUES
    for name in HIPS_RULES:
        f = _numpy(name)
        assert f in rules or (isinstance(f, np.ufunc) and tensor.has_rule(f)), name
    for name in HIPS_NO_GRADIENT:
        f = _numpy(name)
        assert f in values or f in tensor._UFUNC_OPS, name  # floor_divide: a step, derivative 0
    doc = open(__file__.replace("tests/test_numpy_rules.py", "docs/numpy.md")).read()
    for name in HIPS_RULES + HIPS_NO_GRADIENT + sorted(NOT_HERE):
        short = name.split(".")[-1]
        assert f"`{name}`" in doc or f"`{short}`" in doc or f"{short}`" in doc, name


# --------------------------------------------------------------------------- gradmagic.Tensor
# np.full has no numpy dispatch; a Tensor holds no complex numbers
TENSOR_CASES = [c for c in CASES if c.name not in ("full", *COMPLEX_INSIDE)]


@pytest.mark.parametrize("case", TENSOR_CASES, ids=[c.name for c in TENSOR_CASES])
def test_the_same_rules_serve_a_standalone_tensor(case):
    from gradmagic.core.tensor import Tensor

    arrays = case.inputs()
    want = plain_value(case, arrays)
    seed = _seed(np.shape(want))
    leaves = [Tensor(a, label=f"x{i}") for i, a in enumerate(arrays)]
    out = case.ours(*leaves)
    assert isinstance(out, Tensor) and out._op is not None
    np.testing.assert_allclose(out.data, want, rtol=1e-12, atol=1e-12)
    out.backward(np.broadcast_to(seed, out.shape))
    for leaf, num in zip(leaves, central(case, arrays, seed)):
        np.testing.assert_allclose(leaf.grad, num, rtol=1e-5, atol=1e-7)
