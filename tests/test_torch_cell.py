"""%%autograd on PyTorch cells: the cell runs as without the magic, and what it shows is true.

Each cell (tests/torch_cells.py) runs in two IPython shells, plain and under the magic, from the
same seed; outputs, tensors, parameters, .grad and random number states must be equal bit for
bit. Then the record: names, modules, folded blocks, statistics against torch's own, the
checks (a wrong custom backward is red at its op), health signals, --expect with tensors.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import torch_cells as cells  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # (the same kernels on both sides, and quick on a shared machine)
    yield
    torch.set_num_threads(before)


def shells(setup: str):
    """A plain shell and one with gradmagic loaded, both after ``setup``."""
    plain, magic = InteractiveShell(), InteractiveShell()
    magic.run_line_magic("load_ext", "gradmagic")
    for sh in (plain, magic):
        result = sh.run_cell(setup)
        assert result.success, result.error_in_exec
    return plain, magic


def run_magic(shell, cell: str, options: str = ""):
    import gradmagic

    result = shell.run_cell(f"%%autograd {options}\n{cell}")
    assert result.success, result.error_in_exec
    return gradmagic.last


def same(a, b) -> bool:
    """Equal bit for bit: tensors (values, dtype, shape; nan where nan), containers of them."""
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(
                a.detach().view(-1).view(torch.uint8) if a.is_floating_point() else a,
                b.detach().view(-1).view(torch.uint8) if b.is_floating_point() else b,
            )
        )
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def assert_same_state(plain, magic, names):
    for name in names:
        a, b = plain.user_ns[name], magic.user_ns[name]
        assert same(a, b), name
        if isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf:
            assert (a.grad is None) == (b.grad is None), name
            if a.grad is not None:
                assert same(a.grad, b.grad), f"{name}.grad"
    assert same(torch.get_rng_state(), torch.get_rng_state())


# --------------------------------------------------------------------------- unchanged
def printed(capsys) -> list:
    """The lines the cell printed (not the shell's Out[] display)."""
    out = capsys.readouterr().out
    return [line for line in out.splitlines() if line.startswith("step loss")]


def test_a_training_step_runs_as_without_the_magic_bit_for_bit(capsys):
    plain, magic = shells(cells.MLP_SETUP)
    for step in range(3):  # each step starts from what the last one left
        torch.manual_seed(step)
        capsys.readouterr()
        result = plain.run_cell(cells.MLP_STEP)
        assert result.success
        plain_out = printed(capsys)
        plain_rng = torch.get_rng_state()
        torch.manual_seed(step)
        run = run_magic(magic, cells.MLP_STEP)
        assert printed(capsys) == plain_out and len(plain_out) == 1
        assert torch.equal(torch.get_rng_state(), plain_rng)
        assert same(plain.user_ns["g"].get_state(), magic.user_ns["g"].get_state())
        assert_same_state(
            plain,
            magic,
            [
                "C",
                "W1",
                "b1",
                "W2",
                "b2",
                "bngain",
                "bnbias",
                "bnmean_running",
                "bnstd_running",
                "loss",
                "logits",
                "h",
                "Xb",
                "ix",
            ],
        )
        assert plain.user_ns["log"] == magic.user_ns["log"]
        assert run.backward_by_cell
    # the parameters really moved (the comparison above is not of two untouched states)
    assert len(set(magic.user_ns["log"])) == 3
    # and each update's size was measured against its parameter: lr * grad / data
    w1 = next(p for p in run.health["params"] if p["name"] == "W1")
    before = magic.user_ns["W1"].detach() + 0.1 * magic.user_ns["W1"].grad
    assert w1["update_to_data"] == pytest.approx(
        (0.1 * magic.user_ns["W1"].grad).double().std().item() / before.double().std().item(),
        rel=1e-4,
    )
    # no hook is left on the user's tensors, and no recorder is left behind
    for name in ("C", "W1", "W2"):
        t = magic.user_ns[name]
        assert not t._backward_hooks
    assert torch.autograd.Function.apply.__func__ is not None
    assert not torch.overrides._get_current_function_mode_stack()


def test_a_forward_only_cell_leaves_dot_grad_untouched_and_the_graph_reusable():
    plain, magic = shells(cells.GPT_SETUP)
    plain.run_cell(cells.GPT_CELL)
    run = run_magic(magic, cells.GPT_CELL, "--no-check")
    params = dict(magic.user_ns["model"].named_parameters())
    assert all(p.grad is None for p in params.values())  # as in the plain run
    assert not run.backward_by_cell
    assert same(plain.user_ns["loss"], magic.user_ns["loss"])
    # the cell's graph was not freed: backward works after it, and gives plain's gradients
    for sh in (plain, magic):
        assert sh.run_cell("loss.backward()").success
    for name, p in plain.user_ns["model"].named_parameters():
        assert same(p.grad, params[name].grad), name


def test_errors_are_the_cells_own_and_leave_nothing_behind(capsys):
    plain, magic = shells(cells.BAD_FUNCTION_SETUP)
    result = magic.run_cell("%%autograd\nh = torch.tanh(x @ W)\nh @ W\n")
    assert isinstance(result.error_in_exec, RuntimeError)
    assert "mat1 and mat2 shapes cannot be multiplied" in str(result.error_in_exec)
    assert not torch.overrides._get_current_function_mode_stack()
    assert torch.autograd.Function.apply == torch.autograd.function.Function.apply
    result = magic.run_cell("%%autograd\nh = torch.tanh(x @ W)\nh\n")
    assert result.success
    assert "reduce it to one number" in capsys.readouterr().out


def test_a_cell_whose_record_outgrows_its_memory_runs_on_plainly(capsys, monkeypatch):
    from gradmagic.notebook import memory

    monkeypatch.setattr(memory, "MOST", 40 << 20)  # (a loop of ~10^5 ops passes it)
    loop = "s = torch.tensor(0.0)\nfor i in range(300000):\n    s = s * 0.999 + w\nt = 1\ns\n"
    setup = "import torch\nw = torch.tensor(0.5, requires_grad=True)"
    plain, magic = shells(setup)
    assert plain.run_cell(loop).success
    result = magic.run_cell("%%autograd\n" + loop)
    assert result.success  # the cell ran to its end, as plainly
    shown = capsys.readouterr().out
    assert "made the process more than 40 MB bigger" in shown and "stopped at line 4" in shown
    assert_same_state(plain, magic, ["s", "t", "w", "i"])
    assert not torch.overrides._get_current_function_mode_stack()
    assert run_magic(magic, "v = w * 3\nv") is not None  # the next cell is recorded


ACCUMULATE_SETUP = """
import torch
W = torch.tensor([[0.5, -1.0], [2.0, 0.3]], requires_grad=True)
batches = (torch.tensor([1.0, 2.0]), torch.tensor([-1.0, 0.5]))
"""
ACCUMULATE = "for xb in batches:\n    loss = (W @ xb).tanh().sum()\n    loss.backward()\nloss\n"


def test_a_grad_that_adds_up_passes_is_said_to_differ_from_the_gradient_shown():
    plain, magic = shells(ACCUMULATE_SETUP)
    assert plain.run_cell(ACCUMULATE).success
    run = run_magic(magic, ACCUMULATE, "-q")
    assert_same_state(plain, magic, ["W", "loss"])
    # shown: the target's own gradient (the last batch's), not .grad's sum of both
    W, xb = plain.user_ns["W"], plain.user_ns["batches"][1]
    (own,) = torch.autograd.grad((W @ xb).tanh().sum(), [W])
    np.testing.assert_allclose(run.grads["W"], own.numpy(), rtol=1e-6)
    assert not np.allclose(run.grads["W"], W.grad.numpy())
    assert run.warnings == [
        "W: .grad adds up the 2 backward passes of this cell that reached it; the gradient "
        "shown is that of the target alone"
    ]
    # .grad not zeroed since: it held a gradient before this cell's pass
    run = run_magic(magic, "loss = (W @ batches[0]).sum()\nloss.backward()\nloss", "-q")
    assert len(run.warnings) == 1 and "W: .grad already held a gradient" in run.warnings[0]
    # zeroed first, one pass: .grad is the gradient shown, nothing to say
    run = run_magic(magic, "W.grad = None\nloss = (W @ batches[0]).sum()\nloss.backward()\nloss")
    assert run.warnings == [] and run.grads["W"].tolist() == [[1.0, 2.0], [1.0, 2.0]]
    assert magic.user_ns["W"].grad.tolist() == [[1.0, 2.0], [1.0, 2.0]]


def test_a_leaf_whose_last_pass_was_not_the_targets_shows_no_gradient():
    plain, magic = shells(ACCUMULATE_SETUP)
    W, (x1, x2) = magic.user_ns["W"], magic.user_ns["batches"]
    magic.user_ns.update(x1=x1, x2=x2)
    cell = (
        "W.grad = None\nl1 = (W @ batches[0]).tanh().sum()\nl2 = (W @ batches[1]).pow(2).sum()\n"
        "{}.backward()\n{}.backward()\nl2\n"
    )
    run = run_magic(magic, cell.format("l2", "l1"), "-q")  # the target's pass, then another
    assert "W" not in run.grads
    assert run.warnings == [
        "W: the last backward pass to reach it did not begin at the target, so its gradient "
        "of the target is not known and not shown"
    ]
    run = run_magic(magic, cell.format("l1", "l2"), "-q")  # the target's pass last: shown
    (own,) = torch.autograd.grad((W @ x2).pow(2).sum(), [W])
    np.testing.assert_allclose(run.grads["W"], own.numpy(), rtol=1e-6)
    # a gradient asked of torch.autograd.grad adds to no .grad: one pass, nothing to say
    run = run_magic(
        magic,
        "W.grad = None\nl1 = (W @ x1).tanh().sum()\n"
        "g, = torch.autograd.grad(l1, [W], retain_graph=True)\nl1.backward()\nl1",
        "-q",
    )
    assert run.warnings == [] and np.allclose(run.grads["W"], W.grad.numpy())


def test_complex_values_are_said_not_to_be_summarised():
    setup = (
        "import torch\nz = torch.tensor([1+2j, -0.5+0.3j], requires_grad=True)\n"
        "w = torch.tensor([0.7, -1.2], requires_grad=True)"
    )
    cell = "loss = (z * w).abs().pow(2).sum()\nloss.backward()\nloss\n"
    plain, magic = shells(setup)
    assert plain.run_cell(cell).success
    run = run_magic(magic, cell, "-q")
    assert_same_state(plain, magic, ["z", "w", "loss"])
    assert any(note.startswith("z, ") and "complex numbers" in note for note in run.warnings)
    np.testing.assert_allclose(run.grads["w"], plain.user_ns["w"].grad.numpy(), rtol=1e-6)


def test_a_write_through_a_detached_alias_leaves_what_was_shown_true():
    setup = (
        "import torch\nW = torch.tensor([[0.5, -1.0], [2.0, 0.3]], requires_grad=True)\n"
        "x = torch.tensor([1.0, 2.0])"
    )
    cell = "h = W @ x\nd = h.detach()\nd += 1\ny = (h * 2).sum()\ny.backward()\ny\n"
    plain, magic = shells(setup)
    assert plain.run_cell(cell).success
    run = run_magic(magic, cell, "-q")
    assert_same_state(plain, magic, ["h", "d", "y", "W"])
    made = (plain.user_ns["W"] @ plain.user_ns["x"]).detach().numpy()  # what the matmul made
    np.testing.assert_array_equal(run.full[run.index("h")][0], made)
    assert run.full[run.index("h")][0].tolist() != plain.user_ns["h"].tolist()  # (h changed)
    assert any(
        note.startswith("h was written in place through its detach() at line 4")
        for note in run.warnings
    )
    assert run.checks["whole"]["status"] != "fail"


def test_import_gradmagic_does_not_import_torch():
    code = (
        "import sys, gradmagic, gradmagic.views.display, gradmagic.notebook.magic\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_plain_python_cell_still_takes_gradmagics_own_engine():
    from gradmagic.analysis.trace import Trace

    _, magic = shells("import torch\na = 2.0\n")
    import gradmagic

    assert magic.run_cell("%%autograd\nb = a * 3 + 1\nb\n").success
    assert isinstance(gradmagic.last, Trace)
    # names that hold tensors from before, bound again by the cell before it reads them
    magic.run_cell("import numpy as np\nW = torch.ones(2)\nx = torch.ones(2)")
    cell = "W = np.array([1.0, 2.0])\nx = 0.5\nL = (W * x).sum()\nL\n"
    assert magic.run_cell("%%autograd\n" + cell).success
    assert isinstance(gradmagic.last, Trace) and gradmagic.last.grads["x"] == 3.0
    magic.run_cell("W = torch.ones(2, requires_grad=True)")
    assert magic.run_cell("%%autograd\nL = (W * 2.0).sum()\nL").success  # reads a tensor
    assert not isinstance(gradmagic.last, Trace)


# --------------------------------------------------------------------------- the record
def test_names_statistics_and_gradients_are_torchs_own():
    plain, magic = shells(cells.MLP_SETUP)
    ns = magic.user_ns
    ns["h_kept"] = []
    run = run_magic(magic, cells.MLP_FORWARD)
    names = {run.name_of(i) for i in run.params}
    assert names == {"C", "W1", "b1", "W2", "b2", "bngain", "bnbias"}
    for name in ("emb", "hprebn", "bnraw", "hpreact", "h", "logits", "loss"):
        i = run.index(name)
        t = ns[name].detach().double()
        assert run.stats[i, 0] == pytest.approx(t.mean().item(), rel=1e-9, abs=1e-12)
        assert run.stats[i, 1] == pytest.approx(
            t.std().item() if t.numel() > 1 else 0.0, rel=1e-9, abs=1e-12
        )
        assert run.stats[i, 2] == pytest.approx(t.abs().max().item(), rel=1e-12)
    # gradients against torch.autograd.grad of the same graph
    grads = torch.autograd.grad(ns["loss"], [ns["h"], ns["W1"], ns["logits"]], retain_graph=True)
    for name, g in zip(("h", "W1", "logits"), grads):
        i = run.index(name)
        assert run.grad_stats[i, 1] == pytest.approx(g.double().std().item(), rel=1e-9)
        np.testing.assert_array_equal(run.full[i][1], g.double().numpy())
    tanh = run.index("h")
    sat = (ns["h"].abs() > 0.97).double().mean().item()
    assert run.stats[tanh, 5] == pytest.approx(sat)
    assert run.stats[run.index("hprebn"), 5] != run.stats[run.index("hprebn"), 5]  # not tanh


_HOOKED_CELL = """
x = torch.linspace(-2, 2, 12, dtype=torch.float64).reshape(3, 4)
w = torch.linspace(0.5, 1.5, 4, dtype=torch.float64, requires_grad=True)
a = x * w
b, c = a.split(2, dim=1)
h = torch.tanh(b) * c
{end}
loss
"""


@pytest.mark.parametrize(
    "end",
    [
        "loss = (h ** 2).sum()\nloss.backward()",  # hooks on the nodes that made the values
        "loss = (h ** 2).sum()\ngs = torch.autograd.grad(loss, [a, w], retain_graph=True)",
        "loss = (h ** 2).sum()\nloss.backward(inputs=[a, w])",  # stops at a: tensor hooks
    ],
)
def test_gradients_of_values_are_torchs_whatever_the_backward_call(end):
    _, magic = shells("import torch")
    run = run_magic(magic, _HOOKED_CELL.format(end=end))
    ns = magic.user_ns
    # the same graph again, each value's gradient kept by torch itself
    x, w = ns["x"], ns["w"].detach().clone().requires_grad_(True)
    a = x * w
    a.retain_grad()
    b, c = a.split(2, dim=1)
    b.retain_grad()
    c.retain_grad()
    h = torch.tanh(b) * c
    h.retain_grad()
    (h**2).sum().backward()
    for name, t in (("a", a), ("b", b), ("c", c), ("h", h), ("w", w)):
        if "inputs=" in end and name in ("b", "c", "h"):
            continue  # (backward stopped at a: those values' nodes ran, not theirs to show)
        np.testing.assert_array_equal(run.full[run.index(name)][1], t.grad.numpy(), err_msg=name)


def test_a_small_gpt_is_grouped_by_module_with_its_blocks_folded():
    from gradmagic.analysis.torchgraph import layout
    from gradmagic.views import torchview

    _, magic = shells(cells.GPT_SETUP)
    run = run_magic(magic, cells.GPT_CELL)
    lay = layout(run, 150)
    folds = [b for b in lay.boxes.values() if b.kind == "fold"]
    assert [b.title for b in folds] == ["model.blocks.0-11  Block x 12"]
    assert len(folds[0].ops) > 12 * 20
    assert len(lay.boxes) < 30 and lay.note
    assert "model.lm_head.weight" in {b.title for b in lay.boxes.values()}
    # one block opened, one level: its modules are boxes of their own
    opened = layout(run, 150, open=["model.blocks.3"])
    titles = {b.title for b in opened.boxes.values()}
    assert "model.blocks.3.attn  (Attention)" in titles
    assert "model.blocks.3.mlp  (Sequential)" in titles
    assert {"model.blocks.0-2  Block x 3", "model.blocks.4-11  Block x 8"} <= titles
    # the checks and the display
    assert run.checks["whole"]["status"] == "pass"
    assert all(r["status"] == "pass" for r in run.checks["ops"].values())
    assert "model.blocks.0-11  Block x 12" in torchview.to_dot(run)
    page = torchview.html_view(run)
    assert "307 ops in " in page and "data:image/svg+xml;base64," in page


def test_the_payload_is_bounded_whatever_the_model_size():
    from gradmagic.views import torchview

    sizes, ops = [], []
    for layers in (12, 30):
        _, magic = shells(cells.GPT_SETUP.replace("model = GPT()", f"model = GPT(layers={layers})"))
        run = run_magic(magic, cells.GPT_CELL, "--no-check")
        sizes.append(len(torchview.html_view(run)))
        ops.append(len(run.graph))
    assert ops[1] > 2.4 * ops[0]
    assert abs(sizes[1] - sizes[0]) < 0.05 * sizes[0], sizes  # tables cut, blocks folded
    assert max(sizes) < 200_000


def test_a_wrong_custom_backward_is_red_at_its_node():
    from gradmagic.views import torchview

    _, magic = shells(cells.BAD_FUNCTION_SETUP)
    run = run_magic(magic, cells.BAD_FUNCTION_CELL)
    assert run.checks["whole"]["status"] == "fail"
    failed = [k for k, r in run.checks["ops"].items() if r["status"] == "fail"]
    assert [run.ops[k].name for k in failed] == ["BadTanh"]
    assert run.ops[failed[0]].custom
    assert run.names[run.ops[failed[0]].outputs[0]] == "h"
    others = [r["status"] for k, r in run.checks["ops"].items() if k not in failed]
    assert others and set(others) == {"pass"}
    dot = torchview.to_dot(run)
    line = next(x for x in dot.splitlines() if "h = BadTanh" in x)
    assert 'color="#dc2626"' in line and "gradient wrong" in line
    # the same cell with the right backward passes
    magic.run_cell(
        "BadTanh.backward = staticmethod(lambda ctx, g: g * (1 - ctx.saved_tensors[0] ** 2))"
    )
    run = run_magic(magic, cells.BAD_FUNCTION_CELL)
    assert run.checks["whole"]["status"] == "pass"
    assert {r["status"] for r in run.checks["ops"].values()} == {"pass"}


# --------------------------------------------------------------------------- health
def test_health_signals_point_at_their_op():
    _, magic = shells(
        "import torch\ntorch.manual_seed(0)\n"
        "x = torch.randn(16, 8)\n"
        "W = torch.randn(8, 32, requires_grad=True)\n"
        "V = torch.randn(32, 1, requires_grad=True)\n"
    )
    cell = (
        "a = x @ W - 100.0 * (torch.arange(32) < 8)\n"  # 8 units always negative
        "r = torch.relu(a)\n"
        "s = torch.tanh(50 * (x @ W))\n"
        "d = (r.detach() * 0 + r + s).sum(1, keepdim=True)\n"
        "y = torch.log(d - d.max() - 1 + 1e-30 * 0)\n"
        "loss = (y @ V.T).sum() + (r @ V).sum()\n"
        "loss.backward()\n"
        "with torch.no_grad():\n"
        "    W -= 1e-3 * W.grad\n"
        "loss"
    )
    run = run_magic(magic, cell)
    h = run.health
    assert h["dead"] == {run.index("r"): 0.25}
    assert run.index("s") in h["saturated"] and h["saturated"][run.index("s")] > 0.5
    assert [c["how"] for c in h["cuts"]] == ["detach"]
    ratios = {p["name"]: p for p in h["params"]}
    w = magic.user_ns["W"]
    assert ratios["W"]["update_to_data"] == pytest.approx(
        (1e-3 * w.grad).double().std().item() / (w.detach() + 1e-3 * w.grad).double().std().item(),
        rel=1e-3,
    )
    assert ratios["V"]["update_to_data"] is None  # not updated
    assert ratios["W"]["grad_to_data"] > 0


def test_the_first_nan_is_found_where_it_is_made():
    _, magic = shells("import torch\nx = torch.tensor([1.0, -1.0, 2.0], requires_grad=True)\n")
    run = run_magic(
        magic, "a = x * 2\nb = torch.sqrt(a)\nc = b + 1\nloss = c.sum()\nloss", "--no-check"
    )
    first = run.health["nonfinite"]["value"]
    assert first["name"] == "sqrt" and run.names[first["value"]] == "b" and first["line"] == 3


# --------------------------------------------------------------------------- answers
def test_hand_derived_gradients_are_checked_element_by_element():
    _, magic = shells(cells.MLP_SETUP)
    run = run_magic(magic, cells.MLP_FORWARD)
    assert magic.run_cell(cells.MANUAL_BACKWARD).success
    ns = magic.user_ns
    report = run.expect(ns["answers"])
    assert report.passed, [r for r in report.rows if not r.ok]
    assert {r.name for r in report.rows} == set(ns["answers"])
    wrong = run.expect(ns["wrong"])
    bad = [r for r in wrong.rows if not r.ok]
    assert [r.name for r in bad] == ["hpreact"]
    assert "entries wrong; worst: (" in bad[0].note
    # --expect NAME in the magic, with a dict of tensors, and the display shows the answers
    from gradmagic.views import torchview

    again = run_magic(magic, cells.MLP_FORWARD, "--expect answers")
    assert "8 of 8" in torchview.text_view(again) or "correct" in torchview.text_view(again)
    assert again.expect(ns["answers"]).passed


def test_grade_accepts_tensors_as_answers():
    from gradmagic import grade

    report = grade("a = 2.0\nb = a * a\nb", {"a": torch.tensor(4.0)}, isolate=False)
    assert report.passed
    report = grade(
        "a = 2.0\nb = a * a\nb", {"a": torch.tensor(5.0, requires_grad=True)}, isolate=False
    )
    assert not report.passed


def test_grade_runs_a_pytorch_cell_and_checks_hand_derived_tensors():
    from gradmagic import grade

    source = (
        "import torch\ntorch.manual_seed(0)\nx = torch.randn(5)\n"
        "W = torch.randn(5, 3, requires_grad=True)\nh = torch.tanh(x @ W)\n"
        "loss = (h ** 2).sum()\nloss\n"
    )
    ns: dict = {}
    exec(source, ns)
    h = ns["h"].detach()
    dh = 2 * h
    dW = torch.outer(ns["x"], (1 - h**2) * dh)
    assert grade(source, {"h": dh, "W": dW}, isolate=False).passed
    wrong = grade(source, {"h": dh, "W": torch.outer(ns["x"], (1 - h) * dh)}, isolate=False)
    assert not wrong.passed
    assert [r.name for r in wrong.rows if not r.ok] == ["W"]


def test_an_optimizer_step_with_dropout_and_in_place_ops_runs_as_without_the_magic():
    plain, magic = shells(cells.TRAIN_SETUP)
    for step in range(2):
        torch.manual_seed(10 + step)
        assert plain.run_cell(cells.TRAIN_STEP).success
        plain_rng = torch.get_rng_state()
        torch.manual_seed(10 + step)
        run = run_magic(magic, cells.TRAIN_STEP)
        assert torch.equal(torch.get_rng_state(), plain_rng)
        assert_same_state(plain, magic, ["loss", "out", "X"])
        a = dict(plain.user_ns["net"].named_parameters())
        b = dict(magic.user_ns["net"].named_parameters())
        for name in a:
            assert same(a[name], b[name]) and same(a[name].grad, b[name].grad), name
        sa, sb = plain.user_ns["opt"].state_dict(), magic.user_ns["opt"].state_dict()
        for k in sa["state"]:
            for key in ("exp_avg", "exp_avg_sq", "step"):
                assert same(sa["state"][k][key], sb["state"][k][key]), (k, key)
    # the record: module paths, the dropout taken as it came, Adam's updates measured
    assert {run.name_of(i) for i in run.params} == {
        f"net.{i}.{w}" for i in (0, 3, 5) for w in ("weight", "bias")
    }
    assert run.checks["whole"]["status"] == "pass", run.checks["whole"]
    statuses = {run.ops[k].name: r["status"] for k, r in run.checks["ops"].items()}
    assert statuses["dropout"] == "skipped" and "fail" not in statuses.values()
    ratios = [p["update_to_data"] for p in run.health["params"]]
    assert all(r is not None and 0 < r < 1 for r in ratios), ratios
    assert run.health["inplace"]  # relu(inplace=True) and out[:, 0] *= 2


def assert_statistics(run, ns, names, rel):
    """The run's statistics of ``names`` are float64 torch's of their finite entries."""
    for name in names:
        i = run.index(name)
        t = ns[name].detach().double()
        ok = t.isfinite()
        f = t[ok]
        assert run.stats[i, 0] == pytest.approx(f.mean().item(), rel=rel, abs=1e-12), name
        assert run.stats[i, 1] == pytest.approx(f.std().item(), rel=rel, abs=1e-12), name
        assert run.stats[i, 2] == pytest.approx(f.abs().max().item(), rel=1e-12), name
        assert run.stats[i, 3] == pytest.approx((t == 0).double().mean().item()), name
        assert run.stats[i, 4] == pytest.approx((~ok).double().mean().item()), name


def test_statistics_of_mixed_dtypes_and_non_finite_values_are_torchs_own():
    setup = (
        "import torch\n"
        "w = torch.linspace(-2, 3, 12, dtype=torch.float64).reshape(3, 4).requires_grad_()\n"
        "v = torch.linspace(-1, 1, 12).reshape(3, 4).requires_grad_()\n"
        "b = torch.linspace(0, 1, 4, dtype=torch.bfloat16).requires_grad_()\n"
    )
    cell = (
        "a = w * v\n"
        "c = (b.float() * v).relu()\n"
        "r = torch.log(v)\n"
        "loss = a.sum() + c.sum() + torch.where(r.isfinite(), r, 0).sum()\n"
    )
    _, magic = shells(setup)
    ns = magic.user_ns
    run = run_magic(magic, cell, "--no-check")
    assert_statistics(run, ns, ("a", "c", "r"), rel=1e-9)
    assert run.stats[run.index("r"), 4] > 0  # log of the negative entries: nan
    grads = torch.autograd.grad(ns["loss"], [ns["w"], ns["v"], ns["b"]], retain_graph=True)
    for name, g in zip(("w", "v", "b"), grads):
        i = run.index(name)
        assert run.dtypes[i] == str(g.dtype).replace("torch.", "")
        assert run.grad_stats[i, 0] == pytest.approx(g.double().mean().item(), rel=1e-6)
        assert run.grad_stats[i, 2] == pytest.approx(g.double().abs().max().item(), rel=1e-6)


@pytest.mark.parametrize("rows", [3, 1200])  # (1200 x 40: past torchstats.BIG)
def test_statistics_of_small_and_big_tensors_match_float64(rows):
    from gradmagic.analysis import torchstats

    assert (rows * 40 >= torchstats.BIG) == (rows > 3)
    setup = (
        "import torch\n"
        "g = torch.Generator().manual_seed(0)\n"
        f"w = (torch.randn({rows}, 40, generator=g) * 1e-3 + 5).requires_grad_()\n"
        f"d = torch.randn({rows}, 40, generator=g, dtype=torch.float64).requires_grad_()\n"
        f"b = torch.randn({rows}, 40, generator=g).to(torch.bfloat16).requires_grad_()\n"
    )
    cell = (
        "flat = w * 0 + 2.5\n"  # a constant: std 0, not rounding
        "h = torch.tanh(w * 3 - 15 + b.float())\n"
        "r = torch.log(h + 0.5)\n"  # nan where h < -0.5
        "z = torch.relu(d) * w.double()\n"
        "loss = flat.sum() + h.sum() + torch.where(r.isfinite(), r, 0).sum() + z.sum()\n"
        "loss\n"
    )
    _, magic = shells(setup)
    ns = magic.user_ns
    run = run_magic(magic, cell, "--no-check")
    assert_statistics(run, ns, ("flat", "h", "r", "z", "w", "d", "b"), rel=1e-6)
    assert run.stats[run.index("flat"), 1] == 0
    assert run.stats[run.index("r"), 4] > 0
    h = ns["h"].detach().double()
    assert run.stats[run.index("h"), 5] == pytest.approx((h.abs() > 0.97).double().mean().item())
    grads = torch.autograd.grad(ns["loss"], [ns["w"], ns["d"], ns["h"]], retain_graph=True)
    for name, g in zip(("w", "d", "h"), grads):
        i = run.index(name)
        assert run.grad_stats[i, 1] == pytest.approx(g.double().std().item(), rel=1e-6), name
        # named values are kept whole at any size up to torchstats.KEEP_ONE
        np.testing.assert_allclose(run.full[i][1], g.double().numpy(), rtol=1e-6)
        np.testing.assert_array_equal(run.full[i][0], ns[name].detach().double().numpy())


def test_the_checks_stay_within_their_time_budget(monkeypatch):
    """The whole-cell check is predicted from the cell's own time, and an op's check is
    not started when it would not fit: with no time at all, nothing is checked, and the
    run says why instead of showing a tick."""
    from gradmagic.analysis import torchcheck_run

    _, magic = shells(cells.MLP_SETUP)
    run = run_magic(magic, cells.MLP_FORWARD)
    assert run.checks["whole"]["status"] == "pass"
    assert run.checks["ops"] and not any("not checked" in n for n in run.checks["notes"])
    monkeypatch.setattr(torchcheck_run, "BUDGET", 0.0)
    run = run_magic(magic, cells.MLP_FORWARD)
    assert run.checks["whole"]["status"] == "skipped"
    assert "float64 would take about" in run.checks["whole"]["why"]
    assert not run.checks["ops"]
    assert "were not checked one by one" in run.checks["notes"][0]


def test_a_torch_cell_with_no_target_runs_plain_and_says_so(capsys):
    """A cell that ends in a loop has nothing to differentiate: it runs as plain PyTorch
    (torch's own calls, no recorder between them) and the magic says why."""
    setup = "import torch\nwords = ['emma', 'olivia', 'ava'] * 50"
    cell = (
        "N = torch.zeros((27, 27), dtype=torch.int32)\n"
        "modes = []\n"
        "for w in words:\n"
        "    chs = ['.'] + list(w) + ['.']\n"
        "    for a, b in zip(chs, chs[1:]):\n"
        "        i = 0 if a == '.' else ord(a) - 96\n"
        "        j = 0 if b == '.' else ord(b) - 96\n"
        "        N[i, j] += 1\n"
        "    modes.append(torch.overrides.has_torch_function_variadic(N))\n"
    )
    plain, magic = shells(setup)
    assert plain.run_cell(cell).success
    capsys.readouterr()
    magic.run_cell(f"%%autograd\n{cell}")
    shown = capsys.readouterr()
    assert "does not end with an expression" in shown.out + shown.err
    assert_same_state(plain, magic, ["N", "modes"])
    assert int(magic.user_ns["N"].sum()) == sum(len(w) + 1 for w in plain.user_ns["words"])
