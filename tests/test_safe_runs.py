"""Nothing a user saved is ever lost, and every bad input is one line: `gradflow train` and its checkpoints.

Each test runs the command as a user would (in-process through `main`, or as a process where a
kill or a closed stdin is the point) and checks the exact line it prints and what is left on disk.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from helpers import TINY, error_line, rewrite, steps_logged, train

import gradflow as gf
from gradflow.cli import main
from gradflow.training.checkpoint import load_checkpoint, save_checkpoint
from gradflow.training.data_parallel import WorkerError
from gradflow.training.distributed import MPIUnavailable, RankError

# --- where a run reads and writes -----------------------------------------------------------------


def test_resume_of_a_copy_writes_only_the_copy(tmp_path, data, capsys, monkeypatch):
    run_a, run_b = tmp_path / "runA", tmp_path / "runB"
    assert train(run_a, data, "--max-iters", "4", "--eval-interval", "2") == 0
    shutil.copytree(run_a, run_b)
    before = (run_a / "ckpt.npz").read_bytes()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the data path was saved absolute: resuming from anywhere works
    assert main(["train", "--resume", "--out-dir", str(run_b), "--max-iters", "6", "--sample-tokens", "0"]) == 0
    assert f"resuming {run_b / 'ckpt.npz'} at step 4; changed: max_iters 4 -> 6" in capsys.readouterr().out
    assert (run_a / "ckpt.npz").read_bytes() == before
    assert load_checkpoint(run_b)["step"] == 6 and load_checkpoint(run_a)["step"] == 4
    assert list(elsewhere.iterdir()) == []


def test_a_fresh_run_refuses_a_directory_holding_a_checkpoint(tmp_path, data, capsys):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "4", "--eval-interval", "2") == 0
    capsys.readouterr()
    before = (out / "ckpt.npz").read_bytes()
    assert train(out, data, "--max-iters", "2") == 2
    assert error_line(capsys) == (
        f"gradflow train: {out / 'ckpt.npz'} holds a run's checkpoint at step 4: "
        "continue it with --resume, or replace it with --overwrite"
    )
    assert (out / "ckpt.npz").read_bytes() == before
    assert train(out, data, "--max-iters", "2", "--eval-interval", "1", "--overwrite") == 0
    assert steps_logged(out) == [0, 1, 1, 2, 2]  # a new log, not appended to the old one
    assert load_checkpoint(out)["step"] == 2


def test_resume_refuses_conflicting_flags_and_reports_the_changes_it_applies(tmp_path, data, capsys):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "2", "--eval-interval", "2") == 0
    capsys.readouterr()
    refused = {
        ("--n-layer", "2"): "--n-layer 2 conflicts with the checkpoint, whose model has 1",
        ("--block-size", "16"): "--block-size 16 conflicts with the checkpoint, which was trained with 8",
        ("--seed", "7"): "--seed 7 conflicts with the checkpoint, which was trained with 1337",
        ("--model", "llama"): "--model llama conflicts with the checkpoint, which holds a gpt",
        ("--tokenizer", "bpe"): "--tokenizer bpe conflicts with the checkpoint's, char",
    }
    resume = ["train", "--resume", "--out-dir", str(out), "--sample-tokens", "0"]
    for flags, message in refused.items():
        assert main([*resume, *flags]) == 2
        assert error_line(capsys) == f"gradflow train: {message}"
    changed = ["--max-iters", "3", "--lr", "0.0005", "--batch-size", "3", "--eval-interval", "5"]
    assert main([*resume, *changed]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (
        f"resuming {out / 'ckpt.npz'} at step 2; changed: max_iters 2 -> 3, batch_size 2 -> 3, lr 0.001 -> 0.0005, "
        "eval_interval 2 -> 5"
    )
    saved = load_checkpoint(out)["train_config"]
    assert (saved["lr"], saved["batch_size"], saved["out_dir"]) == (0.0005, 3, str(out))


def test_resume_refuses_other_text_and_a_missing_checkpoint(tmp_path, data, capsys):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "2", "--eval-interval", "2") == 0
    capsys.readouterr()
    data.write_text("other text entirely, " * 30)
    assert main(["train", "--resume", "--out-dir", str(out)]) == 2
    assert error_line(capsys) == (
        f"gradflow train: --resume: the text in {data} is not the text this run was trained on "
        "(its sha256 differs); pass the original file with --data"
    )
    assert main(["train", "--resume", "--out-dir", str(tmp_path / "none")]) == 2
    assert error_line(capsys) == (
        f"gradflow train: --resume: {tmp_path / 'none' / 'ckpt.npz'} does not exist; start a new run without --resume"
    )


def test_a_torn_last_log_line_is_dropped_with_a_warning(tmp_path, data, capsys):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "2", "--eval-interval", "2") == 0
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "lo')  # the disk filled up mid-line
    with pytest.warns(UserWarning, match=f"{out / 'metrics.jsonl'}: line 5 is not a complete record; dropped"):
        assert main(["train", "--resume", "--out-dir", str(out), "--max-iters", "3", "--sample-tokens", "0"]) == 0
    assert steps_logged(out) == [0, 1, 2, 2, 3, 3]


# --- divergence -------------------------------------------------------------------------------------


def test_divergence_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, data, capsys):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "2", "--eval-interval", "2") == 0
    capsys.readouterr()
    good = (out / "ckpt.npz").read_bytes()
    flags = ["--max-iters", "60", "--lr", "1e30", "--schedule", "constant", "--sample-tokens", "0"]
    assert main(["train", "--resume", "--out-dir", str(out), *flags]) == 1
    line = error_line(capsys)
    assert line.startswith("gradflow train: stopped at step ")
    assert "the loss is nan" in line or "the gradient's norm nan" in line or "inf" in line
    assert line.endswith(
        f"the weights were not updated and {out / 'ckpt.npz'} (step 2) is kept; try a lower learning rate, "
        "or find the first non-finite op with detect_anomaly"
    )
    assert "(largest: " in line
    assert (out / "ckpt.npz").read_bytes() == good


def test_detect_anomaly_names_the_first_op_of_a_diverging_run(tmp_path, data, capsys):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "2", "--eval-interval", "2") == 0
    capsys.readouterr()
    good = (out / "ckpt.npz").read_bytes()
    flags = ["--max-iters", "60", "--lr", "1e30", "--schedule", "constant", "--detect-anomaly"]
    assert main(["train", "--resume", "--out-dir", str(out), *flags]) == 1
    line = error_line(capsys)
    # One step at lr 1e30 makes every weight about +-1e30. The blocks' LayerNorms (no bias) then see a variance
    # beyond float32's range and give zeros, so the whole forward stays finite, and the first op to produce a
    # non-finite number is ln_f's backward, from the 1e30 residual stream it normalised.
    first_op = r"gradflow train: detect_anomaly: backward: layer_norm in ln_f returned (NaN|inf)( and inf)? "
    of_input = (
        r"in the gradient of its input 0 \(a tensor of shape \(2, 8, 16\)\) from a finite gradient of its output; "
    )
    assert re.match(first_op + of_input + r"input shapes \(2, 8, 16\), \(16,\), None; the op was called at ", line)
    assert (out / "ckpt.npz").read_bytes() == good


def test_a_checkpoint_with_non_finite_weights_is_never_written_nor_resumed(tmp_path, data, capsys):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "2", "--eval-interval", "2") == 0
    capsys.readouterr()
    rewrite(out / "ckpt.npz", lambda arrays: arrays["model/wpe.weight"].__setitem__((0, 0), np.nan))
    assert main(["train", "--resume", "--out-dir", str(out)]) == 2
    assert error_line(capsys) == (
        f"gradflow train: checkpoint {out / 'ckpt.npz'}: model/wpe.weight holds 1 non-finite value (NaN or inf); "
        "it cannot be used"
    )
    m = gf.nn.Linear(2, 2)
    m.weight.data[0, 0] = np.inf
    with pytest.raises(ValueError, match=r"not written: model/weight holds 1 non-finite value \(NaN or inf\)$"):
        save_checkpoint(tmp_path / "x.npz", m)
    assert not (tmp_path / "x.npz").exists()


# --- files are validated before use ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [bool, np.int64, np.complex64, str])
def test_weights_of_the_wrong_dtype_are_refused(checkpoint, capsys, dtype):
    def cast(arrays):
        arrays["model/wpe.weight"] = arrays["model/wpe.weight"].astype(dtype)

    rewrite(checkpoint, cast)
    assert main(["generate", "--checkpoint", str(checkpoint)]) == 2
    kind = np.array([0.5], np.float32).astype(dtype).dtype
    assert error_line(capsys) == (
        f"gradflow generate: checkpoint {checkpoint}: model/wpe.weight has dtype {kind}, not a floating-point type; "
        "it cannot be used"
    )


def test_tied_weights_saved_different_are_refused(checkpoint, capsys):
    rewrite(checkpoint, lambda arrays: arrays["model/lm_head.weight"].__imul__(2))
    assert main(["generate", "--checkpoint", str(checkpoint)]) == 2
    assert error_line(capsys) == (
        f"gradflow generate: checkpoint {checkpoint} does not fit this model: load_state_dict: wte.weight and "
        "lm_head.weight are one tied weight but the checkpoint holds two different values"
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m: m.update(step=-3), "step must be a non-negative integer, got -3"),
        (lambda m: m.update(step="3"), "step must be a non-negative integer, got '3'"),
        (lambda m: m.pop("model"), "model must name its type, gpt or llama, got None"),
        (lambda m: m["model"].update(type="rnn"), "model must name its type, gpt or llama, got"),
        (lambda m: m["model"]["config"].update(vocab_size=10**9),
         "model.config.vocab_size = 1000000000 is out of range"),
        (lambda m: m["model"]["config"].update(n_layer=0), "model.config.n_layer = 0 is out of range"),
        (lambda m: m["model"]["config"].update(n_embd="16"), "model.config.n_embd has the wrong type: '16'"),
        (lambda m: m["model"]["config"].update(depth=3), "model.config must hold GPTConfig fields"),
        (lambda m: m["model"]["config"].update(vocab_size=30),
         "model/wte.weight has shape (15, 16) but its config implies (30, 16)"),
        (lambda m: m["tokenizer"].update(chars="abc"), "its tokenizer has 3 tokens but the model 15"),
        (lambda m: m.update(rng={"batches": 1}), "rng is not a pair of saved generator states"),
        (lambda m: m["tokenizer"].update(type="morse"), "tokenizer: unknown tokenizer type 'morse'"),
        (lambda m: m.update(tokenizer={"type": "bpe", "vocab_size": 257, "pattern": "(a+)+$", "merges": [[97, 97]]}),
         "unknown split pattern '(a+)+$'; gradflow accepts only its known pre-tokenizer patterns"),
        (lambda m: m.update(train_config=[1]), "train_config must be a dict of TrainConfig fields, got [1]"),
        (lambda m: m.update(history={}), "history must be a list of records"),
    ],
)  # fmt: skip
def test_malformed_checkpoint_descriptions_are_one_line_naming_the_field(checkpoint, capsys, change, message):
    rewrite(checkpoint, change_meta=change)
    assert main(["train", "--resume", "--out-dir", str(checkpoint.parent)]) == 2
    line = error_line(capsys)
    assert line.startswith(f"gradflow train: checkpoint {checkpoint}: ") or line.startswith("gradflow train: ")
    assert message in line


def test_a_config_larger_than_the_file_is_refused_before_allocating(checkpoint, capsys):
    def huge(meta):  # 1M x 32K float32 would be 128 GiB; the file holds none of it
        meta["model"]["config"].update(vocab_size=1 << 20, n_embd=1 << 15, n_head=1)

    rewrite(checkpoint, lambda arrays: arrays.pop("model/wte.weight"), change_meta=huge)
    assert main(["generate", "--checkpoint", str(checkpoint)]) == 2
    assert error_line(capsys) == f"gradflow generate: checkpoint {checkpoint}: model/wte.weight is missing"


def test_a_file_that_is_not_a_checkpoint_never_gets_numpys_advice(tmp_path, capsys):
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object))
    assert main(["generate", "--checkpoint", str(tmp_path / "objects.npz")]) == 2
    line = error_line(capsys)
    assert line == (
        f"gradflow generate: checkpoint {tmp_path / 'objects.npz'} is corrupt or not a gradflow checkpoint "
        "(it holds Python objects)"
    )
    assert "allow_pickle" not in line


# --- one clear line for every bad flag ------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--n-layer", "0"], "--n-layer must be a positive integer, got 0"),
        (["--n-layer", "-2"], "--n-layer must be a positive integer, got -2"),
        (["--n-head", "0"], "--n-head must be a positive integer, got 0"),
        (["--n-embd", "0"], "--n-embd must be a positive integer, got 0"),
        (["--n-embd", "15"], "--n-embd 15 must be a multiple of --n-head 2 (each head gets n_embd / n_head)"),
        (["--model", "llama", "--n-kv-head", "3"], "--n-head 2 must be a multiple of --n-kv-head 3"),
        (["--dropout", "1.5"], "--dropout must be in [0, 1), got 1.5"),
        (["--eval-interval", "0"], "--eval-interval must be a positive integer, got 0"),
        (["--eval-iters", "0"], "--eval-iters must be a positive integer, got 0"),
        (["--grad-clip", "-1"], "--grad-clip must be a non-negative number (0 turns clipping off), got -1.0"),
        (["--batch-size", "0"], "--batch-size must be a positive integer, got 0"),
        (["--max-iters", "-5"], "--max-iters must be a non-negative integer, got -5"),
        (["--lr", "0"], "--lr must be a positive number, got 0.0"),
        (["--lr", "nan"], "--lr must be a positive number, got nan"),
        (["--lr", "inf"], "--lr must be a positive number, got inf"),
        (["--min-lr", "inf"], "--min-lr must be a non-negative number, got inf"),
        (["--weight-decay", "inf"], "--weight-decay must be a non-negative number, got inf"),
        (["--grad-clip", "inf"], "--grad-clip must be a non-negative number (0 turns clipping off), got inf"),
        (["--beta2", "1"], "--beta2 must be a number in [0, 1), got 1.0"),
        (["--seed", "-1"], "--seed must be a non-negative integer, got -1"),
        (["--processes", "0"], "--processes must be a positive integer, got 0"),
        (["--schedule", "linear"], "--schedule must be \"cosine\" or \"constant\", got 'linear'"),
        (["--sample-tokens", "-1"], "--sample-tokens must be a non-negative integer, got -1"),
        (["--vocab-size", "300"],
         "--vocab-size is for --tokenizer bpe: a char tokenizer's vocabulary is the text's characters"),
        (["--tokenizer", "bpe", "--vocab-size", "10"],
         "--vocab-size must be at least 256 (one token per byte), got 10"),
        (["--n-layer", "x"], "argument --n-layer: invalid int value: 'x'"),
        (["--detect-anomaly", "--processes", "2"],
         "detect_anomaly checks the ops of one process; use processes=1 with it"),
    ],
)  # fmt: skip
def test_bad_train_flags_are_one_line(tmp_path, data, capsys, flags, message):
    with pytest.raises(SystemExit) if "invalid" in message else _no_exit() as exited:
        code = train(tmp_path / "run", data, *flags)
    code = exited.value.code if exited else code
    assert code == 2
    assert error_line(capsys) == f"gradflow train: {message}"
    assert not (tmp_path / "run" / "ckpt.npz").exists()


class _no_exit:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_unknown_flags_and_files_of_another_kind_are_one_line(tmp_path, capsys):
    assert main(["generate", "--out-dir", "x"]) == 2
    assert error_line(capsys) == "gradflow generate: unrecognized arguments: --out-dir x"
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint")
    assert main(["generate", "--checkpoint", str(text)]) == 2
    assert error_line(capsys) == (
        f"gradflow generate: checkpoint {text} is corrupt or not a gradflow checkpoint (not an .npz archive)"
    )


def test_data_that_is_not_a_regular_file_is_refused(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo), str(tmp_path)):
        assert main(["train", "--data", path, "--out-dir", str(tmp_path / "run")]) == 2
        assert error_line(capsys) == f"gradflow train: --data {path} is not a regular file"


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--max-new-tokens", "-1"], "--max-new-tokens must be a non-negative integer, got -1"),
        (["--temperature", "-0.5"], "--temperature must be a non-negative number (0 is greedy), got -0.5"),
        (["--temperature", "inf"], "--temperature must be a non-negative number (0 is greedy), got inf"),
        (["--top-k", "0"], "--top-k must be a positive integer, got 0"),
        (["--top-p", "0"], "--top-p must be in (0, 1], got 0.0"),
        (["--seed", "-1"], "--seed must be a non-negative integer, got -1"),
    ],
)
def test_bad_sampling_flags_are_one_line_before_the_prompt(checkpoint, capsys, flags, message):
    assert main(["generate", "--checkpoint", str(checkpoint), "--prompt", "to be", *flags]) == 2
    assert error_line(capsys) == f"gradflow generate: {message}"


def test_an_error_while_generating_starts_its_own_line(checkpoint, capsys, monkeypatch):
    def fail(*args, **kwargs):
        raise ValueError("generate: something went wrong")

    monkeypatch.setattr("gradflow.cli.generate.generate", fail)
    assert main(["generate", "--checkpoint", str(checkpoint), "--prompt", "to be"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "to be\n" and captured.err == "gradflow generate: something went wrong\n"


def test_chat_with_stdin_closed_is_one_line(tmp_path):
    code = "import sys; from gradflow.cli import main; sys.exit(main(['chat']))"
    done = subprocess.run(f'{sys.executable} -c "{code}" <&-', shell=True, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "gradflow chat: standard input is closed: chat reads your messages from it\n"


@pytest.mark.parametrize(
    "error, code, line",
    [
        (WorkerError("DataParallel: worker 1 exited (exit code -9) during a step"), 1,
         "gradflow train: DataParallel: worker 1 exited (exit code -9) during a step"),
        (WorkerError("DataParallel: worker 1 failed on its shard: ValueError: bad\nTraceback ...\n  line 3"), 1,
         "gradflow train: DataParallel: worker 1 failed on its shard: ValueError: bad"),
        (MemoryError(), 1, "gradflow train: out of memory"),
        (KeyboardInterrupt(), 130, "gradflow train: interrupted"),
        (RankError("rank 1: cross_entropy: bad target\nTraceback ...\n  line 3"), 1,
         "gradflow train: rank 1: cross_entropy: bad target"),
        (MPIUnavailable('distributed training needs mpi4py, which is not installed: pip install "gradflow[mpi]"'), 2,
         'gradflow train: distributed training needs mpi4py, which is not installed: pip install "gradflow[mpi]"'),
    ],
)  # fmt: skip
def test_failures_that_escape_a_command_are_one_line(monkeypatch, capsys, error, code, line):
    def fail(args):
        raise error

    monkeypatch.setattr("gradflow.cli.train.run_train", fail)  # looked up when the parser is built
    assert main(["train"]) == code
    assert capsys.readouterr().err.strip() == line


# --- a kill while saving ---------------------------------------------------------------------------------

KILLED_RUN = """
import os, sys, time
import numpy as np
sys.argv = ["gradflow"]
from gradflow.cli import main

saves = []
real_savez = np.savez

def slow_savez(f, **arrays):  # the third checkpoint's save stops half-way, as if the machine were busy
    saves.append(b"train_config" in arrays["__meta__"].tobytes())  # a checkpoint, not a weight snapshot
    real_savez(f, **arrays)
    if saves.count(True) == 3 and saves[-1]:
        f.flush()
        print("saving", flush=True)
        time.sleep(60)

np.savez = slow_savez
sys.exit(main(sys.argv[1:] + {args!r}))
"""


def test_a_kill_during_a_save_keeps_the_previous_checkpoint_and_resume_is_exact(tmp_path, data):
    flags = ["train", "--data", str(data), *TINY, "--max-iters", "6", "--eval-interval", "2", "--dropout", "0.1"]
    whole = tmp_path / "whole"
    assert main([*flags, "--out-dir", str(whole)]) == 0
    killed = tmp_path / "killed"
    script = KILLED_RUN.format(args=[*flags, "--out-dir", str(killed)])
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        while "saving" not in proc.stdout.readline():  # the step-4 checkpoint is half written
            assert proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert [p.name for p in killed.glob(".ckpt.npz.*.tmp")]  # the torn temporary file
    assert load_checkpoint(killed)["step"] == 2  # the one before it is whole
    assert main(["train", "--resume", "--out-dir", str(killed), "--sample-tokens", "0"]) == 0
    assert not list(killed.glob(".ckpt.npz.*.tmp"))  # removed at the next save
    a, b = load_checkpoint(whole), load_checkpoint(killed)
    for key in a.arrays:
        np.testing.assert_array_equal(a.arrays[key], b.arrays[key])
    assert a["history"] == b["history"]


def test_a_full_disk_names_the_file_and_what_was_kept(tmp_path, data, capsys, monkeypatch):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "2", "--eval-interval", "2") == 0
    capsys.readouterr()
    before = (out / "ckpt.npz").read_bytes()

    def full(f, **arrays):
        f.write(b"PK\x03\x04 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    assert main(["train", "--resume", "--out-dir", str(out), "--max-iters", "4", "--sample-tokens", "0"]) == 2
    assert error_line(capsys) == (
        f"gradflow train: could not write checkpoint {out / 'ckpt.npz'} (No space left on device); "
        "the previous one is unchanged"
    )
    assert (out / "ckpt.npz").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["ckpt.npz", "loss.png", "metrics.jsonl", "snapshots"]


# --- training health ---------------------------------------------------------------------------------------


def test_each_evaluation_logs_the_health_of_each_block(tmp_path, data):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "4", "--eval-interval", "2", "--grad-clip", "0.01") == 0
    evals = [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "val_loss" in r]
    assert [r["step"] for r in evals] == [0, 2, 4] and "blocks" not in evals[0]
    for record in evals[1:]:
        assert set(record["blocks"]) == {"wte", "wpe", "blocks.0", "ln_f"}
        assert record["clip_fraction"] == 1.0  # every step's norm exceeded 0.01
        for block in record["blocks"].values():
            assert block["grad_norm"] > 0 and 0 < block["update_ratio"] < 1
        total = np.sqrt(sum(b["grad_norm"] ** 2 for b in record["blocks"].values()))
        assert record["grad_norm"] == pytest.approx(total, rel=1e-5)


def test_the_update_ratio_is_the_step_over_the_weights(tmp_path):
    """One SGD step by hand: ||lr g|| / ||w|| is what the record says."""
    from gradflow.training.trainer import TrainConfig, Trainer

    class Line(gf.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = gf.nn.Parameter(np.array([3.0, 4.0], dtype=np.float32))

        def forward(self, x, y):
            return None, (self.w * self.w).sum() * 0.5  # dL/dw = w

    cfg = TrainConfig(max_iters=1, eval_interval=1, eval_iters=1, batch_size=1, block_size=1, grad_clip=0.0,
                      out_dir=str(tmp_path), schedule="constant", lr=0.1)  # fmt: skip
    model = Line()
    t = Trainer(model, np.arange(10), np.arange(10), cfg, optimizer=gf.optim.SGD(model.parameters()), progress=False)
    t.fit()
    health = t.history[-1]["blocks"]["w"]
    assert health["grad_norm"] == pytest.approx(5.0)
    assert health["update_ratio"] == pytest.approx(0.1 * 5.0 / 5.0, rel=1e-6)
