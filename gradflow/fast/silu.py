"""SiLU in one pass that keeps dy/dx: replaces ops.Silu (gradflow/engine/ops/elementwise.py), same formula.

What changes: the plain op computes s = sigmoid(x) in nine numpy passes (|x|, its negative, exp,
1 + e twice, two divisions, the comparison and the choice between them), then y = x s, and saves
x and s; backward computes s (1 + x (1 - s)) in four more passes before multiplying by g.
Here forward computes s, y and dy/dx = s (1 + x (1 - s)) together and saves dy/dx alone: backward
is one product, g * dy/dx. Without a graph to record, dy/dx is skipped. With numba forward is one
compiled loop (loops.silu_forward); without it, the numpy passes below (eight for y, the plain op's
ten). s is the plain op's sigmoid written the same way (e = exp(-|x|): 1 / (1 + e) for x >= 0,
e / (1 + e) below), so the numpy passes give its s, y and dy/dx to the last bit; the loop's exp is
within an ulp or three of numpy's (loops.exp_of_nonpositive). There the numerator, 1 or e by the
sign of x, is max(e, x >= 0): numpy's choices by a mask (np.where, copyto or putmask with where=)
took 4 ms on SmolLM2's (8, 78, 1536) activations, whose signs are random, max 0.2 ms. The graph's
memory is the same: the node keeps its input x in either tier, and one array of x's size beside it
(s there, dy/dx here). Integers, booleans and a single number run the plain op itself: numpy before
2.0 promotes their arithmetic by value, which the passes here would not follow to the last bit.

Measured (benchmarks/kernels.py --alone Silu, float32, 2-core AMD EPYC, AVX2, medians of three runs of
15 to 21 alternating rounds): forward and backward of SmolLM2-135M's MLP activations (8, 78, 1536), 30
calls in a LoRA step, take 1.6 ms with the loop (1.0 of it the loop itself, 0.84 without dy/dx), 4.2
with the numpy passes and 9.6 with the plain op: 5.6 to 5.8 times as fast, about 0.24 s of a LoRA step
at batch (8, 78).
"""

import numpy as np

from gradflow.engine import ops
from gradflow.fast import compiled
from gradflow.fast.elementwise import KeepsDerivative


class Silu(KeepsDerivative):
    """y = x sigmoid(x), as ops.Silu; forward keeps dy/dx = s (1 + x (1 - s)), backward is g * dy/dx."""

    @staticmethod
    def forward(ctx, x):
        ctx.plain = x.dtype.kind != "f" or x.ndim == 0  # integers, booleans, a single number (see above)
        if ctx.plain:
            return ops.Silu.forward(ctx, x)
        loops = compiled.loops_for(x.dtype)
        shape, x = x.shape, np.ascontiguousarray(x).reshape(-1)  # elementwise: a flat view walks memory in order
        if loops is not None:  # the lines below as one loop
            y, dydx = np.empty_like(x), np.empty_like(x) if ctx.recording else np.empty(0, x.dtype)
            loops.silu_forward(x, y, dydx)
            if ctx.recording:
                ctx.save_for_backward(dydx)
            return y.reshape(shape)
        s = np.exp(-np.abs(x))  # s holds e = exp(-|x|), of x's kind
        y = np.add(s, 1)  # y holds 1 + e
        np.maximum(s, x >= 0, out=s)  # s holds 1 for x >= 0 (where e <= 1), e below (e >= 0): no mask, see above
        s /= y  # s = sigmoid(x), as ops.elementwise.sigmoid: 1 / (1 + e) or e / (1 + e)
        np.multiply(x, s, out=y)  # y = x s
        if ctx.recording:
            dydx = np.subtract(1, s)
            dydx *= x
            dydx += 1
            dydx *= s  # dy/dx = s (1 + x (1 - s))
            ctx.save_for_backward(dydx)
        return y.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return ops.Silu.backward(ctx, grad) if ctx.plain else KeepsDerivative.backward(ctx, grad)
