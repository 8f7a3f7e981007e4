"""Hugging Face checkpoints: the names and layouts of GPT-2's and Llama's weights, in numpy.

Read after gpt.py and llama.py; the methods GPT.from_hf / GPT.to_hf and Llama.from_hf / Llama.to_hf
are thin layers over the functions here, and `gradflow export` writes what they return.

A Hugging Face model folder holds config.json (the sizes) and model.safetensors (the weights by
name; a large model cuts them into shards that model.safetensors.index.json lists). gradflow's GPT
and Llama compute the same functions as transformers' GPT2LMHeadModel and LlamaForCausalLM, so
moving a model across is renaming its weights and, for GPT-2, changing their layout:

  GPT-2  writes each matrix of a block as a Conv1D, y = x W + b with W stored (in, out): the
         transpose of gradflow's Linear, y = x W^T + b with W stored (out, in). It computes q, k
         and v with one matrix, c_attn = [W_q; W_k; W_v]^T of shape (d, 3d). Its activation
         gelu_new is the tanh GELU, which is gradflow's F.gelu. It always has biases; a GPT built
         with bias=False has none, and zero biases compute the same, exactly.
  Llama  stores gradflow's matrices under other names in the same (out, in) layout. RoPE rotates
         x_i with x_(i + d/2) in both (gradflow's default; an interleaved model's q and k rows are
         put in that order first, see llama.halves_from_pairs).

Weights are read with the safetensors package, which reads arrays and a JSON header and runs
nothing; a pickle (pytorch_model.bin) is never opened.
"""

import json
import os
import re
from pathlib import Path

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from gradflow import nn
from gradflow.engine import bounded_json
from gradflow.engine.files import write_atomically, written_atomically
from gradflow.engine.serialize import NUMPY_DTYPES, check_dtypes

# transformers refuses a safetensors file whose header does not name the framework it was written for
SAFETENSORS_METADATA = {"format": "pt"}

# gradflow's name in GPT block i ("blocks.i.") -> GPT-2's ("transformer.h.i."); q, k and v go into attn.c_attn
GPT2_BLOCK = {
    "attn_norm.weight": "ln_1.weight",
    "attn_norm.bias": "ln_1.bias",
    "attn.o_proj.weight": "attn.c_proj.weight",
    "attn.o_proj.bias": "attn.c_proj.bias",
    "ffn_norm.weight": "ln_2.weight",
    "ffn_norm.bias": "ln_2.bias",
    "ffn.fc1.weight": "mlp.c_fc.weight",
    "ffn.fc1.bias": "mlp.c_fc.bias",
    "ffn.fc2.weight": "mlp.c_proj.weight",
    "ffn.fc2.bias": "mlp.c_proj.bias",
}
# buffers some GPT-2 files hold beside the weights: the causal mask, which transformers rebuilds too
GPT2_BUFFERS = ("attn.bias", "attn.masked_bias")

# gradflow's name in Llama layer i ("layers.i.") -> Hugging Face's ("model.layers.i."); same layout
LLAMA_BLOCK = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn.q_proj.weight": "self_attn.q_proj.weight",
    "attn.k_proj.weight": "self_attn.k_proj.weight",
    "attn.v_proj.weight": "self_attn.v_proj.weight",
    "attn.o_proj.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn.gate_proj.weight": "mlp.gate_proj.weight",
    "ffn.up_proj.weight": "mlp.up_proj.weight",
    "ffn.down_proj.weight": "mlp.down_proj.weight",
}
LLAMA_QKV_BIAS = {f"attn.{x}_proj.bias": f"self_attn.{x}_proj.bias" for x in "qkv"}


# --- GPT <-> GPT2LMHeadModel ----------------------------------------------------------------------------


def gpt_to_hf(state, config):
    """(GPT-2 weights by name, GPT-2's config.json) for a GPT's state dict and config (GPTConfig's fields).

    c_attn.weight = [W_q; W_k; W_v]^T and every other matrix of a block transposed (Conv1D is x W);
    with bias=False every bias GPT-2 has is zeros. A tied head is left out, as transformers saves it.
    """
    state = dict(state)
    for name, w in list(state.items()):  # bias=False: the zero bias beside each weight
        bias = name.removesuffix("weight") + "bias"
        if name.endswith(".weight") and name not in ("wte.weight", "wpe.weight", "lm_head.weight"):
            state.setdefault(bias, np.zeros(w.shape[0], w.dtype))
    hf = {f"transformer.{name}": state[name] for name in ("wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias")}
    for i in range(config["n_layer"]):
        ours, theirs = f"blocks.{i}.", f"transformer.h.{i}."
        for name, hf_name in GPT2_BLOCK.items():
            w = state[ours + name]
            hf[theirs + hf_name] = w.T if w.ndim == 2 else w
        qkv = [f"{ours}attn.{x}_proj" for x in "qkv"]
        hf[theirs + "attn.c_attn.weight"] = np.concatenate([state[p + ".weight"] for p in qkv]).T  # (d, 3d)
        hf[theirs + "attn.c_attn.bias"] = np.concatenate([state[p + ".bias"] for p in qkv])
    if not config["tie_weights"]:
        hf["lm_head.weight"] = state["lm_head.weight"]
    hf = {name: np.ascontiguousarray(w) for name, w in hf.items()}
    hf_config = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": config["vocab_size"],
        "n_positions": config["block_size"],
        "n_embd": config["n_embd"],
        "n_layer": config["n_layer"],
        "n_head": config["n_head"],
        "n_inner": None,  # 4 n_embd
        "activation_function": "gelu_new",
        "layer_norm_epsilon": config["eps"],
        "embd_pdrop": config["dropout"],
        "attn_pdrop": config["dropout"],
        "resid_pdrop": config["dropout"],
        "tie_word_embeddings": config["tie_weights"],
        "bos_token_id": None,  # GPT-2's own, 50256, is not in a smaller vocabulary
        "eos_token_id": None,
        "dtype": str(hf["transformer.wte.weight"].dtype),
    }
    return hf, hf_config


def gpt_from_hf(weights, hf_config, where):
    """(GPTConfig's fields, GPT state dict) for GPT-2 weights and config.json; what GPT cannot compute is refused."""
    if hf_config.get("model_type", "gpt2") != "gpt2":
        raise ValueError(f"{where}: config.json describes a {hf_config['model_type']!r} model, not 'gpt2'")
    activation = hf_config.get("activation_function", "gelu_new")
    if activation not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ValueError(
            f"{where}: activation_function {activation!r} is not one gradflow's GPT computes; "
            f"it has the tanh GELU (gelu_new, gelu_pytorch_tanh)"
        )
    refused = {"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "add_cross_attention": False}
    for key, value in refused.items():
        if hf_config.get(key, value) != value:
            raise ValueError(f"{where}: {key} = {hf_config[key]!r} is not supported; gradflow's GPT has {value}")
    d, n_layer = size(hf_config, "n_embd", where), size(hf_config, "n_layer", where)
    if hf_config.get("n_inner") not in (None, 4 * d):
        raise ValueError(f"{where}: n_inner = {hf_config['n_inner']!r}; its MLP must be 4 n_embd = {4 * d} wide")
    rates = {hf_config.get(k, 0.1) for k in ("embd_pdrop", "attn_pdrop", "resid_pdrop")}  # GPT-2's default 0.1
    if len(rates) != 1:
        raise ValueError(f"{where}: embd_pdrop, attn_pdrop and resid_pdrop differ; gradflow's GPT has one dropout")
    dropout = rates.pop()
    if not (isinstance(dropout, (int, float)) and not isinstance(dropout, bool) and 0 <= dropout < 1):
        raise ValueError(f"{where}: config.json's resid_pdrop must be a number in [0, 1), got {dropout!r}")
    tied = hf_config.get("tie_word_embeddings", True)
    config = dict(
        vocab_size=size(hf_config, "vocab_size", where),
        block_size=size(hf_config, "n_positions", where),
        n_layer=n_layer,
        n_head=size(hf_config, "n_head", where),
        n_embd=d,
        dropout=float(dropout),
        bias=True,
        tie_weights=bool(tied),
        eps=positive(hf_config, "layer_norm_epsilon", float, where, default=1e-5),
    )
    weights = {k if k.startswith(("transformer.", "lm_head.")) else f"transformer.{k}": w for k, w in weights.items()}
    weights = {k: w for k, w in weights.items() if k.split(".", 3)[-1] not in GPT2_BUFFERS}  # h.i.attn.bias
    check_layers(weights, "transformer.h.", n_layer, where)
    names = [f"transformer.{n}" for n in ("wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias")]
    for i in range(n_layer):
        h = f"transformer.h.{i}."
        names += [h + n for n in GPT2_BLOCK.values()] + [h + "attn.c_attn.weight", h + "attn.c_attn.bias"]
    check_names(weights, names, tied, where)
    state = {name: weights[f"transformer.{name}"] for name in ("wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias")}
    for i in range(n_layer):
        ours, theirs = f"blocks.{i}.", f"transformer.h.{i}."
        for name, hf_name in GPT2_BLOCK.items():
            w = weights[theirs + hf_name]
            state[ours + name] = w.T if w.ndim == 2 else w
        c_attn, c_bias = weights[theirs + "attn.c_attn.weight"], weights[theirs + "attn.c_attn.bias"]
        if c_attn.shape != (d, 3 * d) or c_bias.shape != (3 * d,):
            raise ValueError(
                f"{where}: {theirs}attn.c_attn has shapes {c_attn.shape} and {c_bias.shape}; "
                f"n_embd {d} needs ({d}, {3 * d}) and ({3 * d},)"
            )
        for x, w, b in zip("qkv", np.split(c_attn.T, 3), np.split(c_bias, 3)):
            state[f"{ours}attn.{x}_proj.weight"], state[f"{ours}attn.{x}_proj.bias"] = w, b
    state["lm_head.weight"] = head(weights, "transformer.wte.weight", tied, where)
    return config, state


# --- Llama <-> LlamaForCausalLM -------------------------------------------------------------------------


def llama_to_hf(state, config, context):
    """(Llama weights by Hugging Face name, its config.json) for a Llama's state dict and config (LlamaConfig's
    fields, RoPE in halves); `context` is max_position_embeddings, the longest context it is meant for.

    Hugging Face's attention_bias puts a bias on o_proj too: a Llama with q, k, v biases (Qwen2's) is
    written with a zero one there.
    """
    if config["rope_interleaved"]:
        raise ValueError("llama_to_hf: the q and k rows must be in halves order first (see halves_from_pairs)")
    block = LLAMA_BLOCK | (LLAMA_QKV_BIAS if config["qkv_bias"] else {})
    hf = {"model.embed_tokens.weight": state["embed_tokens.weight"], "model.norm.weight": state["norm.weight"]}
    for i in range(config["n_layer"]):
        for name, hf_name in block.items():
            hf[f"model.layers.{i}.{hf_name}"] = state[f"layers.{i}.{name}"]
        if config["qkv_bias"]:
            hf[f"model.layers.{i}.self_attn.o_proj.bias"] = np.zeros(config["d_model"], state["norm.weight"].dtype)
    if not config["tie_weights"]:
        hf["lm_head.weight"] = state["lm_head.weight"]
    hf = {name: np.ascontiguousarray(w) for name, w in hf.items()}
    head_dim = config["d_model"] // config["n_heads"]
    hf_config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": config["vocab_size"],
        "hidden_size": config["d_model"],
        "intermediate_size": config["d_ff"],
        "num_hidden_layers": config["n_layer"],
        "num_attention_heads": config["n_heads"],
        "num_key_value_heads": config["n_kv_heads"],
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": context,
        "rms_norm_eps": config["eps"],
        # transformers 4 reads rope_theta and rope_scaling, transformers 5 rope_parameters
        "rope_theta": config["rope_base"],
        "rope_scaling": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": config["rope_base"]},
        "attention_bias": config["qkv_bias"],
        "mlp_bias": False,
        "tie_word_embeddings": config["tie_weights"],
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": str(hf["model.embed_tokens.weight"].dtype),
    }
    return hf, hf_config


def llama_from_hf(weights, hf_config, where):
    """(LlamaConfig's fields, Llama state dict) for Hugging Face Llama weights and config.json; anything
    gradflow's Llama cannot compute (another activation, RoPE scaling, MLP biases) is refused."""
    if hf_config.get("model_type", "llama") != "llama":
        raise ValueError(f"{where}: config.json describes a {hf_config['model_type']!r} model, not 'llama'")
    if hf_config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{where}: hidden_act {hf_config['hidden_act']!r} is not supported; gradflow's Llama has silu")
    rope = hf_config.get("rope_parameters") or {}
    scaling = hf_config.get("rope_scaling")
    if scaling is not None or rope.get("rope_type", "default") != "default":
        raise ValueError(
            f"{where}: rope_scaling {scaling or rope!r} is not supported; gradflow's RoPE has no scaling "
            f"(rope_scaling null, rope_type 'default')"
        )
    if hf_config.get("mlp_bias", False):
        raise ValueError(f"{where}: mlp_bias = true is not supported; gradflow's Llama has no MLP biases")
    d, n_heads = size(hf_config, "hidden_size", where), size(hf_config, "num_attention_heads", where)
    n_layer = size(hf_config, "num_hidden_layers", where)
    head_dim = hf_config.get("head_dim") or d // n_heads
    if head_dim * n_heads != d:
        raise ValueError(
            f"{where}: head_dim {head_dim} x {n_heads} heads is not hidden_size {d}; gradflow's Llama has "
            f"head_dim = hidden_size / num_attention_heads"
        )
    size(hf_config, "max_position_embeddings", where, default=2048)  # RoPE itself has no limit: checked, not kept
    qkv_bias, tied = bool(hf_config.get("attention_bias", False)), bool(hf_config.get("tie_word_embeddings", False))
    config = dict(
        vocab_size=size(hf_config, "vocab_size", where),
        n_layer=n_layer,
        d_model=d,
        n_heads=n_heads,
        n_kv_heads=size(hf_config, "num_key_value_heads", where, default=n_heads),
        d_ff=size(hf_config, "intermediate_size", where),
        qkv_bias=qkv_bias,
        tie_weights=tied,
        rope_base=positive(rope | hf_config, "rope_theta", float, where, default=10000.0),
        eps=positive(hf_config, "rms_norm_eps", float, where, default=1e-6),
    )
    check_layers(weights, "model.layers.", n_layer, where)
    block = LLAMA_BLOCK | (LLAMA_QKV_BIAS if qkv_bias else {})
    o_bias = [f"model.layers.{i}.self_attn.o_proj.bias" for i in range(n_layer)] if qkv_bias else []
    names = ["model.embed_tokens.weight", "model.norm.weight", *o_bias]
    names += [f"model.layers.{i}.{hf_name}" for i in range(n_layer) for hf_name in block.values()]
    check_names(weights, names, tied, where)
    for name in o_bias:  # gradflow's Llama has q, k, v biases only: attention_bias loads if o_proj's are zero
        if np.any(weights[name]):
            raise ValueError(f"{where}: {name} is not zero; gradflow's Llama has biases on q, k and v only")
    state = {"embed_tokens.weight": weights["model.embed_tokens.weight"], "norm.weight": weights["model.norm.weight"]}
    for i in range(n_layer):
        for name, hf_name in block.items():
            state[f"layers.{i}.{name}"] = weights[f"model.layers.{i}.{hf_name}"]
    state["lm_head.weight"] = head(weights, "model.embed_tokens.weight", tied, where)
    return config, state


# --- shared by both ----------------------------------------------------------------------------------


def size(hf_config, key, where, default=None):
    """hf_config[key] as a positive int, or an error naming the key and the value."""
    return positive(hf_config, key, int, where, default)


def positive(hf_config, key, kind, where, default=None):
    """hf_config[key] (or `default` when absent) as a positive `kind`, int or float, or an error naming both."""
    value = hf_config.get(key, default)
    if value is None:
        raise ValueError(f"{where}: config.json lacks {key}")
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
    if not number or value <= 0 or value != kind(value):
        raise ValueError(f"{where}: config.json's {key} must be a positive {kind.__name__}, got {value!r}")
    return kind(value)


def check_layers(weights, prefix, n_layer, where):
    """The weights hold blocks 0 .. n_layer - 1, checked before a model of n_layer blocks is built."""
    blocks = {name[len(prefix) :].split(".")[0] for name in weights if name.startswith(prefix)}
    if len(blocks) != n_layer or blocks != {str(i) for i in range(n_layer)}:  # counted first: n_layer may be 10^9
        raise ValueError(f"{where}: config.json says {n_layer} layers but the weights hold {len(blocks)}")


def check_names(weights, names, tied, where):
    """Every weight the model needs is there, and nothing else: a weight left over would be silently dropped."""
    names = names if tied else [*names, "lm_head.weight"]
    missing = [n for n in names if n not in weights]
    if missing:
        more = f" and {len(missing) - 1} more" if missing[1:] else ""
        raise ValueError(f"{where}: the weights lack {missing[0]}{more}")
    unexpected = sorted(set(weights) - set(names) - {"lm_head.weight"})  # a tied head saved anyway: see `head`
    if unexpected:
        more = f" and {len(unexpected) - 1} more" if unexpected[1:] else ""
        raise ValueError(f"{where}: the weights hold {unexpected[0]}{more}, which the model has no place for")


def head(weights, embedding, tied, where):
    """The output matrix: the embedding when tied (a saved lm_head.weight must then equal it), else lm_head.weight."""
    if not tied:
        return weights["lm_head.weight"]
    if "lm_head.weight" in weights and not np.array_equal(weights["lm_head.weight"], weights[embedding]):
        raise ValueError(f"{where}: tie_word_embeddings is true but lm_head.weight differs from {embedding}")
    return weights[embedding]


def load(cls, config_cls, from_hf, source, config, dtype):
    """cls(config_cls(...)) holding the weights that from_hf (gpt_from_hf or llama_from_hf) maps from `source`.

    The model is built shape-only, then each weight is put in (cast to dtype); it is returned in
    eval mode. Every error starts with the method and the source: `GPT.from_hf: <folder>: ...`.
    """
    where = f"{cls.__name__}.from_hf: {'a dict of weights' if isinstance(source, dict) else source}"
    fields, state = from_hf(*read_hf(source, config, where), where)
    try:
        with nn.init.meta():
            model = cls(config_cls(**fields), dtype=dtype)
    except ValueError as err:  # sizes that do not fit together, such as heads that do not divide the width
        raise ValueError(f"{where}: its sizes do not make a model: {err}") from None
    # GPT-2's matrices arrive transposed: stored in row order, they multiply as the model's own do, to the bit
    state = {name: np.ascontiguousarray(w) for name, w in state.items()}
    try:
        model.load_state_dict(state)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    return model.eval()


# --- files ---------------------------------------------------------------------------------------------


def read_hf(source, config=None, where="from_hf"):
    """(weights by name as numpy arrays, config.json as a dict) from a model folder, or from a dict of arrays
    and `config` (the dict that config.json holds); `config` also replaces a folder's config.json."""
    if isinstance(source, dict):
        if not isinstance(config, dict):
            raise ValueError(f"{where}: with a dict of weights, pass config=, the dict config.json holds")
        return {name: np.asarray(w) for name, w in source.items()}, config
    folder = Path(source)
    index = folder / "model.safetensors.index.json"
    if folder.is_dir() and not index.exists() and not (folder / "model.safetensors").exists():
        if any(folder.glob("*.bin")):
            folder = next(folder.glob("*.bin"))
        else:
            raise FileNotFoundError(f"{where}: {folder} holds no model.safetensors")
    if folder.suffix == ".bin":
        raise ValueError(
            f"{where}: {folder} is PyTorch pickle weights, which gradflow never opens (loading a pickle runs code); "
            f"convert them to safetensors first (transformers' save_pretrained writes model.safetensors)"
        )
    if not folder.is_dir():
        raise FileNotFoundError(f"{where}: {folder} is not a folder holding config.json and model.safetensors")
    if config is None:
        config = read_json(folder / "config.json", where)
    if index.exists():
        shards = read_json(index, where).get("weight_map")
        if not isinstance(shards, dict):
            raise ValueError(f"{where}: {index} has no weight_map")
        files = sorted(set(shards.values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for name in files:
        if not isinstance(name, str) or Path(name).name != name:  # a shard lives in the folder, nowhere else
            raise ValueError(f"{where}: {index} names the shard {name!r}, which is not a file name")
        path = folder / name
        if not path.exists():
            raise FileNotFoundError(f"{where}: {path} does not exist")
        weights |= read_safetensors(path, where)
    return weights, config


def read_json(path, where):
    if not path.exists():
        raise FileNotFoundError(f"{where}: {path} does not exist")
    try:
        d = bounded_json.read(path, "it")
    except ValueError as err:  # too large, not UTF-8, not JSON, or nested too deep
        raise ValueError(f"{where}: {path} is not JSON gradflow reads: {err}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{where}: {path} is not a JSON object")
    return d


def read_safetensors(path, where):
    """The arrays of a safetensors file; bfloat16 ones widened to float32 (numpy has no bfloat16)."""
    try:
        with safe_open(path, framework="np") as f:
            names = list(f.keys())
            check_dtypes(f, NUMPY_DTYPES | {"BF16"})
            kinds = {name: f.get_slice(name).get_dtype() for name in names}
            arrays = {name: f.get_tensor(name) for name in names if kinds[name] != "BF16"}
    except (SafetensorError, OSError, TypeError, ValueError) as err:  # damaged, not safetensors, or a dtype numpy lacks
        raise ValueError(f"{where}: {path} is not a readable safetensors file: {err}") from None
    bf16 = [name for name in names if kinds[name] == "BF16"]
    return arrays | (bfloat16_arrays(path, bf16) if bf16 else {})


def bfloat16_arrays(path, names):
    """bfloat16 tensors as float32: a bfloat16 is the top 16 bits of the float32 of the same value, so
    widening is exact (bits << 16). Where each tensor lies comes from the file's layout: 8 bytes giving
    the header's length n, n bytes of JSON header ({name: {dtype, shape, data_offsets}}), then the data."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = bounded_json.loads(f.read(n), "its header")  # safe_open read it already: it is whole
    arrays = {}
    for name in names:
        start, end = header[name]["data_offsets"]
        bits = np.fromfile(path, dtype="<u2", count=(end - start) // 2, offset=8 + n + start)
        arrays[name] = (bits.astype(np.uint32) << 16).view(np.float32).reshape(header[name]["shape"])
    return arrays


def write_hf(folder, weights, hf_config, files=None):
    """model.safetensors and config.json in `folder`, what transformers' from_pretrained reads, and `files`
    ({name: JSON object}: the tokenizer's, say) beside them."""
    folder = Path(folder)
    with written_atomically(folder / "model.safetensors") as tmp:  # never through a link (files.py)
        try:
            save_file(weights, tmp, metadata=SAFETENSORS_METADATA)
        except SafetensorError as err:  # a full disk: an OSError, so that it is one line naming the file
            code = re.search(r"os error (\d+)", str(err))
            raise OSError(int(code[1]), os.strerror(int(code[1]))) if code else OSError(str(err)) from None
    for name, d in {"config.json": hf_config, **(files or {})}.items():
        write_atomically(folder / name, json.dumps(d, indent=2) + "\n")
