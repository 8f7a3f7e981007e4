"""Adam's step in the fast tier: replaces optim.adam.adam_step (gradflow/optim/adam.py), same numbers.

What changes: the plain step reads as its formulas, and each formula is a numpy pass that allocates
its result (about eight arrays the size of the parameter per step). Here, with numba, one loop
(gradflow/fast/loops.py) reads g, m, v and p once per element and writes m, v and p; without numba,
the same passes run in place, in m, v and two buffers. Both keep the plain step's order of
operations, with its constants rounded as numpy rounds them, so every value is the plain step's to
the last bit. Where the arrays are not all of one kind, the plain step runs (numpy would round
a mixed expression once, at the end, where the in-place passes round at each step).

Measured (benchmarks/kernels.py, alone: AdamW's step over the baby GPT's 43 parameters, 805,120
float32 values, 2 cores, medians of 7 alternating rounds): the loop 3.2 times as fast as the plain
step, the passes in place 1.4 times (the plain step's temporaries each cost a fresh allocation).
"""

import numpy as np

from gradflow.fast import compiled
from gradflow.optim import adam

NO_V_MAX = {np.dtype(kind): np.empty(0, kind) for kind in compiled.KINDS}  # v_max when AMSGrad is off


def adam_step(p, g, m, v, v_max, t, lr, beta1, beta2, eps):
    """As optim.adam.adam_step: step t of Adam for one parameter, in place."""
    arrays = (p, g, m, v) if v_max is None else (p, g, m, v, v_max)
    if any(a.dtype != p.dtype for a in arrays):
        return adam.adam_step(p, g, m, v, v_max, t, lr, beta1, beta2, eps)
    loops = compiled.loops()
    if loops is None or p.dtype not in NO_V_MAX or not all(a.flags.c_contiguous for a in arrays):
        return in_place(p, g, m, v, v_max, t, lr, beta1, beta2, eps)
    flat = [a.reshape(-1) for a in arrays]  # views: the loop writes into p, m, v (and v_max)
    loops.adam_step(
        *flat[:4], flat[4] if v_max is not None else NO_V_MAX[p.dtype],
        beta1, 1 - beta1, beta2, 1 - beta2, 1 - beta1**t, 1 - beta2**t, eps, lr,
    )  # fmt: skip


def in_place(p, g, m, v, v_max, t, lr, beta1, beta2, eps):
    """The plain step's passes, each written into m, v, p or one of two buffers."""
    a, b = np.empty_like(m), np.empty_like(m)
    m *= beta1
    m += np.multiply(1 - beta1, g, out=a)  # m = beta1 m + (1 - beta1) g
    v *= beta2
    a = np.square(g, out=a)
    a *= 1 - beta2
    v += a  # v = beta2 v + (1 - beta2) g^2
    if v_max is not None:
        v = np.maximum(v_max, v, out=v_max)
    denom = np.divide(v, 1 - beta2**t, out=a)
    np.sqrt(denom, out=denom)
    denom += eps  # sqrt(v_hat) + eps
    step = np.divide(m, 1 - beta1**t, out=b)
    step *= lr
    step /= denom  # lr m_hat / (sqrt(v_hat) + eps)
    p -= step
