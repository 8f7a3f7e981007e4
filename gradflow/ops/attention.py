"""Scaled dot-product attention, fused: softmax(q k^T / sqrt(d) + mask) v in one op."""

import math

import numpy as np

from ..autograd import Function


def attention_weights(q, k, allowed=None, scale=None):
    """attn = softmax(q @ k^T * scale) along keys (numpy arrays; scale defaults to 1/sqrt(d)).

    Disallowed scores become -inf, so their weight exp(-inf) = 0; a query with no allowed key gets
    all-zero weights (the row's max is taken as 0 and its sum as 1) instead of 0/0 = NaN.
    """
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2)
    scores *= scale
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    scores -= np.where(np.isfinite(m), m, 0)
    e = np.exp(scores, out=scores)  # the softmax is computed in the scores' own buffer
    s = e.sum(axis=-1, keepdims=True)
    e /= np.where(s > 0, s, 1)
    return e


class ScaledDotProductAttention(Function):
    """out = attn' @ v,  attn' = attn * drop,  attn = softmax(scores),  scores = q @ k^T * scale

    q: (..., Tq, d), k: (..., Tk, d), v: (..., Tk, dv); `allowed`: boolean, broadcastable to
    (..., Tq, Tk), True where a query may attend to a key. `drop` is dropout's mask already scaled
    (0 or 1/(1-p)); without dropout attn' = attn.

    Backward, with G = dL/d(out):
      dv = attn'^T @ G
      dattn = (G @ v^T) * drop
      dscores = attn * (dattn - rowsum(dattn * attn))     (the softmax backward, per query row)
      dq = dscores @ k * scale,   dk = dscores^T @ q * scale
    """

    name = "attention"

    @staticmethod
    def forward(ctx, q, k, v, allowed=None, scale=None, drop=None):
        scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        attn = attention_weights(q, k, allowed, scale)
        dropped = attn if drop is None else attn * drop
        ctx.save_for_backward(q, k, v, attn, dropped)
        ctx.scale, ctx.drop = scale, drop
        return dropped @ v

    @staticmethod
    def backward(ctx, grad):
        q, k, v, attn, dropped = ctx.saved_tensors
        dv = np.swapaxes(dropped, -1, -2) @ grad
        dattn = grad @ np.swapaxes(v, -1, -2)
        if ctx.drop is not None:
            dattn = dattn * ctx.drop
        dscores = attn * (dattn - (dattn * attn).sum(axis=-1, keepdims=True))
        dq = (dscores @ k) * ctx.scale
        dk = (np.swapaxes(dscores, -1, -2) @ q) * ctx.scale
        return dq, dk, dv
