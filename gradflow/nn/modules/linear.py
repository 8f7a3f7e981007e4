"""torch.nn.modules.linear: Linear and Identity, under the path PyTorch gives them (gradflow's own classes)."""

from gradflow.nn.activations import Identity
from gradflow.nn.layers import Linear

NonDynamicallyQuantizableLinear = Linear  # PyTorch's MultiheadAttention.out_proj: a Linear

__all__ = ["Identity", "Linear", "NonDynamicallyQuantizableLinear"]
