"""Cross-entropy's softmax as compiled loops over rows: replaces ops.CrossEntropy (gradflow/engine/ops/loss.py).

What changes: the plain forward makes logsumexp in numpy's passes over the whole (N, C) logits (max,
subtract, exp, sum, log) and then p = exp(z - lse) in two more, each pass allocating an array of
the logits' size; here one loop (gradflow/fast/loops.py) takes a row at a time while it sits in
the cache: its max, exp(z - max) with the loops' own exp (which vectorizes), the sum, and p = e /
sum. lse and p are the plain op's up to rounding (a few ulps: the sum's order, p as e / sum rather
than exp(z - lse), the loops' exp). The backward, dz = (p - onehot(t)) w, is one loop in the plain
op's order of operations: its numbers are the plain backward's, to the last bit, for the same p.
Where numba is absent, or the logits are not float32 or float64, the plain op runs.

Measured (benchmarks/kernels.py --alone CrossEntropy: F.cross_entropy's forward and backward on the
baby GPT's (768, 65) float32 logits, 15 alternating rounds on a 2-core machine under heavy load, one
BLAS thread): 2.8 times as fast as the plain op (0.65 against 1.61 ms per call, F.cross_entropy's
checks included; 2.1 times in an earlier run with two BLAS threads).
Inside the baby GPT's training step (kernels.py --skip-alone --each adam_steps,CrossEntropy --parts,
30 alternating rounds, one BLAS thread, the same machine): the op's forward and backward 0.32 against
1.17 ms (two equal variants 1.005 apart), under 1% of the 237 ms step, whose ratio (1.004) is within
how far two equal variants came apart (1.021; 1 to 3% over runs).
"""

import numpy as np

from gradflow.engine import ops
from gradflow.engine.ops.loss import reduced
from gradflow.fast import compiled


class CrossEntropy(ops.CrossEntropy):
    """loss_n = logsumexp(z_n) - z_n[t_n], as ops.CrossEntropy; its softmax one loop over rows."""

    @staticmethod
    def forward(ctx, z, targets, ignore_index=None, reduction="mean"):
        loops = compiled.loops_for(z.dtype)
        ctx.rows = loops is not None and z.ndim == 2
        if not ctx.rows:
            return ops.CrossEntropy.forward(ctx, z, targets, ignore_index, reduction)
        valid = np.ones(targets.shape, dtype=bool) if ignore_index is None else targets != ignore_index
        t = np.where(valid, targets, 0).astype(np.int64)  # ignored rows pick class 0; their loss is zeroed
        logits = np.ascontiguousarray(z)
        p, lse = np.empty_like(logits), np.empty(len(t), z.dtype)
        loops.cross_entropy_softmax(logits, p, lse)
        ctx.save_for_backward(p, t, valid)
        ctx.reduction, ctx.count = reduction, int(valid.sum())
        return reduced(np.where(valid, lse - z[np.arange(len(t)), t], 0), reduction, ctx.count)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.rows:
            return ops.CrossEntropy.backward(ctx, grad)
        p, t, valid = ctx.saved_tensors
        weight = valid * (grad / max(ctx.count, 1) if ctx.reduction == "mean" else grad)  # one per row
        if weight.dtype != p.dtype:  # numpy would give dz in the wider kind
            return ops.CrossEntropy.backward(ctx, grad)
        dz = np.empty_like(p)
        compiled.loops().cross_entropy_backward(p, t, np.ascontiguousarray(weight), dz)
        return dz
