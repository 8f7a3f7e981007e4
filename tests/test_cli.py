"""The `gradflow` command."""

import re
import shutil
import subprocess
import sys

import pytest

from gradflow.cli import main


def test_help_from_the_installed_script():
    exe = shutil.which("gradflow")
    cmd = [exe, "--help"] if exe else [sys.executable, "-m", "gradflow", "--help"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "gradcheck" in out


def test_gradcheck_prints_the_table(capsys):
    assert main(["gradcheck", "--op", "softmax"]) == 0
    out = capsys.readouterr().out
    assert "softmax [(3, 5)]" in out and "pass" in out and "FAIL" not in out
    assert "passed, 0 failed" in out.splitlines()[-1]


def test_gradcheck_unknown_op(capsys):
    assert main(["gradcheck", "--op", "nope"]) == 2
    assert "no op named 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["--help"]])
def test_no_command_prints_help(argv, capsys):
    if argv:
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
    else:
        assert main(argv) == 0
    assert "gradcheck" in capsys.readouterr().out


def test_train_then_generate_from_the_shell(tmp_path, capsys):
    data = tmp_path / "tiny.txt"
    data.write_text("to be or not to be, that is the question. " * 30)
    out = tmp_path / "run"
    argv = ["train", "--data", str(data), "--max-iters", "6", "--eval-interval", "3", "--eval-iters", "1"]
    argv += ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "4"]
    assert main([*argv, "--out-dir", str(out), "--sample-tokens", "10"]) == 0
    printed = capsys.readouterr().out
    assert "--- sample at step 3 ---" in printed and "done at step 6: val loss" in printed
    assert {p.name for p in out.iterdir()} == {"ckpt.npz", "metrics.jsonl", "loss.png", "snapshots"}
    assert main(["train", "--resume", "--out-dir", str(out), "--max-iters", "8", "--sample-tokens", "0"]) == 0
    assert "at step 8" in capsys.readouterr().out
    assert main(["generate", "--checkpoint", str(out), "--prompt", "to be", "--max-new-tokens", "12"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("to be") and len(text.rstrip("\n")) == len("to be") + 12


def test_llama_trains_from_the_shell_too(tmp_path, capsys):
    data = tmp_path / "tiny.txt"
    data.write_text("abcabcabd " * 50)
    argv = ["train", "--data", str(data), "--model", "llama", "--n-layer", "1", "--n-embd", "16", "--n-head", "4"]
    argv += ["--n-kv-head", "2", "--block-size", "8", "--batch-size", "2", "--max-iters", "2", "--eval-iters", "1"]
    assert main([*argv, "--out-dir", str(tmp_path / "run"), "--sample-tokens", "5"]) == 0
    assert "training a llama" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--data", "/no/such/file.txt"], "gradflow train: --data /no/such/file.txt: no such file"),
        (["generate", "--checkpoint", "/no/such/dir"], "gradflow generate: checkpoint /no/such/dir"),
        (["train", "--data", "{empty}"], "gradflow train: load_text:"),
    ],
)
def test_bad_input_is_one_clear_line(argv, message, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    argv = [a.replace("{empty}", str(empty)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1


def test_every_command_has_help(capsys):
    for command in ("train", "finetune", "generate", "chat", "graph", "explore", "gradcheck", "export", "exercises"):
        with pytest.raises(SystemExit) as e:
            main([command, "--help"])
        assert e.value.code == 0
        assert "usage: gradflow " + command in capsys.readouterr().out


def test_bpe_tokenizer_from_the_shell(tmp_path, capsys):
    data = tmp_path / "tiny.txt"
    data.write_text("the cat sat on the mat; the dog sat on the log. " * 40)
    argv = ["train", "--data", str(data), "--tokenizer", "bpe", "--vocab-size", "280", "--n-layer", "1"]
    argv += ["--n-embd", "16", "--n-head", "2", "--block-size", "8", "--batch-size", "2", "--max-iters", "2"]
    assert main([*argv, "--eval-iters", "1", "--out-dir", str(tmp_path / "run"), "--sample-tokens", "0"]) == 0
    # BPE stops early once no pair repeats (this text is tiny); the model is sized to what it learned
    vocab = int(re.search(r"\((\d+) in the vocabulary\)", capsys.readouterr().out).group(1))
    assert 256 < vocab <= 280
    run = str(tmp_path / "run")
    assert main(["generate", "--checkpoint", run, "--prompt", "the cat", "--max-new-tokens", "4"]) == 0
    assert capsys.readouterr().out.startswith("the cat")


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`gradflow ... | head`: once head has read enough, the rest of the output has nowhere to go."""
    command = [sys.executable, "-m", "gradflow", "exercises", "list"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # the reader leaves before the first line is written
    err = process.stderr.read().decode()
    assert process.wait() == 0 and err == ""
