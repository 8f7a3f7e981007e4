"""Odd but honest inputs work, or fail in one line: a checkpoint copied without its log, a log with
bytes that are not UTF-8, and tolerances that cannot mean anything for `gradflow gradcheck`."""

import json

import pytest
from helpers import error_line, steps_logged, train

from gradflow.cli import main


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
