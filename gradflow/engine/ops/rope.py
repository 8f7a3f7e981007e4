"""Rotary position embedding as one op: rotate each feature pair of x by its angle."""

import numpy as np

from gradflow.engine.autograd import Function


def rotate(x, cos, sin, interleaved):
    """(a, b) -> (a cos - b sin, a sin + b cos) for every pair: (x0, x1), (x2, x3), ... when interleaved,
    (x_i, x_(i + d/2)) otherwise; cos and sin broadcast against one half of x's last axis."""
    half = x.shape[-1] // 2
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :half], x[..., half:])
    a_turned, b_turned = a * cos - b * sin, a * sin + b * cos
    if interleaved:  # each pair back side by side: a0, b0, a1, b1, ...
        return np.stack([a_turned, b_turned], axis=-1).reshape(a_turned.shape[:-1] + (2 * half,))
    return np.concatenate([a_turned, b_turned], axis=-1)


class Rope(Function):
    """y = R(theta) x, pair by pair: (a, b) -> (a cos - b sin, a sin + b cos)

    Each pair is turned by a rotation matrix R = [[cos, -sin], [sin, cos]]. Its Jacobian is R
    itself, so dL/dx = R^T G, and R^T is the rotation by the opposite angle: the backward pass is
    the same rotation with sin negated. cos and sin are constants (positions are not learned).

    Written with primitive ops: composed.rope.
    """

    @staticmethod
    def forward(ctx, x, cos, sin, interleaved=False):
        ctx.save_for_backward(cos, sin)
        ctx.interleaved = interleaved
        return rotate(x, cos, sin, interleaved)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        return (rotate(grad, cos, -sin, ctx.interleaved),)
