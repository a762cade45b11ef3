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
import threading
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
    (M, "loss = (w * 2).sum()\ntorch.set_grad_enabled(False)\nloss"),
    (P, "print(torch.is_grad_enabled(), loss.grad_fn is not None)\ntorch.set_grad_enabled(True)"),
    (M, "torch.autograd.set_detect_anomaly(True)\nloss = (w.sin() * 2).sum()\nloss"),
    (P, "print(torch.is_anomaly_enabled())\ntorch.autograd.set_detect_anomaly(False)"),
    (M, "torch.use_deterministic_algorithms(True)\nloss = (w @ w)\nloss"),
    (
        P,
        "print(torch.are_deterministic_algorithms_enabled())\ntorch.use_deterministic_algorithms(False)",
    ),
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

# Cells in the manner of widely read PyTorch code (a small GPT's attention block, the MNIST
# convnet, an LSTM language model, a VAE, a DCGAN step, a linear regression), written here at tiny
# sizes, and cells that try to break the recorder.
_seq(
    "a GPT block: causal self-attention, LayerNorm, GELU, AdamW, clipping, a schedule",
    (
        P,
        "class Attn(nn.Module):\n    def __init__(s, d, h, T):\n        super().__init__()\n"
        "        s.qkv = nn.Linear(d, 3 * d); s.proj = nn.Linear(d, d); s.h = h\n"
        "        s.drop = nn.Dropout(0.1)\n"
        "        s.register_buffer('bias', torch.tril(torch.ones(T, T)).view(1, 1, T, T))\n"
        "    def forward(s, x):\n        B, T, C = x.size()\n"
        "        q, k, v = s.qkv(x).split(C, dim=2)\n"
        "        q, k, v = [t.view(B, T, s.h, C // s.h).transpose(1, 2) for t in (q, k, v)]\n"
        "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
        "        att = att.masked_fill(s.bias[:, :, :T, :T] == 0, float('-inf'))\n"
        "        att = s.drop(F.softmax(att, dim=-1))\n"
        "        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)\n        return s.proj(y)\n"
        "class Block(nn.Module):\n    def __init__(s, d, h, T):\n        super().__init__()\n"
        "        s.ln1 = nn.LayerNorm(d); s.attn = Attn(d, h, T); s.ln2 = nn.LayerNorm(d)\n"
        "        s.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))\n"
        "    def forward(s, x):\n        x = x + s.attn(s.ln1(x))\n        return x + s.mlp(s.ln2(x))\n"
        "class GPT(nn.Module):\n    def __init__(s, V=11, d=8, h=2, T=6, L=2):\n        super().__init__()\n"
        "        s.wte = nn.Embedding(V, d); s.wpe = nn.Embedding(T, d)\n"
        "        s.blocks = nn.ModuleList([Block(d, h, T) for _ in range(L)])\n"
        "        s.ln_f = nn.LayerNorm(d); s.head = nn.Linear(d, V, bias=False)\n"
        "        s.wte.weight = s.head.weight\n"
        "    def forward(s, idx, targets=None):\n        b, t = idx.size()\n"
        "        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)\n"
        "        x = s.wte(idx) + s.wpe(pos)\n        for blk in s.blocks: x = blk(x)\n"
        "        logits = s.head(s.ln_f(x))\n"
        "        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)\n"
        "        return logits, loss\n"
        "model = GPT()\n"
        "decay = [p for n, p in model.named_parameters() if p.dim() >= 2]\n"
        "nodecay = [p for n, p in model.named_parameters() if p.dim() < 2]\n"
        "opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.1}, {'params': nodecay, 'weight_decay': 0.0}], lr=1e-3, betas=(0.9, 0.95))\n"
        "sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)\n"
        "idx = torch.randint(0, 11, (3, 6)); tgt = torch.randint(0, 11, (3, 6)); tgt[0, :2] = -1",
    ),
    (
        M,
        "model.train()\nlogits, loss = model(idx, tgt)\nopt.zero_grad(set_to_none=True)\nloss.backward()\n"
        "norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\nopt.step()\nsched.step()\nloss",
    ),
    (P, "print(sched.get_last_lr(), norm, model.head.weight.grad.abs().sum())"),
    (
        M,
        "model.eval()\nwith torch.no_grad():\n    logits, _ = model(idx[:, :4])\n"
        "    probs = F.softmax(logits[:, -1, :] / 0.8, dim=-1)\n    v, _ = torch.topk(probs, 3)\n"
        "    nxt = torch.multinomial(probs, num_samples=1)\nlogits2, loss2 = model(idx, tgt)\nloss2",
    ),
    (P, "print(nxt.flatten(), loss2.grad_fn is not None, model.training)"),
)
_seq(
    "the MNIST convnet: conv, max-pool, dropout, log-softmax, Adadelta, StepLR",
    (
        P,
        "class Net(nn.Module):\n    def __init__(s):\n        super().__init__()\n"
        "        s.conv1 = nn.Conv2d(1, 4, 3, 1); s.conv2 = nn.Conv2d(4, 8, 3, 1)\n"
        "        s.dropout1 = nn.Dropout(0.25); s.fc1 = nn.Linear(8 * 2 * 2, 16); s.fc2 = nn.Linear(16, 10)\n"
        "    def forward(s, x):\n        x = F.relu(s.conv1(x))\n        x = F.relu(s.conv2(x))\n"
        "        x = F.max_pool2d(x, 2)\n        x = s.dropout1(x)\n        x = torch.flatten(x, 1)\n"
        "        x = F.relu(s.fc1(x))\n        return F.log_softmax(s.fc2(x), dim=1)\n"
        "net = Net()\nopt = torch.optim.Adadelta(net.parameters(), lr=1.0)\n"
        "sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)\n"
        "data = torch.randn(4, 1, 8, 8); target = torch.randint(0, 10, (4,))",
    ),
    (
        M,
        "net.train()\nopt.zero_grad()\noutput = net(data)\nloss = F.nll_loss(output, target)\n"
        "loss.backward()\nopt.step()\nsched.step()\nloss",
    ),
    (
        M,
        "net.eval()\ntest_loss = 0\ncorrect = 0\nwith torch.no_grad():\n    output = net(data)\n"
        "    test_loss += F.nll_loss(output, target, reduction='sum').item()\n"
        "    pred = output.argmax(dim=1, keepdim=True)\n"
        "    correct += pred.eq(target.view_as(pred)).sum().item()\n"
        "print(f'{test_loss:.4f} {correct}')\nloss = F.nll_loss(net(data), target)\nloss",
    ),
    (P, "print(opt.state_dict()['param_groups'][0]['lr'], net.conv1.weight.grad is None)"),
)
_seq(
    "an LSTM language model: embedding, LSTM, hidden state detached, clip_grad_norm_, manual SGD",
    (
        P,
        "class RNNModel(nn.Module):\n    def __init__(s, ntoken=12, ninp=6, nhid=5, nlayers=2):\n"
        "        super().__init__()\n        s.drop = nn.Dropout(0.2); s.encoder = nn.Embedding(ntoken, ninp)\n"
        "        s.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2); s.decoder = nn.Linear(nhid, ntoken)\n"
        "        s.nhid, s.nlayers = nhid, nlayers\n"
        "    def forward(s, input, hidden):\n        emb = s.drop(s.encoder(input))\n"
        "        output, hidden = s.rnn(emb, hidden)\n        output = s.drop(output)\n"
        "        decoded = s.decoder(output).view(-1, 12)\n        return F.log_softmax(decoded, dim=1), hidden\n"
        "    def init_hidden(s, bsz):\n        w = next(s.parameters())\n"
        "        return (w.new_zeros(s.nlayers, bsz, s.nhid), w.new_zeros(s.nlayers, bsz, s.nhid))\n"
        "def repackage_hidden(h):\n    if isinstance(h, torch.Tensor):\n        return h.detach()\n"
        "    return tuple(repackage_hidden(v) for v in h)\n"
        "model = RNNModel()\nsource = torch.randint(0, 12, (5, 3)); targets = torch.randint(0, 12, (15,))\n"
        "hidden = model.init_hidden(3)\ncriterion = nn.NLLLoss()",
    ),
    (
        M,
        "model.train()\nhidden = repackage_hidden(hidden)\nmodel.zero_grad()\n"
        "output, hidden = model(source, hidden)\nloss = criterion(output, targets)\nloss.backward()\n"
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)\nfor p in model.parameters():\n"
        "    p.data.add_(p.grad, alpha=-20)\nloss",
    ),
    (
        P,
        "print(hidden[0].sum().item(), hidden[0].requires_grad, model.rnn.weight_hh_l0.grad.norm())",
    ),
    (
        M,
        "gru = nn.GRU(6, 4, batch_first=True, bidirectional=True)\nseq = torch.randn(2, 5, 6)\n"
        "out, hn = gru(seq)\npacked = nn.utils.rnn.pack_padded_sequence(seq, torch.tensor([5, 3]), batch_first=True)\n"
        "pout, _ = gru(packed)\nunp, lens = nn.utils.rnn.pad_packed_sequence(pout, batch_first=True)\n"
        "loss = out.pow(2).mean() + unp.sum() * 0.01\nloss",
    ),
    (P, "print(lens, hn.shape, out.grad_fn is not None)"),
)
_seq(
    "a VAE: reparameterisation, BCE, KL, and a DCGAN step: BatchNorm2d, ConvTranspose2d, BCELoss",
    (
        P,
        "class VAE(nn.Module):\n    def __init__(s):\n        super().__init__()\n"
        "        s.fc1 = nn.Linear(16, 8); s.fc21 = nn.Linear(8, 2); s.fc22 = nn.Linear(8, 2)\n"
        "        s.fc3 = nn.Linear(2, 8); s.fc4 = nn.Linear(8, 16)\n"
        "    def reparameterize(s, mu, logvar):\n        std = torch.exp(0.5 * logvar)\n"
        "        eps = torch.randn_like(std)\n        return mu + eps * std\n"
        "    def forward(s, x):\n        h1 = F.relu(s.fc1(x.view(-1, 16)))\n        mu, logvar = s.fc21(h1), s.fc22(h1)\n"
        "        z = s.reparameterize(mu, logvar)\n        return torch.sigmoid(s.fc4(F.relu(s.fc3(z)))), mu, logvar\n"
        "vae = VAE()\nvopt = torch.optim.Adam(vae.parameters(), lr=1e-3)\nx = torch.rand(3, 1, 4, 4)\n"
        "netG = nn.Sequential(nn.ConvTranspose2d(3, 4, 4, 1, 0, bias=False), nn.BatchNorm2d(4), nn.ReLU(True),\n"
        "    nn.ConvTranspose2d(4, 1, 4, 2, 1, bias=False), nn.Tanh())\n"
        "netD = nn.Sequential(nn.Conv2d(1, 4, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),\n"
        "    nn.Conv2d(4, 1, 4, 1, 0, bias=False), nn.Sigmoid())\n"
        "def weights_init(m):\n    if m.__class__.__name__.find('Conv') != -1:\n        nn.init.normal_(m.weight.data, 0.0, 0.02)\n"
        "    elif m.__class__.__name__.find('BatchNorm') != -1:\n        nn.init.normal_(m.weight.data, 1.0, 0.02)\n"
        "        nn.init.constant_(m.bias.data, 0)\nnetG.apply(weights_init); netD.apply(weights_init)\n"
        "criterion = nn.BCELoss()\noptD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))\n"
        "optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))\nreal = torch.randn(2, 1, 8, 8).tanh()",
    ),
    (
        M,
        "vopt.zero_grad()\nrecon, mu, logvar = vae(x)\nBCE = F.binary_cross_entropy(recon, x.view(-1, 16), reduction='sum')\n"
        "KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())\nloss = BCE + KLD\nloss.backward()\nvopt.step()\nloss",
    ),
    (
        M,
        "netD.zero_grad()\nlabel = torch.full((2,), 1.0)\noutput = netD(real).view(-1)\nerrD_real = criterion(output, label)\n"
        "errD_real.backward()\nnoise = torch.randn(2, 3, 1, 1)\nfake = netG(noise)\nlabel.fill_(0.0)\n"
        "output = netD(fake.detach()).view(-1)\nerrD_fake = criterion(output, label)\nerrD_fake.backward()\noptD.step()\n"
        "netG.zero_grad()\nlabel.fill_(1.0)\noutput = netD(fake).view(-1)\nerrG = criterion(output, label)\n"
        "errG.backward()\noptG.step()\nerrG",
    ),
    (P, "print(netG[1].running_var, label, errD_real.item() + errD_fake.item())"),
)
_seq(
    "regression, SGD with momentum and weight decay, schedulers, double backward, torch.func",
    (
        P,
        "W_target = torch.randn(3, 1) * 5\nb_target = torch.randn(1) * 5\n"
        "def make_features(x):\n    x = x.unsqueeze(1)\n    return torch.cat([x ** i for i in range(1, 4)], 1)\n"
        "fc = nn.Linear(3, 1)\nsgd = torch.optim.SGD(fc.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4, nesterov=True)\n"
        "plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(sgd, patience=0)\n"
        "onecycle_model = nn.Linear(2, 1)\noc_opt = torch.optim.SGD(onecycle_model.parameters(), lr=0.1)\n"
        "onecycle = torch.optim.lr_scheduler.OneCycleLR(oc_opt, max_lr=0.1, total_steps=10)",
    ),
    (
        M,
        "random_x = torch.randn(8)\nbatch_x = make_features(random_x)\nbatch_y = batch_x.mm(W_target) + b_target.item()\n"
        "fc.zero_grad()\noutput = F.smooth_l1_loss(fc(batch_x), batch_y)\nloss = output.item()\noutput.backward()\n"
        "for param in fc.parameters():\n    param.data.add_(-0.1 * param.grad)\nsgd.step()\nplateau.step(loss)\noutput",
    ),
    (P, "print(fc.weight, sgd.state_dict()['state'], plateau.num_bad_epochs)"),
    (
        M,
        "x = torch.tensor([0.3, -1.2], dtype=torch.float64, requires_grad=True)\ny = (x.sin() * x ** 2).sum()\n"
        "g, = torch.autograd.grad(y, x, create_graph=True)\nhvp, = torch.autograd.grad(g.sum(), x)\n"
        "from torch.func import grad as fgrad, vmap\ngx = vmap(fgrad(lambda t: t.sin() * t))(x.detach())\n"
        "oc_opt.zero_grad()\nocl = onecycle_model(torch.ones(2)).sum()\nocl.backward()\noc_opt.step()\nonecycle.step()\n"
        "pen = (g ** 2).sum() + y\npen",
    ),
    (P, "print(hvp, gx, onecycle.get_last_lr(), x.grad)"),
)
_seq(
    "norms, pooling, embeddings and less common dtypes",
    (
        P,
        "gn = nn.GroupNorm(2, 4); inn = nn.InstanceNorm1d(4, affine=True, track_running_stats=True)\n"
        "bn = nn.BatchNorm2d(4, momentum=None); emb = nn.EmbeddingBag(10, 4, mode='mean')\n"
        "cx = torch.randn(3, dtype=torch.complex64, requires_grad=True)\n"
        "img = torch.randn(2, 4, 6, 6)",
    ),
    (
        M,
        "h = gn(img)\nh = F.avg_pool2d(h, 2) + F.adaptive_max_pool2d(h, 3)\nh = bn(h)\n"
        "s = inn(h.flatten(2))\nbag = emb(torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 3]))\n"
        "mask = h > 0\ncounts = mask.sum()\nidx = torch.nonzero(mask[0, 0])\n"
        "z = (cx * cx.conj()).real.sum()\nloss = s.pow(2).mean() + bag.sum() + z + h[mask].mean()\nloss",
    ),
    (
        P,
        "print(bn.running_mean, bn.num_batches_tracked, inn.running_var, counts, idx.dtype, cx.grad)",
    ),
    (
        M,
        "bn.eval()\ninn.eval()\nh = bn(img)\nq = torch.distributions.Normal(h.mean(), h.std())\n"
        "lp = q.log_prob(torch.zeros(3)).sum()\ncat = torch.distributions.Categorical(logits=emb.weight[0])\n"
        "smp = cat.sample((4,))\nent = cat.entropy()\nloss = lp + ent + inn(h.flatten(2)).sum()\nloss",
    ),
    (P, "print(smp, bn.training, torch.rand(1))"),
)
_seq(
    "hooks, detach, requires_grad_, forward hooks, a custom Function with two outputs",
    (
        P,
        "class MulAdd(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, a, b, k):\n"
        "        ctx.k = k\n        ctx.save_for_backward(a, b)\n        return a * b * k, a + b\n"
        "    @staticmethod\n    def backward(ctx, gm, gs):\n        a, b = ctx.saved_tensors\n"
        "        return gm * b * ctx.k + gs, gm * a * ctx.k + gs, None\n"
        "lin = nn.Linear(3, 3)\nacts = {}\n"
        "fh = lin.register_forward_hook(lambda m, i, o: acts.__setitem__('lin', o.detach()))\n"
        "ph = lin.register_forward_pre_hook(lambda m, i: (i[0] * 2,))\n"
        "a = torch.randn(3).requires_grad_()\nb = torch.randn(3)",
    ),
    (
        M,
        "b.requires_grad_(True)\nm, s = MulAdd.apply(a, b, 3.0)\nfrozen = m.detach()\nfrozen += 1\n"
        "o = lin(s)\nloss = (m * o).sum() + frozen.sum()\nloss.backward()\nloss",
    ),
    (P, "print(acts['lin'], a.grad, b.grad, lin.weight.grad, frozen._version, m._version)"),
    (P, "fh.remove()\nph.remove()\nlin.weight.requires_grad_(False)"),
    (M, "loss = lin(a).sum()\nloss"),
    (P, "print(lin.weight.grad, a.grad, lin._forward_hooks)"),
)
_seq(
    "hostile cells: raising in a forward, rebinding torch, patching Tensor, own modes",
    (
        P,
        "class Boom(nn.Module):\n    def __init__(s):\n        super().__init__()\n        s.l = nn.Linear(2, 2)\n"
        "    def forward(s, x):\n        y = s.l(x)\n        if y.sum() > -1e9:\n            raise KeyboardInterrupt('stop')\n        return y\n"
        "boom = Boom()\nw = torch.randn(2, requires_grad=True)\n"
        "from torch.overrides import TorchFunctionMode\n"
        "class Count(TorchFunctionMode):\n    n = 0\n    def __torch_function__(s, func, types, args=(), kwargs=None):\n"
        "        Count.n += 1\n        return func(*args, **(kwargs or {}))\n"
        "class Tagged(torch.Tensor):\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        return super().__torch_function__(func, types, args, kwargs or {})",
    ),
    (M, "out = boom(w)\nout.sum()"),
    (P, "print(w.grad, boom.l.weight.grad, len(boom._forward_hooks))"),
    (M, "with Count():\n    y = (w * 3).sin()\nloss = y.sum()\nloss"),
    (P, "print(Count.n, y.grad_fn is not None)"),
    (M, "t = torch.randn(2).as_subclass(Tagged)\nt.requires_grad_()\nloss = (t * w).sum()\nloss"),
    (P, "print(type(t).__name__, type(loss).__name__)"),
    (
        M,
        "orig = torch.Tensor.add\ntorch.Tensor.add = lambda s, o: orig(s, o) * 1\nloss = w.add(w).sum()\ntorch.Tensor.add = orig\nloss",
    ),
    (P, "print(torch.Tensor.add is orig, w.add(w))"),
    (
        M,
        "import threading\nres = []\nth = threading.Thread(target=lambda: res.append((w * 2).sum()))\nth.start(); th.join()\nloss = res[0] + w.sum()\nloss",
    ),
    (P, "print(res[0].grad_fn is not None)"),
    (
        M,
        "hnd = nn.modules.module.register_module_forward_hook(lambda m, i, o: None)\nloss = boom.l(w).sum()\nhnd.remove()\nloss",
    ),
    (M, "import torch as tt\ndel torch\nloss = (tt.ones(2, requires_grad=True) * 2).sum()\nloss"),
    (P, "torch = tt\nprint(loss)"),
    (
        P,
        "seen_g = []\ngh = nn.modules.module.register_module_forward_hook(lambda m, i, o: o * 2)\n"
        "gp = nn.modules.module.register_module_forward_pre_hook(lambda m, i: seen_g.append(type(m).__name__))",
    ),
    (M, "loss = boom.l(w).sum()\nloss"),
    (P, "print(seen_g, loss)\ngh.remove()\ngp.remove()"),
    (M, "x = torch.tensor([1.0, 2.0], requires_grad=True)\nloss = (x.exp() ** 400).sum()\nloss"),
)
_seq(
    "copies, saving and loading, tracing, data loaders, dtype changes",
    (
        P,
        "import copy, io\nfrom torch.utils.data import TensorDataset, DataLoader\n"
        "policy = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))\n"
        "ds = TensorDataset(torch.randn(6, 3), torch.randn(6, 2))\n"
        "dl = DataLoader(ds, batch_size=3, shuffle=True)\nopt = torch.optim.SGD(policy.parameters(), lr=0.1, momentum=0.9)",
    ),
    (
        M,
        "target_net = copy.deepcopy(policy)\nema = copy.deepcopy(policy)\nfor xb, yb in dl:\n"
        "    opt.zero_grad()\n    loss = F.mse_loss(policy(xb), yb) + 0.1 * target_net(xb).detach().pow(2).mean()\n"
        "    loss.backward()\n    opt.step()\n"
        "    with torch.no_grad():\n        for pe, pp in zip(ema.parameters(), policy.parameters()):\n"
        "            pe.mul_(0.9).add_(pp, alpha=0.1)\nbuf = io.BytesIO()\ntorch.save(policy, buf)\n"
        "torch.save(policy.state_dict(), io.BytesIO())\nloss",
    ),
    (
        P,
        "buf.seek(0)\nback = torch.load(buf, weights_only=False)\nprint(back(torch.ones(1, 3)), len(back._forward_hooks), len(target_net[0]._forward_hooks))",
    ),
    (
        M,
        "target_net.load_state_dict(policy.state_dict())\ntraced = torch.jit.trace(target_net, torch.randn(2, 3))\n"
        "d64 = copy.deepcopy(policy).double()\nfrom torch.func import functional_call\n"
        "params = {k: v.detach().requires_grad_() for k, v in policy.named_parameters()}\n"
        "out = functional_call(policy, params, (torch.ones(2, 3),))\n"
        "loss = out.sum() + d64(torch.ones(1, 3, dtype=torch.float64)).sum().float() + traced(torch.ones(1, 3)).sum()\nloss",
    ),
    (
        P,
        "print(traced(torch.ones(1, 3)), d64[0].weight.dtype, params['0.weight'].grad, [len(m._forward_hooks) for m in d64.modules()])",
    ),
    (
        M,
        "torch.set_default_dtype(torch.float64)\nz = torch.randn(3, requires_grad=True)\nloss = (z * 2).sum()\nloss",
    ),
    (P, "print(torch.get_default_dtype(), z.dtype)\ntorch.set_default_dtype(torch.float32)"),
)
_seq(
    "modes and hooks left behind by the cell, anomaly mode, errors in backward",
    (
        P,
        "from torch.overrides import TorchFunctionMode\n"
        "class Log(TorchFunctionMode):\n    seen = []\n    def __torch_function__(s, func, types, args=(), kwargs=None):\n"
        "        Log.seen.append(getattr(func, '__name__', '?'))\n        return func(*args, **(kwargs or {}))\n"
        "class Bad(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n"
        "    @staticmethod\n    def backward(ctx, g):\n        raise RuntimeError('bad backward')\n"
        "w = torch.randn(3, requires_grad=True)",
    ),
    (M, "mode = Log()\nmode.__enter__()\nloss = (w * 2).sum()\nloss"),
    (P, "mode.__exit__(None, None, None)\nprint(len(Log.seen) > 0, sorted(set(Log.seen))[:3])"),
    (
        M,
        "with torch.autograd.set_detect_anomaly(True):\n    loss = (w.exp() * 3).sum()\n    loss.backward()\nloss",
    ),
    (M, "y = Bad.apply(w).sum()\ny.backward()\ny"),
    (P, "print(w.grad)"),
    (
        M,
        "import warnings\nclass Warn(nn.Module):\n    def forward(s, x):\n        warnings.warn('careful')\n        return x * 2\nloss = Warn()(w).sum()\nloss",
    ),
    (
        M,
        "big = torch.randn(1500, 1500, requires_grad=True)\nloss = (big @ big).tanh().mean()\nloss",
    ),
)

_seq(
    "torch patched by the user before the cell",
    (
        P,
        "calls = []\norig_mean, orig_grad, orig_abs = torch.Tensor.mean, torch.autograd.grad, torch.Tensor.abs\n"
        "def counted_mean(self, *a, **k):\n    calls.append('mean')\n    return orig_mean(self, *a, **k)\n"
        "def counted_grad(*a, **k):\n    calls.append('grad')\n    return orig_grad(*a, **k)\n"
        "torch.Tensor.mean = counted_mean\ntorch.autograd.grad = counted_grad\n"
        "torch.Tensor.abs = lambda self: orig_abs(self) * 2\n"
        "w = torch.randn(4, requires_grad=True)",
    ),
    (M, "loss = (w.tanh() * 3).mean()\nloss"),
    (P, "print(calls)"),
    (M, "h = w.abs() + 1\nloss = h.log().mean()\nloss.backward()\nloss"),
    (
        M,
        "torch.Tensor.abs = property(lambda self: (lambda: orig_abs(self) * 2))\n"
        "h2 = w.abs()\nloss = h2.sum()\nloss",
    ),
    (
        P,
        "print(calls, w.grad)\ntorch.Tensor.mean, torch.autograd.grad, torch.Tensor.abs = orig_mean, orig_grad, orig_abs",
    ),
)

_seq(
    "transformer layers, fused attention, autocast, weight norm, parametrizations",
    (
        P,
        "enc = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)\n"
        "mha = nn.MultiheadAttention(8, 2, batch_first=True)\nsrc = torch.randn(2, 5, 8)\n"
        "wn = nn.utils.parametrizations.weight_norm(nn.Linear(8, 3))\n"
        "sn = nn.utils.parametrizations.spectral_norm(nn.Linear(8, 3))\n"
        "opt = torch.optim.AdamW(list(enc.parameters()) + list(wn.parameters()), lr=1e-3, foreach=False)",
    ),
    (
        M,
        "enc.eval()\nwith torch.no_grad():\n    fast = enc(src)\nenc.train()\nout = enc(src)\n"
        "a, att_w = mha(src, src, src, need_weights=True)\n"
        "q = k = v = src.view(2, 5, 2, 4).transpose(1, 2)\n"
        "y = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
        "with torch.autocast('cpu', dtype=torch.bfloat16):\n    lowp = wn(src).float()\n"
        "loss = out.pow(2).mean() + a.sum() + y.sum() + lowp.mean() + sn(src).sum()\n"
        "opt.zero_grad()\nloss.backward()\nopt.step()\nloss",
    ),
    (P, "print(fast.sum().item(), att_w.sum().item(), wn.parametrizations.weight.original0.grad)"),
    (M, "enc.eval()\nfast2 = enc(src)\nloss = fast2.sum()\nloss"),
    (P, "print(fast2.grad_fn is not None, sn.parametrizations.weight[0]._u.sum())"),
)

_seq(
    "jacobians, hessians, gradient accumulation, backward with inputs",
    (
        P,
        "net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))\nX = torch.randn(8, 3)\nopt = torch.optim.SGD(net.parameters(), lr=0.1)",
    ),
    (
        M,
        "from torch.autograd.functional import jacobian, hessian\nx0 = torch.randn(3, requires_grad=True)\n"
        "J = jacobian(lambda v: net(v).tanh(), x0)\nH = hessian(lambda v: net(v).sum(), x0.detach())\n"
        "jr = torch.func.jacrev(lambda v: v.sin() * 2)(x0.detach())\nloss = net(x0).sum() + J.sum() * 0.1\nloss",
    ),
    (P, "print(J.shape, H.shape, jr.diagonal(), x0.grad)"),
    (
        M,
        "opt.zero_grad()\nfor chunk in X.split(4):\n    part = net(chunk).pow(2).mean() / 2\n    part.backward()\n"
        "w0 = net[0].weight\nextra = (net(X).sum() * w0.sum())\nextra.backward(inputs=[w0])\nopt.step()\npart",
    ),
    (P, "print(net[0].weight.grad.sum().item(), net[2].bias.grad)"),
)


_seq(
    "complex parameters: a phase filter beside a real bias",
    (
        P,
        "class Phase(nn.Module):\n    def __init__(s):\n        super().__init__()\n"
        "        s.w = nn.Parameter(torch.randn(4, dtype=torch.cfloat))\n        s.b = nn.Parameter(torch.zeros(4))\n"
        "    def forward(s, x):\n        return (torch.fft.fft(x) * s.w).abs() + s.b\n"
        "ph = Phase()\nsig = torch.randn(3, 4)",
    ),
    (M, "ph.zero_grad(set_to_none=True)\nloss = ph(sig).pow(2).mean()\nloss.backward()\nloss"),
    (P, "print(ph.w.grad, ph.b.grad)"),
)


_seq(
    "several backward passes: two losses, retain_graph, autograd.grad first",
    (
        M,
        "lin = nn.Linear(3, 2)\nXs = torch.randn(6, 3)\nl1 = lin(Xs).sum()\nl2 = lin(Xs).pow(2).mean()\n"
        "l1.backward()\nl2.backward()\nl2",
    ),
    (
        M,
        "lin.zero_grad()\nl3 = lin(Xs).tanh().sum()\nl3.backward(retain_graph=True)\nl3.backward()\nl3",
    ),
    (
        M,
        "lin.zero_grad()\nl4 = lin(Xs).pow(2).sum()\n(gw,) = torch.autograd.grad(l4, lin.weight, retain_graph=True)\n"
        "l4.backward()\nl4",
    ),
    (P, "print(lin.weight.grad, lin.bias.grad, gw)"),
)


_seq(
    "writes through .data and a detached alias between ops",
    (P, "wd = torch.randn(3, requires_grad=True)"),
    (M, "v = wd * 1.0\nv.data.mul_(2)\nz = (v * v).sum()\nz"),
    (M, "m = wd * 2\nfrozen = m.detach()\nfrozen += 1\ny = (m * 3).sum()\ny"),
    (P, "print(v, frozen, z.item(), y.item())"),
)


# Cells in the manner of more code we did not write: a hand-derived backward pass checked
# against .grad, a residual block with BatchNorm2d, weight tying and index ops, grad-mode and
# hook plumbing, checkpointing, a deep stack of identical blocks.
_MAKEMORE4_FORWARD = (
    "emb = C[Xb]\nembcat = emb.view(emb.shape[0], -1)\nhprebn = embcat @ W1 + b1\n"
    "bnmeani = 1/n*hprebn.sum(0, keepdim=True)\nbndiff = hprebn - bnmeani\nbndiff2 = bndiff**2\n"
    "bnvar = 1/(n-1)*(bndiff2).sum(0, keepdim=True)\nbnvar_inv = (bnvar + 1e-5)**-0.5\n"
    "bnraw = bndiff * bnvar_inv\nhpreact = bngain * bnraw + bnbias\nh = torch.tanh(hpreact)\n"
    "logits = h @ W2 + b2\nlogit_maxes = logits.max(1, keepdim=True).values\n"
    "norm_logits = logits - logit_maxes\ncounts = norm_logits.exp()\n"
    "counts_sum = counts.sum(1, keepdims=True)\ncounts_sum_inv = counts_sum**-1\n"
    "probs = counts * counts_sum_inv\nlogprobs = probs.log()\nloss = -logprobs[range(n), Yb].mean()\n"
)
MAKEMORE4 = "makemore part 4: a backward pass derived by hand, checked against .grad"
_seq(
    MAKEMORE4,
    (
        P,
        "n_embd, n_hidden, block_size, vocab_size, n = 5, 16, 3, 27, 8\n"
        "g = torch.Generator().manual_seed(2147483647)\nC = torch.randn((vocab_size, n_embd), generator=g)\n"
        "W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * (5/3)/((n_embd * block_size)**0.5)\n"
        "b1 = torch.randn(n_hidden, generator=g) * 0.1\n"
        "W2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.1\n"
        "b2 = torch.randn(vocab_size, generator=g) * 0.1\n"
        "bngain = torch.randn((1, n_hidden))*0.1 + 1.0\nbnbias = torch.randn((1, n_hidden))*0.1\n"
        "parameters = [C, W1, b1, W2, b2, bngain, bnbias]\n"
        "for p in parameters:\n    p.requires_grad = True\n"
        "Xb = torch.randint(0, vocab_size, (n, block_size), generator=g)\n"
        "Yb = torch.randint(0, vocab_size, (n,), generator=g)\n"
        "def cmp(s, dt, t):\n    ex = torch.all(dt == t.grad).item()\n"
        "    app = torch.allclose(dt, t.grad)\n    maxdiff = (dt - t.grad).abs().max().item()\n"
        "    print(f'{s:15s} | exact: {str(ex):5s} | approximate: {str(app):5s} | maxdiff: {maxdiff}')",
    ),
    (
        M,
        _MAKEMORE4_FORWARD + "for p in parameters:\n    p.grad = None\n"
        "for t in [logprobs, probs, counts, counts_sum, counts_sum_inv, norm_logits, logit_maxes,\n"
        "          logits, h, hpreact, bnraw, bnvar_inv, bnvar, bndiff2, bndiff, hprebn, bnmeani,\n"
        "          embcat, emb]:\n    t.retain_grad()\nloss.backward()\nloss",
    ),
    (
        P,
        "dlogprobs = torch.zeros_like(logprobs)\ndlogprobs[range(n), Yb] = -1.0/n\n"
        "dprobs = (1.0 / probs) * dlogprobs\n"
        "dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)\ndcounts = counts_sum_inv * dprobs\n"
        "dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv\ndcounts += torch.ones_like(counts) * dcounts_sum\n"
        "dnorm_logits = counts * dcounts\ndlogits = dnorm_logits.clone()\n"
        "dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)\n"
        "dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes\n"
        "dh = dlogits @ W2.T\ndW2 = h.T @ dlogits\ndb2 = dlogits.sum(0)\n"
        "dhpreact = (1.0 - h**2) * dh\ndbngain = (bnraw * dhpreact).sum(0, keepdim=True)\n"
        "dbnraw = bngain * dhpreact\ndbnbias = dhpreact.sum(0, keepdim=True)\n"
        "dbndiff = bnvar_inv * dbnraw\ndbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)\n"
        "dbnvar = (-0.5*(bnvar + 1e-5)**-1.5) * dbnvar_inv\n"
        "dbndiff2 = (1.0/(n-1))*torch.ones_like(bndiff2) * dbnvar\ndbndiff += (2*bndiff) * dbndiff2\n"
        "dhprebn = dbndiff.clone()\ndbnmeani = (-dbndiff).sum(0)\n"
        "dhprebn += 1.0/n * (torch.ones_like(hprebn) * dbnmeani)\n"
        "dembcat = dhprebn @ W1.T\ndW1 = embcat.T @ dhprebn\ndb1 = dhprebn.sum(0)\n"
        "demb = dembcat.view(emb.shape)\ndC = torch.zeros_like(C)\n"
        "for k in range(Xb.shape[0]):\n    for j in range(Xb.shape[1]):\n"
        "        dC[Xb[k, j]] += demb[k, j]\n"
        "for s, dt, t in [('logprobs', dlogprobs, logprobs), ('logits', dlogits, logits),\n"
        "                 ('hpreact', dhpreact, hpreact), ('bnraw', dbnraw, bnraw),\n"
        "                 ('W1', dW1, W1), ('C', dC, C)]:\n    cmp(s, dt, t)\n"
        "answers = {'logprobs': dlogprobs, 'logits': dlogits, 'hpreact': dhpreact, 'bnraw': dbnraw,\n"
        "           'bngain': dbngain, 'W2': dW2, 'W1': dW1, 'b1': db1, 'C': dC}\n"
        "wrong = dict(answers, W1=dW1.T.reshape(dW1.shape))",
    ),
    (M, _MAKEMORE4_FORWARD + "loss"),
    (
        M,
        "dlogits2 = F.softmax(logits, 1)\ndlogits2[range(n), Yb] -= 1\ndlogits2 /= n\n"
        "loss_fast = F.cross_entropy(logits, Yb)\nloss_fast",
    ),
    (P, "print(loss_fast.item() - loss.item(), (dlogits2 - dlogits).abs().max().item() < 1e-6)"),
)
_seq(
    "a ResNet basic block: BatchNorm2d in train then eval, a downsample, in-place ReLU",
    (
        P,
        "def conv3x3(i, o, stride=1):\n    return nn.Conv2d(i, o, 3, stride, padding=1, bias=False)\n"
        "class BasicBlock(nn.Module):\n    expansion = 1\n"
        "    def __init__(self, inplanes, planes, stride=1, downsample=None):\n"
        "        super().__init__()\n        self.conv1 = conv3x3(inplanes, planes, stride)\n"
        "        self.bn1 = nn.BatchNorm2d(planes)\n        self.relu = nn.ReLU(inplace=True)\n"
        "        self.conv2 = conv3x3(planes, planes)\n        self.bn2 = nn.BatchNorm2d(planes)\n"
        "        self.downsample = downsample\n        self.stride = stride\n"
        "    def forward(self, x):\n        identity = x\n        out = self.conv1(x)\n"
        "        out = self.bn1(out)\n        out = self.relu(out)\n        out = self.conv2(out)\n"
        "        out = self.bn2(out)\n        if self.downsample is not None:\n"
        "            identity = self.downsample(x)\n        out += identity\n"
        "        out = self.relu(out)\n        return out\n"
        "down = nn.Sequential(nn.Conv2d(2, 4, 1, 2, bias=False), nn.BatchNorm2d(4))\n"
        "net = nn.Sequential(BasicBlock(2, 4, 2, down), BasicBlock(4, 4), nn.AdaptiveAvgPool2d((1, 1)),\n"
        "                    nn.Flatten(), nn.Linear(4, 3))\n"
        "for m in net.modules():\n    if isinstance(m, nn.Conv2d):\n"
        "        nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')\n"
        "    elif isinstance(m, nn.BatchNorm2d):\n        nn.init.constant_(m.weight, 1); nn.init.constant_(m.bias, 0)\n"
        "opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)\n"
        "imgs = torch.randn(4, 2, 6, 6); labels = torch.randint(0, 3, (4,))",
    ),
    (
        M,
        "net.train()\nopt.zero_grad()\nloss = F.cross_entropy(net(imgs), labels)\nloss.backward()\n"
        "opt.step()\nloss",
    ),
    (
        P,
        "print(net[0].bn1.running_mean, net[0].bn1.num_batches_tracked, net[1].conv2.weight.grad.norm())",
    ),
    (M, "net.eval()\nout = net(imgs)\nloss_eval = F.cross_entropy(out, labels)\nloss_eval"),
    (P, "print(net[0].bn1.running_var, out.argmax(1))"),
)
_seq(
    "weight tying, gather, scatter, index_add_, masked_fill_, einsum, where with a nan branch",
    (
        P,
        "class Tied(nn.Module):\n    def __init__(s, V=7, d=4):\n        super().__init__()\n"
        "        s.emb = nn.Embedding(V, d); s.head = nn.Linear(d, V, bias=False)\n"
        "        s.head.weight = s.emb.weight\n"
        "    def forward(s, idx):\n        return s.head(torch.tanh(s.emb(idx)))\n"
        "tied = Tied()\nidx = torch.randint(0, 7, (3, 5)); tgt = torch.randint(0, 7, (3, 5))\n"
        "w = torch.randn(5, 4, requires_grad=True)",
    ),
    (
        M,
        "logits = tied(idx)\nlogp = logits.log_softmax(-1)\n"
        "picked = logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)\nloss = -picked.mean()\n"
        "tied.zero_grad()\nloss.backward()\nloss",
    ),
    (P, "print(tied.head.weight is tied.emb.weight, tied.emb.weight.grad.sum().item())"),
    (
        M,
        "src = w[:3] * 2\nperm = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 1], [2, 0, 1, 2]])\n"
        "spread = torch.zeros(3, 4).scatter(0, perm, src)\n"
        "acc = torch.zeros(3, 4).index_add_(0, torch.tensor([0, 2, 1, 0, 2]), w.sin())\n"
        "masked = (w @ w.T).masked_fill_(torch.eye(5, dtype=torch.bool), 0.0)\n"
        "mix = torch.einsum('ij,kj->ik', w, w) + torch.einsum('bi,bi->b', w, w).diag()\n"
        "safe = torch.where(w > 0, w.sqrt(), torch.zeros_like(w))\n"
        "loss = spread.sum() + acc.pow(2).sum() + masked.sum() * 0.1 + mix.mean() + safe.sum()\nloss",
    ),
    (P, "print(torch.autograd.grad(loss, w)[0].isnan().sum().item(), masked._version)"),
)
GRAD_MODES = (
    "grad-mode plumbing: requires_grad_ toggled, no_grad decorator, inference tensors, "
    "frozen parameters, load_state_dict mid-cell"
)
_seq(
    GRAD_MODES,
    (
        P,
        "import copy\nnet = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))\n"
        "for p in net[0].parameters():\n    p.requires_grad = False\n"
        "snapshot = copy.deepcopy(net.state_dict())\nx = torch.randn(6, 3)\n"
        "with torch.inference_mode():\n    feats = net[0](x)\n"
        "@torch.no_grad()\ndef ema(dst, src, d=0.9):\n"
        "    for a, b in zip(dst.parameters(), src.parameters()):\n        a.mul_(d).add_(b, alpha=1 - d)\n"
        "shadow = copy.deepcopy(net)\nopt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)",
    ),
    (
        M,
        "opt.zero_grad()\nu = torch.randn(6, 3)\nu.requires_grad_()\nh = net(u)\n"
        "loss = h.pow(2).mean() + net[2](feats.clone().tanh()).sum()\nu.requires_grad_(False)\n"
        "loss.backward()\nopt.step()\nema(shadow, net)\nloss",
    ),
    (
        P,
        "print(u.grad, u.requires_grad, net[0].weight.grad, net[2].weight.grad.norm(), shadow[2].bias)",
    ),
    (
        M,
        "first = net(x).sum()\nnet.load_state_dict(snapshot)\nsecond = net(x).sum()\n"
        "for p in net[0].parameters():\n    p.requires_grad_(True)\nthird = net(x).pow(2).sum()\n"
        "loss = first + second + third\nloss",
    ),
    (P, "print(net[2].weight.sum().item(), net[0].weight.requires_grad, feats.is_inference())"),
    (M, "bad = (feats * torch.ones(4, requires_grad=True)).sum()\nbad"),
)
_seq(
    "hooks the user set and removes later, and activation checkpointing",
    (
        P,
        "from torch.utils.checkpoint import checkpoint\n"
        "mlp = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))\nlog = []\n"
        "pre = mlp[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))\n"
        "fwd = mlp[2].register_forward_hook(lambda m, a, out: out + 1)\n"
        "bwd = mlp[2].register_full_backward_hook(lambda m, gi, go: log.append(('mod', go[0].shape)))\n"
        "bpre = mlp[0].register_full_backward_pre_hook(lambda m, go: (go[0] * 0.5,))\n"
        "xin = torch.randn(4, 3, requires_grad=True)\n"
        "th = xin.register_hook(lambda g: g * 3)",
    ),
    (M, "mlp.zero_grad()\nout = mlp(xin)\nloss = out.pow(2).sum()\nloss.backward()\nloss"),
    (P, "print(log, xin.grad.sum().item(), mlp[0].weight.grad.sum().item())"),
    (P, "for hnd in (pre, fwd, bwd, bpre, th):\n    hnd.remove()\nxin.grad = None"),
    (M, "mlp.zero_grad()\nloss = mlp(xin).pow(2).sum()\nloss.backward()\nloss"),
    (P, "print(log, xin.grad.sum().item())"),
    (
        M,
        "mid = checkpoint(mlp, xin, use_reentrant=False)\n"
        "deep = checkpoint(lambda t: mlp[2](torch.relu(mlp[0](t))), xin, use_reentrant=False)\n"
        "loss = (mid * deep).sum()\nloss",
    ),
)
_seq(
    "a stack of 12 identical blocks in an nn.ModuleList",
    (
        P,
        "class Blk(nn.Module):\n    def __init__(s, d):\n        super().__init__()\n"
        "        s.ln = nn.LayerNorm(d); s.fc = nn.Linear(d, d)\n"
        "    def forward(s, x):\n        return x + F.gelu(s.fc(s.ln(x)))\n"
        "class Deep(nn.Module):\n    def __init__(s, d=6, L=12):\n        super().__init__()\n"
        "        s.blocks = nn.ModuleList([Blk(d) for _ in range(L)]); s.out = nn.Linear(d, 1)\n"
        "    def forward(s, x):\n        for b in s.blocks:\n            x = b(x)\n        return s.out(x)\n"
        "deep = Deep()\nxs = torch.randn(5, 6)",
    ),
    (M, "deep.zero_grad()\nloss = deep(xs).pow(2).mean()\nloss.backward()\nloss"),
    (P, "print(deep.blocks[0].fc.weight.grad.norm(), deep.blocks[11].ln.weight.grad.sum())"),
)

_seq(
    "errors raised in the user's own hooks, forward and backward",
    (
        P,
        "lin = nn.Linear(3, 2)\nw = torch.randn(3, requires_grad=True)\n"
        "def bad_forward(m, args, out):\n    raise ValueError('from my forward hook')\n"
        "def bad_backward(m, gi, go):\n    raise KeyError('from my module backward hook')",
    ),
    (M, "h = lin.register_forward_hook(bad_forward)\nout = lin(w)\nloss = out.sum()\nloss"),
    (P, "h.remove()\nprint(len(lin._forward_hooks), 'out' in dir())"),
    (
        M,
        "th = w.register_hook(lambda g: g / 0 if g.sum() > 1e9 else 1 / 0)\nloss = (w * 2).sum()\nloss.backward()\nloss",
    ),
    (P, "th.remove()\nprint(w.grad, loss.item())"),
    (
        M,
        "hb = lin.register_full_backward_hook(bad_backward)\nloss = lin(w).tanh().sum()\nloss.backward()\nloss",
    ),
    (P, "hb.remove()\nprint(w.grad, lin.weight.grad)"),
    (M, "w.grad = None\nloss = (lin(w) * 3).sum()\nloss.backward()\nloss"),
    (P, "print(w.grad, len(lin._backward_hooks), len(w._backward_hooks or {}))"),
)
_seq(
    "names and reprs with markup, escapes and huge text",
    (
        P,
        "class Odd(nn.Module):\n    def __init__(s):\n        super().__init__()\n"
        "        s.register_parameter('<script>alert(1)</script>', nn.Parameter(torch.randn(3)))\n"
        "        s.register_buffer('\\x1b[31mred\\x1b[0m', torch.ones(3))\n"
        "        s.add_module('<b onmouseover=x>' + 'z' * 5000, nn.Linear(3, 3))\n"
        "    def forward(s, x):\n"
        "        p = getattr(s, '<script>alert(1)</script>')\n"
        "        b = getattr(s, '\\x1b[31mred\\x1b[0m')\n"
        "        return getattr(s, '<b onmouseover=x>' + 'z' * 5000)(x * p + b)\n"
        "    def extra_repr(s):\n        return '<img src=x onerror=alert(2)>' * 1000\n"
        "odd = Odd()\nx = torch.randn(2, 3)",
    ),
    (
        M,
        "odd.zero_grad()\n_tag = torch.randn(3, requires_grad=True)\n"
        "loss = (odd(x) * _tag).pow(2).mean()\nloss.backward()\nloss",
    ),
    (P, "print(getattr(odd, '<script>alert(1)</script>').grad.shape, repr(odd)[:40])"),
)

_seq(
    "a tensor subclass that counts the calls it sees, as parameter and as target",
    (
        P,
        "class Counted(torch.Tensor):\n    calls = []\n    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        cls.calls.append(getattr(func, '__name__', '?'))\n"
        "        return super().__torch_function__(func, types, args, kwargs or {})\n"
        "wc = torch.randn(3, 2).as_subclass(Counted).requires_grad_()\nxc = torch.randn(4, 3)",
    ),
    (M, "Counted.calls.clear()\nhc = (xc @ wc).tanh()\nlc = hc.sum()\nlc.backward()\nlc"),
    (P, "print(len(Counted.calls), sorted(set(Counted.calls)), type(lc).__name__, wc.grad.sum())"),
    (M, "Counted.calls.clear()\nlc2 = (xc @ wc).sum().as_subclass(Counted)\nlc2"),
    (P, "print(len(Counted.calls), sorted(set(Counted.calls)))"),
)


# (sequence, cell): magic cells whose shown gradients are compared with plain PyTorch's; the
# cells that run backward set the gradients to None first, so .grad is that backward's
GRADIENT_CELLS = [
    ("makemore MLP with hand-written BatchNorm", 2),
    ("makemore MLP with hand-written BatchNorm", 4),
    ("nn.Module training with Adam, BatchNorm and Dropout", 2),
    ("forward-only cells leave .grad alone", 2),
    ("a custom autograd.Function", 3),
    ("a GPT block: causal self-attention, LayerNorm, GELU, AdamW, clipping, a schedule", 2),
    ("a GPT block: causal self-attention, LayerNorm, GELU, AdamW, clipping, a schedule", 4),
    ("the MNIST convnet: conv, max-pool, dropout, log-softmax, Adadelta, StepLR", 2),
    ("the MNIST convnet: conv, max-pool, dropout, log-softmax, Adadelta, StepLR", 3),
    (
        "an LSTM language model: embedding, LSTM, hidden state detached, clip_grad_norm_, manual SGD",
        2,
    ),
    (
        "an LSTM language model: embedding, LSTM, hidden state detached, clip_grad_norm_, manual SGD",
        4,
    ),
    (
        "a VAE: reparameterisation, BCE, KL, and a DCGAN step: BatchNorm2d, ConvTranspose2d, BCELoss",
        2,
    ),
    ("norms, pooling, embeddings and less common dtypes", 2),
    ("norms, pooling, embeddings and less common dtypes", 4),
    (MAKEMORE4, 2),
    (MAKEMORE4, 4),
    ("a ResNet basic block: BatchNorm2d in train then eval, a downsample, in-place ReLU", 2),
    ("a ResNet basic block: BatchNorm2d in train then eval, a downsample, in-place ReLU", 4),
    ("weight tying, gather, scatter, index_add_, masked_fill_, einsum, where with a nan branch", 2),
    ("weight tying, gather, scatter, index_add_, masked_fill_, einsum, where with a nan branch", 4),
    (GRAD_MODES, 2),
    (GRAD_MODES, 4),
    ("hooks the user set and removes later, and activation checkpointing", 2),
    ("hooks the user set and removes later, and activation checkpointing", 5),
    ("hooks the user set and removes later, and activation checkpointing", 7),
    ("a stack of 12 identical blocks in an nn.ModuleList", 2),
    ("a tensor subclass that counts the calls it sees, as parameter and as target", 2),
    ("a tensor subclass that counts the calls it sees, as parameter and as target", 4),
]


def _resolve(ns, name):
    """The object a shown name (``model.blocks.0.attn.qkv.weight``) means in ``ns``."""
    head, *rest = name.split(".")
    obj = ns[head]
    for part in rest:
        obj = getattr(obj, part)
    return obj


def gradients(name: str, i: int) -> dict:
    """Shown name → (the gradient the magic showed, plain PyTorch's) for every leaf that takes
    a gradient of sequence ``name``'s magic cell ``i``: plain PyTorch's is the leaf's .grad
    right after the cell's backward() if it runs one, else ``torch.autograd.grad`` of its last expression."""
    import ast

    from IPython.core.interactiveshell import InteractiveShell

    import gradmagic
    import torch

    cells = SEQUENCES[name]
    found = {}
    for mode in (M, P):
        shell = InteractiveShell()
        shell.run_line_magic("load_ext", "gradmagic")
        for _, cell in cells[:i]:
            assert shell.run_cell(cell).success
        cell = cells[i][1]
        if mode == M:
            assert shell.run_cell(f"%%autograd -q --no-check\n{cell}").success
            run = gradmagic.last
            shown = {run.names[j]: run.full.get(j, (None, None))[1] for j in run.params}
        else:
            body = ast.parse(cell).body
            ran_backward = [n for n, st in enumerate(body) if ".backward(" in ast.unparse(st)]
            if ran_backward:  # (up to it: what follows, clipping say, may change .grad)
                cell = "\n".join(ast.unparse(st) for st in body[: ran_backward[-1] + 1])
            assert shell.run_cell(cell).success
            target = None if ran_backward else shell.ev(ast.unparse(body[-1]))
            for key, g in shown.items():
                try:
                    leaf = _resolve(shell.user_ns, key)
                except (KeyError, AttributeError):
                    continue
                if ran_backward:
                    plain = leaf.grad
                else:
                    plain = torch.autograd.grad(target, leaf, retain_graph=True, allow_unused=True)[
                        0
                    ]
                found[key] = (g, None if plain is None else plain.detach().numpy())
        shell.clear_instance()
    return found


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
    if isinstance(v, threading.Thread):  # (its ids are the operating system's)
        return {"thread": v.name.split(" ")[-1], "alive": v.is_alive()}
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
    from torch.nn.modules import module
    from torch.overrides import _get_current_function_mode_stack

    state = np.random.get_state()
    return {
        "torch rng": _h(torch.get_rng_state().numpy().tobytes()),
        "numpy rng": _h(state[1].tobytes() + repr(state[2:]).encode()),
        "random rng": _h(repr(random.getstate()).encode()),
        "grad enabled": torch.is_grad_enabled(),
        "default dtype": str(torch.get_default_dtype()),
        "function modes": [type(m).__name__ for m in _get_current_function_mode_stack()],
        "global module hooks": [
            len(getattr(module, name))
            for name in sorted(vars(module))
            if name.startswith("_global_") and hasattr(getattr(module, name), "__len__")
        ],
        "Function.apply": getattr(
            torch.autograd.Function.__dict__["apply"], "__func__", None
        ).__qualname__,
    }


def _where(w, header: int) -> str:
    """Where a warning says it comes from: the cell's line (counted without the magic's
    ``header`` line), else the file's name."""
    if w.filename.startswith("<ipython-input"):
        return f"the cell, line {w.lineno - header}"
    return w.filename.rsplit("/", 1)[-1]


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


def _shown(run) -> dict | None:
    """What the magic said of the cell's gradients: the checks' verdicts that are not passes
    (not compared with a plain run; the tests read them)."""
    if run is None or getattr(run, "checks", None) is None:
        return None
    check = run.checks
    return {
        "whole": {k: check["whole"].get(k) for k in ("status", "why")},
        "ops": sorted(
            {
                f"{run.ops[k].name}: {r['status']} {r.get('why', '')}".strip()
                for k, r in check["ops"].items()
                if r["status"] != "pass"
            }
        ),
    }


def _view(shell, run) -> str:
    """What displaying the magic's view of ``run`` gave: its kinds of output, or the error."""
    shown = io.StringIO()
    try:
        with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
            data, _ = shell.display_formatter.format(run)
    except Exception as e:  # noqa: BLE001 - what the test reports
        return f"{type(e).__name__}: {e}"
    if "Traceback" in shown.getvalue() or "Error" in shown.getvalue():
        return shown.getvalue()[-2000:]
    return " ".join(sorted(data))


def run(mode: str, options: str = "-q") -> list:
    from IPython.core.interactiveshell import InteractiveShell

    import gradmagic
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
                        f"{w.category.__name__}: {w.message} ({_where(w, text != cell)})"
                        for w in caught
                    ),
                    "names": {
                        k: summary(v)
                        for k, v in shell.user_ns.items()
                        if k not in before and not k.startswith("_") and k not in ("In", "Out")
                    },
                    "globals": _globals(),
                }
            )
            if kind == M and mode == M:
                seen[-1]["shown"] = _shown(gradmagic.last)
                if gradmagic.last is not None and "-q" not in options.split():
                    seen[-1]["view"] = _view(shell, gradmagic.last)
        results.append(seen)
        shell.clear_instance()
    return results


def unhurried_checks() -> None:
    """The checks' time budget made generous: on a loaded machine a small cell's run can
    take long enough for its whole-cell check to be skipped, which these tests would read
    as a check not made. The budget itself is tested on its own."""
    from gradmagic.analysis import torchcheck_run

    torchcheck_run.BUDGET = 60.0


if __name__ == "__main__":
    unhurried_checks()
    print(json.dumps(run(sys.argv[1], " ".join(sys.argv[2:]))))  # (no options: the view on)
