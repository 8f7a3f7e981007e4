"""Replaces engine/rng.py's draw_words (the Mersenne Twister's words by numpy ops, one block of 624 after
another: about a dozen array operations per block) with numpy's own MT19937 bit generator, compiled C,
which is the same generator: set to the stream's block and position, its raw draws are the stream's
words, and its state afterwards is the stream's. Setting and reading that state costs about as much as
twisting a few blocks with numpy ops, so short draws keep the plain form: from 8 blocks on the compiled
one is 7 times as fast (benchmarks/bench_rng.py)."""

import numpy as np

from gradflow.engine.mt19937 import N

_bits = np.random.MT19937(0)  # made once (its own seeding takes milliseconds); each call sets its state


def draw_words(stream, n):
    """The next n words of an MT19937 stream (engine/mt19937.py), by numpy's compiled MT19937."""
    if n < 8 * N:
        return stream.words(n)
    _bits.state = {"bit_generator": "MT19937", "state": {"key": stream.block, "pos": stream.next}}
    words = _bits.random_raw(n).astype(np.uint32)
    state = _bits.state["state"]
    stream.block, stream.next = state["key"].astype(np.uint32), int(state["pos"])
    return words
