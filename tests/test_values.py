"""Forward values and gradients against numpy, or against numbers worked out by hand in the test.

Nothing here compares gradflow with itself: every expected value is computed with numpy or written
down from the math.
"""

import math
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import gradflow as gf
from gradflow.nn import functional as F


def leaf(data, dtype=np.float64):
    return gf.tensor(np.asarray(data, dtype=dtype), requires_grad=True)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.fixture
def no_warnings():
    """Turn every warning (overflow, divide by zero, invalid value) into an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.fixture
def default_float64():
    before = gf.get_default_dtype()
    gf.set_default_dtype(np.float64)
    try:
        yield
    finally:
        gf.set_default_dtype(before)


# --- elementwise ops: value vs numpy, gradient vs the derivative written by hand ------------------

X = np.array([-2.5, -0.7, 0.3, 1.2, 3.0])
POS = np.array([0.2, 0.5, 1.0, 2.5, 9.0])


def sig(x):
    return 1 / (1 + np.exp(-x))


UNARY = [
    ("neg", X, lambda t: -t, lambda x: -x, lambda x: -np.ones_like(x)),
    ("exp", X, lambda t: t.exp(), np.exp, np.exp),
    ("log", POS, lambda t: t.log(), np.log, lambda x: 1 / x),
    ("sqrt", POS, lambda t: t.sqrt(), np.sqrt, lambda x: 0.5 / np.sqrt(x)),
    ("rsqrt", POS, lambda t: t.rsqrt(), lambda x: 1 / np.sqrt(x), lambda x: -0.5 * x**-1.5),
    ("abs", X, lambda t: t.abs(), np.abs, np.sign),
    ("tanh", X, lambda t: t.tanh(), np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    ("sigmoid", X, lambda t: t.sigmoid(), sig, lambda x: sig(x) * (1 - sig(x))),
    ("relu", X, lambda t: t.relu(), lambda x: np.maximum(x, 0), lambda x: (x > 0).astype(float)),
    ("silu", X, lambda t: t.silu(), lambda x: x * sig(x), lambda x: sig(x) * (1 + x * (1 - sig(x)))),
    ("F.silu", X, F.silu, lambda x: x * sig(x), lambda x: sig(x) * (1 + x * (1 - sig(x)))),
    ("square", X, lambda t: t**2, lambda x: x**2, lambda x: 2 * x),
    ("cube", X, lambda t: t**3, lambda x: x**3, lambda x: 3 * x**2),
    ("pow-half", POS, lambda t: t**0.5, np.sqrt, lambda x: 0.5 / np.sqrt(x)),
    ("rpow", X, lambda t: 2.0**t, lambda x: 2.0**x, lambda x: 2.0**x * np.log(2.0)),
    ("rdiv", POS, lambda t: 1.0 / t, lambda x: 1 / x, lambda x: -1 / x**2),
    ("rsub", X, lambda t: 1.0 - t, lambda x: 1 - x, lambda x: -np.ones_like(x)),
    ("sin", X, lambda t: t.sin(), np.sin, np.cos),
    ("cos", X, lambda t: t.cos(), np.cos, lambda x: -np.sin(x)),
    ("pow method", POS, lambda t: t.pow(1.5), lambda x: x**1.5, lambda x: 1.5 * x**0.5),
]


@pytest.mark.parametrize("name, x, op, value, derivative", UNARY, ids=[u[0] for u in UNARY])
def test_unary_value_and_gradient(name, x, op, value, derivative):
    t = leaf(x)
    y = op(t)
    assert_allclose(y.data, value(x), rtol=1e-12, atol=1e-15)
    y.backward(np.ones(x.shape))
    assert_allclose(t.grad, derivative(x), rtol=1e-10, atol=1e-15)


def test_sigmoid_at_plus_minus_1000_is_exact_without_warnings(no_warnings):
    for dtype in (np.float32, np.float64):
        x = leaf([-1000.0, 0.0, 1000.0], dtype)
        y = x.sigmoid()
        assert_array_equal(y.data, [0.0, 0.5, 1.0])
        y.sum().backward()
        assert np.isfinite(x.grad).all()
        assert_array_equal(x.grad, [0.0, 0.25, 0.0])


def test_silu_and_gelu_at_plus_minus_1000_without_warnings(no_warnings):
    x = leaf([-1000.0, 1000.0], np.float32)
    assert_array_equal(x.silu().data, [0.0, 1000.0])
    assert_array_equal(x.gelu().data, [0.0, 1000.0])
    (x.silu() + x.gelu()).sum().backward()
    assert_array_equal(x.grad, [0.0, 2.0])


# gelu(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), worked out to 16 digits
GELU_POINTS = [
    (0.0, 0.0, 0.5),
    (1.0, 0.8411919906082768, 1.0829640838457826),
    (-1.0, -0.15880800939172324, -0.08296408384578255),
    (2.0, 1.954597694087775, 1.0860992566236183),
    (-3.0, -0.0036373920817729943, -0.011584166630969516),
    (0.5, 0.34571400982514394, 0.8673699035346424),
]


@pytest.mark.parametrize("x, value, slope", GELU_POINTS)
def test_gelu_tanh_formula_at_hand_computed_points(x, value, slope):
    t = leaf(x)
    y = F.gelu(t, approximate="tanh")
    assert y.item() == pytest.approx(value, rel=1e-12, abs=1e-15)
    y.backward()
    assert t.grad == pytest.approx(slope, rel=1e-10)


def test_gelu_1_in_float32():
    assert gf.tensor([1.0]).gelu().item() == pytest.approx(0.8411920, abs=1e-7)


def test_maximum_minimum_ties_split_the_gradient_in_half():
    a, b = leaf([1.0, 2.0, 3.0]), leaf([2.0, 2.0, 1.0])
    hi = gf.maximum(a, b)
    assert_array_equal(hi.data, [2.0, 2.0, 3.0])
    hi.sum().backward()
    assert_array_equal(a.grad, [0.0, 0.5, 1.0])
    assert_array_equal(b.grad, [1.0, 0.5, 0.0])

    a, b = leaf([1.0, 2.0, 3.0]), leaf([2.0, 2.0, 1.0])
    lo = a.minimum(b)
    assert_array_equal(lo.data, [1.0, 2.0, 1.0])
    lo.sum().backward()
    assert_array_equal(a.grad, [1.0, 0.5, 0.0])
    assert_array_equal(b.grad, [0.0, 0.5, 1.0])


def test_maximum_with_a_broadcast_constant_sums_the_gradient():
    a = leaf([[0.0, 1.0], [2.0, 1.0]])
    b = leaf([1.0])
    gf.maximum(a, b).sum().backward()
    assert_array_equal(a.grad, [[0.0, 0.5], [1.0, 0.5]])
    assert_array_equal(b.grad, [2.0])  # 1 + 0.5 + 0 + 0.5


@pytest.mark.parametrize(
    "lo, hi, value, grad",
    [
        (0.0, 1.0, [0.0, 0.0, 0.5, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0, 0.0]),
        (0.0, None, [0.0, 0.0, 0.5, 1.0, 3.0], [0.0, 1.0, 1.0, 1.0, 1.0]),
        (None, 1.0, [-2.0, 0.0, 0.5, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 0.0]),
    ],
)
def test_clip_value_and_gradient_inside_outside_and_on_the_bounds(lo, hi, value, grad):
    x = leaf([-2.0, 0.0, 0.5, 1.0, 3.0])
    y = x.clip(lo, hi)
    assert_array_equal(y.data, value)
    y.sum().backward()
    assert_array_equal(x.grad, grad)  # as PyTorch's clamp: the bounds themselves pass the gradient


# --- a scalar expression, differentiated by hand ---------------------------------------------------


def test_scalar_expression_gradient_by_hand():
    # f = (a b + c)^2 / d, u = a b + c:  df/da = 2 u b / d,  df/db = 2 u a / d,  df/dc = 2 u / d,  df/dd = -u^2 / d^2
    a, b, c, d = (leaf(v) for v in (2.0, -3.0, 10.0, 4.0))
    f = (a * b + c) ** 2 / d
    u = 2.0 * -3.0 + 10.0
    assert f.item() == u**2 / 4.0 == 4.0
    f.backward()
    assert a.grad == 2 * u * -3.0 / 4.0 == -6.0
    assert b.grad == 2 * u * 2.0 / 4.0 == 4.0
    assert c.grad == 2 * u / 4.0 == 2.0
    assert d.grad == -(u**2) / 4.0**2 == -1.0
    assert a.grad.shape == () and a.grad.dtype == np.float64


def test_scalar_expression_with_reuse_gradient_by_hand():
    # g = x e^x + x^3 - log x:  dg/dx = e^x + x e^x + 3 x^2 - 1/x
    x = leaf(1.5)
    g = x * x.exp() + x**3 - x.log()
    assert g.item() == pytest.approx(1.5 * math.exp(1.5) + 1.5**3 - math.log(1.5), rel=1e-14)
    g.backward()
    assert x.grad == pytest.approx(math.exp(1.5) * 2.5 + 3 * 1.5**2 - 1 / 1.5, rel=1e-14)


def test_micrograd_readme_example():
    # the numbers micrograd's README prints: g = 24.7041, dg/da = 138.8338, dg/db = 645.5773
    a, b = leaf(-4.0), leaf(2.0)
    c = a + b
    d = a * b + b**3
    c += c + 1
    c += 1 + c + (-a)
    d += d * 2 + (b + a).relu()
    d += 3 * d + (b - a).relu()
    e = c - d
    f = e**2
    g = f / 2.0
    g += 10.0 / f
    assert g.item() == pytest.approx(24.7041, abs=5e-5)
    g.backward()
    assert a.grad == pytest.approx(138.8338, abs=5e-5)
    assert b.grad == pytest.approx(645.5773, abs=5e-5)


# --- reductions -----------------------------------------------------------------------------------

R = np.random.default_rng(1).standard_normal((2, 3, 4))


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (1, 2, 0)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "var"])
def test_reduction_values_match_numpy(name, axis, keepdims):
    y = getattr(gf.tensor(R), name)(axis=axis, keepdims=keepdims)
    expected = getattr(np, name)(R, axis=axis, keepdims=keepdims)
    assert y.shape == expected.shape
    assert_allclose(y.data, expected, rtol=1e-12)


def test_var_is_the_unbiased_variance_and_numpy_keywords_the_population_one():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    v = x.var()
    assert v.item() == pytest.approx(5 / 3)  # sum of (x - 2.5)^2 = 5, divided by N - 1 = 3 (as PyTorch)
    v.backward()
    assert_allclose(x.grad, 2 * (x.data - 2.5) / 3)
    y = leaf([1.0, 2.0, 3.0, 4.0])
    v = y.var(axis=0)
    assert v.item() == pytest.approx(1.25)  # numpy's keyword: divided by N = 4 (ddof=0)
    v.backward()
    assert_allclose(y.grad, 2 * (y.data - 2.5) / 4)


def test_sum_and_mean_gradients():
    x = leaf(R)
    (x.sum(axis=1) * 2).sum().backward()
    assert_array_equal(x.grad, np.full(R.shape, 2.0))
    x = leaf(R)
    x.mean(axis=(0, 2)).sum().backward()
    assert_allclose(x.grad, np.full(R.shape, 1 / 8))


def test_var_gradient_along_an_axis():
    x = leaf(R)
    x.var(axis=-1).sum().backward()
    assert_allclose(x.grad, 2 * (R - R.mean(axis=-1, keepdims=True)) / 4, rtol=1e-12)


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
def test_logsumexp_matches_log_sum_exp_and_its_gradient_is_softmax(axis):
    x = leaf(R[0])
    y = x.logsumexp(axis=axis)
    assert_allclose(y.data, np.log(np.sum(np.exp(R[0]), axis=axis)), rtol=1e-12)
    y.backward(np.ones(y.shape))
    lse = np.log(np.sum(np.exp(R[0]), axis=axis, keepdims=True))
    assert_allclose(x.grad, np.exp(R[0] - lse), rtol=1e-12)


def test_logsumexp_of_large_values_is_finite(no_warnings):
    x = gf.tensor([1000.0, 1000.0, -1000.0], dtype=np.float32)
    assert x.logsumexp().item() == pytest.approx(1000.0 + math.log(2.0), rel=1e-6)


def test_max_and_min_gradients_split_ties_evenly():
    x = leaf([1.0, 3.0, 3.0, 2.0])
    x.max().backward()
    assert_array_equal(x.grad, [0.0, 0.5, 0.5, 0.0])

    x = leaf([[1.0, 3.0, 3.0], [3.0, 3.0, 3.0], [0.0, 5.0, 1.0]])
    x.max(axis=1).sum().backward()
    assert_allclose(x.grad, [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3], [0, 1, 0]])

    x = leaf([[2.0, -1.0], [-1.0, 0.0]])
    x.min(axis=0, keepdims=True).sum().backward()
    assert_array_equal(x.grad, [[0.0, 1.0], [1.0, 0.0]])

    x = leaf([-1.0, 4.0, -1.0, -1.0])
    x.min().backward()
    assert_allclose(x.grad, [1 / 3, 0, 1 / 3, 1 / 3])


# --- softmax, log_softmax, cross_entropy ----------------------------------------------------------


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_matches_numpy_and_sums_to_1(axis):
    x = R[1]
    y = gf.tensor(x).softmax(axis=axis)
    assert_allclose(y.data, np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True), rtol=1e-12)
    assert_allclose(y.data.sum(axis=axis), 1.0, rtol=1e-12)
    assert_allclose(F.log_softmax(gf.tensor(x), axis=axis).data, np.log(y.data), rtol=1e-12, atol=1e-14)


def test_softmax_gradient_by_hand():
    # dL/dx_i = y_i (g_i - sum_j g_j y_j)
    x = leaf([0.5, -1.0, 2.0])
    g = np.array([1.0, -2.0, 0.5])
    y = F.softmax(x)
    y.backward(g)
    p = np.exp(x.data) / np.exp(x.data).sum()
    assert_allclose(x.grad, p * (g - (g * p).sum()), rtol=1e-12)


def test_log_softmax_gradient_by_hand():
    # dL/dx_j = g_j - softmax(x)_j sum_i g_i
    x = leaf([[0.5, -1.0, 2.0]])
    g = np.array([[1.0, -2.0, 0.5]])
    F.log_softmax(x).backward(g)
    p = np.exp(x.data) / np.exp(x.data).sum()
    assert_allclose(x.grad, g - p * g.sum(), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_and_log_softmax_of_huge_logits_are_stable(dtype, no_warnings):
    x = leaf([[1e4, -1e4, 0.0]], dtype)
    p = F.softmax(x)
    assert_array_equal(p.data, [[1.0, 0.0, 0.0]])
    (p * gf.tensor(np.array([[1.0, 2.0, 3.0]], dtype))).sum().backward()
    assert np.isfinite(x.grad).all()

    x = leaf([[1e4, -1e4, 0.0]], dtype)
    lp = F.log_softmax(x)
    assert_array_equal(lp.data, [[0.0, -2e4, -1e4]])
    lp.sum().backward()
    assert_allclose(x.grad, [[1.0 - 3.0, 1.0, 1.0]], atol=1e-6)  # g - softmax * sum(g) = 1 - 3 p


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_of_huge_logits_is_stable(dtype, no_warnings):
    z = leaf([[1e4, 0.0]], dtype)
    loss = F.cross_entropy(z, np.array([1]))
    assert loss.item() == 1e4
    loss.backward()
    assert_array_equal(z.grad, [[1.0, -1.0]])  # softmax - one-hot = [1, 0] - [0, 1]
    assert F.cross_entropy(gf.tensor(np.array([[1e4, 0.0]], dtype)), np.array([0])).item() == 0.0
    assert F.cross_entropy(gf.tensor(np.array([[1e4, -1e4, 0.0]], dtype)), np.array([2])).item() == 1e4


Z = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
ROW0 = math.log(1 + math.exp(-1) + math.exp(-2))  # -log(e^3 / (e^1 + e^2 + e^3)) = 0.40760596...
ROW1 = math.log(3.0)  # equal logits: -log(1/3)


def test_cross_entropy_by_hand():
    z = leaf(Z)
    loss = F.cross_entropy(z, np.array([2, 0]))
    assert loss.item() == pytest.approx((ROW0 + ROW1) / 2, rel=1e-14)
    assert math.isclose(ROW0, 0.4076059644443804, rel_tol=1e-15)
    loss.backward()
    one_hot = np.array([[0, 0, 1], [1, 0, 0]])
    assert_allclose(z.grad, (np_softmax(Z) - one_hot) / 2, rtol=1e-12)


def test_cross_entropy_equals_minus_log_softmax_at_the_target():
    z = np.random.default_rng(2).standard_normal((5, 7))
    t = np.array([0, 6, 3, 3, 1])
    expected = -np.log(np_softmax(z))[np.arange(5), t]
    assert_allclose(F.cross_entropy(gf.tensor(z), t, reduction="none").data, expected, rtol=1e-12)
    assert F.cross_entropy(gf.tensor(z), gf.tensor(t)).item() == pytest.approx(expected.mean(), rel=1e-12)


def test_cross_entropy_reductions_none_and_sum():
    z = leaf(Z)
    losses = F.cross_entropy(z, np.array([2, 0]), reduction="none")
    assert losses.shape == (2,)
    assert_allclose(losses.data, [ROW0, ROW1], rtol=1e-14)
    losses.backward(np.array([1.0, 3.0]))
    one_hot = np.array([[0, 0, 1], [1, 0, 0]])
    assert_allclose(z.grad, (np_softmax(Z) - one_hot) * [[1.0], [3.0]], rtol=1e-12)

    z = leaf(Z)
    total = F.cross_entropy(z, np.array([2, 0]), reduction="sum")
    assert total.item() == pytest.approx(ROW0 + ROW1, rel=1e-14)
    total.backward()
    assert_allclose(z.grad, np_softmax(Z) - one_hot, rtol=1e-12)


def test_cross_entropy_ignore_index_averages_only_the_rows_that_count():
    z = leaf(np.vstack([Z, Z]))
    targets = np.array([2, -100, -100, 0])
    loss = F.cross_entropy(z, targets, ignore_index=-100)
    assert loss.item() == pytest.approx((ROW0 + ROW1) / 2, rel=1e-14)  # 2 rows count, not 4
    loss.backward()
    assert_array_equal(z.grad[1:3], 0.0)
    assert_allclose(z.grad[0], (np_softmax(Z[0]) - [0, 0, 1]) / 2, rtol=1e-12)
    assert_allclose(z.grad[3], (np_softmax(Z[1]) - [1, 0, 0]) / 2, rtol=1e-12)

    none = F.cross_entropy(gf.tensor(np.vstack([Z, Z])), targets, ignore_index=-100, reduction="none")
    assert_allclose(none.data, [ROW0, 0.0, 0.0, ROW1], rtol=1e-14)
    total = F.cross_entropy(gf.tensor(np.vstack([Z, Z])), targets, ignore_index=-100, reduction="sum")
    assert total.item() == pytest.approx(ROW0 + ROW1, rel=1e-14)


def test_cross_entropy_with_every_row_ignored_is_nan():
    loss = F.cross_entropy(gf.tensor(Z), np.array([-1, -1]), ignore_index=-1)
    assert np.isnan(loss.item())
    assert F.cross_entropy(gf.tensor(Z), np.array([-1, -1]), ignore_index=-1, reduction="sum").item() == 0.0


def test_cross_entropy_with_every_row_ignored_has_zero_gradient(no_warnings):
    z = leaf(Z)
    F.cross_entropy(z, np.array([-1, -1]), ignore_index=-1).backward()
    assert_array_equal(z.grad, np.zeros_like(Z))


# --- norms ----------------------------------------------------------------------------------------


def test_layer_norm_matches_the_numpy_formula():
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((2, 3, 5)), rng.standard_normal(5), rng.standard_normal(5)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    for eps in (1e-5, 0.5):
        xhat = (x - mu) / np.sqrt(var + eps)
        y = F.layer_norm(gf.tensor(x), (5,), gf.tensor(w), gf.tensor(b), eps=eps)
        assert_allclose(y.data, xhat * w + b, rtol=1e-12, atol=1e-14)
    assert_allclose(F.layer_norm(gf.tensor(x)).data, (x - mu) / np.sqrt(var + 1e-5), rtol=1e-12, atol=1e-14)


def test_layer_norm_weight_and_bias_gradients_by_hand():
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 6.0]])
    w, b = leaf([1.0, 2.0, 3.0]), leaf([0.0, 0.0, 0.0])
    F.layer_norm(gf.tensor(x), (3,), w, b, eps=0.0).sum().backward()
    xhat = (x - x.mean(-1, keepdims=True)) / x.std(-1, keepdims=True)
    assert_allclose(w.grad, xhat.sum(axis=0), atol=1e-12)  # dL/dw = sum over rows of g * xhat
    assert_array_equal(b.grad, [2.0, 2.0, 2.0])  # dL/db = sum over rows of g


def test_rms_norm_matches_the_numpy_formula():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 6)), rng.standard_normal(6)
    for eps in (1e-6, 0.5):
        expected = x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps) * w
        assert_allclose(F.rms_norm(gf.tensor(x), w.shape, gf.tensor(w), eps=eps).data, expected, rtol=1e-12)
    assert_allclose(F.rms_norm(gf.tensor(x)).data, x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + 1e-6), rtol=1e-12)


def test_rms_norm_by_hand():
    # x = [3, 4]: mean(x^2) = 12.5, so y = x / sqrt(12.5) with eps = 0
    y = F.rms_norm(gf.tensor(np.array([3.0, 4.0])), eps=0.0)
    assert_allclose(y.data, [3 / math.sqrt(12.5), 4 / math.sqrt(12.5)], rtol=1e-15)


# --- matmul ---------------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3,), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((3,), (5, 3, 4)),
    ((5, 2, 3), (3,)),
    ((5, 2, 3), (5, 3, 4)),
    ((5, 1, 2, 3), (4, 3, 2)),
    ((1, 2, 3), (5, 3, 4)),
]


def bilinear_grads(a, b, u):
    """Gradients of L = sum(u * (a @ b)) from numpy alone: L is linear in each argument, so
    dL/da at an element is L with a replaced by the unit array of that element."""
    da, db = np.zeros(a.shape), np.zeros(b.shape)
    for i in np.ndindex(a.shape):
        e = np.zeros(a.shape)
        e[i] = 1
        da[i] = (u * np.matmul(e, b)).sum()
    for i in np.ndindex(b.shape):
        e = np.zeros(b.shape)
        e[i] = 1
        db[i] = (u * np.matmul(a, e)).sum()
    return da, db


@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_of_every_rank_matches_numpy(a_shape, b_shape):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    ta, tb = leaf(a), leaf(b)
    y = ta @ tb
    expected = np.matmul(a, b)
    assert y.shape == expected.shape
    assert_allclose(y.data, expected, rtol=1e-12)
    assert_allclose(gf.matmul(a, tb).data, expected, rtol=1e-12)
    u = rng.standard_normal(expected.shape)
    y.backward(u)
    da, db = bilinear_grads(a, b, u)
    assert ta.grad.shape == a_shape and tb.grad.shape == b_shape
    assert_allclose(ta.grad, da, rtol=1e-10, atol=1e-12)
    assert_allclose(tb.grad, db, rtol=1e-10, atol=1e-12)


def test_matmul_2d_gradients_by_hand():
    # C = A B:  dL/dA = G B^T,  dL/dB = A^T G;  with G = ones, dA_ik = sum_j B_kj, dB_kj = sum_i A_ik
    a, b = leaf([[1.0, 2.0], [3.0, 4.0]]), leaf([[5.0, 6.0], [7.0, 8.0]])
    c = a @ b
    assert_array_equal(c.data, [[19.0, 22.0], [43.0, 50.0]])
    c.sum().backward()
    assert_array_equal(a.grad, [[11.0, 15.0], [11.0, 15.0]])
    assert_array_equal(b.grad, [[4.0, 4.0], [6.0, 6.0]])


# --- indexing, embedding, where, masked_fill ------------------------------------------------------


def test_repeated_indices_accumulate_their_gradient():
    x = leaf(np.arange(5.0))
    y = x[[0, 0, 1]]
    assert_array_equal(y.data, [0.0, 0.0, 1.0])
    y.sum().backward()
    assert_array_equal(x.grad, [2.0, 1.0, 0.0, 0.0, 0.0])


def test_repeated_index_arrays_accumulate_weighted_gradients():
    x = leaf(np.arange(12.0).reshape(3, 4))
    y = x[np.array([[2, 0], [2, 2]]), 1]
    assert_array_equal(y.data, [[9.0, 1.0], [9.0, 9.0]])
    y.backward(np.array([[1.0, 10.0], [100.0, 1000.0]]))
    expected = np.zeros((3, 4))
    expected[0, 1], expected[2, 1] = 10.0, 1101.0
    assert_array_equal(x.grad, expected)


def test_basic_and_mask_indexing_values_and_gradients():
    a = np.arange(12.0).reshape(3, 4)
    x = leaf(a)
    y = x[1:, ::2]
    assert_array_equal(y.data, a[1:, ::2])
    y.sum().backward()
    assert_array_equal(x.grad, [[0, 0, 0, 0], [1, 0, 1, 0], [1, 0, 1, 0]])

    x = leaf(a)
    mask = a % 5 == 0
    y = x[mask]
    assert_array_equal(y.data, a[mask])
    y.sum().backward()
    assert_array_equal(x.grad, mask.astype(float))

    x = leaf(a)
    x[:, [1, 1, 3]].sum().backward()
    assert_array_equal(x.grad, np.tile([0.0, 2.0, 0.0, 1.0], (3, 1)))


def test_embedding_values_and_repeated_ids_sum_their_gradients():
    w = leaf([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    ids = np.array([[0, 2], [0, 0]])
    out = F.embedding(ids, w)
    assert_array_equal(out.data, [[[1, 2], [5, 6]], [[1, 2], [1, 2]]])
    out.backward(np.array([[[1.0, 1.0], [2.0, 2.0]], [[10.0, 10.0], [100.0, 100.0]]]))
    assert_array_equal(w.grad, [[111.0, 111.0], [0.0, 0.0], [2.0, 2.0]])


def test_where_values_and_gradients():
    cond = np.array([[True, False, True], [False, False, True]])
    a, b = leaf([1.0, 2.0, 3.0]), leaf([[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]])
    y = gf.where(cond, a, b)
    assert_array_equal(y.data, [[1.0, 20.0, 3.0], [40.0, 50.0, 3.0]])
    y.sum().backward()
    assert_array_equal(a.grad, [1.0, 0.0, 2.0])  # a broadcast over 2 rows
    assert_array_equal(b.grad, (~cond).astype(float))
    assert_array_equal(gf.where(cond[0], 1.0, a).data, [1.0, 2.0, 1.0])


def test_masked_fill_values_and_gradient():
    x = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = np.array([False, True, False])
    y = x.masked_fill(mask, -1e9)
    assert_array_equal(y.data, [[1.0, -1e9, 3.0], [4.0, -1e9, 6.0]])
    y.sum().backward()
    assert_array_equal(x.grad, [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]])
    assert_array_equal(gf.tensor([1.0, 2.0]).masked_fill(gf.tensor([1.0, 2.0]) > 1.5, 0.0).data, [1.0, 0.0])


# --- cat, stack, split, tril, triu, shape ops -----------------------------------------------------


def test_cat_values_and_gradient_slices():
    a, b = np.arange(4.0).reshape(2, 2), np.arange(6.0).reshape(2, 3)
    ta, tb = leaf(a), leaf(b)
    y = gf.cat([ta, tb], axis=1)
    assert_array_equal(y.data, np.concatenate([a, b], axis=1))
    g = np.arange(10.0).reshape(2, 5)
    y.backward(g)
    assert_array_equal(ta.grad, g[:, :2])
    assert_array_equal(tb.grad, g[:, 2:])
    assert_array_equal(gf.cat([ta, tb.T], axis=-2).data, np.concatenate([a, b.T], axis=0))


def test_stack_values_and_gradients():
    a, b = np.arange(3.0), np.arange(3.0, 6.0)
    ta, tb = leaf(a), leaf(b)
    y = gf.stack([ta, tb], axis=1)
    assert_array_equal(y.data, np.stack([a, b], axis=1))
    g = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    y.backward(g)
    assert_array_equal(ta.grad, g[:, 0])
    assert_array_equal(tb.grad, g[:, 1])
    assert_array_equal(gf.stack([ta, tb, ta], axis=-1).data, np.stack([a, b, a], axis=-1))


def test_split_piece_sizes_follow_pytorch():
    pieces = gf.split(gf.tensor(np.arange(5.0)), 2)
    assert [p.shape[0] for p in pieces] == [2, 2, 1]
    assert_array_equal(pieces[0].data, [0.0, 1.0])
    assert_array_equal(pieces[1].data, [2.0, 3.0])
    assert_array_equal(pieces[2].data, [4.0])
    assert [p.shape[0] for p in gf.split(gf.tensor(np.arange(6.0)), 3)] == [3, 3]
    assert [p.shape[0] for p in gf.split(gf.tensor(np.arange(2.0)), 5)] == [2]


def test_split_by_sizes_along_an_axis_and_its_gradient():
    a = np.arange(12.0).reshape(2, 6)
    x = leaf(a)
    p, q, r = gf.split(x, [1, 0, 5], axis=1)
    assert (p.shape, q.shape, r.shape) == ((2, 1), (2, 0), (2, 5))
    assert_array_equal(p.data, a[:, :1])
    assert_array_equal(r.data, a[:, 1:])
    (p * 3).sum().backward()  # only the first piece is used
    assert_array_equal(x.grad, [[3, 0, 0, 0, 0, 0], [3, 0, 0, 0, 0, 0]])


@pytest.mark.parametrize("k", [-1, 0, 1, 2])
@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (2, 3, 3)])
def test_tril_triu_match_numpy(shape, k):
    a = np.arange(1.0, np.prod(shape) + 1).reshape(shape)
    x = leaf(a)
    lower = gf.tril(x, k=k)
    assert_array_equal(lower.data, np.tril(a, k=k))
    assert_array_equal(gf.triu(gf.tensor(a), k=k).data, np.triu(a, k=k))
    lower.sum().backward()
    assert_array_equal(x.grad, np.tril(np.ones(shape), k=k))


def test_shape_ops_match_numpy():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = gf.tensor(a)
    assert_array_equal(x.permute(2, 0, 1).data, np.transpose(a, (2, 0, 1)))
    assert_array_equal(x.transpose(0, 2).data, np.swapaxes(a, 0, 2))
    assert_array_equal(x.swapaxes(-1, 1).data, np.swapaxes(a, -1, 1))
    assert_array_equal(x.T.data, a.T)
    assert_array_equal(x.reshape(4, -1).data, a.reshape(4, -1))
    assert_array_equal(x.reshape((6, 4)).data, a.reshape(6, 4))
    assert x.unsqueeze(1).shape == (2, 1, 3, 4) and x.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert gf.ones(1, 3, 1).squeeze().shape == (3,) and gf.ones(1, 3, 1).squeeze(-1).shape == (1, 3)


def test_expand_value_and_gradient_sums_the_copies():
    x = leaf([[1.0], [2.0]])
    y = x.expand(3, 2, 4)
    assert_array_equal(y.data, np.broadcast_to(x.data, (3, 2, 4)))
    assert x.expand(-1, 5).shape == (2, 5)
    y.sum().backward()
    assert_array_equal(x.grad, [[12.0], [12.0]])


# --- attention ------------------------------------------------------------------------------------


def np_attention(q, k, v, allowed=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    return np_softmax(s) @ v


def qkv(batch, tq, tk, d, dv, seed=6):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal(batch + (tq, d)),
        rng.standard_normal(batch + (tk, d)),
        rng.standard_normal(batch + (tk, dv)),
    )


@pytest.mark.parametrize("batch, tq, tk", [((), 3, 3), ((2,), 4, 5), ((2, 3), 2, 4)])
def test_attention_matches_numpy(batch, tq, tk):
    q, k, v = qkv(batch, tq, tk, 4, 3)
    out = F.scaled_dot_product_attention(gf.tensor(q), gf.tensor(k), gf.tensor(v))
    assert out.shape == batch + (tq, 3)
    assert_allclose(out.data, np_attention(q, k, v), rtol=1e-12)


def test_attention_mask_true_means_may_attend():
    q, k, v = qkv((), 3, 4, 2, 5)
    allowed = np.zeros((3, 4), dtype=bool)
    allowed[0, 2] = allowed[1, 0] = allowed[2, 3] = True  # each query may attend to exactly one key
    out = F.scaled_dot_product_attention(gf.tensor(q), gf.tensor(k), gf.tensor(v), mask=allowed)
    assert_allclose(out.data, v[[2, 0, 3]], rtol=1e-12)

    allowed = np.random.default_rng(7).random((3, 4)) < 0.6
    allowed[:, 0] = True
    out = F.scaled_dot_product_attention(gf.tensor(q), gf.tensor(k), gf.tensor(v), mask=gf.tensor(allowed))
    assert_allclose(out.data, np_attention(q, k, v, allowed), rtol=1e-12)


@pytest.mark.parametrize("tq, tk", [(4, 4), (2, 5)])
def test_causal_equals_a_manual_lower_triangular_mask(tq, tk):
    q, k, v = qkv((2,), tq, tk, 3, 2)
    manual = np.tril(np.ones((tq, tk), dtype=bool), k=tk - tq)  # the last tq positions of tk
    grads = []
    for kwargs in ({"causal": True}, {"mask": manual}):
        tensors = [leaf(a) for a in (q, k, v)]
        out = F.scaled_dot_product_attention(*tensors, **kwargs)
        assert_allclose(out.data, np_attention(q, k, v, manual), rtol=1e-12)
        out.backward(np.ones(out.shape))
        grads.append([t.grad for t in tensors])
    for g_causal, g_manual in zip(*grads):
        assert_allclose(g_causal, g_manual, rtol=1e-12)


def test_attention_fully_masked_query_gives_zeros_and_zero_gradients(no_warnings):
    q, k, v = qkv((), 3, 4, 2, 5)
    allowed = np.ones((3, 4), dtype=bool)
    allowed[1] = False
    tq, tk, tv = leaf(q), leaf(k), leaf(v)
    out = F.scaled_dot_product_attention(tq, tk, tv, mask=allowed)
    assert_array_equal(out.data[1], np.zeros(5))
    u = np.random.default_rng(8).standard_normal(out.shape)
    out.backward(u)
    assert_array_equal(tq.grad[1], np.zeros(2))
    for t in (tq, tk, tv):
        assert np.isfinite(t.grad).all()

    # the masked query contributes nothing: k and v get the gradients of the other two queries alone
    keep = [0, 2]
    rq, rk, rv = leaf(q[keep]), leaf(k), leaf(v)
    F.scaled_dot_product_attention(rq, rk, rv).backward(u[keep])
    assert_allclose(tk.grad, rk.grad, rtol=1e-12)
    assert_allclose(tv.grad, rv.grad, rtol=1e-12)
    assert_allclose(tq.grad[keep], rq.grad, rtol=1e-12)


def test_attention_gradcheck_with_a_masked_row():
    q, k, v = qkv((), 3, 4, 2, 3)
    allowed = np.tril(np.ones((3, 4), dtype=bool))
    allowed[2] = False
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=allowed)  # noqa: E731
    assert gf.gradcheck(fn, leaf(q), leaf(k), leaf(v))


# --- dropout --------------------------------------------------------------------------------------


def test_dropout_when_not_training_or_p_0_is_the_identity():
    x = leaf(np.random.default_rng(9).standard_normal((4, 5)))
    for y in (F.dropout(x, 0.5, training=False), F.dropout(x, 0.0)):
        assert_array_equal(y.data, x.data)
        x.grad = None
        (y * 2).sum().backward()
        assert_array_equal(x.grad, np.full((4, 5), 2.0))


@pytest.mark.parametrize("p", [0.25, 0.5, 0.9])
def test_dropout_zeroes_with_probability_p_and_scales_by_1_over_1_minus_p(p):
    gf.manual_seed(0)
    x = gf.ones(200, 500, requires_grad=True)
    y = F.dropout(x, p)
    scale = np.float32(1 / (1 - p))
    kept = y.data != 0
    assert_allclose(y.data[kept], scale, rtol=1e-6)
    assert kept.mean() == pytest.approx(1 - p, abs=0.01)
    assert y.data.mean() == pytest.approx(1.0, abs=0.03)  # the expected value is unchanged
    y.sum().backward()
    assert_array_equal(x.grad, y.data)  # d(x * keep / (1 - p))/dx = keep / (1 - p), and x = 1


def test_dropout_is_reproducible_after_manual_seed():
    x = gf.ones(10, 10)
    gf.manual_seed(123)
    first = F.dropout(x, 0.5).data
    second = F.dropout(x, 0.5).data
    gf.manual_seed(123)
    assert_array_equal(F.dropout(x, 0.5).data, first)
    assert_array_equal(F.dropout(x, 0.5).data, second)
    assert not np.array_equal(first, second)


# --- dtypes ---------------------------------------------------------------------------------------

MASK = np.array([True, False, True])
TARGETS = np.array([2, 0])
IDS = np.array([[0, 1], [1, 1]])

DTYPE_OPS = {
    "mul-np.float64": lambda x: x * np.float64(2.0),
    "add-np.float64-1": lambda x: x + np.float64(1),
    "rmul-np.float64": lambda x: np.float64(2.0) * x,
    "pow-np.float64": lambda x: x ** np.float64(2),
    "rpow-np.float64": lambda x: np.float64(2.0) ** x,
    "sub-float": lambda x: x - 0.1,
    "rsub-float": lambda x: 0.1 - x,
    "div-np.float64": lambda x: x / np.float64(3.0),
    "rdiv-float": lambda x: 1.0 / x,
    "add-0d-array": lambda x: x + np.array(1.5),
    "mul-int": lambda x: x * 3,
    "mul-np.int64": lambda x: x * np.int64(3),
    "neg": lambda x: -x,
    "exp": lambda x: x.exp(),
    "log": lambda x: x.log(),
    "sqrt": lambda x: x.sqrt(),
    "rsqrt": lambda x: x.rsqrt(),
    "abs": lambda x: x.abs(),
    "tanh": lambda x: x.tanh(),
    "sigmoid": lambda x: x.sigmoid(),
    "relu": lambda x: x.relu(),
    "gelu": lambda x: F.gelu(x, approximate="tanh"),
    "silu": lambda x: F.silu(x),
    "maximum-np.float64": lambda x: gf.maximum(x, np.float64(0.9)),
    "minimum-float": lambda x: x.minimum(0.9),
    "clip-np.float64": lambda x: x.clip(np.float64(0.6), np.float64(1.2)),
    "sum": lambda x: x.sum(axis=0),
    "mean": lambda x: x.mean(),
    "var": lambda x: x.var(axis=1),
    "max": lambda x: x.max(axis=1),
    "min": lambda x: x.min(),
    "logsumexp": lambda x: x.logsumexp(axis=-1),
    "softmax": lambda x: F.softmax(x),
    "log_softmax": lambda x: x.log_softmax(axis=0),
    "reshape": lambda x: x.reshape(3, 2),
    "permute": lambda x: x.permute(1, 0),
    "transpose": lambda x: x.transpose(0, 1),
    "T": lambda x: x.T,
    "unsqueeze-squeeze": lambda x: x.unsqueeze(0).squeeze(0),
    "expand": lambda x: x.expand(4, 2, 3),
    "index": lambda x: x[[0, 0, 1], 1:],
    "masked_fill-np.float64": lambda x: x.masked_fill(MASK, np.float64(-1e9)),
    "where-np.float64": lambda x: gf.where(MASK, x, np.float64(0.5)),
    "where-float-first": lambda x: gf.where(MASK, 0.5, x),
    "cat": lambda x: gf.cat([x, x * 2.0]),
    "stack": lambda x: gf.stack([x, x], axis=1),
    "split": lambda x: gf.split(x, 2, axis=1)[1],
    "tril": lambda x: gf.tril(x),
    "triu": lambda x: gf.triu(x, k=1),
    "matmul": lambda x: x @ x.T,
    "matmul-1d-np": lambda x: x @ np.ones(3, dtype=x.dtype),
    "layer_norm": lambda x: F.layer_norm(x, (3,), gf.ones(3, dtype=x.dtype), gf.zeros(3, dtype=x.dtype)),
    "rms_norm": lambda x: F.rms_norm(x, (3,), gf.ones(3, dtype=x.dtype)),
    "dropout": lambda x: F.dropout(x, 0.5),
    "cross_entropy": lambda x: F.cross_entropy(x, TARGETS),
    "cross_entropy-none": lambda x: F.cross_entropy(x * 1e-3, TARGETS, reduction="none"),
    "embedding": lambda x: F.embedding(IDS, x),
    "attention": lambda x: F.scaled_dot_product_attention(x, x, x, causal=True),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(DTYPE_OPS))
def test_float_dtype_is_kept_by_every_op_and_its_gradient(name, dtype):
    x = gf.tensor(np.array([[0.5, 1.0, 1.5], [0.7, 0.8, 2.0]], dtype=dtype), requires_grad=True)
    y = DTYPE_OPS[name](x)
    assert y.dtype == dtype, f"{name}: {y.dtype}"
    y.backward(np.ones(y.shape, dtype=np.float64))
    assert x.grad.dtype == dtype and x.grad.shape == x.shape


def test_float32_times_numpy_float64_values():
    x = gf.tensor([1.0, 2.0])
    assert x.dtype == np.float32
    assert_array_equal((x * np.float64(2.0)).data, np.array([2.0, 4.0], dtype=np.float32))
    assert_array_equal((np.float64(1.0) - x).data, np.array([0.0, -1.0], dtype=np.float32))
    assert_array_equal((x ** np.float64(2)).data, np.array([1.0, 4.0], dtype=np.float32))


def test_integer_tensor_with_python_float_gives_the_default_float_dtype():
    ids = gf.tensor([1, 2, 3])
    assert ids.dtype == np.int64
    y = ids + 0.5
    assert y.dtype == np.float32
    assert_array_equal(y.data, [1.5, 2.5, 3.5])
    assert (2.5 * ids).dtype == np.float32
    assert (ids / 2).dtype == np.float32
    assert ids.mean().dtype == np.float32 and ids.mean().item() == 2.0
    assert (ids * 2).dtype == np.int64


def test_integer_tensor_with_python_float_under_float64_default(default_float64):
    y = gf.tensor([1, 2, 3]) + 0.5
    assert y.dtype == np.float64
    assert_array_equal(y.data, [1.5, 2.5, 3.5])


def test_set_default_dtype_changes_what_python_floats_become(default_float64):
    assert gf.get_default_dtype() == np.float64
    assert gf.tensor([1.0]).dtype == np.float64
    assert gf.tensor(1.0).dtype == np.float64
    assert gf.zeros(2).dtype == gf.ones(2).dtype == gf.randn(2).dtype == gf.rand(2).dtype == np.float64
    assert gf.arange(0.0, 1.0, 0.5).dtype == np.float64
    assert gf.tensor(np.array([1.0], dtype=np.float32)).dtype == np.float32  # a numpy array keeps its dtype


def test_default_dtype_is_float32_and_numpy_arrays_keep_theirs():
    assert gf.get_default_dtype() == np.float32
    assert gf.tensor([1.0, 2.0]).dtype == np.float32
    assert gf.tensor(3.0).dtype == np.float32
    assert gf.tensor([1, 2]).dtype == np.int64
    assert gf.tensor(np.array([1.0])).dtype == np.float64
    assert gf.tensor([1.0], dtype=np.float64).dtype == np.float64


def test_grad_of_a_0d_tensor_is_a_0d_tensor_of_its_dtype():
    x = gf.tensor(3.0, requires_grad=True)
    (x * x).backward()
    assert isinstance(x.grad, gf.Tensor) and not x.grad.requires_grad and x.grad.grad_fn is None
    assert x.grad.shape == () and x.grad.dtype == np.float32 and x.grad == 6.0


# --- factories ------------------------------------------------------------------------------------


def test_zeros_ones_full():
    assert_array_equal(gf.zeros(2, 3).data, np.zeros((2, 3)))
    assert gf.zeros((2, 3)).shape == (2, 3) and gf.zeros(2, 3).dtype == np.float32
    assert_array_equal(gf.ones(4).data, np.ones(4))
    assert gf.ones(2, dtype=np.float64).dtype == np.float64
    f = gf.full((2, 2), 7.5)
    assert_array_equal(f.data, np.full((2, 2), 7.5))
    assert f.dtype == np.float32
    assert gf.zeros(0, 3).shape == (0, 3)
    assert gf.ones(2, requires_grad=True).requires_grad


def test_arange_gives_int64_for_ints_and_the_default_float_otherwise():
    a = gf.arange(5)
    assert a.dtype == np.int64
    assert_array_equal(a.data, [0, 1, 2, 3, 4])
    b = gf.arange(1, 8, 3)
    assert b.dtype == np.int64
    assert_array_equal(b.data, [1, 4, 7])
    c = gf.arange(0, 1, 0.25)
    assert c.dtype == np.float32
    assert_array_equal(c.data, [0.0, 0.25, 0.5, 0.75])
    assert gf.arange(3.0).dtype == np.float32
    assert gf.arange(3, dtype=np.float64).dtype == np.float64


def test_randn_and_rand_are_reproducible_with_manual_seed():
    gf.manual_seed(42)
    a, b = gf.randn(3, 4), gf.rand(5)
    gf.manual_seed(42)
    assert_array_equal(gf.randn(3, 4).data, a.data)
    assert_array_equal(gf.rand(5).data, b.data)
    gf.manual_seed(43)
    assert not np.array_equal(gf.randn(3, 4).data, a.data)
    assert a.shape == (3, 4) and a.dtype == np.float32 and b.dtype == np.float32


def test_rng_state_round_trip():
    gf.manual_seed(1)
    state = gf.get_rng_state()
    first = gf.randn(4).data
    gf.set_rng_state(state)
    assert_array_equal(gf.randn(4).data, first)


def test_randn_and_rand_distributions():
    gf.manual_seed(0)
    n = gf.randn(100_000, dtype=np.float64).data
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1) < 0.02
    u = gf.rand(100_000, dtype=np.float64).data
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01


@pytest.mark.parametrize("like", [gf.zeros_like, gf.ones_like, gf.randn_like, gf.rand_like])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_like_factories_keep_shape_and_dtype(like, dtype):
    x = gf.tensor(np.full((2, 3, 1), 9.0, dtype=dtype))
    y = like(x)
    assert y.shape == (2, 3, 1) and y.dtype == dtype
    assert not y.requires_grad
    assert like(x, dtype=np.float32).dtype == np.float32


def test_like_factory_values():
    x = gf.tensor(np.ones((2, 2)))
    assert_array_equal(gf.zeros_like(x).data, np.zeros((2, 2)))
    assert_array_equal(gf.ones_like(x).data, np.ones((2, 2)))
    f = gf.full_like(x, 3.5)
    assert_array_equal(f.data, np.full((2, 2), 3.5))
    assert f.dtype == np.float64
    ids = gf.tensor([1, 2, 3])
    assert gf.zeros_like(ids).dtype == np.int64
    assert_array_equal(gf.zeros_like(ids).data, [0, 0, 0])


def test_full_takes_its_dtype_from_the_fill_value_as_pytorch():
    assert gf.full((2,), 3).dtype == np.int64
    assert gf.full((2,), True).dtype == np.bool_
    assert gf.full((2,), 3.0).dtype == np.float32
    assert gf.full((2,), 3, dtype=np.float64).dtype == np.float64


def test_integer_tensor_with_a_numpy_float_scalar_gives_the_default_float_dtype():
    assert (gf.tensor([1, 2]) + np.float64(1.5)).dtype == np.float32


# --- running sums, sorting, picking along an axis, moving elements: values and gradients by hand ---------


def test_sin_and_cos_at_hand_computed_points():
    t = leaf([0.0, math.pi / 6, math.pi / 2])
    assert_allclose(t.sin().data, [0.0, 0.5, 1.0], atol=1e-15)
    assert_allclose(t.cos().data, [1.0, math.sqrt(3) / 2, 0.0], atol=1e-15)


def test_cumsum_value_and_gradient_by_hand():
    t = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y = t.cumsum(dim=1)
    assert_array_equal(y.data, [[1.0, 3.0, 6.0], [4.0, 9.0, 15.0]])
    y.backward(np.array([[1.0, 10.0, 100.0], [0.0, 0.0, 1.0]]))
    assert_array_equal(t.grad, [[111.0, 110.0, 100.0], [1.0, 1.0, 1.0]])  # x_j reaches every y_i with i >= j


def test_sort_values_indices_and_gradient_by_hand():
    t = leaf([3.0, 1.0, 2.0, 1.0])
    values, indices = t.sort()
    assert_array_equal(values.data, [1.0, 1.0, 2.0, 3.0])
    assert_array_equal(indices.data, [1, 3, 2, 0])  # the tie in index order
    assert indices.dtype == np.int64 and not indices.requires_grad
    values.backward(np.array([1.0, 2.0, 3.0, 4.0]))
    assert_array_equal(t.grad, [4.0, 1.0, 3.0, 2.0])
    assert_array_equal(gf.tensor([3.0, 1.0, 2.0]).sort(descending=True).indices.data, [0, 2, 1])


def test_gather_and_scatter_add_by_hand():
    t = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    index = gf.tensor([[2, 2], [0, 1]])
    y = t.gather(1, index)
    assert_array_equal(y.data, [[3.0, 3.0], [4.0, 5.0]])
    y.backward(np.array([[1.0, 10.0], [100.0, 1000.0]]))
    assert_array_equal(t.grad, [[0.0, 0.0, 11.0], [100.0, 1000.0, 0.0]])  # picked twice: both gradients

    x, src = leaf(np.zeros((2, 3))), leaf([[1.0, 2.0], [3.0, 4.0]])
    z = x.scatter_add(1, index, src)
    assert_array_equal(z.data, [[0.0, 0.0, 3.0], [3.0, 4.0, 0.0]])
    z.backward(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    assert_array_equal(x.grad, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert_array_equal(src.grad, [[3.0, 3.0], [4.0, 5.0]])  # g where each src element was added


def test_flip_roll_and_pad_by_hand():
    t = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert_array_equal(t.flip(1).data, [[3.0, 2.0, 1.0], [6.0, 5.0, 4.0]])
    assert_array_equal(t.flip(0, 1).data, [[6.0, 5.0, 4.0], [3.0, 2.0, 1.0]])
    assert_array_equal(t.roll(1, 1).data, [[3.0, 1.0, 2.0], [6.0, 4.0, 5.0]])
    assert_array_equal(t.roll(-1).data, [[2.0, 3.0, 4.0], [5.0, 6.0, 1.0]])  # over the flattened tensor
    padded = F.pad(t, (1, 0, 0, 1), value=9.0)  # (left, right) of the last axis, then (top, bottom)
    assert_array_equal(padded.data, [[9.0, 1.0, 2.0, 3.0], [9.0, 4.0, 5.0, 6.0], [9.0, 9.0, 9.0, 9.0]])
    padded.backward(np.arange(12.0).reshape(3, 4))
    assert_array_equal(t.grad, [[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]])


def test_einsum_equals_the_products_it_names():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    assert_array_equal(gf.einsum("ij,jk->ik", a, b).data, a @ b)
    assert_array_equal(gf.einsum("ij,jk", a, b).data, a @ b)  # implicit output: the letters seen once, sorted
    assert_array_equal(gf.einsum("ij->ji", a).data, a.T)
    assert gf.einsum("ij,ij->", a, a).item() == (a * a).sum()
    x = leaf(a)
    gf.einsum("ij->i", x).backward(np.array([1.0, 2.0]))
    assert_array_equal(x.grad, [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])  # j summed alone: the gradient repeats along it


def test_one_hot_linspace_and_randperm():
    assert_array_equal(F.one_hot(gf.tensor([0, 2, 1]), 4).data, [[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0]])
    assert F.one_hot(gf.tensor([[1], [3]])).shape == (2, 1, 4) and F.one_hot(gf.tensor([1])).dtype == np.int64
    assert_allclose(gf.linspace(0, 1, 5).data, [0.0, 0.25, 0.5, 0.75, 1.0])
    assert gf.linspace(0, 1, 5).dtype == np.float32 and gf.linspace(2, 3, 1).tolist() == [2.0]
    gf.manual_seed(3)
    p = gf.randperm(10)
    gf.manual_seed(3)
    assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(10)) and gf.randperm(10).tolist() == p.tolist()
