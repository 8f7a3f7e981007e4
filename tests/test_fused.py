"""Each fused op equals its reference, the same computation composed from primitive ops
(gradflow/engine/ops/composed.py), in value and in gradient: the hand-derived backward is right."""

import numpy as np
import pytest

import gradflow as gf
from gradflow.engine.ops import composed
from gradflow.nn import functional as F

TARGETS = np.array([1, 0, 3, 3])
IDS = np.array([[0, 3, 3], [4, 1, 0]])  # repeated ids: their rows' gradients add up
ROPE_TABLE = (np.cos(np.arange(5)[:, None] * 0.5 ** np.arange(4)), np.sin(np.arange(5)[:, None] * 0.5 ** np.arange(4)))

FUSED = {  # each computation ends in one fused op: (the computation, its inputs' shapes)
    "softmax": (lambda x: F.softmax(x), [(4, 6)]),
    "softmax axis 0": (lambda x: F.softmax(x, axis=0), [(4, 6)]),
    "log_softmax": (lambda x: F.log_softmax(x), [(4, 6)]),
    "logsumexp": (lambda x: x.logsumexp(axis=-1), [(4, 6)]),
    "logsumexp over two axes, kept": (lambda x: x.logsumexp(axis=(0, 2), keepdims=True), [(3, 4, 5)]),
    "cross_entropy": (lambda z: F.cross_entropy(z, TARGETS), [(4, 5)]),
    "cross_entropy ignoring a row": (lambda z: F.cross_entropy(z, np.array([1, 0, 3, -100])), [(4, 5)]),
    "cross_entropy sum": (lambda z: F.cross_entropy(z, TARGETS, reduction="sum"), [(4, 5)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (8,), w, b), [(2, 3, 8), (8,), (8,)]),
    "layer_norm without weights": (lambda x: F.layer_norm(x, (8,)), [(2, 3, 8)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, w.shape, w), [(2, 3, 8), (8,)]),
    "gelu": (lambda x: F.gelu(x, approximate="tanh"), [(3, 7)]),
    "silu": (F.silu, [(3, 7)]),
    "var": (lambda x: x.var(axis=1), [(3, 7)]),
    "var unbiased": (lambda x: x.var(dim=1), [(3, 7)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(2, 3, 4), (5, 4), (5,)]),
    "embedding": (lambda w: F.embedding(IDS, w), [(5, 4)]),
    "rope halves": (lambda x: F.rope(x, *ROPE_TABLE), [(2, 3, 5, 8)]),
    "rope interleaved": (lambda x: F.rope(x, *ROPE_TABLE, interleaved=True), [(2, 3, 5, 8)]),
    "attention causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True),
        [(2, 3, 5, 4), (2, 3, 5, 4), (2, 3, 5, 6)],
    ),
    "attention float attn_mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        [(2, 3, 5, 4), (2, 3, 5, 4), (2, 3, 5, 6), (5, 5)],
    ),
    "attention with a bias, one batch axis": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        [(2, 5, 4), (2, 5, 4), (2, 5, 6), (5, 5)],
    ),
    "attention, fewer queries than keys": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True),
        [(2, 2, 4), (2, 5, 4), (2, 5, 6)],
    ),
}


def values_and_grads(fn, arrays):
    """fn's value, the gradients of its inputs from one upstream gradient, and the last op it ran."""
    xs = [gf.tensor(a, requires_grad=True) for a in arrays]
    y = fn(*xs)
    y.backward(np.random.default_rng(1).standard_normal(y.shape))
    return y.data, [x.grad for x in xs], y.grad_fn


def as_its_reference(node):
    """The reference of a fused op's node, called as the explorer calls it: on the op's inputs (an
    optional one not given is None) with the op's constants."""
    reference = composed.REFERENCES[node.name]
    return lambda *xs: reference(*xs, *[None] * (len(node.inputs) - len(xs)), **node.params)


def assert_same(fused, reference):
    (y1, g1, _), (y2, g2, _) = fused, reference
    np.testing.assert_allclose(y1, y2, rtol=1e-10, atol=1e-12)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def inputs(shapes):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s) * 3 for s in shapes]


@pytest.mark.parametrize("name", FUSED)
def test_fused_equals_composed(name):
    fn, shapes = FUSED[name]
    arrays = inputs(shapes)
    fused = values_and_grads(fn, arrays)
    node = fused[2]
    assert node.name in composed.REFERENCES, node.name
    assert_same(fused, values_and_grads(as_its_reference(node), arrays))


def test_every_reference_is_proved_equal_to_its_fused_op():
    proved = {values_and_grads(fn, inputs(shapes))[2].name for fn, shapes in FUSED.values()}
    assert proved == set(composed.REFERENCES)


def test_layer_norm_over_two_axes_is_the_reference_over_both_flattened():
    arrays = inputs([(2, 3, 8), (3, 8), (3, 8)])
    assert_same(
        values_and_grads(lambda x, w, b: F.layer_norm(x, (3, 8), w, b), arrays),
        values_and_grads(
            lambda x, w, b: composed.layer_norm(x.reshape(2, 24), w.reshape(24), b.reshape(24)).reshape(2, 3, 8),
            arrays,
        ),
    )


def test_each_step_of_a_reference_is_shown_to_its_watcher():
    seen = []

    def watch(name, x):
        seen.append((name, x.shape))
        return x

    q, k, v = gf.randn(2, 3, 4), gf.randn(2, 5, 4), gf.randn(2, 5, 6)
    out = composed.attention(q, k, v, causal=True, step=watch)
    assert seen == [("q k^T", (2, 3, 5)), ("scores", (2, 3, 5)), ("masked", (2, 3, 5)), ("weights", (2, 3, 5))]
    np.testing.assert_array_equal(out.data, composed.attention(q, k, v, causal=True).data)


def test_fused_ops_are_one_node():
    x = gf.randn(3, 4, requires_grad=True)
    assert F.softmax(x).grad_fn.inputs == (x,)
    assert F.cross_entropy(x, np.array([0, 1, 2])).grad_fn.name == "cross_entropy"
    assert F.layer_norm(x).grad_fn.name == "layer_norm"
    assert F.rms_norm(x).grad_fn.name == "rms_norm"  # a run of capitals is one word, as in the math


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
