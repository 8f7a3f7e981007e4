"""The KV cache, for decoding one token at a time.

The query of token t reads the keys and values of tokens 0 .. t; those of 0 .. t-1 were computed at
earlier steps, so each attention layer keeps them (`cache=` of nn.CausalSelfAttention and
nn.GeneralAttention) and appends only the new token's. models/decoder.py gives a model one cache
per block (`new_cache`); gradflow/inference/generate.py decodes with them.
"""

import numpy as np

from gradflow.engine.autograd import is_grad_enabled
from gradflow.engine.functions import cat
from gradflow.engine.tensor import Tensor


class KVCache:
    """Keys and values of the tokens seen so far, for one attention layer, so that decoding token t
    computes only its own q, k, v instead of re-running the whole prefix.

    Memory: 2 (k and v) x B x n_kv_heads x T x head_dim numbers per layer.

    When no gradient is wanted (generation runs under no_grad), the keys and values go into
    buffers that double in length when full, and `append` returns views of their filled part:
    appending a token copies one token's keys, not the whole cache. When a gradient must flow
    back through the cache, it is grown by `cat`, an op the engine records.
    """

    def __init__(self):
        self.k = self.v = None
        self._buffers = None  # (k, v) arrays of (B, n_kv, capacity, hs), when filled in place

    @property
    def length(self):
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k, v):
        """Add this step's (B, n_kv, T, hs) keys and values; returns all of them so far."""
        if is_grad_enabled() and (k.requires_grad or v.requires_grad):
            self._buffers = None
            if self.k is not None:
                k, v = cat([self.k, k], axis=-2), cat([self.v, v], axis=-2)
        else:
            start, end = self.length, self.length + k.shape[-2]
            if self._buffers is None or end > self._buffers[0].shape[-2]:
                self._grow(k, max(end, 2 * start, 16))
            for buffer, new in zip(self._buffers, (k, v)):
                buffer[..., start:end, :] = new.data
            k, v = (Tensor(buffer[..., :end, :]) for buffer in self._buffers)
        self.k, self.v = k, v
        return k, v

    def _grow(self, k, capacity):
        """New buffers of `capacity` positions, holding what the cache has so far."""
        shape = k.shape[:-2] + (capacity, k.shape[-1])
        buffers = (np.empty(shape, dtype=k.dtype), np.empty(shape, dtype=k.dtype))
        if self.k is not None:
            for buffer, old in zip(buffers, (self.k, self.v)):
                buffer[..., : self.length, :] = old.data
        self._buffers = buffers

    def nbytes(self):
        return 0 if self.k is None else self.k.data.nbytes + self.v.data.nbytes
