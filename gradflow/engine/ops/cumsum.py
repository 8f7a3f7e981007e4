"""The running sum along an axis, and its backward: the running sum of the gradient taken backwards."""

import numpy as np

from gradflow.engine.autograd import Function


class Cumsum(Function):
    """y_i = x_0 + x_1 + ... + x_i along axis

    x_j appears in every y_i with i >= j, so  dL/dx_j = g_j + g_(j+1) + ... + g_(n-1):
    the running sum of g from the far end, which is a cumsum of g reversed, reversed back.
    """

    @staticmethod
    def forward(ctx, x, axis):
        ctx.axis = axis
        return np.cumsum(x, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        reversed_grad = np.flip(grad, ctx.axis)
        return np.flip(np.cumsum(reversed_grad, axis=ctx.axis), ctx.axis)
