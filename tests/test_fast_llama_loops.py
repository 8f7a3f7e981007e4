"""The fast tier's loops for the Llama models' SiLU and RMSNorm (gradflow/fast/silu.py, compiled_norm.py) give
the plain ops' numbers: in value and every gradient, on each gradcheck table row that runs them and on SmolLM2's
shapes, in float64 and float32; SiLU to the plain op's own rounding, at the ends of the floats too, and the same
y without a graph; RMSNorm up to the rounding of its sums. Without the loops (numba absent or GRADFLOW_NUMBA=0:
compiled.numpy_only() takes the same path) SiLU's numpy passes give the plain op's y to the last bit, and RMSNorm
runs the plain op.
"""

import contextlib

import numpy as np
import pytest
from helpers import run_in_tier

import gradflow as gf
from gradflow import fast
from gradflow.engine import ops
from gradflow.engine.autograd import topological_order
from gradflow.fast import compiled, compiled_norm, silu
from gradflow.nn import functional as F
from gradflow.tools.gradcheck_table import CASES

KERNELS = {ops.Silu: silu.Silu, ops.RMSNorm: compiled_norm.RMSNorm}


def _ops_of(case, tier):
    with gf.use_kernels(tier):
        return {type(node) for node in topological_order(case.fn(*case.inputs()).grad_fn)}


TABLE = [case for case in CASES if _ops_of(case, "plain") & set(KERNELS)]


def test_the_fast_tier_runs_these_kernels_on_the_tables_rows():
    assert fast.REPLACES[ops.Silu] is silu.Silu and fast.REPLACES[ops.RMSNorm] is compiled_norm.RMSNorm
    assert issubclass(compiled_norm.RMSNorm, ops.RMSNorm)  # the plain op where the loops cannot run
    assert {op for case in TABLE for op in _ops_of(case, "fast")} >= set(KERNELS.values())
    assert {"silu", "F.silu", "rms_norm"} <= {case.name for case in TABLE}


def _as_close_as_plain(fn, arrays, dtype):
    """Each value and gradient of the fast tier as close to the plain op's in float64 (on the same inputs)
    as the plain op's own in `dtype`, give or take test_fast_compiled's tolerances (float64: the plain op's
    to 1e-12)."""
    rtol, atol = (1e-12, 1e-14) if dtype == np.float64 else (2e-5, 2e-6)
    arrays = [a.astype(dtype) for a in arrays]
    wide = run_in_tier("plain", fn, [a.astype(np.float64) for a in arrays])
    for w, p, f in zip(wide, run_in_tier("plain", fn, arrays), run_in_tier("fast", fn, arrays)):
        assert f.dtype == p.dtype == dtype and f.shape == p.shape
        assert (np.abs(f - w) <= np.abs(p - w) + rtol * np.abs(w) + atol).all()


@pytest.mark.usefixtures("compiled_loops")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", TABLE, ids=[c.label for c in TABLE])
def test_the_loops_equal_plain_on_the_gradcheck_table(case, dtype):
    _as_close_as_plain(case.fn, [x.data for x in case.inputs()], dtype)


def _model_shapes():
    """SmolLM2-135M's: the MLP's (8, 78, 1536) and the residual stream's (8, 78, 576); and what else the
    kernels meet: no weight, a weight that learns nothing (LoRA's frozen norms), two trailing axes, a transposed x."""
    rng = np.random.default_rng(0)
    frozen = 1 + 0.1 * rng.standard_normal(576)
    return {
        "silu (8, 78, 1536)": (F.silu, [rng.standard_normal((8, 78, 1536)) * 3]),
        "silu, transposed": (lambda x: F.silu(x.T), [rng.standard_normal((6, 5, 4))]),
        "rms_norm (8, 78, 576)": (
            lambda x, w: F.rms_norm(x, w.shape, w, eps=1e-5),
            [rng.standard_normal((8, 78, 576)) * 2, 1 + 0.1 * rng.standard_normal(576)],
        ),
        "rms_norm (8, 78, 576), frozen weight": (
            lambda x: F.rms_norm(x, frozen.shape, gf.tensor(frozen.astype(x.dtype)), eps=1e-5),
            [rng.standard_normal((8, 78, 576))],
        ),
        "rms_norm (4, 7, 33), no weight": (F.rms_norm, [3 + rng.standard_normal((4, 7, 33))]),
        "rms_norm over two axes": (
            lambda x, w: F.rms_norm(x, w.shape, w),
            [rng.standard_normal((3, 4, 5)), rng.standard_normal((4, 5))],
        ),
        "rms_norm, transposed": (
            lambda x, w: F.rms_norm(x.T, w.shape, w),
            [rng.standard_normal((9, 2, 3)), rng.standard_normal(9)],
        ),
    }


MODEL_SHAPES = _model_shapes()


@pytest.mark.usefixtures("compiled_loops")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", MODEL_SHAPES)
def test_the_loops_equal_plain_on_the_models_shapes(name, dtype):
    """As close as the plain op's own: it sums dL/dw over 624 rows one row after the other in x's kind
    (errors of 1e-4 of the result in float32, 1e-11 in float64), the loop in float64."""
    fn, arrays = MODEL_SHAPES[name]
    with gf.use_kernels("fast"):
        nodes = topological_order(fn(*(gf.tensor(a.astype(dtype), requires_grad=True) for a in arrays)).grad_fn)
    assert [type(node) for node in nodes if type(node) in KERNELS.values()]  # the kernel ran,
    assert all(node.rows for node in nodes if type(node) is compiled_norm.RMSNorm)  # with its loops
    _as_close_as_plain(fn, arrays, dtype)


def _sigmoid_exact(x):
    return 1 / (1 + np.exp(-x.astype(np.longdouble)))


@pytest.mark.usefixtures("compiled_loops")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_silus_loop_equals_plain_to_the_plain_ops_own_rounding(dtype):
    """Spread wide (|x| up to about 40): y within a few ulps of the plain op's, and of x / (1 + e^-x) in long
    double; the gradient g s (1 + x (1 - s)) within a few ulps of the terms it is made of (it crosses zero
    near x = -1.28, where its relative error is as large as the cancellation makes it)."""
    x = (np.random.default_rng(6).standard_normal((12, 4099)) * 8).astype(dtype)
    plain, fast_ = run_in_tier("plain", F.silu, [x]), run_in_tier("fast", F.silu, [x])
    g = np.random.default_rng(1).standard_normal(x.shape).astype(dtype)  # run_in_tier's upstream gradient
    eps, s = np.finfo(dtype).eps, _sigmoid_exact(x)
    np.testing.assert_allclose(fast_[0], plain[0], rtol=8 * eps, atol=0)
    assert (np.abs(fast_[0] - x * s) <= 8 * eps * np.abs(x * s)).all()
    terms = np.abs(g) * s * (1 + 2 * np.abs(x))
    assert (np.abs(fast_[1] - plain[1]) <= 16 * eps * terms).all()
    assert (np.abs(fast_[1] - g * s * (1 + x * (1 - s))) <= 16 * eps * terms).all()


ENDS = [-np.inf, -1e30, -1e4, -100.0, -30.0, -1.0, -0.0, 0.0, 1.0, 30.0, 100.0, 1e4, 1e30, np.inf, np.nan]


@pytest.mark.usefixtures("compiled_loops")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_silus_loop_at_the_ends_of_the_floats(dtype):
    """Where e^-|x| is 0 or below the smallest normal float: y = x for large x, -0 for large negative x,
    inf at inf, NaN at -inf (-inf times s = 0) and at NaN, as the plain op; the gradients too. Below the
    smallest normal the loop's e is 0 where numpy's is subnormal (loops.exp_of_nonpositive): there the plain
    op's y is a subnormal, the loop's -0."""
    x = np.array(ENDS, dtype)
    with np.errstate(all="ignore"):
        plain, fast_ = run_in_tier("plain", F.silu, [x]), run_in_tier("fast", F.silu, [x])
    for p, f in zip(plain, fast_):
        np.testing.assert_allclose(f, p, rtol=4 * np.finfo(dtype).eps, atol=np.finfo(dtype).tiny)
    assert (np.signbit(fast_[0]) == np.signbit(plain[0]))[~np.isnan(x)].all()  # -0 stays -0
    assert np.isnan(fast_[0][[0, -1]]).all() and fast_[0][-2] == np.inf and fast_[0][-3] == x[-3]


@pytest.mark.usefixtures("compiled_loops")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_silus_loop_without_a_graph_gives_the_same_values(dtype):
    """Without a graph to record the loop skips dy/dx (a loop of its own): y is the same to the last bit,
    the ends of the floats included (a NaN's sign aside: IEEE 754 leaves it to the machine's instructions)."""
    x = np.concatenate([ENDS, np.random.default_rng(7).standard_normal(4099) * 8]).astype(dtype)
    with gf.use_kernels("fast"), np.errstate(all="ignore"):
        recorded = F.silu(gf.tensor(x, requires_grad=True))
        assert type(recorded.grad_fn) is silu.Silu
        with gf.no_grad():
            unrecorded = F.silu(gf.tensor(x)).data
    np.testing.assert_array_equal(unrecorded, recorded.data)
    assert (np.signbit(unrecorded) == np.signbit(recorded.data))[~np.isnan(x)].all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_silus_numpy_passes_give_the_plain_ops_numbers(dtype):
    """Without the loops: s, y and dy/dx as the plain op computes them, so y to the last bit (ends included),
    and the gradient g dy/dx where the plain op multiplies g s by the rest: to its rounding (subnormal
    gradients to the smallest normal). Under no_grad, the same y."""
    x = np.concatenate([ENDS, np.random.default_rng(8).standard_normal(2000) * 8]).astype(dtype)
    with compiled.numpy_only(), np.errstate(all="ignore"):
        plain, fast_ = run_in_tier("plain", F.silu, [x]), run_in_tier("fast", F.silu, [x])
        with gf.use_kernels("fast"), gf.no_grad():
            unrecorded = F.silu(gf.tensor(x)).data
    np.testing.assert_array_equal(fast_[0], plain[0])
    np.testing.assert_array_equal(unrecorded, plain[0])
    finfo = np.finfo(dtype)
    np.testing.assert_allclose(fast_[1], plain[1], rtol=4 * finfo.eps, atol=finfo.tiny)


def _silu_or_error(tier, x):
    with gf.use_kernels(tier), np.errstate(all="ignore"):
        try:
            return F.silu(gf.tensor(x))
        except TypeError as error:
            return str(error)


@pytest.mark.parametrize("with_loops", [False, True])
def test_silus_numpy_passes_take_what_the_plain_op_takes(with_loops):
    """float16 (which the loops do not take: it runs the numpy passes beside the loops too), integers and
    0-d inputs (the plain op itself) give the plain op's numbers in its dtype, booleans its error."""
    xs = [
        np.array([e for e in ENDS if abs(e) != 1e30], np.float16),
        np.arange(-3, 4),
        np.int8(-2),
        np.float16(0.5),
        np.array([True, False]),
    ]
    for x in xs if with_loops else xs + [np.float32(-1.5), np.float64(2.5)]:
        plain = _silu_or_error("plain", x)
        with contextlib.nullcontext() if with_loops else compiled.numpy_only():
            fast_ = _silu_or_error("fast", x)
        if isinstance(plain, str):
            assert fast_ == plain and "silu" in plain
            continue
        assert fast_.dtype == plain.dtype and fast_.shape == plain.shape
        np.testing.assert_array_equal(fast_.data, plain.data)


@pytest.mark.parametrize("with_loops", [False, True])
def test_silu_of_a_single_number_is_the_plain_ops_value_and_gradient(with_loops):
    """A 0-d x runs the plain op (numpy before 2.0 promotes its arithmetic by value), backward too."""
    for x in (np.float32(-1.5), np.float64(2.5)):
        results = []
        for tier in ("plain", "fast"):
            with contextlib.nullcontext() if with_loops else compiled.numpy_only():
                results.append(run_in_tier(tier, F.silu, [x]))
        for p, f in zip(*results):
            assert f.dtype == p.dtype and f.shape == p.shape == ()
            np.testing.assert_array_equal(f, p)


def test_silus_numpy_passes_pass_gradcheck():
    x = gf.tensor(np.random.default_rng(9).standard_normal((3, 7)) * 3, requires_grad=True)
    with compiled.numpy_only(), gf.use_kernels("fast"):
        assert type(F.silu(x).grad_fn) is silu.Silu
        assert gf.gradcheck(F.silu, x)


@pytest.mark.parametrize("name", [name for name in MODEL_SHAPES if name.startswith("rms_norm")])
def test_without_the_loops_rms_norm_runs_the_plain_op(name):
    """numpy_only(): the fast kernel runs ops.RMSNorm's own forward and backward, so its very numbers."""
    fn, arrays = MODEL_SHAPES[name]
    arrays = [a.astype(np.float32) for a in arrays]
    with compiled.numpy_only():
        plain, fast_ = run_in_tier("plain", fn, arrays), run_in_tier("fast", fn, arrays)
    for p, f in zip(plain, fast_):
        np.testing.assert_array_equal(f, p)


@pytest.mark.usefixtures("compiled_loops")
def test_what_rms_norms_loops_do_not_take_runs_the_plain_op():
    """A float64 weight on float32 activations, no rows, a float16 x: the plain op's numbers to the last bit."""
    rng = np.random.default_rng(3)
    x32, w64 = rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal(6)
    cases = [
        (lambda x, w: F.rms_norm(x, w.shape, w), [x32, w64]),
        (F.rms_norm, [np.zeros((0, 6), np.float32)]),
    ]
    assert not compiled_norm.fits(x32.astype(np.float16))  # float16 cannot require a gradient: forward alone
    with gf.use_kernels("fast"):
        half = F.rms_norm(gf.tensor(x32.astype(np.float16)))
    with gf.use_kernels("plain"):
        np.testing.assert_array_equal(half.data, F.rms_norm(gf.tensor(x32.astype(np.float16))).data)
    for fn, arrays in cases:
        assert not compiled_norm.fits(arrays[0], *arrays[1:])
        with gf.use_kernels("fast"):
            node = fn(*(gf.tensor(a, requires_grad=True) for a in arrays)).grad_fn
        assert type(node) is compiled_norm.RMSNorm and not node.rows
        for p, f in zip(run_in_tier("plain", fn, arrays), run_in_tier("fast", fn, arrays)):
            assert f.dtype == p.dtype
            np.testing.assert_array_equal(f, p)


@pytest.mark.usefixtures("compiled_loops")
def test_rms_norms_loops_equal_the_formula_in_long_double():
    """Against y = x w / sqrt(mean(x^2) + eps), dL/dx = r (gh - xhat mean(gh xhat)) and dL/dw = sum g xhat worked
    in long double, on SmolLM2's 624 rows of 576: each within a few ulps of the terms it is made of."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((624, 576)).astype(np.float32) * 3, 1 + 0.1 * rng.standard_normal(576).astype(np.float32)
    y, dx, dw = run_in_tier("fast", lambda x, w: F.rms_norm(x, w.shape, w, eps=1e-5), [x, w])
    g = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32).astype(np.longdouble)  # run_in_tier's
    xl, wl = x.astype(np.longdouble), w.astype(np.longdouble)
    r = 1 / np.sqrt((xl * xl).mean(axis=-1, keepdims=True) + np.longdouble(1e-5))
    xhat, gh = xl * r, g * wl
    eps = np.finfo(np.float32).eps
    assert (np.abs(y - xhat * wl) <= 4 * eps * np.abs(xhat * wl)).all()
    exact_dx = r * (gh - xhat * (gh * xhat).mean(axis=-1, keepdims=True))
    dx_terms = r * (np.abs(gh) + np.abs(xhat) * np.abs(gh * xhat).mean(axis=-1, keepdims=True))
    assert (np.abs(dx - exact_dx) <= 8 * eps * dx_terms).all()
    assert (np.abs(dw - (g * xhat).sum(axis=0)) <= 8 * eps * np.abs(g * xhat).sum(axis=0)).all()
