"""RMSprop, as torch.optim.RMSprop: each weight's step divided by a running root mean square of its gradients."""

import numpy as np

from gradflow.optim.optimizer import Optimizer, check_positive, how_to_run


class RMSprop(Optimizer):
    """g = grad + weight_decay * p                    (-grad with maximize=True)
    v = alpha v + (1 - alpha) g^2                   running mean of squared gradients (v starts at 0)
    centered: m = alpha m + (1 - alpha) g, and v - m^2 in place of v   (the variance, not the raw square)
    d = g / (sqrt(v) + eps)
    momentum: b = momentum b + d, and b in place of d
    p = p - lr d
    (Hinton's lecture 6e, "Neural Networks for Machine Learning"; PyTorch's defaults.)
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False, *,
                 maximize=False, **how):  # fmt: skip
        check_positive("RMSprop", lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
        how_to_run("RMSprop", **how)  # foreach=, capturable=: accepted
        defaults = {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay, "momentum": momentum}
        super().__init__(params, {**defaults, "centered": bool(centered), "maximize": bool(maximize)})

    def update(self, p, g, state, group):
        alpha = group["alpha"]
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        if not state:
            state.update(v=np.zeros_like(p), m=np.zeros_like(p), b=np.zeros_like(p))
        state["v"] = alpha * state["v"] + (1 - alpha) * g * g
        v = state["v"]
        if group["centered"]:
            state["m"] = alpha * state["m"] + (1 - alpha) * g
            v = v - state["m"] ** 2
        d = g / (np.sqrt(v) + group["eps"])
        if group["momentum"]:
            state["b"] = group["momentum"] * state["b"] + d
            d = state["b"]
        p -= group["lr"] * d
