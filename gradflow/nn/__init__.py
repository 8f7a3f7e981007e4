"""Layers built on gradflow's public API: Module, Parameter, containers, layers, attention, blocks."""

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
