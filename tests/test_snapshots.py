"""A run's weight snapshots (gradflow/training/snapshots.py): at each evaluation and every tenth of the run,
the weights as they were at that step; bounded on disk; a resumed run ends with the snapshots of a run
never stopped; a snapshot that cannot be written never stops the run nor touches the checkpoint."""

import numpy as np
import pytest
from helpers import TRAIN, VAL, config, model

from gradflow.training import snapshots
from gradflow.training.checkpoint import load_checkpoint
from gradflow.training.snapshots import explored, read_snapshot, saved
from gradflow.training.trainer import Trainer


@pytest.fixture(autouse=True)
def no_picture(monkeypatch):
    """loss.png is not looked at here, and drawing it is most of a short run's time."""
    monkeypatch.setattr(Trainer, "plot", lambda self: None)


def trained(out, **kw):
    trainer = Trainer(model(dropout=0.0), TRAIN, VAL, config(out, eval_iters=1, batch_size=2, **kw), progress=False)
    trainer.fit()
    return trainer


def test_a_run_keeps_its_weights_at_each_tenth_and_evaluation(tmp_path):
    """50 steps, evaluated every 12: snapshots at 0, 5, ..., 50 and 12, 24, 36, 48, each the weights of its
    step (the last one the checkpoint's), every parameter of this small model, and no two alike."""
    trainer = trained(tmp_path / "run", max_iters=50, eval_interval=12)
    steps = list(saved(tmp_path / "run"))
    assert steps == sorted({*range(0, 51, 5), 12, 24, 36, 48})
    last = read_snapshot(saved(tmp_path / "run")[50])
    assert set(last) == {name for name, _ in trainer.model.named_parameters()}
    ckpt = load_checkpoint(tmp_path / "run").model_state()
    for name, value in last.items():
        np.testing.assert_array_equal(value, ckpt[name])
    shots = [read_snapshot(path) for path in saved(tmp_path / "run").values()]
    for before, after in zip(shots, shots[1:]):
        assert not np.array_equal(before["blocks.0.attn.q_proj.weight"], after["blocks.0.attn.q_proj.weight"])


def test_a_resumed_run_ends_with_the_snapshots_of_a_run_never_stopped(tmp_path):
    """Stopped at step 20 (its checkpoint there), with a stale snapshot at 30 left as a crash after it would:
    the resumed run deletes that one, takes the steps again, and every snapshot equals the straight run's."""
    trained(tmp_path / "straight")

    def stop_at_20(trainer, step):
        if step == 20:
            trainer._stop = True

    parts = config(tmp_path / "parts", eval_iters=1, batch_size=2)
    Trainer(model(dropout=0.0), TRAIN, VAL, parts, on_eval=stop_at_20, progress=False).fit()
    assert list(saved(tmp_path / "parts")) == [0, 4, 8, 10, 12, 16, 20]
    folder = tmp_path / "parts" / "snapshots"
    (folder / "step-00000030.npz").write_bytes((folder / "step-00000020.npz").read_bytes())
    resumed = Trainer(model(dropout=0.0), TRAIN, VAL, parts, progress=False)
    resumed.resume()
    resumed.fit()
    straight, parts = saved(tmp_path / "straight"), saved(tmp_path / "parts")
    assert list(straight) == [0, 4, 8, 10, 12, 16, 20, 24, 28, 30, 32, 36, 40] and list(parts) == list(straight)
    for step in straight:
        a, b = read_snapshot(straight[step]), read_snapshot(parts[step])
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])


def test_a_fresh_run_over_an_old_one_keeps_none_of_its_snapshots(tmp_path):
    trained(tmp_path / "run", max_iters=30)
    Trainer(
        model(), TRAIN, VAL, config(tmp_path / "run", eval_iters=1, max_iters=3), progress=False, overwrite=True
    ).fit()
    assert list(saved(tmp_path / "run")) == [0, 1, 2, 3]


def test_snapshots_stay_within_their_budget_spread_over_the_run(tmp_path, monkeypatch):
    """At most MOST of them: past it, the one whose neighbours lie closest goes; the first and the newest stay."""
    monkeypatch.setattr(snapshots, "MOST", 5)
    trained(tmp_path / "run", max_iters=40, eval_interval=40)  # snapshots every 4 steps: 11 of them made
    steps = list(saved(tmp_path / "run"))
    gaps = np.diff(steps)
    assert len(steps) == 5 and steps[0] == 0 and steps[-1] == 40 and gaps.max() <= 12  # 10 apart, were they even
    monkeypatch.setattr(snapshots, "BUDGET", 1)  # less than one snapshot: three are kept all the same
    trained(tmp_path / "small", max_iters=40, eval_interval=40)
    steps = list(saved(tmp_path / "small"))
    assert len(steps) == 3 and steps[0] == 0 and steps[-1] == 40


def test_a_larger_model_keeps_the_matrix_the_explorer_shows(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshots, "WHOLE", 100)  # fewer numbers than the tiny model has
    trainer = trained(tmp_path / "run", max_iters=10)
    name = explored(trainer.model.named_parameters())
    assert name == "blocks.0.attn.q_proj.weight"
    assert all(set(read_snapshot(path)) == {name} for path in saved(tmp_path / "run").values())


def test_a_snapshot_that_cannot_be_written_leaves_the_run_going(tmp_path, monkeypatch, capsys):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshots, "write_arrays", full)
    trainer = trained(tmp_path / "run", max_iters=4)
    assert trainer.step == 4 and load_checkpoint(tmp_path / "run")["step"] == 4 and saved(tmp_path / "run") == {}
    err = capsys.readouterr().err
    assert "No space left on device; the run goes on without it" in err


@pytest.mark.parametrize(
    "named, chosen", [([("wte", 2), ("blocks.0.w", 2)], "blocks.0.w"), ([("a", 1), ("b", 2)], "b")]
)
def test_the_explored_parameter_is_the_first_matrix_of_the_first_block(named, chosen):
    assert explored((name, np.zeros((2,) * ndim)) for name, ndim in named) == chosen
