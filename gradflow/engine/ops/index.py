"""Ops that select: indexing, embedding (a lookup of rows), masked_fill and where."""

import numpy as np

from gradflow.engine.autograd import Function


def has_array(index):
    return any(isinstance(i, np.ndarray) for i in index)


class Index(Function):
    """y = x[index] (basic and integer-array indexing)

    dL/dx = zeros with g added at the selected places. An integer array may select the same element
    twice: that element was used twice, so its gradient is the sum of both, which np.add.at
    accumulates where plain assignment would keep only one.
    """

    @staticmethod
    def forward(ctx, x, index):
        ctx.shape, ctx.index = x.shape, index
        if not has_array(index) and not any(i is Ellipsis for i in index):
            index += (Ellipsis,)  # x[0] of a vector: a 0-d view of x's memory (as PyTorch's), not a copied scalar
        return x[index]

    @staticmethod
    def backward(ctx, grad):
        dx = np.zeros(ctx.shape, dtype=grad.dtype)
        if has_array(ctx.index):
            np.add.at(dx, ctx.index, grad)
        else:  # basic indexing selects each element at most once
            dx[ctx.index] = grad
        return dx


class Embedding(Function):
    """y[..., :] = W[ids[...], :]: row ids[n] of W is copied to place n (ids are constants)

    Row W_i reaches every place n where ids[n] = i, so  dL/dW_i = sum of g_n over those places:
    a token used twice gets both gradients (np.add.at adds at repeated ids, where dW[ids] = g
    would keep the last one), and a token not used gets zeros.

    Written with primitive ops: composed.embedding.
    """

    @staticmethod
    def forward(ctx, w, ids):
        ctx.shape, ctx.ids = w.shape, ids
        return w[ids]

    @staticmethod
    def backward(ctx, grad):
        dw = np.zeros(ctx.shape, dtype=grad.dtype)
        np.add.at(dw, ctx.ids, grad)
        return dw


class MaskedFill(Function):
    """y = value where mask else x;  dL/dx = g where not mask (filled places no longer depend on x)"""

    @staticmethod
    def forward(ctx, x, mask, value):
        ctx.mask = mask
        return np.where(mask, value, x)

    @staticmethod
    def backward(ctx, grad):
        return np.where(ctx.mask, 0, grad)


class Where(Function):
    """z = a where cond else b;  dL/da = g where cond,  dL/db = g where not cond"""

    @staticmethod
    def forward(ctx, a, b, cond):
        ctx.cond = cond
        return np.where(cond, a, b)

    @staticmethod
    def backward(ctx, grad):
        return np.where(ctx.cond, grad, 0), np.where(ctx.cond, 0, grad)
