"""softmax and log_softmax along one axis, fused: one op each, with the backward derived by hand."""

import numpy as np

from gradflow.engine.autograd import Function
from gradflow.engine.ops.reduce import logsumexp


class Softmax(Function):
    """y_i = exp(x_i - m) / sum_j exp(x_j - m),  m = max_j x_j (same value, no overflow)

    dy_i/dx_j = y_i ([i = j] - y_j), so  dL/dx_i = sum_j g_j y_j ([i = j] - y_i) = y_i (g_i - sum_j g_j y_j)

    Written with primitive ops: composed.softmax.
    """

    @staticmethod
    def forward(ctx, x, axis):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        y = e / e.sum(axis=axis, keepdims=True)
        ctx.save_for_backward(y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(axis=ctx.axis, keepdims=True))


class LogSoftmax(Function):
    """y_i = x_i - logsumexp(x)

    dy_i/dx_j = [i = j] - softmax(x)_j, so  dL/dx_j = g_j - softmax(x)_j sum_i g_i,  softmax(x) = exp(y)

    Written with primitive ops: composed.log_softmax.
    """

    @staticmethod
    def forward(ctx, x, axis):
        y = x - logsumexp(x, axis)
        ctx.save_for_backward(y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad - np.exp(y) * grad.sum(axis=ctx.axis, keepdims=True)
