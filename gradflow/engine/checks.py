"""Argument checks shared by ops: each error names the op and the shapes or values at fault."""

import numpy as np


def normalize_axes(op, axis, shape):
    """axis (None, int or tuple, negatives counting from the end) as a sorted tuple of axes."""
    ndim = len(shape)
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axes = (axis,)
    elif isinstance(axis, (tuple, list)):
        axes = tuple(axis)
    else:
        raise TypeError(f"{op}: axis must be an int or a tuple of ints, got {axis!r}")
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"{op}: axis must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= a < max(ndim, 1) or (ndim == 0 and a != 0 and a != -1):
            raise ValueError(f"{op}: axis {a} is out of range for a tensor of shape {shape} ({ndim} dims)")
        out.append(int(a) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: axis {axis!r} repeats an axis")
    if ndim == 0:
        return ()
    return tuple(sorted(out))


def normalize_axis(op, axis, shape):
    """One axis, negatives counting from the end, as a non-negative int."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    ndim = len(shape)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for a tensor of shape {shape} ({ndim} dims)")
    return int(axis) % ndim


def shape_arg(shape, op=None):
    """A shape given as separate sizes or as one tuple: x.reshape(2, 3) and x.reshape((2, 3)) alike."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for n in shape:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"{op + ': ' if op else ''}shape entries must be ints, got {shape!r}")
    return tuple(int(n) for n in shape)


def broadcast_shape(op, *shapes):
    """The shape that `shapes` broadcast to, or an error naming the axis where they clash."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        pass
    ndim = max(len(s) for s in shapes)
    for i in range(1, ndim + 1):
        sizes = {s[-i] for s in shapes if len(s) >= i} - {1}
        if len(sizes) > 1:
            listed = " and ".join(str(tuple(s)) for s in shapes)  # (2, 3), also for a torch.Size
            sizes_text = " and ".join(str(n) for n in sorted(sizes))
            raise ValueError(f"{op}: shapes {listed} cannot be broadcast: axis {-i} has sizes {sizes_text}")
    raise ValueError(f"{op}: shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast")


def spelling(op, numpy_name, numpy_value, torch_name, torch_value, default):
    """An argument numpy and PyTorch spell differently (axis/dim, keepdims/keepdim): either, not both.

    Both spellings default to None in a signature, so that giving both can be told from giving one:
    x.sum(axis=1) and x.sum(dim=1) are the same call; x.sum(axis=1, dim=1) is an error.
    """
    if numpy_value is not None and torch_value is not None:
        raise TypeError(f"{op}: give {numpy_name}= (numpy's name) or {torch_name}= (PyTorch's), not both")
    if numpy_value is not None:
        return numpy_value
    return default if torch_value is None else torch_value


def check_mask(op, mask, value, shape):
    """mask as a boolean array that broadcasts to shape, with value a number (masked_fill and its in-place form)."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(f"{op}: mask must be boolean, got {mask.dtype}")
    if np.ndim(value) != 0:
        raise TypeError(f"{op}: value must be a number, got {type(value).__name__}")
    if broadcast_shape(op, mask.shape, shape) != shape:
        raise ValueError(f"{op}: mask of shape {mask.shape} does not broadcast to the tensor's {shape}")
    return mask
