"""Ops that select: indexing and its out-of-place assignment (index_put), embedding (a lookup of rows),
gather and scatter_add (picking and adding along one axis), masked_fill and where."""

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


class IndexPut(Function):
    """y = x with y[index] = v: the assignment x[index] = v written out of place (the op an in-place
    assignment records in the graph, engine/inplace.py)

    dL/dx = g with zeros at the assigned places (x's old values there no longer reach y);
    dL/dv = g[index] (summed over the axes along which v was broadcast). An integer array naming an
    element twice keeps the last value written there, as numpy does, and PyTorch's index_put_.
    """

    @staticmethod
    def forward(ctx, x, v, index):
        ctx.index = index
        y = x.copy()
        y[index] = v
        return y

    @staticmethod
    def backward(ctx, grad):
        dx = grad.copy()
        dx[ctx.index] = 0
        return dx, grad[ctx.index]


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


def along(index, axis):
    """The numpy index that reads place (i, j, k) of `index` as x[i, index[i, j, k], k] for axis 1: `index`
    on `axis`, and on every other axis the position itself (an open grid of index's shape)."""
    grid = list(np.ogrid[tuple(slice(n) for n in index.shape)])
    grid[axis] = index
    return tuple(grid)


class Gather(Function):
    """y[i, j, k] = x[i, index[i, j, k], k] for axis 1 (any axis alike); y has index's shape (index is a constant)

    x's element at a place reaches y once for every time index names it, so  dL/dx = zeros with each g
    added at the place it was read from (np.add.at adds at a place named twice, as in Index).
    """

    @staticmethod
    def forward(ctx, x, index, axis):
        ctx.shape, ctx.at = x.shape, along(index, axis)
        return x[ctx.at]

    @staticmethod
    def backward(ctx, grad):
        dx = np.zeros(ctx.shape, dtype=grad.dtype)
        np.add.at(dx, ctx.at, grad)
        return dx


class ScatterAdd(Function):
    """y = x, then y[i, index[i, j, k], k] += src[i, j, k] for axis 1 (any axis alike; index is a constant)

    y = x + (src added at the places index names), so  dL/dx = g,  and  dL/dsrc[i, j, k] = g at the place
    src[i, j, k] was added to: g gathered with the same index. src may be larger than index (as in
    PyTorch): only its leading block of index's shape is added, and the rest gets a zero gradient.
    """

    @staticmethod
    def forward(ctx, x, src, index, axis):
        ctx.at, ctx.src_shape = along(index, axis), src.shape
        ctx.block = tuple(slice(n) for n in index.shape)
        y = x.copy()
        np.add.at(y, ctx.at, src[ctx.block])
        return y

    @staticmethod
    def backward(ctx, grad):
        dsrc = np.zeros(ctx.src_shape, dtype=grad.dtype)
        dsrc[ctx.block] = grad[ctx.at]
        return grad, dsrc


class MaskedFill(Function):
    """y = value where mask else x;  dL/dx = g where not mask (filled places no longer depend on x)"""

    @staticmethod
    def forward(ctx, x, mask, value):
        ctx.mask = mask
        return np.where(mask, np.asarray(value).astype(x.dtype), x)  # x's dtype, as PyTorch: a bool stays bool

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
