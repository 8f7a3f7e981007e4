"""Cross-entropy of logits against integer targets, fused."""

import numpy as np

from gradflow.engine.autograd import Function
from gradflow.engine.ops.reduce import logsumexp


class CrossEntropy(Function):
    """loss_n = -log softmax(z_n)[t_n] = logsumexp(z_n) - z_n[t_n]   (z: (N, C) logits, t: (N,) ids)

    d loss_n / d z_nc = softmax(z_n)_c - [c = t_n]: the predicted probabilities minus the one-hot
    target. Rows whose target is `ignore_index` contribute neither loss nor gradient; "mean"
    divides by the number of rows that count (NaN if none does, as PyTorch).

    Written with primitive ops: composed.cross_entropy.
    """

    @staticmethod
    def forward(ctx, z, targets, ignore_index=None, reduction="mean"):
        valid = np.ones(targets.shape, dtype=bool) if ignore_index is None else targets != ignore_index
        t = np.where(valid, targets, 0)  # ignored rows pick any class; their loss is zeroed below
        rows = np.arange(len(t))
        lse = logsumexp(z, axis=1)
        losses = np.where(valid, lse[:, 0] - z[rows, t], 0)
        ctx.save_for_backward(np.exp(z - lse), t, valid)
        ctx.reduction = reduction
        ctx.count = int(valid.sum())
        return reduced(losses, reduction, ctx.count)

    @staticmethod
    def backward(ctx, grad):
        p, t, valid = ctx.saved_tensors
        if ctx.reduction == "mean":  # with no row counted there is nothing to differentiate: zeros
            weight = valid * (grad / max(ctx.count, 1))
        else:  # "sum" gives a scalar g for every row, "none" one g per row
            weight = valid * grad
        dz = p.copy()
        dz[np.arange(len(t)), t] -= 1
        return dz * weight[:, None]


def reduced(losses, reduction, count):
    """The rows' losses as `reduction` asks: "none" each, "sum", or "mean" over the `count` rows that
    count (NaN if none does, as PyTorch)."""
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / count if count else np.array(np.nan, dtype=losses.dtype)
