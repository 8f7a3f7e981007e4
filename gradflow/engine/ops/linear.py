"""A linear layer's map as one op: y = x W^T + b, with x: (..., in), W: (out, in), b: (out,)."""

from gradflow.engine.autograd import Function


class Linear(Function):
    """Y = X W^T + b, with X the rows of x stacked into one (rows, in) matrix: y_ro = sum_i x_ri W_oi + b_o

    dL/dX = G W                       (rows, out) @ (out, in)
    dL/dW = G^T X                     (out, rows) @ (rows, in): each row's g_r^T x_r, summed
    dL/db = sum of G over the rows

    Every row of every batch goes through the same map, so the rows are one matrix: one product
    for the whole batch. The same numbers as x @ W.T + b, in one op instead of three (transpose,
    matmul, add): where a matrix is small, as in decoding one token at a time, the engine's
    bookkeeping per op costs as much as the product itself.

    Written with primitive ops: composed.linear.
    """

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        y = x.reshape(-1, x.shape[-1]) @ w.T  # (rows, out)
        if b is not None:
            y = y + b
        return y.reshape(x.shape[:-1] + w.shape[:1])

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        g, rows = grad.reshape(-1, grad.shape[-1]), x.reshape(-1, x.shape[-1])
        dx = (g @ w).reshape(x.shape) if ctx.needs_input_grad[0] else None
        dw = g.T @ rows if ctx.needs_input_grad[1] else None
        db = g.sum(axis=0) if ctx.needs_input_grad[2] else None
        return dx, dw, db
