"""LayerNorm and RMSNorm over the last axis, fused, with their backward derived by hand.

Read after engine/ops/elementwise.py and before nn/layers.py (README.md gives the reading order).
"""

import numpy as np

from gradflow.engine.autograd import Function


def sum_over_rows(a):
    """The sum over every axis but the last: the gradient of a weight that every row uses."""
    return a.sum(axis=tuple(range(a.ndim - 1)))


class LayerNorm(Function):
    """y = xhat * w + b,  xhat = (x - mu) * r,  mu = mean(x),  r = 1 / sqrt(var(x) + eps)   (last axis, size D)

    With gh = g * w, the gradient reaching xhat, and means over the last axis:
      dL/dx = r * (gh - mean(gh) - xhat * mean(gh * xhat))
    (x reaches xhat directly, through mu, which gives -mean(gh), and through var, which gives
    -xhat mean(gh xhat): d var / dx_i = 2 (x_i - mu) / D, and d r / d var = -r^3 / 2);
      dL/dw = sum over rows of g * xhat,   dL/db = sum over rows of g.

    Written with primitive ops: composed.layer_norm.
    """

    @staticmethod
    def forward(ctx, x, w, b, eps=1e-5):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        r = 1 / np.sqrt(var + eps)
        xhat = (x - mu) * r
        ctx.save_for_backward(xhat, r, w)
        y = xhat if w is None else xhat * w
        return y if b is None else y + b

    @staticmethod
    def backward(ctx, grad):
        xhat, r, w = ctx.saved_tensors
        gh = grad if w is None else grad * w
        dx = r * (gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True))
        dw = sum_over_rows(grad * xhat) if ctx.needs_input_grad[1] else None
        db = sum_over_rows(grad) if ctx.needs_input_grad[2] else None
        return dx, dw, db


class RMSNorm(Function):
    """y = xhat * w,  xhat = x * r,  r = 1 / sqrt(mean(x^2) + eps)   (last axis; no centring, no bias)

    As in LayerNorm without the path through the mean, with gh = g * w:
      dL/dx = r * (gh - xhat * mean(gh * xhat)),   dL/dw = sum over rows of g * xhat.

    Written with primitive ops: composed.rms_norm.
    """

    @staticmethod
    def forward(ctx, x, w, eps=1e-6):
        r = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
        xhat = x * r
        ctx.save_for_backward(xhat, r, w)
        return xhat if w is None else xhat * w

    @staticmethod
    def backward(ctx, grad):
        xhat, r, w = ctx.saved_tensors
        gh = grad if w is None else grad * w
        dx = r * (gh - xhat * (gh * xhat).mean(axis=-1, keepdims=True))
        dw = sum_over_rows(grad * xhat) if ctx.needs_input_grad[1] else None
        return dx, dw
