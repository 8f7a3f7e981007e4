"""The fast tier: tuned kernels, each replacing one plain op of gradflow/engine/ops with the same numbers.

Each file's docstring names the plain op it replaces, what it changes and why, and what that
was measured to save (benchmarks/kernels.py); tests/test_fast_kernels.py checks each one against
its plain op, value and gradient. gradflow/engine/kernels.py chooses the tier (fast unless asked).

A kernel stays here only if it pays in a whole training step. Measured and removed: Linear's
products made 2-D, now the plain op's own form (one product of the stacked rows); RMSNorm with
einsum row sums (the baby GPT has no RMSNorm, so no step showed it paying); a thread pool that
shared large kernels among cores (never faster in a step on 2 cores).
"""

from gradflow.engine import ops
from gradflow.fast import attention, embedding, gelu, gelu_erf, parallel_norm

REPLACES = {
    ops.Embedding: embedding.Embedding,
    ops.Gelu: gelu.Gelu,
    ops.GeluErf: gelu_erf.GeluErf,
    ops.LayerNorm: parallel_norm.LayerNorm,
    ops.ScaledDotProductAttention: attention.ScaledDotProductAttention,
}
