"""A character-level MLP over the previous three characters, written for PyTorch the way the makemore
lecture notebooks write it: bare tensors drawn from a seeded torch.Generator, batch normalization by
hand with running statistics, the forward pass cut into small steps whose gradients are kept, every
gradient derived by hand and checked against autograd's, `p.data += -lr * grad`, and sampling one
character at a time.

tests/test_programs.py runs it as written and with only its import lines changed; the sizes are tiny.
"""

import random

import torch
import torch.nn.functional as F

with open("names.txt") as f:
    words = f.read().splitlines()
chars = sorted(list(set("".join(words))))
stoi = {s: i + 1 for i, s in enumerate(chars)}
stoi["."] = 0  # ends (and, in the context, starts) every word
itos = {i: s for s, i in stoi.items()}
vocab_size = len(itos)
block_size = 3  # characters of context


def build_dataset(words):
    """Every (three previous characters, next character) pair of the words."""
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + ".":
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
    X = torch.tensor(X)
    Y = torch.tensor(Y)
    print(X.shape, Y.shape)
    return X, Y


random.seed(42)
random.shuffle(words)
n1 = int(0.8 * len(words))
n2 = int(0.9 * len(words))
Xtr, Ytr = build_dataset(words[:n1])
Xdev, Ydev = build_dataset(words[n1:n2])
Xte, Yte = build_dataset(words[n2:])

n_embd = 6
n_hidden = 32
batch_size = 16
g = torch.Generator().manual_seed(2147483647)


def init_parameters():
    C = torch.randn((vocab_size, n_embd), generator=g)
    # Kaiming's gain for tanh, 5/3, over the square root of the fan-in
    W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * (5 / 3) / ((n_embd * block_size) ** 0.5)
    b1 = torch.randn(n_hidden, generator=g) * 0.1  # useless under batch norm, kept to check its gradient
    W2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.1
    b2 = torch.randn(vocab_size, generator=g) * 0.1
    bngain = torch.randn((1, n_hidden), generator=g) * 0.1 + 1.0
    bnbias = torch.randn((1, n_hidden), generator=g) * 0.1
    parameters = [C, W1, b1, W2, b2, bngain, bnbias]
    print(sum(p.nelement() for p in parameters), "parameters")
    for p in parameters:
        p.requires_grad = True
    return parameters


def get_batch():
    ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)
    return Xtr[ix], Ytr[ix]


def forward(parameters, Xb, Yb):
    """The loss, cut into steps small enough to differentiate by hand; the steps, their gradients kept."""
    C, W1, b1, W2, b2, bngain, bnbias = parameters
    n = Xb.shape[0]
    emb = C[Xb]  # (n, block_size, n_embd)
    embcat = emb.view(emb.shape[0], -1)
    hprebn = embcat @ W1 + b1
    bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
    bndiff = hprebn - bnmeani
    bndiff2 = bndiff**2
    bnvar = 1 / (n - 1) * (bndiff2).sum(0, keepdim=True)  # Bessel's correction: n - 1
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    bnraw = bndiff * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    h = torch.tanh(hpreact)
    logits = h @ W2 + b2
    logit_maxes = logits.max(1, keepdim=True).values  # subtracted for stability; no effect on the loss
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    counts_sum = counts.sum(1, keepdims=True)
    counts_sum_inv = counts_sum**-1
    probs = counts * counts_sum_inv
    logprobs = probs.log()
    loss = -logprobs[range(n), Yb].mean()
    steps = dict(
        emb=emb, embcat=embcat, hprebn=hprebn, bnmeani=bnmeani, bndiff=bndiff, bndiff2=bndiff2, bnvar=bnvar,
        bnvar_inv=bnvar_inv, bnraw=bnraw, hpreact=hpreact, h=h, logits=logits, logit_maxes=logit_maxes,
        norm_logits=norm_logits, counts=counts, counts_sum=counts_sum, counts_sum_inv=counts_sum_inv,
        probs=probs, logprobs=logprobs,
    )  # fmt: skip
    for t in steps.values():
        t.retain_grad()
    return loss, steps


def backward_by_hand(parameters, Xb, Yb, s):
    """Every gradient of forward's loss, step by step, then fused where the algebra simplifies."""
    C, W1, b1, W2, b2, bngain, bnbias = parameters
    n = Xb.shape[0]
    d = {}
    d["logprobs"] = torch.zeros_like(s["logprobs"])
    d["logprobs"][range(n), Yb] = -1.0 / n
    d["probs"] = (1.0 / s["probs"]) * d["logprobs"]
    d["counts_sum_inv"] = (s["counts"] * d["probs"]).sum(1, keepdim=True)
    d["counts_sum"] = (-(s["counts_sum"] ** -2)) * d["counts_sum_inv"]
    d["counts"] = s["counts_sum_inv"] * d["probs"] + torch.ones_like(s["counts"]) * d["counts_sum"]
    d["norm_logits"] = s["counts"] * d["counts"]
    d["logit_maxes"] = (-d["norm_logits"]).sum(1, keepdim=True)
    one_hot = F.one_hot(s["logits"].max(1).indices, num_classes=s["logits"].shape[1])
    d["logits"] = d["norm_logits"].clone() + one_hot * d["logit_maxes"]
    fused = F.softmax(s["logits"], 1)  # the same, from the cross-entropy's formula: softmax - one-hot, over n
    fused[range(n), Yb] -= 1
    fused /= n
    d["logits (fused)"] = fused
    d["h"] = d["logits"] @ W2.T
    d["W2"] = s["h"].T @ d["logits"]
    d["b2"] = d["logits"].sum(0)
    d["hpreact"] = (1.0 - s["h"] ** 2) * d["h"]
    d["bngain"] = (s["bnraw"] * d["hpreact"]).sum(0, keepdim=True)
    d["bnbias"] = d["hpreact"].sum(0, keepdim=True)
    dh, raw = d["hpreact"], s["bnraw"]
    d["hprebn"] = bngain * s["bnvar_inv"] / n * (n * dh - dh.sum(0) - n / (n - 1) * raw * (dh * raw).sum(0))
    d["embcat"] = d["hprebn"] @ W1.T
    d["W1"] = s["embcat"].T @ d["hprebn"]
    d["b1"] = d["hprebn"].sum(0)
    d["emb"] = d["embcat"].view(s["emb"].shape)
    d["C"] = torch.zeros_like(C)
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            ix = Xb[k, j]
            d["C"][ix] += d["emb"][k, j]
    return d


def cmp(name, dt, t):
    """Print how a gradient by hand compares with autograd's; True where they agree to rounding."""
    ex = torch.all(dt == t.grad).item()
    app = torch.allclose(dt, t.grad, atol=1e-6)
    maxdiff = (dt - t.grad).abs().max().item()
    print(f"{name:15s} | exact: {str(ex):5s} | approximate: {str(app):5s} | maxdiff: {maxdiff}")
    return app


def check_gradients(parameters):
    """Autograd's gradients of one batch against the ones by hand: every comparison's verdict, by name."""
    Xb, Yb = get_batch()
    loss, steps = forward(parameters, Xb, Yb)
    for p in parameters:
        p.grad = None
    loss.backward()
    mine = backward_by_hand(parameters, Xb, Yb, steps)
    named = dict(zip(["C", "W1", "b1", "W2", "b2", "bngain", "bnbias"], parameters))
    verdicts = {}
    for name, dt in mine.items():
        t = steps["logits"] if name == "logits (fused)" else named.get(name, steps.get(name))
        verdicts[name] = cmp(name, dt, t)
    fast = F.cross_entropy(steps["logits"], Yb)
    print("cross_entropy", fast.item(), "diff:", (fast - loss).item())
    return verdicts


def train(parameters, max_steps):
    """Steps of SGD on batches; the statistics batch norm keeps for sampling, updated as it goes; the
    log10 loss of every step, and each update's size relative to its parameter's."""
    C, W1, b1, W2, b2, bngain, bnbias = parameters
    global bnmean_running, bnstd_running
    bnmean_running = torch.zeros((1, n_hidden))
    bnstd_running = torch.ones((1, n_hidden))
    lossi, ud = [], []
    for i in range(max_steps):
        Xb, Yb = get_batch()
        hpreact = C[Xb].view(Xb.shape[0], -1) @ W1 + b1
        bnmeani = hpreact.mean(0, keepdim=True)
        bnstdi = hpreact.std(0, keepdim=True)
        hpreact = bngain * (hpreact - bnmeani) / bnstdi + bnbias
        with torch.no_grad():
            bnmean_running = 0.9 * bnmean_running + 0.1 * bnmeani
            bnstd_running = 0.9 * bnstd_running + 0.1 * bnstdi
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < max_steps // 2 else 0.05
        for p in parameters:
            p.data += -lr * p.grad
        if i % 20 == 0:
            print(f"{i:7d}/{max_steps:7d}: {loss.item():.4f}")
        lossi.append(loss.log10().item())
        with torch.no_grad():
            ud.append([((lr * p.grad).std() / p.std()).log10().item() for p in parameters])
    return lossi, ud


@torch.no_grad()
def split_loss(parameters, split):
    C, W1, b1, W2, b2, bngain, bnbias = parameters
    x, y = {"train": (Xtr, Ytr), "val": (Xdev, Ydev), "test": (Xte, Yte)}[split]
    hpreact = C[x].view(x.shape[0], -1) @ W1 + b1
    hpreact = bngain * (hpreact - bnmean_running) / bnstd_running + bnbias
    logits = torch.tanh(hpreact) @ W2 + b2
    loss = F.cross_entropy(logits, y)
    print(split, loss.item())
    return loss.item()


def sample(parameters, num=5):
    C, W1, b1, W2, b2, bngain, bnbias = parameters
    names = []
    for _ in range(num):
        out = []
        context = [0] * block_size
        while True:
            emb = C[torch.tensor([context])]  # (1, block_size, n_embd)
            hpreact = emb.view(1, -1) @ W1 + b1
            hpreact = bngain * (hpreact - bnmean_running) / bnstd_running + bnbias
            logits = torch.tanh(hpreact) @ W2 + b2
            probs = F.softmax(logits, dim=1)
            ix = torch.multinomial(probs, num_samples=1, generator=g).item()
            context = context[1:] + [ix]
            out.append(ix)
            if ix == 0 or len(out) > 20:
                break
        names.append("".join(itos[i] for i in out))
        print(names[-1])
    return names


if __name__ == "__main__":
    parameters = init_parameters()
    verdicts = check_gradients(parameters)
    lossi, ud = train(parameters, 200)
    losses = {split: split_loss(parameters, split) for split in ["train", "val"]}
    names = sample(parameters)
