"""PyTorch's idioms of model and training code, each beside its PyTorch twin: gf.nn, F and gf.optim.

Torch-free tests check hand-computed values, gradients (gradcheck in float64) and every refusal;
the `torch` tests run the same idiom in PyTorch (pip install torch==2.13.0) and compare numbers
and gradients. They are skipped without torch, unless GRADFLOW_REQUIRE_TORCH=1 (CI sets it).
"""

import math
import warnings

import numpy as np
import pytest
from helpers import both

import gradflow as gf
from gradflow import nn
from gradflow.nn import Parameter
from gradflow.nn import functional as F
from gradflow.optim import lr_scheduler


def leaf(a):
    return gf.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4))


# --- F: activations and softmax ---------------------------------------------------------------------

# (gradflow, PyTorch): the same call written the same way
ELEMENTWISE = {
    "F.relu(x)": (lambda x: F.relu(x), lambda t, x: t.nn.functional.relu(x)),
    "F.tanh(x)": (lambda x: F.tanh(x), lambda t, x: t.nn.functional.tanh(x)),
    "F.sigmoid(x)": (lambda x: F.sigmoid(x), lambda t, x: t.nn.functional.sigmoid(x)),
    "F.silu(x)": (lambda x: F.silu(x), lambda t, x: t.nn.functional.silu(x)),
    'F.gelu(x, approximate="none")': (
        lambda x: F.gelu(x, approximate="none"),
        lambda t, x: t.nn.functional.gelu(x),
    ),
    'F.gelu(x, approximate="tanh")': (
        lambda x: F.gelu(x, approximate="tanh"),
        lambda t, x: t.nn.functional.gelu(x, approximate="tanh"),
    ),
    "F.softmax(x, dim=1)": (lambda x: F.softmax(x, dim=1), lambda t, x: t.nn.functional.softmax(x, dim=1)),
    "F.softmax(x, -1)": (lambda x: F.softmax(x, -1), lambda t, x: t.nn.functional.softmax(x, -1)),
    "F.log_softmax(x, dim=0)": (
        lambda x: F.log_softmax(x, dim=0),
        lambda t, x: t.nn.functional.log_softmax(x, dim=0),
    ),
    "nn.ReLU()(x)": (lambda x: nn.ReLU()(x), lambda t, x: t.nn.ReLU()(x)),
    "nn.ReLU(inplace=True)(x)": (lambda x: nn.ReLU(inplace=True)(x), lambda t, x: t.nn.ReLU(inplace=True)(x * 1)),
    "nn.GELU(approximate='none')(x)": (lambda x: nn.GELU(approximate="none")(x), lambda t, x: t.nn.GELU()(x)),
    "nn.GELU(approximate='tanh')(x)": (
        lambda x: nn.GELU(approximate="tanh")(x),
        lambda t, x: t.nn.GELU(approximate="tanh")(x),
    ),
    "nn.SiLU()(x)": (lambda x: nn.SiLU()(x), lambda t, x: t.nn.SiLU()(x)),
    "nn.Tanh()(x)": (lambda x: nn.Tanh()(x), lambda t, x: t.nn.Tanh()(x)),
    "nn.Sigmoid()(x)": (lambda x: nn.Sigmoid()(x), lambda t, x: t.nn.Sigmoid()(x)),
    "nn.Softmax(dim=1)(x)": (lambda x: nn.Softmax(dim=1)(x), lambda t, x: t.nn.Softmax(dim=1)(x)),
    "nn.LogSoftmax(dim=-1)(x)": (lambda x: nn.LogSoftmax(dim=-1)(x), lambda t, x: t.nn.LogSoftmax(dim=-1)(x)),
    "nn.Identity()(x)": (lambda x: nn.Identity()(x) * 1, lambda t, x: t.nn.Identity()(x) * 1),
}


@pytest.mark.parametrize("idiom", ELEMENTWISE)
def test_activations_match_torch(torch, idiom):
    ours, theirs = ELEMENTWISE[idiom]
    both(torch, ours, lambda x: theirs(torch, x), X * 3)


def test_softmax_takes_dim_or_axis_not_both():
    x = gf.tensor(X)
    np.testing.assert_array_equal(F.softmax(x, dim=1).data, F.softmax(x, axis=1).data)
    np.testing.assert_array_equal(F.log_softmax(x, dim=0).data, F.log_softmax(x, axis=0).data)
    np.testing.assert_array_equal(nn.Softmax(axis=0)(x).data, F.softmax(x, dim=0).data)
    assert np.allclose(F.softmax(x).data.sum(axis=-1), 1)  # the last axis unless told
    with pytest.raises(TypeError, match=r"^softmax: give axis= \(numpy's name\) or dim= \(PyTorch's\), not both"):
        F.softmax(x, dim=1, axis=1)
    with pytest.raises(TypeError, match="^log_softmax: give axis="):
        F.log_softmax(x, dim=0, axis=0)
    with pytest.raises(TypeError, match="^Softmax: give axis="):
        nn.Softmax(dim=0, axis=0)


# Phi(x) = (1 + erf(x / sqrt 2)) / 2 and phi(x) = exp(-x^2/2) / sqrt(2 pi), to 16 digits
EXACT_GELU = [  # x, x Phi(x), Phi(x) + x phi(x)
    (0.0, 0.0, 0.5),
    (1.0, 0.8413447460685429, 0.8413447460685429 + 0.24197072451914337),
    (-1.0, -0.15865525393145707, 0.15865525393145707 - 0.24197072451914337),
    (2.0, 2 * 0.9772498680518208, 0.9772498680518208 + 2 * 0.05399096651318806),
]


@pytest.mark.parametrize("x, value, slope", EXACT_GELU)
def test_exact_gelu_at_hand_computed_points(x, value, slope):
    t = leaf([x])
    F.gelu(t, approximate="none").backward(np.ones(1))
    assert F.gelu(t, approximate="none").item() == pytest.approx(value, rel=1e-15, abs=1e-300)
    assert t.grad[0] == pytest.approx(slope, rel=1e-14)


def test_exact_gelu_is_differentiable_and_close_to_the_tanh_form():
    x = leaf(np.linspace(-6, 6, 1201))
    assert gf.gradcheck(lambda x: F.gelu(x, approximate="none"), x)
    gap = np.abs(F.gelu(x, approximate="none").data - F.gelu(x, approximate="tanh").data)
    assert 4e-4 < gap.max() < 5e-4  # the docstring's bound, and the two are not the same function
    one = gf.tensor([1.0], dtype=np.float64)
    assert F.gelu(one).item() == pytest.approx(0.8413447460685429, rel=1e-15)  # the default: exact, as PyTorch
    assert nn.GELU()(one).item() == F.gelu(one).item()
    assert F.gelu(one, approximate="tanh").item() == one.gelu().item() == pytest.approx(0.841192, abs=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = leaf([-1000.0, 1000.0])
        F.gelu(big, approximate="none").sum().backward()
    np.testing.assert_array_equal(big.grad, [0.0, 1.0])


def test_exact_gelu_keeps_float32():
    y = F.gelu(gf.tensor([1.0, -2.0]), approximate="none")
    assert y.dtype == np.float32
    assert y.data[0] == np.float32(0.8413447460685429)


def test_gelu_refuses_an_unknown_form():
    with pytest.raises(ValueError, match='^gelu: approximate must be "tanh" or "none", got \'erf\''):
        F.gelu(gf.ones(2), approximate="erf")
    with pytest.raises(ValueError, match='^GELU: approximate must be "tanh" or "none", got \'exact\''):
        nn.GELU(approximate="exact")


# --- F: losses ------------------------------------------------------------------------------------


def test_mse_and_l1_loss_by_hand():
    x, y = leaf([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 0.0])
    loss = F.mse_loss(x, y)  # (0 + 4 + 9) / 3
    assert loss.item() == pytest.approx(13 / 3, rel=1e-15)
    loss.backward()
    np.testing.assert_allclose(x.grad, [0.0, 4 / 3, 2.0], rtol=1e-15)  # 2 (x - y) / n
    assert F.mse_loss(x, y, reduction="sum").item() == 13.0
    np.testing.assert_array_equal(F.mse_loss(x, y, reduction="none").data, [0.0, 4.0, 9.0])
    assert F.l1_loss(x, y).item() == pytest.approx(5 / 3, rel=1e-15)
    np.testing.assert_array_equal(F.l1_loss(x, y, reduction="none").data, [0.0, 2.0, 3.0])
    assert nn.MSELoss(reduction="sum")(x, y).item() == 13.0
    assert nn.L1Loss()(x, y).item() == pytest.approx(5 / 3, rel=1e-15)
    assert gf.gradcheck(lambda a, b: F.mse_loss(a, b), leaf(X), leaf(X[::-1].copy()))


def test_pointwise_losses_refuse_shapes_that_differ():
    message = r"^mse_loss: input of shape \(3,\) and target of shape \(3, 1\) differ; .*target\.view\(3\)"
    with pytest.raises(ValueError, match=message):
        F.mse_loss(gf.ones(3), gf.ones(3, 1))
    with pytest.raises(ValueError, match="^l1_loss: input of shape"):
        nn.L1Loss()(gf.ones(2, 3), gf.ones(3))
    with pytest.raises(ValueError, match='^mse_loss: reduction must be "mean", "sum" or "none", got \'avg\''):
        F.mse_loss(gf.ones(3), gf.ones(3), reduction="avg")
    with pytest.raises(ValueError, match="^MSELoss: reduction must be"):
        nn.MSELoss(reduction="batchmean")


LOGITS = RNG.standard_normal((2, 5, 3))  # (N, C, d1): classes on axis 1, as PyTorch lays them out
TARGETS_ND = np.array([[0, 4, -100], [2, 2, 1]])  # (N, d1), one ignored by PyTorch's default


def test_cross_entropy_with_classes_on_axis_1_equals_the_flattened_rows():
    z = leaf(LOGITS)
    loss = F.cross_entropy(z, TARGETS_ND)
    loss.backward()
    rows = leaf(LOGITS.transpose(0, 2, 1).reshape(-1, 5))  # one row per (n, position), classes last
    flat = F.cross_entropy(rows, TARGETS_ND.reshape(-1))  # -100 is skipped: the mean is over 5 targets
    flat.backward()
    assert loss.item() == pytest.approx(flat.item(), rel=1e-14)
    np.testing.assert_allclose(z.grad, rows.grad.data.reshape(2, 3, 5).transpose(0, 2, 1), rtol=1e-14)
    none = F.cross_entropy(gf.tensor(LOGITS), TARGETS_ND, reduction="none")
    assert none.shape == (2, 3) and none.data[0, 2] == 0.0
    assert gf.gradcheck(lambda z: F.cross_entropy(z, TARGETS_ND, reduction="none"), leaf(LOGITS))


def test_nll_loss_of_log_softmax_is_cross_entropy():
    z, w = leaf(LOGITS), leaf(LOGITS)
    for reduction in ("mean", "sum", "none"):
        a = F.nll_loss(F.log_softmax(z, dim=1), TARGETS_ND, reduction=reduction)
        b = F.cross_entropy(w, TARGETS_ND, reduction=reduction)
        np.testing.assert_allclose(a.data, b.data, rtol=1e-14)
    F.nll_loss(F.log_softmax(z, dim=1), TARGETS_ND).backward()
    F.cross_entropy(w, TARGETS_ND).backward()
    np.testing.assert_allclose(z.grad, w.grad, rtol=1e-12, atol=1e-16)
    assert nn.NLLLoss()(gf.tensor([[-1.0, -2.0]]), np.array([1])).item() == 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(F.nll_loss(gf.tensor([[-1.0, -2.0]]), np.array([-100])).item())  # nothing counts


def test_cross_entropy_default_ignore_index_is_pytorchs():
    z = gf.tensor(LOGITS[:, :, 0])
    labels = np.array([3, -100])  # Hugging Face marks padding with -100
    assert F.cross_entropy(z, labels).item() == pytest.approx(F.cross_entropy(z[:1], labels[:1]).item(), rel=1e-14)
    with pytest.raises(IndexError, match=r"^cross_entropy: target -100 is out of range for 5 classes$"):
        F.cross_entropy(z, labels, ignore_index=None)  # None: every target counts
    loss = nn.CrossEntropyLoss(ignore_index=3, reduction="sum")
    assert loss(z, np.array([3, 1])).item() == pytest.approx(F.cross_entropy(z[1:], np.array([1])).item(), rel=1e-14)


def test_cross_entropy_refusals_say_what_to_write():
    message = (
        r"^cross_entropy: logits must be \(N, C\), got shape \(2, 3, 5\) with targets of shape \(2, 3\); "
        r"for classes on the last axis write cross_entropy\(logits\.view\(-1, 5\), targets\.view\(-1\)\)"
    )
    with pytest.raises(ValueError, match=message):
        F.cross_entropy(gf.zeros(2, 3, 5), np.zeros((2, 3), dtype=np.int64))  # (B, T, C) logits
    with pytest.raises(ValueError, match=r"^nll_loss: logits must be \(N, C\), got shape \(2, 3, 5\)"):
        F.nll_loss(gf.zeros(2, 3, 5), np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(ValueError, match=r"^cross_entropy: logits must be \(N, C\), got shape \(5,\); .*view\(1, -1\)"):
        F.cross_entropy(gf.zeros(5), np.array(1))
    with pytest.raises(ValueError, match=r"^cross_entropy: targets of shape \(2, 4\) do not match logits"):
        F.cross_entropy(gf.zeros(2, 5, 3), np.zeros((2, 4), dtype=np.int64))
    message = r"^cross_entropy: target -1 is out of range for 5 classes \(only targets equal to ignore_index=-100"
    with pytest.raises(IndexError, match=message):
        F.cross_entropy(gf.zeros(2, 5), np.array([1, -1]))
    with pytest.raises(TypeError, match=r"^nll_loss: targets must be integer class ids, got float64"):
        F.nll_loss(gf.zeros(2, 5), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="^CrossEntropyLoss: reduction must be"):
        nn.CrossEntropyLoss(reduction="avg")


LOSSES = {
    "F.mse_loss": (F.mse_loss, lambda t: t.nn.functional.mse_loss, {}),
    "F.mse_loss sum": (F.mse_loss, lambda t: t.nn.functional.mse_loss, {"reduction": "sum"}),
    "F.mse_loss none": (F.mse_loss, lambda t: t.nn.functional.mse_loss, {"reduction": "none"}),
    "F.l1_loss": (F.l1_loss, lambda t: t.nn.functional.l1_loss, {}),
    "nn.MSELoss()": (nn.MSELoss(), lambda t: t.nn.MSELoss(), {}),
    "nn.L1Loss(reduction='sum')": (nn.L1Loss(reduction="sum"), lambda t: t.nn.L1Loss(reduction="sum"), {}),
}


@pytest.mark.parametrize("idiom", LOSSES)
def test_regression_losses_match_torch(torch, idiom):
    ours, theirs, kwargs = LOSSES[idiom]
    both(torch, lambda a, b: ours(a, b, **kwargs), lambda a, b: theirs(torch)(a, b, **kwargs), X, X[::-1].copy())


CLASS_LOSSES = {
    "F.cross_entropy (N, C, d1)": (
        lambda z: F.cross_entropy(z, TARGETS_ND),
        lambda t, z: t.nn.functional.cross_entropy(z, t.tensor(TARGETS_ND)),
    ),
    "F.cross_entropy none": (
        lambda z: F.cross_entropy(z, TARGETS_ND, reduction="none"),
        lambda t, z: t.nn.functional.cross_entropy(z, t.tensor(TARGETS_ND), reduction="none"),
    ),
    "nn.CrossEntropyLoss(ignore_index=2)": (
        lambda z: nn.CrossEntropyLoss(ignore_index=2)(z, np.abs(TARGETS_ND) % 5),
        lambda t, z: t.nn.CrossEntropyLoss(ignore_index=2)(z, t.tensor(np.abs(TARGETS_ND) % 5)),
    ),
    "F.nll_loss(F.log_softmax(z, dim=1), t)": (
        lambda z: F.nll_loss(F.log_softmax(z, dim=1), TARGETS_ND),
        lambda t, z: t.nn.functional.nll_loss(t.nn.functional.log_softmax(z, dim=1), t.tensor(TARGETS_ND)),
    ),
    "nn.NLLLoss(reduction='sum')": (
        lambda z: nn.NLLLoss(reduction="sum")(z, TARGETS_ND),
        lambda t, z: t.nn.NLLLoss(reduction="sum")(z, t.tensor(TARGETS_ND)),
    ),
}


@pytest.mark.parametrize("idiom", CLASS_LOSSES)
def test_class_losses_match_torch(torch, idiom):
    ours, theirs = CLASS_LOSSES[idiom]
    both(torch, ours, lambda z: theirs(torch, z), LOGITS)


# --- F.layer_norm -----------------------------------------------------------------------------------


def test_layer_norm_over_two_axes_normalizes_them_together():
    x = X * 2 + 1
    y = F.layer_norm(gf.tensor(x), (3, 4)).data
    mu, var = x.mean(axis=(1, 2), keepdims=True), x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5), rtol=1e-12)
    np.testing.assert_array_equal(F.layer_norm(gf.tensor(x), 4).data, F.layer_norm(gf.tensor(x)).data)
    ln = nn.LayerNorm((3, 4))
    assert ln.weight.shape == (3, 4) and repr(ln) == "LayerNorm((3, 4), eps=1e-05)"
    np.testing.assert_allclose(ln(gf.tensor(x)).data, y, rtol=1e-6)
    assert list(nn.LayerNorm(4, elementwise_affine=False).parameters()) == []
    assert gf.gradcheck(lambda x, w, b: F.layer_norm(x, (3, 4), w, b), leaf(x), leaf(X[0]), leaf(X[1]))


def test_layer_norm_refusals_say_what_to_write():
    x, w = gf.zeros(2, 4), gf.ones(4)
    message = (
        r"^layer_norm: normalized_shape must be a shape such as \(4,\), got a tensor of shape \(4,\); "
        r"the weight comes third, as in PyTorch: F\.layer_norm\(x, x\.shape\[-1:\], weight, bias\)"
    )
    with pytest.raises(TypeError, match=message):
        F.layer_norm(x, w)  # gradflow's former order (x, weight, bias)
    with pytest.raises(ValueError, match=r"^layer_norm: normalized_shape \(3,\) is not the last axes of .*\(2, 4\)"):
        F.layer_norm(x, (3,))
    with pytest.raises(ValueError, match=r"^layer_norm: weight has shape \(3,\), expected \(4,\) for input \(2, 4\)"):
        F.layer_norm(x, (4,), gf.ones(3))
    with pytest.raises(ValueError, match=r"^layer_norm: bias has shape \(4,\), expected \(2, 4\)"):
        F.layer_norm(x, (2, 4), gf.ones(2, 4), gf.ones(4))


def test_layer_norm_matches_torch(torch):
    x, w, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    both(
        torch,
        lambda x, w, b: F.layer_norm(x, (3, 4), w, b, eps=1e-5),
        lambda x, w, b: torch.nn.functional.layer_norm(x, (3, 4), w, b, eps=1e-5),
        x,
        w,
        b,
    )
    both(torch, lambda x: F.layer_norm(x, [4]), lambda x: torch.nn.functional.layer_norm(x, [4]), x)


# --- F.scaled_dot_product_attention --------------------------------------------------------------

Q, K, V = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 5, 4)), RNG.standard_normal((2, 5, 6))
ALLOWED = RNG.random((3, 5)) < 0.6
ALLOWED[:, 0] = True  # every query sees a key


def np_attention(q, k, v, bias, scale=None):
    s = q @ k.swapaxes(-1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale) + bias
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ v


def sdpa(q, k, v, *args, **kwargs):
    return F.scaled_dot_product_attention(gf.tensor(q), gf.tensor(k), gf.tensor(v), *args, **kwargs).data


def test_attn_mask_boolean_or_additive():
    bias = np.where(ALLOWED, 0.0, -np.inf)
    expected = np_attention(Q, K, V, bias)
    np.testing.assert_allclose(sdpa(Q, K, V, attn_mask=ALLOWED), expected, rtol=1e-12)
    np.testing.assert_allclose(sdpa(Q, K, V, mask=ALLOWED), expected, rtol=1e-12)  # gradflow's name
    np.testing.assert_allclose(sdpa(Q, K, V, attn_mask=bias), expected, rtol=1e-12)
    np.testing.assert_allclose(sdpa(Q, K, V, None, 0.0, False, 0.5), np_attention(Q, K, V, 0, 0.5), rtol=1e-12)
    learned = RNG.standard_normal((3, 5))  # a float mask is added to the scores, as a bias
    np.testing.assert_allclose(sdpa(Q, K, V, attn_mask=learned), np_attention(Q, K, V, learned), rtol=1e-12)
    empty = np.where(np.arange(3)[:, None] == 1, -np.inf, bias)  # query 1 sees nothing: zeros
    np.testing.assert_array_equal(sdpa(Q, K, V, attn_mask=empty)[:, 1], 0.0)


def test_a_learned_attention_bias_gets_its_gradient():
    q, k, v, m = leaf(Q), leaf(K), leaf(V), leaf(RNG.standard_normal((3, 5)))
    assert gf.gradcheck(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), q, k, v, m)
    with gf.use_kernels("fast"):  # the fast kernel takes the same additive mask
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        assert gf.gradcheck(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), q, k, v, m)
    assert type(out.grad_fn) is gf.fast.attention.ScaledDotProductAttention


def test_is_causal_counts_from_the_first_key_and_causal_from_the_last():
    fewer = Q[:, :2]  # 2 queries, 5 keys
    first = np.tri(2, 5, dtype=bool)  # query i sees keys 0..i (PyTorch's is_causal)
    last = np.tri(2, 5, k=3, dtype=bool)  # the queries are positions 3 and 4 (gradflow's causal, a KV cache)
    np.testing.assert_allclose(sdpa(fewer, K, V, is_causal=True), sdpa(fewer, K, V, mask=first), rtol=1e-14)
    np.testing.assert_allclose(sdpa(fewer, K, V, causal=True), sdpa(fewer, K, V, mask=last), rtol=1e-14)
    square = np.tri(5, dtype=bool)
    np.testing.assert_array_equal(sdpa(K, K, V, is_causal=True), sdpa(K, K, V, causal=True))
    np.testing.assert_allclose(sdpa(K, K, V, is_causal=True), sdpa(K, K, V, mask=square), rtol=1e-14)
    both_masks = sdpa(fewer, K, V, attn_mask=ALLOWED[:2], is_causal=True)  # gradflow allows both: and
    np.testing.assert_allclose(both_masks, sdpa(fewer, K, V, mask=first & ALLOWED[:2]), rtol=1e-14)


def test_attention_dropout_draws_from_gradflows_generator():
    gf.manual_seed(3)
    a = sdpa(Q, K, V, dropout_p=0.5)
    gf.manual_seed(3)
    np.testing.assert_array_equal(a, sdpa(Q, K, V, None, 0.5))
    assert not np.allclose(a, sdpa(Q, K, V))


def test_attention_refusals_say_what_to_write():
    q, k, v = gf.tensor(Q), gf.tensor(K), gf.tensor(V)
    with pytest.raises(TypeError, match=r"^attention: give mask= \(gradflow's name\) or attn_mask= \(PyTorch's\)"):
        F.scaled_dot_product_attention(q, k, v, ALLOWED, mask=ALLOWED)
    with pytest.raises(TypeError, match=r"^attention: give causal= .* or is_causal= .*, not both"):
        F.scaled_dot_product_attention(q, k, v, is_causal=True, causal=True)
    with pytest.raises(TypeError, match=r"^attention: mask must be boolean .*float64; .*attn_mask="):
        F.scaled_dot_product_attention(q, k, v, mask=np.zeros((3, 5)))
    with pytest.raises(TypeError, match=r"^attention: attn_mask must be boolean .* or floating-point .*got int64"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.zeros((3, 5), dtype=np.int64))
    with pytest.raises(ValueError, match=r"^attention: attn_mask of shape \(3, 4\) does not broadcast"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"^attention: dropout_p must be in \[0, 1\), got 1.0"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.0)


ATTENTION = {  # keyword arguments, the same in both; the queries and keys used
    "no mask": ({}, Q, K, V),
    "boolean attn_mask": ({"attn_mask": ALLOWED}, Q, K, V),
    "float attn_mask": ({"attn_mask": np.where(ALLOWED, 0.5, -np.inf)}, Q, K, V),
    "is_causal, fewer queries than keys": ({"is_causal": True}, Q[:, :2], K, V),
    "is_causal, more queries than keys": ({"is_causal": True}, Q, K[:, :2], V[:, :2]),
    "scale, dropout_p=0.0": ({"scale": 0.3, "dropout_p": 0.0}, Q, K, V),
}


@pytest.mark.parametrize("idiom", ATTENTION)
def test_attention_matches_torch(torch, idiom):
    kwargs, q, k, v = ATTENTION[idiom]
    theirs = {key: torch.tensor(a) if isinstance(a, np.ndarray) else a for key, a in kwargs.items()}
    both(
        torch,
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs),
        lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, **theirs),
        q,
        k,
        v,
    )


def test_learned_attention_bias_gradient_matches_torch(torch):
    both(
        torch,
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m),
        Q,
        K,
        V,
        RNG.standard_normal((2, 1, 5)),  # broadcast over the queries: its gradient sums over them
    )


# --- nn.Module ------------------------------------------------------------------------------------


def build(lib):
    """One small model written once against `lib` (gradflow or torch): a buffer of each kind, a
    Sequential of layers and activations, a ModuleDict, a tied weight."""
    nn_ = lib.nn

    class Block(nn_.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn_.Linear(4, 4)
            self.act = nn_.GELU(approximate="tanh")
            self.register_buffer("mask", lib.tensor(np.tril(np.ones((3, 3)))))
            self.register_buffer("steps", lib.tensor(np.array([0, 0])), persistent=False)

        def forward(self, x):
            return self.act(self.fc(x))

    class Net(nn_.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn_.Embedding(5, 4)
            self.blocks = nn_.Sequential(Block(), nn_.ReLU(), Block())
            self.heads = nn_.ModuleDict({"norm": nn_.LayerNorm(4), "out": nn_.Linear(4, 5, bias=False)})
            self.heads["out"].weight = self.embed.weight  # tied

        def forward(self, ids):
            return self.heads.out(self.heads.norm(self.blocks(self.embed(ids))))

    return Net()


def test_the_tree_state_and_buffers_have_pytorchs_names(torch):
    ours, theirs = build(gf), build(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())  # persistent buffers, in PyTorch's order
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert [type(m).__name__ for m in ours.children()] == [type(m).__name__ for m in theirs.children()]
    visited, theirs_visited = [], []
    assert ours.apply(lambda m: visited.append(type(m).__name__)) is ours
    theirs.apply(lambda m: theirs_visited.append(type(m).__name__))
    assert visited == theirs_visited  # children first, then the parent
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    ids = np.array([[1, 2, 4]])
    np.testing.assert_allclose(ours(ids).data, theirs(torch.tensor(ids)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_apply_initialises_as_pytorch_code_does():
    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.5)  # PyTorch's order: mean, then std
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    gf.manual_seed(0)
    model = build(gf).apply(init_weights)
    fc = model.blocks[0].fc
    assert (fc.bias.data == 0).all() and 0.3 < fc.weight.data.std() < 0.7 and abs(fc.weight.data.mean()) < 0.4


def test_buffers_are_saved_and_loaded_but_never_learned():
    model = build(gf)
    block = model.blocks[0]
    assert "blocks.0.mask" in model.state_dict() and "blocks.0.steps" not in model.state_dict()
    assert not any(p is block.mask for p in model.parameters())
    opt = gf.optim.AdamW(model.parameters())
    assert all(p is not block.mask for p in opt.parameters())
    state = model.state_dict()
    state["blocks.0.mask"] = np.full((3, 3), 7.0)
    model.load_state_dict(state)
    np.testing.assert_array_equal(block.mask.data, 7.0)
    block.mask = gf.zeros(3, 3)  # assigning to a buffer's name replaces the buffer
    assert model.state_dict()["blocks.0.mask"].sum() == 0
    block.register_buffer("extra", None)  # None: registered, not saved, not a tensor
    assert "blocks.0.extra" not in model.state_dict() and block.extra is None
    with pytest.raises(ValueError, match=r"^load_state_dict: blocks\.0\.mask: checkpoint \(2,\), model \(3, 3\)"):
        model.load_state_dict({**state, "blocks.0.mask": np.zeros(2)})
    with pytest.raises(ValueError, match="^load_state_dict: missing: blocks.0.mask"):
        model.load_state_dict({k: v for k, v in state.items() if k != "blocks.0.mask"})


def test_register_buffer_refusals():
    block = build(gf).blocks[0]
    with pytest.raises(KeyError, match=r"register_buffer: name must be a non-empty string without '\.', got 'a\.b'"):
        block.register_buffer("a.b", gf.zeros(2))
    with pytest.raises(KeyError, match=r"register_buffer: Block already has an attribute 'fc'"):
        block.register_buffer("fc", gf.zeros(2))
    with pytest.raises(TypeError, match=r"^Block: buffer 'mask' cannot hold a Parameter"):
        block.register_buffer("mask", Parameter(np.zeros(2)))
    with pytest.raises(TypeError, match=r"^register_parameter: 'w' must be a Parameter or None, got Tensor"):
        block.register_parameter("w", gf.zeros(2))


def test_to_casts_floating_parameters_and_buffers():
    model = build(gf)
    model.blocks[0].fc.weight.grad = np.ones((4, 4), dtype=np.float32)
    assert model.double() is model
    assert {p.dtype for p in model.parameters()} == {np.dtype(np.float64)}
    assert model.blocks[0].mask.dtype == np.float64 and model.blocks[0].steps.dtype.kind == "i"  # ints stay
    assert model.blocks[0].fc.weight.grad.dtype == np.float64
    assert model.to("cpu", dtype=np.float32) is model and model.heads.norm.weight.dtype == np.float32
    assert model.to(gf.tensor(np.zeros(1))).embed.weight.dtype == np.float64  # a tensor's dtype
    assert model.float().cpu().embed.weight.dtype == np.float32
    assert model.heads.out.weight is model.embed.weight  # still tied: cast in place
    with pytest.raises(ValueError, match=r"^Module.to: gradflow computes on the CPU \(numpy\), not 'cuda:0'; leave"):
        model.to("cuda:0")
    with pytest.raises(ValueError, match="^Module.to: .*not 'cuda'"):
        model.cuda()
    with pytest.raises(TypeError, match="^Module.to: dtype must be float32 or float64 .*got float16"):
        model.half()
    with pytest.raises(TypeError, match="^Module.to: dtype must be float32 or float64 .*got int64"):
        model.to(np.int64)


def test_requires_grad_and_zero_grad(torch):
    model = build(gf)
    assert model.requires_grad_(False) is model and not any(p.requires_grad for p in model.parameters())
    model.heads.norm.requires_grad_()
    opt = gf.optim.SGD(model.parameters(), lr=0.1)  # frozen parameters are accepted, as in PyTorch
    model(np.array([[1, 2]])).sum().backward()
    trained = [n for n, p in model.named_parameters() if p.grad is not None]
    assert trained == ["heads.norm.weight", "heads.norm.bias"]
    before = model.embed.weight.data.copy()
    opt.step()
    np.testing.assert_array_equal(model.embed.weight.data, before)
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is None or (p.grad == 0).all() for p in model.parameters())
    model.zero_grad(set_to_none=False)
    assert model.heads.norm.weight.grad.shape == (4,) and (model.heads.norm.weight.grad == 0).all()
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    t = torch.nn.Linear(2, 2)
    t(torch.ones(1, 2)).sum().backward()
    t.zero_grad()
    assert t.weight.grad is None  # PyTorch's default, and gradflow's


def test_repr_is_pytorchs_nested_form():
    text = repr(build(gf))
    assert text.startswith("Net(\n  (embed): Embedding(5, 4)\n  (blocks): Sequential(\n    (0): Block(\n")
    assert "      (act): GELU(approximate='tanh')\n    )\n    (1): ReLU()\n" in text
    assert "  (heads): ModuleDict(\n    (norm): LayerNorm(4, eps=1e-05)\n" in text and text.endswith("  )\n)")


def test_module_dict():
    d = nn.ModuleDict({"a": nn.Linear(2, 2)})
    d["b"] = nn.ReLU()
    assert list(d) == list(d.keys()) == ["a", "b"] and len(d) == 2 and "b" in d and d.a is d["a"]
    assert [type(m).__name__ for m in d.values()] == ["Linear", "ReLU"]
    del d["a"]
    assert list(d.items()) == [("b", d.b)] and list(d.parameters()) == []


# --- optimizers, schedulers, clipping -------------------------------------------------------------


def schedule(lib, make, steps=12, lrs=(0.5, 0.1)):
    """The learning rates of two parameter groups over `steps` steps of a scheduler made by make(lib, opt)."""
    p, q = (lib.nn.Parameter(lib.tensor(np.zeros(2))) for _ in range(2))
    opt = lib.optim.SGD([{"params": [p], "lr": lrs[0]}, {"params": [q], "lr": lrs[1]}], lr=1.0)
    scheduler = make(lib, opt)
    seen = []
    for _ in range(steps):
        seen.append([g["lr"] for g in opt.param_groups])
        assert scheduler.get_last_lr() == seen[-1]
        opt.step()
        scheduler.step()
    return np.array(seen)


SCHEDULES = {
    "StepLR": lambda lib, opt: lib.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
    "LambdaLR": lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, lambda t: 1 / (t + 1)),
    "LambdaLR per group": lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, [lambda t: 0.9**t, lambda t: t]),
    "CosineAnnealingLR": lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8, eta_min=0.01),
    "LinearLR": lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=4),
    "LinearLR defaults": lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt),
    "warmup then cosine (SequentialLR)": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(
        opt,
        [
            lib.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3),
            lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=7, eta_min=0.02),
        ],
        milestones=[4],
    ),
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedulers_match_torch(torch, name):
    np.testing.assert_allclose(schedule(gf, SCHEDULES[name]), schedule(torch, SCHEDULES[name]), rtol=1e-12)


def test_schedulers_by_hand():
    np.testing.assert_allclose(schedule(gf, SCHEDULES["StepLR"], 7)[:, 0], [0.5] * 3 + [0.25] * 3 + [0.125])
    cosine = schedule(gf, lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4), 5)[:, 0]
    np.testing.assert_allclose(cosine, [0.5, 0.25 * (1 + 0.5**0.5), 0.25, 0.25 * (1 - 0.5**0.5), 0.0], atol=1e-16)
    warmup = schedule(gf, lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt, 0.5, total_iters=2), 4)[:, 1]
    np.testing.assert_allclose(warmup, [0.05, 0.075, 0.1, 0.1])


def test_nanogpts_schedule_is_linear_warmup_then_cosine():
    """gf.optim.WarmupCosine(max_lr, W, D, min_lr), as PyTorch's schedulers (the module docstring's recipe)."""
    max_lr, warmup, decay, min_lr = 0.5, 4, 12, 0.05

    def recipe(lib, opt):
        s = lib.optim.lr_scheduler
        ramp = s.LinearLR(opt, start_factor=1 / warmup, total_iters=warmup - 1)
        cosine = s.CosineAnnealingLR(opt, T_max=decay - warmup, eta_min=min_lr)
        return s.SequentialLR(opt, [ramp, cosine], milestones=[warmup])

    expected = [gf.optim.WarmupCosine(max_lr, warmup, decay, min_lr)(t) for t in range(decay + 1)]
    np.testing.assert_allclose(schedule(gf, recipe, decay + 1, (max_lr, max_lr))[:, 0], expected, rtol=1e-14)


def test_a_scheduler_resumes_from_its_state_dict():
    def run(steps, state=None):
        p = Parameter(np.zeros(1))
        opt = gf.optim.SGD([p], lr=0.3)
        scheduler = SCHEDULES["warmup then cosine (SequentialLR)"](gf, opt)
        if state is not None:  # as PyTorch code resumes: build both, then load both
            opt.load_state_dict(state[0])
            scheduler.load_state_dict(state[1])
        lrs = []
        for _ in range(steps):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            scheduler.step()
        return lrs, (opt.state_dict(), scheduler.state_dict())

    straight, _ = run(10)
    first, state = run(6)
    second, _ = run(4, state)
    assert first + second == straight
    lambdas = lr_scheduler.LambdaLR(gf.optim.SGD([Parameter(np.zeros(1))]), lambda t: 2.0)
    assert "lr_lambdas" not in lambdas.state_dict() and lambdas.state_dict()["last_epoch"] == 0


def test_setting_the_lr_through_param_groups():
    p = Parameter(np.array([1.0]))
    opt = gf.optim.SGD([p], lr=0.1)
    for group in opt.param_groups:
        group["lr"] = 0.5
    p.grad = np.array([1.0])
    opt.step()
    assert p.data[0] == 0.5


def test_scheduler_refusals():
    opt = gf.optim.SGD([Parameter(np.zeros(1))], lr=0.1)
    other = gf.optim.SGD([Parameter(np.zeros(1))], lr=0.1)
    s = lr_scheduler
    with pytest.raises(KeyError, match=r"StepLR: resuming at last_epoch=5 needs param_groups\[0\]\['initial_lr'\]"):
        s.StepLR(other, step_size=2, last_epoch=5)
    with pytest.raises(ValueError, match="^StepLR: step_size must be a positive integer, got 0"):
        s.StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="^CosineAnnealingLR: T_max must be positive, got 0"):
        s.CosineAnnealingLR(opt, T_max=0)
    with pytest.raises(ValueError, match=r"^LinearLR: start_factor must be in \(0, 1\], got 0"):
        s.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match=r"^LambdaLR: 2 values for 1 parameter groups"):
        s.LambdaLR(opt, [lambda t: 1, lambda t: 2])
    ramp = s.LinearLR(opt)
    with pytest.raises(ValueError, match=r"^SequentialLR: 2 schedulers need 1 milestones, got \[\]"):
        s.SequentialLR(opt, [ramp, s.StepLR(opt, 2)], milestones=[])
    with pytest.raises(ValueError, match=r"^SequentialLR: schedulers\[0\] steps another optimizer than this one"):
        s.SequentialLR(other, [ramp], milestones=[])


def test_clip_grad_norm_returns_the_norm_as_a_tensor():
    a, b = Parameter(np.zeros(2)), Parameter(np.zeros(1))
    a.grad, b.grad = np.array([3.0, 0.0]), np.array([4.0])  # joint norm 5
    norm = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert isinstance(norm, gf.Tensor) and norm.item() == 5.0 and float(norm) == 5.0 and norm.dtype == np.float64
    np.testing.assert_allclose(np.r_[a.grad, b.grad], np.array([3.0, 0.0, 4.0]) / (5 + 1e-6))
    a.grad = np.array([3.0, -7.0])
    assert nn.utils.clip_grad_norm_(a, 100.0, norm_type=math.inf).item() == 7.0  # one tensor; the largest |g|
    assert gf.optim.clip_grad_norm([a], 100.0, norm_type=1) == 10.0
    nn.utils.clip_grad_value_([a], 2.0)
    np.testing.assert_array_equal(a.grad, [2.0, -2.0])
    with pytest.raises(ValueError, match="^clip_grad_norm: max_norm must be positive, got 0"):
        nn.utils.clip_grad_norm_([a], 0)
    with pytest.raises(ValueError, match=r"^grad_norm: norm_type must be positive \(or inf\), got 0"):
        nn.utils.clip_grad_norm_([a], 1.0, norm_type=0)
    with pytest.raises(ValueError, match="^clip_grad_value_: clip_value must be positive, got -1"):
        nn.utils.clip_grad_value_([a], -1)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, math.inf])
def test_clip_grad_norm_matches_torch(torch, norm_type):
    rng = np.random.default_rng(5)
    grads = [rng.standard_normal(s) * 3 for s in ((3, 4), (5,))]
    ps = [Parameter(np.zeros(g.shape)) for g in grads]
    qs = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64)) for g in grads]
    for p, q, g in zip(ps, qs, grads):
        p.grad, q.grad = g.copy(), torch.tensor(g.copy())
    ours = nn.utils.clip_grad_norm_(ps, 1.0, norm_type=norm_type)
    theirs = torch.nn.utils.clip_grad_norm_(qs, 1.0, norm_type=norm_type)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-12)
    for p, q in zip(ps, qs):
        np.testing.assert_allclose(p.grad, q.grad.numpy(), rtol=1e-12)


def test_rms_norm_over_two_trailing_axes_is_the_formula_over_both():
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 4))
    expected = x / np.sqrt((x**2).mean(axis=(-2, -1), keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(F.rms_norm(gf.tensor(x), (3, 4), gf.tensor(w)).data, expected, rtol=1e-12)
    assert gf.gradcheck(lambda x, w: F.rms_norm(x, (3, 4), w), leaf(x), leaf(w))


def test_rms_norm_with_the_weight_second_says_where_it_goes():
    hint = r"the weight comes third, as in PyTorch: F\.rms_norm\(x, x\.shape\[-1:\], weight\)$"
    with pytest.raises(TypeError, match=hint):
        F.rms_norm(gf.ones(2, 4), gf.ones(4))


# --- issue 27: one_hot, pad, Flatten, Embedding(padding_idx=), PyTorch's initialisers ----------------


def test_one_hot_matches_torch(torch):
    ids = np.array([[0, 3], [2, 2]])
    for args in ((), (5,)):
        ours = F.one_hot(gf.tensor(ids), *args)
        theirs = torch.nn.functional.one_hot(torch.tensor(ids), *args).numpy()
        assert ours.dtype == theirs.dtype and not ours.requires_grad
        np.testing.assert_array_equal(ours.data, theirs)
    with pytest.raises(ValueError, match=r"^one_hot: id 3 is out of range for num_classes 3$"):
        F.one_hot(gf.tensor(ids), 3)
    with pytest.raises(TypeError, match=r"^one_hot: the ids must be integers, got float32$"):
        F.one_hot(gf.tensor([0.0]))


@pytest.mark.parametrize("pad, value", [((1, 2), None), ((0, 1, 2, 0), -1.5), ((1, 1, 0, 2, 1, 0), 3.0)])
def test_pad_matches_torch(torch, pad, value):
    both(torch, lambda x: F.pad(x, pad, value=value), lambda t: torch.nn.functional.pad(t, pad, value=value), X)


def test_pad_refusals():
    with pytest.raises(ValueError, match=r"^pad: mode 'reflect' is not supported, only 'constant'$"):
        F.pad(gf.tensor(X), (1, 1), mode="reflect")
    with pytest.raises(ValueError, match=r"^pad: pad \(-1, 1\) must be pairs of non-negative widths"):
        F.pad(gf.tensor(X), (-1, 1))
    with pytest.raises(ValueError, match=r"^pad: pad \(1,\) must be pairs"):
        F.pad(gf.tensor(X), (1,))


def test_flatten_module_matches_torch(torch):
    both(torch, lambda x: nn.Flatten()(x), lambda t: torch.nn.Flatten()(t), X)
    both(torch, lambda x: nn.Flatten(0, 1)(x), lambda t: torch.nn.Flatten(0, 1)(t), X)
    assert repr(nn.Flatten()) == repr(torch.nn.Flatten())


def test_embedding_padding_row_starts_at_zero_and_gets_no_gradient_as_in_torch(torch):
    ours = nn.Embedding(5, 3, padding_idx=-2, dtype=np.float64)
    theirs = torch.nn.Embedding(5, 3, padding_idx=-2, dtype=torch.float64)
    assert ours.padding_idx == theirs.padding_idx == 3 and not ours.weight.data[3].any()
    with torch.no_grad():
        ours.weight.data[...] = RNG.standard_normal((5, 3))  # the padding row too: it is looked up as it is
        theirs.weight.copy_(torch.from_numpy(ours.weight.data))
    ids = np.array([[0, 3, 3], [4, 1, 3]])
    y, z = ours(ids), theirs(torch.tensor(ids))
    u = RNG.standard_normal(y.shape)
    y.backward(u)
    z.backward(torch.tensor(u))
    np.testing.assert_array_equal(y.data, z.detach().numpy())
    np.testing.assert_allclose(ours.weight.grad, theirs.weight.grad.numpy(), rtol=1e-12)
    assert not ours.weight.grad[3].any()
    assert repr(ours) == "Embedding(5, 3, padding_idx=3)"
    with pytest.raises(ValueError, match=r"^Embedding: padding_idx 5 is out of range for 5 embeddings$"):
        nn.Embedding(5, 3, padding_idx=5)


def test_embedding_starts_at_pytorchs_n01_and_gpt_keeps_its_002():
    from gradflow.models.gpt import GPT, GPTConfig

    gf.manual_seed(0)
    assert abs(nn.Embedding(500, 64).weight.data.std() - 1.0) < 0.01
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=500, block_size=16, n_layer=1, n_head=2, n_embd=64))
    assert abs(model.wte.weight.data.std() - 0.02) < 0.001 and abs(model.wpe.weight.data.std() - 0.02) < 0.003


INITIALISERS = [
    ("xavier_uniform_", {}),
    ("xavier_uniform_", {"gain": 5 / 3}),
    ("xavier_normal_", {}),
    ("kaiming_uniform_", {}),
    ("kaiming_uniform_", {"a": math.sqrt(5)}),  # PyTorch's Linear
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}),
    ("kaiming_normal_", {"nonlinearity": "tanh"}),
]


@pytest.mark.parametrize("name, kwargs", INITIALISERS, ids=[f"{n} {k}" for n, k in INITIALISERS])
def test_initialisers_draw_pytorchs_distribution(torch, name, kwargs):
    """The same fans and gain as PyTorch's: the spread of 98,304 draws agrees with torch's to 2%, and a
    uniform's largest draw with its bound to 1%."""
    shape = (256, 128, 3)  # fan_in 384, fan_out 768
    gf.manual_seed(0)
    ours = getattr(nn.init, name)(Parameter(gf.zeros(*shape)), **kwargs).data
    theirs = getattr(torch.nn.init, name)(torch.empty(shape), **kwargs).numpy()
    assert ours.dtype == np.float32 and abs(ours.mean()) < 0.01 * ours.std()
    assert ours.std() == pytest.approx(theirs.std(), rel=0.02)
    if "uniform" in name:
        assert np.abs(ours).max() == pytest.approx(np.abs(theirs).max(), rel=0.01)


def test_initialiser_bounds_by_hand():
    gf.manual_seed(0)
    w = nn.init.xavier_uniform_(Parameter(gf.zeros(300, 100))).data  # a = sqrt(6 / (100 + 300))
    assert math.sqrt(6 / 400) * 0.99 < np.abs(w).max() <= math.sqrt(6 / 400)
    w = nn.init.kaiming_uniform_(Parameter(gf.zeros(300, 100)), nonlinearity="relu").data  # sqrt(3) sqrt(2) / 10
    assert math.sqrt(6) / 10 * 0.99 < np.abs(w).max() <= math.sqrt(6) / 10
    with pytest.raises(ValueError, match=r"^xavier_uniform_: fan in and fan out need a weight of at least 2"):
        nn.init.xavier_uniform_(Parameter(gf.zeros(3)))
    with pytest.raises(ValueError, match=r"^kaiming_normal_: mode must be 'fan_in' or 'fan_out', got 'fan'$"):
        nn.init.kaiming_normal_(Parameter(gf.zeros(3, 3)), mode="fan")


@pytest.mark.parametrize(
    "nonlinearity, param", [("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                            ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None), ("conv2d", None)]
)  # fmt: skip
def test_calculate_gain_matches_torch(torch, nonlinearity, param):
    assert nn.init.calculate_gain(nonlinearity, param) == pytest.approx(
        torch.nn.init.calculate_gain(nonlinearity, param), rel=1e-15
    )
