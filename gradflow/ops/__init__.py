"""Every differentiable op, one Function subclass each, forward and backward side by side."""

from .. import memory
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
from .index import Index, MaskedFill, Where
from .linear import Linear
from .loss import CrossEntropy
from .matmul import Matmul
from .norm import LayerNorm, RMSNorm
from .reduce import LogSumExp, Max, Mean, Min, Sum, Var
from .rope import Rope
from .shape import Cat, Expand, Permute, Reshape, Stack
from .softmax import LogSoftmax, Softmax

memory.keep_freed_memory()  # the ops' arrays reuse freed memory without page faults (gradflow/memory.py)

__all__ = [
    "Abs", "Add", "Cat", "Clip", "CrossEntropy", "Div", "Exp", "Expand", "Gelu", "Index",
    "LayerNorm", "Linear", "Log", "LogSoftmax", "LogSumExp", "MaskedFill", "Matmul", "Max", "Maximum",
    "Mean", "Min", "Minimum", "Mul", "Neg", "Permute", "Pow", "RMSNorm", "Relu", "Reshape",
    "Rope", "Rsqrt", "ScaledDotProductAttention", "Sigmoid", "Silu", "Softmax", "Sqrt", "Stack", "Sub",
    "Sum", "Tanh", "Var", "Where",
]  # fmt: skip
