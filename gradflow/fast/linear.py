"""Linear with one 2-D matrix product: replaces ops.Linear (gradflow/ops/linear.py), same formula.

What changes: the plain op writes y = x @ W^T with x of shape (B, T, in), which numpy runs as a
loop of B products of (T, in) @ (in, out), and dL/dx = G @ W likewise. Here x is first viewed as
one (B T, in) matrix, so that each product goes to BLAS whole: one call instead of B, and on
every core BLAS has. The numbers are the same sums.
"""

from ..autograd import Function


def mm(a, b):
    """a @ b for a of shape (..., k) and a matrix b (k, n), as one (rows, k) @ (k, n) product."""
    if a.ndim > 2:
        return (a.reshape(-1, a.shape[-1]) @ b).reshape(a.shape[:-1] + (b.shape[-1],))
    return a @ b


class Linear(Function):
    """y = x W^T + b, as ops.Linear, with its products made 2-D (mm)."""

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
