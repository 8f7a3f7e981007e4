"""torch.nn.modules.activation: the activations and MultiheadAttention, under PyTorch's path (gradflow's classes)."""

from gradflow.nn.activations import (
    ELU,
    GELU,
    GLU,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from gradflow.nn.encoder import MultiheadAttention

__all__ = [
    "ELU",
    "GELU",
    "GLU",
    "Hardtanh",
    "LeakyReLU",
    "LogSigmoid",
    "LogSoftmax",
    "Mish",
    "MultiheadAttention",
    "ReLU",
    "ReLU6",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Tanh",
]
