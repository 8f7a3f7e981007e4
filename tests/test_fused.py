"""Each fused op equals the same computation composed from primitive ops, in value and in gradient."""

import math

import numpy as np
import pytest

import gradflow as gf
from gradflow.nn import functional as F


def _softmax(x, axis=-1):
    e = (x - x.data.max(axis=axis, keepdims=True)).exp()
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis=-1):
    m = x.data.max(axis=axis, keepdims=True)
    return x - ((x - m).exp().sum(axis=axis, keepdims=True).log() + m)


def _cross_entropy(z, t):
    picked = _log_softmax(z)[np.arange(len(t)), t]
    return -picked.mean()


def _layer_norm(x, w, b, eps=1e-5, axis=-1):
    xc = x - x.mean(axis=axis, keepdims=True)
    var = (xc * xc).mean(axis=axis, keepdims=True)
    return xc * (var + eps).rsqrt() * w + b


def _rms_norm(x, w, eps=1e-6):
    return x * ((x * x).mean(axis=-1, keepdims=True) + eps).rsqrt() * w


def _gelu(x):
    return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)).tanh())


def _attention(q, k, v, allowed):
    scores = (q @ k.swapaxes(-1, -2)) / math.sqrt(q.shape[-1])
    return _softmax(scores.masked_fill(~allowed, -np.inf)) @ v


def _rope(x, cos, sin, interleaved):
    """The rotation written with slices: a' = a cos - b sin, b' = a sin + b cos, pairs put back in place."""
    half = x.shape[-1] // 2
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :half], x[..., half:])
    a_rot, b_rot = a * cos - b * sin, a * sin + b * cos
    if interleaved:
        return gf.stack([a_rot, b_rot], axis=-1).reshape(x.shape)
    return gf.cat([a_rot, b_rot], axis=-1)


ROPE_TABLE = (np.cos(np.arange(5)[:, None] * 0.5 ** np.arange(4)), np.sin(np.arange(5)[:, None] * 0.5 ** np.arange(4)))


def _logsumexp(x):
    m = x.data.max(axis=-1, keepdims=True)
    return ((x - m).exp().sum(axis=-1, keepdims=True).log() + m).squeeze(-1)


TARGETS = np.array([1, 0, 3, 3])
CAUSAL = np.tril(np.ones((5, 5), dtype=bool))

PAIRS = {
    "softmax": (lambda x: F.softmax(x), _softmax, [(4, 6)]),
    "softmax axis 0": (lambda x: F.softmax(x, axis=0), lambda x: _softmax(x, axis=0), [(4, 6)]),
    "log_softmax": (lambda x: F.log_softmax(x), _log_softmax, [(4, 6)]),
    "logsumexp": (lambda x: x.logsumexp(axis=-1), _logsumexp, [(4, 6)]),
    "cross_entropy": (lambda z: F.cross_entropy(z, TARGETS), lambda z: _cross_entropy(z, TARGETS), [(4, 5)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (8,), w, b), _layer_norm, [(2, 3, 8), (8,), (8,)]),
    "layer_norm over two axes": (
        lambda x, w, b: F.layer_norm(x, (3, 8), w, b),
        lambda x, w, b: _layer_norm(x, w, b, axis=(-2, -1)),
        [(2, 3, 8), (3, 8), (3, 8)],
    ),
    "rms_norm": (lambda x, w: F.rms_norm(x, w.shape, w), _rms_norm, [(2, 3, 8), (8,)]),
    "gelu": (lambda x: F.gelu(x, approximate="tanh"), _gelu, [(3, 7)]),
    "silu": (F.silu, lambda x: x * x.sigmoid(), [(3, 7)]),
    "var": (lambda x: x.var(axis=1), lambda x: ((x - x.mean(axis=1, keepdims=True)) ** 2).mean(axis=1), [(3, 7)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), lambda x, w, b: x @ w.T + b, [(2, 3, 4), (5, 4), (5,)]),
    "rope halves": (lambda x: F.rope(x, *ROPE_TABLE), lambda x: _rope(x, *ROPE_TABLE, False), [(2, 3, 5, 8)]),
    "rope interleaved": (
        lambda x: F.rope(x, *ROPE_TABLE, interleaved=True),
        lambda x: _rope(x, *ROPE_TABLE, True),
        [(2, 3, 5, 8)],
    ),
    "attention causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True),
        lambda q, k, v: _attention(q, k, v, CAUSAL),
        [(2, 3, 5, 4), (2, 3, 5, 4), (2, 3, 5, 6)],
    ),
    "attention float attn_mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]) + m) @ v,
        [(2, 3, 5, 4), (2, 3, 5, 4), (2, 3, 5, 6), (5, 5)],
    ),
}


@pytest.mark.parametrize("name", PAIRS)
def test_fused_equals_composed(name):
    fused, composed, shapes = PAIRS[name]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) * 3 for s in shapes]
    results = []
    for fn in (fused, composed):
        xs = [gf.tensor(a, requires_grad=True) for a in arrays]
        y = fn(*xs)
        u = np.random.default_rng(1).standard_normal(y.shape)
        y.backward(u)
        results.append((y.data, [x.grad for x in xs]))
    (y1, g1), (y2, g2) = results
    np.testing.assert_allclose(y1, y2, rtol=1e-10, atol=1e-12)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_fused_ops_are_one_node():
    x = gf.randn(3, 4, requires_grad=True)
    assert F.softmax(x).grad_fn.inputs == (x,)
    assert F.cross_entropy(x, np.array([0, 1, 2])).grad_fn.name == "cross_entropy"
    assert F.layer_norm(x).grad_fn.name == "layer_norm"


@pytest.mark.parametrize("causal", [False, True])
def test_attention_without_a_graph_gives_the_numbers_of_a_recorded_one(causal):
    """Under no_grad (decoding a token) attention saves nothing for backward; same result."""
    rng = np.random.default_rng(0)
    q, k, v = (
        rng.standard_normal((1, 3, 3, 2, 8)),
        rng.standard_normal((1, 3, 1, 5, 8)),
        rng.standard_normal((1, 3, 1, 5, 8)),
    )
    recorded = F.scaled_dot_product_attention(
        gf.tensor(q, requires_grad=True), gf.tensor(k), gf.tensor(v), causal=causal
    )
    with gf.no_grad():
        short = F.scaled_dot_product_attention(gf.tensor(q), gf.tensor(k), gf.tensor(v), causal=causal)
    assert short.shape == recorded.shape == (1, 3, 3, 2, 8)
    np.testing.assert_allclose(short.data, recorded.data, rtol=1e-12, atol=1e-14)
