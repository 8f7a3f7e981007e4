"""Matrix multiplication, numpy's `@` semantics: 1-D, 2-D and batched N-D with broadcast batches."""

import numpy as np

from ..autograd import Function


def mm(a, b):
    """a @ b, computed as one 2-D product when b is a matrix: (..., k) @ (k, n) is (rows, k) @ (k, n).

    Same numbers as a @ b; but numpy runs a batched product as a loop of small single-threaded
    products, while one tall 2-D product goes to BLAS whole, on every core.
    """
    if b.ndim == 2 and a.ndim > 2:
        return (a.reshape(-1, a.shape[-1]) @ b).reshape(a.shape[:-1] + (b.shape[-1],))
    return a @ b


class Matmul(Function):
    """C = A @ B,  C_ij = sum_k A_ik B_kj;  dL/dA = G @ B^T,  dL/dB = A^T @ G

    A 1-D A is a row (1, k) and a 1-D B a column (k, 1); that axis is removed from C, so it is put
    back into G first. Batch axes broadcast like elementwise ops, and the engine sums them away.
    """

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return mm(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g = grad.reshape(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]) + (a2.shape[-2], b2.shape[-1]))
        da = db = None
        if ctx.needs_input_grad[0]:
            da = mm(g, np.swapaxes(b2, -1, -2))
            da = da.reshape(da.shape[:-2] + (da.shape[-1],)) if a.ndim == 1 else da
        if ctx.needs_input_grad[1]:
            if b.ndim == 2:
                # dB = sum over every row of every batch of a_row^T g_row: one 2-D product
                a_rows, g_rows = a2.reshape(-1, a2.shape[-1]), g.reshape(-1, g.shape[-1])
                if b.flags.f_contiguous and not b.flags.c_contiguous:
                    # B is a transposed view (x @ W.T): compute dB^T = G^T A, so that dB is laid out
                    # like B and W's gradient arrives in W's own order, without a transposing copy
                    db = (g_rows.T @ a_rows).T
                else:
                    db = a_rows.T @ g_rows
            else:
                db = np.swapaxes(a2, -1, -2) @ g
            db = db[..., 0] if b.ndim == 1 else db
        return da, db
