"""Fixtures shared by the test modules, and how the suite runs in parallel.

``make test`` runs the suite on several processes (pytest-xdist, ``-n auto --dist
loadgroup``): tests are handed out one by one, except those of a module whose module-scoped
fixture is costly or holds a process (a JupyterLab and a Notebook server and a browser, an
executed notebook), which stay together on one worker so that it is made once, and the
tests that grade (each grade runs a child process, and some count the grading children
left on the machine, or time a grade), which run one after another on one worker. Every
worker has its own IPython shell, its own kept ``dot`` process and its own temporary
directories; the browser tests' servers take free ports.
"""

import pytest

# modules whose tests run together on one worker: module name -> group
_TOGETHER = {
    "test_browser.py": "browser",
    "test_browser_torch.py": "browser-torch",
    "test_teaching.py": "teaching",
    "test_homework.py": "grade",
    "test_grade.py": "grade",
    "test_grade_attacks.py": "grade",
    "test_graders.py": "grade",
    "test_packaging.py": "grade",  # its installed wheel grades a cell too
    "test_quickstart.py": "quickstart",  # one fresh venv for both
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        group = _TOGETHER.get(item.path.name)
        if group:
            # a browser test of JupyterLab and one of Notebook 7 need different servers:
            # each front-end's tests share theirs, and the two run side by side
            callspec = getattr(item, "callspec", None)
            app = callspec.params.get("server") if callspec else None
            item.add_marker(pytest.mark.xdist_group(f"{group}-{app}" if app else group))


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
