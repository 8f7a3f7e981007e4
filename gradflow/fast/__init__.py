"""The fast tier: tuned kernels, each replacing one plain op of gradflow/ops with the same numbers.

Each file's docstring names the plain op it replaces, what it changes and why, and what that
was measured to save (benchmarks/kernels.py); tests/test_fast_kernels.py checks each one against
its plain op, value and gradient. gradflow.kernels chooses the tier (fast unless asked).
"""

from .. import ops
from . import attention, embedding, gelu, linear, norm

REPLACES = {
    ops.Gelu: gelu.Gelu,
    ops.Embedding: embedding.Embedding,
    ops.LayerNorm: norm.LayerNorm,
    ops.Linear: linear.Linear,
    ops.RMSNorm: norm.RMSNorm,
    ops.ScaledDotProductAttention: attention.ScaledDotProductAttention,
}
