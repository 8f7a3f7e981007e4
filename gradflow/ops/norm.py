"""LayerNorm and RMSNorm over the last axis, fused, with their backward derived by hand."""

import numpy as np

from ..autograd import Function


def row_mean(a):
    """mean over the last axis, keepdims (einsum's plain loop beats a.mean's pairwise sum on short rows)."""
    return np.einsum("...i->...", a)[..., None] / a.shape[-1]


def row_mean_of_product(a, b):
    """mean over the last axis of a * b, keepdims (einsum forms no (..., D) temporary for a * b)."""
    return np.einsum("...i,...i->...", a, b)[..., None] / a.shape[-1]


def column_sum_of_product(a, b):
    """sum of a * b over every axis but the last: the gradient of a weight applied to every row."""
    d = a.shape[-1]
    return np.einsum("ni,ni->i", a.reshape(-1, d), b.reshape(-1, d))


class LayerNorm(Function):
    """y = xhat * w + b,  xhat = (x - mu) * r,  mu = mean(x),  r = 1 / sqrt(var(x) + eps)   (last axis, size D)

    With gh = g * w (the gradient reaching xhat):
      dL/dx = r * (gh - mean(gh) - xhat * mean(gh * xhat))
    (mean(gh) is the path through mu; xhat * mean(gh xhat) the path through var),
      dL/dw = sum over rows of g * xhat,   dL/db = sum over rows of g.
    """

    @staticmethod
    def forward(ctx, x, w, b, eps=1e-5):
        xhat = x - row_mean(x)
        r = 1 / np.sqrt(row_mean_of_product(xhat, xhat) + eps)
        xhat *= r
        ctx.save_for_backward(xhat, r, w)
        y = xhat if w is None else xhat * w
        if b is not None:  # in place, unless y is the saved xhat itself
            y = xhat + b if w is None else np.add(y, b, out=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        xhat, r, w = ctx.saved_tensors
        dx = grad * w if w is not None else grad.copy()  # gh, then dx in place
        path_through_var = xhat * row_mean_of_product(dx, xhat)
        dx -= row_mean(dx)
        dx -= path_through_var
        dx *= r  # r (gh - mean(gh) - xhat mean(gh xhat))
        dw = column_sum_of_product(grad, xhat) if ctx.needs_input_grad[1] else None
        db = grad.sum(axis=tuple(range(grad.ndim - 1))) if ctx.needs_input_grad[2] else None
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
        dx = grad * w if w is not None else grad.copy()  # gh, then dx in place
        dx -= xhat * row_mean_of_product(dx, xhat)
        dx *= r  # r (gh - xhat mean(gh xhat))
        dw = column_sum_of_product(grad, xhat) if ctx.needs_input_grad[1] else None
        return dx, dw
