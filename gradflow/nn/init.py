"""Creating and initialising parameters, in place, from gradflow's seeded generator.

GPT-2 and Llama draw every Linear and Embedding weight from N(0, 0.02^2) with zero biases, and
GPT-2 shrinks the projections that write into the residual stream to std 0.02 / sqrt(2 n_layer),
so that the sum of 2 n_layer residual updates keeps a variance of order one. Linear's own default
is PyTorch's: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.

Inside `with meta():` parameters have their shapes but no memory (a zero-strided view of one
number), so a 500M-parameter configuration can be built and counted on any laptop.
"""

from contextlib import contextmanager

import numpy as np

from gradflow.engine.dtype import get_default_dtype
from gradflow.engine.rng import generator
from gradflow.nn.module import Parameter

_meta = False


@contextmanager
def meta():
    """Build modules whose parameters have shapes but no storage: for counting, not computing."""
    global _meta
    previous, _meta = _meta, True
    try:
        yield
    finally:
        _meta = previous


def parameter(*shape, dtype=None):
    """A zero Parameter of `shape` (shape-only inside `meta()`)."""
    dtype = np.dtype(dtype or get_default_dtype())
    data = np.broadcast_to(np.zeros((), dtype), shape) if _meta else np.zeros(shape, dtype)
    p = Parameter.__new__(Parameter)
    p._init(data, True, None)
    return p


def normal_(p, mean=0.0, std=1.0):
    """p ~ N(mean, std^2), in place; PyTorch's argument order (mean first)."""
    if not _meta:
        p.data = (mean + std * generator().standard_normal(p.shape)).astype(p.dtype)
    return p


def uniform_(p, a=0.0, b=1.0):
    """p ~ U(a, b), in place."""
    if not _meta:
        p.data = generator().uniform(a, b, p.shape).astype(p.dtype)
    return p


def zeros_(p):
    if not _meta:
        p.data = np.zeros(p.shape, p.dtype)
    return p


def ones_(p):
    if not _meta:
        p.data = np.ones(p.shape, p.dtype)
    return p
