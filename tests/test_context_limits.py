"""A prompt longer than the model's context: its first tokens are dropped, with one line saying how many.

Every model with a fixed context does the same: a GPT checkpoint (its block_size) and SmolLM2 (the
8,192 positions it was trained on). The model sees the prompt's last `context` tokens; generation
past the context slides a window (gradflow/inference/generate.py).
"""

import io

import pytest

import gradflow as gf
from gradflow.cli import generate as generate_command
from gradflow.cli import main
from gradflow.inference import generate
from gradflow.models.gpt import GPT, GPTConfig


def test_generate_warns_how_many_tokens_a_long_prompt_drops_and_reads_the_rest():
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=16))
    prompt = list(range(10))
    with pytest.warns(UserWarning, match=r"^the prompt is 10 tokens, longer than the model's context of 8: its first "
                      r"2 tokens are dropped$"):  # fmt: skip
        out = generate(model, prompt, max_new_tokens=4, temperature=0, context=8)
    assert out[10:] == generate(model, prompt[2:], max_new_tokens=4, temperature=0, context=8)[8:]


def test_gradflow_generate_says_it_in_one_line_before_the_text(checkpoint, capsys):
    prompt = "to be or not to be, that is"
    assert main(["generate", "--checkpoint", str(checkpoint), "--prompt", prompt, "--max-new-tokens", "2"]) == 0
    out, err = capsys.readouterr()
    said = "the prompt is 27 tokens, longer than the model's context of 8: its first 19 tokens are dropped"
    assert err == f"gradflow generate: {said}\n"
    assert out.startswith(prompt)


def test_smollm2s_context_is_its_files(monkeypatch, capsys):
    from gradflow.pretrained import GGUFFile, smollm2_path

    assert GGUFFile(smollm2_path()).metadata["llama.context_length"] == generate_command.SMOLLM2_CONTEXT == 8192
    capsys.readouterr()  # on a fresh machine, what fetching the model said
    monkeypatch.setattr(generate_command, "SMOLLM2_CONTEXT", 4)  # 8,193 tokens would take SmolLM2 a minute
    argv = ["generate", "--model", "smollm2", "--prompt", "The capital of France is", "--max-new-tokens", "1"]
    assert main([*argv, "--temperature", "0"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[1:] == [
        "gradflow generate: the prompt is 5 tokens, longer than the model's context of 4: its first 1 token is dropped"
    ]


def test_gradflow_chat_says_it_in_one_line_when_the_conversation_outgrows_the_context(monkeypatch, capsys):
    monkeypatch.setattr(generate_command, "SMOLLM2_CONTEXT", 36)  # the system message and a question are 37 tokens
    monkeypatch.setattr("sys.stdin", io.StringIO("What is the capital of France?\n"))
    assert main(["chat", "--max-new-tokens", "1"]) == 0
    out, err = capsys.readouterr()
    said = "the prompt is 37 tokens, longer than the model's context of 36: its first 1 token is dropped"
    assert err.splitlines()[1:] == [f"gradflow chat: {said}"]
    assert out.startswith("smollm2> \n")  # the warning stands on its own line, the reply on the next
