"""%%autograd on a PyTorch training loop: it runs as the plain loop does, ``run.steps`` holds
the loss at each backward(), and the microscope shows the last step: its graph, its gradients
(PyTorch's own ``.grad`` of the plain loop's last backward) and a check that passes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_torch_cell import one_thread, run_magic, same, shells  # noqa: E402, F401

SETUP = """
import torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
X, y = torch.randn(32, 3), torch.randn(32, 1)
opt = torch.optim.{optimizer}(net.parameters(), lr=0.05)
losses, grads = [], {{}}
"""
FORWARD = "loss = ((net(X) - y) ** 2).mean()"
KEEP = """    losses.append(loss.item())
    grads = {n: p.grad.clone() for n, p in net.named_parameters()}
    print("step", step, round(loss.item(), 5))"""
LOOPS = {  # (the cell, its target's gradients as PyTorch gives them after the plain cell)
    "zero_grad first": f"""for step in range({{n}}):
    opt.zero_grad()
    {FORWARD}
    loss.backward()
{KEEP}
    opt.step()
loss""",
    "zero_grad last": f"""for step in range({{n}}):
    {FORWARD}
    loss.backward()
{KEEP}
    opt.step()
    opt.zero_grad()
loss""",
    "zeroed in place": f"""for step in range({{n}}):
    opt.zero_grad(set_to_none=False)
    {FORWARD}
    loss.backward()
{KEEP}
    opt.step()
loss""",
    "updates through .data": f"""for step in range({{n}}):
    for p in net.parameters():
        p.grad = None
    {FORWARD}
    loss.backward()
{KEEP}
    for p in net.parameters():
        p.data += -0.05 * p.grad
loss""",
    "target after the loop": f"""for step in range({{n}}):
    opt.zero_grad()
    {FORWARD}
    loss.backward()
{KEEP}
    opt.step()
final = ((net(X) - y) ** 2).mean()""",
}


def printed(capsys) -> list:
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]


def run_both(capsys, optimizer: str, loop: str, n: int):
    """The loop (a cell, or its name in LOOPS) run plain and under the magic from the same
    state: (plain shell, run)."""
    plain, magic = shells(SETUP.format(optimizer=optimizer))
    cell = LOOPS.get(loop, loop).replace("{n}", str(n))
    capsys.readouterr()
    assert plain.run_cell(cell).success
    plain_out = printed(capsys)
    run = run_magic(magic, cell)
    assert printed(capsys) == plain_out and len(plain_out) == n
    for name in ("net", "opt"):
        a, b = plain.user_ns[name].state_dict(), magic.user_ns[name].state_dict()
        assert same(a, b), name
    assert plain.user_ns["losses"] == magic.user_ns["losses"]
    return plain, run


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_training_loop_shows_its_losses_and_its_last_step(capsys, optimizer, loop):
    plain, run = run_both(capsys, optimizer, loop, n=12)
    ns = plain.user_ns
    assert run.steps == ns["losses"] and len(set(run.steps)) == 12  # (the loss moved)
    if loop == "target after the loop":
        params = list(ns["net"].parameters())
        want = dict(
            zip(dict(ns["net"].named_parameters()), torch.autograd.grad(ns["final"], params))
        )
        assert not run.backward_by_cell and run.value == ns["final"].item()
    else:
        want = ns["grads"]
        assert run.value == ns["losses"][-1]
    for name, g in want.items():
        assert run.node(f"net.{name}").grad.tolist() == g.tolist(), name
    # the graph is one step's: its ops are those of a one-step loop, and the record kept
    # about one step (a record of every step would hold 12 times as many values)
    _, one = run_both(capsys, optimizer, loop, n=1)
    assert [run.ops[k].name for k in run.graph] == [one.ops[k].name for k in one.graph]
    assert run.n < 2 * one.n, (run.n, one.n)
    report = run.check()
    assert report.rows and all(row.status == "pass" for row in report.rows), report.rows
    assert report.rows[0].name.startswith("the whole cell") and not report.notes
    assert run.health["cuts"] == [] and run.warnings == []
    if optimizer == "SGD" and loop != "target after the loop":  # the last step's update size
        # (a plain SGD step and a write through .data both move p by -lr * grad)
        params = dict(ns["net"].named_parameters())
        assert len(run.health["params"]) == len(params)
        for row in run.health["params"]:
            p, g = params[row["name"][4:]].detach(), 0.05 * ns["grads"][row["name"][4:]]
            if p.numel() > 1:
                want = g.double().std() / (p + g).double().std()
                assert row["update_to_data"] == pytest.approx(want.item(), rel=1e-4)
    # the view plots the steps
    from gradmagic.views import render, torchview

    (tab,) = [t for t in torchview.payload(run)["tabs"] if t["id"] == "training"]
    assert tab["payload"]["html"] == render.steps_svg(run.steps) in torchview.html_view(run)
    assert f"loss per step: {run.steps[0]:.4g} → {run.steps[-1]:.4g}" in torchview.text_view(run)
    assert not [t for t in torchview.payload(one)["tabs"] if t["id"] == "training"]


def test_gradient_accumulation_says_grad_adds_up_the_passes_and_names_the_parameters(capsys):
    cell = """opt.zero_grad()
for step in range(4):
    loss = ((net(X[8 * step : 8 * step + 8]) - y[8 * step : 8 * step + 8]) ** 2).mean()
    loss.backward()
    losses.append(loss.item())
    print("step", step, round(loss.item(), 5))
loss"""
    plain, run = run_both(capsys, "SGD", cell, n=4)
    ns = plain.user_ns
    assert run.steps == ns["losses"]
    last = ((ns["net"](ns["X"][24:]) - ns["y"][24:]) ** 2).mean()  # the target alone
    params = dict(ns["net"].named_parameters())
    for (name, p), g in zip(params.items(), torch.autograd.grad(last, list(params.values()))):
        assert run.node(f"net.{name}").grad.tolist() == g.tolist(), name
        assert not torch.equal(p.grad, g)  # (.grad holds the sum of the four)
    (note,) = run.warnings
    assert "4 backward passes" in note and all(f"net.{n}" in note for n in params)


def test_a_loss_of_an_earlier_step_is_kept_when_named_and_said_let_go_of_when_not():
    _, magic = shells(SETUP.format(optimizer="SGD"))
    loop = """held = []
for step in range(3):
    opt.zero_grad()
    {FORWARD}
    held.append(loss)
    first = held[0]
    loss.backward()
    opt.step()
"""
    named = run_magic(magic, loop.format(FORWARD=FORWARD) + "first")
    assert named.value == named.steps[0] != named.steps[-1]
    assert len(named.graph) == 6 and named.warnings == []
    assert all(row.status == "pass" for row in named.check().rows)
    unnamed = run_magic(
        magic, loop.replace("    first = held[0]\n", "").format(FORWARD=FORWARD) + "held[0]"
    )
    assert unnamed.graph == [] and not unnamed.check().rows
    assert "before a later backward() of the cell, which let go of" in unnamed.warnings[0]
