"""Each fused op equals the same computation composed from primitive ops, in value and in gradient."""

import math

import numpy as np
import pytest

import gradflow as gf
from gradflow import functional as F


def _softmax(x, axis=-1):
    e = (x - x.data.max(axis=axis, keepdims=True)).exp()
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis=-1):
    m = x.data.max(axis=axis, keepdims=True)
    return x - ((x - m).exp().sum(axis=axis, keepdims=True).log() + m)


def _cross_entropy(z, t):
    picked = _log_softmax(z)[np.arange(len(t)), t]
    return -picked.mean()


def _layer_norm(x, w, b, eps=1e-5):
    xc = x - x.mean(axis=-1, keepdims=True)
    var = (xc * xc).mean(axis=-1, keepdims=True)
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
    "layer_norm": (lambda x, w, b: F.layer_norm(x, w, b), _layer_norm, [(2, 3, 8), (8,), (8,)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, w), _rms_norm, [(2, 3, 8), (8,)]),
    "gelu": (F.gelu, _gelu, [(3, 7)]),
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
def test_attention_without_a_graph_takes_the_short_path_to_the_same_numbers(causal):
    """Under no_grad a small attention (decoding a token) skips saving and chunking; same result."""
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


def test_attention_on_transposed_heads_equals_contiguous_and_hands_back_their_layout():
    """Heads are usually a transposed view of (B, T, n_heads * hs). The op's output and gradients
    come laid out like those views, so that transposing back to (B, T, ...) is a view, not a copy;
    the numbers are those of contiguous inputs."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((2, 5, 3, 4)) for _ in range(3)]  # (B, T, heads, hs)
    u = rng.standard_normal((2, 3, 5, 4))
    results = []
    for copy in (False, True):
        leaves = [gf.tensor(a, requires_grad=True) for a in arrays]
        q, k, v = (x.transpose(1, 2) for x in leaves)  # (B, heads, T, hs) views
        if copy:
            q, k, v = (gf.tensor(np.ascontiguousarray(x.data), requires_grad=True) for x in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, causal=True)
        out.backward(u)
        grads = [x.grad for x in leaves] if not copy else [x.grad.transpose(0, 2, 1, 3) for x in (q, k, v)]
        results.append((out.data.transpose(0, 2, 1, 3), *grads))
    for viewed, contiguous in zip(*results):
        np.testing.assert_allclose(viewed, contiguous, rtol=1e-12, atol=1e-14)
    for array in results[0]:  # (B, T, heads, hs) without a copy
        assert array.flags.c_contiguous


@pytest.mark.parametrize(
    "tq, tk, padded, p",
    [(7, 7, False, 0.0), (5, 9, False, 0.0), (9, 5, False, 0.0), (7, 7, True, 0.0), (6, 8, True, 0.5)],
)
def test_causal_attention_in_query_blocks_equals_one_block(monkeypatch, tq, tk, padded, p):
    """Blocks of 2 queries, each with only the keys its causal mask lets it see, give the numbers
    of one block over every key: with more keys than queries (a KV cache), with more queries than
    keys (the first queries see nothing), with a padding mask and with dropout."""
    from gradflow.ops import attention

    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((2, 3, tq, 4)), rng.standard_normal((2, 3, tk, 4)), rng.standard_normal((2, 3, tk, 5))
    mask = (np.arange(tk) < np.array([tk, tk - 2])[:, None])[:, None, None, :] if padded else None
    drop = (rng.random((2, 3, tq, tk)) >= p) / (1 - p) if p else None
    u = rng.standard_normal((2, 3, tq, 5))
    results = []
    for block in (2, 10**9):
        monkeypatch.setattr(attention, "QUERY_BLOCK", block)
        assert len(attention.query_blocks(tq, tk, True)) == (1 if block > tq else -(-tq // block))
        ts = [gf.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = gf.ops.ScaledDotProductAttention.apply(*ts, allowed=mask, causal=True, drop=drop)
        out.backward(u)
        results.append([out.data] + [t.grad for t in ts])
    for blocked, whole in zip(*results):
        np.testing.assert_allclose(blocked, whole, rtol=1e-12, atol=1e-14)


def test_causal_attention_in_query_blocks_passes_gradcheck(monkeypatch):
    from gradflow.ops import attention

    monkeypatch.setattr(attention, "QUERY_BLOCK", 2)
    rng = np.random.default_rng(4)
    q, k, v = (gf.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 5, 3), (2, 7, 3), (2, 7, 3)))
    assert len(attention.query_blocks(5, 7, True)) == 3
    assert gf.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True), q, k, v)
