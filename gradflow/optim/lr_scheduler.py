"""PyTorch's learning-rate schedulers: each sets optimizer.param_groups[i]["lr"] at every step.

    scheduler = CosineAnnealingLR(optimizer, T_max=1000)
    for batch in batches:
        loss.backward(); optimizer.step(); optimizer.zero_grad()
        scheduler.step()                   # after optimizer.step(): the lr for the next step

A scheduler counts its steps in `last_epoch` (0 after construction, which already sets the lr of
step 0) and sets each group's lr to base_lr * factor(t), base_lr the lr the group had when the
first scheduler was made (kept as the group's "initial_lr"). Each formula is PyTorch's closed
form, computed from t: the numbers equal PyTorch's (up to rounding), and a resumed run continues
exactly. Unlike PyTorch's recursive updates, this does not compose two schedulers stepping one
optimizer at once; SequentialLR runs them one after another.

nanoGPT's schedule, linear warmup over W steps then cosine decay to min_lr at step D:

    warmup = LinearLR(optimizer, start_factor=1 / W, total_iters=W - 1)
    decay = CosineAnnealingLR(optimizer, T_max=D - W, eta_min=min_lr)
    scheduler = SequentialLR(optimizer, [warmup, decay], milestones=[W])
"""

import bisect
import math


class LRScheduler:
    """The base: subclasses give lr_at(t), the learning rate of each group at step t."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        name = type(self).__name__
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(
                    f"{name}: resuming at last_epoch={last_epoch} needs param_groups[{i}]['initial_lr'] "
                    "(load the optimizer's state_dict first, or start with last_epoch=-1)"
                )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, t):
        """The learning rate of each parameter group at step t."""
        raise NotImplementedError

    def get_lr(self):
        return self.lr_at(self.last_epoch)

    def step(self):
        """Move to the next step and set every group's lr (call it after optimizer.step())."""
        self.last_epoch += 1
        self._last_lr = self.lr_at(self.last_epoch)
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr

    def get_last_lr(self):
        """The learning rates the last step() set, one per group."""
        return list(self._last_lr)

    def state_dict(self):
        """Everything but the optimizer: the step count, base and last learning rates, the options."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


def _per_group(name, value, optimizer):
    """One value per parameter group: a list of them as given, or one value for all."""
    values = list(value) if isinstance(value, (list, tuple)) else [value] * len(optimizer.param_groups)
    if len(values) != len(optimizer.param_groups):
        raise ValueError(f"{name}: {len(values)} values for {len(optimizer.param_groups)} parameter groups")
    return values


class LambdaLR(LRScheduler):
    """lr(t) = base_lr * lr_lambda(t)   (lr_lambda: a function of t, or one per parameter group)"""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambdas = _per_group("LambdaLR", lr_lambda, optimizer)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t):
        return [base * f(t) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self):
        """As the base's, without the functions (code is not saved: the scheduler is rebuilt with them)."""
        return {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}


class StepLR(LRScheduler):
    """lr(t) = base_lr * gamma^floor(t / step_size): multiplied by gamma every step_size steps"""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if not (isinstance(step_size, int) and step_size > 0):
            raise ValueError(f"StepLR: step_size must be a positive integer, got {step_size!r}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t):
        return [base * self.gamma ** (t // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr(t) = eta_min + (base_lr - eta_min) (1 + cos(pi t / T_max)) / 2

    From base_lr at t = 0 down to eta_min at t = T_max, spending most steps near base_lr and
    landing gently. Past T_max the cosine rises again (period 2 T_max), as PyTorch's does.
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if not T_max > 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t):
        cosine = (1 + math.cos(math.pi * t / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


class LinearLR(LRScheduler):
    """lr(t) = base_lr * (start_factor + (end_factor - start_factor) min(t, total_iters) / total_iters)

    A straight line from start_factor * base_lr at t = 0 to end_factor * base_lr at t = total_iters,
    then flat: with end_factor 1, a linear warmup.
    """

    def __init__(self, optimizer, start_factor=1 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        if not (isinstance(total_iters, int) and total_iters >= 0):
            raise ValueError(f"LinearLR: total_iters must be a non-negative integer, got {total_iters!r}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t):
        done = min(t, self.total_iters) / self.total_iters if self.total_iters else 1.0
        factor = self.start_factor + (self.end_factor - self.start_factor) * done
        return [base * factor for base in self.base_lrs]


class SequentialLR(LRScheduler):
    """schedulers[0] until step milestones[0], then schedulers[1] counting from 0 again, and so on."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        schedulers, milestones = list(schedulers), list(milestones)
        if not schedulers:
            raise ValueError("SequentialLR: needs at least one scheduler")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR: {len(schedulers)} schedulers need {len(schedulers) - 1} milestones, got {milestones}"
            )
        if milestones != sorted(milestones):
            raise ValueError(f"SequentialLR: milestones must increase, got {milestones}")
        for i, s in enumerate(schedulers):
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: schedulers[{i}] steps another optimizer than this one")
        self._schedulers, self._milestones = schedulers, milestones
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t):
        i = bisect.bisect_right(self._milestones, t)
        start = self._milestones[i - 1] if i else 0
        return self._schedulers[i].lr_at(t - start)

    def state_dict(self):
        state = super().state_dict()
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        for s, saved in zip(self._schedulers, state.pop("_schedulers")):
            s.load_state_dict(saved)
        super().load_state_dict(state)
