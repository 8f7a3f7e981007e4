"""A Llama / Qwen style decoder, top to bottom.

Read after gpt.py; next, trace.py (this forward, and GPT's, written out step by step) or gradflow/training/trainer.py.

x_0 = E[ids]                                      no position embedding: RoPE rotates q and k
x_l = x_(l-1) + Attn(RMSNorm(x_(l-1)))            causal grouped-query attention with RoPE
x_l = x_l + SwiGLU(RMSNorm(x_l))                  down(silu(gate(x)) * up(x))
logits = RMSNorm(x_L) W_head^T                    W_head = E when the embeddings are tied

Each block is an nn.TransformerBlock (gradflow/nn/blocks.py) around nn.GeneralAttention
(gradflow/nn/general_attention.py), the attention with grouped-query heads and RoPE.

`from_gguf` loads pretrained weights from a llama.cpp GGUF file, and `smollm2_instruct()` gives
SmolLM2-135M-Instruct with its tokenizer, ready to chat. What Llama shares with GPT (counting
parameters, the KV caches, the loss) is in decoder.py.
"""

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from gradflow import nn
from gradflow.models import hf
from gradflow.models.decoder import Decoder
from gradflow.nn import functional as F
from gradflow.pretrained import GGUFFile, smollm2_path
from gradflow.text import PretrainedBPETokenizer


@dataclass
class LlamaConfig:
    vocab_size: int = 49152
    n_layer: int = 30
    d_model: int = 576
    n_heads: int = 9
    n_kv_heads: int = 3
    d_ff: int = 1536
    qkv_bias: bool = False  # Qwen2 puts biases on q, k, v (not on o or the MLP)
    tie_weights: bool = True
    rope_base: float = 10000.0
    eps: float = 1e-5
    rope_interleaved: bool = False  # RoPE pairs (x0, x1), (x2, x3), ... instead of (x_i, x_(i + d/2))


class Llama(Decoder):
    def __init__(self, config, dtype=None):
        super().__init__()
        self.config = c = config
        self.embed_tokens = nn.Embedding(c.vocab_size, c.d_model, dtype=dtype)
        # one table for every layer
        self.rope = nn.RotaryEmbedding(c.d_model // c.n_heads, base=c.rope_base, interleaved=c.rope_interleaved)
        block = dict(n_kv_heads=c.n_kv_heads, ffn="swiglu", norm="rms", eps=c.eps, bias=False, dtype=dtype)
        self.layers = nn.ModuleList(
            nn.TransformerBlock(c.d_model, c.n_heads, c.d_ff, attn_bias=c.qkv_bias, rope=self.rope, **block)
            for _ in range(c.n_layer)
        )
        self.norm = nn.RMSNorm(c.d_model, eps=c.eps, dtype=dtype)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False, dtype=dtype)
        # True: in training with targets, the head and the loss are one op and no logits are formed (forward);
        # `gradflow finetune` asks for it, where the (B, T, vocab) logits are the step's largest arrays
        self.fused_loss = False
        for name, p in self.named_parameters():  # N(0, 0.02^2) matrices, zero biases (Llama's initializer_range)
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.ndim == 2:
                nn.init.normal_(p, std=0.02)
        if c.tie_weights:
            self.lm_head.weight = self.embed_tokens.weight

    # written out here rather than shared in decoder.py, so that this file shows Llama's whole forward path
    def forward(self, ids, targets=None, cache=None, need_weights=False):
        """ids: (B, T) token ids -> (logits (B, T, vocab), mean cross-entropy against targets or None).

        With a cache (from new_cache), ids are the next tokens after those already cached; RoPE
        reads their positions from the cache.

        With fused_loss set, in training mode with targets the logits are None: the loss comes from the
        head and the cross-entropy as one op (F.linear_cross_entropy), which never holds the (B, T, vocab)
        logits, nor their softmax and gradient (114 MB each for SmolLM2 at 8 x 76 tokens).
        """
        ids = self.token_ids(ids)  # (B, T)
        x = self.embed_tokens(ids)  # (B, T, d)
        for i, layer in enumerate(self.layers):
            x = layer(x, causal=True, cache=None if cache is None else cache[i], need_weights=need_weights)
        h = self.norm(x)
        if self.fused_loss and self.training and targets is not None and type(self.lm_head) is nn.Linear:  # not LoRA's
            return None, F.linear_cross_entropy(h, self.lm_head.weight, self.token_ids(targets), self.lm_head.bias)
        logits = self.lm_head(h)  # (B, T, vocab)
        return logits, self.loss(logits, targets)

    @classmethod
    def from_hf(cls, source, config=None, dtype=None):
        """A Llama with the weights of a Hugging Face Llama (LlamaForCausalLM), in eval mode, RoPE in halves.

        source: a folder holding config.json and model.safetensors (or shards listed in
        model.safetensors.index.json), or a dict of numpy arrays by Hugging Face's names with
        `config`, the dict config.json holds. The names are mapped in hf.py.
        """
        return hf.load(cls, LlamaConfig, hf.llama_from_hf, source, config, dtype)

    def to_hf(self, context=2048):
        """(weights by Hugging Face's names, LlamaConfig's config.json as a dict): what
        LlamaForCausalLM.from_pretrained reads once hf.write_hf has written them to a folder.

        `context` is max_position_embeddings, the longest context the model is meant for (RoPE
        itself has no limit). Hugging Face rotates halves: an interleaved model's q and k rows are
        put in that order first, which leaves every q . k, and so every logit, unchanged.
        """
        state, c = self.state_dict(), self.config
        if c.rope_interleaved:
            for name, w in state.items():
                if name.endswith(("q_proj.weight", "k_proj.weight", "q_proj.bias", "k_proj.bias")):
                    n_heads = c.n_heads if ".q_proj." in name else c.n_kv_heads
                    state[name] = halves_from_pairs(w.reshape(len(w), -1), n_heads).reshape(w.shape)
        return hf.llama_to_hf(state, asdict(replace(c, rope_interleaved=False)), context)


# each layer's weights: gradflow's name <- the GGUF file's name
GGUF_LAYER_NAMES = {
    "attn_norm.weight": "attn_norm.weight",
    "attn.q_proj.weight": "attn_q.weight",
    "attn.k_proj.weight": "attn_k.weight",
    "attn.v_proj.weight": "attn_v.weight",
    "attn.o_proj.weight": "attn_output.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn.gate_proj.weight": "ffn_gate.weight",
    "ffn.up_proj.weight": "ffn_up.weight",
    "ffn.down_proj.weight": "ffn_down.weight",
}


def gguf_name(name):
    """The GGUF tensor holding gradflow's parameter `name`: "layers.3.attn.q_proj.weight" <- "blk.3.attn_q.weight"."""
    if name.startswith("layers."):
        _, i, rest = name.split(".", 2)
        return f"blk.{i}.{GGUF_LAYER_NAMES[rest]}"
    return {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight"}.get(name, "output.weight")


def halves_from_pairs(w, n_heads):
    """Undo llama.cpp's reordering of the q or k rows of each head: pairs (2i, 2i + 1) back to (i, i + d/2).

    llama.cpp's RoPE rotates adjacent features, Hugging Face checkpoints rotate x_i with x_(i + d/2),
    so llama.cpp's converter reorders the rows of W_q and W_k, per head of d rows, to put row
    i + d/2 next to row i: the file's row 2i + j is the checkpoint's row j d/2 + i. Either keep
    the file's rows and rotate adjacent pairs (`rope_interleaved=True`), or put the rows back with
    this function and rotate halves; q . k, and so every logit, is the same (tests/test_smollm2.py).
    """
    rows, cols = w.shape
    d = rows // n_heads
    return w.reshape(n_heads, d // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def config_from_gguf(metadata, rope_interleaved=False, source="config_from_gguf"):
    """A LlamaConfig from a GGUF file's llama.* metadata; every error starts with `source`, naming the file.

    Each size is checked to be a positive number before it builds anything: a damaged or foreign
    file could say 0 heads, or a block count of a billion, and the model would fail far from here.
    The vocabulary is the tokenizer's token list, so llama.vocab_size, the architecture's own
    count, must agree with it.
    """
    arch = metadata.get("general.architecture")
    if arch != "llama":
        raise ValueError(f"{source}: expected a 'llama' model file, got architecture {arch!r}")

    def number(key, kind=int):  # metadata[key] as a positive int or float, or an error naming key and value
        value = metadata.get(key)
        if value is None:
            raise ValueError(f"{source}: the file lacks the metadata key {key}")
        finite = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not finite or value <= 0 or value != kind(value):
            raise ValueError(f"{source}: {key} must be a positive {kind.__name__}, got {value!r}")
        return kind(value)

    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list):
        raise ValueError(f"{source}: the file lacks the token list tokenizer.ggml.tokens")
    declared = metadata.get("llama.vocab_size", len(tokens))  # optional in GGUF
    if declared != len(tokens):
        raise ValueError(
            f"{source}: the tokenizer lists {len(tokens)} tokens but the model's llama.vocab_size is {declared!r}; "
            f"the file's tokenizer and model disagree"
        )
    return LlamaConfig(
        vocab_size=len(tokens),
        n_layer=number("llama.block_count"),
        d_model=number("llama.embedding_length"),
        n_heads=number("llama.attention.head_count"),
        n_kv_heads=number("llama.attention.head_count_kv"),
        d_ff=number("llama.feed_forward_length"),
        rope_base=number("llama.rope.freq_base", float),
        eps=number("llama.attention.layer_norm_rms_epsilon", float),
        rope_interleaved=rope_interleaved,
    )


def from_gguf(file, rope_interleaved=False):
    """A Llama with the weights of a GGUF file (a path or a `GGUFFile`), dequantized to float32.

    The model is built shape-only (`nn.init.meta()`), then each parameter receives its tensor,
    dequantized one at a time, so memory peaks near the float32 model itself. `rope_interleaved`
    keeps the file's q/k row order and rotates adjacent pairs (see `halves_from_pairs`).

    Before any weight is read, the file must agree with itself: as many blocks of tensors as
    llama.block_count says, and an embedding row for every token of its tokenizer (a model whose
    tokenizer has more ids than its embedding has rows fails at the first rare token; one with
    fewer never produces some of its rows).
    """
    f = file if isinstance(file, GGUFFile) else GGUFFile(file)
    where = f"from_gguf: {f.path}"
    config = config_from_gguf(f.metadata, rope_interleaved, source=where)
    config = replace(config, tie_weights="output.weight" not in f.tensors)
    blocks = {name.split(".")[1] for name in f.tensors if name.startswith("blk.")}
    if len(blocks) != config.n_layer:  # checked first: a block count of a billion would build for ever
        raise ValueError(
            f"{where}: llama.block_count is {config.n_layer} but the file holds tensors for {len(blocks)} blocks"
        )
    for name in ("token_embd.weight", "output.weight"):
        if name in f.tensors and f.shape(name)[0] != config.vocab_size:
            raise ValueError(
                f"{where}: the tokenizer lists {config.vocab_size} tokens but {name} has {f.shape(name)[0]} rows; "
                f"the file's tokenizer and model disagree"
            )
    try:
        with nn.init.meta():
            model = Llama(config)
    except ValueError as err:  # sizes that do not fit together, such as heads that do not divide the width
        raise ValueError(f"{where}: its sizes do not make a model: {err}") from None
    for name, p in model.named_parameters():  # tied: lm_head.weight is embed_tokens.weight, loaded once
        source = gguf_name(name)
        if source not in f.tensors:
            raise ValueError(f"{where}: the file has no tensor {source!r}, which {name} needs")
        if f.shape(source) != p.shape:
            raise ValueError(f"{where}: {source} has shape {f.shape(source)}, {name} needs {p.shape}")
        w = f.array(source)
        if not rope_interleaved and name.endswith(("q_proj.weight", "k_proj.weight")):
            w = halves_from_pairs(w, config.n_heads if "q_proj" in name else config.n_kv_heads)
        p.data = np.ascontiguousarray(w)
    return model.eval()


def smollm2_instruct(rope_interleaved=False):
    """SmolLM2-135M-Instruct, 4-bit weights dequantized to float32: (model, tokenizer), fetched on first use.

    `smollm2_path` gives the file only if its sha256 is the known one, hashed at every load: 0.5 to
    0.7 s for its 98 MB, about 3% of the load (25 s on two shared cores), and a damaged file whose
    modification time was put back is refused instead of answering garbage. The file is read once;
    its reader (170 MB of mapped file and parsed metadata) is let go when this returns, so what
    stays is the 538 MB of float32 weights and the tokenizer.
    """
    f = GGUFFile(smollm2_path(verify=True))
    return from_gguf(f, rope_interleaved), PretrainedBPETokenizer.from_gguf(f.metadata, source=f.path)


def qwen2_0_5b():
    """Qwen2-0.5B: 494,032,768 parameters; the model "The Mathematics Behind LLM Thinking" works through."""
    return LlamaConfig(
        vocab_size=151936, n_layer=24, d_model=896, n_heads=14, n_kv_heads=2, d_ff=4864,
        qkv_bias=True, rope_base=1_000_000.0, eps=1e-6,
    )  # fmt: skip


def smollm2_135m():
    """SmolLM2-135M: 134,515,008 parameters."""
    return LlamaConfig(rope_base=100_000.0)
