"""Matrix multiplication, numpy's `@` semantics: 1-D, 2-D and batched N-D with broadcast batches."""

import numpy as np

from gradflow.engine.autograd import Function


class Matmul(Function):
    """C = A @ B,  C_ij = sum_k A_ik B_kj;  dL/dA = G @ B^T,  dL/dB = A^T @ G

    (dC_ij / dA_ik = B_kj, so dL/dA_ik = sum_j G_ij B_kj; the same for B.) A 1-D A is a row (1, k)
    and a 1-D B a column (k, 1); that axis is removed from C, so it is put back into G first. Batch
    axes broadcast like elementwise ops, and the engine sums the gradient over the copies.
    """

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g = grad.reshape(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]) + (a2.shape[-2], b2.shape[-1]))
        da = db = None
        if ctx.needs_input_grad[0]:
            da = g @ np.swapaxes(b2, -1, -2)
            da = da[..., 0, :] if a.ndim == 1 else da
        if ctx.needs_input_grad[1]:
            db = np.swapaxes(a2, -1, -2) @ g
            db = db[..., 0] if b.ndim == 1 else db
        return da, db
