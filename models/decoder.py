"""What the two decoder-only language models, GPT (gpt.py) and Llama (llama.py), have in common.

Read it when gpt.py sends you here (it is short); after it, llama.py, the other model built on it.

Both map token ids (B, T) to next-token logits (B, T, vocab) through config.n_layer blocks, and
both return (logits, loss). What they share does not depend on the architecture: counting the
parameters of a config, one KV cache per block, reading the ids and the loss. Each model still
writes its own forward, so that its file shows its whole path from embedding to head.
"""

import numpy as np

from gradflow import nn
from gradflow.nn import functional as F


class Decoder(nn.Module):
    """A decoder-only language model; a subclass builds config.n_layer blocks and writes forward."""

    @classmethod
    def count_parameters(cls, config):
        """The parameter count of `config`, by building the model without allocating its weights."""
        with nn.init.meta():
            return cls(config).num_parameters()

    def new_cache(self):
        """One empty KV cache per block, for incremental decoding: pass it to every forward call."""
        return [nn.KVCache() for _ in range(self.config.n_layer)]

    def token_ids(self, ids):
        """ids (a Tensor or array of shape (B, T)) as a numpy integer array, or an error naming the shape."""
        ids = np.asarray(ids)
        if ids.ndim != 2:
            raise ValueError(f"{type(self).__name__}: ids must be (batch, time), got shape {ids.shape}")
        return ids

    @staticmethod
    def loss(logits, targets):
        """The mean cross-entropy of logits (B, T, vocab) against the target ids (B, T); None without targets.

        targets[b, t] is the token that should follow ids[b, t]: the ids shifted left by one.
        """
        if targets is None:
            return None
        targets = np.asarray(targets)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
