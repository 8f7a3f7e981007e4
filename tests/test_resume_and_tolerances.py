"""Odd but honest inputs work, or fail in one line: a checkpoint copied without its log, a log with
bytes that are not UTF-8, and tolerances that cannot mean anything for `gradflow gradcheck`."""

import json
from dataclasses import replace

import numpy as np
import pytest
from helpers import error_line, rewrite, steps_logged, train
from safetensors.numpy import load_file

import gradflow as gf
from gradflow.cli import main
from gradflow.cli.build import model_from_meta
from gradflow.models.gpt import GPT, Block, GPTConfig
from gradflow.training.checkpoint import load_checkpoint


def test_resume_of_a_lone_checkpoint_with_no_steps_left_works(tmp_path, data, capsys):
    run, lone = tmp_path / "run", tmp_path / "lone"
    assert train(run, data, "--max-iters", "2", "--eval-interval", "2") == 0
    lone.mkdir()
    (lone / "ckpt.npz").write_bytes((run / "ckpt.npz").read_bytes())  # copied without metrics.jsonl
    assert main(["train", "--resume", "--out-dir", str(lone), "--max-iters", "2"]) == 0
    assert "done at step 2" in capsys.readouterr().out
    assert (lone / "loss.png").exists()


def test_bytes_that_are_not_utf8_at_the_end_of_the_log_are_dropped_with_a_warning(tmp_path, data):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "2", "--eval-interval", "2") == 0
    with open(out / "metrics.jsonl", "ab") as f:
        f.write(b'{"step": 3, "loss": 1.0}\xff\xfe\n')  # a damaged disk block
    with pytest.warns(UserWarning, match=f"{out / 'metrics.jsonl'}: line 5 is not a complete record; dropped"):
        assert train(out, data, "--resume", "--max-iters", "3") == 0
    assert steps_logged(out) == [0, 1, 2, 2, 3, 3]
    assert all(json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("flag, value", [("--atol", "-1"), ("--rtol", "-1e-4"), ("--atol", "nan"), ("--rtol", "inf")])
def test_gradcheck_refuses_a_tolerance_that_is_negative_or_not_finite(capsys, flag, value):
    assert main(["gradcheck", "--op", "matmul", f"{flag}={value}"]) == 2
    assert error_line(capsys) == f"gradflow gradcheck: {flag} must be a finite non-negative number, got {float(value)}"


def test_a_gpt_block_obeys_bias_false_in_its_layer_norms_and_an_older_run_still_resumes(tmp_path, data, monkeypatch):
    """bias=False leaves no bias in any LayerNorm; a run saved while the blocks' norms kept theirs resumes
    and exports with them, as it was trained."""
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8, bias=False)
    assert not [name for name, _ in GPT(config).named_parameters() if name.endswith("bias")]
    assert {n for n, _ in GPT(replace(config, bias=True)).named_parameters() if "norm.bias" in n} == {
        f"blocks.{i}.{norm}.bias" for i in (0, 1) for norm in ("attn_norm", "ffn_norm")
    }

    def older_block(self, c, dtype=None):  # the blocks as they were built before they obeyed bias
        block_init(self, c, dtype)
        self.attn_norm = gf.nn.LayerNorm(c.n_embd, eps=c.eps, dtype=dtype)
        self.ffn_norm = gf.nn.LayerNorm(c.n_embd, eps=c.eps, dtype=dtype)

    block_init, out = Block.__init__, tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(Block, "__init__", older_block)
        assert train(out, data, "--max-iters", "3", "--eval-interval", "3") == 0
    saved = load_checkpoint(out).arrays
    assert "model/blocks.0.attn_norm.bias" in saved

    assert train(out, data, "--resume", "--max-iters", "5") == 0  # resumes with the optimizer's state for them
    ckpt = load_checkpoint(out)
    model = model_from_meta(ckpt)
    ckpt.restore(model)
    assert model.blocks[0].ffn_norm.bias is not None and ckpt.meta["step"] == 5
    assert np.array_equal(model.blocks[0].ffn_norm.bias.numpy(), ckpt.arrays["model/blocks.0.ffn_norm.bias"])
    assert main(["export", "--checkpoint", str(out), "--to", "hf", str(tmp_path / "hf")]) == 0
    exported = load_file(tmp_path / "hf" / "model.safetensors")
    assert np.array_equal(exported["transformer.h.0.ln_2.bias"], ckpt.arrays["model/blocks.0.ffn_norm.bias"])
    assert exported["transformer.h.0.ln_2.bias"].any()  # trained, so not the zeros bias=False exports


def test_a_checkpoint_whose_older_norm_bias_has_the_wrong_shape_is_refused_in_one_line(tmp_path, data, capsys):
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "1", "--eval-interval", "1") == 0
    rewrite(out / "ckpt.npz", lambda arrays: arrays.update({"model/blocks.0.attn_norm.bias": np.zeros(5, np.float32)}))
    assert main(["generate", "--checkpoint", str(out), "--max-new-tokens", "1"]) == 2
    assert error_line(capsys) == (
        f"gradflow generate: checkpoint {out / 'ckpt.npz'}: model/blocks.0.attn_norm.bias has shape (5,) "
        "but its config implies (16,)"
    )
