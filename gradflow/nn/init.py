"""Creating and initialising parameters, in place, from gradflow's seeded generator.

GPT-2 and Llama draw every Linear and Embedding weight from N(0, 0.02^2) with zero biases, and
GPT-2 shrinks the projections that write into the residual stream to std 0.02 / sqrt(2 n_layer),
so that the sum of 2 n_layer residual updates keeps a variance of order one. Linear's own default
is PyTorch's: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias; Embedding's is N(0, 1).

Xavier (Glorot and Bengio, "Understanding the difficulty of training deep feedforward neural networks")
keeps the variance of both the activations and the gradients: Var(w) = gain^2 2 / (fan_in + fan_out).
Kaiming (He et al., "Delving deep into rectifiers") keeps one of them through ReLU layers, which halve
the variance: Var(w) = gain^2 / fan, gain^2 = 2 for ReLU. A uniform U(-a, a) has variance a^2 / 3, so
its bound is a = sqrt(3) std. fan_in and fan_out are PyTorch's: a weight (out, in, *kernel) has
fan_in = in * prod(kernel) and fan_out = out * prod(kernel).

Inside `with meta():` parameters have their shapes but no memory (a zero-strided view of one
number), so a 500M-parameter configuration can be built and counted on any laptop.
"""

import math
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
        p.data = generator().normal(p.shape, p.dtype, mean, std)
    return p


def uniform_(p, a=0.0, b=1.0):
    """p ~ U(a, b), in place."""
    if not _meta:
        p.data = generator().uniform(p.shape, p.dtype, a, b)
    return p


def zeros_(p):
    if not _meta:
        p.data = np.zeros(p.shape, p.dtype)
    return p


def ones_(p):
    if not _meta:
        p.data = np.ones(p.shape, p.dtype)
    return p


def constant_(p, val):
    """p = val everywhere, in place."""
    if not _meta:
        p.data = np.full(p.shape, val, p.dtype)
    return p


def trunc_normal_(p, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """p ~ N(mean, std^2) kept inside [a, b] (bounds in p's units, as PyTorch's), in place: a draw that
    falls outside is drawn again. The interval must hold some of the distribution: at least 1e-4 of it."""
    z_a, z_b = (a - mean) / std, (b - mean) / std
    mass = 0.5 * (math.erf(z_b / math.sqrt(2)) - math.erf(z_a / math.sqrt(2)))
    if not mass >= 1e-4:
        raise ValueError(f"trunc_normal_: [a, b] = [{a}, {b}] holds {mass:.2g} of N({mean}, {std}^2); it needs 1e-4")
    if not _meta:
        x = generator().normal(p.shape, np.float64)
        outside = (x < z_a) | (x > z_b)
        while outside.any():
            x[outside] = generator().normal(int(outside.sum()), np.float64)
            outside = (x < z_a) | (x > z_b)
        p.data = (mean + std * x).astype(p.dtype)
    return p


def calculate_gain(nonlinearity, param=None):
    """The factor that keeps a layer's output variance for this nonlinearity, as PyTorch's: 1 for linear
    and sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu (slope 0.01
    unless param gives it), 3/4 for selu."""
    gains = {"linear": 1.0, "identity": 1.0, "sigmoid": 1.0, "tanh": 5 / 3, "relu": math.sqrt(2.0), "selu": 0.75}
    gains |= dict.fromkeys(("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d"), 1.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity not in gains:
        raise ValueError(
            f"calculate_gain: unknown nonlinearity {nonlinearity!r} (one of {', '.join(gains)}, leaky_relu)"
        )
    return gains[nonlinearity]


def fans(op, p):
    """(fan_in, fan_out) of a weight of shape (out, in, *kernel): in and out times the kernel's size."""
    if p.ndim < 2:
        raise ValueError(f"{op}: fan in and fan out need a weight of at least 2 dimensions, got shape {p.shape}")
    kernel = math.prod(p.shape[2:])
    return p.shape[1] * kernel, p.shape[0] * kernel


def xavier_uniform_(p, gain=1.0):
    """p ~ U(-a, a), a = gain sqrt(6 / (fan_in + fan_out)): std gain sqrt(2 / (fan_in + fan_out)), in place."""
    fan_in, fan_out = fans("xavier_uniform_", p)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / (fan_in + fan_out))
    return uniform_(p, -bound, bound)


def xavier_normal_(p, gain=1.0):
    """p ~ N(0, std^2), std = gain sqrt(2 / (fan_in + fan_out)), in place."""
    fan_in, fan_out = fans("xavier_normal_", p)
    return normal_(p, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_std(op, p, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{op}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = fans(op, p)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


def kaiming_uniform_(p, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """p ~ U(-b, b), b = sqrt(3) gain / sqrt(fan): std gain / sqrt(fan), fan = fan_in (or fan_out), in place;
    PyTorch's defaults (leaky_relu with slope a = 0 has the gain sqrt(2) of relu)."""
    bound = math.sqrt(3.0) * _kaiming_std("kaiming_uniform_", p, a, mode, nonlinearity)
    return uniform_(p, -bound, bound)


def kaiming_normal_(p, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """p ~ N(0, std^2), std = gain / sqrt(fan), in place (see kaiming_uniform_)."""
    return normal_(p, 0.0, _kaiming_std("kaiming_normal_", p, a, mode, nonlinearity))
