"""The norm of all gradients together, and clipping by it (gf.optim.clip_grad_norm, gf.nn.utils.clip_grad_norm_)."""

import math

import numpy as np

from gradflow.engine.tensor import Tensor


def grad_norm(parameters, norm_type=2.0):
    """||g||, the norm of all gradients together as one long vector: the p-norm for norm_type p,
    the largest |g| for inf. Parameters without a gradient count for nothing."""
    if not norm_type > 0:
        raise ValueError(f"grad_norm: norm_type must be positive (or inf), got {norm_type}")
    parameters = [parameters] if isinstance(parameters, Tensor) else parameters
    grads = [p.grad.data for p in parameters if p.grad is not None]
    if norm_type == math.inf:
        return max((float(np.abs(g).max(initial=0)) for g in grads), default=0.0)
    if norm_type == 2:
        return math.sqrt(sum(float(np.vdot(g, g)) for g in grads))
    return sum(float((np.abs(g) ** norm_type).sum()) for g in grads) ** (1 / norm_type)


def clip_grad_norm(parameters, max_norm, norm_type=2.0):
    """Scale all gradients by min(1, max_norm / (||g|| + 1e-6)), ||g|| = grad_norm(parameters, norm_type).

    Clipping the joint norm keeps the update's direction and bounds its length, so one bad batch
    cannot throw the weights far. Returns ||g|| before clipping, a float.
    """
    if not max_norm > 0:
        raise ValueError(f"clip_grad_norm: max_norm must be positive, got {max_norm}")
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    total = grad_norm(parameters, norm_type)
    scale = max_norm / (total + 1e-6)
    if scale < 1:
        for g in (p.grad.in_place() for p in parameters if p.grad is not None):
            g *= scale  # the array itself (a Tensor's mul_ would make the product, then copy it in)
    return total
