"""Every differentiable op, one Function subclass each, forward and backward side by side.

These are the plain tier: written formula for formula, with the backward derived in each docstring.
gradflow/fast holds tuned kernels that replace a few of them (gradflow/kernels.py chooses).
"""

from .attention import ScaledDotProductAttention
from .elementwise import (
    Abs,
    Add,
    Clip,
    Div,
    Exp,
    Gelu,
    Log,
    Maximum,
    Minimum,
    Mul,
    Neg,
    Pow,
    Relu,
    Rsqrt,
    Sigmoid,
    Silu,
    Sqrt,
    Sub,
    Tanh,
)
from .index import Embedding, Index, MaskedFill, Where
from .linear import Linear
from .loss import CrossEntropy
from .matmul import Matmul
from .norm import LayerNorm, RMSNorm
from .reduce import LogSumExp, Max, Mean, Min, Sum, Var
from .rope import Rope
from .shape import Cat, Expand, Permute, Reshape, Stack
from .softmax import LogSoftmax, Softmax

__all__ = [
    "Abs", "Add", "Cat", "Clip", "CrossEntropy", "Div", "Embedding", "Exp", "Expand", "Gelu", "Index",
    "LayerNorm", "Linear", "Log", "LogSoftmax", "LogSumExp", "MaskedFill", "Matmul", "Max", "Maximum",
    "Mean", "Min", "Minimum", "Mul", "Neg", "Permute", "Pow", "RMSNorm", "Relu", "Reshape",
    "Rope", "Rsqrt", "ScaledDotProductAttention", "Sigmoid", "Silu", "Softmax", "Sqrt", "Stack", "Sub",
    "Sum", "Tanh", "Var", "Where",
]  # fmt: skip
