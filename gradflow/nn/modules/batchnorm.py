"""torch.nn.modules.batchnorm: batch normalization, under the path PyTorch gives them (gradflow's own classes)."""

from gradflow.nn.batchnorm import BatchNorm1d

__all__ = ["BatchNorm1d"]
