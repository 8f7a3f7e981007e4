"""The trainer: learning, exact resume, atomic and safe checkpoints, Ctrl-C, metrics and the loss picture."""

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import TOK, TRAIN, VAL, batch_losses, config, model, records

import gradflow as gf
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from gradflow.training.hooks import Hook
from gradflow.training.trainer import Trainer


def test_training_lowers_the_loss(tmp_path):
    history = Trainer(model(dropout=0.0), TRAIN, VAL, config(tmp_path, max_iters=60, lr=3e-3), progress=False).fit()
    assert history[-1]["val_loss"] < history[0]["val_loss"] - 0.8
    assert history[0]["val_ppl"] == pytest.approx(np.exp(history[0]["val_loss"]))


def test_resume_continues_exactly(tmp_path):
    whole = Trainer(model(), TRAIN, VAL, config(tmp_path / "whole"), progress=False)
    whole.fit()

    def stop_at_20(trainer, step):
        if step == 20:
            trainer._stop = True

    first = Trainer(model(), TRAIN, VAL, config(tmp_path / "parts"), on_eval=stop_at_20, progress=False)
    first.fit()
    assert load_checkpoint(tmp_path / "parts")["step"] == 20
    second = Trainer(model(seed=99), TRAIN, VAL, config(tmp_path / "parts"), progress=False)  # other init, other RNG
    gf.manual_seed(12345)
    second.resume()
    second.fit()
    assert batch_losses(tmp_path / "parts") == batch_losses(tmp_path / "whole")
    for a, b in zip(whole.model.parameters(), second.model.parameters()):
        np.testing.assert_array_equal(a.data, b.data)
    assert [h["val_loss"] for h in second.history] == [h["val_loss"] for h in whole.history]


def test_ctrl_c_saves_a_checkpoint_and_stops(tmp_path):
    def interrupt(trainer, step):
        if step == 10:
            os.kill(os.getpid(), signal.SIGINT)

    t = Trainer(model(), TRAIN, VAL, config(tmp_path), on_eval=interrupt, progress=False)
    t.fit()
    assert t.step == 10  # Ctrl-C came between steps: no further step was taken
    assert load_checkpoint(tmp_path)["step"] == 10
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_crash_while_saving_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    m = model()
    path = save_checkpoint(tmp_path / "ckpt.npz", m, meta={"step": 1})

    def crash(f, **arrays):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, m, meta={"step": 2})
    monkeypatch.undo()
    assert load_checkpoint(path)["step"] == 1
    assert os.listdir(tmp_path) == ["ckpt.npz"]  # no temporary file left behind


def test_corrupt_and_foreign_checkpoints_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(CheckpointError, match="corrupt or not a gradflow checkpoint"):
        load_checkpoint(bad)
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(CheckpointError, match="corrupt or not a gradflow checkpoint"):
        load_checkpoint(tmp_path / "other.npz")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.npz")
    path = save_checkpoint(tmp_path / "ckpt.npz", model(), meta={"step": 0})
    other = GPT(GPTConfig(vocab_size=TOK.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=16))
    with pytest.raises(CheckpointError, match="does not fit this model: .*missing: blocks.1"):
        load_checkpoint(path).restore(other)


def test_checkpoints_are_read_without_pickle(tmp_path):
    np.savez(tmp_path / "evil.npz", __meta__=np.array([{"format": "gradflow-checkpoint"}], dtype=object))
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "evil.npz")


def test_checkpoint_holds_everything_needed_to_continue(tmp_path):
    t = Trainer(model(), TRAIN, VAL, config(tmp_path, max_iters=10), meta={"tokenizer": TOK.to_dict()}, progress=False)
    t.fit()
    ckpt = load_checkpoint(tmp_path)
    assert ckpt["step"] == 10 and ckpt["tokenizer"] == TOK.to_dict()
    assert set(ckpt["rng"]) == {"batches", "gradflow"} and ckpt["train_config"]["max_iters"] == 10
    assert any(k.startswith("optim/") and k.endswith("/m") for k in ckpt.arrays)


def test_metrics_log_and_loss_picture(tmp_path):
    Trainer(model(), TRAIN, VAL, config(tmp_path, max_iters=20), progress=False).fit()
    logged = records(tmp_path)
    assert [r["step"] for r in logged if "val_loss" in r] == [0, 10, 20]
    assert [r["step"] for r in logged if "loss" in r] == list(range(1, 21))
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class Listener(Hook):
    """Writes down each point of a run it is called at, with the step the trainer is at."""

    def __init__(self):
        self.heard = []

    def during_step(self, trainer):
        self.heard.append(("during_step", trainer.step))
        return contextlib.nullcontext()

    def after_backward(self, trainer):
        self.heard.append(("after_backward", trainer.step))

    def before_update(self, trainer, loss, norm):
        self.heard.append(("before_update", trainer.step, loss))

    def after_update(self, trainer):
        self.heard.append(("after_update", trainer.step))

    def evaluated(self, trainer, metrics):
        metrics["points_heard"] = len(self.heard)  # what a hook adds to the record is logged with it


def test_a_hook_hears_each_step_at_its_points_and_adds_to_the_evaluations(tmp_path):
    t = Trainer(model(), TRAIN, VAL, config(tmp_path, max_iters=2, eval_interval=2), progress=False)
    listener = Listener()
    t.hooks.append(listener)
    t.fit()
    (_, loss1), (_, loss2) = batch_losses(tmp_path)
    assert listener.heard == [
        ("during_step", 0), ("after_backward", 0), ("before_update", 0, loss1), ("after_update", 1),
        ("during_step", 1), ("after_backward", 1), ("before_update", 1, loss2), ("after_update", 2),
    ]  # fmt: skip
    assert [r["points_heard"] for r in records(tmp_path) if "val_loss" in r] == [0, 8]


FAST_UNLESS_CHOSEN = """
import sys
sys.path.insert(0, sys.argv[1])
import gradflow as gf
from helpers import TRAIN, VAL, config, model
from gradflow.training.trainer import Trainer

seen = set()
t = Trainer(model(), TRAIN, VAL, config(sys.argv[2], max_iters=1), on_eval=lambda t, s: seen.add(gf.kernels_in_use()),
            progress=False)
t.fit()
print(*seen, gf.kernels_in_use())
"""


@pytest.mark.parametrize("chosen, tiers", [("", "fast plain"), ("plain", "plain plain"), ("fast", "fast fast")])
def test_fit_runs_the_fast_kernels_unless_a_tier_was_chosen(tmp_path, chosen, tiers):
    """GRADFLOW_KERNELS unset, a learner's script runs plain and its Trainer fast; a chosen tier is kept."""
    tests = str(Path(__file__).resolve().parent)
    command = [sys.executable, "-c", FAST_UNLESS_CHOSEN, tests, str(tmp_path / "run")]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "GRADFLOW_KERNELS": chosen})  # fmt: skip
    assert (done.returncode, done.stdout) == (0, tiers + "\n"), done.stderr


def test_bad_training_setups_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="validation split has 10 tokens, fewer than block_size \\+ 1 = 17"):
        Trainer(model(), TRAIN, VAL[:10], config(tmp_path))
    with pytest.raises(ValueError, match='schedule must be "cosine" or "constant"'):
        Trainer(model(), TRAIN, VAL, config(tmp_path, schedule="linear"))
