"""Neural-network layers: Module and Parameter, containers, layers, attention, positions, blocks, and F.

functional.py (imported as F) holds the functions a transformer is made of (softmax,
cross_entropy, layer_norm, attention, ...), each one call to an op of gradflow/engine/ops;
the Modules here hold the parameters and call F. Read layers.py first, then attention.py.
Built on the engine only: nothing here knows of training, text or the command line.
"""

from gradflow.nn import init
from gradflow.nn.attention import KVCache, MultiHeadAttention, padding_mask
from gradflow.nn.blocks import TransformerBlock
from gradflow.nn.ffn import MLP, SwiGLU
from gradflow.nn.layers import Dropout, Embedding, LayerNorm, Linear, RMSNorm
from gradflow.nn.module import Module, ModuleList, Parameter, Sequential
from gradflow.nn.positional import (
    LearnedPositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_table,
)

__all__ = [
    "MLP", "Dropout", "Embedding", "KVCache", "LayerNorm", "LearnedPositionalEncoding", "Linear", "Module",
    "ModuleList", "MultiHeadAttention", "Parameter", "RMSNorm", "RotaryEmbedding", "Sequential",
    "SinusoidalPositionalEncoding", "SwiGLU", "TransformerBlock", "init", "padding_mask", "sinusoidal_table",
]  # fmt: skip
