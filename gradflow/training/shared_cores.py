"""Sharing the cores: a step's matrix products on one thread while other work keeps the machine busy.

numpy's products run on every thread its BLAS was given. When other processes keep those cores
busy, OpenBLAS's threads wait for each other by spinning: on 2 cores a step of the baby GPT goes
from 40 ms to about 900 with a second training beside it, while with one BLAS thread it takes 60 ms
either way (docs/benchmarks.md, "Memory, threads and processes"). So every `every` steps this hook
reads the load average (how many processes were running or ready to run, over the last minute:
os.getloadavg), takes away the threads of this run's own products, and runs the steps with one BLAS
thread while the rest of the machine keeps at least `busy` of a core busy; with all of them again
once it is quiet. The numbers do not change: OpenBLAS gives each element of a product to one
thread, so its sum is the same on one thread or two (tests/test_shared_cores.py checks the step).

It does nothing where there is no load average (Windows), where the threads were chosen in the
environment (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS), and for an MPI rank (each
rank already runs on its share of the cores, training/distributed.py).
"""

import contextlib
import os

from gradflow.engine.threads import blas_threads, limit_blas_threads
from gradflow.training.hooks import Hook

CHOSEN = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
LOAD_AVERAGE = getattr(os, "getloadavg", None)  # (1, 5 and 15 minutes); None on Windows


class SharedCores(Hook):
    def __init__(self, every=10, busy=0.5, load=LOAD_AVERAGE):
        self.every, self.busy, self.load = every, busy, load
        self.threads = None  # the BLAS threads of a step on a quiet machine, read at the first step
        self.shared = False  # True while the steps run on one BLAS thread

    def during_step(self, trainer):
        if self.load is None or trainer.parallel is not None or any(v in os.environ for v in CHOSEN):
            return contextlib.nullcontext()
        if self.threads is None:
            self.threads = blas_threads()
        if self.threads > 1 and trainer.step % self.every == 0:
            others = self.load()[0] - (1 if self.shared else self.threads)  # this run's own products taken away
            self.shared = others >= self.busy
        return limit_blas_threads(1) if self.shared else contextlib.nullcontext()
