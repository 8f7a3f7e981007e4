"""Stochastic gradient descent with momentum (with dampening and Nesterov's form), as torch.optim.SGD."""

from gradflow.optim.optimizer import Optimizer, check_positive, how_to_run


class SGD(Optimizer):
    """g = grad + weight_decay * p                     (-grad with maximize=True)
    b = g at the first step, then b = momentum * b + (1 - dampening) * g   (only when momentum > 0)
    d = g + momentum * b with nesterov=True, else b  (d = g without momentum)
    p = p - lr * d
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False, **how):  # fmt: skip
        check_positive("SGD", lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay)
        how_to_run("SGD", **how)  # foreach=, fused=: accepted
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(f"SGD: nesterov=True needs momentum > 0 and dampening 0, got {momentum} and {dampening}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening, "weight_decay": weight_decay}
        super().__init__(params, {**defaults, "nesterov": bool(nesterov), "maximize": bool(maximize)})

    def update(self, p, g, state, group):
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        if group["momentum"]:
            if "momentum" not in state:
                state["momentum"] = g.copy()
            else:
                state["momentum"] = group["momentum"] * state["momentum"] + (1 - group["dampening"]) * g
            g = g + group["momentum"] * state["momentum"] if group["nesterov"] else state["momentum"]
        p -= group["lr"] * g
