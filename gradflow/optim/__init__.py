"""Optimizers with PyTorch's update formulas and defaults, so a learner's numbers match PyTorch's."""

from .adam import Adam, AdamW
from .clip import clip_grad_norm
from .optimizer import Optimizer
from .schedule import Constant, WarmupCosine, set_lr
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Constant", "Optimizer", "WarmupCosine", "clip_grad_norm", "set_lr"]
