"""A Llama-2 style model trained and sampled at tiny sizes, written for PyTorch in the idiom of llama2.c
(tinystories.py pretokenize, model.py, train.py, export.py's legacy model.bin, sample.py): the text
pretokenized into uint16 .bin shards, read back through an IterableDataset that asks
torch.utils.data.get_worker_info() for its seed and memory-maps the shards, a DataLoader over it; RMSNorm,
rotary embeddings computed with real cos and sin, grouped-query attention with repeat_kv, a SwiGLU
feed-forward, tied embeddings and the scaled init of the residual projections; cosine learning rate with
warmup, gradient accumulation, a disabled GradScaler, clipping, AdamW with decayed and non-decayed groups;
a checkpoint dict (model, optimizer, model_args, iter_num, best_val_loss, config) and model.bin written
with struct; sample() rebuilds the model from the checkpoint and draws tokens with temperature and top-k.

tests/test_programs.py runs it as written and with only its import lines changed; the sizes are tiny.
"""

import glob
import inspect
import math
import os
import random
import struct
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

DATA_CACHE_DIR = "data"

# --- tinystories.py: pretokenize, the dataset, batches ----------------------------------------------


def pretokenize(text, num_shards=3):
    """The text's characters as token ids (0 is the padding id, never seen), in uint16 shards on disk."""
    chars = sorted(set(text))
    stoi = {ch: i + 1 for i, ch in enumerate(chars)}
    bin_dir = os.path.join(DATA_CACHE_DIR, f"tok{len(chars) + 1}")
    os.makedirs(bin_dir, exist_ok=True)
    per_shard = len(text) // num_shards
    for shard in range(num_shards):
        all_tokens = np.array([stoi[c] for c in text[shard * per_shard : (shard + 1) * per_shard]], dtype=np.uint16)
        with open(os.path.join(bin_dir, f"data{shard:02d}.bin"), "wb") as f:
            f.write(all_tokens.tobytes())
    return chars


class PretokDataset(torch.utils.data.IterableDataset):
    """Loads pretokenized examples from disk and yields them as PyTorch tensors."""

    def __init__(self, split, max_seq_len, vocab_size):
        super().__init__()
        self.split = split
        self.max_seq_len = max_seq_len
        self.vocab_size = vocab_size

    def __iter__(self):
        worker_info = torch.utils.data.get_worker_info()
        worker_id = worker_info.id if worker_info else 0
        rank = dist.get_rank() if dist.is_initialized() else 0
        seed = 42 + worker_id + 1337 * rank
        rng = random.Random(seed)
        bin_dir = os.path.join(DATA_CACHE_DIR, f"tok{self.vocab_size}")
        shard_filenames = sorted(glob.glob(os.path.join(bin_dir, "*.bin")))
        shard_filenames = shard_filenames[1:] if self.split == "train" else shard_filenames[:1]
        assert len(shard_filenames) > 0, f"No bin files found in {bin_dir}"
        while True:
            rng.shuffle(shard_filenames)
            for shard in shard_filenames:
                m = np.memmap(shard, dtype=np.uint16, mode="r")
                num_batches = len(m) // self.max_seq_len
                num_batches -= 1
                assert num_batches > 0, "this shard is way too small? investigate."
                ixs = list(range(num_batches))
                rng.shuffle(ixs)
                for ix in ixs:
                    start = ix * self.max_seq_len
                    end = start + self.max_seq_len + 1
                    chunk = torch.from_numpy((m[start:end]).astype(np.int64))
                    x = chunk[:-1]
                    y = chunk[1:]
                    yield x, y


class Task:
    @staticmethod
    def iter_batches(batch_size, device, num_workers=0, **dataset_kwargs):
        ds = PretokDataset(**dataset_kwargs)
        dl = torch.utils.data.DataLoader(ds, batch_size=batch_size, pin_memory=True, num_workers=num_workers)
        for x, y in dl:
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            yield x, y


# --- model.py -------------------------------------------------------------------------------------


@dataclass
class ModelArgs:
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int | None = None
    vocab_size: int = 32000
    hidden_dim: int | None = None
    multiple_of: int = 256
    norm_eps: float = 1e-5
    max_seq_len: int = 2048
    dropout: float = 0.0


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


def precompute_freqs_cis(dim, end, theta=10000.0):
    """The rotation angles of each position and frequency, as their cosines and sines."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.cos(freqs), torch.sin(freqs)


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(shape)


def apply_rotary_emb(xq, xk, freqs_cos, freqs_sin):
    """Each pair of features rotated by its position's angle: the complex product written in reals."""
    xq_r, xq_i = xq.float().reshape(xq.shape[:-1] + (-1, 2)).unbind(-1)
    xk_r, xk_i = xk.float().reshape(xk.shape[:-1] + (-1, 2)).unbind(-1)
    freqs_cos = reshape_for_broadcast(freqs_cos, xq_r)
    freqs_sin = reshape_for_broadcast(freqs_sin, xq_r)
    xq_out_r = xq_r * freqs_cos - xq_i * freqs_sin
    xq_out_i = xq_r * freqs_sin + xq_i * freqs_cos
    xk_out_r = xk_r * freqs_cos - xk_i * freqs_sin
    xk_out_i = xk_r * freqs_sin + xk_i * freqs_cos
    xq_out = torch.stack([xq_out_r, xq_out_i], dim=-1).flatten(3)
    xk_out = torch.stack([xk_out_r, xk_out_i], dim=-1).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x, n_rep):
    """Each key and value head repeated n_rep times, one per query head it serves."""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, :, None, :]
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )


class Attention(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.n_kv_heads = args.n_heads if args.n_kv_heads is None else args.n_kv_heads
        assert args.n_heads % self.n_kv_heads == 0
        self.n_local_heads = args.n_heads
        self.n_local_kv_heads = self.n_kv_heads
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        self.dropout = args.dropout
        self.flash = hasattr(torch.nn.functional, "scaled_dot_product_attention")

    def forward(self, x, freqs_cos, freqs_sin):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cos, freqs_sin)
        xk = repeat_kv(xk, self.n_rep)
        xv = repeat_kv(xv, self.n_rep)
        xq = xq.transpose(1, 2)
        xk = xk.transpose(1, 2)
        xv = xv.transpose(1, 2)
        output = torch.nn.functional.scaled_dot_product_attention(
            xq, xk, xv, attn_mask=None, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        output = self.wo(output)
        return self.resid_dropout(output)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim, multiple_of, dropout):
        super().__init__()
        if hidden_dim is None:
            hidden_dim = 4 * dim
            hidden_dim = int(2 * hidden_dim / 3)
            hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.w2(F.silu(self.w1(x)) * self.w3(x)))


class TransformerBlock(nn.Module):
    def __init__(self, layer_id, args):
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, args.hidden_dim, args.multiple_of, args.dropout)
        self.layer_id = layer_id
        self.attention_norm = RMSNorm(args.dim, eps=args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, eps=args.norm_eps)

    def forward(self, x, freqs_cos, freqs_sin):
        h = x + self.attention.forward(self.attention_norm(x), freqs_cos, freqs_sin)
        return h + self.feed_forward.forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, params):
        super().__init__()
        self.params = params
        self.vocab_size = params.vocab_size
        self.n_layers = params.n_layers
        self.tok_embeddings = nn.Embedding(params.vocab_size, params.dim)
        self.dropout = nn.Dropout(params.dropout)
        self.layers = torch.nn.ModuleList()
        for layer_id in range(params.n_layers):
            self.layers.append(TransformerBlock(layer_id, params))
        self.norm = RMSNorm(params.dim, eps=params.norm_eps)
        self.output = nn.Linear(params.dim, params.vocab_size, bias=False)
        self.tok_embeddings.weight = self.output.weight  # tied
        freqs_cos, freqs_sin = precompute_freqs_cis(self.params.dim // self.params.n_heads, self.params.max_seq_len)
        self.register_buffer("freqs_cos", freqs_cos, persistent=False)
        self.register_buffer("freqs_sin", freqs_sin, persistent=False)
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():  # the residual projections, scaled down by depth
            if pn.endswith("w3.weight") or pn.endswith("wo.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * params.n_layers))
        self.last_loss = None

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, tokens, targets=None):
        _bsz, seqlen = tokens.shape
        h = self.tok_embeddings(tokens)
        h = self.dropout(h)
        freqs_cos = self.freqs_cos[:seqlen]
        freqs_sin = self.freqs_sin[:seqlen]
        for layer in self.layers:
            h = layer(h, freqs_cos, freqs_sin)
        h = self.norm(h)
        if targets is not None:
            logits = self.output(h)
            self.last_loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            logits = self.output(h[:, [-1], :])  # the last position only, its time axis kept
            self.last_loss = None
        return logits

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        print(f"num decayed parameter tensors: {len(decay_params)}, with {sum(p.numel() for p in decay_params):,}")
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        extra_args = dict(fused=True) if use_fused else dict()
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)

    @torch.inference_mode()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.params.max_seq_len else idx[:, -self.params.max_seq_len :]
            logits = self(idx_cond)
            logits = logits[:, -1, :]
            if temperature == 0.0:
                _, idx_next = torch.topk(logits, k=1, dim=-1)
            else:
                logits = logits / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


# --- export.py: the legacy model.bin ----------------------------------------------------------------


def serialize_fp32(file, tensor):
    d = tensor.detach().cpu().view(-1).to(torch.float32).numpy()
    b = struct.pack(f"{len(d)}f", *d)
    file.write(b)


def legacy_export(model, filepath):
    """The header (7 ints), then every weight in float32, layer by layer, as llama2.c's run.c reads it."""
    out_file = open(filepath, "wb")  # noqa: SIM115 (as export.py writes it)
    hidden_dim = model.layers[0].feed_forward.w1.weight.shape[0]
    p = model.params
    shared_classifier = torch.equal(model.tok_embeddings.weight, model.output.weight)
    vocab_size = p.vocab_size if shared_classifier else -p.vocab_size
    n_kv_heads = p.n_heads if p.n_kv_heads is None else p.n_kv_heads
    header = struct.pack("iiiiiii", p.dim, hidden_dim, p.n_layers, p.n_heads, n_kv_heads, vocab_size, p.max_seq_len)
    out_file.write(header)
    serialize_fp32(out_file, model.tok_embeddings.weight)
    for name in ["attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo", "ffn_norm",
                 "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"]:  # fmt: skip
        for layer in model.layers:
            module = layer
            for part in name.split("."):
                module = getattr(module, part)
            serialize_fp32(out_file, module.weight)
    serialize_fp32(out_file, model.norm.weight)
    serialize_fp32(out_file, model.freqs_cos[: p.max_seq_len])
    serialize_fp32(out_file, model.freqs_sin[: p.max_seq_len])
    if not shared_classifier:
        serialize_fp32(out_file, model.output.weight)
    out_file.close()
    print(f"wrote {filepath}")


# --- train.py --------------------------------------------------------------------------------------

out_dir = "out"
eval_interval = 10
log_interval = 5
eval_iters = 4
always_save_checkpoint = False
batch_size = 4
max_seq_len = 32
dim = 32
n_layers = 2
n_heads = 4
n_kv_heads = 2
multiple_of = 16
dropout = 0.0
gradient_accumulation_steps = 2
learning_rate = 5e-3
max_iters = 20
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0
decay_lr = True
warmup_iters = 4
device = "cpu"
dtype = "float32"
compile = False


def train(vocab_size):
    """train.py's loop: the validation loss at each evaluation, and the training loss logged."""
    config = {k: v for k, v in globals().items() if isinstance(v, (int, float, bool, str)) and not k.startswith("_")}
    lr_decay_iters = max_iters
    min_lr = learning_rate / 10
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(1337)
    device_type = "cuda" if "cuda" in device else "cpu"
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    iter_batches = partial(
        Task.iter_batches, batch_size=batch_size, max_seq_len=max_seq_len, vocab_size=vocab_size, device=device
    )
    model_args = dict(dim=dim, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads, vocab_size=vocab_size,
                      multiple_of=multiple_of, max_seq_len=max_seq_len, dropout=dropout)  # fmt: skip
    model = Transformer(ModelArgs(**model_args))
    model.to(device)
    scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
    optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
    if compile:
        model = torch.compile(model)
    raw_model = model

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ["train", "val"]:
            batch_iter = iter_batches(split=split)
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = next(batch_iter)
                with ctx:
                    model(X, Y)
                    loss = raw_model.last_loss
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * it / warmup_iters
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        assert 0 <= decay_ratio <= 1
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    iter_num, best_val_loss, val_losses, train_losses = 0, 1e9, {}, []
    train_batch_iter = iter_batches(split="train")
    X, Y = next(train_batch_iter)
    while True:
        lr = get_lr(iter_num) if decay_lr else learning_rate
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        if iter_num % eval_interval == 0:
            losses = estimate_loss()
            val_losses[iter_num] = losses["val"].item()
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
            if losses["val"] < best_val_loss or always_save_checkpoint:
                best_val_loss = losses["val"]
                if iter_num > 0:
                    checkpoint = {
                        "model": raw_model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "model_args": model_args,
                        "iter_num": iter_num,
                        "best_val_loss": best_val_loss,
                        "config": config,
                    }
                    print(f"saving checkpoint to {out_dir}")
                    torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
                    legacy_export(raw_model, os.path.join(out_dir, "model.bin"))
        for _micro_step in range(gradient_accumulation_steps):
            with ctx:
                model(X, Y)
                loss = raw_model.last_loss
                loss = loss / gradient_accumulation_steps
            X, Y = next(train_batch_iter)
            scaler.scale(loss).backward()
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        train_losses.append(loss.item() * gradient_accumulation_steps)
        if iter_num % log_interval == 0:
            print(f"{iter_num} | loss {train_losses[-1]:.4f} | lr {lr:e}")
        iter_num += 1
        if iter_num > max_iters:
            break
    return val_losses, train_losses


# --- sample.py -------------------------------------------------------------------------------------


def sample(chars, start="\n", num_samples=2, max_new_tokens=40, temperature=1.0, top_k=8, seed=1337):
    torch.manual_seed(seed)
    checkpoint_dict = torch.load(os.path.join(out_dir, "ckpt.pt"), map_location=device)
    gptconf = ModelArgs(**checkpoint_dict["model_args"])
    model = Transformer(gptconf)
    state_dict = checkpoint_dict["model"]
    unwanted_prefix = "_orig_mod."
    for k, _v in list(state_dict.items()):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix) :]] = state_dict.pop(k)
    model.load_state_dict(state_dict, strict=False)
    model.eval()
    model.to(device)
    stoi = {ch: i + 1 for i, ch in enumerate(chars)}
    start_ids = [stoi[c] for c in start]
    x = torch.tensor(start_ids, dtype=torch.long, device=device)[None, ...]
    texts = []
    with torch.no_grad():
        for _k in range(num_samples):
            y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k)
            texts.append("".join(chars[i - 1] for i in y[0].tolist()))
            print(texts[-1])
            print("---------------")
    return texts


def main(text):
    chars = pretokenize(text)
    val_losses, train_losses = train(vocab_size=len(chars) + 1)
    return val_losses, train_losses, sample(chars)


if __name__ == "__main__":
    with open("input.txt") as f:
        main(f.read())
