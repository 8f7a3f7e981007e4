"""torch.nn.modules.flatten: Flatten, under the path PyTorch gives them (gradflow's own classes)."""

from gradflow.nn.layers import Flatten

__all__ = ["Flatten"]
