"""The suite beside a user's own run. The README's first command, `gradflow train`, leaves a finished run in
out/ of the folder it was typed in; the tests started from that folder must pass and leave the run as it was
(conftest.py's own_folder runs every test in a folder of its own)."""

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def files(folder):
    """Every file and folder under folder: a file's bytes and modification time, a folder's name alone."""
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else None
        for p in folder.rglob("*")
    }


def test_the_cli_tests_pass_in_a_folder_holding_a_finished_run_and_leave_it_untouched(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    small = ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "2"]
    short = ["--max-iters", "2", "--eval-interval", "1", "--eval-iters", "1", "--sample-tokens", "0"]
    train = [sys.executable, "-m", "gradflow", "train", *small, *short]  # the README's command, made small
    subprocess.run(train, cwd=user, capture_output=True, check=True)
    run = files(user)
    snapshots = {"out/snapshots", *(f"out/snapshots/step-{step:08d}.npz" for step in range(3))}  # at each evaluation
    assert set(run) == {"out", "out/ckpt.npz", "out/metrics.jsonl", "out/loss.png", *snapshots}

    # only pytest's own machinery: an installed plugin may write into the folder it runs in, as a user's would
    # (so no workers either: the project's addopts ask pytest-xdist for them)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    pytest = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider"]
    pytest.append(f"--basetemp={tmp_path / 'pytest'}")
    done = subprocess.run([*pytest, str(TESTS / "test_cli.py")], cwd=user, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert files(user) == run
