"""PyTorch's transformer encoder, as programs build it from torch.nn: MultiheadAttention,
TransformerEncoderLayer and TransformerEncoder, with PyTorch's signatures, parameter names, masks
and initialisation, so that a PyTorch state dict loads as it is (Vaswani et al., "Attention Is All
You Need"). gradflow's own attention (attention.py, general_attention.py) is the one to read first;
this is the same computation in PyTorch's packaging:

    MultiheadAttention   q, k, v = query W_q^T + b_q, key W_k^T + b_k, value W_v^T + b_v (rows of in_proj_weight)
                         head h: softmax(q_h k_h^T / sqrt(d) + masks) v_h;  heads side by side, then out_proj
    EncoderLayer (post)  x = norm1(x + dropout1(self_attn(x))); x = norm2(x + dropout2(ff(x)))
    EncoderLayer (pre)   x = x + dropout1(self_attn(norm1(x))); x = x + dropout2(ff(norm2(x)))   (norm_first)
                         ff(x) = linear2(dropout(activation(linear1(x))))

Masks follow PyTorch's MultiheadAttention, the opposite of scaled_dot_product_attention's: a boolean
attn_mask or key_padding_mask is True where attention is NOT allowed; a float one is added to the
scores. Inputs are (seq, batch, embed), (batch, seq, embed) with batch_first, or (seq, embed).
"""

import copy
import math

import numpy as np

from gradflow.engine.tensor import Tensor, as_tensor
from gradflow.nn import functional as F
from gradflow.nn import init
from gradflow.nn.layers import Dropout, LayerNorm, Linear
from gradflow.nn.module import Module, ModuleList


def _additive(op, name, mask, dtype):
    """A mask as what is added to the scores: -inf where a boolean mask says True (not allowed)."""
    if isinstance(mask, Tensor) and mask.dtype.kind == "f":
        return mask
    array = np.asarray(mask)
    if array.dtype.kind == "b":
        return Tensor(np.where(array, -np.inf, 0.0).astype(dtype))
    if array.dtype.kind == "f":
        return Tensor(array.astype(dtype))
    raise TypeError(f"{op}: {name} must be boolean (True = not allowed) or floating-point (added), got {array.dtype}")


class MultiheadAttention(Module):
    """PyTorch's nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first). forward(query,
    key, value, key_padding_mask=None, need_weights=True, attn_mask=None, average_attn_weights=True,
    is_causal=False) returns (output, weights): weights (batch, L, S) averaged over the heads, per head
    (batch, heads, L, S) with average_attn_weights=False, None with need_weights=False."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        self.in_proj_weight = init.xavier_uniform_(init.parameter(3 * embed_dim, embed_dim, dtype=dtype))
        self.in_proj_bias = init.parameter(3 * embed_dim, dtype=dtype) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if bias:
            init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):  # fmt: skip
        query, key, value = as_tensor(query), as_tensor(key), as_tensor(value)
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        (L, N, E), S = query.shape, key.shape[0]
        if query.shape[-1] != self.embed_dim:
            raise ValueError(f"MultiheadAttention: the query's last size is {E}, expected embed_dim {self.embed_dim}")
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        H, d = self.num_heads, self.head_dim

        def heads(x, w, b, length):  # (length, N, E) -> (N, H, length, d)
            return F.linear(x, w, b).reshape(length, N, H, d).permute(1, 2, 0, 3)

        q, k, v = heads(query, w_q, b_q, L), heads(key, w_k, b_k, S), heads(value, w_v, b_v, S)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))  # (N, H, L, S)
        if is_causal and attn_mask is None:
            attn_mask = np.triu(np.ones((L, S), dtype=bool), 1)
        if attn_mask is not None:
            mask = _additive("MultiheadAttention", "attn_mask", attn_mask, scores.dtype)
            scores = scores + (mask if mask.ndim == 2 else mask.reshape(N, H, L, S))
        if key_padding_mask is not None:
            mask = _additive("MultiheadAttention", "key_padding_mask", key_padding_mask, scores.dtype)
            scores = scores + mask.reshape(N if not unbatched else 1, 1, 1, S)
        weights = F.softmax(scores, dim=-1)
        out = F.dropout(weights, self.dropout, self.training) @ v  # (N, H, L, d)
        out = self.out_proj(out.permute(2, 0, 1, 3).reshape(L, N, E))
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.mean(1) if average_attn_weights else weights
        return out, weights.squeeze(0) if unbatched else weights

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def activation_of(op, activation):
    """The feed-forward net's activation: "relu", "gelu" (PyTorch's exact erf form) or a function."""
    activations = {"relu": F.relu, "gelu": F.gelu}
    if isinstance(activation, str) and activation not in activations:
        raise ValueError(f"{op}: activation must be 'relu', 'gelu' or a function, got {activation!r}")
    return activations[activation] if isinstance(activation, str) else activation


class TransformerEncoderLayer(Module):
    """PyTorch's nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation="relu", layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True):
    self-attention then a feed-forward net, each with dropout, a residual and a LayerNorm."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, dtype=None):  # fmt: skip
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = activation_of("TransformerEncoderLayer", activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = as_tensor(src)

        def attend(x):
            out, _ = self.self_attn(x, x, x, src_key_padding_mask, False, src_mask, is_causal=is_causal)
            return self.dropout1(out)

        if self.norm_first:
            x = x + attend(self.norm1(x))
            return x + self.dropout2(self.feed_forward(self.norm2(x)))
        x = self.norm1(x + attend(x))
        return self.norm2(x + self.dropout2(self.feed_forward(x)))

    def feed_forward(self, x):
        """linear2(dropout(activation(linear1(x)))): the layer's position-wise feed-forward net."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class TransformerEncoder(Module):
    """PyTorch's nn.TransformerEncoder(encoder_layer, num_layers, norm=None): num_layers copies of the
    layer (each with weights of its own, copied from the one given), then norm if given."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)
