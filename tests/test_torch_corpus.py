"""PyTorch cells (tests/torch_corpus.py) run plainly and under ``%%autograd``, each way in a
process of its own: what a user can see must be the same, the random generators included."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

import torch_corpus  # noqa: E402

HERE = Path(__file__).parent


def _run(mode: str, options: str) -> list:
    done = subprocess.run(
        [sys.executable, str(HERE / "torch_corpus.py"), mode, *options.split()],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _differences(plain: list, magic: list, shown: bool = False) -> list:
    """What differs; with ``shown`` (the view on) not what a magic cell printed, which
    includes the view's text."""
    found = []
    for name, cells_a, cells_b in zip(torch_corpus.SEQUENCES, plain, magic):
        cells = torch_corpus.SEQUENCES[name]
        for i, (a, b) in enumerate(zip(cells_a, cells_b)):
            for key in a:
                if shown and key == "printed" and cells[i][0] == "magic" and b["error"] is None:
                    continue
                if a[key] != b[key]:
                    found.append(f"{name}, cell {i}, {key}: {a[key]!r:.300} vs {b[key]!r:.300}")
    return found


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The plain run, made once per test session: xdist's workers share it through their
    session's folder (each would otherwise run the whole corpus plainly)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _run("plain", "")
    import fcntl
    import hashlib

    shared = tmp_path_factory.getbasetemp().parent  # (this session's, one for all workers)
    key = hashlib.sha1(Path(torch_corpus.__file__).read_bytes()).hexdigest()[:16]
    path = shared / f"torch-corpus-plain-{key}.json"
    with open(shared / "torch-corpus-plain.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            path.write_text(json.dumps(_run("plain", "")))
    return json.loads(path.read_text())


@pytest.mark.parametrize("options", ["-q", "-q --no-check", ""])
def test_torch_cells_run_as_without_the_magic(plain, options):
    magic = _run("magic", options)
    assert len(magic) == len(plain) == len(torch_corpus.SEQUENCES)
    assert _differences(plain, magic, shown="-q" not in options) == []
    if options == "":  # (the checks are made and the view is on: one run serves both)
        _no_gradient_is_called_wrong(magic)


def _no_gradient_is_called_wrong(magic):
    """What the checks say of real code's gradients is true: nothing correct is shown red."""
    failed = [
        f"{name}, cell {i}: {c['shown']}"
        for name, cells in zip(torch_corpus.SEQUENCES, magic)
        for i, c in enumerate(cells)
        if c.get("shown")
        and (
            c["shown"]["whole"]["status"] == "fail" or any(" fail" in o for o in c["shown"]["ops"])
        )
    ]
    assert failed == []
    checked = [c for cells in magic for c in cells if c.get("shown")]
    assert sum(c["shown"]["whole"]["status"] == "pass" for c in checked) >= 30
    # and every view is drawn: the live view's bundle, no error
    views = [c["view"] for cells in magic for c in cells if "view" in c]
    assert len(views) >= 40
    assert {v for v in views if "widget-view+json" not in v} == set()


@pytest.mark.parametrize("name, i", torch_corpus.GRADIENT_CELLS)
def test_the_gradients_shown_are_plain_pytorchs(name, i):
    found = torch_corpus.gradients(name, i)
    assert len(found) >= 1
    for key, (shown, plain) in found.items():
        assert (shown is None) == (plain is None), key
        if shown is not None:
            np.testing.assert_array_equal(shown, plain, err_msg=key)


def test_the_corpus_would_see_a_difference(plain):
    """The comparison is not blind: one cell's .grad changed is found."""
    changed = json.loads(json.dumps(plain))
    names = changed[0][2]["names"]
    names["W1"]["tensor"]["grad"] = "0" * 16
    assert _differences(plain, changed)


def _record(setup: str, cell: str):
    from IPython.core.interactiveshell import InteractiveShell

    import gradmagic

    shell = InteractiveShell()
    shell.run_line_magic("load_ext", "gradmagic")
    assert shell.run_cell(setup).success
    result = shell.run_cell(f"%%autograd -q\n{cell}")
    assert result.success, result.error_in_exec
    return gradmagic.last


def test_a_backward_the_cell_did_not_ask_for_is_not_run_where_it_would_show():
    setup = "import torch\nx = torch.randn(3, requires_grad=True)\ncalls = []\n"
    run = _record(
        setup + "h = x.register_hook(lambda g: calls.append(1))",
        "y = (x * 2).tanh()\ny.retain_grad()\nloss = y.sum()\nloss",
    )
    assert run.no_gradients
    assert "retain_grad()" in run.warnings[-1] and "a hook on x" in run.warnings[-1]
    # and with nothing of the user's on the way, the gradients are computed
    run = _record(setup, "loss = (x * 2).tanh().sum()\nloss")
    mean = float(run.grad_stats[run.params[0], 0])
    assert not run.no_gradients and math.isfinite(mean) and mean != 0


def test_a_graph_the_cell_freed_is_said_not_raised():
    run = _record(
        "import torch\nw = torch.randn(3, requires_grad=True)",
        "y = w * 2\ny.sum().backward()\nloss = y.sum()\nloss",
    )
    assert run.no_gradients and "cannot be run" in run.warnings[-1]


def test_module_names_of_any_length_or_text_are_drawn_escaped_and_clipped():
    from gradmagic.views import torchview

    names = ["<img src=x onerror=alert(1)>", 'q"]; "v9" [label="pwn', "x\\", "m" * 3000]
    run = _record(
        "import torch, torch.nn as nn\nnames = "
        + repr(names)
        + "\nm = nn.ModuleDict({k: nn.Linear(2, 2) for k in names})\nx = torch.randn(3, 2)",
        "h = x\nfor k in names:\n    h = m[k](h).tanh()\nloss = h.sum()\nloss",
    )
    source = torchview.payload(run)["dot"]
    assert max(len(line) for line in source.splitlines()) < 400
    svg = __import__("gradmagic.views.render", fromlist=["svg"]).svg(source)
    assert "<img" not in svg and "&lt;img src=x" in svg
    assert "pwn" in svg and 'label="pwn' not in svg.replace("&quot;", '"').split("<text")[0]
    assert len([t for t in svg.split("<text")[1:] if "linear" in t]) == len(names)


def test_a_cell_that_would_hold_too_much_runs_plain_and_says_so(monkeypatch, capsys):
    """A loop of steps whose graphs a plain run frees would stay alive in the record: past
    its budget the record stops and lets go, and the cell runs on as it is."""
    import torch
    from IPython.core.interactiveshell import InteractiveShell
    from torch.overrides import _get_current_function_mode_stack

    import gradmagic
    from gradmagic.analysis import torchrecord

    monkeypatch.setattr(torchrecord, "HOLD_BYTES", 1 << 20)
    setup = "import torch\ntorch.manual_seed(0)\nW = torch.randn(64, 64, requires_grad=True)"
    cell = (
        "acc = 0.0\nfor i in range(100):\n    acc += float((torch.randn(64, 64) @ W).tanh()"
        ".mean().detach())\nloss = (W * acc).sum()\nloss"
    )
    values = []
    for header in ("", "%%autograd\n"):
        shell = InteractiveShell()
        shell.run_line_magic("load_ext", "gradmagic")
        assert shell.run_cell(setup).success
        result = shell.run_cell(header + cell)
        assert result.success
        values.append((shell.user_ns["acc"], result.result))
        if header:
            assert gradmagic.last is None
            assert "stopped at line 4" in capsys.readouterr().out
            assert not shell.user_ns["W"]._backward_hooks
            assert _get_current_function_mode_stack() == []
            assert torch.autograd.Function.__dict__["apply"].__func__.__qualname__ == (
                "Function.apply"
            )
        shell.clear_instance()
    (acc, shown), (acc_m, shown_m) = values
    assert acc == acc_m and torch.equal(shown, shown_m)


def test_the_checks_of_a_long_cell_or_a_big_op_are_not_made(monkeypatch):
    """Their float64 replays would take many times the cell's own time: they say so."""
    from gradmagic.analysis import torchcheck_run

    monkeypatch.setattr(torchcheck_run, "WHOLE_COST", 1e9)
    monkeypatch.setattr(torchcheck_run, "OP_ELEMENTS", 100)
    run = _record(
        "import torch\nW = torch.randn(8, 8, requires_grad=True)\nv = torch.randn(3, requires_grad=True)",
        "loss = (W @ W).tanh().sum() + (v * 2).sum()\nloss",
    )
    whole, ops = run.checks["whole"], run.checks["ops"]
    assert whole["status"] == "skipped" and "replaying it in float64" in whole["why"]
    why = {run.ops[k].name: r.get("why", r["status"]) for k, r in ops.items()}
    assert why["matmul"].startswith("too big to replay") and why["mul"] == "pass"


def test_the_gradients_shown_match_central_differences_in_float64():
    """An attention block with a LayerNorm and a custom Function, in float64: each shown
    gradient entry against a central difference of the plain function."""
    import torch

    setup = (
        "import torch, torch.nn.functional as F, math\n"
        "class Cube(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x)\n        return x ** 3\n    @staticmethod\n"
        "    def backward(ctx, g):\n        x, = ctx.saved_tensors\n        return 3 * x * x * g\n"
        "g = torch.Generator().manual_seed(3)\n"
        "x = torch.randn(2, 4, 6, dtype=torch.float64, generator=g)\n"
        "Wq = torch.randn(6, 6, dtype=torch.float64, generator=g).requires_grad_()\n"
        "Wk = torch.randn(6, 6, dtype=torch.float64, generator=g).requires_grad_()\n"
        "gamma = torch.ones(6, dtype=torch.float64, requires_grad=True)\n"
        "def f(Wq, Wk, gamma):\n    q, k = x @ Wq, x @ Wk\n"
        "    att = (q @ k.transpose(-2, -1) / math.sqrt(6)).masked_fill("
        "torch.triu(torch.ones(4, 4, dtype=torch.bool), 1), float('-inf')).softmax(-1)\n"
        "    h = F.layer_norm(att @ x, (6,), weight=gamma)\n    return Cube.apply(h).tanh().mean()"
    )
    from IPython.core.interactiveshell import InteractiveShell

    import gradmagic

    shell = InteractiveShell()
    shell.run_line_magic("load_ext", "gradmagic")
    assert shell.run_cell(setup).success
    assert shell.run_cell("%%autograd -q\nloss = f(Wq, Wk, gamma)\nloss").success
    run, ns = gradmagic.last, shell.user_ns
    leaves = {"Wq": ns["Wq"], "Wk": ns["Wk"], "gamma": ns["gamma"]}
    f, eps = ns["f"], 1e-6
    compared = 0
    for name, leaf in leaves.items():
        shown = run.grads[name]
        with torch.no_grad():
            for j in range(0, leaf.numel(), 5):
                args = {k: v.detach().clone() for k, v in leaves.items()}
                args[name].view(-1)[j] += eps
                up = float(f(**args))
                args[name].view(-1)[j] -= 2 * eps
                down = float(f(**args))
                assert abs(shown.reshape(-1)[j] - (up - down) / (2 * eps)) < 1e-7, (name, j)
                compared += 1
    assert compared > 10 and run.checks["whole"]["status"] == "pass"


def test_ops_after_a_forward_that_raised_are_not_put_in_its_module():
    run = _record(
        "import torch, torch.nn as nn\nclass Boom(nn.Module):\n    def __init__(s):\n"
        "        super().__init__()\n        s.l = nn.Linear(2, 2)\n    def forward(s, x):\n"
        "        y = s.l(x)\n        raise ValueError('no')\n"
        "boom = Boom(); lin = nn.Linear(2, 2); w = torch.randn(2, requires_grad=True)",
        "try:\n    boom(w)\nexcept ValueError:\n    pass\nloss = (lin(w) * 2).sum()\nloss",
    )
    assert [(run.ops[k].name, run.op_modules[k]) for k in run.graph] == [
        ("linear", "lin"),
        ("mul", ""),
        ("sum", ""),
    ]


@pytest.mark.parametrize(
    "cell, said",
    [
        ("(w * 1j).sum()", "complex tensor"),
        ("torch.nested.nested_tensor([w.detach(), torch.ones(3)])", "nested tensor"),
        ("torch.empty(1, device='meta')", "meta tensor"),
    ],
)
def test_a_target_the_magic_cannot_show_is_said_and_the_value_kept(cell, said, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell()
    shell.run_line_magic("load_ext", "gradmagic")
    assert shell.run_cell("import torch\nw = torch.randn(2, requires_grad=True)").success
    capsys.readouterr()
    result = shell.run_cell(f"%%autograd\n{cell}")
    assert result.success and said in capsys.readouterr().out
    assert type(result.result).__name__ == "Tensor"
    shell.clear_instance()


def test_a_tensor_made_out_of_the_records_sight_is_said():
    run = _record(
        "import torch, torch.nn as nn\nnet = nn.Linear(3, 2)\n"
        "traced = torch.jit.trace(net, torch.randn(1, 3))\nx = torch.randn(4, 3)",
        "out = traced(x)\nloss = (out * 2).sum()\nloss",
    )
    assert any("out was made by ops the record did not see" in w for w in run.warnings)
    run = _record(
        "import torch\nw = torch.randn(3, requires_grad=True)", "loss = (w * 2).sum()\nloss"
    )
    assert not any("did not see" in w for w in run.warnings)


def test_a_complex_parameter_is_named_as_left_out_of_the_whole_cell_check():
    """The whole-cell check moves only real parameters: a pass must not read as covering a
    complex one."""
    from IPython.core.interactiveshell import InteractiveShell

    import gradmagic
    from gradmagic.views import torchview

    shell = InteractiveShell()
    shell.run_line_magic("load_ext", "gradmagic")
    name = "complex parameters: a phase filter beside a real bias"
    for _, cell in torch_corpus.SEQUENCES[name][:2]:
        assert shell.run_cell(cell).success
    assert shell.run_cell(f"%%autograd -q\n{torch_corpus.SEQUENCES[name][2][1]}").success
    run = gradmagic.last
    names = [run.names[j] for j in run.params]
    assert names == ["ph.w", "ph.b"]
    assert run.checks["whole"]["status"] == "pass"
    assert run.checks["whole"]["left_out"] == ["ph.w"]
    assert any(
        "Complex parameters left out" in t and "ph.w" in t for _, t in torchview.check_lines(run)
    )
    assert any("complex numbers" in w and "ph.w" in w for w in run.warnings)
    shell.clear_instance()


def test_a_leaf_reached_by_several_backward_passes_is_said():
    from IPython.core.interactiveshell import InteractiveShell

    import gradmagic

    shell = InteractiveShell()
    shell.run_line_magic("load_ext", "gradmagic")
    name = "several backward passes: two losses, retain_graph, autograd.grad first"
    assert shell.run_cell(torch_corpus.SEQUENCES[name][0][1]).success
    assert shell.run_cell(f"%%autograd -q\n{torch_corpus.SEQUENCES[name][1][1]}").success
    run = gradmagic.last
    assert any(".grad adds up the 2 backward passes" in w for w in run.warnings)
    shell.clear_instance()


def test_an_op_that_read_a_value_written_through_data_is_not_checked_with_the_old_value():
    from IPython.core.interactiveshell import InteractiveShell

    import gradmagic

    shell = InteractiveShell()
    shell.run_line_magic("load_ext", "gradmagic")
    cells = torch_corpus.SEQUENCES["writes through .data and a detached alias between ops"]
    for _, cell in cells[:2]:
        assert shell.run_cell(cell).success
    assert shell.run_cell(f"%%autograd -q\n{cells[2][1]}").success
    run = gradmagic.last
    ops = run.checks["ops"]
    muls = [k for k in sorted(ops) if run.ops[k].name == "mul"]
    assert len(muls) == 2  # v = wd * 1.0, then v * v after the write
    square = muls[1:]
    assert ops[square[0]]["status"] == "skipped"
    assert "before this op read it" in ops[square[0]]["why"]
    assert run.checks["whole"]["status"] == "skipped"
    assert "v was written over (through .data" in run.checks["whole"]["why"]
    # and the view marks the op that read it, and the value whose shown numbers are the maker's
    from gradmagic.views import torchview

    marks = run.health["marks"]
    assert run.health["read_written"] == square
    assert "read a value written over" in marks[run.ops[square[0]].outputs[0]]
    assert "written over before read" in marks[run.ops[muls[0]].outputs[0]]
    assert "read a value written over" not in marks.get(run.ops[muls[0]].outputs[0], [])
    said = [t for t in torchview.health_lines(run) if "written over" in t]
    assert said == [
        "mul at line 4 read v after it was written over (through .data or a detached alias): "
        "the value shown for it is what its maker gave, not what this op read"
    ]
    assert "read a value written over" in torchview.payload(run)["dot"]
    shell.clear_instance()


@pytest.mark.parametrize(
    "cell",
    [
        "v = w * 1\nv.add_(1)\nloss = v.sum()\nloss",
        "v = w * 1\nv += w\nloss = v.sum()\nloss",
        "v = w * 1\nu = F.relu(v, inplace=True)\nloss = u.sum()\nloss",
        "m = torch.outer(w, w).masked_fill_(torch.eye(5, dtype=torch.bool), 0.0)\nloss = m.sum()\nloss",
        "a = torch.ones(5).mul_(w)\nloss = (a * a).sum()\nloss",
        "acc = torch.zeros(3).index_add_(0, torch.tensor([0, 2, 1, 0, 2]), w.sin())\n"
        "loss = acc.pow(2).sum()\nloss",
    ],
)
def test_an_in_place_op_is_checked_and_not_taken_for_a_write_out_of_sight(cell):
    """The op that writes in place read the old contents: its own gradient is checked, and
    nothing is marked as having read a value written over."""
    run = _record(
        "import torch, torch.nn.functional as F\nw = torch.randn(5, requires_grad=True)", cell
    )
    ops = run.checks["ops"]
    assert {run.ops[k].name: r["status"] for k, r in ops.items()}.keys() >= {"sum"}
    assert all(r["status"] == "pass" for r in ops.values()), ops
    assert run.checks["whole"]["status"] == "pass"
    assert run.health["read_written"] == []
    assert not any("written over" in w for ws in run.health["marks"].values() for w in ws)
    # a tensor first seen as what an op writes into is shown as it was before the write
    first = run.ops[run.graph[0]]
    if first.inplace and first.inputs[0] not in run.params:
        assert run.stats[first.inputs[0], 0] in (0.0, 1.0)


def _shell_after(name: str, upto: int):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell()
    shell.run_line_magic("load_ext", "gradmagic")
    for _, cell in torch_corpus.SEQUENCES[name][:upto]:
        assert shell.run_cell(cell).success
    return shell


def test_a_backward_derived_by_hand_is_graded_against_pytorchs():
    """makemore's hand-derived dlogprobs ... dC: right answers pass under --expect and in
    grade(); a transposed dW1 fails, its worst entries named."""
    from gradmagic import grade

    shell = _shell_after(torch_corpus.MAKEMORE4, 4)
    ns = shell.user_ns
    assert shell.run_cell(f"%%autograd -q --expect answers\n{torch_corpus._MAKEMORE4_FORWARD}loss")
    run = __import__("gradmagic").last
    report = run.expect(ns["answers"])
    assert [r.status for r in report.rows] == ["pass"] * 9
    # and what it passed is what PyTorch's own backward gives (cell 1 kept .grad)
    for name in ("W1", "C", "bngain"):
        np.testing.assert_allclose(run.grads[name], ns[name].grad.numpy(), rtol=1e-6, atol=1e-9)
    wrong = {r.name: r for r in run.expect(ns["wrong"]).rows}
    bad = [r for r in wrong.values() if r.status == "fail"]
    assert len(bad) == 1 and "W1" in bad[0].name and "entries wrong; worst: (" in bad[0].note
    source = torch_corpus._SETUP[1] + "\n" + torch_corpus.SEQUENCES[torch_corpus.MAKEMORE4][1][1]
    source += "\n" + torch_corpus._MAKEMORE4_FORWARD + "loss"
    answers = {k: v.clone() for k, v in ns["answers"].items()}
    assert grade(source, answers, isolate=False).passed
    failed = grade(source, dict(answers, W1=ns["wrong"]["W1"]), isolate=False)
    assert failed.outcome == "wrong"
    shell.clear_instance()


_LIAR = """
class Liar(torch.Tensor):
    claim = {}
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.__repr__, torch.Tensor.__format__, torch.Tensor.__str__):
            return 'tensor(correct)'
        if func in (torch.Tensor.__eq__, torch.Tensor.eq, torch.equal, torch.allclose):
            return True
        out = super().__torch_function__(func, types, args, kwargs or {})
        if isinstance(out, torch.Tensor) and tuple(out.shape) in cls.claim:
            with torch._C.DisableTorchFunctionSubclass():
                return cls.claim[tuple(out.shape)].clone()
        return out
    def _c(self):
        with torch._C.DisableTorchFunctionSubclass():
            real = torch.Tensor.as_subclass(self, torch.Tensor)
            return Liar.claim.get(tuple(self.shape), real).detach()
    def __float__(self): return float(self._c())
    def __array__(self, dtype=None, copy=None): return self._c().numpy()
    def tolist(self): return self._c().tolist()
    def numpy(self, *a, **k): return self._c().numpy()
    def detach(self): return self._c()
    def item(self): return self._c().item()
"""


def test_a_lying_tensor_subclass_answer_is_judged_by_the_numbers_it_holds():
    """A wrong dW1 in a subclass whose every method claims the right one fails, under
    --expect and in grade(); the same claim as the answer's true numbers passes."""
    from gradmagic import grade

    shell = _shell_after(torch_corpus.MAKEMORE4, 4)
    ns = shell.user_ns
    assert shell.run_cell("import torch\n" + _LIAR).success
    assert shell.run_cell(
        "Liar.claim[tuple(dW1.shape)] = dW1.clone()\n"
        "fake = dW1.T.reshape(dW1.shape).as_subclass(Liar)\n"
        "fooled = (repr(fake), bool(fake == dW1), torch.allclose(fake, dW1))\n"
        "liars = dict(answers, W1=fake)"
    ).success
    assert ns["fooled"] == ("tensor(correct)", True, True)  # (the lies work on plain code)
    assert shell.run_cell(f"%%autograd -q --expect liars\n{torch_corpus._MAKEMORE4_FORWARD}loss")
    run = __import__("gradmagic").last
    status = {r.name: r.status for r in run.expect(ns["liars"]).rows}
    assert [k for k, s in status.items() if s == "fail"] == ["W1"]
    source = torch_corpus._SETUP[1] + "\n" + torch_corpus.SEQUENCES[torch_corpus.MAKEMORE4][1][1]
    source += "\n" + torch_corpus._MAKEMORE4_FORWARD + "loss"
    assert grade(source, ns["liars"], isolate=False).outcome == "wrong"
    shell.clear_instance()


def test_a_lying_tensor_subclass_target_is_judged_by_its_graph():
    """The target is a subclass alias whose every method says 42: the value, gradients and
    checks are the graph's own, under the user's name."""
    from gradmagic import grade

    setup = (
        "import torch\n" + _LIAR + "Liar.claim[()] = torch.tensor(42.0)\n"
        "Liar.claim[(3,)] = torch.ones(3)\nw = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)"
    )
    cell = "loss = (w * w).sum().as_subclass(Liar)\nloss"
    run = _record(setup, cell)
    assert run.names[run.target] == "loss" and run.value == 14.0
    np.testing.assert_array_equal(run.grads["w"], [2.0, 4.0, 6.0])
    assert run.checks["whole"]["status"] == "pass"
    assert [r.status for r in run.expect({"w": [2, 4, 6], "loss.data": 14}).rows] == ["pass"] * 2
    assert [r.status for r in run.expect({"w": [1, 1, 1], "loss.data": 42}).rows] == ["fail"] * 2
    ns = {}
    exec(setup, ns)
    assert grade(cell, {"w": [2, 4, 6], "loss.data": 14}, isolate=False, namespace=ns).passed
    assert not grade(cell, {"loss.data": 42}, isolate=False, namespace=ns).passed


def test_names_with_markup_escapes_and_huge_text_are_shown_as_short_plain_text():
    import json

    from gradmagic.analysis.torchgraph import NAME_CHARS
    from gradmagic.views import render, torchview

    name = "names and reprs with markup, escapes and huge text"
    shell = _shell_after(name, 2)
    assert shell.run_cell(f"%%autograd -q\n{torch_corpus.SEQUENCES[name][2][1]}").success
    run = __import__("gradmagic").last
    assert any(n.startswith("odd.<script>") for n in run.names)  # (kept whole in the run)
    page = torchview.html_view(run)
    text = torchview.text_view(run) + "\n".join(t for _, t in torchview.check_lines(run))
    live = torchview.payload(run)
    shown = json.dumps(live)
    for out in (page, text, shown):
        assert "\x1b" not in out and "\\u001b" not in out
        assert "z" * (NAME_CHARS + 1) not in out
    assert "<script>" not in page and "&lt;script&gt;alert(1)" in page
    assert "<b onmouseover" not in page and "<img src=x" not in page + shown
    assert "<script" not in live["tabs"][2]["payload"]  # (the one tab that is html)
    svg = render.svg(live["dot"])
    assert "<script" not in svg and "&lt;script&gt;" in svg
    assert len(shown) < 40_000 and len(page) < 60_000
    strings = []

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str):
            strings.append(x)

    walk({k: v for k, v in live.items() if k != "dot"})
    walk(live["tabs"][:2] + live["tabs"][3:])
    assert max(len(s) for s in strings if "<div" not in s) <= 200
    shell.clear_instance()


def test_a_stack_of_twelve_identical_blocks_is_folded_and_opens():
    from gradmagic.views import torchview

    name = "a stack of 12 identical blocks in an nn.ModuleList"
    shell = _shell_after(name, 2)
    assert shell.run_cell(f"%%autograd -q\n{torch_corpus.SEQUENCES[name][2][1]}").success
    run = __import__("gradmagic").last
    nodes = list(torchview.payload(run)["nodes"].values())
    folds = [n for n in nodes if n["op"] == "fold"]
    assert [n["name"] for n in folds] == ["deep.blocks.0-11  Blk x 12"]
    assert "Blk x 12" in torchview.payload(run)["dot"]
    # a click opens its first block, one level; the other eleven stay folded
    assert folds[0]["opens"] == "deep.blocks.0"
    opened = [n["name"] for n in torchview.payload(run, open=["deep.blocks.0"])["nodes"].values()]
    assert "deep.blocks.0.fc  (Linear)" in opened and "deep.blocks.1-11  Blk x 11" in opened
    shell.clear_instance()


@pytest.mark.parametrize(
    "setup, cell, ops",
    [
        (
            "net = nn.Sequential(*[nn.Linear(2, 2) for _ in range(5000)])\nx = torch.randn(3, 2)",
            "net.zero_grad()\nloss = net(x).pow(2).mean()\nloss.backward()\nloss",
            5002,
        ),
        (
            "w = torch.randn(4, requires_grad=True)",
            "acc = w\nfor i in range(10000):\n    acc = acc * 1.0000001\nloss = acc.sum()\nloss",
            10001,
        ),
    ],
    ids=["10^4 parameter tensors", "10^4 tiny ops"],
)
def test_a_huge_model_or_cell_gives_a_bounded_view_that_says_what_it_left_out(setup, cell, ops):
    import json

    from gradmagic.views import torchview

    run = _record("import torch, torch.nn as nn\ntorch.manual_seed(0)\n" + setup, cell)
    assert len(run.graph) == ops
    live = torchview.payload(run)
    assert len(json.dumps(live)) < 150_000 and len(torchview.html_view(run)) < 150_000
    assert len(live["nodes"]) <= 150
    tabs = {t["id"]: t["payload"] for t in live["tabs"]}
    assert tabs["ops"]["note"] == f"{ops - torchview.ROWS} more ops not shown."
    assert len(tabs["ops"]["rows"]) == torchview.ROWS
    assert tabs["backward"]["note"].startswith("The stepper covers the first 1,000 of ")
    if len(run.params) > torchview.ROWS:
        assert (
            tabs["params"]["note"]
            == f"{len(run.params) - torchview.ROWS} more parameters not shown."
        )
        assert len(tabs["params"]["rows"]) == torchview.ROWS
    # (the whole-cell check is made or said to be too long, as the machine's speed has it)
    assert run.checks["whole"]["status"] in ("pass", "skipped")


def test_a_nan_gradient_through_where_is_shown_marked_and_not_called_wrong():
    """torch.where(w > 0, w.sqrt(), 0): the branch not taken still sends 0 * inf = nan back
    to w, in plain PyTorch as here; the view marks it, and sqrt's check gives no verdict."""
    name = next(k for k in torch_corpus.SEQUENCES if k.startswith("weight tying"))
    shell = _shell_after(name, 4)
    assert shell.run_cell(f"%%autograd -q\n{torch_corpus.SEQUENCES[name][4][1]}").success
    run = __import__("gradmagic").last
    i = run.index("w")
    assert "first nan/inf gradient" in run.health["marks"][i]
    assert run.health["nonfinite"]["grad"]["name"] == "sqrt"
    shown = run.grads["w"]
    plain = shell.ev("torch.autograd.grad(loss, w)[0].numpy()")
    np.testing.assert_array_equal(shown, plain)
    assert np.isnan(shown).any()
    sqrt = [r for k, r in run.checks["ops"].items() if run.ops[k].name == "sqrt"]
    assert sqrt[0]["status"] == "skipped" and "no verdict" in sqrt[0]["why"]
    shell.clear_instance()


def test_a_scatter_that_writes_twice_to_one_place_is_not_called_wrong():
    """scatter with a repeated index: one write lands, yet PyTorch sends the place's gradient
    to each; neither check calls that a wrong backward, and both say why."""
    setup = "import torch\ntorch.manual_seed(0)\nw = torch.randn(5, 4, requires_grad=True)"
    weights = "torch.arange(12.).view(3, 4)"
    run = _record(
        setup,
        "spread = torch.zeros(3, 4).scatter(0, torch.tensor([[0, 1, 2, 0]] * 5), w * 2)\n"
        f"loss = (spread * {weights}).sum()\nloss",
    )
    ops = {run.ops[k].name: r for k, r in run.checks["ops"].items()}
    assert ops["scatter"]["status"] == "skipped" and "several entries" in ops["scatter"]["why"]
    assert run.checks["whole"]["status"] == "skipped"
    assert "not the derivative of what ran" in run.checks["whole"]["why"]
    # a scatter of distinct places is checked as any op
    run = _record(
        setup,
        "perm = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 1], [2, 0, 1, 2]])\n"
        f"spread = torch.zeros(3, 4).scatter(0, perm, w[:3] * 2)\nloss = (spread * {weights}).sum()\nloss",
    )
    ops = {run.ops[k].name: r for k, r in run.checks["ops"].items()}
    assert ops["scatter"]["status"] == "pass" and run.checks["whole"]["status"] == "pass"
