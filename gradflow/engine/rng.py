"""One seedable random generator behind every draw (randn, rand, randint, randperm, multinomial, normal_,
uniform_, bernoulli, dropout), and generators of one's own: PyTorch's CPU stream, number for number.

`gf.manual_seed(s)` (torch.manual_seed) reseeds gradflow's generator; `gf.Generator().manual_seed(s)`
(torch.Generator) is a stream of one's own, passed as generator=. Both are PyTorch's generator: the
Mersenne Twister (engine/mt19937.py) seeded from s, and PyTorch's ways of turning its 32-bit words into
numbers (below, and engine/box_muller.py for normals), so that after the same seed the same calls give
the numbers PyTorch gives (torch==2.13.0 on x86, tests/test_torch_random.py), the makemore lecture's

    g = gf.Generator().manual_seed(2147483647)
    p = gf.rand(3, generator=g)
    p / p.sum()                                          # tensor([0.6064, 0.3033, 0.0903])
    gf.multinomial(p, 20, replacement=True, generator=g)  # tensor([1, 1, 2, 0, 0, 2, 1, 1, 0, ...])

From words w (32 bits) and W (64 bits: two words, the first high), as PyTorch's CPU kernels:
- uniform: float32 (w mod 2^24) 2^-24, float64 (W mod 2^53) 2^-53, then u (high - low) + low (fused);
- randint(low, high): low + w mod (high - low), or W mod (high - low) when high - low >= 2^28;
- normal: Box-Muller (box_muller.py), one at a time below 16 values, in blocks of 16 from 16 on;
- bernoulli(p): u < p, u a float64 uniform (a float32 one for float32 probabilities in a tensor);
- randperm(n): for i = 0 .. n-2, swap i with i + w mod (n - i);
- multinomial: with replacement and more than one sample, each sample the first category whose
  normalized cumulative weight reaches a float64 uniform; otherwise (Gumbel's trick, as an exponential
  race) the largest p_i / E_i with E_i = -log(1 - u_i) exponential draws, in the weights' dtype.
Float32 and float64 draw differently, as in PyTorch: a float32 uniform takes one word, a float64 two, and
the dtype asked for (the default float dtype, float32 as PyTorch's, unless dtype= says otherwise) picks.

Not PyTorch's: on Intel processors PyTorch draws bernoulli with one probability for every element
(dropout's masks) from Intel's MKL stream, seeded by one word of this one; gradflow draws them as
PyTorch does on other processors (AMD's, ARM's). The state (get_state) is a dict of integers that JSON
and a checkpoint keep, not PyTorch's byte tensor.
"""

import math

import numpy as np

from gradflow.engine import box_muller
from gradflow.engine.device import CPU, on_cpu
from gradflow.engine.kernels import kernel
from gradflow.engine.mt19937 import MT19937, N

DEFAULT_SEED = 67280421310721  # a fresh torch.Generator's seed


def seed_arg(op, seed):
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{op}: seed must be a non-negative integer, got {seed!r}")
    if seed >= 2**64:
        raise ValueError(f"{op}: seed must be less than 2^64 (PyTorch's seeds are 64-bit), got {seed}")
    return int(seed)


def draw_words(stream, n):
    """The next n words of an MT19937 stream, twisting block after block with numpy ops (gradflow/fast
    draws the same words with a compiled loop, or numpy's own compiled MT19937)."""
    return stream.words(n)


def uniform53(words):
    """float64 uniforms in [0, 1) from pairs of words: (W mod 2^53) 2^-53 for each 64-bit draw W (the first
    word high)."""
    w = words.astype(np.uint64)
    return (((w[0::2] << np.uint64(32)) | w[1::2]) & np.uint64(2**53 - 1)).astype(np.float64) * 2.0**-53


def forward_swaps(offsets):
    """0 .. n-1 (n = len(offsets) + 1), then for i = 0 .. n-2 the swap of places i and i + offsets[i]."""
    order = list(range(len(offsets) + 1))
    for i, z in enumerate(offsets.tolist()):
        order[i], order[i + z] = order[i + z], order[i]
    return np.array(order, dtype=np.int64)


class Generator:
    """A stream of random draws (see this file's docstring). Until manual_seed or seed is called it starts
    from PyTorch's default seed, so two fresh generators draw the same numbers, as there."""

    def __init__(self, device="cpu"):
        on_cpu("Generator", device)
        self.device = CPU
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed):
        """Restart the stream from seed; returns the generator, so g = gf.Generator().manual_seed(42)."""
        self._seed = seed_arg("manual_seed", seed)
        self._stream = MT19937(self._seed)
        self.next_normal = None  # the second value of the last one-at-a-time Box-Muller pair
        return self

    def seed(self):
        """Restart the stream from a fresh seed drawn from the operating system's entropy; returns that seed."""
        self.manual_seed(int(np.random.SeedSequence().generate_state(1, np.uint64)[0]))
        return self._seed

    def initial_seed(self):
        """The seed the stream was last started from."""
        return self._seed

    def get_state(self):
        """The stream's state: {"seed", "state": the 624 words, "next": the next word's index, "normal": the
        kept Box-Muller value or None}, integers and a float that JSON keeps."""
        return {"seed": self._seed, "state": self._stream.block.tolist(), "next": self._stream.next,
                "normal": self.next_normal}  # fmt: skip

    def set_state(self, state):
        """Restore a state returned by get_state; returns the generator."""
        if not is_state(state):
            raise ValueError("set_state: not a state get_state returned (seed, 624 words, next, normal)")
        self._seed, self.next_normal = state["seed"], state["normal"]
        self._stream.block, self._stream.next = np.array(state["state"], np.uint32), state["next"]
        return self

    # --- PyTorch's draws (this file's docstring), for the ops that draw ---

    def words(self, n):
        return kernel(draw_words)(self._stream, int(n))

    def words64(self, n):
        w = self.words(2 * n).astype(np.uint64)
        return (w[0::2] << np.uint64(32)) | w[1::2]

    def uniform24(self, n):
        """n float32 uniforms in [0, 1): 24 bits of one word each."""
        return (self.words(n) & np.uint32(2**24 - 1)).astype(np.float32) * np.float32(2.0**-24)

    def uniform53(self, n):
        """n float64 uniforms in [0, 1): 53 bits of a 64-bit draw each."""
        return kernel(uniform53)(self.words(2 * n))

    def uniform(self, shape, dtype, low=0.0, high=1.0):
        """Uniform draws in [low, high) of dtype: low + u (high - low), in dtype."""
        dtype = np.dtype(dtype)
        u = (
            self.uniform24(_count(shape))
            if dtype == np.float32
            else self.uniform53(_count(shape)).astype(dtype, copy=False)
        )
        if (low, high) != (0, 1):  # u (high - low) + low rounded once, as PyTorch's compiled kernel
            u = kernel(box_muller.fma)(u, dtype.type(high) - dtype.type(low), dtype.type(low))
        return u.reshape(shape)

    def normal(self, shape, dtype, mean=0.0, std=1.0):
        """Normal draws of dtype, mean + std z (box_muller.py)."""
        dtype, n = np.dtype(dtype), _count(shape)
        z = box_muller.blocks(self, n, mean, std, dtype) if n >= 16 else box_muller.scalar(self, n, mean, std)
        return z.astype(dtype, copy=False).reshape(shape)

    def integers(self, low, high, shape, dtype=np.int64):
        """Integers drawn uniformly from [low, high): low + w mod (high - low), with 64-bit w from 2^28 on."""
        span, n = high - low, _count(shape)
        offset = self.words64(n) % np.uint64(span) if span >= 2**28 else self.words(n) % np.uint32(span)
        return (offset.astype(np.int64) + low).astype(dtype, copy=False).reshape(shape)

    def permutation(self, n):
        """0 .. n-1 shuffled as PyTorch's randperm: swap i with i + w_i mod (n - i), i = 0 .. n-2 (from n
        = 2^32 / 20 on, where a 32-bit w would favour small offsets, inside out with 64-bit draws)."""
        if n < (2**32 - 1) // 20:
            if n == 0:
                return np.empty(0, np.int64)
            return kernel(forward_swaps)(self.words(n - 1).astype(np.int64) % np.arange(n, 1, -1))
        order = np.empty(n, np.int64)
        for i, w in enumerate(self.words64(n).tolist()):
            z = w % (i + 1)
            order[i], order[z] = order[z], i
        return order

    def exponential(self, shape, dtype, rate=1.0):
        """Exponential draws -log(1 - u) / rate, computed in float64 as PyTorch's."""
        return ((-1.0 / rate) * np.log1p(-self.uniform53(_count(shape)))).astype(dtype).reshape(shape)

    def bernoulli(self, probs, dtype, shape=None):
        """1 where u < p, else 0, in dtype: probs an array (float32 ones compared with float32 uniforms), or
        one probability for every element of shape (float64 uniforms)."""
        if shape is None:
            probs = np.asarray(probs)
            u = self.uniform24(probs.size) if probs.dtype == np.float32 else self.uniform53(probs.size)
            return (u.reshape(probs.shape) < probs).astype(dtype)
        # u = m 2^-53 < p for the 53 bits m of a 64-bit draw: m < p 2^53 (exact), the integers compared
        bits = self.words64(_count(shape)) & np.uint64(2**53 - 1)
        return (bits < np.uint64(math.ceil(probs * 2**53))).astype(dtype).reshape(shape)

    def multinomial(self, rows, num_samples, replacement):
        """num_samples category indices per row of weights (rows: (R, C), float32 or float64)."""
        if not replacement or num_samples == 1:
            race = rows / self.exponential(rows.shape, rows.dtype)
            if num_samples == 1:
                return race.argmax(axis=-1)[:, None]
            return np.argsort(-race, axis=-1, kind="stable")[:, :num_samples]
        out = np.empty((len(rows), num_samples), np.int64)
        for i, w in enumerate(rows):
            cumulative = np.cumsum(w)  # in the weights' dtype, one addition after another
            cumulative /= cumulative[-1]
            cumulative[-1] = 1
            out[i] = np.searchsorted(cumulative.astype(np.float64), self.uniform53(num_samples), side="left")
        return out


def _count(shape):
    return int(np.prod(shape, dtype=np.int64))


def is_state(state):
    """Whether state is one get_state returns (the words and their index in range)."""
    try:
        words, nxt, seed, normal = state["state"], state["next"], state["seed"], state["normal"]
        return (
            isinstance(words, list) and len(words) == N and all(_is_int(w) and 0 <= w < 2**32 for w in words)
            and _is_int(nxt) and 0 <= nxt <= N and _is_int(seed) and 0 <= seed < 2**64
            and (normal is None or isinstance(normal, float))
        )  # fmt: skip
    except (TypeError, KeyError):
        return False


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


_generator = Generator()
_generator.seed()  # as PyTorch's default generator: from the operating system's entropy until manual_seed


def manual_seed(seed):
    """Reseed gradflow's generator (torch.manual_seed); returns it."""
    return _generator.manual_seed(seed)


def initial_seed():
    """The seed gradflow's generator was last started from (torch.initial_seed)."""
    return _generator.initial_seed()


def generator(given=None):
    """The Generator to draw from: `given` (a Generator passed as generator=), else gradflow's own."""
    if given is None:
        return _generator
    if not isinstance(given, Generator):
        raise TypeError(f"generator= takes a gf.Generator, got {type(given).__name__}")
    return given


def get_rng_state():
    """gradflow's generator's state (Generator.get_state)."""
    return _generator.get_state()


def set_rng_state(state):
    """Restore a state returned by `get_rng_state`."""
    _generator.set_state(state)
