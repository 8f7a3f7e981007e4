"""A fused op opened into the primitive ops it fuses: the same numbers, one step at a time.

Each function below writes one fused op of gradflow/engine/ops as a chain of primitive ops
(matmul, mul, exp, sum, ...), with the fused op's inputs and constants as arguments; the explorer
runs it on the fused node's inputs, backward from the fused node's output gradient, and shows the
chain with every value and gradient. tests/test_explorer.py checks each against its fused op in
value and gradient, in float64, as tests/test_fused.py does.

    attention:   S = q k^T,  S' = S * scale (+ bias),  S'' = masked(S'),  A = softmax(S''),  out = A v
    softmax:     e = exp(x - max x),  y = e / sum(e)
    layer_norm:  xc = x - mean(x),  var = mean(xc^2),  y = xc / sqrt(var + eps) * w + b
    ...

A max subtracted for stability (softmax, log_softmax, logsumexp) is a constant: its gradient
cancels (softmax(x - c) = softmax(x) for any c), so the chain takes it as a number.
"""

import math

import numpy as np

from gradflow.engine.functions import cat, stack
from gradflow.engine.ops.attention import allowed_keys
from gradflow.engine.ops.elementwise import GELU_A, GELU_C
from gradflow.engine.tensor import Tensor


def _max_constant(x, axis):
    return Tensor(x.data.max(axis=axis, keepdims=True))


def softmax(x, axis=-1):
    e = (x - _max_constant(x, axis)).exp()
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    m = _max_constant(x, axis)
    return x - ((x - m).exp().sum(axis=axis, keepdims=True).log() + m)


def logsumexp(x, axis=None, keepdims=False):
    m = _max_constant(x, axis)
    out = (x - m).exp().sum(axis=axis, keepdims=True).log() + m
    return out if keepdims else out.reshape(np.sum(x.data, axis=axis).shape)


def attention(q, k, v, bias=None, allowed=None, causal=False, scale=None, drop=None):
    """out = softmax(masked(q k^T * scale + bias)) * drop @ v; a query with no key allowed gives
    NaN here where the fused op gives zeros (its max is -inf, and -inf - -inf is NaN)."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.swapaxes(-1, -2)
    scaled = scores * scale
    if bias is not None:
        scaled = scaled + bias
    allowed = allowed_keys(allowed, causal, q.shape[-2], k.shape[-2])
    masked = scaled if allowed is None else scaled.masked_fill(~np.asarray(allowed), -np.inf)
    weights = masked.softmax(axis=-1)  # the fused softmax: it opens in turn into exp, sum and div
    if drop is not None:
        weights = weights * Tensor(drop)
    return weights @ v


def cross_entropy(z, targets, ignore_index=None, reduction="mean"):
    """loss_n = -log_softmax(z_n)[t_n], ignored rows weighted 0; mean over the rows that count."""
    valid = np.ones(targets.shape, dtype=bool) if ignore_index is None else targets != ignore_index
    picked = log_softmax(z, axis=1)[np.arange(len(targets)), np.where(valid, targets, 0)]
    losses = -picked * Tensor(valid.astype(z.dtype))
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.sum() / max(int(valid.sum()), 1)


def layer_norm(x, w=None, b=None, eps=1e-5):
    xc = x - x.mean(axis=-1, keepdims=True)
    var = (xc * xc).mean(axis=-1, keepdims=True)
    y = xc * (var + eps).rsqrt()
    y = y if w is None else y * w
    return y if b is None else y + b


def rms_norm(x, w=None, eps=1e-6):
    y = x * ((x * x).mean(axis=-1, keepdims=True) + eps).rsqrt()
    return y if w is None else y * w


def gelu(x):
    """GELU's tanh form: x (1 + tanh(c (x + a x^3))) / 2."""
    return x * (1 + (GELU_C * (x + GELU_A * x * x * x)).tanh()) / 2


def silu(x):
    return x * x.sigmoid()


def linear(x, w, b=None):
    y = x @ w.swapaxes(0, 1)
    return y if b is None else y + b


def rope(x, cos, sin, interleaved=False):
    """Each pair (a, b) turned: (a cos - b sin, a sin + b cos), pairs put back where they were."""
    half = x.shape[-1] // 2
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :half], x[..., half:])
    cos, sin = Tensor(cos), Tensor(sin)
    a_turned, b_turned = a * cos - b * sin, a * sin + b * cos
    if interleaved:
        return stack([a_turned, b_turned], axis=-1).reshape(x.shape)
    return cat([a_turned, b_turned], axis=-1)


COMPOSED = {  # a fused op's name (Function.name) -> its chain of primitive ops
    "attention": attention,
    "softmax": softmax,
    "log_softmax": log_softmax,
    "log_sum_exp": logsumexp,
    "cross_entropy": cross_entropy,
    "layer_norm": layer_norm,
    "r_m_s_norm": rms_norm,  # RMSNorm's name, as the engine spells it
    "gelu": gelu,
    "silu": silu,
    "linear": linear,
    "rope": rope,
}


def composed(name, inputs, params):
    """The fused op `name` written as primitive ops, applied to `inputs` (Tensors) with its constants."""
    return COMPOSED[name](*inputs, **params)
