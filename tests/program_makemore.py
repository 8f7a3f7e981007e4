"""Character-level models that make more words like the ones they read, written for PyTorch in
makemore's idiom: six models behind one interface (a Transformer, a bag of words, an RNN with a plain or
a GRU cell, an MLP over the previous characters, a bigram table), a Dataset of words, an endless
DataLoader, evaluation and sampling, and a command line.

tests/test_programs.py runs it as written and with only its import lines changed; the sizes are tiny.
"""

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import Dataset
from torch.utils.data.dataloader import DataLoader


@dataclass
class ModelConfig:
    block_size: int = None  # the longest sequence a model reads
    vocab_size: int = None  # token ids are 0 .. vocab_size - 1
    n_layer: int = 2
    n_embd: int = 16
    n_embd2: int = 16
    n_head: int = 2


# --- Transformer --------------------------------------------------------------------------------------


class NewGELU(nn.Module):
    """GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as GPT-2 computes it."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention written out, then a projection."""

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        mask = torch.tril(torch.ones(config.block_size, config.block_size))
        self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size))
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.ModuleDict(
            dict(
                c_fc=nn.Linear(config.n_embd, 4 * config.n_embd),
                c_proj=nn.Linear(4 * config.n_embd, config.n_embd),
                act=NewGELU(),
            )
        )
        m = self.mlp
        self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlpf(self.ln_2(x))
        return x


class Transformer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.block_size = config.block_size
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        n_params = sum(p.numel() for p in self.transformer.parameters())
        print(f"transformer parameters (without the head): {n_params}")

    def get_block_size(self):
        return self.block_size

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.block_size, f"a sequence of {t} is longer than the block ({self.block_size})"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)  # (1, t)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


# --- bag of words ---------------------------------------------------------------------------------------


class CausalBoW(nn.Module):
    """Each position becomes the average of itself and the positions before it."""

    def __init__(self, config):
        super().__init__()
        self.block_size = config.block_size
        mask = torch.tril(torch.ones(config.block_size, config.block_size))
        self.register_buffer("bias", mask.view(1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        att = torch.zeros((B, T, T), device=x.device)
        att = att.masked_fill(self.bias[:, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)  # uniform over the visible positions
        return att @ x


class BoWBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.cbow = CausalBoW(config)
        self.mlp = nn.ModuleDict(
            dict(
                c_fc=nn.Linear(config.n_embd, config.n_embd2),
                c_proj=nn.Linear(config.n_embd2, config.n_embd),
            )
        )
        m = self.mlp
        self.mlpf = lambda x: m.c_proj(F.tanh(m.c_fc(x)))

    def forward(self, x):
        x = x + self.cbow(x)
        x = x + self.mlpf(x)
        return x


class BoW(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.block_size = config.block_size
        self.vocab_size = config.vocab_size
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.context_block = BoWBlock(config)
        self.lm_head = nn.Linear(config.n_embd, self.vocab_size)

    def get_block_size(self):
        return self.block_size

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.block_size
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.context_block(self.wte(idx) + self.wpe(pos))
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


# --- recurrent networks -------------------------------------------------------------------------------


class RNNCell(nn.Module):
    """h_t = tanh(W [x_t, h_{t-1}] + b)"""

    def __init__(self, config):
        super().__init__()
        self.xh_to_h = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)

    def forward(self, xt, hprev):
        xh = torch.cat([xt, hprev], dim=1)
        return F.tanh(self.xh_to_h(xh))


class GRUCell(nn.Module):
    """r = sigmoid(W_r [x, h]); hbar = tanh(W_h [x, r h]); z = sigmoid(W_z [x, h]); h' = (1 - z) h + z hbar"""

    def __init__(self, config):
        super().__init__()
        self.xh_to_z = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
        self.xh_to_r = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
        self.xh_to_hbar = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)

    def forward(self, xt, hprev):
        xh = torch.cat([xt, hprev], dim=1)
        r = F.sigmoid(self.xh_to_r(xh))  # how much of the past the candidate may read
        hbar = F.tanh(self.xh_to_hbar(torch.cat([xt, r * hprev], dim=1)))
        z = F.sigmoid(self.xh_to_z(xh))  # how much of each channel to replace
        return (1 - z) * hprev + z * hbar


class RNN(nn.Module):
    def __init__(self, config, cell_type):
        super().__init__()
        self.block_size = config.block_size
        self.vocab_size = config.vocab_size
        self.start = nn.Parameter(torch.zeros(1, config.n_embd2))  # the state before the first character
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        if cell_type == "rnn":
            self.cell = RNNCell(config)
        elif cell_type == "gru":
            self.cell = GRUCell(config)
        self.lm_head = nn.Linear(config.n_embd2, self.vocab_size)

    def get_block_size(self):
        return self.block_size

    def forward(self, idx, targets=None):
        b, t = idx.size()
        emb = self.wte(idx)  # (b, t, n_embd), every position at once
        hprev = self.start.expand((b, -1))
        hiddens = []
        for i in range(t):
            hprev = self.cell(emb[:, i, :], hprev)
            hiddens.append(hprev)
        logits = self.lm_head(torch.stack(hiddens, 1))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


# --- MLP over the previous characters (Bengio et al., 2003) --------------------------------------------


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.block_size = config.block_size
        self.vocab_size = config.vocab_size
        self.wte = nn.Embedding(config.vocab_size + 1, config.n_embd)  # one more: <BLANK> before the start
        self.mlp = nn.Sequential(
            nn.Linear(self.block_size * config.n_embd, config.n_embd2),
            nn.Tanh(),
            nn.Linear(config.n_embd2, self.vocab_size),
        )

    def get_block_size(self):
        return self.block_size

    def forward(self, idx, targets=None):
        embs = []
        for _ in range(self.block_size):
            embs.append(self.wte(idx))
            idx = torch.roll(idx, 1, 1)  # the character one further back, at every position
            idx[:, 0] = self.vocab_size  # with <BLANK> where there is none
        logits = self.mlp(torch.cat(embs, -1))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


# --- bigram table -----------------------------------------------------------------------------------------


class Bigram(nn.Module):
    """The logits of the next character are a row of a table, chosen by the character before."""

    def __init__(self, config):
        super().__init__()
        n = config.vocab_size
        self.logits = nn.Parameter(torch.zeros((n, n)))

    def get_block_size(self):
        return 1

    def forward(self, idx, targets=None):
        logits = self.logits[idx]
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


MODELS = {
    "transformer": Transformer,
    "bigram": Bigram,
    "mlp": MLP,
    "rnn": lambda config: RNN(config, cell_type="rnn"),
    "gru": lambda config: RNN(config, cell_type="gru"),
    "bow": BoW,
}


# --- sampling and evaluation ------------------------------------------------------------------------------


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
    """Extend idx (b, t) one token at a time: drawn from the distribution, or its most likely."""
    block_size = model.get_block_size()
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
        logits, _ = model(idx_cond)
        logits = logits[:, -1, :] / temperature
        if top_k is not None:
            v, _ = torch.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
        if do_sample:
            idx_next = torch.multinomial(probs, num_samples=1)
        else:
            _, idx_next = torch.topk(probs, k=1, dim=-1)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx


def print_samples(model, train_dataset, test_dataset, num=10, top_k=None, do_sample=True, device="cpu"):
    """num words drawn from the model, sorted by whether the training or the test set has them."""
    X_init = torch.zeros(num, 1, dtype=torch.long).to(device)
    steps = train_dataset.get_output_length() - 1  # the <START> token is already there
    X_samp = generate(model, X_init, steps, top_k=top_k, do_sample=do_sample).to("cpu")
    groups = {"in train": [], "in test": [], "new": []}
    for i in range(X_samp.size(0)):
        row = X_samp[i, 1:].tolist()
        row = row[: row.index(0)] if 0 in row else row  # 0 ends a word
        word = train_dataset.decode(row)
        where = "in train" if train_dataset.contains(word) else "in test" if test_dataset.contains(word) else "new"
        groups[where].append(word)
    for where, words in groups.items():
        print(f"{len(words)} samples that are {where}: {' '.join(words)}")
    return groups


@torch.inference_mode()
def evaluate(model, dataset, batch_size=50, max_batches=None, device="cpu"):
    model.eval()
    loader = DataLoader(dataset, shuffle=True, batch_size=batch_size, num_workers=0)
    losses = []
    for i, batch in enumerate(loader):
        X, Y = [t.to(device) for t in batch]
        logits, loss = model(X, Y)
        losses.append(loss.item())
        if max_batches is not None and i >= max_batches:
            break
    mean_loss = torch.tensor(losses).mean().item()
    model.train()
    return mean_loss


# --- the words --------------------------------------------------------------------------------------------


class CharDataset(Dataset):
    """Words as (x, y) pairs of ids: x is <START> (0) then the word, y the word then <STOP> (0), and -1
    where the word has ended, which the loss ignores."""

    def __init__(self, words, chars, max_word_length):
        self.words = words
        self.chars = chars
        self.max_word_length = max_word_length
        self.stoi = {ch: i + 1 for i, ch in enumerate(chars)}
        self.itos = {i: s for s, i in self.stoi.items()}

    def __len__(self):
        return len(self.words)

    def contains(self, word):
        return word in self.words

    def get_vocab_size(self):
        return len(self.chars) + 1  # the characters and the special 0

    def get_output_length(self):
        return self.max_word_length + 1

    def encode(self, word):
        return torch.tensor([self.stoi[w] for w in word], dtype=torch.long)

    def decode(self, ix):
        return "".join(self.itos[i] for i in ix)

    def __getitem__(self, idx):
        word = self.words[idx]
        ix = self.encode(word)
        x = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        y = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        x[1 : 1 + len(ix)] = ix
        y[: len(ix)] = ix
        y[len(ix) + 1 :] = -1
        return x, y


def create_datasets(input_file):
    with open(input_file) as f:
        words = [w.strip() for w in f.read().splitlines()]
    words = [w for w in words if w]
    chars = sorted(set("".join(words)))
    max_word_length = max(len(w) for w in words)
    print(f"{len(words)} words, the longest {max_word_length} characters, vocabulary {''.join(chars)}")
    test_set_size = min(1000, int(len(words) * 0.1))
    rp = torch.randperm(len(words)).tolist()
    train_words = [words[i] for i in rp[:-test_set_size]]
    test_words = [words[i] for i in rp[-test_set_size:]]
    return CharDataset(train_words, chars, max_word_length), CharDataset(test_words, chars, max_word_length)


class InfiniteDataLoader:
    """Batches without end: a sampler drawing with replacement more examples than any run takes."""

    def __init__(self, dataset, **kwargs):
        train_sampler = torch.utils.data.RandomSampler(dataset, replacement=True, num_samples=int(1e10))
        self.train_loader = DataLoader(dataset, sampler=train_sampler, **kwargs)
        self.data_iter = iter(self.train_loader)

    def next(self):
        try:
            batch = next(self.data_iter)
        except StopIteration:
            self.data_iter = iter(self.train_loader)
            batch = next(self.data_iter)
        return batch


def build(args, train_dataset):
    config = ModelConfig(
        vocab_size=train_dataset.get_vocab_size(),
        block_size=train_dataset.get_output_length(),
        n_layer=args.n_layer,
        n_head=args.n_head,
        n_embd=args.n_embd,
        n_embd2=args.n_embd2,
    )
    if args.type not in MODELS:
        raise ValueError(f"model type {args.type} is not recognized")
    return MODELS[args.type](config)


def make_optimizer(model, args):
    return torch.optim.AdamW(
        model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay, betas=(0.9, 0.99), eps=1e-8
    )


def train_step(model, optimizer, batch, device="cpu"):
    X, Y = [t.to(device) for t in batch]
    logits, loss = model(X, Y)
    model.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def parse_args(argv):
    parser = argparse.ArgumentParser(description="make more words like the ones in a file")
    parser.add_argument("--input-file", "-i", type=str, default="names.txt")
    parser.add_argument("--work-dir", "-o", type=str, default="out")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--sample-only", action="store_true")
    parser.add_argument("--num-workers", "-n", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--device", type=str, default="cpu")
    parser.add_argument("--seed", type=int, default=3407)
    parser.add_argument("--top-k", type=int, default=-1)
    parser.add_argument("--type", type=str, default="transformer", help="bigram|mlp|rnn|gru|bow|transformer")
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-head", type=int, default=2)
    parser.add_argument("--n-embd", type=int, default=16)
    parser.add_argument("--n-embd2", type=int, default=16)
    parser.add_argument("--batch-size", "-b", type=int, default=8)
    parser.add_argument("--learning-rate", "-l", type=float, default=1e-2)
    parser.add_argument("--weight-decay", "-w", type=float, default=0.01)
    parser.add_argument("--eval-every", type=int, default=10)
    return parser.parse_args(argv)


def main(argv):
    """Train (or resume, or only sample) as the command line says; the evaluations, by step."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    os.makedirs(args.work_dir, exist_ok=True)
    train_dataset, test_dataset = create_datasets(args.input_file)
    model = build(args, train_dataset)
    model.to(args.device)
    print(f"model #params: {sum(p.numel() for p in model.parameters())}")
    top_k = args.top_k if args.top_k != -1 else None
    if args.resume or args.sample_only:
        model.load_state_dict(torch.load(os.path.join(args.work_dir, "model.pt")))
    if args.sample_only:
        print_samples(model, train_dataset, test_dataset, num=5, top_k=top_k, device=args.device)
        sys.exit()
    optimizer = make_optimizer(model, args)
    batch_loader = InfiniteDataLoader(
        train_dataset, batch_size=args.batch_size, pin_memory=True, num_workers=args.num_workers
    )
    best_loss, history = None, {}
    for step in range(args.max_steps + 1):
        t0 = time.time()
        loss = train_step(model, optimizer, batch_loader.next(), args.device)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t1 = time.time()
        print(f"step {step} | loss {loss.item():.4f} | step time {(t1 - t0) * 1000:.2f}ms")
        if step % args.eval_every == 0:
            train_loss = evaluate(model, train_dataset, batch_size=100, max_batches=10, device=args.device)
            test_loss = evaluate(model, test_dataset, batch_size=100, max_batches=10, device=args.device)
            history[step] = (train_loss, test_loss)
            print(f"step {step} train loss: {train_loss} test loss: {test_loss}")
            if best_loss is None or test_loss < best_loss:
                torch.save(model.state_dict(), os.path.join(args.work_dir, "model.pt"))
                best_loss = test_loss
    print_samples(model, train_dataset, test_dataset, num=5, top_k=top_k, device=args.device)
    return history


if __name__ == "__main__":
    main(sys.argv[1:])
