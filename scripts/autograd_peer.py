"""HIPS autograd's own test files run against gradmagic: every case they hand to
``check_grads``, differentiated by gradmagic (the function's own ``def`` rewritten, as
``gradmagic.autograd(f)`` runs it), by HIPS autograd and by central differences of the
plain numpy code (``tests/autograd_check.py`` says what right, marked and wrong mean).

Usage: python scripts/autograd_peer.py PATH [FILE ...]

PATH is a checkout of HIPS autograd (or its bare git directory); the FILEs are test files
(by default test_numpy, test_scalar_ops, test_linalg, test_systematic, test_binary_ops,
test_list, test_tuple, test_dict and test_fft). A case whose function calls HIPS autograd
itself (grad of grad, its own container types) is left out and counted apart. Prints the
counts, real and complex inputs apart, and each case that is not right.
"""

import ast
import functools
import importlib
import inspect
import itertools
import os
import subprocess
import sys
import tempfile
import textwrap
import types
import warnings
from collections import Counter

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import autograd  # noqa: E402
import autograd.numpy as anp  # noqa: E402
import autograd.test_util  # noqa: E402
from autograd_check import _rebuilt, leaves  # noqa: E402

import gradmagic  # noqa: E402
from gradmagic.notebook.api import _default_names  # noqa: E402

FILES = "numpy scalar_ops linalg systematic binary_ops list tuple dict fft".split()
AUTOGRAD_ONLY = {"grad", "ag_tuple", "ag_list", "ag_isinstance", "make_diagonal", "_dot"}
PLAIN = {"autograd.numpy": np, "autograd.numpy.linalg": np.linalg, "autograd.numpy.fft": np.fft}
PLAIN["autograd.numpy.random"] = np.random
OURS = {"autograd.numpy.linalg": anp.linalg, "autograd.numpy.fft": anp.fft}


def record(path, files):
    """(test, function, argnum, args, kwargs) of each check_grads call the tests make."""
    cases, where = [], [""]

    def check_grads(fun, argnum=0, modes=None, order=2):
        argnum = tuple(argnum) if isinstance(argnum, list) else argnum
        return lambda *args, **kw: cases.append((where[0], fun, argnum, args, kw))

    autograd.test_util.check_grads = check_grads
    sys.path.insert(0, path)
    for name in files:
        for test, run in vars(importlib.import_module(name)).items():
            if test.startswith("test_") and callable(run) and "not_implemented" not in test:
                for params in _parameters(run):
                    where[0] = f"{name}::{test}"
                    np.random.seed(42)
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            run(**params)
                    except BaseException as e:  # noqa: BLE001 - pytest's own checks, failing
                        print(f"{where[0]} stopped: {e!r:.100}")
    return cases


def _parameters(test):
    """The keyword sets pytest's parametrize marks give ``test`` (one empty set if none)."""
    out = [{}]
    for mark in getattr(test, "pytestmark", []):
        if mark.name == "parametrize":
            names = [n.strip() for n in mark.args[0].split(",")]
            values = [v if len(names) > 1 else (v,) for v in mark.args[1]]
            out = [{**o, **dict(zip(names, v))} for o in out for v in values]
    return out


def plain(obj, memo):
    """``obj`` with HIPS autograd's numpy replaced by numpy (functions rebuilt over it)."""
    if isinstance(obj, types.ModuleType):
        return PLAIN.get(obj.__name__, obj)
    if getattr(obj, "_is_autograd_primitive", False):
        return obj.fun
    if isinstance(obj, functools.partial):
        return functools.partial(plain(obj.func, memo), *obj.args, **obj.keywords)
    if not isinstance(obj, types.FunctionType) or id(obj) in memo:
        return memo.get(id(obj), obj)
    module = obj.__module__ or ""
    if module.startswith("autograd.numpy"):  # a wrapper: numpy's function of that name
        home, theirs = PLAIN.get(module, np), OURS.get(module, anp)
        names = [n for n in dir(theirs) if getattr(theirs, n) is obj and hasattr(home, n)]
        return getattr(home, names[0]) if names else obj
    if module.startswith("autograd"):
        return obj
    home: dict = {}
    cells = tuple(types.CellType(plain(c.cell_contents, memo)) for c in obj.__closure__ or ())
    new = types.FunctionType(obj.__code__, home, obj.__name__, obj.__defaults__, cells or None)
    new.__kwdefaults__ = obj.__kwdefaults__
    memo[id(obj)] = new
    for k, v in obj.__globals__.items():
        home[k] = plain(v, memo) if callable(v) or isinstance(v, types.ModuleType) else v
    return new


def names_of(code):
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= names_of(c)
    return names


def outputs(out):
    if isinstance(out, dict):
        return [x for k in out for x in outputs(out[k])]
    if isinstance(out, (list, tuple)):
        return [x for v in out for x in outputs(v)]
    return [out]


def target(xp, out, weights):
    """The weighted sum of the output's numbers (real and imaginary parts apart)."""
    total = 0.0
    for o, (w0, w1) in zip(outputs(out), weights):
        total = total + xp.sum(xp.real(o) * w0)
        total = total + (0.0 if w1 is None else xp.sum(xp.imag(o) * w1))
    return total


def quiet(f, *args, **kwargs):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f(*args, **kwargs)


def central(f, args, kwargs, weights, i, eps=1e-6):
    """d/d(real part) − i d/d(imaginary part) of the plain loss, for each number of args[i]."""
    numbers = [
        np.array(v, complex if np.iscomplexobj(v) else float) for _, v in leaves(args[i], "")
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
                    at = list(args)
                    at[i] = _rebuilt(args[i], iter(m if m.ndim else m[()] for m in moved))
                    sides.append(
                        np.real(quiet(lambda at=at: target(np, f(*at, **kwargs), weights)))
                    )
                g[k] += (sides[0] - sides[1]) / (2 * eps) * (1 if step == 1.0 else -1j)
        grads.append(g)
    return grads


def _close(a, b) -> bool:
    return np.shape(a) == np.shape(b) and np.allclose(a, b, 1e-5, 1e-5)


def source_of(f):
    """``f``'s own def, dedented, as gradmagic.autograd(f) rewrites it (None: called as is)."""
    if not isinstance(f, types.FunctionType) or f.__name__ == "<lambda>":
        return None
    try:
        text = textwrap.dedent(inspect.getsource(f))
        tree = ast.parse(text)
    except (OSError, TypeError, SyntaxError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return None
    return "".join(text.splitlines(True)[tree.body[0].lineno - 1 :])


def unshared(args):
    """Each argument its own input, as gradmagic.autograd(f) makes them."""
    seen, out = set(), []
    for a in args:
        if id(a) in seen and isinstance(a, (np.ndarray, float)):
            a = a.copy() if isinstance(a, np.ndarray) else float.fromhex(a.hex())
        seen.add(id(a))
        out.append(a)
    return tuple(out)


def evaluate(case, seed):
    _, fun, argnum, args, kwargs = case
    f = plain(fun, {})
    if (isinstance(fun, types.FunctionType) and names_of(fun.__code__) & AUTOGRAD_ONLY) or (
        getattr(f, "__module__", "") or ""
    ).startswith("autograd"):
        return "its own", "calls HIPS autograd itself"
    args, nums = unshared(args), argnum if isinstance(argnum, tuple) else (argnum,)
    out = quiet(f, *args, **kwargs)
    rng = np.random.default_rng(seed)
    weights = [
        (rng.standard_normal(np.shape(o)), rng.standard_normal(np.shape(o)))
        if np.iscomplexobj(o)
        else (rng.standard_normal(np.shape(o)), None)
        for o in outputs(out)
    ]
    names = [f"a{i}" for i in range(len(args))]
    cell, ns = f"out = fn({', '.join(names)}, **kw)\nL = T(np, out, W)\nL\n", {}
    text = source_of(f)
    if text is not None:
        ns.update({k: v for k, v in f.__globals__.items() if not k.startswith("__")})
        ns.update(zip(f.__code__.co_freevars, (c.cell_contents for c in f.__closure__ or ())))
        ns.update(_default_names(f, text))
        cell = f"{text}fn = {f.__name__}\n{cell}"
    ns.update(np=np, fn=f, T=target, W=weights, kw=kwargs, **dict(zip(names, args)))
    try:
        run = quiet(gradmagic.autograd(cell, check=False), **ns)
    except Exception as e:  # noqa: BLE001 - a difference from the plain code
        return "wrong", f"raised {e!r:.200}"
    said = list(run.trace.warnings) + [str(n) for n in run.trace.cut_notes.values()]
    if not np.isclose(np.real(run.value), np.real(quiet(target, np, out, weights)), 1e-9, 1e-12):
        return ("marked" if said else "wrong"), "the value differs"
    try:
        theirs = quiet(
            autograd.grad(lambda *a: target(anp, fun(*a, **kwargs), weights), argnum), *args
        )
        theirs = theirs if isinstance(argnum, tuple) else (theirs,)
    except Exception:  # noqa: BLE001 - HIPS autograd does not take it
        theirs = [None] * len(nums)
    problems = []
    for i, ref in zip(nums, theirs):
        refs = itertools.repeat(None) if ref is None else [g for _, g in leaves(ref, "")]
        for (path, _), want, r in zip(
            leaves(args[i], f"a{i}"), central(f, args, kwargs, weights, i), refs
        ):
            got = run.trace.grads.get(path)
            if got is None and not np.allclose(want, 0.0, atol=1e-5):
                problems.append(f"{path}: no gradient")
            elif got is not None and not any(_close(got, w) for w in (want, r) if w is not None):
                problems.append(f"{path}: {np.ravel(got)[:3]} where it is {np.ravel(want)[:3]}")
    if not problems:
        return ("right", "") if not said else ("right, warned", said[0])
    return ("marked" if said else "wrong"), "; ".join(problems)


def tests_at(path, files) -> str:
    """A directory holding the test files of the checkout (or bare git directory) ``path``."""
    if os.path.isdir(os.path.join(path, "tests")):
        return os.path.join(path, "tests")
    out = tempfile.mkdtemp()
    for name in ["numpy_utils", *files]:
        text = subprocess.run(
            ["git", "--git-dir", path, "show", f"HEAD:tests/{name}.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        with open(os.path.join(out, f"{name}.py"), "w") as f:
            f.write(text)
    return out


def main(argv):
    if not argv:
        raise SystemExit(__doc__)
    files = [f if f.startswith("test_") else f"test_{f}" for f in argv[1:] or FILES]
    cases = record(tests_at(argv[0], files), files)
    counts: Counter = Counter()
    for seed, case in enumerate(cases):
        status, detail = evaluate(case, seed)
        wrt = case[2] if isinstance(case[2], tuple) else (case[2],)
        numbers = [v for i in wrt for _, v in leaves(case[3][i], "")]
        kind = "complex" if any(np.iscomplexobj(v) for v in numbers) else "real"
        counts[kind, status] += 1
        if status != "right":
            print(f"{status}: {case[0]} {kind} {detail:.300}")
    for kind in ("real", "complex"):
        mine = {s: n for (k, s), n in counts.items() if k == kind}
        print(f"{kind} inputs: {mine} of {sum(mine.values())}")


if __name__ == "__main__":
    main(sys.argv[1:])
