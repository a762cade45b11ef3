"""One case of the corpus (``tests/autograd_corpus.py``) differentiated three ways: by
gradmagic (``gradmagic.autograd`` on the cell), by HIPS autograd, and by central
differences of the plain numpy code; the outcome says which of them agree.

- ``right``: gradmagic gives every input's gradient, equal to central differences and to
  HIPS autograd's (an input the target does not reach has gradient 0);
- ``marked``: gradmagic gives no gradient, or a wrong one, for an input, and says so (a
  warning or a cut names the place);
- ``wrong``: a gradient is missing or differs with nothing said.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from autograd_corpus import Case, F, Z

import gradmagic

RTOL = ATOL = 1e-5


@dataclass
class Outcome:
    status: str  # right, marked, wrong
    detail: str = ""


def inputs_of(case: Case, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        name: _make(spec, case.lims(i), rng) for i, (name, spec) in enumerate(case.specs.items())
    }


def _make(spec, lims, rng):
    lo, hi = lims
    if spec == F:
        return float(rng.uniform(lo, hi))
    if spec == Z:
        return complex(rng.uniform(lo, hi), 0.1 * rng.uniform(lo, hi))
    if isinstance(spec, dict):
        return {k: _make(v, lims, rng) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_make(v, lims, rng) for v in spec]
    if isinstance(spec, tuple) and spec and spec[0] == Z:
        shape = spec[1]
        return rng.uniform(lo, hi, shape) + 0.1j * rng.uniform(lo, hi, shape)
    if isinstance(spec, tuple) and spec and not isinstance(spec[0], int):
        return tuple(_make(v, lims, rng) for v in spec)
    return rng.uniform(lo, hi, spec)


def leaves(x, path):
    """(path, number or array) of each number ``x`` holds, in the order of its paths."""
    if isinstance(x, dict):
        return [leaf for k in x for leaf in leaves(x[k], f"{path}[{k!r}]")]
    if isinstance(x, (list, tuple)):
        return [leaf for i, v in enumerate(x) for leaf in leaves(v, f"{path}[{i}]")]
    return [(path, x)]


def _rebuilt(x, values):
    """``x`` with its numbers replaced, in order, by ``values`` (an iterator)."""
    if isinstance(x, dict):
        return {k: _rebuilt(v, values) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_rebuilt(v, values) for v in x)
    v = next(values)
    return v.item() if isinstance(x, (float, complex)) else v


def _target(xp, out, weights):
    if np.iscomplexobj(out):
        return xp.sum(xp.real(out) * weights[0]) + xp.sum(xp.imag(out) * weights[1])
    return xp.sum(out * weights[0])


def plain_loss(case: Case, values: dict, weights):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        out = eval(case.family.expr, {"np": np}, {**values, **case.keywords})
    return float(np.real(_target(np, np.asarray(out), weights)))


def central(case: Case, values: dict, weights, name: str, eps=1e-6):
    """Central differences of the plain loss for each number of the input ``name``; a
    complex number gets d/d(real part) − i d/d(imaginary part), HIPS autograd's gradient."""
    numbers = [
        np.array(v, dtype=complex if np.iscomplexobj(v) else float)
        for _, v in leaves(values[name], name)
    ]
    grads = []
    for j, arr in enumerate(numbers):
        g = np.zeros(arr.shape, arr.dtype)
        for k in np.ndindex(arr.shape):
            for step in (1.0, 1j) if np.iscomplexobj(arr) else (1.0,):
                sides = []
                for sign in (1, -1):
                    moved = [a.copy() for a in numbers]
                    moved[j][k] += sign * eps * step
                    parts = iter(m if m.ndim else m[()] for m in moved)
                    sides.append(
                        plain_loss(case, {**values, name: _rebuilt(values[name], parts)}, weights)
                    )
                g[k] += (sides[0] - sides[1]) / (2 * eps) * (1 if step == 1.0 else -1j)
        grads.append(g)
    return grads


def hips(case: Case, values: dict, weights, names):
    """HIPS autograd's gradient of the loss with respect to each input of ``names``."""
    import autograd
    import autograd.numpy as anp

    order = list(values)

    def loss(*args):
        scope = {**dict(zip(order, args)), **case.keywords}
        out = eval(case.family.expr, {"np": anp}, scope)
        return _target(anp, out, weights)

    argnums = tuple(order.index(n) for n in names)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            grads = autograd.grad(loss, argnums)(*values.values())
    except Exception:  # noqa: BLE001 - a function or input HIPS autograd does not take
        return None
    return dict(zip(names, grads))


def ours(case: Case, values: dict, weights):
    """gradmagic's run of the case's cell (the inputs and keywords are the names it reads)."""
    cell = f"out = {case.family.expr}\n"
    if len(weights) == 2:
        cell += "L = np.sum(np.real(out) * W0) + np.sum(np.imag(out) * W1)\nL"
    else:
        cell += "L = np.sum(out * W0)\nL"
    named = {f"W{i}": w for i, w in enumerate(weights)}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return gradmagic.autograd(cell, check=False)(np=np, **values, **case.keywords, **named)


def weights_for(case: Case, values: dict, seed: int):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        out = np.asarray(eval(case.family.expr, {"np": np}, {**values, **case.keywords}))
    rng = np.random.default_rng(seed + 1)
    count = 2 if np.iscomplexobj(out) else 1
    return [rng.standard_normal(out.shape) for _ in range(count)]


def outcome(case: Case, seed: int = 0) -> Outcome:
    values = inputs_of(case, seed)
    weights = weights_for(case, values, seed)
    names = list(case.wrt)
    run = ours(case, values, weights)
    said = list(run.trace.warnings) + [str(n) for n in run.trace.cut_notes.values()]
    if not np.isclose(
        float(np.real(run.value)), plain_loss(case, values, weights), rtol=1e-9, atol=1e-12
    ):
        return Outcome("marked" if said else "wrong", "the value differs from the plain code's")
    theirs = hips(case, values, weights, names)
    grads = run.trace.grads
    problems, notes = [], []
    if theirs is None:
        notes.append("HIPS autograd gives no gradient")
    for name in names:
        expected = central(case, values, weights, name)
        reference = [None] * len(expected)
        if theirs is not None:
            reference = [g for _, g in leaves(theirs[name], name)]
        for (path, _), want, ref in zip(leaves(values[name], name), expected, reference):
            if ref is not None and not np.allclose(want, ref, rtol=1e-4, atol=1e-4):
                notes.append(f"{path}: HIPS autograd's gradient is not central differences'")
            got = grads.get(path)
            if got is None:
                if not np.allclose(want, 0.0, atol=ATOL):
                    problems.append(f"{path}: no gradient")
            elif np.shape(got) != np.shape(want) or not np.allclose(
                got, want, rtol=RTOL, atol=ATOL
            ):
                problems.append(f"{path}: {got} where it is {want}")
    if not problems:
        return Outcome("right", "; ".join(notes + [f"said: {s}" for s in said]))
    return Outcome("marked" if said else "wrong", "; ".join(problems + notes))


# --------------------------------------------------------------------------- the docs' table
START = "<!-- the corpus table: made by scripts/numpy_status.py, do not edit -->"
END = "<!-- end of the corpus table -->"


def run_all(cases):
    """Each case's outcome, in the corpus's order (its index is its seed)."""
    return [outcome(case, seed) for seed, case in enumerate(cases)]


def _functions(expr: str) -> list[str]:
    import re

    names = re.findall(r"np\.((?:linalg\.|fft\.)?[a-z_0-9]+)\(", expr)
    operators = [f"`{op}`" for op in ("+", "-", "*", "/", "**", "%", "@") if f" {op} " in expr]
    return [f"`{n}`" for n in dict.fromkeys(names)] + operators


def _how(name: str) -> str:
    """How gradmagic differentiates numpy's ``name``: from its rules' tables."""
    from gradmagic.core import array, tensor

    f = np
    for part in name.strip("`").split("."):
        f = getattr(f, part, None)
    if f is None:
        return "operator"
    if f in array.FUNCTION_RULES:
        return "rule"
    if isinstance(f, np.ufunc) and tensor.has_rule(f):
        return "op"
    if f in array._UFUNC_EXTRA:
        return "op"
    if f in array._VALUE_FUNCTIONS or f in tensor._UFUNC_VALUES:
        return "step (gradient 0)"
    return "none"


def _ruled() -> list[str]:
    """The public names of numpy's functions that have a rule (``FUNCTION_RULES``)."""
    from gradmagic.core import array

    names = []
    for module, prefix in ((np, ""), (np.linalg, "linalg."), (np.fft, "fft.")):
        for name in dir(module):
            f = getattr(module, name)
            if name[0] != "_" and callable(f) and _has_rule(array.FUNCTION_RULES, f):
                names.append(f"`{prefix}{name}`")
    return names


def _has_rule(rules, f) -> bool:
    try:
        return f in rules
    except TypeError:  # unhashable
        return False


def status_table(cases, outcomes) -> str:
    """The docs' table: each numpy function the corpus calls or that has a rule, how
    gradmagic differentiates it, and its cases by outcome (real and complex inputs apart);
    the totals first."""
    rows: dict = {name: {False: {}, True: {}} for name in _ruled()}
    totals = {False: {}, True: {}}
    for case, out in zip(cases, outcomes):
        t = totals[case.complex]
        t[out.status] = t.get(out.status, 0) + 1
        for name in _functions(case.family.expr):
            row = rows.setdefault(name, {False: {}, True: {}})[case.complex]
            row[out.status] = row.get(out.status, 0) + 1

    def cell(counts, other=None):
        n = sum(counts.values())
        if not n:
            return "not in the corpus" if other is not None and not sum(other.values()) else ""
        parts = [f"{counts.get('right', 0)}/{n} right"]
        parts += [f"{counts[k]} {k}" for k in ("marked", "wrong") if counts.get(k)]
        return ", ".join(parts)

    def share(counts):
        n = sum(counts.values())
        return f"{100.0 * counts.get('right', 0) / n:.1f}% right of {n}" if n else "none"

    lines = [
        START,
        "",
        f"Real inputs: {share(totals[False])}, {totals[False].get('wrong', 0)} wrong "
        f"without a mark. Complex inputs: {share(totals[True])}, "
        f"{totals[True].get('wrong', 0)} wrong without a mark.",
        "",
        "| function | gradmagic's rule | real inputs | complex inputs |",
        "| --- | --- | --- | --- |",
    ]
    for name in sorted(rows, key=lambda n: n.strip("`").lower()):
        row = rows[name]
        real, other = cell(row[False], row[True]), cell(row[True])
        lines.append(f"| {name} | {_how(name)} | {real} | {other} |")
    lines += ["", END]
    return "\n".join(lines)
