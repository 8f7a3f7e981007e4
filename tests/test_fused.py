"""Each fused op equals its reference, the same computation composed from primitive ops
(gradflow/engine/ops/composed.py), in value and in gradient: the hand-derived backward is right."""

import re

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
    "linear_cross_entropy": (lambda x, w, b: F.linear_cross_entropy(x, w, TARGETS, b), [(4, 3), (5, 3), (5,)]),
    "linear_cross_entropy ignoring a row, sum": (
        lambda x, w: F.linear_cross_entropy(x, w, np.array([1, -100, 3, 3]), reduction="sum"),
        [(4, 3), (5, 3)],
    ),
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


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_linear_cross_entropy_in_chunks_of_rows_is_the_whole_computation(monkeypatch, reduction):
    """Rows taken two and three at a time (7 rows: the last chunk short), in float64: the loss and every
    gradient of cross_entropy(linear(x, W, b), t), with an upstream gradient other than 1."""
    from gradflow.engine.ops import linear_cross_entropy

    x, w, b = inputs([(7, 4), (6, 4), (6,)])
    t = np.array([5, 0, -100, 3, 3, 1, 0])
    fused = lambda x, w, b: F.linear_cross_entropy(x, w, t, b, reduction=reduction) * 1.7  # noqa: E731
    whole = values_and_grads(
        lambda x, w, b: F.cross_entropy(F.linear(x, w, b), t, reduction=reduction) * 1.7, [x, w, b]
    )
    for rows in (2, 3):
        monkeypatch.setattr(linear_cross_entropy, "CHUNK", rows * len(w))
        assert_same(values_and_grads(fused, [x, w, b]), whole)
    with gf.no_grad():  # nothing recorded: the loss alone, the same
        np.testing.assert_allclose(fused(gf.tensor(x), gf.tensor(w), gf.tensor(b)).data, whole[0], rtol=1e-12)


def test_linear_cross_entropy_keeps_no_array_of_logits_for_backward():
    x, w = gf.randn(5, 3, requires_grad=True), gf.randn(8, 3)  # a frozen head: x's gradient alone
    loss = F.linear_cross_entropy(x, w, np.array([1, 2, 3, 4, 5]))
    assert [None if a is None else a.shape for a in loss.grad_fn.saved_tensors] == [(5, 3), None, None]


@pytest.mark.parametrize(
    "call, error, says",
    [
        (lambda x, w: F.linear_cross_entropy(x, w, np.zeros(5, int), reduction="none"), ValueError, '"mean" or "sum"'),
        (lambda x, w: F.linear_cross_entropy(x, w, np.zeros(4, int)), ValueError, "targets of shape (4,)"),
        (lambda x, w: F.linear_cross_entropy(x, w, np.full(5, 8)), IndexError, "target 8 is out of range for 8"),
        (lambda x, w: F.linear_cross_entropy(x, w.T, np.zeros(5, int)), ValueError, "needs a weight (C, 3)"),
        (lambda x, w: F.linear_cross_entropy(x, w, np.zeros(5)), TypeError, "integer class ids"),
    ],
)
def test_linear_cross_entropy_names_a_bad_argument(call, error, says):
    with pytest.raises(error, match=re.escape(says)):
        call(gf.randn(5, 3), gf.randn(8, 3))


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
