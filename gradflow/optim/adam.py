"""Adam and AdamW, with PyTorch's update formulas and defaults."""

import math

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

    def update(self, p, g, state, group):
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if wd and self.decoupled:
            p *= 1 - lr * wd  # AdamW: shrink the weights directly, apart from the gradient statistics
        elif wd:
            g = g + wd * p
        if not state:
            state.update(step=0, m=np.zeros_like(p), v=np.zeros_like(p))
        if group["amsgrad"] and "v_max" not in state:
            state["v_max"] = np.zeros_like(p)  # v >= 0, so the first max(v_max, v) is v
        state["step"] += 1
        v_max = state["v_max"] if group["amsgrad"] else None
        # the fast tier may run one compiled loop for it (gradflow/fast/adam.py): the same numbers
        kernel(adam_step)(p, g, state["m"], state["v"], v_max, state["step"], lr, beta1, beta2, eps)


def adam_step(p, g, m, v, v_max, t, lr, beta1, beta2, eps):
    """Step t of Adam for one parameter, every array updated in place (m, v, p; v_max for AMSGrad, else None):
    m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2,  v_max = max(v_max, v),
    p = p - lr m_hat / (sqrt(v_hat) + eps),  with m_hat = m / (1 - beta1^t) and v_hat = v (or v_max) / (1 - beta2^t)."""
    scratch = np.empty_like(m)  # every pass below runs in place, in m, v, p or this one buffer
    m *= beta1
    m += np.multiply(g, 1 - beta1, out=scratch)  # m = beta1 m + (1 - beta1) g
    v *= beta2
    np.multiply(g, g, out=scratch)
    scratch *= 1 - beta2
    v += scratch  # v = beta2 v + (1 - beta2) g^2
    if v_max is not None:  # the largest v so far: a coordinate's step never grows back after a large gradient
        v = np.maximum(v_max, v, out=v_max)
    denom = np.sqrt(v, out=scratch)
    denom *= 1 / math.sqrt(1 - beta2**t)
    denom += eps  # sqrt(v_hat) + eps = sqrt(v) / sqrt(1 - beta2^t) + eps
    step = np.divide(m, denom, out=scratch)
    step *= lr / (1 - beta1**t)
    p -= step  # lr m_hat / (sqrt(v_hat) + eps)


class AdamW(Adam):
    """Adam with decoupled weight decay: p = p (1 - lr weight_decay) before the Adam step
    (Loshchilov & Hutter); default weight_decay 0.01, as PyTorch."""

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, amsgrad=False, **options):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, **options)
