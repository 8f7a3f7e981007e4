"""The classic wrong backwards, computed, so that a learner who wrote one is told which, and the idea it misses.

diagnose.py recognises a mistake from the two arrays alone (a sign, a scale, a lost axis). These
need the op's inputs: each Mistake computes the wrong formula from what forward saved, and a
learner's gradient equal to it is that mistake. One entry per classic error:

    Mul         the operands swapped: dL/da = g * a
    Softmax     only the Jacobian's diagonal, g * y * (1 - y); the sum over the wrong axis
    LayerNorm   mu and r treated as constants (the paths through the mean and the variance left out),
                or one of the two left out
    CrossEntropy  the probabilities alone, the one-hot target not subtracted; the row weights along the classes
    Attention   the softmax's mistakes, met inside attention's backward
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Mistake:
    name: str  # what the learner did, in their terms
    wrong: Callable  # (ctx, grad) -> the wrong gradients: candidates, each a tuple with one entry per input
    hint: str  # the idea the mistake misses


def _mul_swapped(ctx, g):
    a, b = ctx.saved_tensors
    yield g * a, g * b


def _softmax_diagonal(ctx, g):
    (y,) = ctx.saved_tensors
    yield (g * y * (1 - y),)


def _softmax_other_axis(ctx, g):
    (y,) = ctx.saved_tensors
    for axis in set(range(y.ndim)) - {ctx.axis % y.ndim}:
        yield (y * (g - (g * y).sum(axis=axis, keepdims=True)),)


def _layer_norm(mean_path, variance_path):
    def wrong(ctx, g):
        xhat, r, w = ctx.saved_tensors
        gh = g if w is None else g * w
        dx = gh.copy()
        if mean_path:
            dx -= gh.mean(axis=-1, keepdims=True)
        if variance_path:
            dx -= xhat * (gh * xhat).mean(axis=-1, keepdims=True)
        yield r * dx, None, None

    return wrong


def _cross_entropy_without_target(ctx, g):
    p, t, valid = ctx.saved_tensors
    per_row = valid * (g / max(ctx.count, 1) if ctx.reduction == "mean" else g)
    yield (p * per_row[:, None],)


def _cross_entropy_weight_on_columns(ctx, g):
    """the per-row weight multiplied along the classes: (N, C) * (N,) broadcasts (N,) over the columns"""
    p, t, valid = ctx.saved_tensors
    weight = valid * (g / max(ctx.count, 1) if ctx.reduction == "mean" else g)
    if p.shape[0] == p.shape[1]:  # only then does numpy accept it, silently
        dz = p.copy()
        dz[np.arange(len(t)), t] -= 1
        yield (dz * weight,)


def _attention(dscores_of):
    """Attention's backward with dscores from `dscores_of(attn, dattn)`: the softmax mistakes, met inside it."""

    def wrong(ctx, g):
        q, k, v, attn, dropped = ctx.saved_tensors
        dv = np.swapaxes(dropped, -1, -2) @ g
        dattn = g @ np.swapaxes(v, -1, -2)
        if ctx.drop is not None:
            dattn = dattn * ctx.drop
        for dscores in dscores_of(attn, dattn):
            dq, dk = dscores @ k * ctx.scale, np.swapaxes(dscores, -1, -2) @ q * ctx.scale
            yield (dq, dk, dv) if len(ctx.needs_input_grad) == 3 else (dq, dk, dv, dscores)

    return wrong


MUL = (
    Mistake(
        "the operands swapped",
        _mul_swapped,
        "a nudge to a changes z = a * b by the other factor, b: each input's gradient is g times the other input",
    ),
)

SOFTMAX = (
    Mistake(
        "only the diagonal of the Jacobian (g * y * (1 - y))",
        _softmax_diagonal,
        "each y_i depends on every x_j of its row through the shared sum, so dy_i/dx_j is not 0 for i != j: "
        "dL/dx_j sums g_i dy_i/dx_j over the whole row",
    ),
    Mistake(
        "the sum over the wrong axis",
        _softmax_other_axis,
        "softmax normalises along ctx.axis only, so the sum over the row runs along ctx.axis, not another axis",
    ),
)

LAYER_NORM = (
    Mistake(
        "the mean and the variance treated as constants",
        _layer_norm(mean_path=False, variance_path=False),
        "mu and r are functions of x too: x reaches xhat directly, through the mean mu and through the "
        "variance in r, and each path adds a term",
    ),
    Mistake(
        "the path through the mean left out",
        _layer_norm(mean_path=False, variance_path=True),
        "mu = mean(x) depends on every x_i of the row: that path adds a term, minus the row's mean of g * w",
    ),
    Mistake(
        "the path through the variance left out",
        _layer_norm(mean_path=True, variance_path=False),
        "r = 1 / sqrt(var(x) + eps) depends on every x_i of the row: that path adds a term with xhat",
    ),
)


CROSS_ENTROPY = (
    Mistake(
        "the one-hot target left out",
        _cross_entropy_without_target,
        "loss_n = logsumexp(z_n) - z_n[t_n] has two terms: the first gives softmax(z_n), the second -1 at the "
        "target's logit",
    ),
    Mistake(
        "each row's weight multiplied along the classes",
        _cross_entropy_weight_on_columns,
        "row n of dL/dz is weighted by g_n (over the count for a mean): an (N,) weight times an (N, C) array "
        "needs weight[:, None], or numpy lines it up with the C classes",
    ),
)

ATTENTION = (
    Mistake(
        "only the diagonal of the softmax's Jacobian (A * (1 - A) * dA), inside attention",
        _attention(lambda attn, dattn: [attn * (1 - attn) * dattn]),
        SOFTMAX[0].hint,
    ),
    Mistake(
        "the softmax's sum over the queries, not the keys, inside attention",
        _attention(lambda attn, dattn: [attn * (dattn - (dattn * attn).sum(axis=-2, keepdims=True))]),
        "each query's weights are a softmax over the keys (the last axis): the sum in its backward runs there",
    ),
)


def named(mistakes, ctx, grad, i, got, shape, summed):
    """The mistake among `mistakes` whose wrong gradient of input i is `got` (after `summed`, the
    engine's sum of a broadcast gradient back to `shape`), or None."""
    got = np.asarray(got, dtype=np.float64)
    for mistake in mistakes:
        for candidate in mistake.wrong(ctx, grad):
            wrong = candidate[i]
            if wrong is None:
                continue
            wrong = summed(wrong, shape)
            if wrong.shape == got.shape and np.allclose(got, wrong, rtol=1e-6, atol=1e-9):
                return mistake
    return None
