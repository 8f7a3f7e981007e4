"""Optimizers with PyTorch's update formulas and defaults, so a learner's numbers match PyTorch's."""

from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]
