"""Layers built on gradflow's public API: Module, Parameter, containers, layers, attention, blocks."""

from . import init
from .attention import KVCache, MultiHeadAttention, padding_mask
from .blocks import TransformerBlock
from .ffn import MLP, SwiGLU
from .layers import Dropout, Embedding, LayerNorm, Linear, RMSNorm
from .module import Module, ModuleList, Parameter, Sequential
from .positional import LearnedPositionalEncoding, RotaryEmbedding, SinusoidalPositionalEncoding, sinusoidal_table

__all__ = [
    "MLP", "Dropout", "Embedding", "KVCache", "LayerNorm", "LearnedPositionalEncoding", "Linear", "Module",
    "ModuleList", "MultiHeadAttention", "Parameter", "RMSNorm", "RotaryEmbedding", "Sequential",
    "SinusoidalPositionalEncoding", "SwiGLU", "TransformerBlock", "init", "padding_mask", "sinusoidal_table",
]  # fmt: skip
