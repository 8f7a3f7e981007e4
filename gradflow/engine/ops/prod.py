"""The product of the elements over axes, and its backward: the product of all the others."""

import math

import numpy as np

from gradflow.engine.autograd import Function


def _product_of_the_others(x):
    """p_i = prod_(j != i) x_j along the last axis, as (x_0 ... x_(i-1)) (x_(i+1) ... x_(n-1)): the
    running product from the left, shifted by one, times the running product from the right, shifted
    by one. No division by x_i, so a zero in x gives the right answer (the product of the others)."""
    one = np.ones_like(x[..., :1])
    before = np.cumprod(np.concatenate([one, x[..., :-1]], axis=-1), axis=-1)  # x_0 ... x_(i-1)
    after = np.cumprod(np.concatenate([one, x[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]  # x_(i+1) ... x_(n-1)
    return before * after


class Prod(Function):
    """y = prod_i x_i over axis (a tuple of axes)

    dL/dx_i = g prod_(j != i) x_j: y changes with x_i by the product of the other factors. Computed
    without dividing y by x_i (which fails where x_i = 0): the reduced axes are moved last and taken
    as one, and _product_of_the_others runs along it.
    """

    @staticmethod
    def forward(ctx, x, axis, keepdims=False):
        ctx.save_for_backward(x)
        ctx.axis, ctx.keepdims = axis, keepdims
        return np.prod(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        kept = [a for a in range(x.ndim) if a not in ctx.axis]
        order = kept + list(ctx.axis)
        moved = np.transpose(x, order)
        factors = moved.reshape(moved.shape[: len(kept)] + (math.prod(moved.shape[len(kept) :]),))
        others = _product_of_the_others(factors).reshape(moved.shape).transpose(np.argsort(order))
        if not ctx.keepdims:
            grad = np.expand_dims(grad, ctx.axis)
        return grad * others
