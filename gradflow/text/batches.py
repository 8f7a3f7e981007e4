"""From one long sequence of token ids to training examples: a train/validation split and random batches.

A language model learns to predict token t+1 from tokens ..t, so an example is a window of
block_size ids x and the same window moved one step on, y: y[i] is the token that follows x[i].
"""

import numpy as np


def _as_ids(where, ids):
    """`ids` as a 1-D int64 array, or an error naming `where`."""
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"{where}: expected a 1-D sequence of token ids, got shape {ids.shape}")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"{where}: token ids must be integers, got dtype {ids.dtype}")
    return ids.astype(np.int64, copy=False)


def _check_positive_int(where, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{where}: {name} must be at least 1, got {value}")


def _check_long_enough(where, what, n, block_size):
    # a window of block_size inputs needs one more token for the target of its last position
    if n < block_size + 1:
        raise ValueError(
            f"{where}: {what} has {n} tokens, too few for block_size {block_size} "
            f"(a window needs block_size + 1 = {block_size + 1} tokens)"
        )


def split(ids, val_fraction=0.1, block_size=None):
    """(train, val): the first 1 - val_fraction of the ids and the last val_fraction (the training part rounded down).

    The validation part is the end of the text, not a random sample, so no window of it overlaps a
    training window. With `block_size`, each non-empty part must hold at least block_size + 1 tokens,
    so a corpus too short for the model fails here, naming the sizes, rather than at the first batch.
    """
    ids = _as_ids("split", ids)
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float, np.floating)):
        raise TypeError(f"split: val_fraction must be a number, got {val_fraction!r}")
    if not 0 <= val_fraction < 1:
        raise ValueError(f"split: val_fraction must be in [0, 1), got {val_fraction}")
    n_train = int(ids.size * (1 - val_fraction))  # as the published 90/10 splits count: 1,003,854 of 1,115,394
    train, val = ids[:n_train], ids[n_train:]
    if block_size is not None:
        _check_positive_int("split", "block_size", block_size)
        _check_long_enough(
            "split", f"the training split ({1 - val_fraction:.0%} of {ids.size})", train.size, block_size
        )
        if val_fraction > 0:
            _check_long_enough(
                "split", f"the validation split ({val_fraction:.0%} of {ids.size})", val.size, block_size
            )
    return train, val


def get_batch(ids, batch_size, block_size, rng):
    """(x, y), int64 arrays of shape (batch_size, block_size): random windows of `ids`, and y = x moved on by one.

    x[b] = ids[s_b : s_b + block_size] and y[b] = ids[s_b + 1 : s_b + block_size + 1], with starts s_b
    drawn uniformly from `rng`, a numpy Generator that the caller seeds, so a run is reproducible.
    """
    ids = _as_ids("get_batch", ids)
    _check_positive_int("get_batch", "batch_size", batch_size)
    _check_positive_int("get_batch", "block_size", block_size)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"get_batch: rng must be a numpy.random.Generator, got {type(rng).__name__}")
    _check_long_enough("get_batch", "the token sequence", ids.size, block_size)
    # the last window starts at size - block_size - 1, so its target still lies inside ids
    starts = rng.integers(0, ids.size - block_size, size=batch_size)
    window = starts[:, None] + np.arange(block_size)
    return ids[window], ids[window + 1]
