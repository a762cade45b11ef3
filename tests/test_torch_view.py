"""A recorded PyTorch run in the live view: the backward pass as torch ran it, the payload
bounded at any model size, what the browser asks for later (a module opened, a tensor whole).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import torch_cells as cells  # noqa: E402
from gradmagic.analysis.options import Options  # noqa: E402
from gradmagic.notebook import torchcell  # noqa: E402
from gradmagic.views import torchlive  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def recorded(setup: str, cell: str, **options):
    ns: dict = {}
    exec(setup, ns)
    return torchcell.run(cell, ns, Options(quiet=True, **options)), ns


def engine_order(setup: str, cell: str) -> list:
    """The autograd nodes in the order torch's engine runs them, seen by hooks on the nodes
    themselves in a plain run of the same cell."""
    ns: dict = {}
    exec(setup, ns)
    exec(cell.rstrip().rsplit("\n", 1)[0], ns)  # (the cell without its last line, the target)
    target = ns["loss"]
    seen, todo, ran = set(), [target.grad_fn], []
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        node.register_prehook(lambda grads, node=node: ran.append(type(node).__name__))
        todo.extend(n for n, _ in node.next_functions)
    target.backward()
    return ran


@pytest.mark.parametrize(
    "setup, cell",
    [
        (cells.MLP_SETUP, cells.MLP_FORWARD),
        (cells.GPT_SETUP.replace("model = GPT()", "model = GPT(layers=2)"), cells.GPT_CELL),
    ],
    ids=["mlp", "gpt"],
)
def test_the_stepper_walks_the_autograd_nodes_in_the_order_backward_ran_them(setup, cell):
    run, _ = recorded(setup, cell, no_check=True)
    ran = engine_order(setup, cell)
    assert [name for name, _, _ in run.backward] == ran
    assert run.backward_total == len(ran)
    ops = {run.ops[k].name for _, k, _ in run.backward if k >= 0}
    assert {"matmul", "tanh", "cross_entropy"} <= ops or {"linear", "softmax"} <= ops
    leaves = [run.name_of(i) for name, _, i in run.backward if name == "AccumulateGrad"]
    assert leaves and all(i >= 0 for name, _, i in run.backward if name == "AccumulateGrad")


def test_the_stepper_follows_a_backward_the_cell_ran_itself():
    run, _ = recorded(cells.MLP_SETUP, cells.MLP_STEP, no_check=True)
    assert run.backward_by_cell
    names = [name for name, _, _ in run.backward]
    assert names[0] == "NllLossBackward0" and names.count("AccumulateGrad") == 7
    steps = torchlive.payload(run)["steps"]["steps"]
    assert [s[0] for s in steps] == names
    tanh = next(s for s in steps if s[0] == "TanhBackward0")
    assert tanh[3] == "h" and tanh[4].startswith("σ ")


def gpt(layers: int) -> str:
    return cells.GPT_SETUP.replace("model = GPT()", f"model = GPT(layers={layers})")


def test_the_live_payload_is_bounded_at_any_model_size():
    sizes = {}
    for layers in (12, 48):
        run, _ = recorded(gpt(layers), cells.GPT_CELL, no_check=True)
        data = torchlive.payload(run)
        sizes[layers] = len(json.dumps(data))
        assert len(data["boxes"]) <= 150 and len(data["ops"]["rows"]) <= 100
        assert len(data["steps"]["steps"]) <= torchlive.STEPS
        assert any(b["kind"] == "fold" and f"x {layers}" in b["title"] for b in data["boxes"])
    assert sizes[48] < 200_000 and sizes[48] < 1.5 * sizes[12]
    assert data["steps"]["total"] > torchlive.STEPS and "first 1,000" in data["steps"]["note"]
