"""`gradflow generate --trace` and models/trace.py: every step named, its numbers the model's own, a decode step.

The numbers are checked against a computation written here in float64 numpy from the weights alone,
and against the model's own forward pass; the trace prints four significant digits.
"""

import io
import re
from pathlib import Path

import numpy as np
import pytest

import gradflow as gf
from gradflow.cli import main
from gradflow.cli.build import model_from_meta, tokenizer_for
from gradflow.inference.chat import chatml
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.llama import Llama, LlamaConfig
from gradflow.models.trace import WIDTH, explain_chat, trace
from gradflow.models.transformer import Transformer, TransformerConfig
from gradflow.pretrained.fetch import MEMBER, cache_dir
from gradflow.text import CharTokenizer
from gradflow.training.checkpoint import load_checkpoint

TEXT = "to be or not to be, that is the question. "
SMOLLM2 = cache_dir() / "smollm2" / Path(MEMBER).name


@pytest.fixture(scope="module", params=["gpt", "llama"])
def run(request, tmp_path_factory):
    """A checkpoint directory of a tiny model trained for a few steps by `gradflow train`."""
    folder = tmp_path_factory.mktemp(request.param)
    (folder / "tiny.txt").write_text(TEXT * 20)
    argv = ["train", "--data", str(folder / "tiny.txt"), "--model", request.param, "--n-layer", "2"]
    argv += ["--n-embd", "16", "--n-head", "4", "--block-size", "16", "--batch-size", "4", "--max-iters", "4"]
    argv += ["--eval-iters", "1", "--sample-tokens", "0", "--out-dir", str(folder / "run")]
    if request.param == "llama":
        argv += ["--n-kv-head", "2"]  # grouped-query attention: each key/value head serves two query heads
    assert main(argv) == 0
    return folder / "run"


def restored(run):
    ckpt = load_checkpoint(run)
    model = model_from_meta(ckpt)
    ckpt.restore(model)
    return model.eval(), tokenizer_for(ckpt, model)


def printed(text, name, occurrence=0):
    """(shape, norm, first numbers) of the step `name` as the trace printed it (its n-th occurrence)."""
    step = re.escape(f"  {name:<10} ") + r".*\n +(\[[\d, ]+\]) +\|x\| (\S+) +x\[[^\]]*\] = \[([^\]]*)\]"
    shape, norm, numbers = re.findall(step, text)[occurrence]
    return shape, float(norm), [float(v) for v in numbers.replace(", ...", "").split(", ")]


def layer_norm(x, norm):
    if isinstance(norm, gf.nn.RMSNorm):
        return x / np.sqrt((x**2).mean(-1, keepdims=True) + norm.eps) * norm.weight.data
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + norm.eps) * norm.weight.data
    return y if norm.bias is None else y + norm.bias.data


def split(a, hs=4):
    """(T, n * hs) -> (n, T, hs): the heads' features, head by head."""
    return a.reshape(len(a), -1, hs).transpose(1, 0, 2)


def test_the_trace_of_a_trained_checkpoint_names_every_step_and_shows_the_decode_step(run, capsys):
    argv = ["generate", "--checkpoint", str(run), "--prompt", "to be", "--trace", "--temperature", "0"]
    assert main([*argv, "--max-new-tokens", "3"]) == 0
    out = capsys.readouterr().out
    model, tok = restored(run)
    llama = isinstance(model, Llama)
    steps = ["embed", "norm", "Q", "K", "V", "K cache", "q k^T", "scores", "masked", "weights", "heads", "concat"]
    steps += ["residual"]
    steps += ["RoPE", "K, V", "gate", "up", "SwiGLU"] if llama else ["+ position", "W_1", "GELU"]
    for name in [*steps, "logits"]:
        assert len(re.findall(re.escape(f"  {name:<10} "), out)) >= 2, name  # in the prompt's pass and the decode step
    assert "layer 0:" in out and "layer 1  the same steps, K, V cache now 5 long" in out
    assert "the first numbers of its last row,\nthe last token's: the one the next token is predicted from" in out
    # the whole token list: position:id 'text', one per character of the prompt
    assert "tokens: 5 (position:id 'text')" in out
    listed = re.findall(r"(\d+):(\d+) '([^']*)'", out.split("\n\n")[0])
    assert listed == [(str(p), str(i), c) for p, (i, c) in enumerate(zip(tok.encode("to be").tolist(), "to be"))]
    # one decode step: the most likely token goes in alone and every layer's cache grows from 5 to 6
    assert "one decode step: the most likely next token" in out
    assert "0 cached + 5 new: the keys of 5 positions" in out and "5 cached + 1 new: the keys of 6 positions" in out
    assert printed(out, "K cache", 1)[0] == f"[{2 if llama else 4}, 6, 4]"
    assert "layer 1  the same steps, K, V cache now 6 long" in out
    assert printed(out, "scores", 1)[0] == "[4, 1, 6]"  # one query reads six keys
    # then, after a blank line, the generation as without --trace: the prompt and three characters
    assert "\n\nto be" in out and out.split("\n")[-2].startswith("to be") and len(out.split("\n")[-2]) == 8


def test_the_numbers_are_the_models_own(run, capsys):
    model, tok = restored(run)
    ids = tok.encode("to be or")
    logits = trace(model, ids, tok)
    out = capsys.readouterr().out
    c, layer = model.config, (model.layers if isinstance(model, Llama) else model.blocks)[0]
    with gf.no_grad():
        full, _ = model(ids[None])
        new = int(full.data[0, -1].argmax())
        longer, _ = model(np.append(ids, new)[None])
    np.testing.assert_allclose(logits, full.data[0], atol=1e-5)
    # the embedding and the first layer, computed here from the weights in float64
    if isinstance(model, GPT):
        x = model.wte.weight.data[ids].astype(np.float64) + model.wpe.weight.data[: len(ids)]
        np.testing.assert_allclose(printed(out, "+ position")[2], x[-1, :4], rtol=1e-3, atol=1e-7)
    else:
        x = model.embed_tokens.weight.data[ids].astype(np.float64)
    shape, norm, first = printed(out, "embed")
    embedding = model.wte if isinstance(model, GPT) else model.embed_tokens
    assert shape == f"[{len(ids)}, 16]"
    np.testing.assert_allclose(first, embedding.weight.data[ids[-1], :4], rtol=1e-3, atol=1e-7)  # the last row
    h = layer_norm(x, layer.attn_norm)
    np.testing.assert_allclose(printed(out, "norm")[2], h[-1, :4], rtol=1e-3, atol=1e-7)
    q, k = h @ layer.attn.q_proj.weight.data.T, h @ layer.attn.k_proj.weight.data.T  # no biases: gradflow train's
    shape, norm, first = printed(out, "Q")
    assert shape == f"[4, {len(ids)}, 4]"
    np.testing.assert_allclose(first, q[-1, :4], rtol=1e-3, atol=1e-7)  # the first head's features of the last token
    np.testing.assert_allclose(norm, np.linalg.norm(q), rtol=1e-3)
    # the last query sees every key; the mask hides the later keys of the others from the norm
    assert printed(out, "masked")[2] == printed(out, "scores")[2] and np.isfinite(printed(out, "masked")[2]).all()
    assert printed(out, "masked")[1] < printed(out, "scores")[1]
    assert all(0 < w < 1 for w in printed(out, "weights")[2])
    if isinstance(model, GPT):  # no RoPE: head j's scores are q_i . k_j / sqrt(4) for its 4 features
        scores = split(q) @ split(k).transpose(0, 2, 1) / 2  # (heads, queries, keys)
        np.testing.assert_allclose(printed(out, "q k^T")[2], 2 * scores[0, -1, :4], rtol=1e-3, atol=1e-7)
        np.testing.assert_allclose(printed(out, "scores")[2], scores[0, -1, :4], rtol=1e-3, atol=1e-7)
        seen = np.tril(np.ones((len(ids), len(ids)), dtype=bool))
        np.testing.assert_allclose(printed(out, "masked")[1], np.linalg.norm(scores[:, seen]), rtol=1e-3)
        e = np.exp(scores[0, -1] - scores[0, -1].max())
        np.testing.assert_allclose(printed(out, "weights")[2], (e / e.sum())[:4], rtol=1e-3, atol=1e-7)
    # the head, in the prompt's pass and the decode step, against the model's forward pass
    shape, norm, first = printed(out, "logits")
    assert shape == f"[{len(ids)}, {c.vocab_size}]"
    np.testing.assert_allclose(first, full.data[0, -1, :4], rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(norm, np.linalg.norm(full.data[0]), rtol=1e-3)
    assert f"the most likely next token, {new} {tok.decode([new])!r}, goes in alone at position {len(ids)}" in out
    shape, norm, first = printed(out, "logits", 1)
    assert shape == f"[1, {c.vocab_size}]"
    np.testing.assert_allclose(first, longer.data[0, -1, :4], rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(norm, np.linalg.norm(longer.data[0, -1]), rtol=1e-3)


def test_a_long_token_list_is_wrapped_between_tokens_and_complete():
    tok = CharTokenizer(TEXT)
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=128, n_layer=1, n_head=2, n_embd=8)).eval()
    ids = tok.encode(TEXT * 2)
    out = io.StringIO()
    trace(model, ids, tok, out=out)
    listing = out.getvalue().split("\n\n")[0].splitlines()[1:]
    assert len(listing) > 5 and all(len(line) < WIDTH for line in listing)
    items = [re.findall(r"(\d+):(\d+) '([^']*)'", line) for line in listing]
    assert all(len(re.sub(r"\d+:\d+ '[^']*'", "", line).strip()) == 0 for line in listing)  # no token cut in two
    assert [(int(p), int(i)) for line in items for p, i, _ in line] == list(enumerate(ids.tolist()))


@pytest.mark.parametrize("kind", ["gpt", "llama"])
def test_the_decode_step_gives_the_logits_of_the_longer_prompt(kind):
    gf.manual_seed(1)
    if kind == "gpt":
        model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=3, n_head=2, n_embd=8))
    else:
        model = Llama(LlamaConfig(vocab_size=11, n_layer=3, d_model=8, n_heads=4, n_kv_heads=1, d_ff=16))
    ids, out = np.array([3, 1, 4, 1, 5]), io.StringIO()
    logits = trace(model.eval(), ids, out=out, detailed_layers=3)
    text = out.getvalue()
    with gf.no_grad():
        longer, _ = model(np.append(ids, logits[-1].argmax())[None])
    cached = "[1, 6, 2]" if kind == "llama" else "[2, 6, 4]"  # (key heads, positions, head size)
    assert [printed(text, "K cache", i)[0] for i in (3, 4, 5)] == [cached] * 3  # the decode step's three layers
    np.testing.assert_allclose(logits, longer.data[0, :-1], atol=1e-5)
    np.testing.assert_allclose(printed(text, "logits", 1)[2], longer.data[0, -1, :4], rtol=1e-3, atol=1e-6)
    assert text.count("  K cache    5 cached + 1 new: the keys of 6 positions") == 3  # every layer, detailed


def test_the_chat_template_is_explained_token_by_token():
    messages = [{"role": "user", "content": "Why is the sky blue?"}]
    text = chatml(messages)
    tok = CharTokenizer(text)  # one token per character: every count below is a length
    out = io.StringIO()
    explain_chat(messages, tok.encode(text), tok, out)
    said = out.getvalue()
    n, words = len(text), len("Why is the sky blue?")
    assert f"Your 5 words are {words} of its {n} tokens; the template adds the other {n - words}:" in said
    system = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    start = len("<|im_start|>system\n")
    assert f"tokens {start}-{start + len(system) - 1}" in said and "the default system message" in said
    user = start + len(system) + len("<|im_end|>\n<|im_start|>user\n")
    assert re.search(rf"tokens {user}-{user + words - 1} +\({words}\) +your words\n +'Why is the sky blue\?'", said)
    assert said.count("template: opens a") == 2 and said.count("template: closes the message") == 2
    assert said.rstrip().endswith("the model writes its reply from here\n" + " " * 21 + "'<|im_start|>assistant\\n'")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--chat"], "gradflow generate: --chat writes the prompt in SmolLM2's chat template"),
        (["--model", "smollm2"], "gradflow generate: --model smollm2 and --checkpoint {run}: give one of them"),
        (["--prompt", ""], "gradflow generate: --trace needs a prompt of at least one token, got --prompt ''"),
        (["--prompt", TEXT], "gradflow generate: --trace: --prompt is 42 tokens; with the decode step's token"),
    ],
)
def test_a_trace_that_cannot_be_is_one_line(run, argv, message, capsys):
    assert main(["generate", "--checkpoint", str(run), "--trace", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message.format(run=run)) and len(err.strip().splitlines()) == 1


def test_trace_refuses_what_it_cannot_trace():
    with pytest.raises(TypeError, match="trace: model must be a GPT or a Llama, got Transformer"):
        trace(Transformer(TransformerConfig()), [1, 2])
    with pytest.raises(ValueError, match="trace: ids must hold at least one token"):
        trace(GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4)), [])


@pytest.mark.skipif(not SMOLLM2.exists(), reason="SmolLM2's file is not in the cache")
def test_smollm2_chat_trace_says_why_five_words_are_36_tokens(capsys):
    argv = ["generate", "--model", "smollm2", "--chat", "--trace", "--prompt", "Why is the sky blue?"]
    assert main([*argv, "--temperature", "0", "--max-new-tokens", "1"]) == 0
    out = capsys.readouterr().out
    assert "tokens: 36 (position:id 'text')" in out and "35:198 '\\n'" in out and "24:4898 'Why'" in out
    assert "Your 5 words are 6 of its 36 tokens; the template adds the other 30:" in out
    assert re.search(r"tokens 24-29 +\(6\) +your words", out)
    assert re.search(r"tokens 3-18 +\(16\) +template: the default system message", out)
    assert printed(out, "scores")[0] == "[9, 36, 36]" and printed(out, "K, V", 1)[0] == "[9, 37, 64]"
    assert "36 cached + 1 new: the keys of 37 positions" in out
    assert "layer 29 the same steps, K, V cache now 37 long" in out
    assert "next token: 'The'" in out and out.rstrip().endswith("<|im_start|>assistant\nThe")
