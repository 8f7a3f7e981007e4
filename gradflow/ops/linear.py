"""A linear layer's map as one op: y = x W^T + b, with x: (..., in), W: (out, in), b: (out,)."""

from ..autograd import Function


class Linear(Function):
    """y = x W^T + b,   y_ro = sum_i x_ri W_oi + b_o for every row r of x

    dL/dx = G W                       (..., out) @ (out, in)
    dL/dW = sum over rows r of g_r^T x_r = G^T X, with the rows of every batch stacked:
                                      (out, rows) @ (rows, in)
    dL/db = sum of G over the rows

    The same numbers as x @ W.T + b, in one op instead of three (transpose, matmul, add): where
    a matrix is small, as in decoding one token at a time, the engine's bookkeeping per op costs
    as much as the product itself.
    """

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        y = x @ w.T
        return y if b is None else y + b

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        g_rows, x_rows = grad.reshape(-1, grad.shape[-1]), x.reshape(-1, x.shape[-1])
        dx = grad @ w if ctx.needs_input_grad[0] else None
        dw = g_rows.T @ x_rows if ctx.needs_input_grad[1] else None
        db = g_rows.sum(axis=0) if ctx.needs_input_grad[2] else None
        return dx, dw, db
