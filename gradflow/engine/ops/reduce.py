"""Reductions over `axis` (a tuple of non-negative axes, already checked) with `keepdims`."""

import numpy as np

from gradflow.engine.autograd import Function


def spread(grad, shape, axis, keepdims):
    """Broadcast the gradient of a reduced tensor back over the axes it was reduced along."""
    if not keepdims:
        grad = np.expand_dims(grad, axis)
    return np.broadcast_to(grad, shape)


class Sum(Function):
    """y = sum_i x_i over axis;  dL/dx_i = g (every summand moves y one for one)"""

    @staticmethod
    def forward(ctx, x, axis, keepdims=False):
        ctx.shape, ctx.axis, ctx.keepdims = x.shape, axis, keepdims
        return x.sum(axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        return spread(grad, ctx.shape, ctx.axis, ctx.keepdims)


class Mean(Function):
    """y = (1/N) sum_i x_i over axis;  dL/dx_i = g / N"""

    @staticmethod
    def forward(ctx, x, axis, keepdims=False):
        ctx.shape, ctx.axis, ctx.keepdims = x.shape, axis, keepdims
        ctx.n = int(np.prod([x.shape[a] for a in axis]))
        return x.mean(axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        return spread(grad / ctx.n, ctx.shape, ctx.axis, ctx.keepdims)


class Var(Function):
    """Variance with `ddof` degrees of freedom taken off:  y = 1/(N - ddof) sum_i (x_i - mean)^2
    (ddof=0 is the population variance, numpy's default; ddof=1 the unbiased estimate, PyTorch's)

    dL/dx_i = g * 2 (x_i - mean) / (N - ddof)   (the mean's own dependence on x_i sums to zero)

    Written with primitive ops: composed.var.
    """

    @staticmethod
    def forward(ctx, x, axis, keepdims=False, ddof=0):
        centered = x - x.mean(axis=axis, keepdims=True)
        ctx.save_for_backward(centered)
        ctx.axis, ctx.keepdims = axis, keepdims
        ctx.n = int(np.prod([x.shape[a] for a in axis])) - ddof
        return (centered * centered).sum(axis=axis, keepdims=keepdims) / ctx.n

    @staticmethod
    def backward(ctx, grad):
        (centered,) = ctx.saved_tensors
        return spread(grad, centered.shape, ctx.axis, ctx.keepdims) * (2 / ctx.n) * centered


class _Extreme(Function):
    """max or min over axis (`pick` is np.max or np.min).

    Backward: g flows to the elements equal to the result, split evenly among ties (as numpy's amax
    and PyTorch's amax), so the gradient is the same whichever tied element a forward would pick.
    """

    pick = None

    @staticmethod
    def forward(ctx, x, axis, keepdims=False):
        y = ctx.pick(x, axis=axis, keepdims=keepdims)  # ctx is the Max or Min node itself
        ctx.save_for_backward(x, y)
        ctx.axis, ctx.keepdims = axis, keepdims
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        hit = x == spread(y, x.shape, ctx.axis, ctx.keepdims)
        count = hit.sum(axis=ctx.axis, keepdims=True)
        return spread(grad, x.shape, ctx.axis, ctx.keepdims) * hit / count


class Max(_Extreme):
    """y = max_i x_i over axis;  dL/dx_i = g [x_i = y] / #ties"""

    pick = staticmethod(np.max)


class Min(_Extreme):
    """y = min_i x_i over axis;  dL/dx_i = g [x_i = y] / #ties"""

    pick = staticmethod(np.min)


def logsumexp(x, axis):
    """log sum_i exp(x_i) with keepdims, stable: m + log sum_i exp(x_i - m), m = max_i x_i.

    Subtracting m makes the largest exponent exp(0) = 1, so nothing overflows; an axis that is all
    -inf (m = -inf) uses m = 0 instead of computing -inf - -inf = nan, and gives -inf.
    """
    m = x.max(axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):  # log(0) = -inf is the right answer for an all -inf axis
        return m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


class LogSumExp(Function):
    """y = log sum_i exp(x_i) over axis;  dL/dx_i = g exp(x_i - y) = g softmax(x)_i

    Written with primitive ops: composed.logsumexp.
    """

    @staticmethod
    def forward(ctx, x, axis, keepdims=False):
        y = logsumexp(x, axis)
        ctx.save_for_backward(x, y)
        ctx.axis, ctx.keepdims = axis, keepdims
        return y if keepdims else np.squeeze(y, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return spread(grad, x.shape, ctx.axis, ctx.keepdims) * np.exp(x - y)
