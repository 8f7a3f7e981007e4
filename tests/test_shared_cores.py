"""SharedCores (training/shared_cores.py): one BLAS thread while other work keeps the cores busy, all of
them again once it is quiet, and the same numbers either way."""

import numpy as np
from helpers import TRAIN, VAL, batch_losses, config, model

from gradflow.engine.threads import blas_threads, limit_blas_threads
from gradflow.training.shared_cores import SharedCores
from gradflow.training.trainer import Trainer


class Step:
    """What the hook reads of a Trainer: the step, and whether MPI ranks share it."""

    def __init__(self):
        self.step, self.parallel = 0, None


def test_products_run_on_one_thread_while_the_machine_is_busy_and_on_all_once_it_is_quiet(monkeypatch):
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    limiter = limit_blas_threads(2)  # a machine with two threads for the products, whatever this one has
    try:
        loads = iter([2.2, 3.0, 1.2, 2.0])  # this run's own 2 threads, then another process, then quiet again
        hook, trainer = SharedCores(every=10, load=lambda: (next(loads), 0.0, 0.0)), Step()
        seen = []
        for step in range(40):
            trainer.step = step
            with hook.during_step(trainer):
                seen.append(blas_threads())
            assert blas_threads() == 2  # each step gives the threads back
        assert seen == [2] * 10 + [1] * 10 + [2] * 10 + [2] * 10  # loads 2.2-2, 3.0-2, 1.2-1, 2.0-2
    finally:
        limiter.restore_original_limits()


def test_threads_chosen_in_the_environment_or_an_mpi_rank_are_left_alone(monkeypatch):
    hook, trainer = SharedCores(load=lambda: (9.0, 9.0, 9.0)), Step()
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with hook.during_step(trainer):
        assert not hook.shared
    monkeypatch.delenv("OMP_NUM_THREADS")
    trainer.parallel = object()
    with hook.during_step(trainer):
        assert not hook.shared
    assert SharedCores(load=None).during_step(Step()) is not None  # no load average (Windows): nothing


def test_a_product_and_a_run_give_the_same_numbers_on_one_thread_or_two(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((768, 128), dtype=np.float32), rng.standard_normal((128, 512), dtype=np.float32)
    with limit_blas_threads(2):
        two = a @ b
    with limit_blas_threads(1):
        one = a @ b
    np.testing.assert_array_equal(one, two)  # each element's sum on one thread, in one order
    runs = {}
    for name, load in (("quiet", 0.0), ("busy", 9.0)):
        trainer = Trainer(model(), TRAIN, VAL, config(tmp_path / name), progress=False)
        busy_or_not = SharedCores(every=1, load=lambda load=load: (load, load, load))
        trainer.hooks[:] = [busy_or_not if isinstance(h, SharedCores) else h for h in trainer.hooks]
        trainer.fit()
        runs[name] = batch_losses(tmp_path / name)
    assert runs["busy"] == runs["quiet"]
