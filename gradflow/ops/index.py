"""Ops that select: indexing, masked_fill and where."""

import numpy as np

from ..autograd import Function


def has_array(index):
    return any(isinstance(i, np.ndarray) for i in index)


def add_rows(dx, ids, grad):
    """dx[ids[n]] += grad[n] for every n, repeated ids summed (np.add.at(dx, ids, grad)).

    Computed as one sort of the ids and one sum per run of equal ids (np.add.reduceat): np.add.at
    handles every row on its own and is several times slower on an embedding's gradient.
    """
    ids = ids.reshape(-1) % len(dx)  # -1 and len(dx) - 1 name the same row
    if ids.size == 0:
        return
    rows = grad.reshape(ids.size, -1)
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    dx.reshape(len(dx), -1)[ids[starts]] += np.add.reduceat(rows[order], starts, axis=0)


class Index(Function):
    """y = x[index] (basic and integer-array indexing)

    dL/dx = zeros with g added at the selected places. An integer array may select the same element
    twice (an embedding lookup of a repeated token): that element was used twice, so its gradient
    is the sum of both, which np.add.at accumulates where plain assignment would keep only one.
    """

    @staticmethod
    def forward(ctx, x, index):
        ctx.shape, ctx.index = x.shape, index
        return x[index]

    @staticmethod
    def backward(ctx, grad):
        dx = np.zeros(ctx.shape, dtype=grad.dtype)
        if len(ctx.index) == 1 and has_array(ctx.index):  # rows picked by one integer array: an embedding
            add_rows(dx, ctx.index[0], grad)
        elif has_array(ctx.index):
            np.add.at(dx, ctx.index, grad)
        else:  # basic indexing selects each element at most once
            dx[ctx.index] = grad
        return dx


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
