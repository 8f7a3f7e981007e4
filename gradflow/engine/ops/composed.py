"""Each fused op of this folder written again with primitive ops: the same numbers, one step at a time.

A fused op (softmax.py, loss.py, norm.py, attention.py, ...) computes its formula in one node, with
a backward derived by hand. Here each one is a chain of primitive ops (matmul, mul, exp, sum, ...),
whose backward the engine composes by the chain rule: the reference the derivation is checked
against. tests/test_fused.py proves each fused op equal to its reference, in value and in gradient,
in both tiers; the explorer opens a fused node into its reference (tools/explore_view.py), and
models/trace.py prints attention's steps through it.

A reference takes the fused op's inputs and constants, as its forward does, and a `step`: each
intermediate result goes through step(name, tensor), which hands it back. Nobody watches by default;
the explorer names the tensors with it, and the trace prints them.

A reference may call another fused op that has its reference here (attention calls softmax,
cross_entropy calls log_softmax), so each chain stays as short as its formula; a max subtracted for
stability is a constant (softmax(x - c) = softmax(x) for any c), so the chain detaches it.

GELU's exact form (GeluErf) has no reference: erf is no op of the engine. The gradcheck table
checks it against finite differences, tests/test_torch_parity.py against PyTorch.
"""

import math

import numpy as np

from gradflow.engine import ops
from gradflow.engine.functions import cat, stack
from gradflow.engine.ops.attention import allowed_keys
from gradflow.engine.ops.elementwise import GELU_A, GELU_C
from gradflow.engine.tensor import Tensor


def unwatched(name, x):
    """The default step: no one looks at the intermediate results."""
    return x


def softmax(x, axis=-1, step=unwatched):
    """y = e / sum(e),  e = exp(x - m),  m = max(x), a constant   (along `axis`)"""
    m = step("m", x.max(axis=axis, keepdims=True).detach())
    e = step("e", (x - m).exp())
    return e / e.sum(axis=axis, keepdims=True)


def logsumexp(x, axis, keepdims=False, step=unwatched):
    """y = m + log sum(exp(x - m)),  m = max(x), a constant   (over `axis`, a tuple)"""
    m = step("m", x.max(axis=axis, keepdims=True).detach())
    y = m + step("log sum", (x - m).exp().sum(axis=axis, keepdims=True).log())
    return y if keepdims else y.squeeze(axis)


def log_softmax(x, axis=-1, step=unwatched):
    """y = x - logsumexp(x)   (along `axis`)"""
    return x - step("logsumexp", logsumexp(x, (axis,), keepdims=True, step=step))


def cross_entropy(z, targets, ignore_index=None, reduction="mean", step=unwatched):
    """loss_n = -log_softmax(z_n)[t_n]   (z: (N, C) logits, t: (N,) ids)

    A row whose target is `ignore_index` is weighted 0; "mean" divides by the rows that count.
    """
    valid = np.ones(targets.shape, dtype=bool) if ignore_index is None else targets != ignore_index
    log_p = step("log p", z.log_softmax(axis=1))
    picked = step("picked", log_p[np.arange(len(targets)), np.where(valid, targets, 0)])
    losses = step("losses", -picked * Tensor(valid.astype(z.dtype)))
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.sum() / max(int(valid.sum()), 1)


def layer_norm(x, w=None, b=None, eps=1e-5, step=unwatched):
    """y = xhat * w + b,  xhat = xc * r,  r = 1 / sqrt(var + eps),  var = mean(xc^2),  xc = x - mean(x)   (last axis)"""
    xc = step("xc", x - x.mean(axis=-1, keepdims=True))
    var = step("var", (xc * xc).mean(axis=-1, keepdims=True))
    xhat = step("xhat", xc * step("r", (var + eps).rsqrt()))
    y = xhat if w is None else xhat * w
    return y if b is None else y + b


def rms_norm(x, w=None, eps=1e-6, step=unwatched):
    """y = xhat * w,  xhat = x * r,  r = 1 / sqrt(mean(x^2) + eps)   (last axis)"""
    xhat = step("xhat", x * step("r", ((x * x).mean(axis=-1, keepdims=True) + eps).rsqrt()))
    return xhat if w is None else xhat * w


def var(x, axis, keepdims=False, ddof=0, step=unwatched):
    """y = sum(xc^2) / (N - ddof),  xc = x - mean(x)   (over `axis`, a tuple of N elements in all)"""
    xc = step("xc", x - x.mean(axis=axis, keepdims=True))
    n = math.prod(x.shape[a] for a in axis)
    return (xc * xc).sum(axis=axis, keepdims=keepdims) / (n - ddof)


def gelu(x, step=unwatched):
    """GELU's tanh form: y = x h,  h = (1 + tanh(u)) / 2,  u = c (x + a x^3),  c = sqrt(2/pi), a = 0.044715"""
    u = step("u", GELU_C * (x + GELU_A * x * x * x))
    return x * step("h", (1 + u.tanh()) / 2)


def silu(x, step=unwatched):
    """y = x sigmoid(x)"""
    return x * step("sigmoid", x.sigmoid())


def linear(x, w, b=None, step=unwatched):
    """y = x W^T + b"""
    y = step("x W^T", x @ w.T)
    return y if b is None else y + b


def linear_cross_entropy(x, w, b=None, targets=None, ignore_index=None, reduction="mean", step=unwatched):
    """L = cross_entropy(z, t),  z = x W^T + b: the logits formed whole"""
    z = step("logits", linear(x, w, b))
    return cross_entropy(z, targets, ignore_index, reduction, step=step)


def embedding(w, ids, step=unwatched):
    """y = onehot(ids) W: the row of W at each id, as a product, so that dL/dW = onehot^T G adds the
    gradients of every place an id is used."""
    onehot = step("onehot", Tensor((ids[..., None] == np.arange(w.shape[0])).astype(w.dtype)))
    return onehot @ w


def rope(x, cos, sin, interleaved=False, step=unwatched):
    """Each pair (a, b) of x turned by its angle: (a cos - b sin, a sin + b cos), put back where it was:
    (x0, x1), (x2, x3), ... when interleaved, (x_i, x_(i + d/2)) otherwise."""
    half = x.shape[-1] // 2
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :half], x[..., half:])
    cos, sin = step("cos", Tensor(cos)), step("sin", Tensor(sin))
    a_turned, b_turned = step("a turned", a * cos - b * sin), step("b turned", a * sin + b * cos)
    if interleaved:
        return stack([a_turned, b_turned], axis=-1).reshape(x.shape)
    return cat([a_turned, b_turned], axis=-1)


def attention(q, k, v, bias=None, allowed=None, causal=False, scale=None, drop=None, step=unwatched):
    """out = weights v,  weights = softmax(masked) along the keys,  masked = scores, -inf where a key is
    not allowed,  scores = q k^T * scale + bias

    scale defaults to 1 / sqrt(d); `allowed`, `causal` and `drop` as in ScaledDotProductAttention.
    A query with no key allowed gives NaN here where the fused op gives zeros: its row's max is
    -inf, and -inf - -inf is NaN.
    """
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    qk = step("q k^T", q @ k.swapaxes(-1, -2))
    scores = step("scores", qk * scale if bias is None else qk * scale + bias)
    allowed = allowed_keys(allowed, causal, q.shape[-2], k.shape[-2])
    masked = scores if allowed is None else step("masked", scores.masked_fill(~np.asarray(allowed), -np.inf))
    weights = step("weights", masked.softmax(axis=-1))
    if drop is not None:
        weights = step("dropped", weights * Tensor(drop))
    return weights @ v


REFERENCES = {  # a fused op's name (Function.name, as its node calls it) -> its reference
    ops.ScaledDotProductAttention.name: attention,
    ops.Softmax.name: softmax,
    ops.LogSoftmax.name: log_softmax,
    ops.LogSumExp.name: logsumexp,
    ops.CrossEntropy.name: cross_entropy,
    ops.LayerNorm.name: layer_norm,
    ops.RMSNorm.name: rms_norm,
    ops.Var.name: var,
    ops.Gelu.name: gelu,
    ops.Silu.name: silu,
    ops.Linear.name: linear,
    ops.LinearCrossEntropy.name: linear_cross_entropy,
    ops.Embedding.name: embedding,
    ops.Rope.name: rope,
}
