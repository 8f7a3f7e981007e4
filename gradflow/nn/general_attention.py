"""Multi-head attention in general: self and cross, causal and padding masks, grouped-query heads, RoPE.

    head_h = softmax(Q_h K_h^T / sqrt(hs) + mask) V_h,   out = concat(head_1 .. head_nh) W_O

The attention of attention.py (read it first), with what other architectures add to it:
  - cross-attention: queries from x, keys and values from a `context` (the 2017 Transformer's
    decoder reading its encoder's output);
  - masks: any boolean `mask`, and `lengths`, which hides the padding after each key sequence;
  - grouped-query attention (GQA): n_kv_heads < n_heads key/value heads, each shared by
    n_heads / n_kv_heads query heads (multi-query attention is n_kv_heads = 1; Llama, Qwen). The
    sharing is done by broadcasting, without copying keys: queries are viewed as
    (B, n_kv, group, T, hs) against keys of (B, n_kv, 1, S, hs), and the engine sums each shared
    head's gradient over its group;
  - RoPE: a RotaryEmbedding (positional.py) turns q and k by their positions.
"""

import numpy as np

from gradflow.nn import functional as F
from gradflow.nn.attention import merge_heads, split_heads
from gradflow.nn.layers import Dropout, Linear
from gradflow.nn.module import Module


def padding_mask(lengths, n_keys):
    """(B, 1, 1, S) boolean: key j of sequence b may be attended to iff j < lengths[b]."""
    lengths = np.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"padding_mask: lengths must be (B,), got shape {lengths.shape}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > n_keys):
        raise ValueError(f"padding_mask: lengths {lengths.tolist()} must lie in [0, {n_keys}]")
    return (np.arange(n_keys) < lengths[:, None])[:, None, None, :]


class GeneralAttention(Module):
    """Multi-head attention in general, with separate q/k/v/o projections (checkpoint names q_proj ... o_proj).

    Its boolean masks read True as "may attend", as F.scaled_dot_product_attention's do. PyTorch's
    nn.MultiheadAttention (encoder.py, PyTorch's arguments and weights) reads True as "masked out";
    the two names differ by more than a capital letter so that one is never taken for the other.

    forward(x, context=None, causal=False, mask=None, lengths=None, cache=None, need_weights=False)
      x: (B, T, d_model) queries; context: (B, S, d_model) keys and values for cross-attention
      mask: boolean, broadcastable to (B, n_heads, T, S), True = may attend
      lengths: (B,) real lengths of the key sequences: keys at j >= length are padding
      cache: a KVCache this layer appends to (positions continue from cache.length)
      need_weights: keep the (B, n_heads, T, S) attention weights in `self.weights`, for pictures
    """

    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=True, out_bias=None, rope=None, dropout=0.0, dtype=None):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads:
            raise ValueError(f"GeneralAttention: d_model {d_model} is not divisible by n_heads {n_heads}")
        if n_heads % n_kv_heads:
            raise ValueError(f"GeneralAttention: n_heads {n_heads} is not divisible by n_kv_heads {n_kv_heads}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.head_dim = d_model // n_heads
        kv_dim = n_kv_heads * self.head_dim
        self.q_proj = Linear(d_model, d_model, bias=bias, dtype=dtype)
        self.k_proj = Linear(d_model, kv_dim, bias=bias, dtype=dtype)
        self.v_proj = Linear(d_model, kv_dim, bias=bias, dtype=dtype)
        self.o_proj = Linear(d_model, d_model, bias=bias if out_bias is None else out_bias, dtype=dtype)
        self.rope = rope
        self.attn_dropout_p = dropout  # a probability: the fused op drops attention weights with it
        self.resid_dropout = Dropout(dropout)  # a layer: drops the output before it joins the residual stream
        self.weights = None

    def forward(self, x, context=None, causal=False, mask=None, lengths=None, cache=None, need_weights=False):
        b, t, _ = x.shape
        source = x if context is None else context
        offset = 0 if cache is None else cache.length
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, nh, T, hs)
        k = split_heads(self.k_proj(source), self.n_kv_heads)  # (B, nkv, S, hs)
        v = split_heads(self.v_proj(source), self.n_kv_heads)  # (B, nkv, S, hs)
        if self.rope is not None and context is None:  # positions rotate self-attention only
            q, k = self.rope(q, offset=offset), self.rope(k, offset=offset)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, nkv, offset + T, hs)
        s = k.shape[-2]
        if lengths is not None:
            pad = padding_mask(lengths, s)
            mask = pad if mask is None else np.asarray(mask) & pad
        group = self.n_heads // self.n_kv_heads
        if group > 1:  # grouped-query heads (without, the shapes below are (B, nh, T, ...))
            q = q.reshape(b, self.n_kv_heads, group, t, self.head_dim)  # (B, nkv, g, T, hs)
            k, v = k.unsqueeze(2), v.unsqueeze(2)  # (B, nkv, 1, S, hs): shared by the g query heads
        if mask is not None:
            mask = self._grouped_mask(np.asarray(mask))
        p = self.attn_dropout_p if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, mask=mask, causal=causal, dropout_p=p)  # (B, nkv, g, T, hs)
        if need_weights:
            w = F.attention_weights(q, k, mask=mask, causal=causal)  # (B, nkv, g, T, S)
            self.weights = w.reshape(b, self.n_heads, t, s)
        if group > 1:
            out = out.reshape(b, self.n_heads, t, self.head_dim)  # (B, nh, T, hs)
        return self.resid_dropout(self.o_proj(merge_heads(out)))

    def _grouped_mask(self, mask):
        """A mask over (B, n_heads, T, S) viewed over (B, n_kv, group, T, S), like the queries
        (as it is, 4-D, when each key/value head serves one query head)."""
        mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape) if mask.ndim < 4 else mask
        if mask.ndim != 4:
            raise ValueError(f"GeneralAttention: mask must broadcast to (B, n_heads, T, S), got shape {mask.shape}")
        heads = mask.shape[1]
        if heads not in (1, self.n_heads):
            raise ValueError(f"GeneralAttention: mask has {heads} heads on axis 1, the layer has {self.n_heads}")
        if self.n_heads == self.n_kv_heads:
            return mask
        if heads == 1:
            return mask[:, :, None]
        return mask.reshape(mask.shape[0], self.n_kv_heads, self.n_heads // self.n_kv_heads, *mask.shape[2:])

    def extra_repr(self):
        kv = f", n_kv_heads={self.n_kv_heads}" if self.n_kv_heads != self.n_heads else ""
        return f"{self.d_model}, n_heads={self.n_heads}{kv}"
