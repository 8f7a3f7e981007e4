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
        seen = set()
        for p in self.parameters():  # a frozen one (requires_grad False) is kept and skipped, as in PyTorch
            if id(p) in seen:  # it would be updated twice per step, and its state would be shared
                raise ValueError(
                    f"{type(self).__name__}: a parameter of shape {p.shape} appears twice in the parameter list"
                )
            seen.add(id(p))
        self.state = {}  # id(param) -> dict of arrays and counters

    def parameters(self):
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self, set_to_none=True):
        """Forget the gradients: p.grad = None (PyTorch's default since 2.0: the next backward writes
        the gradient instead of adding to zeros, and step() skips a parameter that got none), or
        zeros with set_to_none=False."""
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def step(self):
        """Update every parameter that has a gradient, in place (p.in_place() counts the update, so a
        graph recorded before the step refuses to backward through the old values)."""
        for group in self.param_groups:
            for p, g, state in self.gradients(group):
                self.update(p, g, state, group)

    def gradients(self, group):
        """(array, gradient, state) of each parameter of the group that has a gradient: the array is
        p.in_place(), the gradient is negated with maximize (climb the loss)."""
        for p in group["params"]:
            if p.grad is not None:
                g = -p.grad.data if group.get("maximize") else p.grad.data  # maximize: climb the loss
                yield p.in_place(), g, self.state.setdefault(id(p), {})

    def update(self, p, g, state, group):
        """Update p, the parameter's array, in place, from its gradient g."""
        raise NotImplementedError

    def state_dict(self):
        """Hyperparameters of each group and each parameter's state, parameters named by position."""
        index = {id(p): i for i, p in enumerate(self.parameters())}
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]  # fmt: skip
        state = {index[pid]: dict(s) for pid, s in self.state.items() if pid in index}
        return {"param_groups": groups, "state": state}

    def load_state_dict(self, state_dict):
        """Restore what state_dict() returned, for an optimizer over the same parameters in the same order."""
        params = self.parameters()
        groups = state_dict["param_groups"]
        sizes = [len(g["params"]) for g in groups]
        if sizes != [len(g["params"]) for g in self.param_groups]:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the saved groups hold {sizes} parameters, "
                f"these hold {[len(g['params']) for g in self.param_groups]}"
            )
        for group, saved in zip(self.param_groups, groups):
            group.update({k: (tuple(v) if isinstance(v, list) else v) for k, v in saved.items() if k != "params"})
        self.state = {}
        for i, s in state_dict["state"].items():
            p = params[int(i)]
            arrays = {k: v for k, v in s.items() if isinstance(v, np.ndarray)}
            for k, v in arrays.items():
                if v.shape != p.shape:
                    raise ValueError(
                        f"{type(self).__name__}.load_state_dict: state {k!r} of parameter {i} has shape "
                        f"{v.shape}, the parameter has shape {p.shape}"
                    )
            self.state[id(p)] = {k: (v.astype(p.dtype) if isinstance(v, np.ndarray) else v) for k, v in s.items()}


def check_positive(name, **values):
    for key, value in values.items():
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"{name}: {key} must be a non-negative number, got {value}")


def how_to_run(name, foreach=None, fused=None, capturable=False, differentiable=False):
    """PyTorch's switches for how an optimizer runs its update (a loop over the parameters, one kernel
    for them all, on a GPU graph): the numbers are the same, and gradflow's update is numpy's, so they
    are accepted; differentiable=True (a step recorded in the graph) is not supported."""
    if differentiable:
        raise ValueError(f"{name}: differentiable=True is not supported; gradflow's step is not recorded in the graph")
