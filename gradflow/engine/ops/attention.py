"""Scaled dot-product attention as one op: out = softmax(q k^T / sqrt(d), masked) v."""

import math

import numpy as np

from gradflow.engine.autograd import Function


def causal_mask(tq, tk):
    """(tq, tk) boolean, True where query i may attend to key j: j <= i + (tk - tq).

    With tq == tk this is the lower triangle; with fewer queries than keys (decoding with a KV
    cache) the queries are the last tq positions, so the last query sees every key.
    """
    return np.tri(tq, tk, k=tk - tq, dtype=bool)


def allowed_keys(allowed, causal, tq, tk):
    """The boolean mask of the keys each query may attend to: `allowed` (broadcastable to
    (..., tq, tk), or None for all) and, if `causal`, none after the query; None if nothing is masked."""
    if not causal:
        return allowed
    return causal_mask(tq, tk) if allowed is None else allowed & causal_mask(tq, tk)


def softmax_of_scores(q, k, allowed=None, scale=None, bias=None):
    """A = softmax(q k^T * scale + bias) along the keys, with a score set to -inf where `allowed` is False.

    A masked score's weight is exp(-inf) = 0 (and so is one whose bias is -inf). A query with no
    allowed key at all gets all-zero weights: its row's max is taken as 0 (not -inf, which would
    give -inf - -inf = NaN) and its sum, 0, as 1. `scale` defaults to 1 / sqrt(d).
    """
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if bias is not None:
        scores = scores + bias
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(m), m, 0))
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s > 0, s, 1)


class ScaledDotProductAttention(Function):
    """out = A' v,   A' = A * drop,   A = softmax(S) along the keys,   S = q k^T * scale + bias (masked)

    q: (..., Tq, d), k: (..., Tk, d), v: (..., Tk, dv), batch axes broadcast; `bias`, an optional
    fourth input broadcastable to (..., Tq, Tk), is added to the scores (PyTorch's float attn_mask:
    -inf forbids a key, a learned bias gets its gradient); `allowed`: boolean, broadcastable to
    (..., Tq, Tk), True where a query may attend to a key; `causal`: and not to later keys. `drop`
    is dropout's mask already scaled (0 or 1/(1-p)); without dropout A' = A.

    Backward, with G = dL/d(out), the chain rule through each line of forward in turn:
      dv = A'^T G                                  out = A' v
      dA = (G v^T) * drop                          A' = A * drop
      dS = A * (dA - rowsum(dA * A))               the softmax of each query's row (ops.Softmax)
      dq = dS k * scale,   dk = dS^T q * scale,    S = q k^T * scale + bias
      dbias = dS
    A masked score has weight 0, so its dS is 0: no gradient reaches a key the query cannot see.

    Written with primitive ops: composed.attention.
    """

    name = "attention"

    @staticmethod
    def forward(ctx, q, k, v, bias=None, allowed=None, causal=False, scale=None, drop=None):
        scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        attn = softmax_of_scores(q, k, allowed_keys(allowed, causal, q.shape[-2], k.shape[-2]), scale, bias)
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
        dq = dscores @ k * ctx.scale
        dk = np.swapaxes(dscores, -1, -2) @ q * ctx.scale
        if len(ctx.needs_input_grad) == 3:  # called without the bias input
            return dq, dk, dv
        return dq, dk, dv, dscores
