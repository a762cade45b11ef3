"""Tensor products and linear algebra: ``@``, einsum, inverse, determinants, solve, decompositions.

Entries of :data:`~gradmagic.core.tensor_ops.TENSOR_OPS`; the fields are :class:`~gradmagic.core.tensor_op.TensorOp`'s.
"""

from __future__ import annotations

import numpy as np

from .tensor_op import TensorOp, _lift, _others_product


# --------------------------------------------------------------------------- matmul
def _mm_grads(g, x, y):
    """Matrix-shaped views of ``g``, ``x``, ``y`` (1-D operands made 2-D, as matmul does)."""
    if y.ndim == 1:
        y = y[:, None]
        g = g[..., None]
    if x.ndim == 1:
        x = x[None, :]
        g = g[..., None, :]
    return g, x, y


def _mm_dx(g, out, x, y):
    vec = x.ndim == 1
    g, x, y = _mm_grads(np.asarray(g), x, y)
    gx = g @ np.swapaxes(y, -1, -2)
    return gx[..., 0, :] if vec else gx


def _mm_dy(g, out, x, y):
    vec = y.ndim == 1
    g, x, y = _mm_grads(np.asarray(g), x, y)
    gy = np.swapaxes(x, -1, -2) @ g
    return gy[..., 0] if vec else gy


def _mm_batched(x, y):
    xv, yv = x.ndim == 2, y.ndim == 2  # a vector plus the leading axis
    if xv:
        x = x[:, None, :]
    if yv:
        y = y[..., None]
    x, y = _lift(x, y)
    out = np.matmul(x, y)
    if yv:
        out = out[..., 0]
    if xv:
        out = out[..., 0, :] if not yv else out[..., 0]
    return out


# --------------------------------------------------------------------------- products: einsum
def _spec(spec):
    inputs, out = spec.split("->")
    return inputs.split(","), out


def _einsum_grad(spec, which, g, others):
    """The gradient reaching operand ``which`` of ``einsum(spec)``: ``g`` contracted with the
    other operands, put back on the operand's diagonals (a repeated letter) and spread
    along the letters only it sums over."""
    subs, out = _spec(spec)
    mine = subs[which]
    rest = [s for i, s in enumerate(subs) if i != which]
    present = set(out).union(*rest) if rest else set(out)
    letters = list(dict.fromkeys(mine))
    kept = "".join(c for c in letters if c in present)
    gk = np.einsum(",".join([out] + rest) + "->" + kept, g, *others)
    return gk, letters, kept


def _einsum_embed(gk, letters, kept, mine, shape):
    size = dict(zip(mine, shape))
    # spread along the letters only this operand sums over (size 1 in gk, then broadcast)
    full = np.broadcast_to(
        gk.reshape([size[c] if c in kept else 1 for c in letters]), [size[c] for c in letters]
    )
    if len(letters) == len(mine):
        return full
    # a repeated letter: the gradient sits on the diagonal
    gx = np.zeros(shape, full.dtype)
    grid = np.indices(full.shape, sparse=True)
    gx[tuple(grid[letters.index(c)] for c in mine)] = full
    return gx


def _einsum2_rule(which):
    def d(g, out, x, y, spec):
        other = y if which == 0 else x
        gk, letters, kept = _einsum_grad(spec, which, g, [other])
        mine = _spec(spec)[0][which]
        return _einsum_embed(gk, letters, kept, mine, np.shape(x if which == 0 else y))

    return d


def _einsum1_dx(g, out, x, spec):
    gk, letters, kept = _einsum_grad(spec, 0, g, [])
    return _einsum_embed(gk, letters, kept, _spec(spec)[0][0], np.shape(x))


def _batch_spec(spec):
    free = next(c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in spec)
    subs, out = _spec(spec)
    return ",".join(free + s for s in subs) + "->" + free + out


def _einsum2_batched(x, y, spec):
    return np.einsum(_batch_spec(spec), x, y)


def _einsum1_batched(x, spec):
    return np.einsum(_batch_spec(spec), x)


def _torch_einsum(torch):
    return lambda *xs, spec: torch.einsum(spec, *xs)


# --------------------------------------------------------------------------- linear algebra
def _mT(a):
    return np.swapaxes(a, -1, -2)


def _inv_dx(g, out, x):
    return -_mT(out) @ g @ _mT(out)


def _det_dx(g, out, x):
    # the cofactor matrix, U adj(S) Vᵀ det(U) det(V): defined for singular A too
    u, sv, vh = np.linalg.svd(x)
    sign = np.linalg.det(u) * np.linalg.det(vh)
    others = _others_product(sv, (sv.ndim - 1,))
    cof = (sign[..., None, None] * (np.conj(u) * others[..., None, :])) @ np.conj(vh)
    return np.asarray(g)[..., None, None] * cof


def _logdet(x):
    return np.linalg.slogdet(x)[1]


def _logdet_dx(g, out, x):
    try:
        inv = np.linalg.inv(x)
    except np.linalg.LinAlgError:  # ln|det| is −∞ there: no finite gradient
        inv = np.full(np.shape(x), np.nan)
    return np.asarray(g)[..., None, None] * _mT(inv)


def _solve(a, b, vec):
    return np.linalg.solve(a, b[..., None])[..., 0] if vec else np.linalg.solve(a, b)


def _solve_db(g, out, a, b, vec):
    return _solve(_mT(a), g, vec)


def _solve_da(g, out, a, b, vec):
    gb = _solve(_mT(a), g, vec)
    if vec:
        return -gb[..., :, None] * out[..., None, :]
    return -gb @ _mT(out)


def _lower_read(sym):
    """The gradient of a function that reads a symmetric (Hermitian) matrix from its lower
    triangle (numpy's cholesky and eigh): an off-diagonal element stands for two, the upper
    triangle is not read, a diagonal one is real. ``sym`` is the gradient for symmetric
    changes."""
    low = np.tril(sym + np.conj(_mT(sym)))
    return low - 0.5 * np.eye(sym.shape[-1]) * low


def _triangle_read(sym, uplo="L"):
    """:func:`_lower_read`, or its mirror for a matrix read from its upper triangle."""
    return _lower_read(sym) if uplo in ("L", "l") else _mT(_lower_read(_mT(sym)))


def _from_lower(f):
    """``torch -> function``: ``f`` of the symmetric matrix read from the lower triangle
    (the upper one for ``uplo='U'``), as numpy's cholesky and eigh read it (torch's own
    take the matrix as symmetric)."""

    def make(torch):
        def call(x, uplo="L"):
            if uplo in ("U", "u"):
                return f(torch, torch.triu(x) + torch.triu(x, 1).mT)
            return f(torch, torch.tril(x) + torch.tril(x, -1).mT)

        return call

    return make


def _cholesky_dx(g, out, x):
    # A = L Lᵀ: S = L⁻ᵀ Φ(Lᵀ Ḡ) L⁻¹ with Φ the lower triangle, its diagonal halved
    L = out
    phi = np.tril(_mT(L) @ g)
    phi = phi - 0.5 * np.eye(L.shape[-1]) * phi
    inv = np.linalg.inv(L)
    s = _mT(inv) @ phi @ inv
    return _lower_read(0.5 * (s + _mT(s)))


def _eigvalsh(x, uplo="L"):
    return np.linalg.eigvalsh(x, uplo)


def _eigvalsh_dx(g, out, x, uplo="L"):
    w, v = np.linalg.eigh(x, uplo)
    return _triangle_read((np.conj(v) * np.asarray(g)[..., None, :]) @ _mT(v), uplo)


def _eigvecs(x, uplo="L"):
    return np.linalg.eigh(x, uplo)[1]


def _eigvecs_dx(g, out, x, uplo="L"):
    w, v = np.linalg.eigh(x, uplo)
    gap = w[..., None, :] - w[..., :, None]  # w_j - w_i
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(np.eye(w.shape[-1], dtype=bool), 0.0, 1.0 / gap)
    return _triangle_read(np.conj(v) @ (f * (_mT(v) @ g)) @ _mT(v), uplo)


def _eig(x, part):
    return np.linalg.eig(x)[part]


def _eig_dx(g, out, x, part):
    w, v = np.linalg.eig(x)
    vt, eye = _mT(v), np.eye(w.shape[-1])
    if part == 0:  # the eigenvalues: V⁻ᵀ diag(ḡ) Vᵀ
        inner = np.asarray(g)[..., None, :] * eye
    else:  # the eigenvectors, of unit length: their own scale's change taken out
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(eye == 1, 0.0, 1.0 / (w[..., None, :] - w[..., :, None]))
        vg = vt @ g
        inner = f * vg - f * ((vt @ np.conj(v)) @ (np.real(vg) * eye))
    r = np.linalg.solve(vt, inner @ vt)
    return r if np.iscomplexobj(x) else np.real(r)


def _eig_kink(out, x, part):
    w = np.sort_complex(np.linalg.eigvals(x))
    return bool(np.any(np.diff(w, axis=-1) == 0))


def _eigh_kink(out, x, uplo="L"):
    w = np.linalg.eigvalsh(x, uplo)
    return bool(np.any(np.diff(w, axis=-1) == 0))


def _svdvals(x):
    return np.linalg.svd(x, compute_uv=False)


def _svdvals_dx(g, out, x):
    u, s, vh = np.linalg.svd(x, full_matrices=False)
    return np.conj((u * np.asarray(g)[..., None, :]) @ vh)  # (of a complex x too)


def _svd_u(x):
    return np.linalg.svd(x, full_matrices=False)[0]


def _svd_vh(x):
    return np.linalg.svd(x, full_matrices=False)[2]


def _svd_dx(g, x, part):
    """HIPS autograd's rule for U (``part`` 0) or Vh (2) of the thin SVD A = U S Vᴴ, complex
    A too: F_ij = 1/(s_j² − s_i²) (1 on the diagonal), the terms outside U's and V's
    columns through (I − UUᴴ) and (I − VVᴴ)."""
    u, s, vh = np.linalg.svd(x, full_matrices=False)
    v, eye = np.conj(_mT(vh)), np.eye(s.shape[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        f = 1.0 / (s[..., None, :] ** 2 - s[..., :, None] ** 2 + eye)
    if part == 0:
        ug = _mT(u) @ g
        t = (f * (ug - np.conj(_mT(ug)))) * s[..., None, :]
        t = t + 1j * np.imag(eye * ug) / s[..., None, :] if np.iscomplexobj(u) else t
        rest = _mT((v / s[..., None, :]) @ _mT(g) @ (np.eye(u.shape[-2]) - u @ np.conj(_mT(u))))
    else:
        gv = np.conj(_mT(g))
        vg = _mT(v) @ gv
        t = s[..., :, None] * (f * (vg - np.conj(_mT(vg))))
        rest = np.conj(
            (u / s[..., None, :]) @ _mT(gv) @ (np.eye(v.shape[-2]) - v @ np.conj(_mT(v)))
        )
    r = np.conj(u) @ t @ _mT(v) + rest
    return r if np.iscomplexobj(x) else np.real(r)


def _svd_kink(out, x):
    s = np.linalg.svd(x, compute_uv=False)
    return bool(np.any(np.diff(s, axis=-1) == 0) or np.any(s == 0))


def _pinv_dx(g, out, x):
    p = out
    m, n = np.shape(x)[-2:]
    eye_m, eye_n = np.eye(m), np.eye(n)
    return (
        -_mT(p) @ g @ _mT(p)
        + (eye_m - x @ p) @ _mT(g) @ p @ _mT(p)
        + _mT(p) @ p @ _mT(g) @ (eye_n - p @ x)
    )


def _torch_solve(torch):
    return lambda a, b, vec: (
        torch.linalg.solve(a, b.unsqueeze(-1)).squeeze(-1) if vec else torch.linalg.solve(a, b)
    )


OPS = [
    TensorOp(
        "@",
        2,
        np.matmul,
        (_mm_dx, _mm_dy),
        _mm_batched,
        "∂L/∂A = G·Bᵀ, ∂L/∂B = Aᵀ·G for C = A·B",
        method="__matmul__",
        numpy=("matmul",),
        torch="matmul",
    ),
    # products
    TensorOp(
        "einsum",
        2,
        lambda x, y, spec: np.einsum(spec, x, y),
        (_einsum2_rule(0), _einsum2_rule(1)),
        _einsum2_batched,
        "∂/∂A = the gradient contracted with the other operand, back to A's letters",
        torch=_torch_einsum,
    ),
    TensorOp(
        "einsum1",
        1,
        lambda x, spec: np.einsum(spec, x),
        (_einsum1_dx,),
        _einsum1_batched,
        "the gradient spread back to the operand's letters (its diagonal if repeated)",
        display="einsum",
        torch=_torch_einsum,
    ),
    # linear algebra (stacks of matrices in the last two axes)
    TensorOp(
        "inv",
        1,
        np.linalg.inv,
        (_inv_dx,),
        np.linalg.inv,
        "∂L/∂A = −A⁻ᵀ G A⁻ᵀ",
        torch=lambda torch: torch.linalg.inv,
    ),
    TensorOp(
        "det",
        1,
        np.linalg.det,
        (_det_dx,),
        np.linalg.det,
        "∂det A/∂A = det A · A⁻ᵀ (the cofactor matrix, also where A is singular)",
        torch=lambda torch: torch.linalg.det,
    ),
    TensorOp(
        "logdet",
        1,
        _logdet,
        (_logdet_dx,),
        _logdet,
        "∂ln|det A|/∂A = A⁻ᵀ (slogdet's second part; its sign has no gradient)",
        torch=lambda torch: lambda x: torch.linalg.slogdet(x)[1],
    ),
    TensorOp(
        "solve",
        2,
        _solve,
        (_solve_da, _solve_db),
        _solve,
        "for x = A⁻¹b: ∂L/∂b = A⁻ᵀ g, ∂L/∂A = −(A⁻ᵀ g) xᵀ",
        torch=_torch_solve,
    ),
    TensorOp(
        "cholesky",
        1,
        np.linalg.cholesky,
        (_cholesky_dx,),
        np.linalg.cholesky,
        "for A = L Lᵀ: S = L⁻ᵀ Φ(Lᵀ Ḡ) L⁻¹ (Φ: lower triangle, diagonal halved), "
        "∂L/∂A = (S + Sᵀ)/2 read from A's lower triangle, as numpy reads A",
        torch=_from_lower(lambda torch, a: torch.linalg.cholesky(a)),
    ),
    TensorOp(
        "eigvalsh",
        1,
        _eigvalsh,
        (_eigvalsh_dx,),
        _eigvalsh,
        "∂wᵢ/∂A = vᵢ vᵢᵀ (the eigenvalues of a symmetric matrix, read from its lower triangle)",
        kink=_eigh_kink,
        torch=_from_lower(lambda torch, a: torch.linalg.eigvalsh(a)),
    ),
    TensorOp(
        "eigvecs",
        1,
        _eigvecs,
        (_eigvecs_dx,),
        _eigvecs,
        "∂L/∂A = V (F ∘ VᵀḠ) Vᵀ with F_ij = 1/(w_j − w_i), read from A's lower "
        "triangle (eigh's eigenvectors; undefined at repeated eigenvalues)",
        kink=_eigh_kink,
        display="eigh V",
        torch=_from_lower(lambda torch, a: torch.linalg.eigh(a)[1]),
    ),
    TensorOp(
        "eig",
        1,
        _eig,
        (_eig_dx,),
        _eig,
        "for A = V diag(w) V⁻¹, V's columns of unit length: ∂L/∂A = V⁻ᵀ(diag(ḡw) + F ∘ VᵀḠv − "
        "F ∘ (VᵀV̄ (Re(VᵀḠv) ∘ I)))Vᵀ, F_ij = 1/(w_j − w_i) (undefined at repeated eigenvalues)",
        kink=_eig_kink,
        torch=lambda torch: lambda x, part: torch.linalg.eig(x)[part],
    ),
    TensorOp(
        "svdvals",
        1,
        _svdvals,
        (_svdvals_dx,),
        _svdvals,
        "∂sᵢ/∂A = uᵢ vᵢᵀ (the singular values)",
        torch=lambda torch: torch.linalg.svdvals,
    ),
    TensorOp(
        "svd_u",
        1,
        _svd_u,
        (lambda g, out, x: _svd_dx(g, x, 0),),
        _svd_u,
        "for A = U S Vᵀ: ∂L/∂A = U(F ∘ (UᵀḠ − ḠᵀU))S Vᵀ + (I − UUᵀ)ḠS⁻¹Vᵀ, "
        "F_ij = 1/(s_j² − s_i²) (undefined at repeated or zero singular values)",
        kink=_svd_kink,
        display="svd U",
        torch=lambda torch: lambda x: torch.linalg.svd(x, full_matrices=False)[0],
    ),
    TensorOp(
        "svd_vh",
        1,
        _svd_vh,
        (lambda g, out, x: _svd_dx(g, x, 2),),
        _svd_vh,
        "for A = U S Vᵀ, G = ∂L/∂V: ∂L/∂A = U S(F ∘ (VᵀG − GᵀV))Vᵀ + U S⁻¹Gᵀ(I − VVᵀ)",
        kink=_svd_kink,
        display="svd Vh",
        torch=lambda torch: lambda x: torch.linalg.svd(x, full_matrices=False)[2],
    ),
    TensorOp(
        "pinv",
        1,
        np.linalg.pinv,
        (_pinv_dx,),
        np.linalg.pinv,
        "for P = A⁺: ∂L/∂A = −PᵀGPᵀ + (I − AP)GᵀPPᵀ + PᵀPGᵀ(I − PA) (constant rank)",
        torch=lambda torch: torch.linalg.pinv,
    ),
]
