"""The neural-network functions a transformer is made of (imported as `F`).

linear, softmax, log_softmax, cross_entropy, layer_norm, rms_norm, rope, embedding and
scaled_dot_product_attention are fused ops: one node each, with the backward derived by hand in
the op's docstring (gradflow/engine/ops).
The test suite shows each one equals the same computation composed from primitive ops, in value
and in gradient.

Each function runs `kernel(ops.X)`: the plain op ops.X itself, or the tuned kernel that replaces
it in the fast tier (gradflow/fast, chosen by gradflow/engine/kernels.py; same numbers).
"""

import numpy as np

from gradflow.engine import ops
from gradflow.engine.kernels import kernel
from gradflow.engine.ops.attention import allowed_keys, causal_mask  # noqa: F401  (causal_mask: part of the functional API)
from gradflow.engine.rng import generator
from gradflow.engine.tensor import Tensor, as_tensor


def softmax(x, axis=-1):
    """exp(x_i) / sum_j exp(x_j) along axis (the max is subtracted first, so 1e4 does not overflow)."""
    return as_tensor(x).softmax(axis)


def log_softmax(x, axis=-1):
    """x_i - log sum_j exp(x_j) along axis."""
    return as_tensor(x).log_softmax(axis)


def gelu(x):
    """x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the tanh approximation GPT-2 uses."""
    return kernel(ops.Gelu).apply(as_tensor(x))


def silu(x):
    """x sigmoid(x) (Swish with beta = 1), the gate of SwiGLU."""
    return kernel(ops.Silu).apply(as_tensor(x))


def cross_entropy(logits, targets, ignore_index=None, reduction="mean"):
    """-log softmax(logits)[target] per row: logits (N, C), targets (N,) integer class ids.

    reduction: "mean" over the rows that count (targets == ignore_index do not), "sum", or "none"
    for the (N,) losses. Perplexity is exp of the mean.
    """
    logits = as_tensor(logits)
    targets = np.asarray(targets)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f'cross_entropy: reduction must be "mean", "sum" or "none", got {reduction!r}')
    if logits.ndim != 2:
        raise ValueError(
            f"cross_entropy: logits must be (N, C), got shape {logits.shape}; "
            "flatten the batch first, e.g. logits.reshape(-1, C) and targets.reshape(-1)"
        )
    if targets.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be integer class ids, got {targets.dtype}")
    if targets.shape != logits.shape[:1]:
        raise ValueError(f"cross_entropy: targets of shape {targets.shape} do not match logits of shape {logits.shape}")
    counted = targets if ignore_index is None else targets[targets != ignore_index]
    bad = counted[(counted < 0) | (counted >= logits.shape[1])]
    if bad.size:
        raise IndexError(f"cross_entropy: target {bad[0]} is out of range for {logits.shape[1]} classes")
    return kernel(ops.CrossEntropy).apply(logits, targets=targets, ignore_index=ignore_index, reduction=reduction)


def linear(x, weight, bias=None):
    """x @ weight.T + bias: x (..., in), weight (out, in) as Linear stores it, bias (out,)."""
    x, weight = as_tensor(x), as_tensor(weight)
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {x.shape} needs a weight of shape (out, {x.shape[-1:]}), got {weight.shape}")
    if bias is not None and as_tensor(bias).shape != weight.shape[:1]:
        raise ValueError(f"linear: bias has shape {as_tensor(bias).shape}, expected {weight.shape[:1]}")
    return kernel(ops.Linear).apply(x, weight, bias)


def rope(x, cos, sin, interleaved=False):
    """Rotate feature pairs of x by the angles whose cos and sin are given (RotaryEmbedding makes them).

    cos, sin: arrays broadcasting against x's shape with its last axis halved; pairs are (x0, x1),
    (x2, x3), ... when interleaved, else (x_i, x_(i + d/2)).
    """
    x = as_tensor(x)
    cos, sin = (np.asarray(a, dtype=x.dtype) for a in (cos, sin))
    if x.ndim < 1 or x.shape[-1] % 2 or cos.shape != sin.shape:
        raise ValueError(f"rope: x {x.shape} needs an even last axis, cos and sin one shape: {cos.shape}, {sin.shape}")
    try:
        np.broadcast_shapes(x.shape[:-1] + (x.shape[-1] // 2,), cos.shape)
    except ValueError:
        raise ValueError(f"rope: cos and sin {cos.shape} do not broadcast against half of x {x.shape}") from None
    return kernel(ops.Rope).apply(x, cos=cos, sin=sin, interleaved=interleaved)


def _check_norm_param(op, name, p, x):
    if p is not None and as_tensor(p).shape != x.shape[-1:]:
        raise ValueError(f"{op}: {name} has shape {as_tensor(p).shape}, expected {x.shape[-1:]} for input {x.shape}")


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis."""
    x = as_tensor(x)
    _check_norm_param("layer_norm", "weight", weight, x)
    _check_norm_param("layer_norm", "bias", bias, x)
    return kernel(ops.LayerNorm).apply(x, weight, bias, eps=eps)


def rms_norm(x, weight=None, eps=1e-6):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    x = as_tensor(x)
    _check_norm_param("rms_norm", "weight", weight, x)
    return kernel(ops.RMSNorm).apply(x, weight, eps=eps)


def dropout(x, p, training=True):
    """Zero each element with probability p and scale the rest by 1/(1-p), so the expected value is
    unchanged; the identity when not training (or p = 0)."""
    x = as_tensor(x)
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    keep = generator().random(x.shape) >= p
    return x * Tensor._make(keep.astype(x.dtype) / x.dtype.type(1 - p), False, None)


def embedding(ids, weight):
    """Row lookup: out[..., :] = weight[ids[...], :];  the gradient of a row sums over its uses."""
    weight = as_tensor(weight)
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"embedding: ids must be integers, got {ids.dtype}")
    bad = ids[(ids < 0) | (ids >= weight.shape[0])]
    if bad.size:
        raise IndexError(f"embedding: id {bad[0]} is out of range for a vocabulary of {weight.shape[0]}")
    return kernel(ops.Embedding).apply(weight, ids=ids)


def _attention_mask(q, k, v, mask):
    """Check q, k, v and the mask; returns the mask as a boolean array `allowed` (or None)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim < 2:
            raise ValueError(f"attention: {name} must be (..., T, d), got shape {t.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: q {q.shape} and k {k.shape} must have the same last size d")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: k {k.shape} and v {v.shape} must have the same number of keys")
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"attention: batch dimensions of q {q.shape}, k {k.shape} and v {v.shape} cannot be broadcast"
        ) from None
    tq, tk = q.shape[-2], k.shape[-2]
    allowed = None
    if mask is not None:
        allowed = np.asarray(mask)
        if allowed.dtype != bool:
            raise TypeError(f"attention: mask must be boolean (True = may attend), got {allowed.dtype}")
        try:
            np.broadcast_shapes(allowed.shape, batch + (tq, tk))
        except ValueError:
            raise ValueError(
                f"attention: mask of shape {allowed.shape} does not broadcast to the scores' shape {batch + (tq, tk)}"
            ) from None
    return allowed, batch + (tq, tk)


def scaled_dot_product_attention(q, k, v, mask=None, causal=False, scale=None, dropout_p=0.0):
    """softmax(q k^T / sqrt(d) masked) v on (..., T, d) inputs.

    mask: boolean, broadcastable to (..., Tq, Tk), True = may attend (PyTorch's convention).
    causal: also forbid attending to later positions. A query with nothing to attend to gets zeros.
    dropout_p: drop attention weights with this probability (scaling the rest by 1/(1-p)).
    """
    q, k, v = as_tensor(q), as_tensor(k), as_tensor(v)
    allowed, scores_shape = _attention_mask(q, k, v, mask)
    if not 0 <= dropout_p < 1:
        raise ValueError(f"attention: dropout_p must be in [0, 1), got {dropout_p}")
    drop = None
    if dropout_p > 0:
        drop = (generator().random(scores_shape) >= dropout_p).astype(q.dtype) / q.dtype.type(1 - dropout_p)
    return kernel(ops.ScaledDotProductAttention).apply(q, k, v, allowed=allowed, causal=causal, scale=scale, drop=drop)


def attention_weights(q, k, mask=None, causal=False, scale=None):
    """The (..., Tq, Tk) weights softmax(q k^T / sqrt(d) masked) as a Tensor outside the graph: for pictures."""
    q, k = as_tensor(q), as_tensor(k)
    allowed, shape = _attention_mask(q, k, k, mask)
    weights = ops.attention.softmax_of_scores(q.data, k.data, allowed_keys(allowed, causal, *shape[-2:]), scale)
    return Tensor._make(weights, False, None)
