"""Sampling text from a language model: greedy, temperature, top-k, top-p, with a KV cache.

From the logits l of the next token (as "The Mathematics Behind LLM Thinking" and "A Worked Walk-Through" write it):
    temperature T:  P = softmax(l / T); T < 1 sharpens, T > 1 flattens, T = 0 is greedy (argmax)
    top-k:          keep the k most probable tokens, renormalise among them
    top-p:          sort P descending and keep the smallest prefix whose cumulative probability
                    reaches p (the nucleus), renormalise among it
"""

import warnings

import numpy as np

from gradflow.engine.autograd import no_grad


def filter_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """The distribution sampling draws from, after temperature, top-k and top-p: (V,) -> (V,)."""
    logits = np.asarray(logits, dtype=np.float64)
    if temperature < 0:
        raise ValueError(f"sample: temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"sample: top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"sample: top_p must be in (0, 1], got {top_p}")
    if temperature == 0:  # greedy: all probability on the argmax
        p = np.zeros_like(logits)
        p[np.argmax(logits)] = 1.0
        return p
    z = logits / temperature
    if top_k is not None and top_k < len(z):
        kth = np.sort(z)[-top_k]
        z = np.where(z >= kth, z, -np.inf)
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p is not None:
        order = np.argsort(-p, kind="stable")
        cumulative = np.cumsum(p[order])
        n_keep = int(np.searchsorted(cumulative, top_p - 1e-12)) + 1  # first prefix reaching top_p
        keep = np.zeros(len(p), dtype=bool)
        keep[order[:n_keep]] = True
        p = np.where(keep, p, 0.0)
        p /= p.sum()
    return p


def sample(logits, rng, temperature=1.0, top_k=None, top_p=None):
    """One token id drawn from the filtered distribution of (V,) logits."""
    p = filter_probs(logits, temperature, top_k, top_p)
    return int(rng.choice(len(p), p=p))


def beyond_context(n_tokens, context):
    """The one-line warning for a prompt of n_tokens that a model seeing `context` positions cannot read whole."""
    dropped = n_tokens - context
    return (
        f"the prompt is {n_tokens:,} tokens, longer than the model's context of {context:,}: "
        f"its first {dropped:,} {'token is' if dropped == 1 else 'tokens are'} dropped"
    )


@no_grad()
def generate(
    model,
    ids,
    max_new_tokens,
    temperature=1.0,
    top_k=None,
    top_p=None,
    seed=None,
    context=None,
    on_token=None,
    stop=(),
    cache=None,
):
    """Continue the (T,) prompt `ids` by up to max_new_tokens tokens; returns all ids (prompt + new).

    The prompt runs once through the model, filling its KV cache; then each new token is one forward
    step of length 1. `context` caps how many positions the model can see (GPT's block_size,
    SmolLM2's 8,192): a longer prompt is cut to its last `context` tokens with a warning saying how
    many were dropped, and when the cache is full it is rebuilt from the last context - 1 tokens
    (a sliding window). on_token(id) is called as each
    token is chosen, for streaming to the terminal. Generation ends early after a token in `stop`
    (an end-of-turn token, say), which is kept. Pass a `cache` that already holds the first
    cache[0].length ids of the prompt (a conversation so far) to run only the rest.
    """
    ids = [int(i) for i in np.asarray(ids).reshape(-1)]
    if not ids:
        raise ValueError("generate: the prompt must hold at least one token")
    rng = np.random.default_rng(seed)
    if cache is None:
        cache = model.new_cache()
    if cache[0].length >= len(ids):
        raise ValueError(f"generate: the cache holds {cache[0].length} tokens, the prompt only {len(ids)}")
    pending = ids[cache[0].length :]
    if context is not None and cache[0].length + len(pending) > context:
        if len(ids) > context:
            warnings.warn(beyond_context(len(ids), context), stacklevel=3)  # 3: past no_grad's wrapper
        cache[:] = model.new_cache()
        pending = ids[-context:]
    for _ in range(max_new_tokens):
        if context is not None and cache[0].length + len(pending) > context:
            cache[:] = model.new_cache()  # slide the window: re-read the most recent tokens
            pending = ids[-(context - 1) :] if context > 1 else ids[-1:]
        logits, _ = model(np.array([pending]), cache=cache)
        token = sample(logits.data[0, -1], rng, temperature, top_k, top_p)
        ids.append(token)
        pending = [token]
        if on_token is not None:
            on_token(token)
        if token in stop:
            break
    return ids
