"""The model a command asks for: built from flags, or rebuilt from a checkpoint's description.

This is where the command line meets gradflow.models (the example architectures); no other part
of the library imports them.
"""

import math
import stat
import sys
from dataclasses import asdict, fields
from pathlib import Path

from gradflow import nn
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.llama import Llama, LlamaConfig, smollm2_instruct
from gradflow.nn import init, lora
from gradflow.text import load_tokenizer
from gradflow.training.checkpoint import CheckpointError, load_checkpoint
from gradflow.training.finetune import adapter_settings, load_adapter
from gradflow.training.settings import flag

MODEL_DEFAULTS = dict(model="gpt", n_layer=4, n_head=4, n_kv_head=None, n_embd=128, dropout=0.0)
# what each model flag is called in each architecture's config
CONFIG_NAMES = {
    "gpt": dict(n_layer="n_layer", n_head="n_head", n_embd="n_embd", dropout="dropout"),
    "llama": dict(n_layer="n_layer", n_head="n_heads", n_kv_head="n_kv_heads", n_embd="d_model"),
}
# the largest sizes a checkpoint's config may ask for: a crafted file must not make us allocate 60 GiB
LIMITS = dict(vocab_size=1 << 20, block_size=1 << 16, n_layer=1024, n_head=1024, n_heads=1024, n_kv_heads=1024,
              n_embd=1 << 15, d_model=1 << 15, d_ff=1 << 17)  # fmt: skip

SMOLLM2 = "SmolLM2-135M-Instruct"
SMOLLM2_CONTEXT = 8192  # the positions it was trained on (its GGUF file's llama.context_length)


def check_model_flags(kind, n_layer, n_head, n_embd, dropout=0.0, n_kv_head=None):
    """Refuse sizes no model can have, naming the flag: a model with no blocks is not a model."""
    for name, value in (("n_layer", n_layer), ("n_head", n_head), ("n_embd", n_embd), ("n_kv_head", n_kv_head)):
        if value is not None and value < 1:
            raise ValueError(f"{flag(name)} must be a positive integer, got {value}")
    if n_embd % n_head:
        raise ValueError(f"--n-embd {n_embd} must be a multiple of --n-head {n_head} (each head gets n_embd / n_head)")
    if kind == "llama" and (n_embd // n_head) % 2:
        raise ValueError(f"--n-embd / --n-head = {n_embd // n_head} must be even for llama (RoPE rotates pairs)")
    if n_kv_head is not None and n_head % n_kv_head:
        raise ValueError(f"--n-head {n_head} must be a multiple of --n-kv-head {n_kv_head}")
    if not (math.isfinite(dropout) and 0 <= dropout < 1):
        raise ValueError(f"--dropout must be in [0, 1), got {dropout}")


def build_model(kind, vocab_size, block_size, n_layer, n_head, n_embd, dropout=0.0, n_kv_head=None):
    """A GPT or Llama-style model of the given size, and its {"type", "config"} description."""
    check_model_flags(kind, n_layer, n_head, n_embd, dropout, n_kv_head)
    if kind == "gpt":
        config = GPTConfig(vocab_size, block_size, n_layer, n_head, n_embd, dropout=dropout, bias=False)
        return GPT(config), {"type": "gpt", "config": asdict(config)}
    if kind == "llama":
        d_ff = 32 * round(8 * n_embd / 3 / 32)  # SwiGLU's usual width: 2/3 of 4d, rounded to 32
        config = LlamaConfig(vocab_size, n_layer, n_embd, n_head, n_kv_head or n_head, d_ff)
        return Llama(config), {"type": "llama", "config": asdict(config), "block_size": block_size}
    raise ValueError(f"unknown model {kind!r}: choose gpt or llama")


def model_from_meta(ckpt):
    """Rebuild the (untrained) model a checkpoint describes, checking its description first.

    The sizes are checked against limits, and the shapes the config implies against the arrays in
    the file, before any weight is allocated: a crafted config cannot make us allocate more than
    the file itself holds.
    """
    described = ckpt.meta.get("model")
    if described is None and "lora" in ckpt.meta:
        raise CheckpointError(
            f"checkpoint {ckpt.path} holds LoRA adapters, not a whole model: use them with "
            f"--model smollm2 --adapter {ckpt.path.parent}"
        )
    kinds = {"gpt": (GPT, GPTConfig), "llama": (Llama, LlamaConfig)}
    if not isinstance(described, dict) or described.get("type") not in kinds:
        raise CheckpointError(f"checkpoint {ckpt.path}: model must name its type, gpt or llama, got {described!r}")
    cls, config_cls = kinds[described["type"]]
    given = described.get("config")
    names = {f.name: getattr(f.type, "__name__", f.type) for f in fields(config_cls)}
    if not isinstance(given, dict) or set(given) - set(names):
        raise CheckpointError(f"checkpoint {ckpt.path}: model.config must hold {config_cls.__name__} fields")
    for name, value in given.items():
        kind = {"int": int, "float": (int, float), "bool": bool}[names[name]]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise CheckpointError(f"checkpoint {ckpt.path}: model.config.{name} has the wrong type: {value!r}")
        if names[name] == "int" and not 1 <= value <= LIMITS.get(name, 1 << 20):
            raise CheckpointError(f"checkpoint {ckpt.path}: model.config.{name} = {value} is out of range")
    if described["type"] == "llama" and not _is_size(described.get("block_size")):
        raise CheckpointError(f"checkpoint {ckpt.path}: model.block_size must be a positive integer")
    config = config_cls(**given)
    with init.meta():  # shapes only, no storage
        shapes = {n: p.shape for n, p in cls(config).named_parameters(remove_duplicate=False)}
    saved = {k[len("model/") :]: v.shape for k, v in ckpt.arrays.items() if k.startswith("model/")}
    older = _older_norm_biases(described["type"], config, shapes, saved)
    for name, shape in {**shapes, **older}.items():
        if name not in saved:
            raise CheckpointError(f"checkpoint {ckpt.path}: model/{name} is missing")
        if saved[name] != shape:
            raise CheckpointError(
                f"checkpoint {ckpt.path}: model/{name} has shape {saved[name]} but its config implies {shape}"
            )
    model = cls(config)
    for name in older:  # give them back, so that the run loads, resumes and exports as it was trained
        _, i, norm, _ = name.split(".")
        block = model.blocks[int(i)]
        ln = getattr(block, norm)
        setattr(block, norm, nn.LayerNorm(ln.normalized_shape, ln.eps, dtype=ln.weight.dtype))
    return model


def _older_norm_biases(kind, config, shapes, saved):
    """{name: shape} of the blocks' LayerNorm biases a GPT checkpoint holds although its config says bias=False.

    Until 2026-11-27 a GPT's blocks built their two LayerNorms with a bias whatever `bias` said (ln_f obeyed
    it), and `gradflow train` builds with bias=False: every run saved before then holds those biases.
    """
    if kind != "gpt" or config.bias:
        return {}
    norms = {name.removesuffix("weight") + "bias": shape for name, shape in shapes.items() if "_norm.weight" in name}
    return {name: shape for name, shape in norms.items() if name in saved}


def _is_size(value):
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= LIMITS["block_size"]


def tokenizer_for(ckpt, model):
    """The checkpoint's tokenizer, checked to speak the model's vocabulary."""
    tokenizer = load_tokenizer(ckpt.meta.get("tokenizer"), source=f"checkpoint {ckpt.path}: tokenizer")
    if tokenizer.vocab_size != model.config.vocab_size:
        raise CheckpointError(
            f"checkpoint {ckpt.path}: its tokenizer has {tokenizer.vocab_size} tokens but the model "
            f"{model.config.vocab_size}"
        )
    return tokenizer


def context_of(meta):
    described = meta["model"]
    return described["config"]["block_size"] if described["type"] == "gpt" else described["block_size"]


def load_smollm2(adapter=None):
    """SmolLM2-135M-Instruct and its tokenizer, saying so on stderr (the first use fetches 98 MB).

    adapter: a directory `gradflow finetune` wrote; its LoRA adapters are loaded and merged into the
    weights (W + (alpha / r) B A), so the adapted model runs at the base model's speed.
    """
    ckpt = None
    if adapter is not None:
        ckpt = load_checkpoint(adapter)  # read first: a wrong path is said before the model loads
        if ckpt.meta.get("base") != SMOLLM2 or "lora" not in ckpt.meta:
            raise CheckpointError(f"--adapter {adapter}: {ckpt.path} holds no LoRA adapters for {SMOLLM2}")
        adapter_settings(ckpt)  # and its settings are checked before the base model is fetched or loaded
    print(f"loading {SMOLLM2} ...", file=sys.stderr, flush=True)
    model, tokenizer = smollm2_instruct()
    if ckpt is not None:
        load_adapter(model, ckpt)
        lora.merge(model)
    return model, tokenizer


def data_file(path):
    """--data as a Path: an existing regular file (a device or a pipe would never end)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"--data {path}: no such file")
    if not stat.S_ISREG(path.stat().st_mode):
        raise ValueError(f"--data {path} is not a regular file")
    return path
