"""PyTorch cells for the tests and the benchmark: random data and weights, no downloads.

- ``MLP_SETUP`` / ``MLP_STEP``: a character-level MLP with a hand-written BatchNorm (the
  makemore style): sample a batch, forward, ``loss.backward()``, an SGD update in place.
- ``MLP_FORWARD``: the same forward on a fixed batch, no backward (the magic computes the
  gradients); ``MANUAL_BACKWARD``: the gradients derived by hand, to check against it.
- ``GPT_SETUP`` / ``GPT_CELL``: a small GPT (12 blocks, tiny dims) made of ``nn.Module`` s.
- ``BAD_FUNCTION_SETUP`` / ``BAD_FUNCTION_CELL``: a custom ``autograd.Function`` whose
  backward is wrong (tanh' written as 1 - y instead of 1 - y**2).
"""

MLP_SETUP = """
import torch
import torch.nn.functional as F
g = torch.Generator().manual_seed(2147483647)
vocab, block, n_embd, n_hidden, batch = 27, 3, 10, 64, 32
C  = torch.randn((vocab, n_embd), generator=g)
W1 = torch.randn((n_embd * block, n_hidden), generator=g) * (5/3) / (n_embd * block)**0.5
b1 = torch.randn(n_hidden, generator=g) * 0.1
W2 = torch.randn((n_hidden, vocab), generator=g) * 0.1
b2 = torch.randn(vocab, generator=g) * 0.1
bngain = torch.randn((1, n_hidden), generator=g) * 0.1 + 1.0
bnbias = torch.randn((1, n_hidden), generator=g) * 0.1
bnmean_running = torch.zeros((1, n_hidden))
bnstd_running = torch.ones((1, n_hidden))
parameters = [C, W1, b1, W2, b2, bngain, bnbias]
for p in parameters:
    p.requires_grad = True
Xtr = torch.randint(0, vocab, (1000, block), generator=g)
Ytr = torch.randint(0, vocab, (1000,), generator=g)
log = []
"""

MLP_STEP = """
ix = torch.randint(0, Xtr.shape[0], (batch,), generator=g)
Xb, Yb = Xtr[ix], Ytr[ix]
emb = C[Xb]
embcat = emb.view(emb.shape[0], -1)
hprebn = embcat @ W1 + b1
bnmeani = hprebn.mean(0, keepdim=True)
bnstdi = hprebn.std(0, keepdim=True)
hpreact = bngain * (hprebn - bnmeani) / bnstdi + bnbias
with torch.no_grad():
    bnmean_running = 0.999 * bnmean_running + 0.001 * bnmeani
    bnstd_running = 0.999 * bnstd_running + 0.001 * bnstdi
h = torch.tanh(hpreact)
logits = h @ W2 + b2
loss = F.cross_entropy(logits, Yb)
for p in parameters:
    p.grad = None
loss.backward()
lr = 0.1
for p in parameters:
    p.data += -lr * p.grad
log.append(f"{loss.item():.6f}"); print("step loss", log[-1], h.shape)
loss
"""

MLP_FORWARD = """
Xb, Yb = Xtr[:batch], Ytr[:batch]
emb = C[Xb]
embcat = emb.view(emb.shape[0], -1)
hprebn = embcat @ W1 + b1
bnmeani = 1/batch * hprebn.sum(0, keepdim=True)
bndiff = hprebn - bnmeani
bndiff2 = bndiff**2
bnvar = 1/(batch - 1) * bndiff2.sum(0, keepdim=True)
bnvar_inv = (bnvar + 1e-5)**-0.5
bnraw = bndiff * bnvar_inv
hpreact = bngain * bnraw + bnbias
h = torch.tanh(hpreact)
logits = h @ W2 + b2
loss = F.cross_entropy(logits, Yb)
loss
"""

MANUAL_BACKWARD = """
dlogits = F.softmax(logits, 1)
dlogits[range(batch), Yb] -= 1
dlogits /= batch
dh = dlogits @ W2.T
dW2 = h.T @ dlogits
db2 = dlogits.sum(0)
dhpreact = (1.0 - h**2) * dh
dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
dbnbias = dhpreact.sum(0, keepdim=True)
dbnraw = bngain * dhpreact
answers = {"logits": dlogits, "h": dh, "W2": dW2, "b2": db2, "hpreact": dhpreact,
           "bngain": dbngain, "bnbias": dbnbias, "bnraw": dbnraw}
wrong = dict(answers, hpreact=(1.0 - h) * dh)
"""

GPT_SETUP = """
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(1337)

class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.c_attn(x).split(D, dim=2)
        q = q.view(B, T, self.heads, D // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, D // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, D // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
        att = att.masked_fill(mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, D)
        return self.c_proj(y)

class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

class GPT(nn.Module):
    def __init__(self, vocab=11, block=8, d=8, heads=2, layers=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))

model = GPT()
idx = torch.randint(0, 11, (2, 8))
targets = torch.randint(0, 11, (2, 8))
"""

GPT_CELL = """
logits = model(idx)
loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
loss
"""

BAD_FUNCTION_SETUP = """
import torch

class BadTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * (1 - y)  # wrong: tanh' is 1 - y**2

torch.manual_seed(0)
x = torch.randn(4, 3)
W = torch.randn(3, 5, requires_grad=True)
"""

BAD_FUNCTION_CELL = """
a = x @ W
h = BadTanh.apply(a)
loss = (h ** 2).sum()
loss
"""

TRAIN_SETUP = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(3)
net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(inplace=True), nn.Dropout(0.2),
                    nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))
opt = torch.optim.Adam(net.parameters(), lr=1e-2, foreach=True)
X = torch.randn(20, 6)
y = torch.randint(0, 3, (20,))
"""

TRAIN_STEP = """
opt.zero_grad()
out = net(X)
out[:, 0] *= 2.0
loss = F.cross_entropy(out, y)
loss.backward()
opt.step()
loss
"""
