"""Adam's step in the fast tier: replaces optim.adam.adam_steps and adam_step (gradflow/optim/adam.py),
same numbers.

What changes: the plain step reads as its formulas, and each formula is a numpy pass that allocates
its result (about eight arrays the size of the parameter per step). Here, with numba, one loop
(gradflow/fast/loops.py) reads g, m, v and p once per element and writes m, v and p; without numba,
the same passes run in place, in m, v and two buffers. Both keep the plain step's order of
operations, with its constants rounded as numpy rounds them, so every value is the plain step's to
the last bit. Where the arrays are not all of one kind, the plain step runs (numpy would round
a mixed expression once, at the end, where the in-place passes round at each step).
A group's parameters are one call (adam_steps), which runs the loop on each with AdamW's decay,
p = p (1 - lr weight_decay), inside it: the plain adam_steps makes that a pass of its own over
every matrix, and calls adam_step through the tier's switch, parameter by parameter.

Measured (benchmarks/kernels.py, alone: AdamW's step over the baby GPT's 43 parameters, 805,120
float32 values, 2 cores, medians of 7 alternating rounds): the loop 3.2 times as fast as the plain
step, the passes in place 1.4 times (the plain step's temporaries each cost a fresh allocation).
A group in one call with the decay in the loop: 1.38 times as fast as the loop a weight at a time
with the decay's own pass (35 parameters, 804,096 values; 15 alternating rounds on a busy machine,
twice: 2.9 against 3.5 ms); each change alone: the group in one call, with parameters of 2 to 4
values where only Python's work per parameter counts, 1.36 times as fast; the decay in the loop,
both a group per call, 1.20 times (2.9 against 3.7 ms, 40 rounds).
Inside the baby GPT's training step (kernels.py --skip-alone --each adam_steps,CrossEntropy --parts:
forward, backward, AdamW; 30 alternating rounds, one BLAS thread, a load of about 9 on 2 cores): the
optimizer's step 3.2 against 4.8 ms (two equal variants 1.24 times apart), under 1% of the 237 ms
step, whose ratio (1.044) is within how far two equal variants came apart (1.021; 1 to 3% over runs).
"""

import numpy as np

from gradflow.fast import compiled
from gradflow.optim import adam

NO_V_MAX = {np.dtype(kind): np.empty(0, kind) for kind in compiled.KINDS}  # v_max when AMSGrad is off


def adam_steps(steps, decay, lr, beta1, beta2, eps):
    """As optim.adam.adam_steps: each parameter's step in one pass of the loop, AdamW's decay inside it;
    where the loop does not take the arrays, the decay's own pass and then adam_step below."""
    loops = compiled.loops()
    for p, g, m, v, v_max, t in steps:
        if loops is not None and fits(p, g, m, v, v_max):
            loop(loops, p, g, m, v, v_max, t, 1 if decay is None else decay, lr, beta1, beta2, eps)
            continue
        if decay is not None:
            p *= decay
        adam_step(p, g, m, v, v_max, t, lr, beta1, beta2, eps)


def adam_step(p, g, m, v, v_max, t, lr, beta1, beta2, eps):
    """As optim.adam.adam_step: step t of Adam for one parameter, in place."""
    if any(a is not None and a.dtype != p.dtype for a in (g, m, v, v_max)):
        return adam.adam_step(p, g, m, v, v_max, t, lr, beta1, beta2, eps)
    loops = compiled.loops()
    if loops is None or not fits(p, g, m, v, v_max):
        return in_place(p, g, m, v, v_max, t, lr, beta1, beta2, eps)
    loop(loops, p, g, m, v, v_max, t, 1, lr, beta1, beta2, eps)


def fits(p, g, m, v, v_max):
    """Whether the loop takes these arrays: all of one kind it is compiled for, and p, m, v (and v_max)
    C-ordered, so that ravel() gives views of them (g is only read: ravel() may copy it)."""
    written = (p, m, v) if v_max is None else (p, m, v, v_max)
    return (
        p.dtype in NO_V_MAX and g.dtype == p.dtype and all(a.dtype == p.dtype and a.flags.c_contiguous for a in written)
    )


def loop(loops, p, g, m, v, v_max, t, decay, lr, beta1, beta2, eps):
    """loops.adam_step on the arrays as flat views, with the constants it takes."""
    loops.adam_step(
        p.ravel(), g.ravel(), m.ravel(), v.ravel(), NO_V_MAX[p.dtype] if v_max is None else v_max.ravel(),
        decay, beta1, 1 - beta1, beta2, 1 - beta2, 1 - beta1**t, 1 - beta2**t, eps, lr,
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
