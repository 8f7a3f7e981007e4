"""PyTorch's torch.nn.utils for gradients: clip_grad_norm_ and clip_grad_value_, in place."""

import numpy as np

from gradflow.engine import grad_norm
from gradflow.engine.tensor import Tensor


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scale all gradients so that their joint norm is at most max_norm (gf.optim.clip_grad_norm);
    returns the norm before clipping as a 0-d Tensor, as PyTorch does (float(norm), norm.item())."""
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    total = grad_norm.clip_grad_norm(parameters, max_norm, norm_type)
    dtypes = [p.grad.dtype for p in parameters if p.grad is not None]
    return Tensor(np.array(total, dtype=np.result_type(*dtypes) if dtypes else None))


def clip_grad_value_(parameters, clip_value):
    """Clip every gradient element to [-clip_value, clip_value], in place."""
    if not clip_value > 0:
        raise ValueError(f"clip_grad_value_: clip_value must be positive, got {clip_value}")
    parameters = [parameters] if isinstance(parameters, Tensor) else parameters
    for p in parameters:
        if p.grad is not None:
            p.grad.clamp_(-clip_value, clip_value)
