"""What the commands never lose: export and graph replace nothing they did not write, one process writes a
run folder at a time, a fine-tuning run resumes on the content of its data, and stopping `train --processes`
stops every rank, saved (docs/reliability.md)."""

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import batch_losses, train_line, wait_for_steps

import gradflow as gf
from gradflow.cli import main
from gradflow.models.llama import Llama, LlamaConfig
from gradflow.pretrained import GGUFFile, smollm2_path
from gradflow.text import PretrainedBPETokenizer
from gradflow.training.checkpoint import load_checkpoint
from gradflow.training.run_lock import FolderInUse, FolderLock, run_lock

TINY = ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "8", "--batch-size", "2"]
TINY += ["--eval-iters", "1", "--sample-tokens", "0"]


def train(out, *flags):
    text = out.parent / "tiny.txt"
    text.write_text("to be or not to be, that is the question. " * 20)
    assert main(["train", "--data", str(text), *TINY, "--max-iters", "2", *flags, "--out-dir", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run trained for two steps; tests copy it before anything may touch it."""
    return train(tmp_path_factory.mktemp("trained") / "run")


@pytest.fixture
def run(trained, tmp_path):
    """A copy of the trained run, in this test's folder: ckpt.npz, metrics.jsonl, loss.png."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def contents(folder):
    """{file: bytes} of everything under folder."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def export(capsys, checkpoint, out, *flags):
    """(exit code, stderr) of gradflow export --to hf."""
    capsys.readouterr()
    code = main(["export", "--checkpoint", str(checkpoint), "--to", "hf", str(out), *flags])
    return code, capsys.readouterr().err


HOLD = """
import sys, time
from gradflow.training.run_lock import FolderLock
FolderLock(sys.argv[1], sys.argv[2], "a test").acquire()
print("held", flush=True)
time.sleep(600)
"""


@contextlib.contextmanager
def held(lock_file, folder):
    """Another process holding the lock in lock_file (over folder); its pid."""
    job = subprocess.Popen([sys.executable, "-c", HOLD, str(lock_file), str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert job.stdout.readline() == "held\n"
        yield job.pid
    finally:
        job.kill()
        job.communicate()


# --- export writes only where it wrote before ----------------------------------------------------------------


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_export_never_writes_into_the_run_it_exports(run, capsys, force):
    before = contents(run)
    code, err = export(capsys, run, run, *force)
    assert code == 2
    assert (
        err == f"gradflow export: {run} is a run's folder; an export never writes into a run: choose another folder\n"
    )
    assert contents(run) == before  # ckpt.npz, metrics.jsonl and loss.png, as they were


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_export_never_replaces_a_folder_holding_the_run(run, tmp_path, capsys, force):
    before = contents(tmp_path)
    code, err = export(capsys, run, tmp_path, *force)
    assert code == 2
    assert (
        err
        == f"gradflow export: {tmp_path} holds the run {run}; an export never replaces a run: choose another folder\n"
    )
    assert contents(tmp_path) == before


def test_export_never_writes_inside_a_run_folder(run, tmp_path, capsys):
    other = train(tmp_path / "other")  # not the run exported, but a run all the same
    for out, folder in ((run / "hf", run), (other / "deep" / "hf", other)):
        code, err = export(capsys, run / "ckpt.npz", out, "--force")
        assert code == 2
        assert err == (
            f"gradflow export: {out} lies inside the run folder {folder}; an export never writes into a run: "
            "choose another folder\n"
        )
        assert not out.exists()
    starting = tmp_path / "starting"  # a run that has not saved yet: its lock says it is one
    with run_lock(starting, "gradflow train"):
        code, err = export(capsys, run, starting / "hf")
    assert code == 2 and f"lies inside the run folder {starting}" in err


def test_force_replaces_only_an_earlier_export_as_it_was_written(run, tmp_path, capsys):
    out = tmp_path / "hf"
    assert export(capsys, run, out) == (0, "")
    marker = json.loads((out / "gradflow_export.json").read_text())
    written = ["model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"]
    listed = [
        {
            "name": name,
            "size": (out / name).stat().st_size,
            "sha256": hashlib.sha256((out / name).read_bytes()).hexdigest(),
        }
        for name in written
    ]
    assert marker == {"written_by": "gradflow export", "checkpoint": str(run / "ckpt.npz"), "files": listed}
    assert export(capsys, run, out, "--force") == (0, "")  # an earlier export: replaced

    (out / "notes.txt").write_text("mine")
    code, err = export(capsys, run, out, "--force")
    assert code == 2 and err == (
        f"gradflow export: {out} holds notes.txt, which gradflow export did not write: --force replaces only an "
        "earlier export as it was written; choose another folder\n"
    )
    assert (out / "notes.txt").read_text() == "mine"

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("{}")
    for marker in (None, "not json", '{"files": "config.json"}'):
        if marker is not None:
            (mine / "gradflow_export.json").write_text(marker)
        code, err = export(capsys, run, mine, "--force")
        assert code == 2 and err == (
            f"gradflow export: {mine} holds files gradflow export did not write (no gradflow_export.json listing "
            "them): --force replaces only an earlier export; choose another folder\n"
        )
        assert (mine / "config.json").read_text() == "{}"


def test_two_exports_to_one_folder_do_not_run_at_once(run, tmp_path, capsys):
    out = tmp_path / "hf"
    with held(tmp_path / ".hf.gradflow-lock", out) as pid:
        code, err = export(capsys, run, out)
    assert code == 2 and err == f"gradflow export: {out} is in use by process {pid} (a test); wait for it to end\n"
    assert not out.exists()
    assert export(capsys, run, out) == (0, "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "run"]  # no lock file left beside it


def test_graph_replaces_a_file_only_with_force(tmp_path, capsys):
    path = tmp_path / "my.svg"
    path.write_text("mine")
    assert main(["graph", "--toy", "-o", str(path)]) == 2
    assert capsys.readouterr().err == f"gradflow graph: --output {path} exists; add --force to replace it\n"
    assert path.read_text() == "mine"
    assert main(["graph", "--toy", "-o", str(path), "--force"]) == 0
    assert path.read_text().startswith("<?xml")


# --- one writer per run folder -------------------------------------------------------------------------------


def test_a_second_run_on_a_folder_in_use_is_refused_and_a_killed_one_leaves_no_lock(tmp_path, data, capsys):  # noqa: F811
    out = tmp_path / "run"
    command = [sys.executable, "-m", "gradflow", *train_line(data, out, "--max-iters", "100000")]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (out / "ckpt.npz").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        in_use = f"{out} is in use by process {first.pid} (gradflow train); wait for it to end\n"
        for argv in (
            train_line(data, out, "--resume", "--max-iters", "1"),
            train_line(data, out, "--overwrite", "--max-iters", "1"),
            ["finetune", "--resume", "--out-dir", str(out)],
        ):
            assert main(argv) == 2
            assert capsys.readouterr().err == f"gradflow {argv[0]}: {in_use}"
    finally:
        first.kill()  # SIGKILL: no handler runs, the lock file stays behind
        first.communicate()
    assert (out / ".gradflow-lock").exists()
    assert main(train_line(data, out, "--resume", "--max-iters", "1")) == 0  # the kernel released its lock
    assert not (out / ".gradflow-lock").exists()


def test_the_lock_is_the_kernels_and_leaves_nothing_behind(tmp_path, data, monkeypatch):  # noqa: F811
    folder = tmp_path / "run"
    with run_lock(folder, "one"):
        assert (folder / ".gradflow-lock").read_text() == f"{os.getpid()} one\n"
        with pytest.raises(FolderInUse, match=f"^{folder} is in use by process {os.getpid()} \\(one\\);"):
            FolderLock(folder / ".gradflow-lock", folder, "two").acquire()  # another open file: refused
    assert not folder.exists()  # made for the lock alone, and removed with it
    assert main(train_line(data, folder, "--n-layer", "0")) == 2  # refused before it wrote anything
    assert not folder.exists()
    monkeypatch.setattr("gradflow.training.run_lock.fcntl", None)  # Windows: no lock is taken
    with run_lock(folder, "one"), run_lock(folder, "two"):
        assert not folder.exists()


@pytest.mark.usefixtures("mpi")
def test_over_mpi_rank_0_alone_holds_the_lock_and_a_job_on_a_folder_in_use_is_refused(tmp_path, data):  # noqa: F811
    out = tmp_path / "run"
    command = [sys.executable, "-m", "gradflow", *train_line(data, out, "--max-iters", "2", "--processes", "2")]
    with held(out / ".gradflow-lock", out) as pid:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == f"gradflow train: {out} is in use by process {pid} (a test); wait for it to end\n"
    assert not (out / "ckpt.npz").exists()
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)  # two ranks, one lock
    assert done.returncode == 0, done.stderr
    assert load_checkpoint(out)["step"] == 2 and not (out / ".gradflow-lock").exists()


# --- stopping the MPI launcher -------------------------------------------------------------------------------


def processes_naming(text):
    """The pids of the live processes whose command line holds text (Linux's /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


@pytest.fixture
def no_rank_left(tmp_path):
    """After the test, kill whatever still runs in its folder (so that a failing test leaves no orphan)."""
    yield
    for pid in processes_naming(str(tmp_path)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the ranks in /proc (Linux)")
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
@pytest.mark.usefixtures("mpi", "no_rank_left")
def test_stopping_the_launcher_stops_every_rank_at_one_step_saved(tmp_path, data, stop):  # noqa: F811
    """kill, or Ctrl-C sent to the launcher alone, or SIGKILL (Linux tells mpiexec when its parent dies)."""
    out = tmp_path / "run"
    command = [sys.executable, "-m", "gradflow", *train_line(data, out, "--max-iters", "100000", "--processes", "2")]
    launcher = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_steps(out, 3)
    os.kill(launcher.pid, stop)
    said, _ = launcher.communicate(timeout=60)  # to the end of its output: every rank has closed it
    deadline = time.monotonic() + 10
    while processes_naming(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_naming(str(tmp_path)) == []  # no rank, no mpiexec left
    step = load_checkpoint(out)["step"]
    assert batch_losses(out)[-1][0] == step  # every rank stopped at the step rank 0 saved
    assert said.count("interrupted: saving a checkpoint and stopping") == 1 and f"done at step {step}:" in said
    assert launcher.returncode == (-stop if stop == signal.SIGKILL else 0)


# --- fine-tuning resumes on its data's content ---------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    return PretrainedBPETokenizer.from_gguf(GGUFFile(smollm2_path()).metadata)


def chats(reply):
    line = {"messages": [{"role": "user", "content": "Say it."}, {"role": "assistant", "content": reply}]}
    return "".join(json.dumps(line) + "\n" for _ in range(4))


def test_finetune_resumes_on_its_datas_content_wherever_it_is(tmp_path, capsys, monkeypatch, smollm2_tokenizer):
    """A tiny Llama on SmolLM2's vocabulary stands in for SmolLM2 (the command is what is tested)."""
    config = LlamaConfig(smollm2_tokenizer.vocab_size, n_layer=1, d_model=16, n_heads=2, n_kv_heads=1, d_ff=32)

    def tiny_smollm2():
        gf.manual_seed(0)  # the same base model every time, as SmolLM2's file is
        return Llama(config), smollm2_tokenizer

    monkeypatch.setattr("gradflow.cli.finetune.load_smollm2", tiny_smollm2)
    flags = ["--max-iters", "1", "--batch-size", "2", "--block-size", "96", "--eval-iters", "1"]
    flags += ["--eval-interval", "1", "--lora-r", "2"]
    first = tmp_path / "first"
    first.mkdir()
    (first / "chats.jsonl").write_text(chats("It."))
    assert main(["finetune", "--data", str(first / "chats.jsonl"), *flags, "--out-dir", str(first / "run")]) == 0
    saved = load_checkpoint(first / "run").meta
    assert saved["data_sha256"] == hashlib.sha256((first / "chats.jsonl").read_bytes()).hexdigest()

    moved = tmp_path / "moved"
    first.rename(moved)  # the run and its data, somewhere else
    kept = moved / "chats.jsonl"
    resume = ["finetune", "--resume", "--max-iters", "2", "--out-dir", str(moved / "run")]
    capsys.readouterr()
    assert main([*resume, "--data", str(kept)]) == 0, capsys.readouterr().err
    assert load_checkpoint(moved / "run")["data"] == str(kept)

    kept.write_text(chats("Something else."))  # edited in place
    for given in ([], ["--data", str(kept)]):
        capsys.readouterr()
        assert main([*resume, "--max-iters", "3", *given]) == 2
        assert capsys.readouterr().err == (
            f"gradflow finetune: --resume: {kept} is not the data this run was trained on (its sha256 differs); "
            "pass the original file with --data\n"
        )
    assert load_checkpoint(moved / "run")["step"] == 2
