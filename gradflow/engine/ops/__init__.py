"""Every differentiable op, one Function subclass each, forward and backward side by side.

These are the plain tier: written formula for formula, with the backward derived in each docstring.
gradflow/fast holds tuned kernels that replace a few of them (gradflow/engine/kernels.py chooses).
composed.py writes each fused op again with primitive ops, and tests/test_fused.py proves them equal.
"""

from gradflow.engine.ops.attention import ScaledDotProductAttention
from gradflow.engine.ops.cumsum import Cumsum
from gradflow.engine.ops.einsum import Einsum
from gradflow.engine.ops.elementwise import (
    Abs,
    Add,
    Clip,
    Cos,
    Div,
    Exp,
    Gelu,
    GeluErf,
    Log,
    Log1p,
    Maximum,
    Minimum,
    Mul,
    Neg,
    Pow,
    Relu,
    Rsqrt,
    Sigmoid,
    Silu,
    Sin,
    Sqrt,
    Sub,
    Tanh,
)
from gradflow.engine.ops.index import Embedding, Gather, Index, IndexPut, MaskedFill, ScatterAdd, Where
from gradflow.engine.ops.linear import Linear
from gradflow.engine.ops.linear_cross_entropy import LinearCrossEntropy
from gradflow.engine.ops.loss import CrossEntropy
from gradflow.engine.ops.matmul import Matmul
from gradflow.engine.ops.norm import LayerNorm, RMSNorm
from gradflow.engine.ops.prod import Prod
from gradflow.engine.ops.reduce import LogSumExp, Max, Mean, Min, Sum, Var
from gradflow.engine.ops.rope import Rope
from gradflow.engine.ops.shape import Cat, Expand, Flip, Pad, Permute, Reshape, Roll, Stack
from gradflow.engine.ops.softmax import LogSoftmax, Softmax

__all__ = [
    "Abs", "Add", "Cat", "Clip", "Cos", "CrossEntropy", "Cumsum", "Div", "Einsum", "Embedding", "Exp", "Expand",
    "Flip", "Gather", "Gelu", "GeluErf", "Index", "IndexPut", "LayerNorm", "Linear", "LinearCrossEntropy", "Log",
    "Log1p", "LogSoftmax", "LogSumExp",
    "MaskedFill", "Matmul", "Max", "Maximum", "Mean", "Min", "Minimum", "Mul", "Neg", "Pad", "Permute", "Pow", "Prod",
    "RMSNorm", "Relu", "Reshape", "Rope", "Roll", "Rsqrt", "ScaledDotProductAttention", "ScatterAdd", "Sigmoid",
    "Silu", "Sin", "Softmax", "Sqrt", "Stack", "Sub", "Sum", "Tanh", "Var", "Where",
]  # fmt: skip
