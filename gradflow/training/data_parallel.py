"""Data parallelism: each process computes the gradient of its shard of the batch, and the shards' sum is the batch's.

The loss of a batch of n rows is the mean of its rows' losses, so cut into shards of n_s rows

    L = sum_s (n_s / n) L_s        and so        dL/dtheta = sum_s (n_s / n) dL_s/dtheta

Each process runs forward and backward on its own shard with the same weights, its loss scaled by
n_s / n, and the shards' gradients are summed (an all-reduce). The sum is the whole batch's
gradient, up to float rounding, as long as every row has the same number of counted targets (true
of language-model batches, where every position has a target).

The shards are shards(n, parts), the same cut in every process. Shard s draws its dropout masks
from a generator seeded with the s-th of shard_seeds(parts), which are drawn from gradflow's
generator: every process draws the same seeds, so gradflow's generator advances alike in all of
them and stays the one random state a checkpoint needs. (One process would draw one mask for the
whole batch instead: with dropout the run is the same in distribution, not mask for mask.)

Why processes and not threads: numpy runs LayerNorm, GELU, softmax and the rest on one core, and
Python threads running them side by side wait for each other wherever Python itself runs (the
GIL). Measured on 2 cores (baby GPT): two threads, each on half the batch with one BLAS thread,
took 0.91 times as long a step as one process with default threads (OpenBLAS's AVX2 kernels) and
0.96 (its AVX-512 ones); two MPI ranks 0.69 to 0.85. Processes have a GIL each.

This file is the math; gradflow.training.distributed runs it over MPI, on one machine or many.
"""

import contextlib

import numpy as np

from gradflow.engine.autograd import no_grad
from gradflow.engine.rng import generator, get_rng_state, manual_seed, set_rng_state


def shards(n, parts):
    """Row slices cutting range(n) into at most `parts` nearly equal, non-empty pieces."""
    parts = max(1, min(parts, n))
    bounds = [n * i // parts for i in range(parts + 1)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def shard_seeds(parts):
    """One seed per shard, drawn from gradflow's generator (the one a checkpoint saves)."""
    return [int(s) for s in generator().integers(0, 2**63, (parts,))]


@contextlib.contextmanager
def own_stream(seed):
    """Inside, gradflow's random draws (dropout masks) come from a generator seeded with `seed`;
    after, gradflow's generator is back where it was."""
    state = get_rng_state()
    manual_seed(seed)
    try:
        yield
    finally:
        set_rng_state(state)


def shard_loss(model, x, y, weight, backward):
    """weight * the loss of model(x, y), a float; with backward, weight * its gradient is added to the params' .grad."""
    if not backward:
        with no_grad():
            return weight * model(x, y)[1].item()
    _, loss = model(x, y)
    loss.backward(np.full(loss.shape, weight, loss.dtype))
    return weight * loss.item()


class WorkerError(RuntimeError):
    """A process computing a shard failed; the message's first line says which and how."""
