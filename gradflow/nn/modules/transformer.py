"""torch.nn.modules.transformer: the transformer's containers and layers, under PyTorch's path (gradflow's classes)."""

from gradflow.nn.decoder import Transformer, TransformerDecoder, TransformerDecoderLayer
from gradflow.nn.encoder import TransformerEncoder, TransformerEncoderLayer

__all__ = [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]
