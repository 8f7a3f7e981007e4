"""One seedable random generator behind randn, rand, dropout and sampling.

`manual_seed(s)` makes every random draw after it reproducible. The generator's state is a
plain dict of integers, so a checkpoint can store and restore it without pickle.
"""

import numpy as np

_generator = np.random.default_rng()


def manual_seed(seed):
    """Reseed gradflow's generator; returns it."""
    global _generator
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"manual_seed: seed must be a non-negative integer, got {seed!r}")
    _generator = np.random.default_rng(int(seed))
    return _generator


def generator():
    """The numpy Generator that gradflow draws from."""
    return _generator


def get_rng_state():
    """The generator's state, a JSON-serialisable dict."""
    return _generator.bit_generator.state


def set_rng_state(state):
    """Restore a state returned by `get_rng_state`."""
    _generator.bit_generator.state = state
