"""Functions of tensors: where, cat, stack, split, maximum, minimum, tril, triu, and the Tensor methods
PyTorch also spells as functions (torch.topk(x, k) is x.topk(k)): topk, argmax, argmin, numel.

Where a function takes an axis, numpy's axis= and PyTorch's dim= are both accepted (not both at once).
Each op runs as the Tensor methods run theirs, as kernel(op).apply(...) (see tensor.py).
"""

import numpy as np

from gradflow.engine import ops
from gradflow.engine.checks import broadcast_shape, normalize_axis, spelling
from gradflow.engine.kernels import kernel
from gradflow.engine.tensor import Tensor, _binary, _lift, as_tensor


def where(cond, a, b):
    """a where cond is True, else b (cond boolean; all three broadcast together)."""
    cond = np.asarray(cond)
    if cond.dtype != bool:
        raise TypeError(f"where: cond must be boolean, got {cond.dtype}")
    a = _lift(a, b) if isinstance(b, Tensor) else as_tensor(a)
    b = _lift(b, a)
    broadcast_shape("where", cond.shape, a.shape, b.shape)
    return kernel(ops.Where).apply(a, b, cond=cond)


def _check_joinable(op, tensors):
    if len(tensors) == 0:
        raise ValueError(f"{op}: needs at least one tensor")
    return [as_tensor(t) for t in tensors]


def cat(tensors, axis=None, *, dim=None):
    """Join tensors along an existing axis (0 by default); all other sizes must agree."""
    tensors = _check_joinable("cat", tensors)
    first = tensors[0].shape
    axis = normalize_axis("cat", spelling("cat", "axis", axis, "dim", dim, 0), first)
    for i, t in enumerate(tensors):
        if t.ndim != len(first) or any(n != m for j, (n, m) in enumerate(zip(t.shape, first)) if j != axis):
            shapes = ", ".join(str(t.shape) for t in tensors)
            raise ValueError(
                f"cat: tensor {i} has shape {t.shape}, which differs from {first} outside axis {axis} (shapes {shapes})"
            )
    return kernel(ops.Cat).apply(*tensors, axis=axis)


def stack(tensors, axis=None, *, dim=None):
    """Join equally shaped tensors along a new axis (0 by default)."""
    tensors = _check_joinable("stack", tensors)
    first = tensors[0].shape
    axis = normalize_axis("stack", spelling("stack", "axis", axis, "dim", dim, 0), (None,) * (len(first) + 1))
    for i, t in enumerate(tensors):
        if t.shape != first:
            raise ValueError(f"stack: tensor {i} has shape {t.shape}, but tensor 0 has shape {first}")
    return kernel(ops.Stack).apply(*tensors, axis=axis)


def split(x, size_or_sizes, axis=None, *, dim=None):
    """Cut x along axis (0 by default) into pieces of `size` (the last may be smaller) or of the listed sizes."""
    return as_tensor(x).split(size_or_sizes, axis, dim=dim)


def topk(x, k, axis=None, largest=True, sorted=True, *, dim=None):
    """(values, indices) of the k largest elements along axis (the last by default): x.topk(k)."""
    return as_tensor(x).topk(k, axis, largest, sorted, dim=dim)


def argmax(x, axis=None, keepdims=None, *, dim=None, keepdim=None):
    """Positions of the largest values along axis (of all elements for None): x.argmax(axis)."""
    return as_tensor(x).argmax(axis, keepdims, dim=dim, keepdim=keepdim)


def argmin(x, axis=None, keepdims=None, *, dim=None, keepdim=None):
    """Positions of the smallest values along axis (of all elements for None): x.argmin(axis)."""
    return as_tensor(x).argmin(axis, keepdims, dim=dim, keepdim=keepdim)


def numel(x):
    """How many numbers x holds: x.numel()."""
    return as_tensor(x).numel()


def maximum(a, b):
    return _binary(ops.Maximum, a, b)


def minimum(a, b):
    return _binary(ops.Minimum, a, b)


def _triangle(op, x, keep):
    x = as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"{op}: needs at least 2 dimensions, got shape {x.shape}")
    return x.masked_fill(~keep, 0)


def tril(x, k=0):
    """x with the elements above the k-th diagonal set to 0 (keeps j <= i + k in the last two axes)."""
    x = as_tensor(x)
    return _triangle("tril", x, np.tri(*x.shape[-2:], k=k, dtype=bool))


def triu(x, k=0):
    """x with the elements below the k-th diagonal set to 0 (keeps j >= i + k in the last two axes)."""
    x = as_tensor(x)
    return _triangle("triu", x, ~np.tri(*x.shape[-2:], k=k - 1, dtype=bool))
