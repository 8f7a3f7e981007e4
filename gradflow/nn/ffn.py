"""Position-wise feed-forward networks: the same two-layer network applied to every token."""

from gradflow.nn.layers import Dropout, Linear
from gradflow.nn.module import Module

ACTIVATIONS = {"relu": lambda h: h.relu(), "gelu": lambda h: h.gelu(), "silu": lambda h: h.silu()}


class MLP(Module):
    """FFN(x) = act(x W_1^T + b_1) W_2^T + b_2   (d_model -> d_ff -> d_model)

    ReLU in the 2017 Transformer, GELU in GPT-2."""

    def __init__(self, d_model, d_ff, activation="gelu", bias=True, dropout=0.0, dtype=None):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"MLP: activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.fc1 = Linear(d_model, d_ff, bias=bias, dtype=dtype)
        self.fc2 = Linear(d_ff, d_model, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.fc2(ACTIVATIONS[self.activation](self.fc1(x))))

    def extra_repr(self):
        return f"activation={self.activation!r}"


class SwiGLU(Module):
    """SwiGLU(x) = (silu(x W_gate^T) * (x W_up^T)) W_down^T   (Llama and Qwen, no biases)

    From Shazeer's "GLU Variants Improve Transformer". The SiLU branch decides, feature by feature,
    how much of the linear "up" branch passes.
    """

    def __init__(self, d_model, d_ff, bias=False, dropout=0.0, dtype=None):
        super().__init__()
        self.gate_proj = Linear(d_model, d_ff, bias=bias, dtype=dtype)
        self.up_proj = Linear(d_model, d_ff, bias=bias, dtype=dtype)
        self.down_proj = Linear(d_ff, d_model, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.down_proj(self.gate_proj(x).silu() * self.up_proj(x)))
