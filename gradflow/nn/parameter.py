"""torch.nn.parameter: Parameter, under the path PyTorch gives it (gradflow's own class)."""

from gradflow.nn.module import Parameter

__all__ = ["Parameter"]
