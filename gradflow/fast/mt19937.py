"""PyTorch's random stream, fast: replaces the plain functions of engine/rng.py and engine/box_muller.py
that turn the Mersenne Twister's words into numbers, with the same numbers (tests/test_torch_random.py
checks each against its plain form, and both against torch).

With numba (compiled.py loads it), each is one loop of random_loops.py; without it, the words come from
numpy's own compiled MT19937 and the rest runs the plain form. Measured on a million values, each
kernel alone against the plain function it replaces (medians of 7 alternating rounds on the 2 shared
cores, at a load average of 16: the ratios hold better than the times), plain -> numba:

    words (rng.draw_words)                  15 times as fast (numpy's MT19937 without numba: 12 times)
    float32 normals (block_normals)         46 to 51 times (Cephes' log and sincos, 8 lanes at once, with
                                            the processor's fused multiply-add instead of its emulation)
    float64 normals (block_normals)         2.7 times (the C library's log, cos and sin, called per value)
    float64 uniforms (rng.uniform53)        5.4 times
    u (high - low) + low (box_muller.fma)   150 times in float32, 53 in float64
    randperm's swaps (rng.forward_swaps)    a Python loop before: 500 times for 100,000

Whole draws against numpy's own generator in the same rounds (docs/benchmarks.md): float32 randn,
normal_ and uniform_ in 0.25 to 0.62 of numpy's time, float64 ones 1.2 to 2.6 times numpy's. The loops
compile once per installation as random_loops.py is first imported (15 s at a load average of 9 on the
2 cores) and load from numba's cache after that (0.17 s).
"""

import numpy as np

from gradflow.engine import box_muller
from gradflow.engine import rng as plain
from gradflow.engine.mt19937 import N
from gradflow.fast import compiled

_bits = None  # numpy's MT19937, made on first use (its own seeding takes milliseconds); each call sets its state


def random_loops():
    """gradflow.fast.random_loops where numba runs (compiled.loops()), else None."""
    if compiled.loops() is None:
        return None
    from gradflow.fast import random_loops as loops

    return loops


def draw_words(stream, n):
    """rng.draw_words: the next n words of an MT19937 stream (engine/mt19937.py). With numba one loop that
    twists and tempers in place; without it, from 8 blocks on, numpy's compiled MT19937 set to the stream's
    block and position (setting and reading its state costs about as much as twisting a few blocks with
    numpy ops, so shorter draws keep the plain twist)."""
    global _bits
    loops = random_loops()
    if loops is not None:
        words = np.empty(n, np.uint32)
        stream.next = loops.draw_words(stream.block, stream.next, words)
        return words
    if n < 8 * N:
        return stream.words(n)
    _bits = _bits or np.random.MT19937(0)
    _bits.state = {"bit_generator": "MT19937", "state": {"key": stream.block, "pos": stream.next}}
    words = _bits.random_raw(n).astype(np.uint32)
    state = _bits.state["state"]
    stream.block, stream.next = state["key"].astype(np.uint32), int(state["pos"])
    return words


def uniform53(words):
    """rng.uniform53: float64 uniforms from pairs of words, as one loop. Without numba, the 53 bits as two
    float64 parts, (high mod 2^21) 2^-21 + low 2^-53: each exact and their bits apart, so their sum is exact
    too, without the plain form's 64-bit integers (4 passes instead of 8: 3.6 times as fast)."""
    loops = random_loops()
    out = np.empty(len(words) // 2)
    if loops is not None:
        loops.uniform53(words, out)
        return out
    np.multiply(words[0::2] & np.uint32(2**21 - 1), 2.0**-21, out=out)
    out += np.multiply(words[1::2], 2.0**-53)
    return out


def forward_swaps(offsets):
    """rng.forward_swaps: randperm's swaps as one loop."""
    loops = random_loops()
    if loops is None:
        return plain.forward_swaps(offsets)
    order = np.empty(len(offsets) + 1, np.int64)
    loops.forward_swaps(np.ascontiguousarray(offsets, np.int64), order)
    return order


def fma(a, b, c):
    """box_muller.fma: a b + c rounded once, by the processor's fused multiply-add, for an array a of
    float32 or float64 and one b and c (what uniforms on a range ask for); anything else as the plain one."""
    loops = random_loops()
    a = np.asarray(a)
    one_each = np.ndim(b) == 0 and np.ndim(c) == 0 and a.dtype in (np.float32, np.float64)
    if loops is None or not one_each:
        return box_muller.fma(a, b, c)
    flat, kind = np.ascontiguousarray(a).reshape(-1), a.dtype.type
    out = np.empty_like(flat)
    (loops.scale_and_shift32 if kind is np.float32 else loops.scale_and_shift64)(flat, kind(b), kind(c), out)
    return out.reshape(a.shape)


def block_normals(u, mean, std, dtype):
    """box_muller.block_normals: the blocks of 16 as one loop (random_loops.block_normals32 or 64)."""
    loops = random_loops()
    if loops is None:
        return box_muller.block_normals(u, mean, std, dtype)
    mean, std = dtype.type(mean), dtype.type(std)
    out = np.empty_like(u)
    block = loops.block_normals32 if dtype == np.float32 else loops.block_normals64
    block(np.ascontiguousarray(u), mean, std, (mean, std) != (0, 1), out)
    return out
