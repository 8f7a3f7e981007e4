"""torch.nn.modules.module: Module, under the path PyTorch gives them (gradflow's own classes)."""

from gradflow.nn.module import Module

__all__ = ["Module"]
