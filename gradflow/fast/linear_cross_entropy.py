"""The head and its loss with cross-entropy's loops: replaces ops.LinearCrossEntropy
(gradflow/engine/ops/linear_cross_entropy.py), same formulas.

What changes: the plain op turns each chunk of logits into losses and D = w (p - onehot(t)) in
numpy's passes over the whole chunk (max, subtract, exp, sum, log, divide, subtract one, multiply),
each making an array of the chunk's size; a language model's chunk is a few rows of its whole
vocabulary (85 rows of 49,152 for SmolLM2), so these passes are most of the op's time outside its
products. Here the chunk goes through the two loops fast.cross_entropy uses (gradflow/fast/loops.py),
a row at a time while it sits in the cache: cross_entropy_softmax makes p and logsumexp, and
cross_entropy_backward makes D in the logits' buffer. The products (z = x W^T, D W, D^T x) are the
plain op's. The losses and D are the plain op's up to rounding (a few ulps: the sum's order, p as
e / sum, the loops' exp), as fast.cross_entropy's are. Where numba is absent, or the logits are not
float32 or float64, the plain op's passes run.

Measured (one chunk of SmolLM2's head: 85 rows of 49,152 float32 logits, medians of 7 calls, 2-core AMD
EPYC with AVX2, while other work ran): the losses and D in 10.5 ms against the plain passes' 26 to 28;
the chunk's two products take 46 ms each, so a LoRA step's head and loss (7 to 8 chunks) saves about
120 ms of its 3.4 s.
"""

import numpy as np

from gradflow.engine import ops
from gradflow.fast import compiled


class LinearCrossEntropy(ops.LinearCrossEntropy):
    """L = reduce over n of logsumexp(z_n) - z_n[t_n],  z_n = W x_n + b, as ops.LinearCrossEntropy; each
    chunk's softmax and D one loop over rows."""

    @staticmethod
    def rows_of_softmax(z, t, weight, wants_d):
        loops = compiled.loops_for(z.dtype)
        if loops is None or not z.flags.c_contiguous:
            return ops.LinearCrossEntropy.rows_of_softmax(z, t, weight, wants_d)
        t = t.astype(np.int64, copy=False)
        picked = z[np.arange(len(t)), t]  # read before z's buffer holds D
        p, lse = np.empty_like(z), np.empty(len(t), z.dtype)
        loops.cross_entropy_softmax(z, p, lse)  # p apart from z: in z's buffer the loop ran 3.3 times as long
        losses = lse - picked
        if not wants_d:
            return losses, None
        loops.cross_entropy_backward(p, t, np.ascontiguousarray(weight, dtype=z.dtype), z)  # D, in z's buffer
        return losses, z
