"""Data parallelism over MPI: two ranks under mpiexec train as one process does, fail together, resume exactly.

The tests that need MPI run `mpiexec -n 2` in a subprocess and are skipped where mpi4py or mpiexec
is missing (pip install "gradflow[mpi]"); CI sets GRADFLOW_REQUIRE_MPI=1, which turns that skip
into a failure. The tests of a missing MPI run everywhere.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import TRAIN, VAL, batch, batch_losses, frozen_model, model, train_line, wait_for_steps

import gradflow as gf
from gradflow.cli import main
from gradflow.training import TrainConfig, Trainer
from gradflow.training.checkpoint import load_checkpoint

TESTS = str(Path(__file__).resolve().parent)
TEXT = "to be or not to be, that is the question. " * 20
OTHER_TEXT = "that is the question, to be or not to be. " * 20  # the same characters, other token ids


def run(command, cwd, timeout=120, **kw):
    """Run a command outside the checkout (the installed gradflow is the one imported); its CompletedProcess."""
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=timeout, **kw)


def script(tmp_path, text):
    """A Python file that can import the tests' helpers, for mpiexec to run."""
    path = tmp_path / "script.py"
    path.write_text(f"import sys\nsys.path.insert(0, {TESTS!r})\n{text}")
    return str(path)


def gradflow_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("gradflow")]


# --- the gradient and the steps ------------------------------------------------------------------------------

STEPS = """
import numpy as np
import gradflow as gf
from helpers import batch, frozen_model, model
from gradflow.training.distributed import Distributed, world

comm = world()
out = {}
m = model(dropout=0.0)
x, y = batch(rows=5)  # 5 rows: shards of 3 and 2
with Distributed(m, comm) as dp:
    out["loss"], out["stop"] = dp.forward_backward(x, y, stop=comm.rank == 1)
    out.update({"grad/" + n: p.grad.clone() for n, p in m.named_parameters()})
    out["eval_loss"] = dp.loss(x, y)
    m.zero_grad()
    _, loss = dp(x, y)  # called as the model is, by the Trainer's step
    loss.backward()
    out["called_loss"] = loss.item()
    out.update({"called/" + n: p.grad.clone() for n, p in m.named_parameters()})
    optimizer = gf.optim.AdamW(m.parameters(), lr=1e-2)
    for step in range(3):
        optimizer.zero_grad()
        dp.forward_backward(*batch(rows=4, seed=step + 1))
        optimizer.step()
    out.update({"weight/" + n: p.data for n, p in m.named_parameters()})
f = frozen_model()
with Distributed(f, comm) as dp:
    dp.forward_backward(*batch(rows=1))  # one row: rank 1 has no shard
    out.update({"frozen/" + n: p.grad for n, p in f.named_parameters() if p.grad is not None})
np.savez(f"rank{comm.rank}.npz", **out)
"""


@pytest.fixture(scope="module")
def two_ranks(mpi, tmp_path_factory):
    """What each of two ranks computed in STEPS: {rank: arrays}."""
    tmp = tmp_path_factory.mktemp("steps")
    done = run([*mpi, sys.executable, script(tmp, STEPS)], cwd=tmp)
    assert done.returncode == 0, done.stderr
    return {r: dict(np.load(tmp / f"rank{r}.npz")) for r in (0, 1)}


def one_process_gradient(m, x, y):
    _, loss = m(x, y)
    loss.backward()
    return loss.item(), {n: p.grad for n, p in m.named_parameters() if p.grad is not None}


def test_the_summed_gradient_is_the_whole_batch_gradient(two_ranks):
    loss, grads = one_process_gradient(model(dropout=0.0), *batch(rows=5))
    for rank in (0, 1):
        got = two_ranks[rank]
        assert float(got["loss"]) == pytest.approx(loss, rel=1e-6)
        assert float(got["eval_loss"]) == pytest.approx(loss, rel=1e-6)
        assert bool(got["stop"])  # rank 1 asked to stop: every rank hears it from the same Allreduce
        for name, g in grads.items():
            np.testing.assert_allclose(got[f"grad/{name}"], g, rtol=1e-4, atol=1e-6)


def test_called_as_the_model_it_computes_what_forward_backward_does(two_ranks):
    for got in two_ranks.values():
        assert float(got["called_loss"]) == float(got["loss"])
        for name in (k[len("grad/") :] for k in got if k.startswith("grad/")):
            np.testing.assert_array_equal(got[f"called/{name}"], got[f"grad/{name}"])


def test_three_steps_are_three_steps_of_one_process(two_ranks):
    m = model(dropout=0.0)
    optimizer = gf.optim.AdamW(m.parameters(), lr=1e-2)
    for step in range(3):
        optimizer.zero_grad()
        m(*batch(rows=4, seed=step + 1))[1].backward()
        optimizer.step()
    for name, p in m.named_parameters():
        np.testing.assert_array_equal(two_ranks[0][f"weight/{name}"], two_ranks[1][f"weight/{name}"])
        if name.endswith("k_proj.bias"):
            # a key's bias adds q.b to a whole row of scores, which the softmax ignores: its gradient is
            # 0 up to rounding (1e-12), which differs with the order of the sums, and Adam's step,
            # about lr g / (|g| + eps) with eps 1e-8, makes that rounding weights of order 1e-5
            continue
        np.testing.assert_allclose(two_ranks[0][f"weight/{name}"], p.data, rtol=1e-4, atol=1e-5)


def test_frozen_and_unused_parameters_get_no_gradient_and_an_idle_rank_adds_nothing(two_ranks):
    f = frozen_model()
    _, grads = one_process_gradient(f, *batch(rows=1))
    assert set(grads) == {"embed.weight", "head.weight", "head.bias"}
    for rank in (0, 1):
        got = {k[len("frozen/") :]: v for k, v in two_ranks[rank].items() if k.startswith("frozen/")}
        assert set(got) == set(grads)
        for name, g in grads.items():
            np.testing.assert_allclose(got[name], g, rtol=1e-5, atol=1e-7)


# --- the command line ----------------------------------------------------------------------------------------


def test_processes_2_starts_mpiexec_and_follows_the_one_process_run(mpi, tmp_path, data, capsys):
    flags = ["--max-iters", "12", "--eval-interval", "6"]
    assert main(train_line(data, tmp_path / "one", *flags)) == 0
    capsys.readouterr()
    command = [sys.executable, "-m", "gradflow", *train_line(data, tmp_path / "two", *flags, "--processes", "2")]
    done = run(command, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("training a gpt") == 1  # rank 0 alone prints
    one, two = batch_losses(tmp_path / "one"), batch_losses(tmp_path / "two")
    assert [s for s, _ in one] == [s for s, _ in two] == list(range(1, 13))
    np.testing.assert_allclose([loss for _, loss in two], [loss for _, loss in one], rtol=1e-5)
    saved = load_checkpoint(tmp_path / "two")
    assert saved["step"] == 12 and saved["train_config"]["processes"] == 2


def test_resume_under_mpi_continues_exactly(mpi, tmp_path, data):
    """With dropout: the masks' seeds come from gradflow's generator, the same on every rank and saved."""
    flags = ["--schedule", "constant", "--dropout", "0.2", "--eval-interval", "5"]
    ranks, gradflow = [*mpi, sys.executable, "-m", "gradflow"], [sys.executable, "-m", "gradflow"]
    whole = run([*ranks, *train_line(data, tmp_path / "whole", *flags, "--max-iters", "15"), "--distributed"], tmp_path)
    assert whole.returncode == 0, whole.stderr
    part = run([*ranks, *train_line(data, tmp_path / "part", *flags, "--max-iters", "5"), "--distributed"], tmp_path)
    assert part.returncode == 0, part.stderr
    # no --processes: the checkpoint says 2, and `gradflow train` starts mpiexec -n 2 itself
    done = run([*gradflow, *train_line(data, tmp_path / "part", "--resume", "--max-iters", "15")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stdout and "max_iters 5 -> 15" in done.stdout
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "part")
    assert a["step"] == b["step"] == 15
    assert a.arrays.keys() == b.arrays.keys()
    for key in a.arrays:
        np.testing.assert_array_equal(a.arrays[key], b.arrays[key])
    assert batch_losses(tmp_path / "whole") == batch_losses(tmp_path / "part")


FAILING = """
from mpi4py import MPI
from gradflow.cli import main
from gradflow.training import distributed, trainer

rank, where, step = MPI.COMM_WORLD.rank, sys.argv[1], int(sys.argv[2])
calls = []

def failing(real):
    def call(*args, **kwargs):
        calls.append(1)
        if rank == 1 and len(calls) == step:
            raise ValueError(f"broken at call {step}")
        return real(*args, **kwargs)
    return call

if where == "shard":  # inside the step's shard: told to every rank by the Allreduce
    distributed.shard_loss = failing(distributed.shard_loss)
else:  # outside any collective: this rank alone knows
    trainer.clip_grad_norm = failing(trainer.clip_grad_norm)
sys.exit(main(sys.argv[3:]))
"""


# the shard's 16th call is step 12's (each evaluation, at steps 0 and 10, makes two); clipping's 14th, step 14's
@pytest.mark.parametrize("where, call", [("shard", 16), ("alone", 14)])
def test_a_rank_that_raises_stops_every_rank_naming_it_and_the_checkpoint_stays(mpi, tmp_path, data, where, call):
    flags = ["--max-iters", "40", "--eval-interval", "10", "--distributed"]
    failing = [sys.executable, script(tmp_path, FAILING), where, str(call)]
    done = run([*mpi, *failing, *train_line(data, tmp_path / "run", *flags)], cwd=tmp_path)
    assert done.returncode == 1
    assert gradflow_lines(done.stderr) == [f"gradflow train: rank 1: broken at call {call}"], done.stderr
    assert load_checkpoint(tmp_path / "run")["step"] == 10
    assert [p.name for p in (tmp_path / "run").iterdir() if "tmp" in p.name] == []


REFUSED = """
import json
from mpi4py import MPI
from gradflow.cli import main
from helpers import TRAIN, VAL, model
from gradflow.training import TrainConfig, Trainer
from gradflow.training.distributed import RankError

rank = MPI.COMM_WORLD.rank
codes = [main([a.replace("RANK", str(rank)) for a in case]) for case in json.loads(sys.argv[1])]
config = TrainConfig(max_iters=1, batch_size=2, block_size=16, eval_iters=1, out_dir="weights")
try:  # built from another seed on rank 1
    Trainer(model(seed=rank), TRAIN, VAL, config, progress=False, distributed=True).fit()
except RankError as e:
    codes.append(str(e))
if rank == 0:
    print(json.dumps(codes))
"""


def test_ranks_that_do_not_start_alike_are_refused_in_one_line(mpi, tmp_path):
    (tmp_path / "data0.txt").write_text(TEXT)
    (tmp_path / "data1.txt").write_text(OTHER_TEXT)
    cases = [
        train_line("dataRANK.txt", tmp_path / "a", "--distributed"),  # each rank reads its own file
        train_line("data0.txt", tmp_path / "b", "--distributed", "--dropout", "0.RANK"),
        train_line("data0.txt", tmp_path / "c", "--distributed", "--processes", "3"),
    ]
    done = run([*mpi, sys.executable, script(tmp_path, REFUSED), json.dumps(cases)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    alike = "differs from rank 0's; every rank must start alike"
    assert json.loads(done.stdout.splitlines()[-1]) == [1, 1, 2, f"rank 1: the weights' checksum {alike}"]
    assert gradflow_lines(done.stderr) == [
        f"gradflow train: rank 1: the data (a hash of its token ids) {alike}",
        f"gradflow train: rank 1: the model config {alike}",
        "gradflow train: processes=3 but mpiexec started 2 ranks",
    ]
    assert not any((tmp_path / d / "ckpt.npz").exists() for d in "abc")


def stopped_and_saved(job, out_dir):
    """The job ended by itself after Ctrl-C, and rank 0 saved the step every rank stopped at."""
    out, err = job.communicate(timeout=60)
    assert job.returncode == 0, err
    step = load_checkpoint(out_dir)["step"]
    assert f"done at step {step}:" in out
    assert batch_losses(out_dir)[-1][0] == step
    return out


def test_ctrl_c_stops_every_rank_at_the_same_step_and_rank_0_saves(mpi, tmp_path, data):
    command = [sys.executable, "-m", "gradflow", *train_line(data, tmp_path / "run", "--max-iters", "100000")]
    job = subprocess.Popen(
        [*command, "--processes", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        start_new_session=True,  # a group of its own, as a terminal's foreground job: Ctrl-C goes to the group
    )  # fmt: skip
    wait_for_steps(tmp_path / "run", 3)
    os.killpg(job.pid, signal.SIGINT)  # mpiexec passes it on to every rank
    out = stopped_and_saved(job, tmp_path / "run")
    assert out.count("interrupted: saving a checkpoint and stopping") == 1  # rank 0 speaks for all


PIDS = """
import os
from mpi4py import MPI
from gradflow.cli import main
with open(f"rank{MPI.COMM_WORLD.rank}.pid", "w") as f:
    f.write(str(os.getpid()))
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_to_one_rank_stops_every_rank_at_the_same_step(mpi, tmp_path, data):
    flags = ["--max-iters", "100000", "--distributed"]
    command = [*mpi, sys.executable, script(tmp_path, PIDS), *train_line(data, tmp_path / "run", *flags)]
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    wait_for_steps(tmp_path / "run", 3)
    os.kill(int((tmp_path / "rank1.pid").read_text()), signal.SIGINT)  # rank 0 is not told: the Allreduce tells it
    stopped_and_saved(job, tmp_path / "run")


# --- without MPI ---------------------------------------------------------------------------------------------


def test_without_mpi4py_distributed_says_what_to_install(monkeypatch, tmp_path, data, capsys):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # what `import mpi4py` meets where it is not installed
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    install = 'pip install "gradflow[mpi]" (or pip install -e ".[mpi]" from a checkout)'
    for flags, needs in (
        (["--distributed"], "distributed training needs mpi4py, which is not installed"),
        (["--processes", "2"], "more than one process needs mpi4py, which is not installed"),
    ):
        assert main(train_line(data, tmp_path / "run", *flags)) == 2
        assert capsys.readouterr().err == f"gradflow train: {needs}: {install}\n"
    assert not (tmp_path / "run").exists()


def test_a_distributed_trainer_without_mpi4py_is_an_import_error_saying_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    config = TrainConfig(out_dir=str(tmp_path), batch_size=2, block_size=16)
    with pytest.raises(ImportError, match=r'^distributed training needs mpi4py, .*: pip install "gradflow\[mpi\]"'):
        Trainer(model(), TRAIN, VAL, config, progress=False, distributed=True)


def test_distributed_outside_mpiexec_trains_as_one_process(mpi, tmp_path, data, capsys):
    flags = ["--max-iters", "4", "--eval-interval", "2"]
    assert main(train_line(data, tmp_path / "plain", *flags)) == 0
    capsys.readouterr()
    alone = train_line(data, tmp_path / "alone", *flags, "--distributed")
    done = run([sys.executable, "-m", "gradflow", *alone], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("--distributed: this process runs alone (not under mpiexec): training in one process")
    assert batch_losses(tmp_path / "alone") == batch_losses(tmp_path / "plain")


KILLED = """
import os
import signal
import sys
from mpi4py import MPI
import gradflow.training.trainer as trainer
from gradflow.cli import main

calls, real = [], trainer.clip_grad_norm

def dies(*args, **kwargs):  # rank 1 is killed at step 14, as the kernel kills a process out of memory
    calls.append(1)
    if MPI.COMM_WORLD.rank == 1 and len(calls) == 14:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)

trainer.clip_grad_norm = dies
sys.exit(main(sys.argv[1:]))
"""


def test_a_killed_rank_stops_every_rank_and_the_checkpoint_stays(mpi, tmp_path, data):
    flags = ["--max-iters", "40", "--eval-interval", "10", "--distributed"]
    killed = [sys.executable, script(tmp_path, KILLED)]
    done = run([*mpi, *killed, *train_line(data, tmp_path / "run", *flags)], cwd=tmp_path)
    assert done.returncode != 0  # mpiexec says which process died, in its own words
    assert load_checkpoint(tmp_path / "run")["step"] == 10
    assert [p.name for p in (tmp_path / "run").iterdir() if "tmp" in p.name] == []


def test_processes_n_says_in_one_line_when_a_rank_died(monkeypatch, tmp_path, data, capsys):
    """What `--processes 2` adds after mpiexec's own report of a killed rank (exit code 9: SIGKILL)."""
    import gradflow.cli.train as cli_train

    monkeypatch.setattr(cli_train, "mpiexec", lambda: "mpiexec")
    monkeypatch.setattr(cli_train, "launch", lambda command: 9)
    assert main(train_line(data, tmp_path / "run", "--processes", "2")) == 9
    assert capsys.readouterr().err == (
        "gradflow train: a rank died without a word (mpiexec ended with code 9: killed, or out of memory), "
        f"and mpiexec stopped every rank; the last checkpoint in {tmp_path / 'run'} is as it was\n"
    )
