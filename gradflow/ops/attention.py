"""Scaled dot-product attention, fused: softmax(q k^T / sqrt(d) + mask) v in one op."""

import math

import numpy as np

from ..autograd import Function


class ScaledDotProductAttention(Function):
    """out = attn @ v,  attn = softmax(scores) along keys,  scores = q @ k^T * scale  (scale = 1/sqrt(d))

    q: (..., Tq, d), k: (..., Tk, d), v: (..., Tk, dv); `allowed`: boolean, broadcastable to
    (..., Tq, Tk), True where a query may attend to a key. Disallowed scores become -inf, so their
    weight exp(-inf) = 0; a query with no allowed key gets all-zero weights, hence a zero output.

    Backward, with G = dL/d(out):
      dv = attn^T @ G
      dattn = G @ v^T
      dscores = attn * (dattn - rowsum(dattn * attn))     (the softmax backward, per query row)
      dq = dscores @ k * scale,   dk = dscores^T @ q * scale
    """

    name = "attention"

    @staticmethod
    def forward(ctx, q, k, v, allowed=None, scale=None):
        scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        scores = (q @ np.swapaxes(k, -1, -2)) * scale
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        m = scores.max(axis=-1, keepdims=True)
        e = np.exp(scores - np.where(np.isfinite(m), m, 0))
        s = e.sum(axis=-1, keepdims=True)
        attn = e / np.where(s > 0, s, 1)
        ctx.save_for_backward(q, k, v, attn)
        ctx.scale = scale
        return attn @ v

    @staticmethod
    def backward(ctx, grad):
        q, k, v, attn = ctx.saved_tensors
        dv = np.swapaxes(attn, -1, -2) @ grad
        dattn = grad @ np.swapaxes(v, -1, -2)
        dscores = attn * (dattn - (dattn * attn).sum(axis=-1, keepdims=True))
        dq = (dscores @ k) * ctx.scale
        dk = (np.swapaxes(dscores, -1, -2) @ q) * ctx.scale
        return dq, dk, dv
