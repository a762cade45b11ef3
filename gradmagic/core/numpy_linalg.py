"""numpy's products, linear algebra and Fourier transforms on array nodes: ``np.dot``,
``np.einsum``, ``np.linalg.*``, ``np.fft.*``.

Rules as in :mod:`gradmagic.core.numpy_reductions`.
"""

from __future__ import annotations

import numpy as np

from . import tensor as _t
from .array import (
    FUNCTION_RULES,
    _NoValue,
    _RESHAPE,
    _cut_result,
    _link,
    _link_call,
    _node_of,
    _parent,
    _pv,
    _quiet_graph,
)
from .numpy_reductions import abs2
from .numpy_shapes import _as_array_node, _ints
from .tensor import TENSOR_OPS


def _r_dot(exact, a, b, out=None):
    if out is not None:
        return None
    da, db = np.ndim(_pv(a)), np.ndim(_pv(b))  # (of the numbers: no dispatch)
    if da == 0 or db == 0:
        return _link_call(np.multiply, exact, (a, b))
    if da > 2 or db > 2:
        return None
    pa, pb = _parent(a), _parent(b)
    if pa is None or pb is None:
        return None
    return _link(_t._MATMUL, exact, pa, pb)


def _r_cross(exact, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    na, nb = _node_of(a), _node_of(b)
    with _quiet_graph():
        va = np.moveaxis(np.asarray(_pv(a)) if na is None else _as_array_node(na), axisa, -1)
        vb = np.moveaxis(np.asarray(_pv(b)) if nb is None else _as_array_node(nb), axisb, -1)
        if va.shape[-1] not in (2, 3) or vb.shape[-1] not in (2, 3):
            return None
        if va.shape[-1] == vb.shape[-1] == 2:  # the z component alone
            return va[..., 0] * vb[..., 1] - va[..., 1] * vb[..., 0]
        va, vb = _three(va), _three(vb)
        one, two = np.array([1, 2, 0]), np.array([2, 0, 1])
        c = va[..., one] * vb[..., two] - va[..., two] * vb[..., one]
        return np.moveaxis(c, -1, axisc)


def _three(v):
    """Vectors along the last axis with a third component (0 for plane vectors)."""
    if v.shape[-1] == 3:
        return v
    return np.concatenate([v, np.zeros(v.shape[:-1] + (1,))], axis=-1)


# products, written as einsum
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY"


def _einsum_nodes(spec, operands):
    """The node of ``np.einsum(spec, *operands)`` (explicit output, no ellipsis)."""
    subs, out = spec.split("->")
    subs = subs.split(",")
    nodes = [_node_of(x) for x in operands]
    if any(n is None for n in nodes) or len(subs) != len(nodes):
        return None
    if len(nodes) == 1:
        return _t._apply(TENSOR_OPS["einsum1"], nodes[0], None, {"spec": spec})
    left, ls = nodes[0], subs[0]
    for i in range(1, len(nodes)):
        if i == len(nodes) - 1:
            keep = out
        else:
            later = set(out).union(*subs[i + 1 :])
            keep = "".join(c for c in dict.fromkeys(ls + subs[i]) if c in later)
        left = _t._apply(TENSOR_OPS["einsum"], left, nodes[i], {"spec": f"{ls},{subs[i]}->{keep}"})
        ls = keep
    return left


def _r_einsum(exact, *operands, out=None, optimize=False, **kwargs):
    if out is not None or kwargs or not operands:
        return None
    if isinstance(operands[0], str):
        spec, arrays = operands[0].replace(" ", ""), list(operands[1:])
    else:  # the sublist form: einsum(a, [0, 1], b, [1, 2], [0, 2])
        spec, arrays = _sublists(operands)
    if "->" not in spec:
        letters = spec.replace(",", "").replace(".", "")
        once = sorted(c for c in set(letters) if letters.count(c) == 1)
        spec += "->" + ("..." if "." in spec else "") + "".join(once)
    if "." in spec:
        spec, arrays = _without_ellipsis(spec, arrays)
    return _einsum_nodes(spec, arrays)


def _sublists(operands):
    """The sublist form of einsum as its subscripts string and its arrays."""

    def letters(sub):
        return "".join("..." if k is Ellipsis else _LETTERS[_t._int(k)] for k in sub)

    arrays = list(operands[0::2])
    subs = [letters(sub) for sub in operands[1::2]]
    if len(operands) % 2:  # the output's sublist comes last
        arrays = arrays[:-1]
        return ",".join(subs) + "->" + letters(operands[-1]), arrays
    return ",".join(subs), arrays


def _without_ellipsis(spec, arrays):
    """``spec`` with each ``...`` spelled out in letters of its own; an operand's ellipsis
    axis of size 1 that broadcasts is reshaped away (it takes no letter)."""
    ins, out = spec.split("->")
    ins = ins.split(",")
    shapes = [np.shape(_pv(x)) for x in arrays]
    counts = [
        len(s) - len(sub.replace("...", "")) if "..." in sub else 0 for s, sub in zip(shapes, ins)
    ]
    n = max(counts, default=0)
    free = [c for c in _LETTERS if c not in spec][:n]
    sizes = [1] * n
    for shape, sub, k in zip(shapes, ins, counts):
        at = sub.index("...") if "..." in sub else 0
        for j in range(k):
            if sizes[n - k + j] == 1:  # (broadcast: the size that is not 1, 0 too)
                sizes[n - k + j] = shape[at + j]
    new_ins, new_arrays = [], []
    for x, shape, sub, k in zip(arrays, shapes, ins, counts):
        if "..." not in sub:
            new_ins.append(sub)
            new_arrays.append(x)
            continue
        at = sub.index("...")
        own = free[n - k :]
        keep = [j for j in range(k) if shape[at + j] == sizes[n - k + j]]
        if len(keep) < k:  # broadcast axes of size 1: reshaped away
            node = _node_of(x)
            kept = shape[:at] + tuple(shape[at + j] for j in keep) + shape[at + k :]
            x = (
                np.reshape(np.asarray(_pv(x)), kept)
                if node is None
                else (_t._apply(_RESHAPE, node, None, {"shape": kept}))
            )
        new_ins.append(sub.replace("...", "".join(own[j] for j in keep)))
        new_arrays.append(x)
    return ",".join(new_ins) + "->" + out.replace("...", "".join(free)), new_arrays


def _r_inner(exact, a, b):
    na, nb = np.ndim(_pv(a)), np.ndim(_pv(b))
    if na == 0 or nb == 0:
        return _link_call(np.multiply, exact, (a, b))
    sa = _LETTERS[: na - 1] + "z"
    sb = _LETTERS[na - 1 : na + nb - 2] + "z"
    return _einsum_nodes(f"{sa},{sb}->{sa[:-1]}{sb[:-1]}", (a, b))


def _r_outer(exact, a, b, out=None):
    if out is not None:
        return None
    na, nb = _node_of(a), _node_of(b)
    if na is None or nb is None:
        return None
    flat = [_t._apply(_RESHAPE, n, None, {"shape": (-1,)}) for n in (na, nb)]
    return _einsum_nodes("i,j->ij", flat)


def _r_vdot(exact, a, b):
    na, nb = _node_of(a), _node_of(b)
    if na is None or nb is None:
        return None
    flat = [_t._apply(_RESHAPE, n, None, {"shape": (-1,)}) for n in (na, nb)]
    if np.iscomplexobj(_pv(a)):  # vdot conjugates its first argument
        flat[0] = np.conj(flat[0])
    return _einsum_nodes("i,i->", flat)


def _r_tensordot(exact, a, b, axes=2):
    na, nb = np.ndim(_pv(a)), np.ndim(_pv(b))
    if isinstance(axes, (list, tuple)) and len(axes) == 2:
        ia, ib = (_ints(x) for x in axes)
        ia = (ia,) if isinstance(ia, int) else ia
        ib = (ib,) if isinstance(ib, int) else ib
    else:
        n = _t._int(axes)
        ia, ib = tuple(range(na - n, na)), tuple(range(n))
    ia = [i % na for i in ia]
    ib = [i % nb for i in ib]
    sa = list(_LETTERS[:na])
    sb = list(_LETTERS[na : na + nb])
    for i, j in zip(ia, ib):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in ia] + [
        c for k, c in enumerate(sb) if k not in ib
    ]
    return _einsum_nodes(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", (a, b))


def _r_kron(exact, a, b):
    pa, pb = np.asarray(_pv(a)), np.asarray(_pv(b))
    n = max(pa.ndim, pb.ndim)
    na, nb = _node_of(a), _node_of(b)
    if na is None or nb is None:
        return None
    sa_shape = (1,) * (n - pa.ndim) + pa.shape
    sb_shape = (1,) * (n - pb.ndim) + pb.shape
    na = _t._apply(_RESHAPE, na, None, {"shape": sa_shape})
    nb = _t._apply(_RESHAPE, nb, None, {"shape": sb_shape})
    sa, sb = _LETTERS[:n], _LETTERS[n : 2 * n]
    out = "".join(x + y for x, y in zip(sa, sb))
    prod = _einsum_nodes(f"{sa},{sb}->{out}", (na, nb))
    return _t._apply(_RESHAPE, prod, None, {"shape": np.shape(exact)})


def _r_dot_any(exact, a, b, out=None):
    if out is not None:
        return None
    da, db = np.ndim(_pv(a)), np.ndim(_pv(b))
    if da == 0 or db == 0:  # a number times an array
        return _link_call(np.multiply, exact, (a, b))
    if da <= 2 and db <= 2:
        return _r_dot(exact, _node_of(a), _node_of(b))
    return _r_tensordot(exact, a, b, axes=([-1], [-2 if db >= 2 else -1]))


# linear algebra
def _linalg_unary(name):
    op = TENSOR_OPS[name]

    def rule(exact, a, *args, **kwargs):
        if args or kwargs:
            return None
        node = _node_of(a)
        return None if node is None else _link(op, exact, node)

    return rule


def _r_slogdet(exact, a):
    node = _node_of(a)
    if node is None:
        return None
    logdet = _link(TENSOR_OPS["logdet"], exact[1], node)
    return type(exact)(exact[0], logdet)


def _r_solve(exact, a, b):
    na, nb = _node_of(a), _node_of(b)
    if na is None or nb is None:
        return None
    return _link(TENSOR_OPS["solve"], exact, na, nb, {"vec": np.ndim(_pv(b)) == 1})


def _r_cholesky(exact, a, /, *, upper=False):
    if upper or np.iscomplexobj(_pv(a)):  # (a Hermitian matrix: no rule yet)
        return None
    return _linalg_unary("cholesky")(exact, a)


def _r_eigh(exact, a, UPLO="L"):
    node = _node_of(a)
    if node is None:
        return None
    params = _triangle(UPLO)
    w = _link(TENSOR_OPS["eigvalsh"], exact[0], node, None, params)
    v = _link(TENSOR_OPS["eigvecs"], exact[1], node, None, params)
    return type(exact)(w, v)


def _r_eigvalsh(exact, a, UPLO="L"):
    node = _node_of(a)
    return (
        None if node is None else _link(TENSOR_OPS["eigvalsh"], exact, node, None, _triangle(UPLO))
    )


def _r_eig(exact, a):
    node = _node_of(a)
    if node is None:
        return None
    if not isinstance(exact, tuple):  # eigvals
        return _link(TENSOR_OPS["eig"], exact, node, None, {"part": 0})
    return type(exact)(
        *(_link(TENSOR_OPS["eig"], e, node, None, {"part": k}) for k, e in enumerate(exact))
    )


def _triangle(uplo):
    """The ops' params for the triangle numpy reads: none for the lower one (the default),
    ``uplo='U'`` for the upper one (numpy has refused any other ``UPLO`` already)."""
    return {"uplo": "U"} if uplo in ("U", "u") else None


def _r_svd(exact, a, full_matrices=True, compute_uv=True, hermitian=False):
    if hermitian:
        return None
    node = _node_of(a)
    if node is None:
        return None
    if not compute_uv:
        return _link(TENSOR_OPS["svdvals"], exact, node)
    s = _link(TENSOR_OPS["svdvals"], exact.S, node)
    m, n = np.shape(_pv(a))[-2:]
    # U's (or Vh's) extra columns are any basis: no derivative
    if full_matrices and m != n:
        u = _cut_result(exact.U, "the U of numpy.linalg.svd", (a,))
        vh = _cut_result(exact.Vh, "the Vh of numpy.linalg.svd", (a,))
    else:
        u = _link(TENSOR_OPS["svd_u"], exact.U, node)
        vh = _link(TENSOR_OPS["svd_vh"], exact.Vh, node)
    return type(exact)(u, s, vh)


def _r_matrix_power(exact, a, n):
    node = _node_of(a)
    n = _t._int(n)
    if n == 0:
        return exact  # the identity: a constant, no gradient lost
    if node is None:
        return None
    with _quiet_graph():
        base = _as_array_node(node) if n > 0 else np.linalg.inv(_as_array_node(node))
        out = base
        for _ in range(abs(n) - 1):
            out = out @ base
        return out


def _r_pinv(exact, a, rcond=None, hermitian=False, *, rtol=_NoValue):
    if rcond is not None or hermitian or rtol is not _NoValue or np.iscomplexobj(_pv(a)):
        return None
    return _linalg_unary("pinv")(exact, a)


def _r_norm_any(exact, x, ord=None, axis=None, keepdims=False):
    node = _node_of(x)
    if node is None:
        return None
    ndim = np.ndim(_pv(x))
    with _quiet_graph():
        if axis is None and ord is None:
            return np.sqrt(np.sum(abs2(node)))
        axes = tuple(range(ndim)) if axis is None else _t._axes(axis, ndim)
        if len(axes) == 1:
            a = axes
            if ord is None or ord == 2:
                return np.sqrt(np.sum(abs2(node), axis=a, keepdims=keepdims))
            if ord == np.inf:
                return np.max(np.abs(node), axis=a, keepdims=keepdims)
            if ord == -np.inf:
                return np.min(np.abs(node), axis=a, keepdims=keepdims)
            if ord == 0:
                return None
            p = float(ord)
            return np.sum(np.abs(node) ** p, axis=a, keepdims=keepdims) ** (1.0 / p)
        if len(axes) != 2:
            return None
        r, c = axes
        if ord is None or ord == "fro":
            return np.sqrt(np.sum(abs2(node), axis=axes, keepdims=keepdims))
        if keepdims:
            return None
        if ord in (1, -1):
            sums = np.sum(np.abs(node), axis=r)
            c2 = c - 1 if c > r else c
            return (np.max if ord == 1 else np.min)(sums, axis=c2)
        if ord in (np.inf, -np.inf):
            sums = np.sum(np.abs(node), axis=c)
            r2 = r - 1 if r > c else r
            return (np.max if ord == np.inf else np.min)(sums, axis=r2)
        if ord in (2, -2, "nuc"):
            matrices = np.moveaxis(_as_array_node(node), (r, c), (-2, -1))
            s = np.linalg.svd(matrices, compute_uv=False)
            if ord == "nuc":
                return np.sum(s, axis=-1)
            return (np.max if ord == 2 else np.min)(s, axis=-1)
        return None


# discrete Fourier transforms: along each axis, a product with the transform's matrix
def _dft(kind, m, n, norm):
    """``M`` (m, ·) with ``kind(x, n)[k] = sum_j x[j] M[j, k]`` for ``x`` of length m
    (cut or padded with zeros to n); an irfft is the real part of that sum (it reads its
    input as the first half of a Hermitian one: every other term counted twice)."""
    inverse = kind in ("ifft", "irfft")
    rows = min(m, n // 2 + 1 if kind == "irfft" else n)
    cols = n // 2 + 1 if kind == "rfft" else n
    j, k = np.arange(rows)[:, None], np.arange(cols)[None, :]
    out = np.zeros((m, cols), complex)
    out[:rows] = np.exp((2j if inverse else -2j) * np.pi * j * k / n)
    if kind == "irfft":  # the terms k and n - k: twice the real part of one
        out[1 : (n + 1) // 2] *= 2
    if norm == "ortho":
        return out / np.sqrt(n)
    return out / n if inverse == (norm != "forward") else out


def _r_fft(kind):
    def rule(exact, a, n=None, axis=-1, norm=None, out=None):
        node = _node_of(a)
        if node is None or out is not None:
            return None
        m = np.shape(_pv(a))[axis]
        n = (2 * (m - 1) if kind == "irfft" else m) if n is None else _t._int(n)
        with _quiet_graph():
            y = np.moveaxis(_as_array_node(node), axis, -1) @ _dft(kind, m, n, norm)
            return np.moveaxis(np.real(y) if kind == "irfft" else y, -1, axis)

    return rule


def _r_fftn(kind, every=None):
    """The n-dimensional transform: the one-dimensional one along each axis, as numpy does
    (an rfftn's rfft first, an irfftn's irfft last)."""

    def rule(exact, a, s=None, axes=every, norm=None, out=None):
        shape = np.shape(_pv(a))
        if out is not None or s is not None and None in s:
            return None
        if s is None:
            axes = range(len(shape)) if axes is None else axes
            s = [shape[k] for k in axes]
            s[-1] = 2 * (s[-1] - 1) if kind == "irfft" else s[-1]
        axes = list(range(-len(s), 0) if axes is None else axes)
        f = np.fft.ifft if kind[0] == "i" else np.fft.fft
        steps = [(f, i) for i in range(len(s))]
        if kind in ("rfft", "irfft"):  # the real axis, the last: its transform first or last
            real = (getattr(np.fft, kind), len(s) - 1)
            steps = [real] + steps[:-1] if kind == "rfft" else steps[:-1] + [real]
        with _quiet_graph():
            y = _node_of(a)
            for f, i in steps:
                y = f(y, _t._int(s[i]), axes[i], norm)
            return y

    return rule


def _r_fftshift(sign):
    def rule(exact, x, axes=None):
        shape = np.shape(_pv(x))
        axes = range(len(shape)) if axes is None else [axes] if np.ndim(axes) == 0 else axes
        with _quiet_graph():
            return np.roll(_node_of(x), [sign * (shape[k] // 2) for k in axes], tuple(axes))

    return rule


FUNCTION_RULES.update(
    {
        np.dot: _r_dot_any,
        np.linalg.norm: _r_norm_any,
        np.cross: _r_cross,
        np.sinc: _linalg_unary("sinc"),
        np.einsum: _r_einsum,
        np.inner: _r_inner,
        np.outer: _r_outer,
        np.vdot: _r_vdot,
        np.tensordot: _r_tensordot,
        np.kron: _r_kron,
        np.linalg.inv: _linalg_unary("inv"),
        np.linalg.det: _linalg_unary("det"),
        np.linalg.slogdet: _r_slogdet,
        np.linalg.solve: _r_solve,
        np.linalg.cholesky: _r_cholesky,
        np.linalg.eigh: _r_eigh,
        np.linalg.eigvalsh: _r_eigvalsh,
        np.linalg.eig: _r_eig,
        np.linalg.eigvals: _r_eig,
        np.linalg.svd: _r_svd,
        np.linalg.pinv: _r_pinv,
        np.linalg.matrix_power: _r_matrix_power,
        np.fft.fftshift: _r_fftshift(1),
        np.fft.ifftshift: _r_fftshift(-1),
        **{getattr(np.fft, k): _r_fft(k) for k in ("fft", "ifft", "rfft", "irfft")},
        **{getattr(np.fft, k + "n"): _r_fftn(k) for k in ("fft", "ifft", "rfft", "irfft")},
        **{
            getattr(np.fft, k + "2"): _r_fftn(k, (-2, -1)) for k in ("fft", "ifft", "rfft", "irfft")
        },
    }
)
