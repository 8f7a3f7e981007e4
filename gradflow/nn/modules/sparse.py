"""torch.nn.modules.sparse: Embedding, under the path PyTorch gives them (gradflow's own classes)."""

from gradflow.nn.layers import Embedding

__all__ = ["Embedding"]
