"""Adam's step as one compiled loop: replaces optim.adam.adam_step (gradflow/optim/adam.py), same numbers.

What changes: the plain step makes eleven numpy passes over each parameter (m, v, the square
root, the division, the step, each in place) and so reads and writes every element many times; here
one loop (gradflow/fast/loops.py) reads g, m, v and p once per element and writes m, v and p, in
the plain step's order of operations with its constants rounded as numpy rounds them, so every
value is the plain step's to the last bit. Where numba is absent, or the arrays are not all of one
kind of float and contiguous, the plain step runs.

Measured (baby GPT, 43 parameters, 805,120 values, float32, 2 cores): AdamW's step() takes 0.33 ms
instead of 1.0, and the whole training step is 1.029 times as long with the plain step in its place
(benchmarks/kernels.py). On one core: sharing the loop among cores was measured before and did not
pay at these sizes (gradflow/fast/__init__.py).
"""

import math

import numpy as np

from gradflow.fast import compiled
from gradflow.optim import adam

NO_V_MAX = {np.dtype(kind): np.empty(0, kind) for kind in compiled.KINDS}  # v_max when AMSGrad is off


def adam_step(p, g, m, v, v_max, t, lr, beta1, beta2, eps):
    """As optim.adam.adam_step: step t of Adam for one parameter, in place, in one loop."""
    loops = compiled.loops()
    arrays = (p, g, m, v) if v_max is None else (p, g, m, v, v_max)
    if loops is None or p.dtype not in NO_V_MAX or any(a.dtype != p.dtype or not a.flags.c_contiguous for a in arrays):
        return adam.adam_step(p, g, m, v, v_max, t, lr, beta1, beta2, eps)
    flat = [a.reshape(-1) for a in arrays]  # views: the loop writes into p, m, v (and v_max)
    loops.adam_step(
        *flat[:4], flat[4] if v_max is not None else NO_V_MAX[p.dtype],
        beta1, 1 - beta1, beta2, 1 - beta2, 1 / math.sqrt(1 - beta2**t), eps, lr / (1 - beta1**t),
    )  # fmt: skip
