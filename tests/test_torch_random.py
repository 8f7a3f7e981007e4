"""gradflow's random draws are PyTorch's CPU stream, number for number (engine/rng.py): side by side with
torch==2.13.0 where it is installed (conftest's torch: skipped otherwise, a failure when
GRADFLOW_REQUIRE_TORCH=1), for several sizes (one at a time below 16 normals, in blocks from 16), dtypes,
ranges, seeds, generators of one's own and gradflow's, and interleaved calls; and, without torch, the
makemore lecture's first numbers as torch printed them once, so the stream is pinned everywhere.
"""

import contextlib
import json
import os
import platform
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import gradflow as gf
from gradflow.engine import box_muller, rng
from gradflow.engine.mt19937 import MT19937
from gradflow.fast import compiled
from gradflow.fast import mt19937 as fast_mt19937

SEEDS = [0, 42, 2147483647, 2**64 - 12345]  # the last beyond 32 bits: its low 32 seed the twister
SIZES = [1, 15, 16, 17, 1000]
FLOATS = ["float32", "float64"]


@pytest.fixture(params=["plain", "fast"])
def tier(request):
    """Each test that takes it runs in both tiers: the plain draws and the fast tier's (gradflow/fast/mt19937.py)."""
    with gf.use_kernels(request.param):
        yield request.param


def both(torch, seed):
    """A generator of each, from the same seed."""
    return gf.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)


def equal(ours, theirs):
    """Bit for bit: the same dtype and the same values (ours a gradflow tensor, theirs a torch one)."""
    theirs = theirs.numpy()
    assert ours.dtype == theirs.dtype
    assert_array_equal(ours.numpy(), theirs, strict=True)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES)
def test_rand_and_randn_are_pytorchs(torch, tier, seed, dtype, n):
    g, t = both(torch, seed)
    for _ in range(2):  # the second time from where the first left the stream (and randn's kept value)
        equal(
            gf.randn(n, generator=g, dtype=getattr(gf, dtype)), torch.randn(n, generator=t, dtype=getattr(torch, dtype))
        )
        equal(
            gf.rand(n, generator=g, dtype=getattr(gf, dtype)), torch.rand(n, generator=t, dtype=getattr(torch, dtype))
        )


@pytest.mark.parametrize("dtype", FLOATS)
def test_ten_thousand_normals_and_uniforms_of_every_kind_agree(torch, tier, dtype):
    """Normals with a mean and a scale (a fused multiply-add in PyTorch's kernels), in blocks and one at a
    time, and uniforms on a range that is not a power of two: 10,000 of each, all equal."""
    g, t = both(torch, 7)
    ours, theirs = gf.empty(10_000, dtype=getattr(gf, dtype)), torch.empty(10_000, dtype=getattr(torch, dtype))
    gf.manual_seed(7), torch.manual_seed(7)
    equal(ours.normal_(0.3, 2.5), theirs.normal_(0.3, 2.5))
    equal(ours.uniform_(-0.2236, 0.31), theirs.uniform_(-0.2236, 0.31))
    small, small_t = gf.empty(7, dtype=getattr(gf, dtype)), torch.empty(7, dtype=getattr(torch, dtype))
    for _ in range(3):
        equal(small.normal_(-1.5, 0.7), small_t.normal_(-1.5, 0.7))
    equal(gf.empty(30, dtype=getattr(gf, dtype)).normal_(1.0, 0.1, generator=g),
          torch.empty(30, dtype=getattr(torch, dtype)).normal_(1.0, 0.1, generator=t))  # fmt: skip
    equal(gf.normal(0.5, 3.0, (40,), generator=g, dtype=getattr(gf, dtype)),
          torch.normal(0.5, 3.0, (40,), generator=t, dtype=getattr(torch, dtype)))  # fmt: skip


RANGES = [(0, 10), (-5, 5), (0, 27), (0, 2**28 - 1), (0, 2**28), (3, 2**33), (-(2**40), 2**40 + 7)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("low", "high"), RANGES)
def test_randint_is_pytorchs_below_and_above_32_bits(torch, tier, seed, low, high):
    g, t = both(torch, seed)
    for n in (1, 17, 300):
        equal(gf.randint(low, high, (n,), generator=g), torch.randint(low, high, (n,), generator=t))
    if high - low < 2**31:
        equal(gf.randint(low, high, (5,), generator=g, dtype=gf.int32),
              torch.randint(low, high, (5,), generator=t, dtype=torch.int32))  # fmt: skip


@pytest.mark.parametrize("seed", SEEDS)
def test_randperm_is_pytorchs(torch, tier, seed):
    g, t = both(torch, seed)
    for n in (0, 1, 2, 15, 16, 17, 1000):
        equal(gf.randperm(n, generator=g), torch.randperm(n, generator=t))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(("num_samples", "replacement"), [(1, True), (20, True), (1, False), (3, False)])
def test_multinomial_is_pytorchs(torch, dtype, num_samples, replacement):
    """With replacement by cumulative sums, otherwise (and for one sample) by the exponential race."""
    rng = np.random.default_rng(0)
    for shape in [(5,), (4, 27)]:
        w = rng.random(shape).astype(dtype) ** 3
        g, t = both(torch, 2147483647)
        for _ in range(2):
            equal(gf.multinomial(gf.tensor(w), num_samples, replacement, generator=g),
                  torch.multinomial(torch.tensor(w), num_samples, replacement, generator=t))  # fmt: skip


def intel():
    """PyTorch draws bernoulli with one p for all from Intel's MKL stream on Intel processors."""
    cpuinfo = Path("/proc/cpuinfo")
    return "GenuineIntel" in (cpuinfo.read_text() if cpuinfo.exists() else platform.processor())


@pytest.mark.parametrize("dtype", FLOATS)
def test_bernoulli_and_dropout_are_pytorchs(torch, dtype):
    g, t = both(torch, 42)
    p = np.random.default_rng(1).random((6, 7)).astype(dtype)
    equal(gf.bernoulli(gf.tensor(p), generator=g), torch.bernoulli(torch.tensor(p), generator=t))
    if intel():
        pytest.skip("PyTorch draws bernoulli(x, p) and dropout's masks from MKL's stream on Intel processors")
    equal(gf.bernoulli(gf.ones(50, dtype=getattr(gf, dtype)), 0.3, generator=g),
          torch.bernoulli(torch.ones(50, dtype=getattr(torch, dtype)), 0.3, generator=t))  # fmt: skip
    gf.manual_seed(3), torch.manual_seed(3)
    x = np.random.default_rng(2).standard_normal((8, 33)).astype(dtype)
    for p in (0.1, 0.5):
        equal(gf.nn.functional.dropout(gf.tensor(x), p), torch.nn.functional.dropout(torch.tensor(x), p))


@pytest.mark.parametrize("seed", SEEDS)
def test_interleaved_calls_advance_the_stream_as_pytorchs(torch, tier, seed):
    """gradflow's own generator after manual_seed, every kind of draw one after another: each starts where
    the last left off, and one normal kept from a one-at-a-time pair is used by the next such draw."""
    calls = [
        lambda m: m.randn(3), lambda m: m.rand(5), lambda m: m.randn(20), lambda m: m.randint(0, 10, (7,)),
        lambda m: m.randn(1), lambda m: m.randn(1, dtype=m.float64), lambda m: m.randperm(10),
        lambda m: m.rand(2, dtype=m.float64), lambda m: m.randint(0, 2**40, (3,)), lambda m: m.randn(2, 16),
        lambda m: m.multinomial(m.ones(6), 4), lambda m: m.empty(40).uniform_(-2, 3), lambda m: m.randn(5),
    ]  # fmt: skip
    gf.manual_seed(seed)
    torch.manual_seed(seed)
    for call in calls:
        equal(call(gf), call(torch))
    assert gf.initial_seed() == torch.initial_seed() == seed


def test_a_generator_of_ones_own_leaves_gradflows_alone(torch):
    gf.manual_seed(5), torch.manual_seed(5)
    g, t = both(torch, 11)
    equal(gf.randn(20, generator=g), torch.randn(20, generator=t))
    equal(gf.randn(20), torch.randn(20))
    assert gf.Generator().initial_seed() == torch.Generator().initial_seed()


def test_nn_init_and_layers_draw_pytorchs_weights(torch, tier):
    """Linear's PyTorch initialisation (kaiming_uniform_ with a = sqrt(5), then the bias), Embedding's
    N(0, 1), and nn.init's functions, after the same seed."""
    for seed in (0, 42):
        gf.manual_seed(seed), torch.manual_seed(seed)
        for ours, theirs in [
            (gf.nn.Linear(20, 30), torch.nn.Linear(20, 30)),
            (gf.nn.Embedding(27, 10), torch.nn.Embedding(27, 10)),
        ]:
            for name, p in theirs.named_parameters():
                equal(getattr(ours, name).detach(), p.detach())
        for fn, kw in [
            ("xavier_uniform_", {}),
            ("xavier_normal_", {"gain": 2.0}),
            ("kaiming_normal_", {}),
            ("normal_", {"std": 0.02}),
        ]:
            equal(getattr(gf.nn.init, fn)(gf.nn.Parameter(gf.zeros(16, 9)), **kw).detach(),
                  getattr(torch.nn.init, fn)(torch.zeros(16, 9), **kw))  # fmt: skip


def test_shuffled_batches_are_pytorchs(torch):
    """A DataLoader's shuffled order (its RandomSampler seeded from the generator, the pass's worker seed
    drawn first), with and without replacement, and what is drawn after a pass."""
    x = np.arange(13.0)

    def loaders(m):
        data = m.utils.data.TensorDataset(m.tensor(x))
        with_replacement = m.utils.data.RandomSampler(x, replacement=True, num_samples=40)
        return [m.utils.data.DataLoader(data, batch_size=4, shuffle=True),
                m.utils.data.DataLoader(data, batch_size=5, sampler=with_replacement)]  # fmt: skip

    for make in [lambda m: loaders(m)[0], lambda m: loaders(m)[1]]:
        gf.manual_seed(1), torch.manual_seed(1)
        ours, theirs = make(gf), make(torch)
        for _ in range(2):
            assert [b[0].tolist() for b in ours] == [b[0].tolist() for b in theirs]
        equal(gf.rand(3), torch.rand(3))


def test_state_round_trips_through_json(torch, tier):
    """get_state mid-block with a kept normal, through JSON and set_state: the same draws as PyTorch's."""
    g, t = both(torch, 99)
    equal(gf.randn(3, generator=g), torch.randn(3, generator=t))  # one normal kept
    state = json.loads(json.dumps(g.get_state()))
    first = [gf.randn(40, generator=g), gf.randn(1, generator=g)]
    g.set_state(state)
    for ours in first:
        again = gf.randn(ours.shape[0], generator=g)
        assert_array_equal(again.numpy(), ours.numpy())
        equal(again, torch.randn(ours.shape[0], generator=t))
    gf.manual_seed(4)
    saved = gf.get_rng_state()
    drawn = gf.rand(700)
    gf.set_rng_state(saved)
    assert_array_equal(gf.rand(700).numpy(), drawn.numpy())
    with pytest.raises(ValueError, match="set_state: not a state"):
        g.set_state({"seed": 1})


def test_the_makemore_lectures_first_numbers_without_torch():
    """torch==2.13.0 printed these once: the lecture's generator, seeded 2147483647."""
    g = gf.Generator().manual_seed(2147483647)
    p = gf.rand(3, generator=g)
    assert_array_equal(p.numpy(), np.float32([0.7081288695335388, 0.3542391061782837, 0.10543233156204224]))
    drawn = gf.multinomial(p / p.sum(), num_samples=20, replacement=True, generator=g)
    assert drawn.tolist() == [1, 1, 2, 0, 0, 2, 1, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1]
    g = gf.Generator().manual_seed(2147483647)
    w = gf.randn(27, 27, generator=g).numpy()
    assert_array_equal(w[0, :5], np.float32([1.5673619508743286, -0.2372923195362091, -0.027384605258703232,
                                             -1.100779414176941, 0.2858814597129822]))  # fmt: skip
    assert_array_equal(w[26, -3:], np.float32([1.3404642343521118, -0.21746298670768738, 0.8627285957336426]))
    assert gf.randint(0, 27, (5,), generator=g).tolist() == [5, 6, 5, 18, 7]
    assert gf.randn(3, generator=g, dtype=gf.float64).tolist() == [0.6171467646645588, 0.3268666296053192,
                                                                   -0.34197618885023745]  # fmt: skip


def test_a_hundred_thousand_normals_agree_to_the_last_bit(torch, tier):
    """Enough float32 normals that every octant of the sine, both forms of the log's argument and the
    rare sums that fall halfway between two floats come up, with and without a mean and a scale."""
    for dtype in FLOATS:
        g, t = both(torch, 123)
        equal(gf.randn(100_000, generator=g, dtype=getattr(gf, dtype)),
              torch.randn(100_000, generator=t, dtype=getattr(torch, dtype)))  # fmt: skip
        equal(gf.empty(100_003, dtype=getattr(gf, dtype)).normal_(-0.7, 0.02, generator=g),
              torch.empty(100_003, dtype=getattr(torch, dtype)).normal_(-0.7, 0.02, generator=t))  # fmt: skip


@contextlib.contextmanager
def fast_form(form):
    """The fast tier's kernels as numba's loops ("compiled": skipped without numba, a failure when
    GRADFLOW_REQUIRE_NUMBA=1) or as their numpy forms ("numpy", as where numba is not installed)."""
    if form == "numpy":
        with compiled.numpy_only():
            yield
        return
    if compiled.loops() is None:
        if os.environ.get("GRADFLOW_REQUIRE_NUMBA") == "1":
            pytest.fail("GRADFLOW_REQUIRE_NUMBA=1, and the compiled loops did not load")
        pytest.skip("numba's loops did not load")
    yield


def uniforms(dtype, n, seed):
    """n uniforms of dtype drawn from the stream, with the extremes 0 and the largest below 1 among them
    (1 - u is then 1 and the smallest step: both ends of the log's argument)."""
    g = gf.Generator().manual_seed(seed)
    u = g.uniform24(n) if dtype == np.float32 else g.uniform53(n)
    u[:: max(n // 7, 1)] = 0
    u[3 :: max(n // 5, 1)] = 1 - np.finfo(dtype).epsneg
    return u


@pytest.mark.parametrize("form", ["compiled", "numpy"])
def test_each_fast_kernel_gives_its_plain_functions_numbers(form):
    """gradflow/fast/mt19937.py's kernels against the plain functions they replace, bit for bit: the words
    (with the block and position they leave, for draws shorter and longer than a block, one after
    another), float64 uniforms, randperm's swaps, u (high - low) + low, and the normals' blocks, over seeds,
    sizes (whole blocks of 16 and a rest) and both float dtypes, with and without a mean and a scale."""
    with fast_form(form):
        plain, fast = MT19937(5), MT19937(5)
        for n in [1, 620, 5, 3000, 0, 624, 10_000, 7, 4992, 4991]:
            assert_array_equal(fast_mt19937.draw_words(fast, n), plain.words(n), strict=True)
            assert fast.next == plain.next
            assert_array_equal(fast.block, plain.block)
        for seed in (0, 9):
            words = MT19937(seed).words(2 * 1003)
            assert_array_equal(fast_mt19937.uniform53(words), rng.uniform53(words), strict=True)
            for n in (1, 2, 17, 1000):
                offsets = words[: n - 1].astype(np.int64) % np.arange(n, 1, -1)
                assert_array_equal(fast_mt19937.forward_swaps(offsets), rng.forward_swaps(offsets), strict=True)
            for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
                for n in (16, 17, 1000, 100_003):
                    u = uniforms(dtype, n, seed)
                    for mean, std in [(0.0, 1.0), (0.3, 2.5), (-1.5, 0.02)]:
                        ours = fast_mt19937.block_normals(u, mean, std, dtype)
                        assert_array_equal(ours, box_muller.block_normals(u, mean, std, dtype), strict=True)
                        b, c = dtype.type(std), dtype.type(mean)
                        assert_array_equal(fast_mt19937.fma(u, b, c), box_muller.fma(u, b, c), strict=True)


def test_a_bad_seed_is_one_line():
    with pytest.raises(ValueError, match=r"^manual_seed: seed must be a non-negative integer, got -1$"):
        gf.manual_seed(-1)
    with pytest.raises(ValueError, match=r"^manual_seed: seed must be less than 2\^64"):
        gf.Generator().manual_seed(2**64)


def correctly_rounded(exact, dtype):
    """The float of dtype nearest to the Fraction exact, ties to even."""
    near = dtype.type(float(exact))
    candidates = [np.nextafter(near, dtype.type(-np.inf)), near, np.nextafter(near, dtype.type(np.inf))]
    return min(
        candidates, key=lambda v: (abs(Fraction(float(v)) - exact), int(np.asarray(v).view(f"i{dtype.itemsize}")) % 2)
    )


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)])
def test_fused_multiply_add_rounds_once(dtype):
    """box_muller.fma: a b + c rounded once, also where rounding the float64 sum to float32 (or the
    product and the sum each to float64) would round twice the wrong way: a b just above, at, or just
    below halfway between two floats, and random operands."""
    bits = 24 if dtype == np.float32 else 53
    a = 1 + 2.0 ** -(bits // 2)  # a^2 = 1 + 2^(1 - bits//2) + 2^-(2 (bits//2)): halfway at 1 for float32
    cases = [(a, a, c) for c in (0.0, 2.0**-60, -(2.0**-60), 2.0**-100, -(2.0**-100), 1.0, -1.0)]
    rng = np.random.default_rng(0)
    cases += [tuple(rng.standard_normal(3) * 10.0 ** rng.integers(-3, 4, 3)) for _ in range(300)]
    for a, b, c in cases:
        a, b, c = (dtype.type(v) for v in (a, b, c))
        exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        assert box_muller.fma(np.array([a]), b, c)[0] == correctly_rounded(exact, dtype), (a, b, c)


def test_an_older_checkpoints_numpy_state_still_resumes():
    """A checkpoint written when dropout's masks came from numpy's PCG64 keeps its state: resuming from
    it seeds PyTorch's stream from that state's number, the same each time; anything else is refused."""
    from gradflow.training.settings import is_gradflow_state, restore_gradflow_state

    old = np.random.default_rng(3).bit_generator.state
    assert is_gradflow_state(old) and is_gradflow_state(gf.get_rng_state())
    assert not is_gradflow_state({"state": [0] * 623, "next": 0, "seed": 0, "normal": None})  # a word short
    assert not is_gradflow_state({"state": [2**32] * 624, "next": 0, "seed": 0, "normal": None})
    draws = []
    for _ in range(2):
        restore_gradflow_state(json.loads(json.dumps(old)))
        draws.append(gf.rand(5).numpy())
    assert_array_equal(draws[0], draws[1])
    assert_array_equal(
        draws[0], gf.rand(5, generator=gf.Generator().manual_seed(old["state"]["state"] % 2**64)).numpy()
    )
