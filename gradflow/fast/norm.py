"""LayerNorm with einsum row sums and an in-place backward: replaces ops.LayerNorm
(gradflow/engine/ops/norm.py), same formulas.

What changes: the plain op takes each mean with a.mean(axis=-1), and each mean of a product
with (a * b).mean(axis=-1), which first builds the (..., D) product. Here both are one einsum:
its plain loop along a short row (D = 128 in the baby GPT) beats numpy's pairwise sum, and it
forms no temporary for a * b. The centred x becomes xhat in place, and backward builds dL/dx
in the buffer of gh = g * w instead of in four new arrays.

Measured (benchmarks/kernels.py, float32, one BLAS thread, a shared 2-core machine): forward and
backward of the baby GPT's (12, 64, 128) activations take 0.47 ms instead of 0.72 (1.4 to 1.5
times faster over runs), 9 calls a step. In a whole step the gain is at the edge of what that
machine resolves: the step 0.99 to 1.06 times as long with the plain op over five runs, 1.065
with this and the embedding kernel both plain; with both removed, train_char_gpt.py's throughput
ratio to PyTorch fell from 0.81 to 0.75 (medians of five runs), so both stay.
RMSNorm has no numpy kernel here (the baby GPT does not use it, so no step could show one paying):
where compiled_norm.py's loops do not run, it runs the plain op.
"""

import numpy as np

from gradflow.engine.autograd import Function


def row_mean(a):
    """mean over the last axis, keepdims."""
    return np.einsum("...i->...", a)[..., None] / a.shape[-1]


def row_mean_of_product(a, b):
    """mean over the last axis of a * b, keepdims, without building a * b."""
    return np.einsum("...i,...i->...", a, b)[..., None] / a.shape[-1]


def column_sum_of_product(a, b):
    """sum of a * b over every axis but the last (ops.norm's sum_over_rows(a * b))."""
    d = a.shape[-1]
    return np.einsum("ni,ni->i", a.reshape(-1, d), b.reshape(-1, d))


class LayerNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last axis, as ops.LayerNorm."""

    @staticmethod
    def forward(ctx, x, w, b, eps=1e-5):
        xhat = x - row_mean(x)
        r = 1 / np.sqrt(row_mean_of_product(xhat, xhat) + eps)
        xhat *= r  # the centred x becomes xhat in its own buffer
        ctx.save_for_backward(xhat, r, w)
        y = xhat if w is None else xhat * w
        if b is not None:  # in place, unless y is the saved xhat itself
            y = xhat + b if w is None else np.add(y, b, out=y)
        return y

    @staticmethod
    def backward(ctx, grad):
        xhat, r, w = ctx.saved_tensors
        dx = grad * w if w is not None else grad.copy()  # gh, then dx in the same buffer
        path_through_var = xhat * row_mean_of_product(dx, xhat)
        dx -= row_mean(dx)
        dx -= path_through_var
        dx *= r  # r (gh - mean(gh) - xhat mean(gh xhat))
        dw = column_sum_of_product(grad, xhat) if ctx.needs_input_grad[1] else None
        db = grad.sum(axis=tuple(range(grad.ndim - 1))) if ctx.needs_input_grad[2] else None
        return dx, dw, db
