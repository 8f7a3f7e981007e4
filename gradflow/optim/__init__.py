"""Optimizers with PyTorch's update formulas and defaults, so a learner's numbers match PyTorch's.

SGD with momentum, Adam, AdamW and RMSprop update Parameters in place from their .grad; a schedule sets
the learning rate of each step (a function of the step, or PyTorch's lr_scheduler classes, which
set optimizer.param_groups[i]["lr"]); clip_grad_norm scales all gradients together. They work on
arrays and Parameters only, so this folder imports nothing of gradflow but the engine.
"""

from gradflow.engine.grad_norm import clip_grad_norm
from gradflow.optim import lr_scheduler
from gradflow.optim.adam import Adam, AdamW
from gradflow.optim.optimizer import Optimizer
from gradflow.optim.rmsprop import RMSprop
from gradflow.optim.schedule import Constant, WarmupCosine, set_lr
from gradflow.optim.sgd import SGD

__all__ = [
    "SGD", "Adam", "AdamW", "RMSprop", "Constant", "Optimizer", "WarmupCosine", "clip_grad_norm", "lr_scheduler",
    "set_lr",
]  # fmt: skip
