"""LayerNorm and RMSNorm over the last axis, fused, with their backward derived by hand."""

import numpy as np

from ..autograd import Function


def row_mean_of_product(a, b):
    """mean over the last axis of a * b, keepdims (einsum forms no (..., D) temporary for a * b)."""
    return np.einsum("...i,...i->...", a, b)[..., None] / a.shape[-1]


class LayerNorm(Function):
    """y = xhat * w + b,  xhat = (x - mu) * r,  mu = mean(x),  r = 1 / sqrt(var(x) + eps)   (last axis, size D)

    With gh = g * w (the gradient reaching xhat):
      dL/dx = r * (gh - mean(gh) - xhat * mean(gh * xhat))
    (mean(gh) is the path through mu; xhat * mean(gh xhat) the path through var),
      dL/dw = sum over rows of g * xhat,   dL/db = sum over rows of g.
    """

    @staticmethod
    def forward(ctx, x, w, b, eps=1e-5):
        xhat = x - x.mean(axis=-1, keepdims=True)
        r = 1 / np.sqrt(row_mean_of_product(xhat, xhat) + eps)
        xhat *= r
        ctx.save_for_backward(xhat, r, w)
        y = xhat if w is None else xhat * w
        return y if b is None else y + b

    @staticmethod
    def backward(ctx, grad):
        xhat, r, w = ctx.saved_tensors
        gh = grad if w is None else grad * w
        dx = r * (gh - gh.mean(axis=-1, keepdims=True) - xhat * row_mean_of_product(gh, xhat))
        rows = tuple(range(grad.ndim - 1))
        dw = (grad * xhat).sum(axis=rows) if ctx.needs_input_grad[1] else None
        db = grad.sum(axis=rows) if ctx.needs_input_grad[2] else None
        return dx, dw, db


class RMSNorm(Function):
    """y = xhat * w,  xhat = x * r,  r = 1 / sqrt(mean(x^2) + eps)   (last axis; no centring, no bias)

    With gh = g * w:  dL/dx = r * (gh - xhat * mean(gh * xhat)),   dL/dw = sum over rows of g * xhat.
    """

    @staticmethod
    def forward(ctx, x, w, eps=1e-6):
        r = 1 / np.sqrt(row_mean_of_product(x, x) + eps)
        xhat = x * r
        ctx.save_for_backward(xhat, r, w)
        return xhat if w is None else xhat * w

    @staticmethod
    def backward(ctx, grad):
        xhat, r, w = ctx.saved_tensors
        gh = grad if w is None else grad * w
        dx = r * (gh - xhat * row_mean_of_product(gh, xhat))
        dw = (grad * xhat).sum(axis=tuple(range(grad.ndim - 1))) if ctx.needs_input_grad[1] else None
        return dx, dw
