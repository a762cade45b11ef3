"""PyTorch cells run plainly and under ``%%autograd``, each sequence in a fresh shell of a fresh
process, to compare what a user can see: printed text, errors, warnings, every name's deep state
(tensors bit for bit with their grad, grad_fn type, version, hooks; modules' state and hooks;
optimizers' state) and the random number generators of torch, numpy and ``random``.

``python tests/torch_corpus.py plain|magic [OPTIONS]`` prints one JSON line: a list per sequence.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import random
import sys
import warnings

P, M = "plain", "magic"
_SETUP = (
    P,
    "import torch, torch.nn as nn, torch.nn.functional as F, numpy as np, random, math\n"
    "torch.manual_seed(0); np.random.seed(0); random.seed(0)",
)
SEQUENCES: dict = {}


def _seq(name, *cells):
    SEQUENCES[name] = [_SETUP, *cells]


_seq(
    "makemore MLP with hand-written BatchNorm",
    (
        P,
        "g = torch.Generator().manual_seed(2147483647)\nC = torch.randn((27, 10), generator=g)\n"
        "W1 = torch.randn((30, 64), generator=g) * 0.2\nb1 = torch.randn(64, generator=g) * 0.01\n"
        "W2 = torch.randn((64, 27), generator=g) * 0.01\nb2 = torch.randn(27, generator=g) * 0\n"
        "bngain = torch.ones((1, 64)); bnbias = torch.zeros((1, 64))\n"
        "bnmean_running = torch.zeros((1, 64)); bnstd_running = torch.ones((1, 64))\n"
        "parameters = [C, W1, b1, W2, b2, bngain, bnbias]\n"
        "for p in parameters: p.requires_grad = True\n"
        "Xtr = torch.randint(0, 27, (200, 3), generator=g); Ytr = torch.randint(0, 27, (200,), generator=g)",
    ),
    (
        M,
        "ix = torch.randint(0, Xtr.shape[0], (32,), generator=g)\nXb, Yb = Xtr[ix], Ytr[ix]\n"
        "emb = C[Xb]\nembcat = emb.view(emb.shape[0], -1)\nhpreact = embcat @ W1 + b1\n"
        "bnmeani = hpreact.mean(0, keepdim=True)\nbnstdi = hpreact.std(0, keepdim=True)\n"
        "hpreact = bngain * (hpreact - bnmeani) / bnstdi + bnbias\nwith torch.no_grad():\n"
        "    bnmean_running = 0.999 * bnmean_running + 0.001 * bnmeani\n"
        "    bnstd_running = 0.999 * bnstd_running + 0.001 * bnstdi\nh = torch.tanh(hpreact)\n"
        "logits = h @ W2 + b2\nloss = F.cross_entropy(logits, Yb)\nfor p in parameters: p.grad = None\n"
        "loss.backward()\nprint(f'{loss.item():.6f}')\nfor p in parameters: p.data += -0.1 * p.grad\nloss",
    ),
    (P, "print(loss.item(), W1.grad.abs().sum().item(), bnmean_running.sum().item())"),
    (
        M,
        "emb = C[Xtr[:16]]\nh = torch.tanh(emb.view(16, -1) @ W1 + b1)\nlogits = h @ W2 + b2\n"
        "loss2 = F.cross_entropy(logits, Ytr[:16])\nloss2",
    ),
    (P, "print(loss2.item(), W1.grad.sum().item(), loss2.requires_grad)"),
)
_seq(
    "nn.Module training with Adam, BatchNorm and Dropout",
    (
        P,
        "model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 3))\n"
        "opt = torch.optim.Adam(model.parameters(), lr=1e-2)\nX = torch.randn(16, 4); y = torch.randint(0, 3, (16,))",
    ),
    (
        M,
        "opt.zero_grad()\nout = model(X)\nloss = F.cross_entropy(out, y)\nloss.backward()\nopt.step()\nloss",
    ),
    (P, "print(model[1].running_mean, model[1].num_batches_tracked)"),
    (
        M,
        "opt.zero_grad()\nloss = F.cross_entropy(model(X), y)\nloss.backward()\nopt.step()\nprint(round(loss.item(), 5))\nloss",
    ),
    (P, "model.eval()\nwith torch.no_grad(): pred = model(X).argmax(1)\nprint(pred)"),
)
_seq(
    "forward-only cells leave .grad alone",
    (P, "w = torch.randn(3, requires_grad=True); x = torch.randn(3)"),
    (M, "y = (w * x).sum() ** 2\ny"),
    (P, "print(w.grad, y.grad_fn is not None)"),
    (M, "z = torch.sigmoid(w @ x)\nz"),
)
_seq(
    "errors are the cell's own",
    (P, "a = torch.randn(3, 4, requires_grad=True)"),
    (M, "b = a @ torch.randn(5, 2)\nb.sum()"),
    (M, "c = a.sum()\nprint('before')\nraise ValueError('mine')\nc"),
    (M, "d = (a * 2).sum()\nd.backward()\nd.backward()\nd"),
    (P, "print(a.grad)"),
)
_seq(
    "in-place writes and views",
    (P, "w = torch.randn(5, requires_grad=True)"),
    (
        M,
        "v = w * 1\nv[1:3] *= 2\nv.add_(1)\nu = v.view(5, 1).relu_()\nloss = u.sum()\nloss.backward()\nloss",
    ),
    (P, "print(w.grad, v._version)"),
    (M, "with torch.no_grad():\n    w.mul_(0.5)\nq = (w.exp() * w).mean()\nq"),
    (
        M,
        "W = torch.randn(3, 3, requires_grad=True)\nfor step in range(3):\n    loss = (W @ w[:3]).pow(2).sum()\n"
        "    W.grad = None\n    loss.backward()\n    with torch.no_grad():\n        W -= 0.1 * W.grad\nloss",
    ),
    (P, "print(W.sum().item(), W._version)"),
)
_seq(
    "a custom autograd.Function",
    (
        P,
        "class Sq(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x)\n        return x * x\n    @staticmethod\n    def backward(ctx, g):\n"
        "        x, = ctx.saved_tensors\n        return 2 * x * g\nx = torch.randn(4, requires_grad=True)",
    ),
    (M, "y = Sq.apply(x).sum()\ny.backward()\ny"),
    (M, "y2 = Sq.apply(x * 3).mean()\ny2"),
    (P, "print(x.grad)"),
)
_seq(
    "random numbers drawn in the cell",
    (P, "p = torch.softmax(torch.randn(10), 0)"),
    (
        M,
        "idx = torch.multinomial(p, 5, replacement=True)\nr = torch.rand(3)\nn = np.random.rand(2)\n"
        "k = random.random()\ns = torch.randn(3, requires_grad=True)\nt = (s * r).sum()\nt",
    ),
    (P, "print(idx, r, n, k, torch.rand(1))"),
)
_seq(
    "the user's hooks and retain_grad",
    (
        P,
        "x = torch.randn(3, requires_grad=True)\nseen = []\nhk = x.register_hook(lambda g: seen.append(g.clone()))\n"
        "lin = nn.Linear(3, 2)\ncalls = []\nhb = lin.register_full_backward_hook(lambda m, gi, go: calls.append('b'))",
    ),
    (M, "y = (x ** 3).sum()\ng, = torch.autograd.grad(y, x, create_graph=True)\nz = g.sum()\nz"),
    (M, "out = lin(x).pow(2).sum()\nout"),
    (M, "h = (x * 2).tanh()\nh.retain_grad()\nloss = h.sum()\nloss"),
    (P, "print(len(seen), calls, h.grad, x.grad)"),
    (M, "h = lin(x)\nh.retain_grad()\nloss = h.tanh().sum()\nloss.backward()\nloss"),
    (P, "print(len(seen), calls, h.grad.sum().item(), x.grad)"),
)
_seq(
    "warnings raised by torch",
    (P, "a = torch.randn(3, requires_grad=True)\nlin = nn.Linear(3, 1)"),
    (
        M,
        "l = F.mse_loss(a, torch.randn(3, 1))\nz = torch.range(0, 2)\nl = l + F.mse_loss(lin(a), torch.randn(2))\nl",
    ),
    (M, "v = float(a[0])\nl = (a * v).sum()\nl"),
    (P, "l2 = F.mse_loss(a, torch.randn(3, 1))"),
)
_seq(
    "grad modes in the cell",
    (P, "w = torch.randn(3, requires_grad=True)"),
    (
        M,
        "torch.set_grad_enabled(False)\nv = w * 2\ntorch.set_grad_enabled(True)\nloss = (w * v).sum()\nloss",
    ),
    (M, "with torch.inference_mode():\n    inf = w * 3\nloss = (w * w).sum()\nloss"),
    (M, "y = w * 2\ny.sum().backward()\nloss = y.sum()\nloss"),
    (P, "print(inf.is_inference(), w.grad)"),
)
_seq(
    "classes, closures and data structures",
    (P, "import heapq, collections"),
    (
        M,
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.a = nn.Linear(2, 4); self.b = nn.Linear(4, 1)\n        self.count = 0\n"
        "    def forward(self, x):\n        self.count += 1\n        return self.b(torch.relu(self.a(x)))\n"
        "net = Net()\n@torch.no_grad()\ndef evaluate(m, x):\n    return m(x).mean()\nxs = torch.randn(8, 2)\n"
        "ev = evaluate(net, xs)\nloss = net(xs).pow(2).mean()\nloss",
    ),
    (P, "print(net.count, ev, net.a.weight.grad)\nloss.backward()"),
    (
        M,
        "w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)\nheap = []\nfor i in range(3):\n"
        "    heapq.heappush(heap, (float(w[i].detach()), i))\nd = collections.defaultdict(list)\n"
        "for v, i in heap: d[i % 2].append(w[i] * v)\nloss = sum(sum(x) for x in d.values())\nloss",
    ),
    (
        M,
        "opt = torch.optim.LBFGS([w], lr=0.5, max_iter=5)\ndef closure():\n    opt.zero_grad()\n"
        "    l = (w ** 2).sum()\n    l.backward()\n    return l\nloss = opt.step(closure)\nloss",
    ),
    (P, "print(w, loss, net.count)"),
)


def _h(b: bytes) -> str:
    return hashlib.sha1(b).hexdigest()[:16]


def _tensor(t) -> dict:
    import torch

    x = t.detach().cpu().contiguous()
    out = {
        "dtype": str(t.dtype),
        "shape": list(t.shape),
        "requires_grad": t.requires_grad,
        "leaf": t.is_leaf,
        "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None,
        "retains_grad": t.retains_grad,
        "version": None if t.is_inference() else t._version,
        "hooks": len(t._backward_hooks or {}),
        "data": _h(
            x.view(torch.uint8).numpy().tobytes()
            if x.dim()
            else x.reshape(1).view(torch.uint8).numpy().tobytes()
        ),
    }
    g = t.grad if t.is_leaf or t.retains_grad else None
    out["grad"] = None if g is None else _tensor(g)["data"]
    return out


def summary(v, depth: int = 0):
    """What a user can see of ``v``, as JSON."""
    import numpy as np
    import torch

    if depth > 4:
        return type(v).__name__
    if isinstance(v, torch.Tensor):
        return {"tensor": _tensor(v)}
    if isinstance(v, torch.nn.Module):
        return {
            "module": type(v).__name__,
            "training": v.training,
            "state": {k: _tensor(t) for k, t in v.state_dict(keep_vars=True).items()},
            "hooks": [
                len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
                for m in v.modules()
            ],
            "attrs": {
                k: summary(x, depth + 1) for k, x in vars(v).items() if not k.startswith("_")
            },
        }
    if isinstance(v, torch.optim.Optimizer):
        sd = v.state_dict()
        groups = [{k: x for k, x in g.items() if k != "params"} for g in sd["param_groups"]]
        return {
            "optimizer": type(v).__name__,
            "state": summary(sd["state"], depth + 1),
            "groups": repr(groups),
        }
    if isinstance(v, np.ndarray):
        return {"array": str(v.dtype), "shape": list(v.shape), "data": _h(v.tobytes())}
    if isinstance(v, (list, tuple)):
        return {type(v).__name__: [summary(x, depth + 1) for x in v[:200]]}
    if isinstance(v, dict):
        return {"dict": {repr(k): summary(x, depth + 1) for k, x in list(v.items())[:200]}}
    if isinstance(v, (int, float, complex, str, bool, type(None))):
        return {type(v).__name__: repr(v)}
    if isinstance(v, type) or callable(v):
        return {"callable": type(v).__name__, "name": getattr(v, "__qualname__", "?")}
    if type(v).__name__ == "RemovableHandle":  # (its id counts every hook torch ever made)
        return {"handle": sorted(k for k in vars(v) if k != "id")}
    if hasattr(v, "__dict__") and not isinstance(v, type(sys)):
        return {
            "object": type(v).__name__,
            "attrs": {k: summary(x, depth + 1) for k, x in vars(v).items()},
        }
    return {"other": type(v).__name__}


def _globals() -> dict:
    import numpy as np
    import torch
    from torch.overrides import _get_current_function_mode_stack

    state = np.random.get_state()
    return {
        "torch rng": _h(torch.get_rng_state().numpy().tobytes()),
        "numpy rng": _h(state[1].tobytes() + repr(state[2:]).encode()),
        "random rng": _h(repr(random.getstate()).encode()),
        "grad enabled": torch.is_grad_enabled(),
        "default dtype": str(torch.get_default_dtype()),
        "function modes": len(_get_current_function_mode_stack()),
    }


def _where(w) -> str:
    """Where a warning says it comes from: the cell, else the file's name."""
    return "the cell" if w.filename.startswith("<ipython-input") else w.filename.rsplit("/", 1)[-1]


def _traceback_lines(text: str) -> list:
    """The lines of a shown error a user reads: the message and the user's own line."""
    import re

    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    # (the arrow's number counts the cell's lines: under the magic its first line is %%autograd)
    return [
        re.sub(r"^----> \d+", "---->", ln)
        for ln in plain.splitlines()
        if ln.startswith("---->") or re.match(r"^\w+(Error|Exception)\b: ", ln)
    ]


def run(mode: str, options: str = "-q") -> list:
    from IPython.core.interactiveshell import InteractiveShell

    import torch

    torch.set_num_threads(1)
    results = []
    for cells in SEQUENCES.values():
        shell = InteractiveShell()
        shell.ast_node_interactivity = "none"  # (the plain cell's Out[] is not compared)
        shell.run_line_magic("load_ext", "gradmagic")
        before = set(shell.user_ns)
        seen = []
        for kind, cell in cells:
            text = f"%%autograd {options}\n{cell}" if kind == M and mode == M else cell
            printed = io.StringIO()
            with (
                warnings.catch_warnings(record=True) as caught,
                contextlib.redirect_stdout(printed),
            ):
                warnings.simplefilter("always")
                result = shell.run_cell(text)
            error = result.error_in_exec or result.error_before_exec
            out = printed.getvalue()
            seen.append(
                {
                    "printed": [ln for ln in out.splitlines() if not ln.startswith("---->")]
                    if error is None
                    else _traceback_lines(out),
                    "error": None if error is None else f"{type(error).__name__}: {error}",
                    "warnings": sorted(
                        {f"{w.category.__name__}: {w.message} ({_where(w)})" for w in caught}
                    ),
                    "names": {
                        k: summary(v)
                        for k, v in shell.user_ns.items()
                        if k not in before and not k.startswith("_") and k not in ("In", "Out")
                    },
                    "globals": _globals(),
                }
            )
        results.append(seen)
        shell.clear_instance()
    return results


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "-q")))
