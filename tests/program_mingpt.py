"""A GPT that learns to add numbers, written for PyTorch in the idiom of minGPT (karpathy/minGPT): its
model (mingpt/model.py), its trainer (mingpt/trainer.py) and its adder project (projects/adder), in
one file.

The model is built from a nested config and initialised by `self.apply(self._init_weights)`, which
asks `isinstance(module, nn.Linear)` and calls `torch.nn.init`; `configure_optimizers` sorts every
parameter into weight decay or none by walking `named_modules()` and `named_parameters()`, and hands
AdamW two parameter groups. The trainer draws batches from a DataLoader over a RandomSampler with
replacement, steps with `zero_grad(set_to_none=True)` and `clip_grad_norm_`, and reports through
callbacks. The data are the problems a + b = c as digits (c reversed, so the model writes it the
way addition carries); only c's digits are trained on (targets -1 elsewhere), and the score is how
many sums greedy generation gets right.

tests/test_programs.py runs it as written and with only its import lines changed, from the same
weights and batches. The sizes are tiny so a run takes seconds.
"""

import contextlib
import json
import math
import os
import random
import sys
import time
from ast import literal_eval
from collections import defaultdict

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import Dataset
from torch.utils.data.dataloader import DataLoader

# --- utilities: seeds, a working folder, a nested config -----------------------------------------------


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def setup_logging(config, args):
    """The command line and the whole config, saved in the working folder."""
    work_dir = config.system.work_dir
    os.makedirs(work_dir, exist_ok=True)
    with open(os.path.join(work_dir, "args.txt"), "w") as f:
        f.write(" ".join(args))
    with open(os.path.join(work_dir, "config.json"), "w") as f:
        f.write(json.dumps(config.to_dict(), indent=4))


class CfgNode:
    """Settings as attributes, nested: config.trainer.learning_rate."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def __str__(self):
        return self._lines(0)

    def _lines(self, indent):
        parts = []
        for k, v in self.__dict__.items():
            parts.append(f"{k}:\n{v._lines(indent + 1)}" if isinstance(v, CfgNode) else f"{k}: {v}\n")
        return "".join("    " * indent + p for p in parts)

    def to_dict(self):
        return {k: v.to_dict() if isinstance(v, CfgNode) else v for k, v in self.__dict__.items()}

    def merge_from_dict(self, d):
        self.__dict__.update(d)

    def merge_from_args(self, args):
        """Overrides written `--trainer.max_iters=50`: a Python literal, or else a string."""
        for arg in args:
            assert arg.startswith("--"), f"expected --key=value, got {arg}"
            key, val = arg[2:].split("=", 1)
            with contextlib.suppress(ValueError, SyntaxError):  # else a string, such as a folder
                val = literal_eval(val)
            *path, leaf = key.split(".")
            node = self
            for name in path:
                node = getattr(node, name)
            assert hasattr(node, leaf), f"{key} is not an attribute of the config"
            print(f"command line overwriting config attribute {key} with {val}")
            setattr(node, leaf, val)


# --- the model ----------------------------------------------------------------------------------------


class NewGELU(nn.Module):
    """GELU by its tanh approximation, as BERT and GPT compute it:
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention written out, each position seeing itself and the positions before it."""

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # queries, keys and values of every head
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        # 1 where a position may look, below and on the diagonal
        causal = torch.tril(torch.ones(config.block_size, config.block_size))
        self.register_buffer("bias", causal.view(1, 1, config.block_size, config.block_size))
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # the heads side by side again
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    """x + attention(LN(x)), then x + MLP(LN(x))."""

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
                dropout=nn.Dropout(config.resid_pdrop),
            )
        )
        m = self.mlp
        self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlpf(self.ln_2(x))
        return x


class GPT(nn.Module):
    @staticmethod
    def get_default_config():
        C = CfgNode()
        C.model_type = "gpt"  # a size by name, or n_layer, n_head and n_embd given (one or the other)
        C.n_layer = None
        C.n_head = None
        C.n_embd = None
        C.vocab_size = None  # set from the data
        C.block_size = None
        C.embd_pdrop = 0.1
        C.resid_pdrop = 0.1
        C.attn_pdrop = 0.1
        return C

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.block_size = config.block_size

        type_given = config.model_type is not None
        params_given = all([config.n_layer is not None, config.n_head is not None, config.n_embd is not None])
        assert type_given ^ params_given  # a name or the numbers, not both
        if type_given:
            config.merge_from_dict(
                {
                    "gpt-nano": dict(n_layer=3, n_head=3, n_embd=48),
                    "gpt-pico": dict(n_layer=2, n_head=2, n_embd=32),
                    "gpt-femto": dict(n_layer=1, n_head=2, n_embd=16),
                }[config.model_type]
            )

        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.embd_pdrop),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

        self.apply(self._init_weights)
        # the projections back into the residual stream add up over the layers: smaller by 1/sqrt(2 n_layer)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        n_params = sum(p.numel() for p in self.transformer.parameters())  # lm_head not counted
        print(f"number of parameters: {n_params / 1e6:.2f}M")

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            torch.nn.init.zeros_(module.bias)
            torch.nn.init.ones_(module.weight)

    def configure_optimizers(self, train_config):
        """AdamW with weight decay on the weights of the Linear layers only: biases, LayerNorm and
        Embedding weights are not pulled toward zero."""
        decay = set()
        no_decay = set()
        whitelist_weight_modules = (torch.nn.Linear,)
        blacklist_weight_modules = (torch.nn.LayerNorm, torch.nn.Embedding)
        for mn, m in self.named_modules():
            for pn, _ in m.named_parameters():
                fpn = f"{mn}.{pn}" if mn else pn  # the full name
                # named_parameters recurses, so a parameter comes by once per module above it; the
                # time it comes with its own module tells which kind of weight it is
                if pn.endswith("bias"):
                    no_decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, whitelist_weight_modules):
                    decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, blacklist_weight_modules):
                    no_decay.add(fpn)

        param_dict = {pn: p for pn, p in self.named_parameters()}
        inter_params = decay & no_decay
        union_params = decay | no_decay
        assert len(inter_params) == 0, f"parameters {inter_params} are in both sets"
        assert len(param_dict.keys() - union_params) == 0, f"parameters {param_dict.keys() - union_params} in neither"
        optim_groups = [
            {"params": [param_dict[pn] for pn in sorted(list(decay))], "weight_decay": train_config.weight_decay},
            {"params": [param_dict[pn] for pn in sorted(list(no_decay))], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(optim_groups, lr=train_config.learning_rate, betas=train_config.betas)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.block_size, f"Cannot forward sequence of length {t}, block size is only {self.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device).unsqueeze(0)  # (1, t)

        tok_emb = self.transformer.wte(idx)  # (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # (1, t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)

        loss = None
        if targets is not None:  # -1 marks a position that is not trained on
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
        """idx (b, t) continued by max_new_tokens tokens, each fed back in: drawn from the softmax (of
        the top_k logits only, if given), or the most likely one."""
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size :]
            logits, _ = self(idx_cond)
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


# --- the trainer --------------------------------------------------------------------------------------


class Trainer:
    @staticmethod
    def get_default_config():
        C = CfgNode()
        C.device = "auto"
        C.num_workers = 0
        C.max_iters = None
        C.batch_size = 64
        C.learning_rate = 3e-4
        C.betas = (0.9, 0.95)
        C.weight_decay = 0.1  # on the Linear layers' weights only
        C.grad_norm_clip = 1.0
        return C

    def __init__(self, config, model, train_dataset):
        self.config = config
        self.model = model
        self.optimizer = None
        self.train_dataset = train_dataset
        self.callbacks = defaultdict(list)

        if config.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            self.device = config.device
        self.model = self.model.to(self.device)
        print("running on device", self.device)

        self.iter_num = 0
        self.iter_time = 0.0
        self.iter_dt = 0.0

    def add_callback(self, onevent: str, callback):
        self.callbacks[onevent].append(callback)

    def set_callback(self, onevent: str, callback):
        self.callbacks[onevent] = [callback]

    def trigger_callbacks(self, onevent: str):
        for callback in self.callbacks.get(onevent, []):
            callback(self)

    def run(self):
        model, config = self.model, self.config
        self.optimizer = model.configure_optimizers(config)

        # examples drawn with replacement, more than any run takes: the loader never runs dry
        train_loader = DataLoader(
            self.train_dataset,
            sampler=torch.utils.data.RandomSampler(self.train_dataset, replacement=True, num_samples=int(1e10)),
            shuffle=False,
            pin_memory=True,
            batch_size=config.batch_size,
            num_workers=config.num_workers,
        )

        model.train()
        self.iter_num = 0
        self.iter_time = time.time()
        data_iter = iter(train_loader)
        while True:
            try:
                batch = next(data_iter)
            except StopIteration:
                data_iter = iter(train_loader)
                batch = next(data_iter)
            batch = [t.to(self.device) for t in batch]
            x, y = batch

            logits, self.loss = model(x, y)

            model.zero_grad(set_to_none=True)
            self.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
            self.optimizer.step()

            self.trigger_callbacks("on_batch_end")
            self.iter_num += 1
            tnow = time.time()
            self.iter_dt = tnow - self.iter_time
            self.iter_time = tnow

            if config.max_iters is not None and self.iter_num >= config.max_iters:
                break


# --- the adder: a + b = c as digits -------------------------------------------------------------------


class AdditionDataset(Dataset):
    """Every pair of ndigit numbers, a fixed share of them held out for the test split.

    With ndigit = 2, 85 + 50 = 135 is the sequence 8 5 5 0 5 3 1: a and b padded to two digits, then
    c padded to three and reversed, so the model writes the lowest digit first, as a carry goes. The
    model sees all but the last digit and learns to predict each next one; only the digits of c are
    trained on (the targets before them are -1).
    """

    @staticmethod
    def get_default_config():
        C = CfgNode()
        C.ndigit = 2
        return C

    def __init__(self, config, split):
        self.config = config
        self.split = split
        ndigit = self.config.ndigit
        num = (10**ndigit) ** 2  # every problem a + b
        rng = torch.Generator()
        rng.manual_seed(1337)
        perm = torch.randperm(num, generator=rng)
        num_test = min(int(num * 0.2), 500)
        self.ixes = perm[:num_test] if split == "test" else perm[num_test:]

    def get_vocab_size(self):
        return 10  # the digits

    def get_block_size(self):
        # a, b and c (one digit longer for a carry), less the last digit, which is never an input
        return 3 * self.config.ndigit + 1 - 1

    def __len__(self):
        return self.ixes.nelement()

    def __getitem__(self, idx):
        ndigit = self.config.ndigit
        idx = self.ixes[idx].item()
        nd = 10**ndigit
        a = idx // nd
        b = idx % nd
        c = a + b
        astr = f"%0{ndigit}d" % a
        bstr = f"%0{ndigit}d" % b
        cstr = (f"%0{ndigit + 1}d" % c)[::-1]
        dix = [int(s) for s in astr + bstr + cstr]
        x = torch.tensor(dix[:-1], dtype=torch.long)
        y = torch.tensor(dix[1:], dtype=torch.long)  # the next digit at every position
        y[: ndigit * 2 - 1] = -1  # predicting a's and b's digits is not the task
        return x, y


def get_config():
    C = CfgNode()
    C.system = CfgNode()
    C.system.seed = 3407
    C.system.work_dir = "./out/adder"
    C.data = AdditionDataset.get_default_config()
    C.model = GPT.get_default_config()
    C.model.model_type = "gpt-pico"
    C.trainer = Trainer.get_default_config()
    C.trainer.learning_rate = 5e-3  # a model this small learns faster than the default allows
    C.trainer.max_iters = 150
    C.trainer.batch_size = 32
    return C


def eval_split(model, dataset, ndigit, device="cpu", max_batches=None):
    """How many problems greedy generation gets right: the model writes c's digits after a's and b's."""
    results = []
    mistakes_printed_already = 0
    factors = torch.tensor([[10**i for i in range(ndigit + 1)][::-1]]).to(device)
    loader = DataLoader(dataset, batch_size=100, num_workers=0, drop_last=False)
    for b, (x, _) in enumerate(loader):
        x = x.to(device)
        d1d2 = x[:, : ndigit * 2]  # the digits of a and b
        d1d2d3 = model.generate(d1d2, ndigit + 1, do_sample=False)
        d3 = d1d2d3[:, -(ndigit + 1) :]
        d3 = d3.flip(1)  # c's digits back in their usual order
        d1i = (d1d2[:, :ndigit] * factors[:, 1:]).sum(1)
        d2i = (d1d2[:, ndigit : ndigit * 2] * factors[:, 1:]).sum(1)
        d3i_pred = (d3 * factors).sum(1)
        d3i_gt = d1i + d2i
        correct = (d3i_pred == d3i_gt).cpu()
        for i in range(x.size(0)):
            results.append(int(correct[i]))
            if not correct[i] and mistakes_printed_already < 3:
                mistakes_printed_already += 1
                print(f"GPT claims that {d1i[i]:d} + {d2i[i]:d} = {d3i_pred[i]:d} but gt is {d3i_gt[i]:d}")
        if max_batches is not None and b + 1 >= max_batches:
            break
    rt = torch.tensor(results, dtype=torch.float)
    print(f"{dataset.split} final score: {rt.sum():.0f}/{len(results)} = {100 * rt.mean():.2f}% correct")
    return rt.sum()


def main(args=()):
    """Train on the train split from the command line's overrides; the losses, the scores of each
    evaluation and the best score."""
    config = get_config()
    config.merge_from_args(args)
    print(config)
    setup_logging(config, args)
    set_seed(config.system.seed)

    train_dataset = AdditionDataset(config.data, split="train")
    test_dataset = AdditionDataset(config.data, split="test")
    config.model.vocab_size = train_dataset.get_vocab_size()
    config.model.block_size = train_dataset.get_block_size()
    model = GPT(config.model)
    trainer = Trainer(config.trainer, model, train_dataset)

    losses, scores, top_score = [], {}, 0

    def batch_end_callback(trainer):
        nonlocal top_score
        losses.append(trainer.loss.item())
        if trainer.iter_num % 10 == 0:
            print(
                f"iter_dt {trainer.iter_dt * 1000:.2f}ms; iter {trainer.iter_num}: train loss {trainer.loss.item():.5f}"
            )
        if trainer.iter_num % 50 == 0 or trainer.iter_num + 1 == config.trainer.max_iters:
            model.eval()
            with torch.no_grad():
                train_score = eval_split(model, train_dataset, config.data.ndigit, trainer.device, max_batches=2)
                test_score = eval_split(model, test_dataset, config.data.ndigit, trainer.device)
            score = train_score + test_score
            scores[trainer.iter_num] = (train_score.item(), test_score.item())
            if score > top_score:
                top_score = score
                print(f"saving model with new top score of {score}")
                torch.save(model.state_dict(), os.path.join(config.system.work_dir, "model.pt"))
            model.train()

    trainer.set_callback("on_batch_end", batch_end_callback)
    trainer.run()
    return losses, scores, top_score


if __name__ == "__main__":
    main(sys.argv[1:])
