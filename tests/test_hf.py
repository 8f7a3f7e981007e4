"""GPT and Llama to and from Hugging Face checkpoints (models/hf.py), and `gradflow export`.

The mapping tests need only numpy. The parity tests load what gradflow writes into transformers'
GPT2LMHeadModel and LlamaForCausalLM, and what transformers writes into gradflow, and compare the
logits; they run where transformers and torch are installed (pip install torch==2.13.0
transformers==5.23.0) and are skipped otherwise, unless GRADFLOW_REQUIRE_TORCH=1 (CI) makes a
missing package a failure.
"""

import importlib
import json
import os
from dataclasses import asdict

import numpy as np
import pytest
from safetensors.numpy import save_file

import gradflow as gf
from gradflow.cli import main
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.hf import write_hf
from gradflow.models.llama import Llama, LlamaConfig, halves_from_pairs
from gradflow.text import BPETokenizer, CharTokenizer, PretrainedBPETokenizer, default_corpus, load_tokenizer
from gradflow.text.bpe import FIRST_SPLIT_PATTERN
from gradflow.text.hf_tokenizer import hf_tokenizer_files
from gradflow.training.checkpoint import load_checkpoint, save_checkpoint

VOCAB = 37
IDS = np.random.default_rng(0).integers(0, VOCAB, (2, 9))
MODELS = {
    "gpt, bias=False, tied": (GPT, GPTConfig(VOCAB, block_size=16, n_layer=2, n_head=2, n_embd=8, bias=False)),
    "gpt, biases, untied": (GPT, GPTConfig(VOCAB, block_size=16, n_layer=2, n_head=2, n_embd=8, tie_weights=False)),
    "llama, GQA, tied": (Llama, LlamaConfig(VOCAB, n_layer=2, d_model=16, n_heads=4, n_kv_heads=2, d_ff=24)),
    "llama, untied": (Llama, LlamaConfig(VOCAB, n_layer=2, d_model=16, n_heads=4, n_kv_heads=1, d_ff=24,
                                         tie_weights=False, rope_base=500.0, eps=1e-6)),
    "llama, interleaved RoPE, qkv biases": (Llama, LlamaConfig(VOCAB, n_layer=1, d_model=16, n_heads=2, n_kv_heads=1,
                                                              d_ff=24, qkv_bias=True, rope_interleaved=True)),
}  # fmt: skip


def random_model(name, dtype=np.float64, seed=0):
    """The model MODELS[name] with every weight N(0, 0.3^2), biases too, so that no term is zero by chance."""
    cls, config = MODELS[name]
    model = cls(config, dtype=dtype).eval()
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data = (0.3 * rng.standard_normal(p.shape)).astype(dtype)
    return model


def logits_of(model, ids=IDS):
    with gf.no_grad():
        return model(ids)[0].data


# --- the mapping, in numpy --------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_the_round_trip_through_hugging_face_names_is_exact(name):
    model = random_model(name)
    weights, config = model.to_hf()
    back = type(model).from_hf(weights, config=config, dtype=np.float64)
    ours, theirs = model.state_dict(), back.state_dict()
    if getattr(model.config, "rope_interleaved", False):  # from_hf gives RoPE in halves: other q/k rows, same logits
        assert not back.config.rope_interleaved
        np.testing.assert_allclose(logits_of(back), logits_of(model), rtol=0, atol=1e-12)
        return
    for n, w in ours.items():
        assert np.array_equal(theirs[n], w), n
    extra = set(theirs) - set(ours)  # bias=False: the biases GPT-2 always has, zero
    assert bool(extra) == (isinstance(model, GPT) and not model.config.bias)
    assert all(n.endswith(".bias") and not theirs[n].any() for n in extra)
    assert np.array_equal(logits_of(back), logits_of(model))


def test_gpt_names_shapes_and_the_conv1d_layout():
    model = random_model("gpt, biases, untied")
    s, (w, config) = model.state_dict(), model.to_hf()
    d = 8
    per_block = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                 "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                 "mlp.c_proj.weight", "mlp.c_proj.bias"]  # fmt: skip
    expected = {f"transformer.h.{i}.{n}" for i in range(2) for n in per_block}
    expected |= {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight"}
    assert set(w) == expected | {"transformer.ln_f.bias", "lm_head.weight"}  # every key accounted for
    c_attn = w["transformer.h.1.attn.c_attn.weight"]
    assert c_attn.shape == (d, 3 * d) and w["transformer.h.1.mlp.c_fc.weight"].shape == (d, 4 * d)
    q, k, v = (s[f"blocks.1.attn.{x}_proj.weight"] for x in "qkv")  # (out, in) each
    assert np.array_equal(c_attn[:, :d], q.T) and np.array_equal(c_attn[:, d : 2 * d], k.T)
    assert np.array_equal(c_attn[:, 2 * d :], v.T)
    assert np.array_equal(w["transformer.h.1.attn.c_attn.bias"][d : 2 * d], s["blocks.1.attn.k_proj.bias"])
    assert np.array_equal(w["transformer.h.0.mlp.c_proj.weight"], s["blocks.0.ffn.fc2.weight"].T)
    assert (config["activation_function"], config["tie_word_embeddings"], config["n_positions"]) == (
        "gelu_new",
        False,
        16,
    )
    assert "lm_head.weight" not in random_model("gpt, bias=False, tied").to_hf()[0]  # tied: saved once, as wte


def test_llama_names_gqa_shapes_and_the_rope_rows():
    model = random_model("llama, interleaved RoPE, qkv biases")
    s, (w, config) = model.state_dict(), model.to_hf(context=64)
    names = {f"model.layers.0.{n}" for n in ["input_layernorm.weight", "post_attention_layernorm.weight"]}
    names |= {f"model.layers.0.self_attn.{x}_proj.{p}" for x in "qkvo" for p in ("weight", "bias")}
    names |= {f"model.layers.0.mlp.{x}_proj.weight" for x in ("gate", "up", "down")}
    assert set(w) == names | {"model.embed_tokens.weight", "model.norm.weight"}
    assert w["model.layers.0.self_attn.k_proj.weight"].shape == (8, 16)  # one kv head of 8
    assert not w["model.layers.0.self_attn.o_proj.bias"].any()  # attention_bias's o_proj bias: zero
    # an interleaved model's q and k rows go into halves order, per head; v's stay
    q, bq = s["layers.0.attn.q_proj.weight"], s["layers.0.attn.q_proj.bias"]
    assert np.array_equal(w["model.layers.0.self_attn.q_proj.weight"], halves_from_pairs(q, 2))
    assert np.array_equal(w["model.layers.0.self_attn.q_proj.bias"], halves_from_pairs(bq[:, None], 2)[:, 0])
    assert np.array_equal(w["model.layers.0.self_attn.k_proj.weight"][4], s["layers.0.attn.k_proj.weight"][1])
    assert np.array_equal(w["model.layers.0.self_attn.v_proj.weight"], s["layers.0.attn.v_proj.weight"])
    assert config["max_position_embeddings"] == 64 and config["attention_bias"] and config["tie_word_embeddings"]
    assert config["rope_parameters"] == {"rope_type": "default", "rope_theta": 10000.0} and config["head_dim"] == 8


def test_a_folder_of_shards_loads(tmp_path):
    model = random_model("llama, untied")
    weights, config = model.to_hf()
    names = sorted(weights)
    shards = {"model-00001-of-00002.safetensors": names[:7], "model-00002-of-00002.safetensors": names[7:]}
    for file, part in shards.items():
        save_file({n: weights[n] for n in part}, tmp_path / file, metadata={"format": "pt"})
    index = {"weight_map": {n: file for file, part in shards.items() for n in part}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert np.array_equal(logits_of(Llama.from_hf(tmp_path, dtype=np.float64)), logits_of(model))


def test_the_names_of_openais_gpt2_file_load_too():
    """The GPT-2 weights on the Hub name them without "transformer." and hold each block's causal mask, attn.bias."""
    model = random_model("gpt, bias=False, tied")
    weights, config = model.to_hf()
    weights = {name.removeprefix("transformer."): w for name, w in weights.items()}
    weights |= {f"h.{i}.attn.bias": np.tril(np.ones((1, 1, 16, 16))) for i in range(2)}
    assert np.array_equal(logits_of(GPT.from_hf(weights, config, dtype=np.float64)), logits_of(model))


def gpt_hf(**change):
    weights, config = random_model("gpt, biases, untied").to_hf()
    return weights, config | change


def llama_hf(**change):
    weights, config = random_model("llama, GQA, tied").to_hf()
    return weights, config | change


@pytest.mark.parametrize(
    "load, message",
    [
        (lambda: GPT.from_hf(*gpt_hf(activation_function="relu")), "activation_function 'relu' is not one"),
        (lambda: GPT.from_hf(*gpt_hf(n_inner=16)), "n_inner = 16; its MLP must be 4 n_embd = 32 wide"),
        (lambda: GPT.from_hf(*gpt_hf(n_layer=3)), "config.json says 3 layers but the weights hold 2"),
        (lambda: GPT.from_hf(*gpt_hf(model_type="llama")), "describes a 'llama' model, not 'gpt2'"),
        (lambda: GPT.from_hf(gpt_hf()[0]), "with a dict of weights, pass config="),
        (lambda: GPT.from_hf(*gpt_hf(embd_pdrop=0.5)), "embd_pdrop, attn_pdrop and resid_pdrop differ"),
        (lambda: Llama.from_hf(*llama_hf(rope_scaling={"rope_type": "linear", "factor": 2.0})), "rope_scaling {'rope"),
        (lambda: Llama.from_hf(*llama_hf(rope_parameters={"rope_type": "yarn"})), "rope_scaling {'rope_type': 'yarn'"),
        (lambda: Llama.from_hf(*llama_hf(hidden_act="gelu")), "hidden_act 'gelu' is not supported"),
        (lambda: Llama.from_hf(*llama_hf(head_dim=8)), "head_dim 8 x 4 heads is not hidden_size 16"),
        (lambda: Llama.from_hf(*llama_hf(num_key_value_heads=3)), "its sizes do not make a model"),
        (lambda: Llama.from_hf(*llama_hf(vocab_size=0)), "vocab_size must be a positive int, got 0"),
        (lambda: Llama.from_hf(*llama_hf(tie_word_embeddings=False)), "the weights lack lm_head.weight"),
        (lambda: Llama.from_hf(*llama_hf(attention_bias=True)), "lack model.layers.0.self_attn.o_proj.bias and 7 more"),
    ],
)
def test_what_gradflow_cannot_compute_is_refused_in_one_line(load, message):
    with pytest.raises(ValueError) as e:
        load()
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith(("GPT.from_hf: a dict of weights: ", "Llama.from_hf: a dict of weights: "))


def test_a_stray_weight_or_a_nonzero_o_bias_is_refused():
    weights, config = llama_hf()
    with pytest.raises(ValueError, match=r"hold model.extra.weight, which the model has no place for"):
        Llama.from_hf(weights | {"model.extra.weight": np.zeros(3)}, config)
    weights, config = random_model("llama, interleaved RoPE, qkv biases").to_hf()
    weights["model.layers.0.self_attn.o_proj.bias"] = np.ones(16)
    with pytest.raises(ValueError, match=r"o_proj.bias is not zero; gradflow's Llama has biases on q, k and v only"):
        Llama.from_hf(weights, config)


def test_pickle_weights_are_never_opened(tmp_path):
    weights, config = gpt_hf()
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "pytorch_model.bin").write_bytes(b"not to be unpickled")
    for source in (tmp_path, tmp_path / "pytorch_model.bin"):
        with pytest.raises(
            ValueError, match=r"pytorch_model.bin is PyTorch pickle weights.*convert them to safetensors"
        ):
            GPT.from_hf(source)
    with pytest.raises(FileNotFoundError, match=r"holds no model.safetensors"):
        GPT.from_hf(tmp_path.parent)


# --- gradflow export --------------------------------------------------------------------------------


def train(tmp_path, *flags):
    data = tmp_path / "tiny.txt"
    data.write_text("to be or not to be, that is the question: 42. " * 20)
    argv = ["train", "--data", str(data), "--max-iters", "2", "--eval-iters", "1", "--sample-tokens", "0"]
    argv += ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "8", "--batch-size", "2"]
    assert main([*argv, *flags, "--out-dir", str(tmp_path / "run")]) == 0
    return tmp_path / "run"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A GPT trained for two steps, for the tests that only read it."""
    return train(tmp_path_factory.mktemp("trained"))


def exit_code(argv):
    """main(argv)'s exit code, also when argparse exits on a bad flag."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--checkpoint", "/no/such/dir", "--to", "hf", "{out}"], "gradflow export: checkpoint /no/such/dir"),
        (["--checkpoint", "{run}", "--to", "hf", "{run}"], "gradflow export: {run} is a run's folder; "),
        (["--checkpoint", "{run}", "--to", "hf", "{file}"], "gradflow export: {file} is a file"),
        (["--checkpoint", "{run}", "--to", "onnx", "{out}"], "gradflow export: argument --to: invalid choice"),
        (["--checkpoint", "{run}", "{out}"], "gradflow export: the following arguments are required: --to"),
    ],
)
def test_bad_export_input_is_one_line(argv, message, trained, tmp_path, capsys):
    (tmp_path / "f.txt").write_text("")
    paths = {"{out}": str(tmp_path / "out"), "{run}": str(trained), "{file}": str(tmp_path / "f.txt")}
    for key, value in paths.items():
        argv, message = [a.replace(key, value) for a in argv], message.replace(key, value)
    capsys.readouterr()
    assert exit_code(["export", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and load_checkpoint(trained)  # nothing written, the run untouched


def test_export_has_help(capsys):
    assert exit_code(["export", "--help"]) == 0
    assert "usage: gradflow export" in capsys.readouterr().out


def test_export_replaces_a_folder_only_with_force_and_leaves_no_temporaries(trained, tmp_path, capsys):
    run, out = trained, tmp_path / "out"
    assert main(["export", "--checkpoint", str(run), "--to", "hf", str(out)]) == 0
    (out / "config.json").write_text("{}")  # an earlier export's file, changed: kept, --force or not
    assert main(["export", "--checkpoint", str(run), "--to", "hf", str(out)]) == 2
    assert main(["export", "--checkpoint", str(run), "--to", "hf", str(out), "--force"]) == 2
    assert (out / "config.json").read_text() == "{}"
    (out / "config.json").unlink()  # what is left is the export as it was written
    assert main(["export", "--checkpoint", str(run), "--to", "hf", str(out), "--force"]) == 0
    written = {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "gradflow_export.json"}
    assert {p.name for p in out.iterdir()} == written
    assert (out / "config.json").read_text() != "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert "exported a gpt of" in capsys.readouterr().out


def test_a_tokenizer_json_cannot_express_is_written_as_gradflows_own(trained, tmp_path, capsys):
    tokenizer = BPETokenizer(BPETokenizer.train(default_corpus()[:3000], 256 + 20).merges, FIRST_SPLIT_PATTERN)
    with pytest.raises(ValueError, match=r"split pattern .* is not GPT-2's"):
        hf_tokenizer_files(tokenizer)
    meta = load_checkpoint(trained).meta
    config = GPTConfig(**{**meta["model"]["config"], "vocab_size": tokenizer.vocab_size})
    meta = {**meta, "model": {"type": "gpt", "config": asdict(config)}, "tokenizer": tokenizer.to_dict()}
    save_checkpoint(tmp_path / "run" / "ckpt.npz", GPT(config), meta=meta)
    out = tmp_path / "out"  # beside the run: an export is never written inside one
    assert main(["export", "--checkpoint", str(tmp_path / "run"), "--to", "hf", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "tokenizer not exported: its split pattern" in printed
    assert f"gradflow's own vocabulary is in {out}/gradflow_tokenizer.json" in printed
    assert load_tokenizer(out / "gradflow_tokenizer.json") == tokenizer
    assert not (out / "tokenizer.json").exists()


# --- parity with transformers -----------------------------------------------------------------------


def require(name):
    """The package, or a skip where it is not installed (a failure when GRADFLOW_REQUIRE_TORCH=1)."""
    if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
        return importlib.import_module(name)
    return pytest.importorskip(name)


@pytest.fixture(scope="module")
def torch():
    return require("torch")


@pytest.fixture(scope="module")
def transformers(torch):
    transformers = require("transformers")
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers


def torch_logits(torch, hf_model, ids=IDS):
    with torch.no_grad():
        return hf_model(torch.tensor(ids)).logits.numpy()


DTYPES = {"float32": (np.float32, 1e-5), "float64": (np.float64, 1e-6)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", MODELS)
def test_transformers_computes_gradflows_logits_from_the_exported_folder(name, dtype, tmp_path, torch, transformers):
    np_dtype, atol = DTYPES[dtype]
    model = random_model(name, np_dtype)
    write_hf(tmp_path, *model.to_hf())
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=getattr(torch, dtype)).eval()
    assert type(hf_model).__name__ == ("GPT2LMHeadModel" if isinstance(model, GPT) else "LlamaForCausalLM")
    # transformers' Llama computes RoPE's angles and RMSNorm in float32 even in float64: 1e-6, not 1e-12
    atol = 1e-12 if isinstance(model, GPT) and dtype == "float64" else atol
    np.testing.assert_allclose(torch_logits(torch, hf_model), logits_of(model), rtol=0, atol=atol)


def perturbed(torch, hf_model, seed=0):
    """transformers' model with every weight moved by N(0, 0.2^2): its own init has tiny logits and unit norms."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in hf_model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return hf_model.eval()


def hf_models(transformers):
    small = dict(vocab_size=VOCAB, bos_token_id=None, eos_token_id=None)
    gpt = transformers.GPT2Config(n_positions=16, n_embd=8, n_layer=2, n_head=2, **small)
    llama = dict(hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4, **small)
    return {
        "gpt2": (GPT, transformers.GPT2LMHeadModel(gpt)),
        "gpt2 untied, gelu_pytorch_tanh": (
            GPT,
            transformers.GPT2LMHeadModel(
                transformers.GPT2Config(
                    n_positions=16, n_embd=8, n_layer=1, n_head=2, activation_function="gelu_pytorch_tanh",
                    tie_word_embeddings=False, layer_norm_epsilon=1e-6, **small,
                )
            ),
        ),
        "llama GQA tied": (
            Llama,
            transformers.LlamaForCausalLM(
                transformers.LlamaConfig(num_key_value_heads=2, tie_word_embeddings=True, rope_theta=300.0, **llama)
            ),
        ),
        "llama untied": (Llama, transformers.LlamaForCausalLM(transformers.LlamaConfig(**llama))),
    }  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradflow_computes_transformers_logits_from_its_saved_folder(dtype, tmp_path, torch, transformers):
    np_dtype, atol = DTYPES[dtype]
    torch.manual_seed(0)
    for i, (name, (cls, hf_model)) in enumerate(hf_models(transformers).items()):
        hf_model = perturbed(torch, hf_model.to(getattr(torch, dtype)))
        hf_model.save_pretrained(tmp_path / str(i))  # safetensors
        model = cls.from_hf(tmp_path / str(i), dtype=np_dtype)
        assert model.config.tie_weights == hf_model.config.tie_word_embeddings, name
        tolerance = 1e-12 if cls is GPT and dtype == "float64" else atol
        np.testing.assert_allclose(
            logits_of(model), torch_logits(torch, hf_model), rtol=0, atol=tolerance, err_msg=name
        )


def test_bfloat16_and_sharded_folders_load(tmp_path, torch, transformers):
    _, hf_model = hf_models(transformers)["llama GQA tied"]
    hf_model = perturbed(torch, hf_model).to(torch.bfloat16)
    hf_model.save_pretrained(tmp_path, max_shard_size="4KB")
    assert (tmp_path / "model.safetensors.index.json").exists() and len(list(tmp_path.glob("*.safetensors"))) > 1
    model = Llama.from_hf(tmp_path)  # bfloat16 widened to float32, exactly
    weights, _ = model.to_hf()
    saved = {name: p for name, p in hf_model.state_dict().items() if name != "lm_head.weight"}  # tied
    assert set(weights) == set(saved)
    for name, p in saved.items():
        assert weights[name].dtype == np.float32 and np.array_equal(weights[name], p.float().numpy()), name


def check_tokenizer(transformers, folder, tokenizer, text):
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    ids = hf_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids == tokenizer.encode(text).tolist()
    assert hf_tokenizer.decode(ids) == text


def test_every_tokenizer_gradflow_trains_reads_back_in_transformers(tmp_path, transformers):
    text = default_corpus()[:20000]
    probe = text[-3000:] + " naïve café 2024-11-21 x=1;y=22  \n\n\t it's they'VE gone 😀👍🏽"
    bpe = BPETokenizer.train(text, 256 + 200)
    vocab = hf_tokenizer_files(bpe)["tokenizer.json"]["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    pretrained = PretrainedBPETokenizer(
        ["<|endoftext|>", *tokens], [f"{tokens[a]} {tokens[b]}" for a, b in bpe.merges], control=[0], split_digits=True
    )
    for i, (tokenizer, sample) in enumerate(
        [(CharTokenizer(probe), probe), (bpe, probe), (BPETokenizer.train(text, 300, pattern=None), probe),
         (pretrained, "<|endoftext|>" + probe + "<|endoftext|>")]
    ):  # fmt: skip
        folder = tmp_path / str(i)
        folder.mkdir()
        for file, d in hf_tokenizer_files(tokenizer).items():
            (folder / file).write_text(json.dumps(d))
        check_tokenizer(transformers, folder, tokenizer, sample)


@pytest.mark.parametrize("flags", [["--model", "gpt"], ["--model", "llama", "--n-kv-head", "1", "--tokenizer", "bpe"]])
def test_a_trained_model_exported_from_the_shell_runs_in_transformers(flags, tmp_path, capsys, torch, transformers):
    run, out = train(tmp_path, *flags), tmp_path / "exported"
    assert main(["export", "--checkpoint", str(run), "--to", "hf", str(out)]) == 0
    assert "load it with transformers" in capsys.readouterr().out
    ckpt = load_checkpoint(run)
    cls, config = (GPT, GPTConfig) if flags[1] == "gpt" else (Llama, LlamaConfig)
    model = cls(config(**ckpt.meta["model"]["config"])).eval()
    ckpt.restore(model)
    tokenizer = load_tokenizer(ckpt.meta["tokenizer"])
    ids = tokenizer.encode("to be or not to")[None, :8]
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    np.testing.assert_allclose(torch_logits(torch, hf_model, ids), logits_of(model, ids), rtol=0, atol=1e-5)
    check_tokenizer(transformers, out, tokenizer, "that is the question: 42.")
