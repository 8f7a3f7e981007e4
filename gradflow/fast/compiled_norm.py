"""LayerNorm and RMSNorm as compiled loops over rows: replace ops.LayerNorm and ops.RMSNorm
(gradflow/engine/ops/norm.py), same formulas.

What changes: forward and the backward for x run as compiled loops (gradflow/fast/loops.py), one
row of D values at a time: a row's mean, variance, xhat and y (and in backward gh, its two means
and dx) are made in a few passes over that row while it sits in the cache, instead of numpy's
passes over the whole array, each making or reading an array of x's size. The rows run on one
core: at the baby GPT's size a row takes about 0.1 microsecond, less than waking numba's threads
(tens of microseconds on a busy machine), so sharing them out was measured slower.
dw and db are sums over rows, added up in float64 in the backward loop while each row is at hand
(the numpy kernel, norm.py, reads grad and xhat again for them).
Where numba is absent, or the arrays are not float32 or float64 all of one kind, or w and b are
not of shape (D,), the numpy kernel (norm.LayerNorm) runs.

Measured (benchmarks/kernels.py, float32, 2 cores of an AMD EPYC): forward and backward of the
baby GPT's (12, 64, 128) activations take 0.116 ms instead of the numpy kernel's 0.231 and the
plain op's 0.342 (0.130 to 0.134 before dw and db joined the loop); a training step is 1.12 times
as long with the plain op. Earlier, on a shared 2-core machine: 0.19 to 0.25 ms against the numpy
kernel's 0.37 to 0.74.

RMSNorm runs the same way (loops.rms_norm_forward, rms_norm_backward: LayerNorm's loops without the
mean and the bias). Where the loops do not run, the plain op runs: numba comes with gradflow wherever
it has a wheel, and a numpy kernel of its own would be one more to prove and keep for the few without.
Measured (benchmarks/kernels.py --alone RMSNorm, float32, 2-core AMD EPYC, AVX2, medians of four runs of
15 to 21 alternating rounds): forward and backward of SmolLM2-135M's (8, 78, 576) activations with a frozen
weight, as in its LoRA step (61 calls), take 0.45 ms with the loops against the plain op's 1.23 (2.55 to
2.69 times as fast), about 0.05 s of the step.
"""

import numpy as np

from gradflow.engine import ops
from gradflow.fast import compiled, norm


def fits(x, *params):
    """True when the loops take these arrays: x of float32 or float64 with a last axis of D > 0,
    and each parameter None or a (D,) array of x's dtype."""
    if x.dtype not in compiled.KINDS or x.ndim == 0 or x.size == 0:
        return False
    return all(p is None or (p.dtype == x.dtype and p.shape == x.shape[-1:]) for p in params)


def forward_in_rows(ctx, loop, x, w, *args):
    """y, from loop(rows, w, *args, y, xhat, r): x as a row-major (rows, D) matrix, w (ones where there is
    none: xhat * 1 is xhat exactly), and the y, xhat (rows, D) and r (rows,) the loop fills; xhat, r and w
    saved as the plain op saves them."""
    rows = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    y, xhat, r = np.empty_like(rows), np.empty_like(rows), np.empty(len(rows), x.dtype)
    loop(rows, np.ones(x.shape[-1], x.dtype) if w is None else w, *args, y, xhat, r)
    ctx.save_for_backward(xhat.reshape(x.shape), r.reshape(x.shape[:-1] + (1,)), w)
    return y.reshape(x.shape)


def saved_rows(ctx, grad):
    """The backward loop's operands as rows: xhat (rows, D) and r (rows,) as forward saved them, g (rows, D),
    an empty dx, and w (ones where there is none: gh = g * 1 is g exactly)."""
    xhat, r, w = ctx.saved_tensors
    d = xhat.shape[-1]
    g = np.ascontiguousarray(grad).reshape(-1, d)
    return xhat.reshape(-1, d), r.reshape(-1), g, np.empty_like(g), np.ones(d, g.dtype) if w is None else w


class LayerNorm(norm.LayerNorm):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last axis, as ops.LayerNorm; a loop over rows."""

    @staticmethod
    def forward(ctx, x, w, b, eps=1e-5):
        loops = compiled.loops()
        ctx.rows = loops is not None and fits(x, w, b)
        if not ctx.rows:
            return norm.LayerNorm.forward(ctx, x, w, b, eps)
        b = np.zeros(x.shape[-1], x.dtype) if b is None else b  # xhat w + 0 is xhat w exactly
        return forward_in_rows(ctx, loops.layer_norm_forward, x, w, b, eps)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.rows or grad.dtype != ctx.saved_tensors[0].dtype:
            return norm.LayerNorm.backward(ctx, grad)
        xhat, r, g, dx, ones_or_w = saved_rows(ctx, grad)
        d, (want_dw, want_db) = g.shape[1], ctx.needs_input_grad[1:3]
        dw, db = np.zeros(d if want_dw else 0), np.zeros(d if want_db else 0)  # float64 sums; empty: not wanted
        compiled.loops().layer_norm_backward(g, xhat, r, ones_or_w, dx, dw, db)
        return dx.reshape(grad.shape), dw.astype(g.dtype) if want_dw else None, db.astype(g.dtype) if want_db else None


class RMSNorm(ops.RMSNorm):
    """y = x / sqrt(mean(x^2) + eps) * w over the last axis, as ops.RMSNorm; a loop over rows."""

    @staticmethod
    def forward(ctx, x, w, eps=1e-6):
        loops = compiled.loops()
        ctx.rows = loops is not None and fits(x, w)
        if not ctx.rows:
            return ops.RMSNorm.forward(ctx, x, w, eps)
        return forward_in_rows(ctx, loops.rms_norm_forward, x, w, eps)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.rows or grad.dtype != ctx.saved_tensors[0].dtype:
            return ops.RMSNorm.backward(ctx, grad)
        xhat, r, g, dx, ones_or_w = saved_rows(ctx, grad)
        want_dw = ctx.needs_input_grad[1]
        dw = np.zeros(g.shape[1] if want_dw else 0)  # float64 sums; empty: not wanted
        compiled.loops().rms_norm_backward(g, xhat, r, ones_or_w, dx, dw)
        return dx.reshape(grad.shape), dw.astype(g.dtype) if want_dw else None
