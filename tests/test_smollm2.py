"""SmolLM2-135M-Instruct on gradflow's layers, checked against Hugging Face transformers (tests/fixtures/smollm2).

The model file (98 MB) is fetched once into ~/.cache/gradflow (or $GRADFLOW_CACHE). The fixture was
written by tests/fixtures/smollm2/make_fixture.py: transformers on torch 2.13.0 loading the same
file, an implementation that shares no code with gradflow's.
"""

import io
import json
from pathlib import Path

import numpy as np
import pytest

import gradflow as gf
from gradflow.cli import main
from gradflow.inference.chat import SMOLLM2_SYSTEM, Chat, chatml
from gradflow.inference.generate import generate
from gradflow.models.llama import Llama, from_gguf, halves_from_pairs, smollm2_135m, smollm2_instruct
from gradflow.models.trace import trace
from gradflow.pretrained import (
    GGUFFile,
    dequantize_q4_1,
    dequantize_q8_0,
    quantize_q4_1,
    quantize_q8_0,
    smollm2_path,
)
from gradflow.text import PretrainedBPETokenizer, load_tokenizer

FIXTURE = Path(__file__).parent / "fixtures" / "smollm2"
EXPECTED = json.loads((FIXTURE / "tokens.json").read_text(encoding="utf-8"))
LOGITS = np.load(FIXTURE / "logits.npz")["logits"]
PROMPTS = list(EXPECTED["prompts"].items())


@pytest.fixture(scope="module")
def gguf():
    return GGUFFile(smollm2_path(verify=True))


@pytest.fixture(scope="module")
def smollm2():
    return smollm2_instruct()


def last_logits(model, ids):
    with gf.no_grad():
        logits, _ = model(np.array([ids]))
    assert logits.dtype == np.float32  # nothing promoted to float64 on the way
    return logits.data[0, -1]


# --- the file: metadata and block quantization ------------------------------------------------------


def test_the_file_describes_smollm2_135m(gguf):
    m = gguf.metadata
    assert m["general.architecture"] == "llama"
    assert (m["llama.block_count"], m["llama.embedding_length"], m["llama.feed_forward_length"]) == (30, 576, 1536)
    assert (m["llama.attention.head_count"], m["llama.attention.head_count_kv"]) == (9, 3)
    assert m["llama.rope.freq_base"] == 100000.0
    kinds = {gguf.kind(n) for n in gguf.tensors}
    assert kinds == {"Q4_1", "Q8_0", "F32"}
    assert gguf.kind("token_embd.weight") == "Q8_0" and gguf.kind("blk.0.attn_q.weight") == "Q4_1"
    assert gguf.shape("blk.0.ffn_down.weight") == (576, 1536)  # (out, in), as Linear stores it
    assert "output.weight" not in gguf.tensors  # tied head


@pytest.mark.parametrize(
    "name", ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.29.attn_v.weight"]
)
def test_dequantization_is_bit_identical_to_the_gguf_package(gguf, name):
    from gguf import quants

    t = gguf.tensor(name)
    ours = gguf.array(name)
    theirs = quants.dequantize(t.data, t.tensor_type)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def test_f32_tensors_are_copied_out_of_the_mapped_file(gguf):
    w = gguf.array("blk.0.attn_norm.weight")
    assert w.flags.writeable and w.dtype == np.float32
    assert not np.shares_memory(w, gguf.tensor("blk.0.attn_norm.weight").data)


def test_dequantization_by_hand():
    """One Q4_1 block: d = 0.5, m = -1, q_j = j mod 16, so w_j = 0.5 (j mod 16) - 1; one Q8_0 block: w = 0.25 q."""
    q = np.arange(32) % 16
    block = np.concatenate(
        [np.array([0.5, -1.0], np.float16).view(np.uint8), (q[:16] | (q[16:] << 4)).astype(np.uint8)]
    )
    assert np.array_equal(dequantize_q4_1(block[None]), (0.5 * q - 1)[None].astype(np.float32))
    q8 = np.arange(-16, 16, dtype=np.int8)
    block8 = np.concatenate([np.array([0.25], np.float16).view(np.uint8), q8.view(np.uint8)])
    assert np.array_equal(dequantize_q8_0(block8[None]), (0.25 * q8)[None].astype(np.float32))


def test_quantization_matches_the_gguf_package_and_errs_at_most_half_a_step():
    from gguf import GGMLQuantizationType, quants

    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 128)).astype(np.float32)
    w[0] = 0.0  # an all-zero block: scale 0
    w[1, :32] = 3.0  # a constant block
    w[2, 5] = 40.0  # an outlier costs precision only in its own block
    for quantize, dequantize, kind, levels in [
        (quantize_q8_0, dequantize_q8_0, GGMLQuantizationType.Q8_0, 254),
        (quantize_q4_1, dequantize_q4_1, GGMLQuantizationType.Q4_1, 15),
    ]:
        packed = quantize(w)
        assert np.array_equal(packed, quants.quantize(w, kind))
        blocks = w.reshape(6, 4, 32)
        step = (blocks.max(-1) - blocks.min(-1)) / levels if levels == 15 else np.abs(blocks).max(-1) / 127
        err = np.abs(dequantize(packed) - w).reshape(6, 4, 32).max(-1)
        assert np.all(err <= 0.5 * step * 1.01 + 1e-3 * np.abs(blocks).max(-1))  # half a step, plus float16 scales
        assert err[2, 1:].max() < err[2, 0] / 5  # the outlier's block only


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: dequantize_q4_1(np.zeros((2, 21), np.uint8)), r"dequantize_q4_1: expected uint8 rows of 20-byte"),
        (lambda: dequantize_q8_0(np.zeros((2, 34), np.float32)), r"dequantize_q8_0: .* dtype float32"),
        (lambda: quantize_q4_1(np.zeros((2, 33))), r"quantize_q4_1: .* blocks of 32, got shape \(2, 33\)"),
    ],
)
def test_bad_quantized_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- the tokenizer ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer(smollm2):
    return smollm2[1]


@pytest.mark.parametrize("text", list(EXPECTED["tricky"]) + list(EXPECTED["prompts"]))
def test_token_ids_match_the_fixture(tokenizer, text):
    expected = EXPECTED["tricky"].get(text, EXPECTED["prompts"].get(text))
    ids = tokenizer.encode(text)
    assert ids.tolist() == expected
    if "\x04" not in text:  # a byte the vocabulary lacks is dropped, as the reference does
        assert tokenizer.decode(ids) == text


def test_control_tokens_digits_and_the_pre_tokenizer(tokenizer):
    assert tokenizer.encode("<|im_start|>user").tolist() == [1, 4093]
    assert tokenizer.encode("<|im_start").tolist() != [1]  # only the whole control token counts
    assert [tokenizer.decode([i]) for i in tokenizer.encode("2024")] == ["2", "0", "2", "4"]
    assert tokenizer.split_digits and tokenizer.vocab_size == 49152
    assert tokenizer.chunks("it's 42!", "t") == ["it", "'s", " ", "4", "2", "!"]


def test_tokenizer_survives_its_dict(tokenizer):
    again = load_tokenizer(json.loads(json.dumps(tokenizer.to_dict())))
    assert isinstance(again, PretrainedBPETokenizer) and again == tokenizer
    assert again.encode("naïve café 😀 <|im_end|>").tolist() == tokenizer.encode("naïve café 😀 <|im_end|>").tolist()


def test_a_merge_of_unknown_tokens_is_a_clear_error():
    with pytest.raises(ValueError, match=r"^PretrainedBPETokenizer: merges\[1\] 'abx c' is not two earlier tokens$"):
        PretrainedBPETokenizer(["a", "b", "c", "ab"], ["a b", "abx c"])


# --- the model --------------------------------------------------------------------------------------


def test_the_loaded_model_is_smollm2_135m(smollm2):
    model, _ = smollm2
    assert model.num_parameters() == Llama.count_parameters(smollm2_135m()) == 134_515_008
    assert model.lm_head.weight is model.embed_tokens.weight
    assert all(p.dtype == np.float32 and p.data.flags.c_contiguous for p in model.parameters())


@pytest.mark.parametrize("k", range(len(PROMPTS)), ids=[p[-24:] for p, _ in PROMPTS])
def test_last_logits_match_transformers(smollm2, k):
    model, _ = smollm2
    ours = last_logits(model, PROMPTS[k][1])
    assert np.abs(ours - LOGITS[k]).max() < 1e-3
    assert np.argsort(-ours)[:5].tolist() == np.argsort(-LOGITS[k])[:5].tolist()


def test_rope_layout_either_undo_the_row_order_or_rotate_adjacent_pairs(smollm2):
    """llama.cpp stored W_q, W_k with rows reordered for adjacent-pair RoPE: two ways back, one wrong way."""
    model, _ = smollm2
    raw = from_gguf(smollm2_path(), rope_interleaved=True)  # the file's rows, adjacent pairs
    ids = PROMPTS[1][1]  # the chat prompt: 37 positions, so rotations reach far
    q_raw, q = raw.layers[0].attn.q_proj.weight.data, model.layers[0].attn.q_proj.weight.data
    assert np.array_equal(halves_from_pairs(q_raw, 9), q)
    assert np.array_equal(q_raw[1], q[32])  # file row 2i + 1 is checkpoint row i + d/2 (head 0, i = 0)
    assert np.abs(last_logits(raw, ids) - LOGITS[1]).max() < 1e-3
    raw.rope.interleaved = False  # the file's rows with split-half RoPE: the pairs are wrong
    wrong = last_logits(raw, ids)
    assert np.abs(wrong - LOGITS[1]).max() > 1.0
    assert np.argsort(-wrong)[:5].tolist() != np.argsort(-LOGITS[1])[:5].tolist()


@pytest.mark.parametrize("prompt", list(EXPECTED["greedy"]), ids=["chat", "completion"])
def test_greedy_continuation_matches_transformers(smollm2, prompt):
    model, tok = smollm2
    ids = tok.encode(prompt)
    out = generate(model, ids, 20, temperature=0)
    assert out[len(ids) :] == EXPECTED["greedy"][prompt]


def test_kv_cached_decoding_matches_full_recomputation(smollm2):
    model, tok = smollm2
    ids = tok.encode("Once upon a time, there was a little girl who")
    with gf.no_grad():
        full, _ = model(ids[None])
        cache = model.new_cache()
        first, _ = model(ids[None, :4], cache=cache)
        steps = [first.data[0]] + [model(ids[None, i : i + 1], cache=cache)[0].data[0] for i in range(4, len(ids))]
    assert cache[0].length == len(ids)
    assert np.abs(np.concatenate(steps) - full.data[0]).max() < 1e-4


def test_trace_prints_the_steps_and_gives_the_models_logits(smollm2):
    model, tok = smollm2
    ids = tok.encode(PROMPTS[0][0])
    out = io.StringIO()
    logits = trace(model, ids, tok, out=out)
    text = out.getvalue()
    t = len(ids)
    for line in [f"[{t}, 576]", f"[9, {t}, 64]", f"[3, {t}, 64]", f"[9, {t}, {t}]", f"[{t}, 1536]", f"[{t}, 49152]"]:
        assert line in text
    assert "next token: ' Paris'" in text
    np.testing.assert_allclose(logits[-1], LOGITS[0], atol=1e-3)


# --- chatting ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", range(len(EXPECTED["chat"])))
def test_chatml_matches_the_files_template(gguf, k):
    case = EXPECTED["chat"][k]
    assert chatml(case["messages"]) == case["text"]
    assert SMOLLM2_SYSTEM in gguf.metadata["tokenizer.chat_template"]


def test_a_conversation_is_the_template_and_reuses_its_cache(smollm2):
    model, tok = smollm2
    chat = Chat(model, tok, temperature=0, max_new_tokens=40)
    assert "Paris" in chat.say("What is the capital of France?")
    assert "Berlin" in chat.say("And of Germany?")
    assert chat.cache[0].length == len(chat.ids) - 1  # every token but the last <|im_end|> is cached
    rendered = tok.encode(chatml(chat.messages, add_generation_prompt=False)).tolist()
    assert rendered[:-1] == chat.ids  # the same tokens as the file's template gives (but its final newline)


def test_gradflow_chat_answers_the_capital_of_france(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("What is the capital of France?\n"))
    assert main(["chat", "--max-new-tokens", "30"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("smollm2> ") and "Paris" in out and "<|im_end|>" not in out


def test_gradflow_generate_with_smollm2_and_trace(capsys):
    assert main(["generate", "--model", "smollm2", "--prompt", "The capital of France is", "--trace",
                 "--temperature", "0", "--max-new-tokens", "3"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "layer 0:" in out and "scores" in out
    assert out.rstrip().endswith("The capital of France is Paris.")


# --- bad input ----------------------------------------------------------------------------------------


def test_a_file_of_another_kind_is_a_clear_error(gguf):
    from gradflow.models.llama import config_from_gguf

    with pytest.raises(ValueError, match=r"config_from_gguf: expected a 'llama' model file, got architecture 'gpt2'"):
        config_from_gguf({**gguf.metadata, "general.architecture": "gpt2"})
    with pytest.raises(ValueError, match=r"\.gguf: expected a 'gpt2' \(byte-level BPE\) tokenizer, got 'llama'$"):
        PretrainedBPETokenizer.from_gguf({**gguf.metadata, "tokenizer.ggml.model": "llama"}, source=gguf.path)
    with pytest.raises(KeyError, match=r"has no tensor 'blk.30.attn_q.weight'"):
        gguf.array("blk.30.attn_q.weight")


def test_a_tensor_of_the_wrong_shape_is_a_clear_error(gguf, monkeypatch):
    monkeypatch.setitem(gguf.metadata, "llama.feed_forward_length", 1024)
    message = r"\.gguf: blk.0.ffn_gate.weight has shape \(1536, 576\), layers.0.ffn.gate_proj.weight needs \(1024, "
    with pytest.raises(ValueError, match=message):
        from_gguf(gguf)


def test_a_cache_longer_than_the_prompt_is_a_clear_error(smollm2):
    model, tok = smollm2
    ids = tok.encode("Hello world")
    cache = model.new_cache()
    with gf.no_grad():
        model(ids[None], cache=cache)
    with pytest.raises(ValueError, match=r"generate: the cache holds 2 tokens, the prompt only 2"):
        generate(model, ids, 1, cache=cache)
