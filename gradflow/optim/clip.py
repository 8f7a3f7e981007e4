"""Gradient clipping by global norm."""

import math

import numpy as np


def clip_grad_norm(parameters, max_norm):
    """Scale all gradients by min(1, max_norm / (||g|| + 1e-6)), ||g|| the norm of all of them together.

    Clipping the joint norm keeps the update's direction and bounds its length, so one bad batch
    cannot throw the weights far. Returns ||g|| before clipping (as torch.nn.utils.clip_grad_norm_).
    """
    if max_norm <= 0:
        raise ValueError(f"clip_grad_norm: max_norm must be positive, got {max_norm}")
    grads = [p.grad for p in parameters if p.grad is not None]
    total = math.sqrt(sum(float(np.vdot(g, g)) for g in grads))
    scale = max_norm / (total + 1e-6)
    if scale < 1:
        for g in grads:
            g *= scale
    return total
