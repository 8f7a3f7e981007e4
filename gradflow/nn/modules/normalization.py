"""torch.nn.modules.normalization: LayerNorm and RMSNorm, under the path PyTorch gives them (gradflow's own classes)."""

from gradflow.nn.layers import LayerNorm, RMSNorm

__all__ = ["LayerNorm", "RMSNorm"]
