"""Weight initialisations, in place, drawn from gradflow's seeded generator.

GPT-2 and Llama draw every Linear and Embedding weight from N(0, 0.02^2) with zero biases, and
GPT-2 shrinks the projections that write into the residual stream to std 0.02 / sqrt(2 n_layer),
so that the sum of 2 n_layer residual updates keeps a variance of order one. Linear's own default
is PyTorch's: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
"""

import numpy as np

from ..rng import generator


def normal_(p, std=0.02, mean=0.0):
    p.data = (mean + std * generator().standard_normal(p.shape)).astype(p.dtype)
    return p


def uniform_(p, low, high):
    p.data = generator().uniform(low, high, p.shape).astype(p.dtype)
    return p


def zeros_(p):
    p.data = np.zeros(p.shape, p.dtype)
    return p


def ones_(p):
    p.data = np.ones(p.shape, p.dtype)
    return p
