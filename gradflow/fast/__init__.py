"""The fast tier: tuned kernels, each replacing one plain op of gradflow/engine/ops with the same numbers.

Each file's docstring names the plain op it replaces, what it changes and why, and what that
was measured to save (benchmarks/kernels.py); tests/test_fast_kernels.py checks each one against
its plain op, value and gradient. gradflow/engine/kernels.py chooses the tier (fast unless asked).

Some kernels run compiled loops (loops.py, numba, where it has a wheel; compiled.py loads them on
first use, and where numba is absent those kernels run their numpy forms).

A kernel stays here only if it pays in a whole training step: what was measured and removed, and why,
is in docs/benchmarks.md ("Tried and removed").
"""

from gradflow.engine import box_muller, ops, rng
from gradflow.fast import (
    adam,
    attention,
    compiled_norm,
    cross_entropy,
    embedding,
    gelu,
    gelu_erf,
    mt19937,
    silu,
)
from gradflow.optim import adam as plain_adam

REPLACES = {
    plain_adam.adam_steps: adam.adam_steps,  # not an op: the optimizer's step, asked for by kernel() as the ops are
    plain_adam.adam_step: adam.adam_step,  # one parameter's, where the loop does not take it
    rng.draw_words: mt19937.draw_words,  # not an op either: the random generator's words
    rng.uniform53: mt19937.uniform53,  # and the words turned into numbers (engine/rng.py, engine/box_muller.py)
    rng.forward_swaps: mt19937.forward_swaps,
    box_muller.fma: mt19937.fma,
    box_muller.block_normals: mt19937.block_normals,
    ops.CrossEntropy: cross_entropy.CrossEntropy,
    ops.Embedding: embedding.Embedding,
    ops.Gelu: gelu.Gelu,
    ops.GeluErf: gelu_erf.GeluErf,
    ops.LayerNorm: compiled_norm.LayerNorm,
    ops.RMSNorm: compiled_norm.RMSNorm,
    ops.ScaledDotProductAttention: attention.ScaledDotProductAttention,
    ops.Silu: silu.Silu,
}
