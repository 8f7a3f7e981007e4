"""Nothing lost, round 4 (docs/reliability.md): a run folder from someone else, a crafted manifest, a long
run. Links, FIFOs and folders where gradflow writes are refused by name and their targets kept; export's
--force replaces only files that still match its manifest; JSON is read in linear time within a size and a
depth; a full disk keeps the earlier report or export; SIGTERM and SIGHUP save as Ctrl-C does."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import TINY, error_line

from gradflow.cli import main
from gradflow.exercises import EXERCISES, workspace
from gradflow.training.checkpoint import load_checkpoint

GRADFLOW = [sys.executable, "-c", "import sys; from gradflow.cli import main; sys.exit(main(sys.argv[1:]))"]
REFUSED = "not a regular file; gradflow reads and writes only regular files there"


def train(out, *flags):
    text = out.parent / "tiny.txt"
    text.write_text("to be or not to be, that is the question. " * 20)
    return main(["train", "--data", str(text), *TINY, "--out-dir", str(out), *flags])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "run"
    assert train(out, "--max-iters", "2") == 0
    return out


@pytest.fixture
def run(trained, tmp_path, capsys):
    """A copy of a two-step run in this test's folder, with a file of the user's beside it (victim.txt)."""
    (tmp_path / "victim.txt").write_text("the user's own file\n")
    shutil.copy(trained.parent / "tiny.txt", tmp_path / "tiny.txt")
    copy = Path(shutil.copytree(trained, tmp_path / "run"))
    capsys.readouterr()
    return copy


def contents(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def plant(path, kind, victim):
    """Put a symbolic link to `victim`, a dangling link, a FIFO or a folder at `path`."""
    if kind == "link":
        path.symlink_to(victim)
    elif kind == "dangling link":
        path.symlink_to(victim.with_name("made_by_gradflow.txt"))
    elif kind == "FIFO":
        os.mkfifo(path)
    else:
        path.mkdir()
    return {"link": "a symbolic link", "dangling link": "a symbolic link", "FIFO": "a FIFO", "folder": "a folder"}[kind]


KINDS = ["link", "dangling link", "FIFO", "folder"]


# --- 1. nothing is written through a link, into a FIFO or over a folder ----------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_run_lock_is_refused_by_name_and_its_target_kept(run, capsys, kind):
    victim = run.parent / "victim.txt"
    said = plant(run / ".gradflow-lock", kind, victim)
    before = contents(run)
    assert main(["train", "--resume", "--out-dir", str(run), "--max-iters", "3", "--sample-tokens", "0"]) == 2
    assert error_line(capsys) == f"gradflow train: {run / '.gradflow-lock'} is {said}, {REFUSED}"
    assert victim.read_text() == "the user's own file\n"
    assert not (run.parent / "made_by_gradflow.txt").exists()  # a dangling link creates nothing
    assert contents(run) == before and os.path.lexists(run / ".gradflow-lock")  # the link is not removed


@pytest.mark.parametrize("kind", ["link", "FIFO"])
def test_exports_lock_beside_its_target_is_never_written_through(run, capsys, kind):
    victim = run.parent / "victim.txt"
    lock = run.parent / ".hf.gradflow-lock"
    said = plant(lock, kind, victim)
    assert main(["export", "--checkpoint", str(run), "--to", "hf", str(run.parent / "hf")]) == 2
    assert error_line(capsys) == f"gradflow export: {lock} is {said}, {REFUSED}"
    assert victim.read_text() == "the user's own file\n" and not (run.parent / "hf").exists()


@pytest.mark.parametrize("name", ["metrics.jsonl", "loss.png"])
def test_a_runs_files_are_never_written_through_a_link(run, capsys, name):
    """metrics.jsonl is rewritten on resume (cut to the checkpoint's step), then appended to; loss.png drawn."""
    victim = run.parent / "victim.txt"
    (run / name).unlink()
    (run / name).symlink_to(victim)
    assert main(["train", "--resume", "--out-dir", str(run), "--max-iters", "3", "--sample-tokens", "0"]) == 2
    assert error_line(capsys) == f"gradflow train: {run / name} is a symbolic link, {REFUSED}"
    assert victim.read_text() == "the user's own file\n"


@pytest.mark.parametrize("command", ["graph --toy", "explore --toy"])
def test_force_replaces_a_file_never_what_a_link_points_to(tmp_path, capsys, command):
    victim, link = tmp_path / "victim.txt", tmp_path / "page.svg"
    victim.write_text("the user's own file\n")
    link.symlink_to(victim)
    assert main([*command.split(), "-o", str(link), "--force"]) == 2
    assert error_line(capsys) == f"gradflow {command.split()[0]}: {link} is a symbolic link, {REFUSED}"
    assert victim.read_text() == "the user's own file\n" and link.is_symlink()


# --- 2. export --force replaces only what export wrote, as it wrote it -------------------------------------------


@pytest.fixture
def exported(run, capsys):
    out = run.parent / "hf"
    assert main(["export", "--checkpoint", str(run), "--to", "hf", str(out)]) == 0
    capsys.readouterr()
    return out


def force(run, out, capsys):
    """(exit code, the error line or "") of `export --force` of the run to out."""
    code = main(["export", "--checkpoint", str(run), "--to", "hf", str(out), "--force"])
    return code, error_line(capsys) if code else ""


def listed_also(manifest, name):
    """The manifest's listing with `name` added, in the listing's own form."""
    said = json.loads(manifest.read_text())
    entry = said["files"][0]
    said["files"].append({**entry, "name": name} if isinstance(entry, dict) else name)
    return json.dumps(said)


def test_a_manifest_naming_a_subfolder_deletes_nothing(run, exported, capsys):
    (exported / "run2").mkdir()
    (exported / "run2" / "ckpt.npz").write_bytes((run / "ckpt.npz").read_bytes())
    (exported / "gradflow_export.json").write_text(listed_also(exported / "gradflow_export.json", "run2"))
    before = contents(exported)
    code, line = force(run, exported, capsys)
    assert code == 2 and line.startswith(f"gradflow export: {exported}/gradflow_export.json lists 'run2'")
    assert contents(exported) == before


def test_a_manifest_that_is_a_link_is_never_trusted(run, exported, capsys):
    (exported / "notes.txt").write_text("mine")
    crafted = run.parent / "crafted.json"
    crafted.write_text(listed_also(exported / "gradflow_export.json", "notes.txt"))
    (exported / "gradflow_export.json").unlink()
    (exported / "gradflow_export.json").symlink_to(crafted)
    code, line = force(run, exported, capsys)
    assert code == 2 and line.startswith(f"gradflow export: {exported}/gradflow_export.json is a symbolic link")
    assert (exported / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_force_refuses_a_file_changed_since_the_export(run, exported, capsys, name):
    data = bytearray((exported / name).read_bytes())
    data[-2] ^= 1  # one bit, the size kept: only the hash tells
    (exported / name).write_bytes(data)
    code, line = force(run, exported, capsys)
    assert code == 2 and line == (
        f"gradflow export: {exported}/{name} changed since gradflow export wrote it: --force replaces only an "
        "earlier export as it was written; choose another folder"
    )
    assert (exported / name).read_bytes() == data
    (exported / name).unlink()  # what is left is the export as written: replaced
    assert force(run, exported, capsys) == (0, "")
    assert sorted(p.name for p in exported.parent.iterdir()) == ["hf", "run", "tiny.txt", "victim.txt"]


def dead_pid():
    """The id of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def test_temporaries_of_a_killed_export_are_removed_and_nothing_else(run, capsys):
    out, pid = run.parent / "hf", dead_pid()
    killed = run.parent / f".hf.{pid}.tmp"  # what a kill -9 during an export leaves
    killed.mkdir()
    (killed / "model.safetensors").write_bytes(b"half")
    (killed / ".config.json.123.tmp").write_text("{")
    other, third = dead_pid(), dead_pid()  # each a fresh process id, none of them the same
    foreign = run.parent / f".hf.{other}.tmp"  # not export's files
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    alive = run.parent / f".hf.{os.getppid()}.tmp"  # an export still running
    alive.mkdir()
    (alive / "config.json").write_text("{}")
    models = run.parent / "models"  # a folder of the user's, and a link to it named as a killed export's
    models.mkdir()
    (models / "config.json").write_text("{}")
    planted = run.parent / f".hf.{third}.tmp"
    planted.symlink_to(models)
    assert main(["export", "--checkpoint", str(run), "--to", "hf", str(out)]) == 0
    assert not killed.exists()
    assert (foreign / "notes.txt").read_text() == "mine" and (alive / "config.json").read_text() == "{}"
    assert (models / "config.json").read_text() == "{}"


# --- 3. JSON read in linear time, within a size and a depth ---------------------------------------------------

TIMED = """
import json, sys, time
from gradflow.engine import bounded_json

def seconds(text):
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        try:
            bounded_json.loads(text, "it")
        except ValueError:
            pass
        best = min(best, time.perf_counter() - start)
    return best

n = 200_000
crafted = {"unclosed string of escaped quotes": '"' + '\\\\"' * n, "nested": "[" * n,
           "quotes and brackets": '"[' * n, "lone backslashes": '"' + "\\\\" * (2 * n)}
plain = seconds("[" + ",".join(["1234"] * (2 * n // 5)) + "]")
print(json.dumps({what: seconds(text) / plain for what, text in crafted.items()}))
"""


def test_crafted_json_takes_time_in_proportion_to_its_size():
    """Each crafted text of 200,000 to 400,000 characters is read (refused) within a small multiple of the
    time a plain document of its size takes: linear, where a rescan from every quote took minutes."""
    done = subprocess.run([sys.executable, "-c", TIMED], capture_output=True, text=True, timeout=60)
    ratios = json.loads(done.stdout)
    assert all(ratio < 50 for ratio in ratios.values()), ratios


def write_description(checkpoint, text):
    """Replace the checkpoint's description (its JSON) by `text`, keeping its arrays."""
    import numpy as np

    with np.load(checkpoint) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["__meta__"] = np.frombuffer(text.encode(), dtype=np.uint8)
    with open(checkpoint, "wb") as f:
        np.savez_compressed(f, **arrays)


def test_the_crafted_60_kb_checkpoint_is_one_line_at_once(run, capsys):
    write_description(run / "ckpt.npz", '"' + '\\"' * 200_000)
    assert (run / "ckpt.npz").stat().st_size < 100_000
    said = f"checkpoint {run / 'ckpt.npz'}: Unterminated string starting at: line 1 column 1 (char 0)"
    argv = [*GRADFLOW, "generate", "--checkpoint", str(run), "--max-new-tokens", "1"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)  # it took over 120 s
    assert done.returncode == 2 and done.stderr.startswith(f"gradflow generate: {said}"), done.stderr
    assert done.stderr.count("\n") == 1
    assert main(["train", "--resume", "--out-dir", str(run)]) == 2
    assert error_line(capsys).startswith(f"gradflow train: {said}")


DEEP = "[" * 100_000 + "]" * 100_000


def test_a_deep_metrics_line_is_dropped_on_resume_and_in_the_explorer(run, capsys):
    with open(run / "metrics.jsonl", "a") as f:
        f.write(DEEP + "\n")
    lines = len((run / "metrics.jsonl").read_text().splitlines())
    with pytest.warns(UserWarning, match=f"line {lines} is not a complete record; dropped"):
        page = run.parent / "page.html"
        assert main(["explore", "--checkpoint", str(run), "-o", str(page), "--prompt", "to be"]) == 0
    assert page.exists()
    with pytest.warns(UserWarning, match=f"line {lines} is not a complete record; dropped"):
        assert main(["train", "--resume", "--out-dir", str(run), "--max-iters", "3", "--sample-tokens", "0"]) == 0


def test_a_deep_export_manifest_is_one_line(run, exported, capsys):
    (exported / "gradflow_export.json").write_text(DEEP)
    code, line = force(run, exported, capsys)
    assert code == 2 and "gradflow_export.json listing them" in line


@pytest.fixture
def ws(tmp_path):
    ws = tmp_path / "ws"
    workspace.start(ws)
    return ws


@pytest.mark.parametrize("kind", ["nested", "300 MB", "FIFO", "link"])
def test_a_progress_file_gradflow_cannot_read_is_one_line_and_kept(ws, capsys, kind):
    progress = ws / workspace.PROGRESS
    if kind == "nested":
        progress.write_text(DEEP)
        said = f"{progress} nests 100000 levels deep; at most 64 are read"
    elif kind == "300 MB":
        with open(progress, "wb") as f:
            f.truncate(300 << 20)  # sparse: no disk used
        said = f"{progress} holds {300 << 20:,} bytes; at most 1,048,576 are read"
    else:
        said = f"{progress} is {plant(progress, kind, ws / 'victim.txt')}, {REFUSED}"
        (ws / "victim.txt").write_text("the user's own file\n")
    size = os.lstat(progress).st_size
    start = time.perf_counter()
    assert main(["exercises", "check", EXERCISES[0].name, "--dir", str(ws)]) == 2
    assert time.perf_counter() - start < 30  # the 300 MB file was read and rewritten: 834 s
    assert error_line(capsys).startswith(f"gradflow exercises: {said}: it is not the progress file gradflow writes")
    assert os.lstat(progress).st_size == size
    assert not (ws / "victim.txt").exists() or (ws / "victim.txt").read_text() == "the user's own file\n"


# --- 4. the explorer draws a long run, and NaN as gaps ----------------------------------------------------------


def test_a_long_runs_curves_are_thinned_keeping_spikes_and_nan_named_by_line(run, capsys):
    records = [{"step": s, "loss": 2.0, "lr": 1e-3} for s in range(1, 150_001)]
    records[77_776]["loss"] = 50.0  # a spike at step 77,777
    records[99]["loss"] = float("nan")
    evals = [{"step": s, "train_loss": 2.0, "val_loss": 2.1} for s in range(0, 150_001, 100)]
    evals[3]["val_loss"] = float("inf")
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*records, *evals]))
    page = run.parent / "page.html"
    assert main(["explore", "--checkpoint", str(run), "-o", str(page), "--prompt", "to be"]) == 0
    found = re.search(r'<script type="application/json" id="gf-data">(.*?)</script>', page.read_text(), re.S)
    t = json.loads(found[1].replace("<\\/", "</"))["training"]
    assert len(t["losses"]) <= 4000 and len(t["evals"]) <= 4000
    assert [77_777, 50.0] in t["losses"] and [100, None] in t["losses"]  # the spike, the gap
    assert t["losses"][0][0] == 1 and t["losses"][-1][0] == 150_000
    where = f"{run.name}/metrics.jsonl"  # the run named by its folder, never by the absolute path it was given
    assert t["notes"] == [f"{where}, line 100: loss is nan", f"{where}, line 150004: val_loss is inf"]
    assert page.stat().st_size < 3_000_000


# --- 5. reports written atomically, never over what is not a report ---------------------------------------------


def test_junit_never_overwrites_a_file_that_is_not_a_report(ws, tmp_path, capsys):
    solved = ws / workspace.file_name(EXERCISES[1])
    solved.write_text("# the learner's solved file\n")
    for target, said in ((solved, f"{solved} exists and is not a JUnit report; it is kept: choose another file"),):
        assert main(["exercises", "check", "--dir", str(ws), "--junit", str(target)]) == 2
        assert error_line(capsys) == f"gradflow exercises: {said}"
    assert solved.read_text() == "# the learner's solved file\n"
    link = tmp_path / "results.xml"
    link.symlink_to(tmp_path / "victim.txt")
    (tmp_path / "victim.txt").write_text("<?xml mine")
    assert main(["exercises", "check", "--dir", str(ws), "--junit", str(link)]) == 2
    assert error_line(capsys) == f"gradflow exercises: {link} is a symbolic link, {REFUSED}"
    assert (tmp_path / "victim.txt").read_text() == "<?xml mine"


FULL_DISK = """
import resource, signal, sys
from gradflow.cli import main
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as a full disk's
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY))
sys.exit(main(sys.argv[2:]))
"""


def full_disk(limit, *argv):
    """gradflow argv with files limited to `limit` bytes: (exit code, stderr)."""
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(limit), *argv], capture_output=True, text=True)
    return done.returncode, done.stderr


def test_a_full_disk_keeps_the_earlier_junit_report(ws, tmp_path):
    junit = tmp_path / "results.xml"
    assert main(["exercises", "check", EXERCISES[0].name, "--dir", str(ws), "--junit", str(junit)]) == 1
    earlier = junit.read_bytes()
    code, err = full_disk(4096, "exercises", "check", "--dir", str(ws), "--junit", str(junit))
    said = f"could not write the JUnit report {junit} (File too large); the previous one is unchanged"
    assert code == 2 and err == f"gradflow exercises: {said}\n"
    assert junit.read_bytes() == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.xml", "ws"]


def test_a_full_disk_during_export_is_one_line_and_keeps_the_earlier_export(run, exported):
    before = contents(exported)
    code, err = full_disk(8192, "export", "--checkpoint", str(run), "--to", "hf", str(exported), "--force")
    assert (
        code == 2
        and err == f"gradflow export: could not write {exported} (File too large); what was there is unchanged\n"
    )
    assert contents(exported) == before
    assert sorted(p.name for p in exported.parent.iterdir()) == ["hf", "run", "tiny.txt", "victim.txt"]


# --- 6. SIGTERM and SIGHUP save as Ctrl-C does ------------------------------------------------------------------


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_sigterm_and_sighup_to_a_single_process_run_save_where_it_stopped(tmp_path, stop):
    out = tmp_path / "run"
    text = tmp_path / "tiny.txt"
    text.write_text("to be or not to be, that is the question. " * 20)
    argv = [*GRADFLOW, "train", "--data", str(text), *TINY, "--out-dir", str(out), "--max-iters", "100000"]
    job = subprocess.Popen(
        [*argv, "--eval-interval", "100000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (out / "metrics.jsonl").exists() or (out / "metrics.jsonl").read_text().count('"loss"') < 3:
        assert time.monotonic() < deadline and job.poll() is None
        time.sleep(0.05)
    job.send_signal(stop)
    said, _ = job.communicate(timeout=60)
    assert job.returncode == 0
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert load_checkpoint(out)["step"] == steps[-1] >= 3  # the work since step 0's evaluation is kept
    assert f"stopped by {stop.name}: saving a checkpoint and stopping" in said
