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
from gradmagic.views import torchview  # noqa: E402
from gradmagic.views.widget import TorchWidget  # noqa: E402


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


def tab(data: dict, ident: str) -> dict:
    return next(t for t in data["tabs"] if t["id"] == ident)["payload"]


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
    steps = tab(torchview.payload(run), "backward")["steps"]
    assert [s[0] for s in steps] == names
    tanh = next(s for s in steps if s[0] == "TanhBackward0")
    assert tanh[3] == "h" and tanh[4].startswith("σ ")
    # an AccumulateGrad step lights the box of the parameter it fills
    nodes = torchview.payload(run)["nodes"]
    for step in (s for s in steps if s[0] == "AccumulateGrad"):
        assert step[1] >= 0 and nodes[str(step[1])]["name"] == step[3], step


def gpt(layers: int) -> str:
    return cells.GPT_SETUP.replace("model = GPT()", f"model = GPT(layers={layers})")


def test_the_live_payload_is_bounded_at_any_model_size():
    sizes = {}
    for layers in (12, 48):
        run, _ = recorded(gpt(layers), cells.GPT_CELL, no_check=True)
        data = torchview.payload(run)
        sizes[layers] = len(json.dumps(data))
        assert len(data["nodes"]) <= 150 and len(tab(data, "ops")["rows"]) <= 100
        assert len(tab(data, "backward")["steps"]) <= torchview.STEPS
        assert any(f"Block x {layers}" in n["name"] for n in data["nodes"].values())
    assert sizes[48] < 200_000 and sizes[48] < 1.5 * sizes[12]
    steps = tab(data, "backward")
    assert steps["total"] > torchview.STEPS and "first 1,000" in steps["note"]


def test_a_click_on_a_folded_block_opens_it_one_level():
    run, _ = recorded(gpt(12), cells.GPT_CELL, no_check=True)
    data = torchview.payload(run)
    fold = next(n for n in data["nodes"].values() if "Block x 12" in n["name"])
    assert fold["opens"] == "model.blocks.0" and "m" in data["dot"]
    opened = torchview.answer(run, {"type": "layout", "open": [fold["opens"]]})
    names = [n["name"] for n in opened["nodes"].values()]
    assert opened["open"] == ["model.blocks.0"]
    assert any("Block x 11" in name for name in names)
    assert any(name.startswith("model.blocks.0.attn") for name in names)
    inner = next(n for n in opened["nodes"].values() if n["name"].startswith("model.blocks.0.attn"))
    again = torchview.answer(run, {"type": "layout", "open": ["model.blocks.0", inner["opens"]]})
    assert any(n["op"] == "softmax" for n in again["nodes"].values())
    assert torchview.answer(run, {"type": "layout", "open": []})["open"] == []


def test_the_whole_tensor_is_sent_on_demand_within_its_bound():
    setup = "import torch\nW = torch.randn(200, 100, requires_grad=True)\n"
    run, ns = recorded(setup, "h = torch.tanh(W * 2)\nloss = h.sum()\nloss", no_check=True)
    i = run.index("h")
    reply = torchview.answer(run, {"type": "tensor", "value": i})
    assert reply["size"] == 20_000 and "..." in reply["data"]  # past SEND: numpy's summary
    assert len(reply["data"]) < 20_000
    small = torchview.answer(run, {"type": "tensor", "value": run.index("loss")})
    expected = float(torch.tanh(ns["W"].detach() * 2).sum())
    assert float(small["data"]) == pytest.approx(expected, rel=1e-6)
    assert float(small["grad"]) == 1.0
    assert torchview.answer(run, {"type": "tensor", "value": 10**6})["error"]
    assert torchview.answer(run, {"type": "tensor", "value": "x"})["error"]
    assert torchview.answer(run, {"type": "nothing"}) is None


def test_the_wrong_custom_backward_is_red_in_the_live_view():
    run, _ = recorded(cells.BAD_FUNCTION_SETUP, cells.BAD_FUNCTION_CELL)
    data = torchview.payload(run)
    bad = [n for n in data["nodes"].values() if n["status"] == "fail"]
    assert [n["flags"][0] for n in bad] == ["gradient wrong: BadTanh"]
    checks = tab(data, "checks")["html"]
    assert "gm-check-fail" in checks and "BadTanh" in checks
    ops = tab(data, "ops")
    assert "fail" in ops["classes"]
    # the verdict beside the op's name (a narrow output shows it unscrolled), the figures after
    columns = ops["columns"]
    assert columns[:6] == ["box", "op", "name", "check", "line", "module"]
    (row,) = [r for r, c in zip(ops["rows"], ops["classes"]) if c == "fail"]
    assert row[1] == "BadTanh" and row[3] == "fail"
    assert [columns[c] for c in ops["magnitude"]] == ["mean", "std", "max|x|", "∇ std", "∇ max"]


def test_a_torch_run_shows_the_live_view_and_its_static_copy():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell()
    shell.run_line_magic("load_ext", "gradmagic")
    assert shell.run_cell(cells.MLP_SETUP).success
    published = []
    shell.display_pub.publish = lambda data, **kw: published.append(data)
    result = shell.run_cell("%%autograd --no-check\n" + cells.MLP_FORWARD)
    assert result.success
    shown, _ = shell.display_formatter.format(result.result)
    static = [b for b in published if "text/html" in b and "gradmagic-torch" in b["text/html"]]
    assert "application/vnd.jupyter.widget-view+json" in shown
    assert shown["text/plain"].startswith("PyTorch run: target loss")
    assert len(static) == 2  # (the displayhook's and this test's: the copy each time it shows)
    run_id = static[-1]["text/html"].split('data-gm-run="')[1].split('"')[0]
    assert len(run_id) == 16
    shell.run_line_magic("unload_ext", "gradmagic")


def test_a_parameter_written_twice_is_measured_by_its_first_update():
    setup = (
        "import torch\ng = torch.Generator().manual_seed(0)\n"
        "W = torch.randn(20, 10, generator=g, requires_grad=True)\n"
        "x = torch.randn(5, 20, generator=g)\n"
    )
    cell = (
        "loss = torch.tanh(x @ W).pow(2).sum()\n"
        "loss.backward()\n"
        "before = W.detach().clone()\n"
        "with torch.no_grad():\n"
        "    W -= 1e-3 * W.grad\n"
        "    first = W.detach().clone()\n"
        "    W -= 5.0 * W.grad\n"  # a second, bigger write: not what the ratio measures
        "loss"
    )
    run, ns = recorded(setup, cell, no_check=True)
    (w,) = [p for p in run.health["params"] if p["name"] == "W"]
    update = (ns["first"] - ns["before"]).double().std() / ns["before"].double().std()
    assert w["update_to_data"] == pytest.approx(float(update), rel=1e-6)


def test_the_view_draws_the_run_again_when_a_module_is_opened():
    run, _ = recorded(gpt(3), cells.GPT_CELL, no_check=True)
    view = TorchWidget(run, "abc")
    view.selected, view.step = 4, 7
    sent = []
    view.send = sent.append
    view._on_msg(view, {"type": "layout", "open": ["model.blocks.0"]}, [])
    data = json.loads(view.data)
    assert data["open"] == ["model.blocks.0"] and data["run"] == "abc"
    assert (view.selected, view.step) == (-1, 0) and not sent
    view._on_msg(view, {"type": "tensor", "value": data["nodes"]["0"]["value"]}, [])
    assert sent and sent[0]["type"] == "tensor" and sent[0]["size"] > 0
    del run
    import gc

    gc.collect()
    view._on_msg(view, {"type": "tensor", "value": 0}, [])
    assert sent[-1] == {"type": "error", "error": "This run is no longer in memory."}


def test_the_ops_table_keeps_a_wrong_op_however_late_it_ran():
    setup = cells.BAD_FUNCTION_SETUP
    cell = (
        "a = x @ W\n" + "a = a * 1.0\n" * 150 + "h = BadTanh.apply(a)\nloss = (h ** 2).sum()\nloss"
    )
    run, _ = recorded(setup, cell)
    ops = tab(torchview.payload(run), "ops")
    assert len(ops["rows"]) == 100 and "more ops not shown" in ops["note"]
    (bad,) = [r for r, c in zip(ops["rows"], ops["classes"]) if c == "fail"]
    assert bad[ops["columns"].index("op")] == "BadTanh"


def test_the_op_counts_read_as_english():
    from gradmagic.views.torchview import _op_count

    assert _op_count(5, "pass") == "5 pass"
    assert _op_count(1, "fail") == "1 fails" and _op_count(2, "fail") == "2 fail"
    assert _op_count(1, "alike").startswith("1 repeats an op checked")
    assert _op_count(3, "alike").startswith("3 repeat an op checked")
