"""A Llama / Qwen style decoder, top to bottom.

x_0 = E[ids]                                      no position embedding: RoPE rotates q and k
x_l = x_(l-1) + Attn(RMSNorm(x_(l-1)))            causal grouped-query attention with RoPE
x_l = x_l + SwiGLU(RMSNorm(x_l))                  down(silu(gate(x)) * up(x))
logits = RMSNorm(x_L) W_head^T                    W_head = E when the embeddings are tied
"""

from dataclasses import dataclass

import numpy as np

from gradflow import functional as F
from gradflow import nn


@dataclass
class LlamaConfig:
    vocab_size: int = 49152
    n_layer: int = 30
    d_model: int = 576
    n_heads: int = 9
    n_kv_heads: int = 3
    d_ff: int = 1536
    qkv_bias: bool = False  # Qwen2 puts biases on q, k, v (not on o or the MLP)
    tie_weights: bool = True
    rope_base: float = 10000.0
    eps: float = 1e-5


class Llama(nn.Module):
    def __init__(self, config, dtype=None):
        super().__init__()
        self.config = c = config
        self.embed_tokens = nn.Embedding(c.vocab_size, c.d_model, dtype=dtype)
        self.rope = nn.RotaryEmbedding(c.d_model // c.n_heads, base=c.rope_base)  # one table for every layer
        block = dict(n_kv_heads=c.n_kv_heads, ffn="swiglu", norm="rms", eps=c.eps, bias=False, dtype=dtype)
        self.layers = nn.ModuleList(
            nn.TransformerBlock(c.d_model, c.n_heads, c.d_ff, attn_bias=c.qkv_bias, rope=self.rope, **block)
            for _ in range(c.n_layer)
        )
        self.norm = nn.RMSNorm(c.d_model, eps=c.eps, dtype=dtype)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False, dtype=dtype)
        for name, p in self.named_parameters():  # N(0, 0.02^2) matrices, zero biases (Llama's initializer_range)
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.ndim == 2:
                nn.init.normal_(p, std=0.02)
        if c.tie_weights:
            self.lm_head.weight = self.embed_tokens.weight

    @classmethod
    def count_parameters(cls, config):
        """The parameter count of `config`, by building the model without allocating its weights."""
        with nn.init.meta():
            return cls(config).num_parameters()

    def new_cache(self):
        return [nn.KVCache() for _ in self.layers]

    def forward(self, ids, targets=None, cache=None, need_weights=False):
        """ids: (B, T) -> (logits (B, T, vocab), mean cross-entropy against targets or None)."""
        ids = np.asarray(getattr(ids, "data", ids))
        b, t = ids.shape
        x = self.embed_tokens(ids)  # (B, T, d)
        for i, layer in enumerate(self.layers):
            x = layer(x, causal=True, cache=None if cache is None else cache[i], need_weights=need_weights)
        logits = self.lm_head(self.norm(x))  # (B, T, vocab)
        loss = None
        if targets is not None:
            targets = np.asarray(getattr(targets, "data", targets))
            loss = F.cross_entropy(logits.reshape(b * t, -1), targets.reshape(b * t))
        return logits, loss


def qwen2_0_5b():
    """The model of document 000 (Qwen2-0.5B shapes): 494,032,768 parameters."""
    return LlamaConfig(
        vocab_size=151936, n_layer=24, d_model=896, n_heads=14, n_kv_heads=2, d_ff=4864,
        qkv_bias=True, rope_base=1_000_000.0, eps=1e-6,
    )  # fmt: skip


def smollm2_135m():
    """SmolLM2-135M: 134,515,008 parameters."""
    return LlamaConfig(rope_base=100_000.0)
