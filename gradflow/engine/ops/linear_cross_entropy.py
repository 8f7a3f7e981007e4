"""A language model's head and its loss as one op: cross-entropy of x W^T + b, a few rows at a time."""

import numpy as np

from gradflow.engine.autograd import Function

CHUNK = 2**22  # logits formed at once, at most: 16 MB in float32 (85 rows of SmolLM2's 49,152 classes)


class LinearCrossEntropy(Function):
    """L = reduce over n of  loss_n = logsumexp(z_n) - z_n[t_n],   z_n = W x_n + b   (x: (N, in), W: (C, in))

    With p_n = softmax(z_n) and w_n the weight of row n (valid_n / count for "mean", valid_n for
    "sum"; 0 for a row whose target is `ignore_index`), cross-entropy's gradient and the linear
    map's give

      D_n = w_n (p_n - onehot(t_n))          dL/dz_n, per unit of upstream gradient g
      dL/dx_n = g D_n W,   dL/dW = g sum_n D_n^T x_n,   dL/db = g sum_n D_n

    The same numbers as cross_entropy(linear(x, W, b), t), without its (N, C) arrays: a language
    model's logits, their softmax and their gradient are N x vocabulary numbers each (114 MB each
    for 8 rows of 76 tokens over SmolLM2's 49,152 tokens, in float32), while the loss needs one
    number per row and the gradients are the size of x and W. So forward takes the rows a chunk
    at a time (at most CHUNK logits), and for each chunk computes z, p, the losses and, while p is
    there, D's products with W and x; backward only multiplies them by g. The upstream gradient
    of a "mean" or "sum" loss is one number, which is what lets D W be formed before g is known
    (a "none" loss, one g per row, is cross_entropy's). The idea is that of "Cut Your Losses in
    Large-Vocabulary Language Models" (Wijmans et al., 2024): the full logits never exist.

    Written with primitive ops: composed.linear_cross_entropy.
    """

    @staticmethod
    def forward(ctx, x, w, b, targets, ignore_index=None, reduction="mean"):
        valid = np.ones(targets.shape, dtype=bool) if ignore_index is None else targets != ignore_index
        t = np.where(valid, targets, 0)  # ignored rows pick any class; their weight is 0
        count = int(valid.sum())
        weight = valid / max(count, 1) if reduction == "mean" else valid * 1.0
        wants = ctx.needs_input_grad if ctx.recording else (False, False, False)
        losses = np.zeros(len(t), dtype=x.dtype)
        dx = np.zeros_like(x) if wants[0] else None
        dw = np.zeros_like(w) if wants[1] else None
        db = np.zeros_like(b) if wants[2] else None
        step = max(1, CHUNK // len(w))
        for start in range(0, len(t), step):
            rows = slice(start, start + step)
            xr, tr, picked = x[rows], t[rows], np.arange(len(t[rows]))
            z = xr @ w.T if b is None else xr @ w.T + b  # (rows, C)
            m = z.max(axis=1, keepdims=True)
            e = np.exp(z - m)
            s = e.sum(axis=1, keepdims=True)
            losses[rows] = np.where(valid[rows], (m + np.log(s))[:, 0] - z[picked, tr], 0)
            if dx is None and dw is None and db is None:
                continue
            d = e / s  # p
            d[picked, tr] -= 1
            d = d * weight[rows, None].astype(x.dtype)
            if dx is not None:  # d @ w, computed as (w^T d^T)^T: OpenBLAS multiplies a few rows of 49,152
                dx[rows] = (w.T @ d.T).T  # by W 5 to 20 times slower in that order (measured, 2 cores)
            if dw is not None:
                dw += d.T @ xr
            if db is not None:
                db += d.sum(axis=0)
        ctx.save_for_backward(dx, dw, db)
        if reduction == "sum":
            return losses.sum()
        return losses.sum() / count if count else np.array(np.nan, dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return tuple(None if d is None else d * grad for d in ctx.saved_tensors)
