"""A GPT-2 style decoder, top to bottom.

Read after gradflow/nn/layers.py and gradflow/nn/attention.py; next, gradflow/training/trainer.py (or llama.py).

x_0 = E[ids] + P[positions]                       token + learned position embeddings  (B, T, d)
x_l = x_(l-1) + Attn(LN(x_(l-1)))                 causal multi-head self-attention, pre-norm
x_l = x_l + MLP(LN(x_l)),  MLP = GELU MLP 4d wide
logits = LN(x_L) E^T                              the head shares the token embedding (tied)

Where the rest lives: the MLP is gradflow/nn/ffn.py (GELU, gradflow/engine/ops/elementwise.py); the loss,
shared with Llama with counting parameters and the KV caches, is in decoder.py (cross-entropy:
gradflow/engine/ops/loss.py); sampling from the model, gradflow/inference/generate.py.
"""

import math
from dataclasses import asdict, dataclass

import numpy as np

from gradflow import nn
from gradflow.models import hf
from gradflow.models.decoder import Decoder


@dataclass
class GPTConfig:
    vocab_size: int = 50257
    block_size: int = 1024  # the longest context
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True
    eps: float = 1e-5


class Block(nn.Module):
    """x = x + Attn(LN(x));  x = x + MLP(LN(x)): pre-norm, so the residual stream x itself is never normalised."""

    def __init__(self, c, dtype=None):
        super().__init__()
        self.attn_norm = nn.LayerNorm(c.n_embd, eps=c.eps, bias=c.bias, dtype=dtype)
        self.attn = nn.CausalSelfAttention(c.n_embd, c.n_head, bias=c.bias, dropout=c.dropout, dtype=dtype)
        self.ffn_norm = nn.LayerNorm(c.n_embd, eps=c.eps, bias=c.bias, dtype=dtype)
        self.ffn = nn.MLP(c.n_embd, 4 * c.n_embd, activation="gelu", bias=c.bias, dropout=c.dropout, dtype=dtype)

    def forward(self, x, cache=None, need_weights=False):
        """x: (B, T, d) -> (B, T, d); cache: this block's KV cache when decoding."""
        x = x + self.attn(self.attn_norm(x), cache, need_weights)
        x = x + self.ffn(self.ffn_norm(x))
        return x


class GPT(Decoder):
    def __init__(self, config, dtype=None):
        super().__init__()
        self.config = c = config
        self.wte = nn.Embedding(c.vocab_size, c.n_embd, dtype=dtype)
        self.wpe = nn.Embedding(c.block_size, c.n_embd, dtype=dtype)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(Block(c, dtype) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.n_embd, eps=c.eps, bias=c.bias, dtype=dtype)
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False, dtype=dtype)
        self._init_weights()
        if c.tie_weights:
            self.lm_head.weight = self.wte.weight

    def _init_weights(self):
        """N(0, 0.02^2) weights and zero biases; the two projections that write into the residual
        stream in each block get std 0.02 / sqrt(2 n_layer) (GPT-2)."""
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif name.endswith(("attn.o_proj.weight", "ffn.fc2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * self.config.n_layer))
            elif p.ndim == 2:
                nn.init.normal_(p, std=0.02)

    # written out here rather than shared in decoder.py, so that this file shows GPT's whole forward path
    def forward(self, ids, targets=None, cache=None, need_weights=False):
        """ids: (B, T) token ids -> (logits (B, T, vocab), mean cross-entropy against targets or None).

        With a cache (from new_cache), ids are the next tokens after those already cached.
        need_weights keeps each block's attention weights in `block.attn.weights`.
        """
        ids = self.token_ids(ids)  # (B, T)
        start = 0 if cache is None else cache[0].length  # positions go on after the cached tokens
        end = start + ids.shape[1]
        if end > self.config.block_size:
            raise ValueError(f"GPT: positions {start}..{end - 1} do not fit in block_size {self.config.block_size}")
        tok_emb = self.wte(ids)  # (B, T, d)
        pos_emb = self.wpe(np.arange(start, end))  # (T, d)
        x = self.drop(tok_emb + pos_emb)  # (B, T, d)
        for i, block in enumerate(self.blocks):
            x = block(x, None if cache is None else cache[i], need_weights)
        logits = self.lm_head(self.ln_f(x))  # (B, T, vocab)
        return logits, self.loss(logits, targets)

    @classmethod
    def from_hf(cls, source, config=None, dtype=None):
        """A GPT with the weights of a Hugging Face GPT-2 (GPT2LMHeadModel), in eval mode.

        source: a folder holding config.json and model.safetensors (or shards listed in
        model.safetensors.index.json), or a dict of numpy arrays by GPT-2's names with `config`, the
        dict config.json holds. The names and layouts are mapped in hf.py.
        """
        return hf.load(cls, GPTConfig, hf.gpt_from_hf, source, config, dtype)

    def to_hf(self):
        """(weights by GPT-2's names, GPT-2's config.json as a dict): what GPT2LMHeadModel.from_pretrained reads
        once hf.write_hf has written them to a folder."""
        return hf.gpt_to_hf(self.state_dict(), asdict(self.config))


def gpt2_small():
    """GPT-2 small: 124,439,808 parameters with the head tied to the token embedding."""
    return GPTConfig()
