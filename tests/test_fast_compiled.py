"""The fast tier's compiled loops (gradflow/fast/loops.py, numba) give the plain ops'
numbers: LayerNorm, both GELUs, attention's and cross-entropy's softmax
in value and gradient on every gradcheck table row that runs them, in float64 and float32, and on
the models' shapes; Adam's step to the last bit. Without numba (or with GRADFLOW_NUMBA=0) the fast
tier runs its numpy kernels, and importing gradflow never imports numba.

The tests that need numba skip where it is not installed, unless GRADFLOW_REQUIRE_NUMBA=1 (CI sets
it), which makes that a failure.
"""

import os
import subprocess
import sys
from importlib.metadata import version

import numpy as np
import pytest
from helpers import heads, run_in_tier  # heads as the models make them: transposed views

import gradflow as gf
from gradflow import fast
from gradflow.engine import ops
from gradflow.engine.autograd import topological_order
from gradflow.engine.kernels import kernel
from gradflow.engine.ops.elementwise import GELU_A, GELU_C
from gradflow.fast import adam as fast_adam
from gradflow.fast import compiled, compiled_norm, cross_entropy, gelu_erf, norm
from gradflow.nn import functional as F
from gradflow.optim import adam as plain_adam
from gradflow.tools.gradcheck_table import CASES

COMPILED = (
    ops.LayerNorm,
    ops.Gelu,
    ops.GeluErf,
    ops.ScaledDotProductAttention,
    ops.CrossEntropy,
)  # plain ops whose fast kernels run loops (SiLU's and RMSNorm's: tests/test_fast_llama_loops.py)


def _ops_of(case):
    with gf.use_kernels("plain"):
        return {type(node) for node in topological_order(case.fn(*case.inputs()).grad_fn)}


TABLE = [case for case in CASES if _ops_of(case) & set(COMPILED)]


def _assert_same(fn, arrays, dtype):
    tight = dtype == np.float64
    rtol, atol = (1e-12, 1e-14) if tight else (2e-5, 2e-6)
    for p, f in zip(run_in_tier("plain", fn, arrays), run_in_tier("fast", fn, arrays)):
        assert f.dtype == p.dtype and f.shape == p.shape
        np.testing.assert_allclose(f, p, rtol=rtol, atol=atol)


def test_the_table_has_rows_for_every_compiled_kernel():
    assert {op for case in TABLE for op in _ops_of(case)} >= set(COMPILED)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", TABLE, ids=[c.label for c in TABLE])
def test_compiled_kernels_equal_plain_on_the_gradcheck_table(compiled_loops, case, dtype):
    _assert_same(case.fn, [x.data.astype(dtype) for x in case.inputs()], dtype)


CE_TARGETS = np.random.default_rng(1).integers(0, 65, 768)


def _model_shapes():
    rng = np.random.default_rng(0)
    return {
        "layer_norm (12, 64, 128), no bias": (
            lambda x, w: F.layer_norm(x, w.shape, w),
            [rng.standard_normal((12, 64, 128)), 1 + 0.1 * rng.standard_normal(128)],
        ),
        "layer_norm (4, 7, 33), weight and bias": (
            lambda x, w, b: F.layer_norm(x, w.shape, w, b),
            [3 + rng.standard_normal((4, 7, 33)), rng.standard_normal(33), rng.standard_normal(33)],
        ),
        "gelu exact (12, 64, 512)": (F.gelu, [rng.standard_normal((12, 64, 512)) * 2]),
        "cross_entropy (768, 65)": (lambda z: F.cross_entropy(z, CE_TARGETS), [rng.standard_normal((768, 65)) * 3]),
        "cross_entropy (768, 65), confident, some ignored": (
            lambda z: F.cross_entropy(z + 40 * np.eye(65)[CE_TARGETS], np.where(CE_TARGETS < 5, -100, CE_TARGETS)),
            [rng.standard_normal((768, 65))],
        ),
        "cross_entropy (768, 65) sum": (
            lambda z: F.cross_entropy(z, CE_TARGETS, reduction="sum"),
            [rng.standard_normal((768, 65)) * 3],
        ),
        **_attention_shapes(rng),
    }


def _attention_shapes(rng):
    """Attention as the models run it, and each way its loop masks: causal (the loop's own mask) in one
    block of queries and in several, decoding (fewer queries than keys), more queries than keys (the
    first see none), a padding mask and a float bias (masks in the bias), a row of -inf biases."""
    causal = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True)  # noqa: E731
    row_at_minus_inf = np.zeros((4, 6))
    row_at_minus_inf[2] = -np.inf
    return {
        "attention causal (12, 4, 64, 32)": (causal, [heads(12, 64, 4, 32, rng) for _ in range(3)]),
        "attention causal, 300 positions": (causal, [heads(1, 300, 2, 16, rng) for _ in range(3)]),
        "attention decoding, 3 queries over 10 keys": (
            causal,
            [rng.standard_normal((2, 3, 3, 8)), rng.standard_normal((2, 3, 10, 8)), rng.standard_normal((2, 3, 10, 8))],
        ),
        "attention causal, more queries than keys": (
            causal,
            [rng.standard_normal((2, 9, 8)), rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 4, 8))],
        ),
        "attention padding mask": (
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=gf.nn.padding_mask([5, 3], 5), causal=True),
            [heads(2, 5, 2, 8, rng) for _ in range(3)],
        ),
        "attention float bias with a row at -inf": (
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=gf.tensor(row_at_minus_inf)),
            [rng.standard_normal((3, 4, 8)), rng.standard_normal((3, 6, 8)), rng.standard_normal((3, 6, 8))],
        ),
    }


MODEL_SHAPES = _model_shapes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", MODEL_SHAPES)
def test_compiled_kernels_equal_plain_on_the_models_shapes(compiled_loops, name, dtype):
    fn, arrays = MODEL_SHAPES[name]
    _assert_same(fn, [a.astype(dtype) for a in arrays], dtype)


@pytest.mark.parametrize("name", [name for name in MODEL_SHAPES if name.startswith("attention")])
def test_attentions_numpy_passes_equal_plain_beside_the_loops(compiled_loops, name):
    """The fast attention without the loops (numpy's passes, its scores stored keys-outermost) gives
    the plain op's numbers too, in this same process."""
    fn, arrays = MODEL_SHAPES[name]
    with compiled.numpy_only():
        _assert_same(fn, [a.astype(np.float32) for a in arrays], np.float32)


@pytest.mark.parametrize("kind", [np.float32, np.float64])
def test_the_loops_exp_is_numpys_to_an_ulp_or_three(compiled_loops, kind):
    """exp_of_nonpositive against numpy's exp: its range, -inf, zero and NaN; below the smallest
    normal number it gives 0 where numpy gives a subnormal."""
    import numba

    exp = compiled_loops.EXP["f4" if kind == np.float32 else "f8"]

    @numba.njit
    def every(x, out):
        for i in range(x.size):
            out[i] = exp(x[i])

    rng = np.random.default_rng(4)
    smallest = np.log(np.finfo(kind).tiny)
    edges = [0, -0.0, smallest, -np.inf, np.nan]
    x = np.concatenate([rng.uniform(smallest, 0, 100_000), rng.uniform(-1, 0, 1000), edges]).astype(kind)
    y = np.empty_like(x)
    every(x, y)
    expected = np.exp(x)
    bits = np.int32 if kind == np.float32 else np.int64
    ulps = np.abs(y[:-2].view(bits) - expected[:-2].view(bits))
    assert ulps.max() <= (3 if kind == np.float32 else 1)
    assert y[-2] == 0 and np.isnan(y[-1])
    assert y[-5] == y[-4] == 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelus_loop_equals_plain_to_the_plain_ops_own_rounding(compiled_loops, dtype):
    """On the baby GPT's activations (12, 64, 512), spread wide. The plain op computes h = (1 + tanh(u))
    / 2, which loses digits where tanh(u) is near -1 (x below about -3: an error of up to a few ulps
    of 1, times |x|, in y); the loop's h = e / (1 + e) keeps them, as long double shows."""
    x = np.random.default_rng(6).standard_normal((12, 64, 512)) * 4
    gelu = lambda x: F.gelu(x, approximate="tanh")  # noqa: E731
    plain, fast_ = run_in_tier("plain", gelu, [x.astype(dtype)]), run_in_tier("fast", gelu, [x.astype(dtype)])
    eps = np.finfo(dtype).eps
    for p, f in zip(plain, fast_):
        np.testing.assert_allclose(f, p, rtol=8 * eps, atol=8 * eps * np.abs(x).max())
    if dtype == np.float64:
        xl = x.astype(np.longdouble)
        u = np.longdouble(GELU_C) * (xl + np.longdouble(GELU_A) * xl**3)
        exact = xl / (1 + np.exp(-2 * u))  # y's relative error can be |2u| ulps: u's own rounding, exponentiated
        assert (np.abs(fast_[0] - exact) <= 4 * eps * (1 + np.abs(2 * u)) * np.abs(exact)).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelus_loop_without_a_graph_gives_the_same_values(compiled_loops, dtype):
    """Without a graph to record the loop skips dy/dx (a loop of its own): y is the same to the last bit,
    the ends of the floats included."""
    x = np.random.default_rng(7).standard_normal(4099).astype(dtype) * 4
    x[:6] = [-np.inf, -1e30, -0.0, 1e30, np.inf, np.nan]
    with gf.use_kernels("fast"), np.errstate(all="ignore"):
        recorded = F.gelu(gf.tensor(x, requires_grad=True), approximate="tanh").data
        with gf.no_grad():
            unrecorded = F.gelu(gf.tensor(x), approximate="tanh").data
    np.testing.assert_array_equal(unrecorded, recorded)
    assert (np.signbit(unrecorded) == np.signbit(recorded)).all()


def test_gelus_loop_at_the_ends_of_the_floats(compiled_loops):
    """Where exp(-2|u|) is 0 or u overflows: y = x for large x, -0 for large negative x, inf at inf
    and NaN at -inf (x times a weight of 0) and at NaN, as the plain op; the gradients too (a zero
    gradient's sign aside)."""
    x = np.array([-np.inf, -1e30, -1e4, -30.0, -0.0, 0.0, 30.0, 1e4, 1e30, np.inf, np.nan], np.float32)
    gelu = lambda x: F.gelu(x, approximate="tanh")  # noqa: E731
    with np.errstate(all="ignore"):
        plain, fast_ = run_in_tier("plain", gelu, [x]), run_in_tier("fast", gelu, [x])
    for p, f in zip(plain, fast_):
        np.testing.assert_allclose(f, p, rtol=1e-6, atol=1e-30)
    assert (np.signbit(fast_[0]) == np.signbit(plain[0]))[~np.isnan(x)].all()  # -0 stays -0


def test_a_nan_score_gives_nan_weights_in_its_row_only(compiled_loops):
    """As the plain op: max, exp and the sum all carry the NaN of one score, in that query's row alone."""
    q, k, v = (np.random.default_rng(5).standard_normal((1, 3, 4)) for _ in range(3))
    q[0, 1, 0] = np.nan
    outs = []
    for tier in ("plain", "fast"):
        with gf.use_kernels(tier):
            outs.append(F.scaled_dot_product_attention(gf.tensor(q), gf.tensor(k), gf.tensor(v), causal=True).data)
    assert np.isnan(outs[1][0, 1]).all() and not np.isnan(outs[1][0, [0, 2]]).any()
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cross_entropys_loop_carries_inf_and_nan_as_the_plain_op(compiled_loops, dtype):
    """A row with a NaN, a row all -inf, a row with +inf, a row with -inf among finite logits, a row of
    large logits (exp of them would overflow in float32 unless the max is subtracted): the same losses and
    gradients (NaN where the plain op's are), the other rows untouched."""
    z = np.random.default_rng(6).standard_normal((7, 5)).astype(dtype)
    z[1, 2], z[2], z[3, 4], z[4, 0], z[5] = np.nan, -np.inf, np.inf, -np.inf, z[5] + 90
    targets = np.array([0, 1, 2, 3, 1, 4, 2])
    for reduction in ("none", "sum"):
        fn = lambda z, reduction=reduction: F.cross_entropy(z, targets, reduction=reduction)  # noqa: E731
        with np.errstate(invalid="ignore", over="ignore"):
            plain, fast_ = run_in_tier("plain", fn, [z]), run_in_tier("fast", fn, [z])
        for p, f in zip(plain, fast_):
            assert f.dtype == p.dtype
            np.testing.assert_allclose(f, p, rtol=1e-12 if dtype == np.float64 else 2e-5, atol=2e-6)
    assert np.isnan(fast_[1][[1, 2]]).all() and np.isnan(fast_[1][3]).sum() == 1  # +inf: NaN at its logit
    assert np.isfinite(fast_[1][[0, 4, 5, 6]]).all()


def test_cross_entropys_backward_loop_is_the_plain_ones_to_the_last_bit(compiled_loops):
    """For the same p (the forward's), (p - onehot(t)) w in the same order: every reduction, ignored rows."""
    rng = np.random.default_rng(7)
    z, t = gf.tensor(rng.standard_normal((50, 9)).astype(np.float32), requires_grad=True), rng.integers(0, 9, 50)
    t[:4] = -100
    for reduction, upstream in (
        ("mean", np.float32(0.7)),
        ("sum", np.float32(2)),
        ("none", rng.random(50, np.float32)),
    ):
        node = cross_entropy.CrossEntropy.apply(z, targets=t, ignore_index=-100, reduction=reduction).grad_fn
        assert node.rows  # the loop ran
        fast_dz = node.backward(node, np.asarray(upstream))
        np.testing.assert_array_equal(fast_dz, ops.CrossEntropy.backward(node, np.asarray(upstream)))


def test_exact_gelu_is_the_plain_ops_to_the_last_bit(compiled_loops):
    """Both call the C library's erf on the same float64 numbers and round Phi once."""
    x = np.random.default_rng(2).standard_normal((3, 1000)).astype(np.float32) * 4
    plain, fast_ = run_in_tier("plain", F.gelu, [x]), run_in_tier("fast", F.gelu, [x])
    np.testing.assert_array_equal(fast_[0], plain[0])


def test_what_the_loops_do_not_take_runs_the_numpy_kernel(compiled_loops):
    """A float64 weight on float32 activations, a float16 input: the numpy kernels, the plain numbers."""
    half = np.linspace(-3, 3, 7, dtype=np.float16)
    with gf.use_kernels("fast"):
        fast_half = F.gelu(gf.tensor(half)).data
    with gf.use_kernels("plain"):
        np.testing.assert_array_equal(fast_half, F.gelu(gf.tensor(half)).data)
    rng = np.random.default_rng(3)
    x32, w64 = rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal(6)
    assert not compiled_norm.fits(x32, w64, None) and compiled_norm.fits(x32, w64.astype(np.float32), None)
    layer_norm = lambda x, w: F.layer_norm(x, w.shape, w)  # noqa: E731
    for p, f in zip(run_in_tier("plain", layer_norm, [x32, w64]), run_in_tier("fast", layer_norm, [x32, w64])):
        assert f.dtype == p.dtype
        np.testing.assert_allclose(f, p, rtol=1e-5, atol=1e-6)


def _adam_arrays(rng, dtype, amsgrad, n=5000):
    """p, g, m, v, v_max of one parameter after no step: random weights, zero moments."""
    zeros = lambda: np.zeros(n, dtype)  # noqa: E731
    return [rng.standard_normal(n).astype(dtype), zeros(), zeros(), zeros(), zeros() if amsgrad else None]


def _adam_steps_equal(step, dtype, amsgrad, monkeypatch, decay=None):
    """Ten steps of `step` beside the plain step (after p = p decay, AdamW's decay, unless decay is None),
    gradients from 1e-8 to 1e2, zeros, a NaN: every array equal, bit for bit."""
    rng = np.random.default_rng(5)
    plain, fast_ = _adam_arrays(rng, dtype, amsgrad), _adam_arrays(rng, dtype, amsgrad)
    fast_[0][:] = plain[0]
    real_plain_step = plain_adam.adam_step
    monkeypatch.setattr(plain_adam, "adam_step", None)  # the fast step must not fall back to it
    for t in range(1, 11):
        g = (rng.standard_normal(5000) * 10 ** rng.uniform(-8, 2, 5000)).astype(dtype)
        g[:10], g[10] = 0, np.nan if t == 5 else 1
        plain[1][:] = fast_[1][:] = g
        with np.errstate(divide="ignore", invalid="ignore"):  # float16: eps is 0, a zero gradient 0 / 0
            if decay is not None:
                plain[0] *= decay
            real_plain_step(*plain, t, 3e-3, 0.9, 0.99, 1e-8)
            step(*fast_, t, 3e-3, 0.9, 0.99, 1e-8)
        for a, b in zip(plain, fast_):
            if a is not None:
                np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_adams_loop_is_the_plain_steps_to_the_last_bit(compiled_loops, monkeypatch, dtype, amsgrad):
    _adam_steps_equal(fast_adam.adam_step, dtype, amsgrad, monkeypatch)


@pytest.mark.parametrize("decay", [None, 1 - 3e-3 * 0.1, 0.5])
@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_adamws_decay_inside_the_loop_is_the_plain_steps_to_the_last_bit(
    compiled_loops, monkeypatch, dtype, amsgrad, decay
):
    """optim.adam.adam_steps shrinks p by the decay in a pass of its own; the loop does it in its pass."""

    def step(p, g, m, v, v_max, t, *rest):
        fast_adam.adam_steps([(p, g, m, v, v_max, t)], decay, *rest)

    _adam_steps_equal(step, dtype, amsgrad, monkeypatch, decay)


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_adams_passes_in_place_are_the_plain_steps_to_the_last_bit(monkeypatch, dtype, amsgrad):
    """Without numba, the same formulas in numpy passes on two buffers: the plain step's bits."""
    _adam_steps_equal(fast_adam.in_place, dtype, amsgrad, monkeypatch)


@pytest.mark.parametrize("optimizer", ["AdamW", "Adam with L2 decay", "AdamW with AMSGrad"])
def test_adam_trains_a_model_to_the_same_bits_in_both_tiers(compiled_loops, optimizer):
    """Two groups (one without decay), a float64 parameter among float32 ones, a parameter with no gradient."""
    options = {"AdamW": {}, "Adam with L2 decay": {}, "AdamW with AMSGrad": {"amsgrad": True}}[optimizer]
    kind = gf.optim.Adam if optimizer.startswith("Adam ") else gf.optim.AdamW
    weights = []
    for tier in ("plain", "fast"):
        gf.manual_seed(0)
        model = gf.nn.Sequential(gf.nn.Linear(6, 16), gf.nn.GELU(), gf.nn.Linear(16, 3))
        unused = gf.nn.Parameter(gf.ones(4))
        wide = gf.nn.Parameter(gf.tensor(np.linspace(-1, 1, 3)))  # float64
        matrices = [p for p in model.parameters() if p.ndim == 2]
        groups = [{"params": matrices + [unused]}, {"params": [p for p in model.parameters() if p.ndim == 1] + [wide],
                                                    "weight_decay": 0.0}]  # fmt: skip
        optimizer_ = kind(groups, lr=1e-2, weight_decay=0.1, **options)
        x, y = gf.randn(8, 6), gf.randn(8, 3)
        with gf.use_kernels(tier):
            for _ in range(5):
                optimizer_.zero_grad()
                (((model(x) - y) ** 2).mean() + (wide * wide).sum()).backward()  # ops both tiers run alike
                optimizer_.step()
        weights.append([p.data.copy() for p in [*model.parameters(), unused, wide]])
    for plain, fast_ in zip(*weights):
        np.testing.assert_array_equal(fast_, plain)
    with gf.use_kernels("fast"):
        assert kernel(plain_adam.adam_steps) is fast_adam.adam_steps  # so the fast tier ran the loop


def test_what_adams_loop_does_not_take_runs_in_place_or_plain(compiled_loops, monkeypatch):
    """A float16 parameter, a strided parameter: the passes in place; a gradient of another kind: the plain
    step (numpy rounds a mixed expression once, the passes at each step). A strided gradient is only read:
    the loop takes a copy. adam_steps runs them all, AdamW's decay in a pass of its own for those."""
    ran = []
    monkeypatch.setattr(plain_adam, "adam_step", lambda *args: ran.append(("plain", args[0].dtype)))
    monkeypatch.setattr(fast_adam, "in_place", lambda *args: ran.append(("in place", args[0].dtype)))
    rng = np.random.default_rng(6)
    p16, g16 = np.ones(4, np.float16), np.ones(4, np.float16)
    p, m, v = rng.standard_normal(4).astype(np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32)
    strided = np.ones(8, np.float32)[::2]
    steps = [
        (p16, g16, np.zeros_like(p16), np.zeros_like(p16), None, 1),
        (p, np.ones(4), m, v, None, 1),
        (strided, np.ones(4, np.float32), m, v, None, 1),
        (p, np.ones(8, np.float32)[::2], m, v, None, 1),
    ]
    for step in steps:
        fast_adam.adam_step(*step, 1e-3, 0.9, 0.99, 1e-8)
    assert ran == [("in place", np.float16), ("plain", np.float32), ("in place", np.float32)]
    assert m.any()  # the loop ran on the last
    before = strided.copy()
    fast_adam.adam_steps(steps, 0.5, 1e-3, 0.9, 0.99, 1e-8)
    assert len(ran) == 6 and np.array_equal(strided, before * np.float32(0.5))


def test_the_fast_tier_names_the_kernels_it_runs():
    assert fast.REPLACES[plain_adam.adam_steps] is fast_adam.adam_steps
    assert fast.REPLACES[plain_adam.adam_step] is fast_adam.adam_step
    assert fast.REPLACES[ops.LayerNorm] is compiled_norm.LayerNorm
    assert fast.REPLACES[ops.GeluErf] is gelu_erf.GeluErf
    assert issubclass(compiled_norm.LayerNorm, norm.LayerNorm)  # the numpy kernel where the loops cannot run


def _python(code, **env):
    """Run code in a fresh interpreter with `env` added to the environment: (exit code, output)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")} | env
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


FIRST_OP = (
    "import sys; import gradflow as gf; from gradflow.fast import compiled\n"
    "assert 'numba' not in sys.modules, 'importing gradflow imported numba'\n"
    "x = gf.randn(3, 5, requires_grad=True)\n"
    "gf.nn.functional.layer_norm(x, (5,))\n"
    "print('numba' in sys.modules, end=' ')\n"
    "print(compiled.describe(), 'numba' in sys.modules, end=' ')\n"
    "with gf.use_kernels('fast'):\n"
    "    gf.nn.functional.layer_norm(x, (5,)).sum().backward()\n"
    "    print('numba' in sys.modules, compiled.describe().split(' on ')[0])\n"
)


def test_importing_gradflow_or_running_plain_never_imports_numba(compiled_loops):
    status, output = _python(FIRST_OP)
    assert status == 0, output
    assert output == f"False plain False True fast, numba {version('numba')} loops for {compiled.COMPILED}\n"


def test_gradflow_numba_0_runs_the_numpy_kernels():
    assert _python(FIRST_OP, GRADFLOW_NUMBA="0") == (0, "False plain False False fast, numpy only (GRADFLOW_NUMBA=0)\n")


THREADS = (
    "from gradflow.fast import compiled\n"
    "import numpy as np, numba\n"
    "compiled.loops().gelu_erf_forward(*(np.zeros(9) for _ in range(3)))\n"
    "print(numba.get_num_threads() == compiled.blas_threads(), numba.threading_layer())\n"
)


@pytest.mark.parametrize("blas", ["1", "2"])
def test_the_loops_use_the_threads_blas_uses_on_the_workqueue_layer(compiled_loops, blas):
    """As many threads as numpy's BLAS (never more cores than it was given), and numba's workqueue
    layer, whose idle threads sleep instead of spinning."""
    assert _python(THREADS, OPENBLAS_NUM_THREADS=blas) == (0, "True workqueue\n")
