"""Bigram models of names, written for PyTorch the way makemore's first lecture writes them: a table
of counts filled with `N[ix1, ix2] += 1` and normalised in place, sampling from it with a seeded
torch.Generator, the average negative log likelihood, then the same model as one linear layer over
one-hot characters, trained by `W.data += -lr * W.grad`.

tests/test_programs.py runs it as written and with only its import lines changed.
"""

import torch
import torch.nn.functional as F

with open("names.txt") as f:
    words = f.read().splitlines()
chars = sorted(list(set("".join(words))))
stoi = {s: i + 1 for i, s in enumerate(chars)}
stoi["."] = 0  # starts and ends every name
itos = {i: s for s, i in stoi.items()}
V = len(stoi)


def count_bigrams():
    N = torch.zeros((V, V), dtype=torch.int32)
    for w in words:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            N[stoi[ch1], stoi[ch2]] += 1
    return N


def normalize(N, smoothing=1):
    """Each row of counts as the distribution of the next character; smoothing adds fake counts."""
    P = (N + smoothing).float()
    P /= P.sum(1, keepdims=True)
    return P


def sample(P, g, num=5):
    names = []
    for _ in range(num):
        out, ix = [], 0
        while True:
            p = P[ix]
            ix = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
            out.append(itos[ix])
            if ix == 0:
                break
        names.append("".join(out))
    return names


def nll(P):
    """The average negative log likelihood of every bigram of the names under P."""
    log_likelihood, n = 0.0, 0
    for w in words:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            prob = P[stoi[ch1], stoi[ch2]]
            log_likelihood += torch.log(prob)
            n += 1
    print(f"{log_likelihood=}")
    return (-log_likelihood / n).item()


def training_set():
    xs, ys = [], []
    for w in words:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            xs.append(stoi[ch1])
            ys.append(stoi[ch2])
    return torch.tensor(xs), torch.tensor(ys)


def init_weights(g):
    return torch.randn((V, V), generator=g, requires_grad=True)


def train(W, xs, ys, steps=50, lr=50.0):
    """Gradient descent on the neural bigram: softmax of one-hot x @ W, with a little weight decay."""
    num = xs.nelement()
    xenc = F.one_hot(xs, num_classes=V).float()
    losses = []
    for _ in range(steps):
        logits = xenc @ W  # log-counts
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[torch.arange(num), ys].log().mean() + 0.01 * (W**2).mean()
        losses.append(loss.item())
        W.grad = None
        loss.backward()
        W.data += -lr * W.grad
    return losses


if __name__ == "__main__":
    g = torch.Generator().manual_seed(2147483647)
    N = count_bigrams()
    P = normalize(N)
    names = sample(P, g)
    counted = nll(P)
    xs, ys = training_set()
    W = init_weights(g)
    losses = train(W, xs, ys)
    learned = sample(F.softmax(W.detach(), dim=1), g)
