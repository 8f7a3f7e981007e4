"""Data parallelism over MPI: every rank computes one shard of the batch, one all-reduce sums them.

    mpiexec -n 2 gradflow train --distributed           two ranks on this machine
    gradflow train --processes 2                        the same: it runs the line above
    mpiexec -f hosts -n 8 gradflow train --distributed  eight ranks on the machines listed in `hosts`

The math is data_parallel's: the batch loss is the mean of its rows' losses, so the batch's
gradient is the sum over shards of (n_s / n) dL_s/dtheta. This file moves those numbers.

Every rank runs the same program. It builds the same model from the same seed (checked: the
weights' checksums are compared when training starts), draws the same batch from the same
generator, takes its own rows of it, and runs forward and backward on them. Then it lays its
weighted gradients out in one flat buffer, and MPI's Allreduce replaces every rank's buffer by the
sum of all ranks' buffers. Each rank now holds the whole batch's gradient and steps its own
optimizer: the same update of the same weights, so the weights stay equal without being sent.

How it attaches to the Trainer's step, which stays as written for one process: the step calls
the model through Distributed, as a PyTorch loop calls it through DistributedDataParallel.
`_, loss = dp(x, y)` computes nothing yet; `loss.backward()` runs this rank's shard, forward and
backward weighted by n_s / n (data_parallel.shard_loss), then the Allreduce. The shard's forward
waits for backward() so that both run inside one try: their error rides on the Allreduce to every
rank, where a rank that raised alone would leave the others waiting in it for ever.

One buffer, one Allreduce per step, laid out as

    [ (n_s / n) dL_s/dtheta, every parameter | 1 per parameter with a gradient | (n_s / n) L_s | failed | stop ]

so the same sum also gives every rank the batch loss, which parameters have a gradient (one that
no rank used has none, as in one process), whether any rank failed, and whether any rank was
asked to stop (Ctrl-C): every rank learns it at the same step, and they stop together.

Random numbers: the generator that draws batches, and gradflow's (dropout), advance identically on
every rank, so the state rank 0 saves in a checkpoint is every rank's. Each step draws one seed
per shard from gradflow's generator, and shard s draws its dropout masks from a generator seeded
with seeds[s] (data_parallel.own_stream). So with dropout the masks are not those one process
would draw for the whole batch (the run is the same in distribution, and exactly reproducible,
resume included, with the same number of ranks); without dropout the run is one process's run up
to float rounding, for any number of ranks.

A failure on one rank: the shard's error is caught, the step's Allreduce carries `failed`, and
every rank raises RankError naming the first rank that failed. Failures before training starts go
through agree(), which does the same with an allgather. Anything a rank raises on its own where
the others do not look (rank 0 writing a file, say) must end every rank with MPI_Abort, or the
others wait for it forever: `gradflow train` does that, and a script does it when run as
`mpiexec -n 2 python -m mpi4py script.py` (mpi4py's way to abort every rank on an uncaught error).
"""

import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np

from gradflow.engine.threads import limit_blas_threads
from gradflow.training.data_parallel import (
    WorkerError,
    own_stream,
    shard_loss,
    shard_seeds,
    shards,
)

INSTALL = 'pip install "gradflow[mpi]" (or pip install -e ".[mpi]" from a checkout)'


class MPIUnavailable(ImportError, ValueError):
    """No mpi4py, or no MPI library under it. An ImportError to Python code; to the command line,
    bad input (a ValueError), so that it is one line with exit code 2."""


class RankError(WorkerError):
    """A rank failed; raised on every rank together. The message starts `rank <r>: `; a traceback follows."""


def world():
    """MPI's world communicator (mpi4py's COMM_WORLD): every rank mpiexec started, or this process alone."""
    require_mpi4py("distributed training")
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError) as e:  # mpi4py is there, but not the MPI library it was built for
        raise MPIUnavailable(f"mpi4py cannot load its MPI library ({first_line(e)}): {INSTALL}") from None
    return MPI.COMM_WORLD


def mpiexec():
    """The mpiexec that starts ranks of mpi4py's MPI: the one beside this Python (where the mpich
    wheel installs it), else the first on PATH; a one-line error saying what to install when none is."""
    require_mpi4py("more than one process")
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        raise MPIUnavailable(f"more than one process needs mpiexec, which is not installed: {INSTALL}")
    return found


# What stops the launcher stops the job: a terminal's Ctrl-C, `kill`, and the terminal closing.
STOPS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
PR_SET_PDEATHSIG = 1  # Linux's prctl option: the signal a process is sent when its parent dies


def launch(command):
    """Run mpiexec's `command` and return its exit code; stopping this process stops every rank, cleanly.

    mpiexec runs in a session of its own, so that a signal reaches the job through this process
    alone, and once: SIGINT, SIGTERM or SIGHUP here is passed on to mpiexec as SIGINT, which passes
    it to every rank as Ctrl-C (they stop at the same step and rank 0 saves); a second one aborts
    them, as a second Ctrl-C does. Killed outright (SIGKILL), this process cannot pass anything on:
    on Linux the kernel then sends mpiexec SIGINT itself (prctl's PR_SET_PDEATHSIG); elsewhere the
    ranks would train on, orphaned, until they end.
    """
    job, asked = None, []

    def stop(signum, frame):
        asked.append(signum)
        if job is not None:
            job.send_signal(signal.SIGINT)

    previous = {s: signal.signal(s, stop) for s in STOPS}
    try:
        job = subprocess.Popen(command, start_new_session=True, preexec_fn=_stop_with_parent())
        if asked:  # while mpiexec was being started: passed on now
            job.send_signal(signal.SIGINT)
        return job.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _stop_with_parent():
    """What the child runs before mpiexec starts: ask Linux for SIGINT when its parent dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGINT)


def require_mpi4py(what):
    """Refuse, saying what to install, where mpi4py is missing (without starting MPI, as mpi4py.MPI would)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise MPIUnavailable(f"{what} needs mpi4py, which is not installed: {INSTALL}") from None


def first_line(error):
    """What an error says, in one line: its message's first line, or its type when it has none."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def failures(comm, failure):
    """Every rank's failure as (first line, traceback), None where it had none; `failure` is this rank's."""
    trace = failure and "".join(traceback.format_exception(type(failure), failure, failure.__traceback__))
    return comm.allgather(failure and (first_line(failure), trace))


def rank_error(reports):
    """The RankError naming the first rank that failed, its traceback under the first line."""
    rank, (line, trace) = next((rank, report) for rank, report in enumerate(reports) if report)
    return RankError(f"rank {rank}: {line}\n{trace}")


def agree(comm, work):
    """work() on every rank, returning this rank's result; if it raised anywhere, every rank raises:
    the error itself where every rank raised the same, else a RankError naming the first that failed."""
    try:
        result, failure = work(), None
    except Exception as error:
        result, failure = None, error
    settle(comm, failure)
    return result


def settle(comm, failure):
    """Every rank's word on its own failure (None: it had none); if any rank failed, every rank raises: the
    error itself where every rank raised the same, else a RankError naming the first that failed."""
    reports = failures(comm, failure)
    if failure is not None and all(report and report[0] == first_line(failure) for report in reports):
        raise failure
    if any(reports):
        raise rank_error(reports) from failure


def digest(*arrays):
    """sha256 of the arrays' shapes, types and bytes: equal on two ranks only if the arrays are."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype.str}".encode())
        h.update(a.data)
    return h.hexdigest()


def check_same(comm, facts):
    """Refuse to start unless every rank has rank 0's facts ({what: its digest}), naming the first that differs."""
    every = comm.allgather(facts)
    for rank, theirs in enumerate(every):
        for what in facts:
            if theirs.get(what) != every[0].get(what):
                raise RankError(f"rank {rank}: {what} differs from rank 0's; every rank must start alike")


def blas_threads_per_rank(comm):
    """This machine's cores shared among the ranks running on it (one each when there are as many ranks as cores)."""
    from mpi4py import MPI

    here = comm.Split_type(MPI.COMM_TYPE_SHARED)
    ranks_here = here.Get_size()
    here.Free()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()  # not on macOS
    return max(1, (cores or 1) // ranks_here)


class Distributed:
    """A model's loss and gradients over the ranks of an MPI communicator, one shard of each batch per rank.

        dp = Distributed(model, world(), facts={"the token ids": digest(ids)})
        optimizer.zero_grad()
        loss, stop = dp.forward_backward(x, y)  # every rank passes the whole batch; .grad is dL/dtheta
        optimizer.step()                        # every rank: the same step of the same weights
        dp.loss(x, y)                           # the loss alone (no graph), also shared out
        dp.close()

    or, called as the model is, so that a loop written for one process stays as it is (the
    Trainer's step does this; torch's DistributedDataParallel is used the same way):

        _, loss = dp(x, y)
        loss.backward()                         # forward_backward(x, y)
        loss.item()                             # the batch's loss (without backward: dp.loss(x, y))

    The model is called as model(x, y) -> (logits, mean loss). Making one compares, across ranks,
    the parameters' names and shapes, `facts`, and the weights' checksum, and refuses (RankError,
    on every rank) to start unless every rank has rank 0's. BLAS gets this machine's cores divided
    among its ranks until close(). asked_to_stop() says whether this rank was asked to stop (Ctrl-C)
    when loss.backward() runs; stop_agreed, whether any rank was, as the last Allreduce told them all.
    """

    def __init__(self, model, comm, facts=None, asked_to_stop=lambda: False):
        self.model, self.comm, self.rank, self.size = model, comm, comm.Get_rank(), comm.Get_size()
        self.asked_to_stop, self.stop_agreed = asked_to_stop, False
        self.params = list(model.parameters())
        shapes = json.dumps([(name, p.shape, p.dtype.str) for name, p in model.named_parameters()])
        weights = digest(*(p.data for p in self.params))
        check_same(comm, {"the parameter list": shapes, **(facts or {}), "the weights' checksum": weights})
        ends = np.cumsum([0] + [p.data.size for p in self.params])
        self.slices = [slice(a, b) for a, b in zip(ends[:-1], ends[1:])]
        dtype = np.result_type(np.float32, *(p.dtype for p in self.params))
        self.buffer = np.zeros(ends[-1] + len(self.params) + 3, dtype)  # gradients | counts | loss, failed, stop
        self.counts = self.buffer[ends[-1] : ends[-1] + len(self.params)]
        self.allreduce_seconds = 0.0  # time spent in Allreduce, for benchmarks
        self._blas = limit_blas_threads(blas_threads_per_rank(comm))

    def forward_backward(self, x, y, stop=False):
        """(the batch's mean loss, whether any rank asked to stop); the batch's gradient is added to .grad."""
        x, y = np.asarray(x), np.asarray(y)
        held = [p.grad for p in self.params]  # a gradient already there is added to, as backward does
        for p in self.params:
            p.grad = None
        failure, part = self._shard(x, y, backward=True)
        for p, s in zip(self.params, self.slices):
            self.buffer[s] = 0 if p.grad is None else p.grad.data.reshape(-1)
        self.counts[:] = [p.grad is not None for p in self.params]
        self.buffer[-3:] = part, failure is not None, stop
        self._allreduce(self.buffer)
        self._raise_if_failed(self.buffer[-2], failure)
        for p, s, count, old in zip(self.params, self.slices, self.counts, held):
            p.grad = old
            if count > 0:
                p._accumulate_grad(self.buffer[s].reshape(p.shape))  # copied, or added to what was there
        self.stop_agreed = bool(self.buffer[-1])
        return float(self.buffer[-3]), self.stop_agreed

    def __call__(self, x, y):
        """(None, the batch's ShardedLoss): nothing is computed until its backward() or item() (see
        the module's docstring for why the forward waits)."""
        return None, ShardedLoss(self, x, y)

    def loss(self, x, y):
        """The batch's mean loss, without recording a graph (for evaluation)."""
        failure, part = self._shard(np.asarray(x), np.asarray(y), backward=False)
        total = np.array([part, failure is not None])
        self._allreduce(total)
        self._raise_if_failed(total[1], failure)
        return float(total[0])

    def close(self):
        """Give BLAS back its threads."""
        if self._blas is not None:
            self._blas.restore_original_limits()
            self._blas = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _shard(self, x, y, backward):
        """(the error this rank's shard raised or None, its weighted loss (n_s / n) L_s)."""
        if len(x) != len(y):
            raise ValueError(f"Distributed: x and y must have the same number of rows, got {x.shape} and {y.shape}")
        pieces = shards(len(x), self.size)
        seeds = shard_seeds(len(pieces))  # drawn on every rank alike, so the generator stays the same everywhere
        if self.rank >= len(pieces):  # fewer rows than ranks: this rank has none this time
            return None, 0.0
        rows = pieces[self.rank]
        try:
            with own_stream(seeds[self.rank]):
                return None, shard_loss(self.model, x[rows], y[rows], (rows.stop - rows.start) / len(x), backward)
        except Exception as error:  # told to every rank by the Allreduce, raised on every rank
            return error, 0.0

    def _allreduce(self, buffer):
        from mpi4py import MPI

        start = MPI.Wtime()
        self.comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
        self.allreduce_seconds += MPI.Wtime() - start

    def _raise_if_failed(self, failed, failure):
        """After an Allreduce that counted `failed` ranks failing: every rank raises, naming the first."""
        if failed:
            raise rank_error(failures(self.comm, failure)) from failure


class ShardedLoss:
    """The batch's loss as a Distributed computes it: backward() runs forward_backward (each rank's
    shard, then the Allreduce), item() the batch's mean loss, from that or, without it, from loss()."""

    def __init__(self, parallel, x, y):
        self.parallel, self.x, self.y, self.value = parallel, x, y, None

    def backward(self):
        self.value, _ = self.parallel.forward_backward(self.x, self.y, stop=self.parallel.asked_to_stop())

    def item(self):
        if self.value is None:
            self.value = self.parallel.loss(self.x, self.y)
        return self.value
