"""Layers built on gradflow's public API: Module, Parameter, containers and the basic layers."""

from . import init
from .layers import Dropout, Embedding, LayerNorm, Linear, RMSNorm
from .module import Module, ModuleList, Parameter, Sequential

__all__ = [
    "Dropout", "Embedding", "LayerNorm", "Linear", "Module", "ModuleList", "Parameter", "RMSNorm",
    "Sequential", "init",
]  # fmt: skip
