"""The fast tier: tuned kernels, each replacing one plain op of gradflow/engine/ops with the same numbers.

Each file's docstring names the plain op it replaces, what it changes and why, and what that
was measured to save (benchmarks/kernels.py); tests/test_fast_kernels.py checks each one against
its plain op, value and gradient. gradflow/engine/kernels.py chooses the tier (fast unless asked).

Some kernels run compiled loops (loops.py, numba, the `fast` extra; compiled.py loads them on
first use, and where numba is absent those kernels run their numpy forms).

A kernel stays here only if it pays in a whole training step. Measured and removed: Linear's
products made 2-D, now the plain op's own form (one product of the stacked rows); RMSNorm with
einsum row sums (the baby GPT has no RMSNorm, so no step showed it paying); a thread pool that
shared large kernels among cores (never faster in a step on 2 cores). With numba: GELU's tanh
form as one loop calling the C library's tanh (on 2 cores, 6 times as slow as gelu.py's numpy
passes on one: 45 times as slow as numpy's vectorized tanh, element by element; the loop kept
computes its own exp, which vectorizes); Adam's update as one loop
on every core (the step 1.03 times as long: for the baby GPT's 43 weights of at most 65,536
values, waking the threads costs what the loop saves; on one core it pays: adam.py); LayerNorm's
rows shared out among the cores (slower than one core at 768 rows of 128); the attention's softmax
as a loop over rows calling the C library's exp (alone, its forward 1.3 times as fast as numpy's
passes and its backward half as fast; the loop kept now computes its own exp, which vectorizes).
With numba and Intel's SVML (vectorized tanh and exp; numba 0.61.2, intel-cmplr-lib-rt): GELU's
tanh form as one loop, 2.3 times as fast as gelu.py alone (0.31 against 0.70 ms), made the step
1.1 to 2.0% shorter (5 runs, in alternating rounds; two equal variants came out 0.4 to 2.1% apart);
the softmax loops of attention and cross-entropy, 1.6 and 3.6 times as fast alone, would save
another 0.8 ms. Two threads were no faster than one on any of them. Not kept: numba 0.62 and
later have no SVML (their LLVM has no SVML patch) and numpy 2.3 and later need them; the library
has wheels for Linux on x86-64 and Windows only; and pip puts it where numba does not look unless
LD_LIBRARY_PATH says so. Without SVML, a loop's tanh is 5 times as slow as gelu.py (numba 0.68);
the loops' own exp (loops.exp_of_nonpositive) replaces it.
Measured and removed: float32 normals in blocks of 16 (engine/box_muller.py's Cephes log and sincos
with exact fused multiply-adds) as one numba loop: equal to the last bit, but no faster than numpy's
passes (0.34 against 0.31 s for 1.6 million values on a busy machine; the exact multiply-add's error
terms keep the loop from being vectorized).
"""

from gradflow.engine import ops, rng
from gradflow.fast import adam, attention, compiled_norm, embedding, gelu, gelu_erf, mt19937
from gradflow.optim import adam as plain_adam

REPLACES = {
    plain_adam.adam_step: adam.adam_step,  # not an op: the optimizer's step, asked for by kernel() as the ops are
    rng.draw_words: mt19937.draw_words,  # not an op either: the random generator's words
    ops.Embedding: embedding.Embedding,
    ops.Gelu: gelu.Gelu,
    ops.GeluErf: gelu_erf.GeluErf,
    ops.LayerNorm: compiled_norm.LayerNorm,
    ops.ScaledDotProductAttention: attention.ScaledDotProductAttention,
}
