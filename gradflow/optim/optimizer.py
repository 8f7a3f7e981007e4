"""The optimizer base: parameter groups, per-parameter state, zero_grad."""

import numpy as np


class Optimizer:
    """Holds parameter groups (each a dict of hyperparameters and its "params") and per-parameter state.

    `params` is a list of Parameters, or a list of dicts {"params": [...], **overrides}, so that, for
    example, biases and norms can take weight_decay=0 while matrices decay.
    """

    def __init__(self, params, defaults):
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = []
        for group in groups:
            unknown = set(group) - set(defaults) - {"params"}
            if unknown:
                raise ValueError(f"{type(self).__name__}: unknown options {sorted(unknown)} in a parameter group")
            self.param_groups.append({**defaults, **group, "params": list(group["params"])})
        for p in self.parameters():
            if not p.requires_grad:
                raise ValueError(f"{type(self).__name__}: a parameter of shape {p.shape} does not require grad")
        self.state = {}  # id(param) -> dict of arrays and counters

    def parameters(self):
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.update(p, p.grad, self.state.setdefault(id(p), {}), group)

    def update(self, p, g, state, group):
        raise NotImplementedError


def check_positive(name, **values):
    for key, value in values.items():
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"{name}: {key} must be a non-negative number, got {value}")
