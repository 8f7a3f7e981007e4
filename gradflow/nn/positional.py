"""Positional encodings: sinusoidal (added), learned (added) and rotary (RoPE, rotates q and k).

Attention by itself is blind to order: permuting the tokens permutes its outputs the same way.
Each encoding breaks that symmetry differently; `offset` is the position of the first token, so
decoding with a KV cache can encode token t alone at its true position.
"""

import numpy as np

from gradflow.engine.checks import normalize_axis
from gradflow.nn import functional as F
from gradflow.nn import init
from gradflow.nn.module import Module


def sinusoidal_table(n_positions, d_model, base=10000.0):
    """PE[pos, 2i] = sin(pos / base^(2i/d)),  PE[pos, 2i+1] = cos(pos / base^(2i/d))   (n_positions, d_model)"""
    if d_model % 2:
        raise ValueError(f"sinusoidal positions: d_model must be even, got {d_model}")
    pos = np.arange(n_positions)[:, None]
    freq = base ** (-np.arange(0, d_model, 2) / d_model)  # 1 / base^(2i/d) for i = 0 .. d/2-1
    table = np.zeros((n_positions, d_model))
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq)
    return table


def _check_fits(name, offset, t, max_len):
    if offset + t > max_len:
        raise ValueError(f"{name}: positions {offset}..{offset + t - 1} do not fit in max_len {max_len}")


class SinusoidalPositionalEncoding(Module):
    """x + PE[offset : offset + T]: fixed, nothing learned (Vaswani et al., 2017)."""

    def __init__(self, d_model, max_len=4096, base=10000.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        # a buffer: cast by .to(dtype), listed by buffers(); not saved, since it is computed
        self.register_buffer("table", sinusoidal_table(max_len, d_model, base), persistent=False)

    def forward(self, x, offset=0):
        t = x.shape[-2]
        _check_fits("SinusoidalPositionalEncoding", offset, t, self.max_len)
        return x + self.table.data[offset : offset + t].astype(x.dtype)

    def extra_repr(self):
        return f"{self.d_model}, max_len={self.max_len}"


class LearnedPositionalEncoding(Module):
    """x + W[offset : offset + T], W: (max_len, d_model) learned like a token embedding.

    GPT-2's position table; models/gpt.py keeps it as an Embedding of positions and writes the sum out."""

    def __init__(self, max_len, d_model, dtype=None):
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        self.weight = init.normal_(init.parameter(max_len, d_model, dtype=dtype), std=0.02)

    def forward(self, x, offset=0):
        t = x.shape[-2]
        _check_fits("LearnedPositionalEncoding", offset, t, self.max_len)
        return x + self.weight[offset : offset + t]

    def extra_repr(self):
        return f"{self.max_len}, {self.d_model}"


class RotaryEmbedding(Module):
    """RoPE: rotate each pair of q (and k) features by an angle proportional to the position.

    For pair i at position m, with theta_i = base^(-2i/d):
        (a, b) -> (a cos(m theta_i) - b sin(m theta_i),  a sin(m theta_i) + b cos(m theta_i))
    so q_m . k_n depends on m and n only through m - n (a rotation by m, one by n, and R_m^T R_n = R_(n-m)).

    `interleaved=True` pairs adjacent features (x0, x1), (x2, x3), ... (the RoFormer paper, GPT-J);
    `interleaved=False` pairs x_i with x_(i + d/2) (Llama, Qwen and SmolLM checkpoints).
    """

    def __init__(self, head_dim, base=10000.0, interleaved=False):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RotaryEmbedding: head_dim must be even, got {head_dim}")
        self.head_dim, self.base, self.interleaved = head_dim, base, interleaved
        self.theta = base ** (-np.arange(0, head_dim, 2) / head_dim)  # (d/2,)
        self._table = None

    def angles(self, t, offset=0):
        """m * theta_i for positions m = offset .. offset + t - 1:  (t, d/2)"""
        return np.arange(offset, offset + t)[:, None] * self.theta

    def forward(self, x, offset=0, axis=-2):
        """Rotate x: (..., T, head_dim), with T along `axis`."""
        axis = normalize_axis("RotaryEmbedding", axis, x.shape)
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"RotaryEmbedding: last axis has size {x.shape[-1]}, expected {self.head_dim}")
        cos, sin = self.table(x.shape[axis], offset, x.dtype)  # (T, d/2)
        shape = cos.shape[:1] + (1,) * (x.ndim - 2 - axis) + cos.shape[1:]  # T on `axis`, d/2 last
        return F.rope(x, cos.reshape(shape), sin.reshape(shape), interleaved=self.interleaved)

    def table(self, t, offset, dtype):
        """cos and sin of the angles m * theta_i, (t, d/2) each; the last table is kept, since every
        layer (and q and k) asks for the same one."""
        key = (t, offset, np.dtype(dtype))
        if self._table is None or self._table[0] != key:
            angle = self.angles(t, offset)
            self._table = (key, np.cos(angle).astype(dtype), np.sin(angle).astype(dtype))
        return self._table[1:]

    def extra_repr(self):
        layout = "interleaved" if self.interleaved else "halves"
        return f"{self.head_dim}, base={self.base:g}, {layout}"
