"""Functions of several tensors: where, cat, stack, split, maximum, minimum, tril, triu."""

import numpy as np

from gradflow.engine import ops
from gradflow.engine.checks import broadcast_shape, normalize_axis
from gradflow.engine.tensor import Tensor, _binary, _lift, as_tensor


def where(cond, a, b):
    """a where cond is True, else b (cond boolean; all three broadcast together)."""
    cond = np.asarray(cond)
    if cond.dtype != bool:
        raise TypeError(f"where: cond must be boolean, got {cond.dtype}")
    a = _lift(a, b) if isinstance(b, Tensor) else as_tensor(a)
    b = _lift(b, a)
    broadcast_shape("where", cond.shape, a.shape, b.shape)
    return ops.Where.apply(a, b, cond=cond)


def _check_joinable(op, tensors):
    if len(tensors) == 0:
        raise ValueError(f"{op}: needs at least one tensor")
    return [as_tensor(t) for t in tensors]


def cat(tensors, axis=0):
    """Join tensors along an existing axis; all other sizes must agree."""
    tensors = _check_joinable("cat", tensors)
    first = tensors[0].shape
    axis = normalize_axis("cat", axis, first)
    for i, t in enumerate(tensors):
        if t.ndim != len(first) or any(n != m for j, (n, m) in enumerate(zip(t.shape, first)) if j != axis):
            shapes = ", ".join(str(t.shape) for t in tensors)
            raise ValueError(
                f"cat: tensor {i} has shape {t.shape}, which differs from {first} outside axis {axis} (shapes {shapes})"
            )
    return ops.Cat.apply(*tensors, axis=axis)


def stack(tensors, axis=0):
    """Join equally shaped tensors along a new axis."""
    tensors = _check_joinable("stack", tensors)
    first = tensors[0].shape
    axis = normalize_axis("stack", axis, (None,) * (len(first) + 1))
    for i, t in enumerate(tensors):
        if t.shape != first:
            raise ValueError(f"stack: tensor {i} has shape {t.shape}, but tensor 0 has shape {first}")
    return ops.Stack.apply(*tensors, axis=axis)


def split(x, size_or_sizes, axis=0):
    """Cut x along axis into pieces of `size` (the last may be smaller) or of the listed sizes."""
    axis = normalize_axis("split", axis, x.shape)
    n = x.shape[axis]
    if isinstance(size_or_sizes, (int, np.integer)):
        if size_or_sizes <= 0:
            raise ValueError(f"split: size must be positive, got {size_or_sizes}")
        sizes = [min(size_or_sizes, n - start) for start in range(0, n, size_or_sizes)]
    else:
        sizes = list(size_or_sizes)
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ValueError(f"split: sizes {sizes} do not add up to {n}, the size of axis {axis} of shape {x.shape}")
    starts = np.cumsum([0] + sizes[:-1])
    lead = (slice(None),) * axis
    return [x[lead + (slice(int(s), int(s) + size),)] for s, size in zip(starts, sizes)]


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
