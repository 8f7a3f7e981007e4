"""Data parallelism over processes: the shards' summed gradients are the batch's gradient."""

import numpy as np
import pytest
from test_train import TOK, TRAIN, VAL
from test_train import model as dropout_model

import gradflow as gf
from gradflow.text import get_batch
from gradflow.training.data_parallel import DataParallel, shards
from gradflow.training.trainer import TrainConfig, Trainer


def model(seed=0, dropout=0.0):
    return dropout_model(seed, dropout)


def batch(rows=5, seed=0):
    return get_batch(TRAIN, rows, 16, np.random.default_rng(seed))


def plain_gradients(m, x, y):
    for p in m.parameters():
        p.grad = None
    _, loss = m(x, y)
    loss.backward()
    return loss.item(), [p.grad.copy() for p in m.parameters()]


def test_shards_cut_the_rows_evenly_and_never_empty():
    assert shards(12, 2) == [slice(0, 6), slice(6, 12)]
    assert shards(5, 3) == [slice(0, 1), slice(1, 3), slice(3, 5)]
    assert shards(2, 4) == [slice(0, 1), slice(1, 2)]  # fewer rows than processes: fewer shards


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_sharded_gradient_equals_the_whole_batch_gradient(processes):
    m = model()
    x, y = batch(rows=5)  # 5 rows: shards of unequal size (2 + 3, or 1 + 2 + 2)
    loss, grads = plain_gradients(m, x, y)
    for p in m.parameters():
        p.grad = None
    with DataParallel(m, processes) as dp:
        assert dp.forward_backward(x, y) == pytest.approx(loss, rel=1e-6)
        for p, g in zip(m.parameters(), grads):
            np.testing.assert_allclose(p.grad, g, rtol=1e-4, atol=1e-6)
        with gf.no_grad():
            assert dp.loss(x, y) == pytest.approx(m(x, y)[1].item(), rel=1e-6)


def test_workers_see_the_optimizer_updates_in_place():
    """Three steps with two processes give the weights of three steps with one."""
    ms = [model(), model()]
    opts = [gf.optim.AdamW(m.parameters(), lr=1e-2) for m in ms]
    with DataParallel(ms[1], 2) as dp:
        for step in range(3):
            x, y = batch(rows=4, seed=step)
            for m, opt in zip(ms, opts):
                opt.zero_grad()
                if m is ms[0]:
                    m(x, y)[1].backward()
                else:
                    dp.forward_backward(x, y)
                opt.step()
    for a, b in zip(*(m.parameters() for m in ms)):
        np.testing.assert_allclose(a.data, b.data, rtol=1e-4, atol=1e-5)


def test_replaced_parameter_arrays_are_shared_again():
    m, other = model(seed=0), model(seed=1)
    x, y = batch()
    with DataParallel(m, 2) as dp:
        dp.forward_backward(x, y)
        m.load_state_dict(other.state_dict())  # may give parameters new arrays
        got = dp.loss(x, y)
    with gf.no_grad():
        assert got == pytest.approx(other(x, y)[1].item(), rel=1e-6)


def test_a_worker_error_is_raised_in_the_main_process_with_its_traceback():
    m = model()
    x, y = batch(rows=4)
    y_bad = y.copy()
    y_bad[3, 0] = TOK.vocab_size + 5  # a target out of range, in the worker's shard only
    with DataParallel(m, 2) as dp:
        with pytest.raises(RuntimeError, match=r"worker 1 failed on its shard:(.|\n)*cross_entropy"):
            dp.forward_backward(x, y_bad)
        dp.forward_backward(x, y)  # the worker still serves


def test_bad_use_is_a_clear_error():
    m = model()
    with pytest.raises(ValueError, match="processes must be a positive integer, got 0"):
        DataParallel(m, 0)
    dp = DataParallel(m, 2)
    x, y = batch(rows=4)
    with pytest.raises(ValueError, match="same number of rows"):
        dp.forward_backward(x, y[:3])
    dp.close()
    dp.close()  # closing twice is harmless
    with pytest.raises(RuntimeError, match="closed"):
        dp.forward_backward(x, y)


def test_close_stops_the_workers_and_gives_blas_back_its_threads():
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    dp = DataParallel(model(), 2)
    assert all(n == 1 for n in blas_threads())
    workers = list(dp.workers)
    assert all(w.is_alive() for w in workers)
    dp.close()
    assert not any(w.is_alive() for w in workers)
    assert blas_threads() == before


def test_trainer_with_processes_outside_mpiexec_says_how_to_start_them(tmp_path):
    """The Trainer's processes are MPI ranks (tests/test_distributed.py trains with two)."""
    cfg = TrainConfig(out_dir=str(tmp_path), processes=2)
    with pytest.raises(ValueError, match=r"^train: processes=2 but this process runs alone: start 2 with mpiexec -n 2"):
        Trainer(model(), TRAIN, VAL, cfg, progress=False)


def test_trainer_rejects_a_bad_number_of_processes(tmp_path):
    with pytest.raises(ValueError, match="processes must be a positive integer"):
        Trainer(model(), TRAIN, VAL, TrainConfig(out_dir=str(tmp_path), processes=0), progress=False)


class Frozen(gf.nn.Module):
    """An embedding and a head, a frozen matrix, and a parameter no shard uses."""

    def __init__(self):
        super().__init__()
        self.embed = gf.nn.Embedding(TOK.vocab_size, 8)
        self.head = gf.nn.Linear(8, TOK.vocab_size)
        self.frozen = gf.nn.Parameter(np.ones((8, 8), np.float32))
        self.frozen.requires_grad = False
        self.unused = gf.nn.Parameter(np.zeros(3, np.float32))

    def forward(self, x, y):
        logits = self.head(self.embed(x) @ self.frozen)
        return logits, gf.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def test_frozen_and_unused_parameters_get_no_gradient_as_in_one_process():
    gf.manual_seed(0)
    m = Frozen()
    x, y = batch(rows=4)
    with DataParallel(m, 2) as dp:
        dp.forward_backward(x, y)
    assert m.frozen.grad is None and m.unused.grad is None
    assert m.head.weight.grad is not None


def test_an_error_in_the_main_shard_leaves_no_reply_behind():
    m = model()
    x, y = batch(rows=4)
    y_bad = y.copy()
    y_bad[0, 0] = TOK.vocab_size + 5  # in the main process's shard
    with DataParallel(m, 2) as dp:
        with pytest.raises(IndexError, match="cross_entropy: target 19 is out of range"):
            dp.forward_backward(x, y_bad)
        for p in m.parameters():
            p.grad = None
        loss = dp.forward_backward(x, y)  # the worker's answer to the failed call is not taken for this one
        grads = [p.grad.copy() for p in m.parameters()]
    expected_loss, expected_grads = plain_gradients(m, x, y)
    assert loss == pytest.approx(expected_loss, rel=1e-6)
    for g, expected in zip(grads, expected_grads):
        np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-6)


def test_a_worker_that_dies_is_a_clear_error():
    m = model()
    x, y = batch(rows=4)
    dp = DataParallel(m, 2)
    dp.workers[0].kill()
    dp.workers[0].join()
    with pytest.raises(RuntimeError, match="worker 1 exited"):
        dp.forward_backward(x, y)
    dp.close()


def test_workers_exit_when_the_main_process_dies(tmp_path):
    """A worker holds no copy of the main process's pipe ends, so it reads EOF and exits."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    script = (
        "import os, signal, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_data_parallel import batch, model\n"
        "from gradflow.training.data_parallel import DataParallel\n"
        "dp = DataParallel(model(), 3)\n"
        "dp.forward_backward(*batch(rows=4))\n"
        "print(*(w.pid for w in dp.workers), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    # run outside the checkout, so that the installed gradflow is the one imported, wherever that is
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path
    ).stdout
    pids = [int(p) for p in out.split()]
    assert len(pids) == 2

    def running(pid):
        status = Path(f"/proc/{pid}/status")
        try:
            return "(zombie)" not in status.read_text()
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 10
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(p) for p in pids)


def test_without_fork_more_than_one_process_is_refused(monkeypatch):
    import multiprocessing

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    with pytest.raises(RuntimeError, match="needs the fork start method"):
        DataParallel(model(), 2)
    with DataParallel(model(), 1) as dp:  # one process needs no fork
        x, y = batch(rows=2)
        assert np.isfinite(dp.loss(x, y))


def test_a_parameter_that_changed_shape_is_a_clear_error():
    m = model()
    with DataParallel(m, 2) as dp:
        p = m.parameters()[0]
        p.data = np.zeros((p.shape[0] + 1,) + p.shape[1:], p.dtype)
        with pytest.raises(ValueError, match=r"a parameter changed shape from \("):
            dp.loss(*batch(rows=2))


class DiesInWorkers(Frozen):
    """Exits, with code 3, whenever it runs outside the process that made it."""

    def __init__(self):
        import os

        super().__init__()
        self.home = os.getpid()

    def forward(self, x, y):
        import os

        if os.getpid() != self.home:
            os._exit(3)
        return super().forward(x, y)


def test_a_worker_that_dies_during_a_step_is_named_with_its_exit_code():
    m = DiesInWorkers()
    with DataParallel(m, 2) as dp, pytest.raises(RuntimeError, match=r"worker 1 exited \(exit code 3\) during a step$"):
        dp.forward_backward(*batch(rows=4))
