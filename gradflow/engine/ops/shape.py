"""Ops that move elements without changing them: reshape, permute, expand, cat, stack, flip, roll,
pad, a copy into memory of its own, and a cast to the other float dtype. Their backward moves the
gradient back the same way."""

import numpy as np

from gradflow.engine.autograd import Function


class Reshape(Function):
    """y = x viewed with a new shape;  dL/dx = g reshaped to x's shape"""

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.shape)


class Permute(Function):
    """y = x with its axes reordered, y.shape[i] = x.shape[axes[i]];  dL/dx = g with the inverse order"""

    @staticmethod
    def forward(ctx, x, axes):
        ctx.axes = axes
        return x.transpose(axes)

    @staticmethod
    def backward(ctx, grad):
        inverse = sorted(range(len(ctx.axes)), key=ctx.axes.__getitem__)  # y's axis i was x's axes[i]
        return grad.transpose(inverse)  # (in plain Python: np.argsort costs ~15 us on a cold cache)


class Expand(Function):
    """y = x broadcast to `shape` (a view, no copy);  dL/dx = g summed over the copies,
    which the engine's unbroadcast does for every op, so backward passes g on unchanged."""

    @staticmethod
    def forward(ctx, x, shape):
        return np.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Cat(Function):
    """y = [x_1, x_2, ...] joined along axis;  dL/dx_k = the slice of g where x_k landed"""

    @staticmethod
    def forward(ctx, *xs, axis):
        ctx.axis = axis
        ctx.ends = np.cumsum([x.shape[axis] for x in xs])[:-1]
        return np.concatenate(xs, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        return tuple(np.split(grad, ctx.ends, axis=ctx.axis))


class Stack(Function):
    """y[..., k, ...] = x_k, a new axis;  dL/dx_k = g[..., k, ...]"""

    @staticmethod
    def forward(ctx, *xs, axis):
        ctx.axis = axis
        return np.stack(xs, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        return tuple(np.moveaxis(grad, ctx.axis, 0))


class Flip(Function):
    """y = x with the order of its elements reversed along each of `axes`;  dL/dx = g flipped back the same way"""

    @staticmethod
    def forward(ctx, x, axes):
        ctx.axes = axes
        return np.flip(x, axes)

    @staticmethod
    def backward(ctx, grad):
        return np.flip(grad, ctx.axes)


class Roll(Function):
    """y = x shifted by `shifts` places along `axes`, the elements that fall off one end coming back at
    the other: y[(i + s) mod n] = x[i];  dL/dx = g rolled back by -s"""

    @staticmethod
    def forward(ctx, x, shifts, axes):
        ctx.shifts, ctx.axes = shifts, axes
        return np.roll(x, shifts, axes)

    @staticmethod
    def backward(ctx, grad):
        return np.roll(grad, tuple(-s for s in ctx.shifts), ctx.axes)


class Pad(Function):
    """y = x placed inside a larger array filled with `value`, widths[a] = (before, after) on each axis a;
    dL/dx = the part of g where x was placed (the filled border does not depend on x)"""

    @staticmethod
    def forward(ctx, x, widths, value):
        ctx.inside = tuple(slice(before, before + n) for (before, _), n in zip(widths, x.shape))
        return np.pad(x, widths, constant_values=value)

    @staticmethod
    def backward(ctx, grad):
        return grad[ctx.inside]


class Copy(Function):
    """y = x in memory of its own, laid out in C (row-major) order;  dL/dx = g"""

    @staticmethod
    def forward(ctx, x):
        return np.array(x, order="C")

    @staticmethod
    def backward(ctx, grad):
        return grad


class Cast(Function):
    """y = x in another float dtype (rounded, from float64 to float32);  dL/dx = g in x's dtype,
    into which the engine casts every input's gradient."""

    casts = True  # the output's dtype is the point: the engine must not cast it back to the input's

    @staticmethod
    def forward(ctx, x, dtype):
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad
