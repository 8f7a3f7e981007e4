"""The fast tier equals the plain one: every fast kernel (gradflow/fast) gives its plain op's value
and gradient, on every row of the gradcheck table and on the shapes the models use; and the
switch between the tiers (gradflow/engine/kernels.py)."""

import inspect
import subprocess
import sys

import numpy as np
import pytest
from helpers import heads, run_in_tier

import gradflow as gf
from gradflow import fast
from gradflow.engine import kernels, ops
from gradflow.engine.autograd import topological_order
from gradflow.fast import attention as fast_attention
from gradflow.fast.embedding import add_rows
from gradflow.nn import functional as F
from gradflow.tools.gradcheck_table import CASES


def _assert_same(fn, arrays, rtol, atol):
    plain, fast_ = run_in_tier("plain", fn, arrays), run_in_tier("fast", fn, arrays)
    for p, f in zip(plain, fast_):
        assert f.dtype == p.dtype and f.shape == p.shape
        np.testing.assert_allclose(f, p, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_fast_equals_plain_on_the_gradcheck_table(case):
    _assert_same(case.fn, [x.data for x in case.inputs()], rtol=1e-12, atol=1e-14)


def test_the_table_runs_every_fast_kernel():
    used = set()
    with gf.use_kernels("fast"):
        for case in CASES:
            used |= {type(node) for node in topological_order(case.fn(*case.inputs()).grad_fn)}
    assert {k for k in fast.REPLACES.values() if isinstance(k, type)} <= used  # the ops' kernels (not Adam's step)


def _model_shapes():
    """The shapes of the baby GPT (batch 12, context 64, width 128, 4 heads, vocabulary 65) and of
    the Llama-style models' grouped-query heads, decoding with a cache, and a long context."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 65, (12, 64))
    causal = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True)  # noqa: E731
    return {
        "gelu (12, 64, 512)": (lambda x: F.gelu(x, approximate="tanh"), [rng.standard_normal((12, 64, 512)) * 2]),
        "layer_norm (12, 64, 128), no bias": (
            lambda x, w: F.layer_norm(x, w.shape, w),
            [rng.standard_normal((12, 64, 128)), 1 + 0.1 * rng.standard_normal(128)],
        ),
        "embedding (12, 64) of 65": (lambda w: F.embedding(ids, w), [rng.standard_normal((65, 128))]),
        "attention causal (12, 4, 64, 32)": (causal, [heads(12, 64, 4, 32, rng) for _ in range(3)]),
        "attention causal, 300 positions": (causal, [heads(1, 300, 2, 16, rng) for _ in range(3)]),
        "attention grouped-query heads": (
            causal,
            [
                rng.standard_normal((2, 2, 3, 7, 8)),
                rng.standard_normal((2, 2, 1, 7, 8)),
                rng.standard_normal((2, 2, 1, 7, 8)),
            ],
        ),
        "attention decoding after 9 cached tokens": (
            causal,
            [rng.standard_normal((2, 4, 1, 8)), rng.standard_normal((2, 4, 10, 8)), rng.standard_normal((2, 4, 10, 8))],
        ),
        "attention padding mask": (
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=gf.nn.padding_mask([5, 3], 5), causal=True),
            [heads(2, 5, 2, 8, rng) for _ in range(3)],
        ),
    }


MODEL_SHAPES = _model_shapes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", MODEL_SHAPES)
def test_fast_equals_plain_on_the_models_shapes(name, dtype):
    fn, arrays = MODEL_SHAPES[name]
    arrays = [a.astype(dtype) for a in arrays]  # in the same memory order: heads stay transposed views
    tight = dtype == np.float64
    _assert_same(fn, arrays, rtol=1e-10 if tight else 2e-4, atol=1e-12 if tight else 2e-5)


# --- what the fast kernels change, checked on its own -------------------------------------------


def test_fast_attention_on_transposed_heads_hands_back_their_layout():
    """Heads are usually a transposed view of (B, T, n_heads * hs). The fast kernel's output and
    gradients come laid out like those views, so that transposing back to (B, T, ...) is a view,
    not a copy; the numbers are those of contiguous inputs."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((2, 5, 3, 4)) for _ in range(3)]  # (B, T, heads, hs)
    u = rng.standard_normal((2, 3, 5, 4))
    results = []
    for copy in (False, True):
        leaves = [gf.tensor(a, requires_grad=True) for a in arrays]
        q, k, v = (x.transpose(1, 2) for x in leaves)  # (B, heads, T, hs) views
        if copy:
            q, k, v = (gf.tensor(np.ascontiguousarray(x.data), requires_grad=True) for x in (q, k, v))
        out = fast_attention.ScaledDotProductAttention.apply(q, k, v, causal=True)
        out.backward(u)
        grads = [x.grad.data for x in leaves] if not copy else [x.grad.data.transpose(0, 2, 1, 3) for x in (q, k, v)]
        results.append((out.data.transpose(0, 2, 1, 3), *grads))
    for viewed, contiguous in zip(*results):
        np.testing.assert_allclose(viewed, contiguous, rtol=1e-12, atol=1e-14)
    for array in results[0]:  # (B, T, heads, hs) without a copy
        assert array.flags.c_contiguous


@pytest.mark.parametrize(
    "tq, tk, padded, p, biased",
    [
        (7, 7, False, 0.0, False),
        (5, 9, False, 0.0, False),
        (9, 5, False, 0.0, False),
        (7, 7, True, 0.0, False),
        (6, 8, True, 0.5, False),
        (7, 9, True, 0.0, True),
        (6, 6, False, 0.5, True),
    ],
)
def test_fast_attention_in_query_blocks_equals_plain(monkeypatch, tq, tk, padded, p, biased):
    """Blocks of 2 queries, each with only the keys its causal mask lets it see, give the plain
    op's numbers: with more keys than queries (a KV cache), with more queries than keys (the first
    queries see nothing), with a padding mask, with dropout, and with an additive bias that learns
    (its gradient gathered from every block)."""
    monkeypatch.setattr(fast_attention, "QUERY_BLOCK", 2)
    assert len(fast_attention.query_blocks(tq, tk, True)) == -(-tq // 2)
    rng = np.random.default_rng(3)
    arrays = [
        rng.standard_normal((2, 3, tq, 4)),
        rng.standard_normal((2, 3, tk, 4)),
        rng.standard_normal((2, 3, tk, 5)),
    ]
    mask = (np.arange(tk) < np.array([tk, tk - 2])[:, None])[:, None, None, :] if padded else None
    drop = (rng.random((2, 3, tq, tk)) >= p) / (1 - p) if p else None

    if biased:
        arrays.append(rng.standard_normal((3, tq, tk)))  # one bias per head, shared by the batch

    def fn(*inputs):
        op = kernels.kernel(ops.ScaledDotProductAttention)
        return op.apply(*inputs, allowed=mask, causal=True, drop=drop)

    _assert_same(fn, arrays, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("plain", fast.REPLACES, ids=lambda op: getattr(op, "name", op.__name__))
def test_a_fast_kernel_takes_its_plain_ops_arguments(plain):
    """Same arguments, same names and defaults: a call written for one tier runs in the other."""
    replacement = fast.REPLACES[plain]
    if not isinstance(plain, type):  # a function (Adam's step)
        assert inspect.signature(replacement) == inspect.signature(plain)
        return
    assert inspect.signature(replacement.forward) == inspect.signature(plain.forward)
    assert replacement.name == plain.name


def test_fast_attention_in_query_blocks_passes_gradcheck(monkeypatch):
    monkeypatch.setattr(fast_attention, "QUERY_BLOCK", 2)
    rng = np.random.default_rng(4)
    q, k, v = (gf.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 5, 3), (2, 7, 3), (2, 7, 3)))
    assert len(fast_attention.query_blocks(5, 7, True)) == 3
    op = fast_attention.ScaledDotProductAttention
    assert gf.gradcheck(lambda q, k, v: op.apply(q, k, v, causal=True), q, k, v)


@pytest.mark.parametrize("weight_shape", [(10, 3), (10,)])
def test_add_rows_equals_add_at(weight_shape):
    rng = np.random.default_rng(0)
    ids = np.array([[3, 1, 3], [-1, 9, 0]])  # repeated ids, and -1 naming the same row as 9
    grad = rng.standard_normal(ids.shape + weight_shape[1:])
    expected = np.zeros(weight_shape)
    np.add.at(expected, ids, grad)
    dw = np.zeros(weight_shape)
    add_rows(dw, ids, grad)
    np.testing.assert_allclose(dw, expected, rtol=1e-15)
    empty = np.zeros(weight_shape)
    add_rows(empty, np.zeros(0, dtype=int), grad[:0, 0])
    assert not empty.any()


# --- the switch ---------------------------------------------------------------------------------


def test_use_kernels_switches_now_and_as_a_context_manager():
    x = gf.randn(3, 4, requires_grad=True)
    before = gf.kernels_in_use()
    try:
        gf.use_kernels("fast")
        assert gf.kernels_in_use() == "fast" and type(F.gelu(x, approximate="tanh").grad_fn) is fast.gelu.Gelu
        with gf.use_kernels("plain") as switch:
            assert gf.kernels_in_use() == "plain" and switch.previous == "fast"
            assert type(F.gelu(x, approximate="tanh").grad_fn) is ops.Gelu and type(x.gelu().grad_fn) is ops.Gelu
            assert kernels.kernel(ops.LayerNorm) is ops.LayerNorm
        assert gf.kernels_in_use() == "fast" and type(x.gelu().grad_fn) is fast.gelu.Gelu
        assert kernels.kernel(ops.LayerNorm) is fast.compiled_norm.LayerNorm
        assert kernels.kernel(ops.RMSNorm) is fast.compiled_norm.RMSNorm
        assert kernels.kernel(ops.Softmax) is ops.Softmax  # no fast kernel: the plain op in both tiers
        gf.use_kernels("plain")
        assert gf.kernels_in_use() == "plain"
    finally:
        gf.use_kernels(before)


@pytest.mark.parametrize("bad", ["x", "Fast", "", None, 1])
def test_use_kernels_refuses_anything_but_plain_or_fast(bad):
    before = gf.kernels_in_use()
    with pytest.raises(ValueError) as info:
        gf.use_kernels(bad)
    assert str(info.value) == f'use_kernels: kernels must be "plain" or "fast", got {bad!r}'
    assert gf.kernels_in_use() == before


def _python(code, **env):
    """Run code in a fresh interpreter with `env` added to the environment: (exit code, output)."""
    import os

    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def test_the_environment_chooses_the_tier_at_the_first_op_and_importing_changes_nothing():
    code = (
        "import sys; import gradflow as gf; import gradflow.engine.kernels as k\n"
        "assert k._tier is None  # nothing read yet\n"
        "y = gf.randn(2, requires_grad=True).gelu()\n"
        "print(gf.kernels_in_use(), type(y.grad_fn).__module__)\n"
    )
    assert _python(code, GRADFLOW_KERNELS="plain") == (0, "plain gradflow.engine.ops.elementwise\n")
    assert _python(code, GRADFLOW_KERNELS="fast") == (0, "fast gradflow.fast.gelu\n")
    assert _python(code, GRADFLOW_KERNELS="") == (0, "plain gradflow.engine.ops.elementwise\n")  # unset: plain
    status, output = _python(code, GRADFLOW_KERNELS="quick")
    assert status == 1
    assert output.strip().splitlines()[-1] == (
        'ValueError: GRADFLOW_KERNELS: kernels must be "plain" or "fast", got \'quick\''
    )


def test_what_trains_runs_fast_unless_a_tier_was_chosen():
    code = (
        "import gradflow as gf; from gradflow.engine.kernels import fast_unless_chosen\n"
        "x = gf.randn(2, requires_grad=True)\n"
        "with fast_unless_chosen():\n"
        "    inside = gf.kernels_in_use(), type(x.gelu().grad_fn).__module__\n"
        "print(gf.kernels_in_use(), *inside)\n"
        "gf.use_kernels('plain')\n"
        "with fast_unless_chosen():\n"
        "    print(gf.kernels_in_use())\n"
    )
    library, chosen = "plain fast gradflow.fast.gelu\n", "plain\n"  # a learner's script, then a chosen tier
    assert _python(code, GRADFLOW_KERNELS="") == (0, library + chosen)
    assert _python(code, GRADFLOW_KERNELS="plain") == (0, "plain plain gradflow.engine.ops.elementwise\n" + chosen)


# --- malloc, tuned on request only ---------------------------------------------------------------

PAGE_FAULTS = """
import resource, sys
import numpy as np
import gradflow as gf
from gradflow.fast.memory import tune_malloc
if sys.argv[1] == "tuned" and not tune_malloc():
    print("no glibc")
    sys.exit()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):  # arrays of a few sizes made and freed, as in training steps
    arrays = [np.ones(s << 17) for s in (1, 2, 1, 3)]
    del arrays
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_tune_malloc_saves_page_faults_and_importing_gradflow_does_not_tune():
    """Without tuning, each new array of a megabyte or more costs a page fault per 4 KiB page, array
    after array; with it, the freed arrays' memory is reused (measured: 30,000 faults against 1,500)."""
    faults = {}
    for how in ("untuned", "tuned"):
        done = subprocess.run([sys.executable, "-c", PAGE_FAULTS, how], capture_output=True, text=True, check=True)
        if done.stdout.strip() == "no glibc":
            pytest.skip("malloc is not glibc's")
        faults[how] = int(done.stdout)
    assert faults["tuned"] * 5 < faults["untuned"], faults
