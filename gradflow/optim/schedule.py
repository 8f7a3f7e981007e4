"""Learning-rate schedules: the learning rate as a function of the step (0-based)."""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Constant:
    """lr(t) = lr"""

    lr: float

    def __call__(self, step):
        return self.lr


@dataclass(frozen=True)
class WarmupCosine:
    """Linear warmup, then cosine decay to a floor:

        lr(t) = max_lr (t + 1) / warmup                                   for t < warmup
        lr(t) = min_lr + (max_lr - min_lr) (1 + cos(pi r)) / 2,  r = (t - warmup) / (decay - warmup)
        lr(t) = min_lr                                                    for t >= decay

    Warmup keeps the first updates small while Adam's second-moment estimate is still noisy; the
    cosine spends most steps near max_lr and lands gently on min_lr.
    """

    max_lr: float
    warmup: int
    decay: int  # the step at which min_lr is reached (usually the last step)
    min_lr: float = 0.0

    def __post_init__(self):
        if not 0 <= self.warmup <= self.decay:
            raise ValueError(f"WarmupCosine: need 0 <= warmup <= decay, got warmup {self.warmup}, decay {self.decay}")
        if not 0 <= self.min_lr <= self.max_lr:
            raise ValueError(f"WarmupCosine: need 0 <= min_lr <= max_lr, got {self.min_lr} and {self.max_lr}")

    def __call__(self, step):
        if step < self.warmup:
            return self.max_lr * (step + 1) / self.warmup
        if step >= self.decay:
            return self.min_lr
        r = (step - self.warmup) / (self.decay - self.warmup)
        return self.min_lr + (self.max_lr - self.min_lr) * 0.5 * (1 + math.cos(math.pi * r))


def set_lr(optimizer, lr):
    """Give every parameter group the learning rate lr."""
    for group in optimizer.param_groups:
        group["lr"] = lr
