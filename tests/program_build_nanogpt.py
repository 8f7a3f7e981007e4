"""GPT-2 reproduced small, written for PyTorch in the idiom of the "Let's reproduce GPT-2" lecture's
train_gpt2.py: NANOGPT_SCALE_INIT flags on the residual projections, flash attention, a DataLoaderLite
over token shards saved with numpy, a total batch reached by gradient accumulation, bfloat16 autocast,
a warmup-then-cosine learning rate, validation, a multiple-choice evaluation by the completion's loss,
top-k sampling with torch.gather and a seeded torch.Generator, and checkpoints holding the config.

tests/test_programs.py runs it as written and with only its import lines changed; the sizes are tiny
and the tokens are the text's bytes.
"""

import inspect
import math
import os
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed import destroy_process_group, init_process_group
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.c_proj.NANOGPT_SCALE_INIT = 1  # writes into the residual stream: initialised smaller
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.c_proj.NANOGPT_SCALE_INIT = 1

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 128  # the bytes of ASCII text
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 16


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight sharing
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            std = 0.02
            if hasattr(module, "NANOGPT_SCALE_INIT"):
                std *= (2 * self.config.n_layer) ** -0.5  # two residual additions per layer
            torch.nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        B, T = idx.size()
        assert self.config.block_size >= T, f"a sequence of {T} is longer than the block ({self.config.block_size})"
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        if master_process:
            print(f"decayed: {sum(p.numel() for p in decay_params):,}, not: {sum(p.numel() for p in nodecay_params):,}")
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=(0.9, 0.95), eps=1e-8, fused=use_fused)


data_root = "shards"


def write_shards(text, shard_size=600):
    """The text's bytes as uint16 token shards, the last one for validation, saved with np.save."""
    os.makedirs(data_root, exist_ok=True)
    tokens = np.frombuffer(text.encode("ascii"), dtype=np.uint8).astype(np.uint16)
    shards = [tokens[i : i + shard_size] for i in range(0, len(tokens), shard_size)]
    for index, shard in enumerate(shards):
        split = "val" if index == len(shards) - 1 else "train"
        np.save(os.path.join(data_root, f"shard_{split}_{index:06d}"), shard)


def load_tokens(filename):
    npt = np.load(filename).astype(np.int32)
    return torch.tensor(npt, dtype=torch.long)


class DataLoaderLite:
    """Consecutive (B, T) batches through the shards of a split, each process starting at its own offset."""

    def __init__(self, B, T, process_rank, num_processes, split):
        self.B, self.T = B, T
        self.process_rank, self.num_processes = process_rank, num_processes
        assert split in {"train", "val"}
        shards = sorted(s for s in os.listdir(data_root) if split in s)
        self.shards = [os.path.join(data_root, s) for s in shards]
        assert len(shards) > 0, f"no shards found for split {split}"
        self.reset()

    def reset(self):
        self.current_shard = 0
        self.tokens = load_tokens(self.shards[self.current_shard])
        self.current_position = self.B * self.T * self.process_rank

    def next_batch(self):
        B, T = self.B, self.T
        buf = self.tokens[self.current_position : self.current_position + B * T + 1]
        x = (buf[:-1]).view(B, T)
        y = (buf[1:]).view(B, T)
        self.current_position += B * T * self.num_processes
        if self.current_position + (B * T * self.num_processes + 1) > len(self.tokens):
            self.current_shard = (self.current_shard + 1) % len(self.shards)
            self.tokens = load_tokens(self.shards[self.current_shard])
            self.current_position = B * T * self.process_rank
        return x, y


def get_most_likely_row(tokens, mask, logits):
    """The completion (row) whose tokens, where mask is 1, have the lowest mean loss."""
    shift_logits = (logits[..., :-1, :]).contiguous()
    shift_tokens = (tokens[..., 1:]).contiguous()
    flat_shift_logits = shift_logits.view(-1, shift_logits.size(-1))
    shift_losses = F.cross_entropy(flat_shift_logits, shift_tokens.view(-1), reduction="none")
    shift_losses = shift_losses.view(tokens.size(0), -1)
    shift_mask = (mask[..., 1:]).contiguous()
    avg_loss = (shift_losses * shift_mask).sum(dim=1) / shift_mask.sum(dim=1)
    return avg_loss.argmin().item()


def render_example(text, start, rng, context=8, completion=6, choices=4):
    """A multiple-choice example cut from the text: a context, its true completion among others from
    elsewhere; tokens (choices, context + completion), the completions' mask, and the true one's row."""
    rows = [text[start + context : start + context + completion]]
    while len(rows) < choices:
        other = rng.randrange(0, len(text) - completion)
        rows.append(text[other : other + completion])
    label = rng.randrange(choices)
    rows[0], rows[label] = rows[label], rows[0]
    prefix = list(text[start : start + context].encode("ascii"))
    tokens = torch.tensor([prefix + list(row.encode("ascii")) for row in rows], dtype=torch.long)
    mask = torch.zeros((choices, context + completion), dtype=torch.long)
    mask[:, context:] = 1
    return tokens, mask, label


ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend="nccl")
    ddp_rank, ddp_local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    ddp_world_size = int(os.environ["WORLD_SIZE"])
    device = f"cuda:{ddp_local_rank}"
    master_process = ddp_rank == 0
else:
    ddp_rank, ddp_local_rank, ddp_world_size, master_process = 0, 0, 1, True
    device = "cpu"
    if torch.cuda.is_available():
        device = "cuda"
    elif hasattr(torch.backends, "mps") and torch.backends.mps.is_available():
        device = "mps"
device_type = "cuda" if device.startswith("cuda") else "cpu"
use_autocast = True  # the lecture's bfloat16 regions, on every device

total_batch_size = 64  # tokens per optimizer step
B, T = 4, 8
grad_accum_steps = total_batch_size // (B * T * ddp_world_size)
max_lr, warmup_steps, max_steps = 3e-3, 4, 24
min_lr = max_lr * 0.1
top_k = 10
log_dir = "log"


def get_lr(it):
    if it < warmup_steps:
        return max_lr * (it + 1) / warmup_steps
    if it > max_steps:
        return min_lr
    decay_ratio = (it - warmup_steps) / (max_steps - warmup_steps)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (max_lr - min_lr)


def autocast():
    return torch.autocast(device_type=device_type, dtype=torch.bfloat16) if use_autocast else nullcontext()


def train(model, text):
    """The training loop: validation, the multiple-choice evaluation and samples now and then, a
    checkpoint at the end. Returns (step losses, gradient norms, validation losses, accuracies, samples)."""
    torch.set_float32_matmul_precision("high")
    raw_model = model
    if ddp:
        model = DDP(model, device_ids=[ddp_local_rank])
    train_loader = DataLoaderLite(B=B, T=T, process_rank=ddp_rank, num_processes=ddp_world_size, split="train")
    val_loader = DataLoaderLite(B=B, T=T, process_rank=ddp_rank, num_processes=ddp_world_size, split="val")
    optimizer = raw_model.configure_optimizers(weight_decay=0.1, learning_rate=max_lr, device_type=device_type)
    os.makedirs(log_dir, exist_ok=True)
    losses, norms, val_losses, accuracies, samples = [], [], [], [], []
    for step in range(max_steps):
        t0 = time.time()
        last_step = step == max_steps - 1
        if step % 8 == 0 or last_step:
            model.eval()
            val_loader.reset()
            with torch.no_grad():
                val_loss_accum = 0.0
                val_loss_steps = 4
                for _ in range(val_loss_steps):
                    x, y = val_loader.next_batch()
                    x, y = x.to(device), y.to(device)
                    with autocast():
                        logits, loss = model(x, y)
                    val_loss_accum += loss.detach() / val_loss_steps
            if ddp:
                dist.all_reduce(val_loss_accum, op=dist.ReduceOp.AVG)
            val_losses.append(val_loss_accum.item())
            print(f"validation loss: {val_loss_accum.item():.4f}")
            if last_step:
                checkpoint = {
                    "model": raw_model.state_dict(),
                    "config": raw_model.config,
                    "step": step,
                    "val_loss": val_loss_accum.item(),
                }
                torch.save(checkpoint, os.path.join(log_dir, f"model_{step:05d}.pt"))
            num_correct_norm, num_total, rng = 0, 0, random.Random(0)
            for start in range(0, 200, 20):
                tokens, mask, label = render_example(text, start, rng)
                with torch.no_grad(), autocast():
                    logits, loss = model(tokens.to(device))
                num_correct_norm += int(get_most_likely_row(tokens, mask.to(device), logits) == label)
                num_total += 1
            accuracies.append(num_correct_norm / num_total)
        if (step > 0 and step % 8 == 0) or last_step:
            model.eval()
            tokens = torch.tensor(list(b"the "), dtype=torch.long).unsqueeze(0).repeat(2, 1)
            xgen = tokens.to(device)
            sample_rng = torch.Generator(device=device)
            sample_rng.manual_seed(42 + ddp_rank)
            while xgen.size(1) < 16:
                with torch.no_grad():
                    with autocast():
                        logits, loss = model(xgen)
                    probs = F.softmax(logits[:, -1, :], dim=-1)
                    topk_probs, topk_indices = torch.topk(probs, top_k, dim=-1)
                    ix = torch.multinomial(topk_probs, 1, generator=sample_rng)
                    xcol = torch.gather(topk_indices, -1, ix)
                    xgen = torch.cat((xgen, xcol), dim=1)
            samples.append([bytes(xgen[i, :16].tolist()).decode("ascii") for i in range(2)])
        model.train()
        optimizer.zero_grad()
        loss_accum = 0.0
        for _ in range(grad_accum_steps):
            x, y = train_loader.next_batch()
            x, y = x.to(device), y.to(device)
            with autocast():
                logits, loss = model(x, y)
            loss = loss / grad_accum_steps  # the gradients add up to the mean over the whole batch
            loss_accum += loss.detach()
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        lr = get_lr(step)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        optimizer.step()
        if device_type == "cuda":
            torch.cuda.synchronize()
        dt = time.time() - t0
        tokens_per_sec = B * T * grad_accum_steps * ddp_world_size / max(dt, 1e-9)
        losses.append(loss_accum.item())
        norms.append(norm.item())
        print(f"step {step:4d} | loss: {loss_accum.item():.6f} | lr {lr:.4e} | norm: {norm:.4f}", end=" | ")
        print(f"tok/sec: {tokens_per_sec:.0f}")
    if ddp:
        destroy_process_group()
    return losses, norms, val_losses, accuracies, samples


def main(text):
    write_shards(text)
    torch.manual_seed(1337)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(1337)
    model = GPT(GPTConfig())
    model.to(device)
    return train(model, text)
