"""Adam and AdamW, with PyTorch's update formulas and defaults."""

import numpy as np

from gradflow.engine.kernels import kernel
from gradflow.optim.optimizer import Optimizer, check_positive, how_to_run


class Adam(Optimizer):
    """At step t, with g = grad (+ weight_decay * p, the L2 penalty, for Adam):
    m = beta1 m + (1 - beta1) g                 running mean of gradients
    v = beta2 v + (1 - beta2) g^2               running mean of squared gradients
    m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)    undo the bias of starting at zero
    p = p - lr m_hat / (sqrt(v_hat) + eps)      eps outside the square root, as PyTorch
    With amsgrad=True, v_hat uses the largest v so far (AMSGrad, Reddi et al., "On the Convergence of
    Adam and Beyond"); with maximize=True, g is -grad.
    """

    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 maximize=False, **how):  # fmt: skip
        check_positive(type(self).__name__, lr=lr, eps=eps, weight_decay=weight_decay)
        how_to_run(type(self).__name__, **how)  # foreach=, fused=, capturable=: accepted
        if not all(0 <= b < 1 for b in betas):
            raise ValueError(f"{type(self).__name__}: betas must lie in [0, 1), got {betas}")
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, {**defaults, "amsgrad": bool(amsgrad), "maximize": bool(maximize)})

    def step(self):
        """Update every parameter that has a gradient, in place: adam_steps once per group."""
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            steps = [self.moments(p, g, state, group) for p, g, state in self.gradients(group)]
            decay = 1 - lr * wd if wd and self.decoupled else None  # AdamW: p = p (1 - lr weight_decay) first
            # the fast tier may run the group in one call (gradflow/fast/adam.py): the same numbers
            kernel(adam_steps)(steps, decay, lr, beta1, beta2, eps)

    def moments(self, p, g, state, group):
        """What adam_step takes for one parameter: (p, g, m, v, v_max, t), the state made at its first step
        and the step counted; Adam's L2 decay adds weight_decay * p to the gradient."""
        if group["weight_decay"] and not self.decoupled:
            g = g + group["weight_decay"] * p
        if not state:
            state.update(step=0, m=np.zeros_like(p), v=np.zeros_like(p))
        if group["amsgrad"] and "v_max" not in state:
            state["v_max"] = np.zeros_like(p)  # v >= 0, so the first max(v_max, v) is v
        state["step"] += 1
        return p, g, state["m"], state["v"], state["v_max"] if group["amsgrad"] else None, state["step"]


def adam_steps(steps, decay, lr, beta1, beta2, eps):
    """adam_step on each parameter's (p, g, m, v, v_max, t) of steps; with decay (AdamW's 1 - lr weight_decay),
    p = p decay first: the weights shrink directly, apart from the gradient statistics."""
    for p, g, m, v, v_max, t in steps:
        if decay is not None:
            p *= decay
        kernel(adam_step)(p, g, m, v, v_max, t, lr, beta1, beta2, eps)


def adam_step(p, g, m, v, v_max, t, lr, beta1, beta2, eps):
    """Step t of Adam for one parameter; m, v (v_max for AMSGrad, else None) and p are updated in place,
    since the optimizer's state holds them. The fast tier runs the same formulas in one loop, or in
    numpy's passes on two buffers (gradflow/fast/adam.py): the same numbers, to the last bit."""
    m[...] = beta1 * m + (1 - beta1) * g  # running mean of gradients
    v[...] = beta2 * v + (1 - beta2) * g**2  # running mean of squared gradients
    if v_max is not None:  # AMSGrad: the largest v so far, so a coordinate's step never grows back
        v_max[...] = np.maximum(v_max, v)
        v = v_max
    m_hat = m / (1 - beta1**t)  # m and v start at zero: undo the bias that leaves
    v_hat = v / (1 - beta2**t)
    p -= lr * m_hat / (np.sqrt(v_hat) + eps)  # eps outside the square root, as PyTorch


class AdamW(Adam):
    """Adam with decoupled weight decay: p = p (1 - lr weight_decay) before the Adam step
    (Loshchilov & Hutter); default weight_decay 0.01, as PyTorch."""

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, amsgrad=False, **options):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, **options)
