"""Stochastic gradient descent with momentum, as torch.optim.SGD (no dampening, no Nesterov)."""

from gradflow.optim.optimizer import Optimizer, check_positive


class SGD(Optimizer):
    """g = grad + weight_decay * p
    b = g at the first step, then b = momentum * b + g   (only when momentum > 0; else b = g)
    p = p - lr * b
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, weight_decay=0.0):
        check_positive("SGD", lr=lr, momentum=momentum, weight_decay=weight_decay)
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    def update(self, p, g, state, group):
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        if group["momentum"]:
            state["momentum"] = g.copy() if "momentum" not in state else group["momentum"] * state["momentum"] + g
            g = state["momentum"]
        p -= group["lr"] * g
