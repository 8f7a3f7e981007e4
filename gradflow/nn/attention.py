"""Multi-head causal self-attention: the attention of GPT-2.

Each of n_heads heads reads its own slice of hs = d_model / n_heads features:

    Q = x W_Q,  K = x W_K,  V = x W_V                   (B, T, d) each, then split into heads (B, nh, T, hs)
    head_h = softmax(Q_h K_h^T / sqrt(hs) + M) V_h      M_ij = -inf where key j comes after query i
    out = concat(head_1 .. head_nh) W_O                 (B, T, d)

The softmax, the mask and the weighted sum are one fused op, F.scaled_dot_product_attention: its
forward and backward, the mask M included, are in gradflow/engine/ops/attention.py (ScaledDotProductAttention).

Read after nn/layers.py and before models/gpt.py (README.md gives the reading order). Beside it:
kv_cache.py keeps the keys and values of earlier tokens for decoding, and general_attention.py
holds nn.GeneralAttention, the general layer (cross-attention, padding, grouped-query heads,
RoPE) that Llama and the 2017 Transformer use.
"""

from gradflow.nn import functional as F
from gradflow.nn.layers import Dropout, Linear
from gradflow.nn.module import Module


def split_heads(x, n_heads):
    """(B, T, n_heads * hs) -> (B, n_heads, T, hs): each head a sequence of its own."""
    b, t, d = x.shape
    return x.reshape(b, t, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x):
    """(B, n_heads, T, hs) -> (B, T, n_heads * hs): the heads side by side, concat(head_1 .. head_nh)."""
    b, n_heads, t, hs = x.shape
    return x.transpose(1, 2).reshape(b, t, n_heads * hs)


class CausalSelfAttention(Module):
    """Each token attends to itself and the tokens before it, in n_heads heads (GPT-2's attention).

    forward(x, cache=None, need_weights=False): x (B, T, d_model) -> (B, T, d_model)
      cache: a KVCache (kv_cache.py) holding the keys and values of the tokens before x; this call's
        are appended, and the T queries, the last T positions, read them all
      need_weights: keep the (B, n_heads, T, S) attention weights in `self.weights`, for pictures
    """

    def __init__(self, d_model, n_heads, bias=True, dropout=0.0, dtype=None):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"CausalSelfAttention: d_model {d_model} is not divisible by n_heads {n_heads}")
        self.d_model, self.n_heads = d_model, n_heads
        self.q_proj = Linear(d_model, d_model, bias=bias, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, bias=bias, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, bias=bias, dtype=dtype)
        self.o_proj = Linear(d_model, d_model, bias=bias, dtype=dtype)
        self.attn_dropout_p = dropout  # a probability: the fused op drops attention weights with it
        self.resid_dropout = Dropout(dropout)  # a layer: drops the output before it joins the residual stream
        self.weights = None

    def forward(self, x, cache=None, need_weights=False):
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, nh, T, hs)
        k = split_heads(self.k_proj(x), self.n_heads)  # (B, nh, T, hs)
        v = split_heads(self.v_proj(x), self.n_heads)  # (B, nh, T, hs)
        if cache is not None:  # decoding: the earlier tokens' keys and values, then this call's
            k, v = cache.append(k, v)  # (B, nh, S, hs), S = cached + T
        p = self.attn_dropout_p if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, causal=True, dropout_p=p)  # (B, nh, T, hs)
        if need_weights:
            self.weights = F.attention_weights(q, k, causal=True)  # (B, nh, T, S)
        return self.resid_dropout(self.o_proj(merge_heads(out)))  # (B, T, d)

    def extra_repr(self):
        return f"{self.d_model}, n_heads={self.n_heads}"
