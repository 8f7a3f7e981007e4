"""Adam and AdamW's update as one compiled loop, on every core: replaces the numpy passes of
gradflow.optim.Adam.update (gradflow/optim/adam.py), same formulas.

What changes: the optimizer's update makes about ten passes over each parameter (m, v, the
square root, the quotient, the decay), each on one core. Here one loop (gradflow/fast/loops.py)
reads p, g, m and v once and writes p, m and v once, the elements shared out among the cores
numpy's BLAS uses. Its scalars (the learning rate, the betas and their powers) stay float64 in
the loop, so the values are the numpy update's up to float32 rounding.

Measured (benchmarks/kernels.py, float32, a shared 2-core machine): MEASURED.
"""

import math

import numpy as np

from gradflow.engine.kernels import kernels_in_use
from gradflow.fast import compiled


def adam_step(p, g, m, v, lr, betas, eps, weight_decay, step, decoupled=True):
    """One Adam step in place on p, m and v (AdamW's when decoupled), at `step` (1 for the first);
    True if it ran. False, with nothing changed, in the plain tier, where numba is absent, or where
    the arrays are not all C-contiguous float32 or float64 of one shape and dtype: the optimizer's
    numpy update then runs."""
    loops = compiled.loops() if kernels_in_use() == "fast" else None
    if loops is None or not fits(p, g, m, v):
        return False
    beta1, beta2 = betas
    shrink, l2 = (1 - lr * weight_decay, 0.0) if decoupled else (1.0, weight_decay)
    step_size, v_scale = lr / (1 - beta1**step), 1 / math.sqrt(1 - beta2**step)  # as the optimizer's
    flat = (a.reshape(-1) for a in (p, g, m, v))  # views: every array is contiguous
    loops.adam_step(*flat, beta1, 1 - beta1, beta2, 1 - beta2, eps, shrink, l2, step_size, v_scale)
    return True


def fits(p, *arrays):
    """p and the arrays C-contiguous, of p's shape and p's dtype, float32 or float64."""
    if p.dtype not in (np.float32, np.float64):
        return False
    return all(a.dtype == p.dtype and a.shape == p.shape and a.flags.c_contiguous for a in (p, *arrays))
