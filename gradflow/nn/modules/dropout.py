"""torch.nn.modules.dropout: dropout, under the path PyTorch gives them (gradflow's own classes)."""

from gradflow.nn.layers import Dropout

__all__ = ["Dropout"]
