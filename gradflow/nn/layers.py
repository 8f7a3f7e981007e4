"""The basic layers: Linear, Embedding, LayerNorm, RMSNorm, Dropout, Flatten.

Read after engine/ops/norm.py and before nn/attention.py (README.md gives the reading order).
"""

import math

from gradflow.nn import functional as F
from gradflow.nn import init
from gradflow.nn.module import Module


class Linear(Module):
    """y = x W^T + b,  W: (out_features, in_features) as PyTorch stores it, so checkpoints map 1:1."""

    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        # PyTorch's: U(-1/sqrt(in), 1/sqrt(in)), the weight's bound computed as kaiming_uniform_(a=sqrt(5))
        # computes it, so that after the same seed the numbers are PyTorch's to the last bit
        self.weight = init.kaiming_uniform_(init.parameter(out_features, in_features, dtype=dtype), a=math.sqrt(5))
        bound = 1 / math.sqrt(in_features)
        self.bias = init.uniform_(init.parameter(out_features, dtype=dtype), -bound, bound) if bias else None

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise ValueError(f"Linear({self.in_features}, {self.out_features}): input has last size {x.shape[-1]}")
        return F.linear(x, self.weight, self.bias)  # x W^T + b, one op

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """out[..., :] = W[ids[...], :], W: (num_embeddings, embedding_dim), initialised N(0, 1) as PyTorch's
    (GPT-2 and Llama re-initialise theirs to N(0, 0.02^2)). The row padding_idx, if given, starts at
    zero and gets no gradient, so a padding token stays a zero vector (PyTorch's padding_idx)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=None):
        super().__init__()
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise ValueError(f"Embedding: padding_idx {padding_idx} is out of range for {num_embeddings} embeddings")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = None if padding_idx is None else padding_idx % num_embeddings
        self.weight = init.normal_(init.parameter(num_embeddings, embedding_dim, dtype=dtype))
        if self.padding_idx is not None and self.weight.data.flags.writeable:  # (inside init.meta(): no memory)
            self.weight.data[self.padding_idx] = 0

    def forward(self, ids):
        return F.embedding(ids, self.weight, self.padding_idx)

    def extra_repr(self):
        padding = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{padding}"


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing axes normalized_shape (an int:
    the last axis), as PyTorch's; weight starts at 1, bias at 0, both absent without elementwise_affine."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.weight = init.ones_(init.parameter(*shape, dtype=dtype)) if elementwise_affine else None
        self.bias = init.parameter(*shape, dtype=dtype) if elementwise_affine and bias else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        shape = self.normalized_shape[0] if len(self.normalized_shape) == 1 else self.normalized_shape
        return f"{shape}, eps={self.eps}"


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis; weight starts at 1."""

    def __init__(self, dim, eps=1e-6, dtype=None):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = init.ones_(init.parameter(dim, dtype=dtype))

    def forward(self, x):
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.dim}, eps={self.eps}"


class Dropout(Module):
    """Zeroes elements with probability p while training (scaling the rest by 1/(1-p)); identity in eval.
    p defaults to PyTorch's 0.5; inplace computes out of place (see F.relu)."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class Flatten(Module):
    """x.flatten(start_dim, end_dim): by default every axis after the batch axis merged into one."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
