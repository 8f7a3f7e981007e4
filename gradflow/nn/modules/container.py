"""torch.nn.modules.container: the containers, under the path PyTorch gives them (gradflow's own classes)."""

from gradflow.nn.module import ModuleDict, ModuleList, Sequential

__all__ = ["ModuleDict", "ModuleList", "Sequential"]
