"""LayerNorm as compiled loops over rows: replaces ops.LayerNorm (gradflow/engine/ops/norm.py), same formulas.

What changes: forward and the backward for x run as compiled loops (gradflow/fast/loops.py), one
row of D values at a time: a row's mean, variance, xhat and y (and in backward gh, its two means
and dx) are made in a few passes over that row while it sits in the cache, instead of numpy's
passes over the whole array, each making or reading an array of x's size. The rows run on one
core: at the baby GPT's size a row takes about 0.1 microsecond, less than waking numba's threads
(tens of microseconds on a busy machine), so sharing them out was measured slower.
dw and db are sums over rows: einsum and sum, as the numpy kernel (norm.py).
Where numba is absent, or the arrays are not float32 or float64 all of one kind, or w and b are
not of shape (D,), the numpy kernel (norm.LayerNorm) runs.

Measured (benchmarks/kernels.py, float32, a shared 2-core machine): forward and backward of the
baby GPT's (12, 64, 128) activations take 0.19 to 0.25 ms instead of the numpy kernel's 0.37 to
0.74 (1.6 to 1.8 times faster over runs, 2.7 to 3.5 times the plain op).
"""

import numpy as np

from gradflow.fast import compiled, norm


def fits(x, *params):
    """True when the loops take these arrays: x of float32 or float64 with a last axis of D > 0,
    and each parameter None or a (D,) array of x's dtype."""
    if x.dtype not in (np.float32, np.float64) or x.ndim == 0 or x.size == 0:
        return False
    return all(p is None or (p.dtype == x.dtype and p.shape == x.shape[-1:]) for p in params)


class LayerNorm(norm.LayerNorm):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last axis, as ops.LayerNorm; a loop over rows."""

    @staticmethod
    def forward(ctx, x, w, b, eps=1e-5):
        loops = compiled.loops()
        ctx.rows = loops is not None and fits(x, w, b)
        if not ctx.rows:
            return norm.LayerNorm.forward(ctx, x, w, b, eps)
        d = x.shape[-1]
        rows = np.ascontiguousarray(x).reshape(-1, d)
        y, xhat, r = np.empty_like(rows), np.empty_like(rows), np.empty(len(rows), x.dtype)
        ones_or_w = np.ones(d, x.dtype) if w is None else w  # xhat * 1 + 0 is xhat exactly
        loops.layer_norm_forward(rows, ones_or_w, np.zeros(d, x.dtype) if b is None else b, eps, y, xhat, r)
        ctx.save_for_backward(xhat.reshape(x.shape), r.reshape(x.shape[:-1] + (1,)), w)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.rows or grad.dtype != ctx.saved_tensors[0].dtype:
            return norm.LayerNorm.backward(ctx, grad)
        xhat, r, w = ctx.saved_tensors
        d = xhat.shape[-1]
        g = np.ascontiguousarray(grad).reshape(-1, d)
        dx = np.empty_like(g)
        ones_or_w = np.ones(d, g.dtype) if w is None else w
        compiled.loops().layer_norm_backward(g, xhat.reshape(-1, d), r.reshape(-1), ones_or_w, dx)
        dw = norm.column_sum_of_product(grad, xhat) if ctx.needs_input_grad[1] else None
        db = grad.sum(axis=tuple(range(grad.ndim - 1))) if ctx.needs_input_grad[2] else None
        return dx.reshape(grad.shape), dw, db
