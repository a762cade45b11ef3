"""Fixtures shared by the test modules, and how the suite runs in parallel.

``make test`` runs the suite on several processes (pytest-xdist, ``-n auto``), tests handed
out one by one. Every worker has its own IPython shell, its own kept ``dot`` process, its own
temporary directories and, for the browser tests, its own servers on free ports; the wheel is
built from a private copy of the checkout (``building.build_wheel``), so two builds at once
do not meet in its build/.
"""

import pytest


@pytest.fixture(autouse=True)
def _unhurried_torch_checks(request, monkeypatch):
    """In the PyTorch tests, the checks' time budget is generous (see
    ``torch_corpus.unhurried_checks``); a test of the budget sets its own."""
    if "torch" not in request.node.path.name:
        return
    try:
        from gradmagic.analysis import torchcheck_run
    except ImportError:  # no torch: those tests skip
        return
    monkeypatch.setattr(torchcheck_run, "BUDGET", 60.0)


@pytest.fixture(autouse=True)
def _unhurried_reruns(request, monkeypatch):
    """The plain re-runs' time budget is generous too, so that on a loaded machine a test
    still sees every input moved alone; a test of the budget (its name says so) keeps it."""
    if "budget" in request.node.name:
        return
    from gradmagic.notebook import rerun

    monkeypatch.setattr(rerun, "BUDGET", 30.0)


def _central_differences(f, xs, eps=1e-6):
    """d f / d xs[i] for each i, by central differences with a step scaled to xs[i]."""
    xs = [float(x) for x in xs]
    grads = []
    for i, x in enumerate(xs):
        h = eps * max(1.0, abs(x))
        up, down = list(xs), list(xs)
        up[i], down[i] = x + h, x - h
        grads.append((f(up) - f(down)) / (2 * h))
    return grads


@pytest.fixture
def numgrad():
    """``numgrad(f, xs, eps=1e-6)``: central-difference gradient of ``f(list) -> float``."""
    return _central_differences


@pytest.fixture
def torch64():
    """PyTorch with float64 as the default dtype (the test is skipped without torch)."""
    torch = pytest.importorskip("torch")
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield torch
    torch.set_default_dtype(before)


@pytest.fixture
def ip():
    """IPython's test shell with gradmagic loaded, for one test.

    The shell is one per process and outlives the test, so the names a test makes are
    removed after it and the last run is forgotten: no test sees another's names.
    """
    from IPython.testing import globalipapp

    from gradmagic.notebook import session

    shell = globalipapp.get_ipython()
    before = set(shell.user_ns)
    shell.run_line_magic("load_ext", "gradmagic")
    yield shell
    shell.run_line_magic("unload_ext", "gradmagic")
    for name in set(shell.user_ns) - before:
        del shell.user_ns[name]
    session.last = None
