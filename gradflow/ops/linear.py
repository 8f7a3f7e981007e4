"""A linear layer's map as one op: y = x W^T + b, with x: (..., in), W: (out, in), b: (out,)."""

from ..autograd import Function
from .matmul import mm


class Linear(Function):
    """y = x W^T + b

    dL/dx = G W                       (..., out) @ (out, in)
    dL/dW = G^T x                     every row of every batch at once: (out, rows) @ (rows, in)
    dL/db = sum of G over the rows

    The same numbers as x @ W.T + b, in one op instead of three (transpose, matmul, add): where
    a matrix is small, as in decoding one token at a time, the engine's bookkeeping per op costs
    as much as the product itself.
    """

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        y = mm(x, w.T)
        if b is not None:
            y += b
        return y

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])  # (rows, out)
        dx = mm(grad, w) if ctx.needs_input_grad[0] else None
        dw = g.T @ x.reshape(-1, x.shape[-1]) if ctx.needs_input_grad[1] else None
        db = g.sum(axis=0) if ctx.needs_input_grad[2] else None
        return dx, dw, db
