"""One seedable random generator behind randn, rand, dropout and sampling, and generators of one's own.

`manual_seed(s)` makes every random draw after it reproducible. The generator's state is a
plain dict of integers, so a checkpoint can store and restore it without pickle.

A `Generator` is a stream of draws of its own, as PyTorch's torch.Generator: seeded once
(`g = gf.Generator().manual_seed(42)`) and passed as `generator=g` to randn, rand, randint,
randperm, multinomial or a DataLoader, it gives the same draws whatever else the program draws
from gradflow's generator. Both are numpy's generator (PCG64), so the numbers are not PyTorch's.
"""

import numpy as np

from gradflow.engine.device import CPU, on_cpu

_generator = np.random.default_rng()


def seed_arg(op, seed):
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{op}: seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def manual_seed(seed):
    """Reseed gradflow's generator; returns it."""
    global _generator
    _generator = np.random.default_rng(seed_arg("manual_seed", seed))
    return _generator


def generator(given=None):
    """The numpy Generator to draw from: `given`'s (a Generator passed as generator=), else gradflow's own."""
    if given is None:
        return _generator
    if not isinstance(given, Generator):
        raise TypeError(f"generator= takes a gf.Generator, got {type(given).__name__}")
    return given._draws


def get_rng_state():
    """The generator's state, a JSON-serialisable dict."""
    return _generator.bit_generator.state


def set_rng_state(state):
    """Restore a state returned by `get_rng_state`."""
    _generator.bit_generator.state = state


class Generator:
    """A random generator of its own (see this file's docstring). Until manual_seed or seed is called it
    starts from PyTorch's default seed, so two fresh generators draw the same numbers, as there."""

    def __init__(self, device="cpu"):
        on_cpu("Generator", device)
        self.device = CPU
        self.manual_seed(67280421310721)

    def manual_seed(self, seed):
        """Restart the stream from seed; returns the generator, so g = gf.Generator().manual_seed(42)."""
        self._seed = seed_arg("Generator.manual_seed", seed)
        self._draws = np.random.default_rng(self._seed)
        return self

    def seed(self):
        """Restart the stream from a fresh seed drawn from the operating system's entropy; returns that seed."""
        self.manual_seed(int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1))
        return self._seed

    def initial_seed(self):
        """The seed the stream was last started from."""
        return self._seed

    def get_state(self):
        """The stream's state, a JSON-serialisable dict (numpy's, not PyTorch's byte tensor)."""
        return self._draws.bit_generator.state

    def set_state(self, state):
        """Restore a state returned by get_state; returns the generator."""
        self._draws.bit_generator.state = state
        return self
