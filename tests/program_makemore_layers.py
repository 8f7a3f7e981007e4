"""Deeper character-level models built from layers written by hand, the way the makemore lecture notebooks
on activations and batch normalization (part 3) and on a WaveNet-like hierarchy (part 5) write them, for
PyTorch: Linear, BatchNorm1d and Tanh classes with the nn.Module API, each keeping its output in `.out`
(and its gradient, retain_grad) for the diagnostics the lecture prints: saturation, the histograms of
activations and gradients (`torch.histogram(t, density=True)`), the gradient to data ratio of each weight
and the update to data ratios; then Embedding, FlattenConsecutive and Sequential, a hierarchical model
over eight characters, one example forwarded at a time (`logits[i] = model(Xtr[[7+i]])`) and sampling.

tests/test_programs.py runs it as written and with only its import lines changed; the sizes are tiny.
"""

import random

import torch
import torch.nn.functional as F

with open("names.txt") as f:
    words = f.read().splitlines()
chars = sorted(list(set("".join(words))))
stoi = {s: i + 1 for i, s in enumerate(chars)}
stoi["."] = 0
itos = {i: s for s, i in stoi.items()}
vocab_size = len(itos)
block_size = 8


def build_dataset(words):
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + ".":
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
    return torch.tensor(X), torch.tensor(Y)


random.seed(42)
random.shuffle(words)
n1 = int(0.8 * len(words))
Xtr, Ytr = build_dataset(words[:n1])
Xdev, Ydev = build_dataset(words[n1:])

# --- part 3: layers by hand, and what to look at while training --------------------------------------

g = torch.Generator().manual_seed(2147483647)


class Linear:
    def __init__(self, fan_in, fan_out, bias=True):
        self.weight = torch.randn((fan_in, fan_out), generator=g) / fan_in**0.5
        self.bias = torch.zeros(fan_out) if bias else None

    def __call__(self, x):
        self.out = x @ self.weight
        if self.bias is not None:
            self.out += self.bias
        return self.out

    def parameters(self):
        return [self.weight] + ([] if self.bias is None else [self.bias])


class BatchNorm1d:
    def __init__(self, dim, eps=1e-5, momentum=0.1):
        self.eps = eps
        self.momentum = momentum
        self.training = True
        self.gamma = torch.ones(dim)
        self.beta = torch.zeros(dim)
        self.running_mean = torch.zeros(dim)
        self.running_var = torch.ones(dim)

    def __call__(self, x):
        if self.training:
            if x.ndim == 2:
                dim = 0
            elif x.ndim == 3:
                dim = (0, 1)
            xmean = x.mean(dim, keepdim=True)
            xvar = x.var(dim, keepdim=True)
        else:
            xmean = self.running_mean
            xvar = self.running_var
        xhat = (x - xmean) / torch.sqrt(xvar + self.eps)
        self.out = self.gamma * xhat + self.beta
        if self.training:
            with torch.no_grad():
                self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * xmean
                self.running_var = (1 - self.momentum) * self.running_var + self.momentum * xvar
        return self.out

    def parameters(self):
        return [self.gamma, self.beta]


class Tanh:
    def __call__(self, x):
        self.out = torch.tanh(x)
        return self.out

    def parameters(self):
        return []


def deeper_mlp(n_embd=10, n_hidden=32, depth=4):
    """An embedding table and `depth` blocks of Linear, BatchNorm1d and Tanh over three characters."""
    C = torch.randn((vocab_size, n_embd), generator=g)
    layers = [Linear(n_embd * 3, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh()]
    for _ in range(depth - 1):
        layers += [Linear(n_hidden, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh()]
    layers += [Linear(n_hidden, vocab_size, bias=False), BatchNorm1d(vocab_size)]
    with torch.no_grad():
        layers[-1].gamma *= 0.1  # a less confident last layer
        for layer in layers[:-1]:
            if isinstance(layer, Linear):
                layer.weight *= 5 / 3  # the gain of tanh
    parameters = [C] + [p for layer in layers for p in layer.parameters()]
    for p in parameters:
        p.requires_grad = True
    return C, layers, parameters


def train_deeper(max_steps=30, batch_size=32):
    """A few steps of SGD; what the lecture prints: saturation, histograms, grad:data and update ratios."""
    C, layers, parameters = deeper_mlp()
    lossi, ud, stats = [], [], []
    for _i in range(max_steps):
        ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)
        Xb, Yb = Xtr[ix][:, -3:], Ytr[ix]  # the last three characters of the context
        emb = C[Xb]
        x = emb.view(emb.shape[0], -1)
        for layer in layers:
            x = layer(x)
        loss = F.cross_entropy(x, Yb)
        for layer in layers:
            layer.out.retain_grad()
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1
        for p in parameters:
            p.data += -lr * p.grad
        lossi.append(loss.log10().item())
        with torch.no_grad():
            ud.append([((lr * p.grad).std() / p.data.std()).log10().item() for p in parameters])
    for i, layer in enumerate(layers[:-1]):
        if isinstance(layer, Tanh):
            for t in (layer.out, layer.out.grad):
                print("layer %d (%10s): mean %+.2f, std %.2f" % (i, layer.__class__.__name__, t.mean(), t.std()))  # noqa: UP031
                hy, hx = torch.histogram(t, density=True)
                stats.append((hy.tolist(), hx.tolist(), (t.abs() > 0.97).float().mean().item() * 100))
    for p in parameters:
        t = p.grad
        if p.ndim == 2:
            ratio = t.std() / p.std()
            print("weight %10s | mean %+f | std %e | grad:data ratio %e" % (tuple(p.shape), t.mean(), t.std(), ratio))  # noqa: UP031
            stats.append(ratio.item())
    return lossi, ud, stats


# --- part 5: a hierarchy over eight characters --------------------------------------------------------


class Embedding:
    def __init__(self, num_embeddings, embedding_dim):
        self.weight = torch.randn((num_embeddings, embedding_dim))

    def __call__(self, IX):
        self.out = self.weight[IX]
        return self.out

    def parameters(self):
        return [self.weight]


class FlattenConsecutive:
    def __init__(self, n):
        self.n = n

    def __call__(self, x):
        B, T, C = x.shape
        x = x.view(B, T // self.n, C * self.n)
        if x.shape[1] == 1:
            x = x.squeeze(1)
        self.out = x
        return self.out

    def parameters(self):
        return []


class Sequential:
    def __init__(self, layers):
        self.layers = layers

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        self.out = x
        return self.out

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]


def wavenet(n_embd=8, n_hidden=24):
    torch.manual_seed(42)
    model = Sequential([
        Embedding(vocab_size, n_embd),
        FlattenConsecutive(2), Linear(n_embd * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        FlattenConsecutive(2), Linear(n_hidden * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        FlattenConsecutive(2), Linear(n_hidden * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        Linear(n_hidden, vocab_size),
    ])  # fmt: skip
    with torch.no_grad():
        model.layers[-1].weight *= 0.1
    parameters = model.parameters()
    for p in parameters:
        p.requires_grad = True
    return model, parameters


def train_wavenet(model, parameters, max_steps=60, batch_size=32):
    lossi = []
    for i in range(max_steps):
        ix = torch.randint(0, Xtr.shape[0], (batch_size,))
        Xb, Yb = Xtr[ix], Ytr[ix]
        logits = model(Xb)
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < 40 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        lossi.append(loss.log10().item())
    for layer in model.layers:
        print(layer.__class__.__name__, ":", tuple(layer.out.shape))
    return lossi


@torch.no_grad()
def split_loss(model, split):
    x, y = {"train": (Xtr, Ytr), "val": (Xdev, Ydev)}[split]
    logits = model(x)
    return F.cross_entropy(logits, y).item()


def one_at_a_time(model):
    """The same logits, forwarded one example at a time: each (1, vocab_size) output assigned to a row."""
    logits = torch.zeros(8, vocab_size)
    for i in range(8):
        logits[i] = model(Xtr[[7 + i]])
    return logits, model(Xtr[7:15])


def sample(model, num=5):
    names = []
    for _ in range(num):
        out = []
        context = [0] * block_size
        while True:
            logits = model(torch.tensor([context]))
            probs = F.softmax(logits, dim=1)
            ix = torch.multinomial(probs, num_samples=1).item()
            context = context[1:] + [ix]
            out.append(ix)
            if ix == 0 or len(out) > 20:
                break
        names.append("".join(itos[i] for i in out))
        print(names[-1])
    return names


if __name__ == "__main__":
    lossi3, ud, stats = train_deeper()
    model, parameters = wavenet()
    lossi5 = train_wavenet(model, parameters)
    for layer in model.layers:
        layer.training = False
    losses = {split: split_loss(model, split) for split in ["train", "val"]}
    logits, batched = one_at_a_time(model)
    names = sample(model)
