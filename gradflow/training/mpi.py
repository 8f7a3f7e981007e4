"""Running a training on MPI ranks: the one place that knows of them, between `gradflow train` and the loop.

Each rank holds the whole model and runs the Trainer's loop as one process would; what makes them one
run attaches here, as a hook of the Trainer (OnRanks), at the points every run has (hooks.py):

    starting   a fresh run's check of out_dir (rank 0's) is every rank's: if it refuses, all do
    started    the model is shared out: the step calls Distributed (distributed.py), each rank
               runs a shard of the batch and loss.backward() ends in one Allreduce of the gradients
    finished   the shared model is closed

Rank 0 alone prints and writes the checkpoints, the log and the picture (trainer.writes).

`gradflow train --processes N` starts `mpiexec -n N python -m gradflow train ... --distributed` with
launch() and says what its exit means with launched(); each rank runs as_rank(): it prepares its
Trainer in agreement with the others, and trains. A failure every rank meets is raised on every rank;
one that a rank meets alone ends the whole job in one line naming the rank (else the others would
wait forever).
"""

import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, replace

from gradflow.training.distributed import (
    Distributed,
    RankError,
    agree,
    digest,
    first_line,
    launch,
    mpiexec,
    settle,
    world,
)
from gradflow.training.divergence import TrainingDiverged
from gradflow.training.hooks import Hook
from gradflow.training.run_lock import FolderInUse, run_lock
from gradflow.training.settings import check_parallel

__all__ = ["OnRanks", "as_rank", "launch", "launched", "mpiexec"]  # launch and mpiexec: distributed.py's


class OnRanks(Hook):
    """A Trainer's process as one rank of an MPI job: config.processes is the number of ranks (1: as many
    as mpiexec started), and the checkpoint records it. Alone in its MPI world, it trains as one process."""

    def __init__(self, trainer):
        self.comm = world()
        ranks, wanted = self.comm.Get_size(), trainer.config.processes
        if ranks == 1:
            check_parallel(trainer.config, alone=True)  # alone in its MPI world, a rank is one process
        elif wanted not in (1, ranks):
            raise ValueError(f"train: processes={wanted} but mpiexec started {ranks} ranks")
        trainer.config = replace(trainer.config, processes=ranks)
        trainer.writes = self.comm.Get_rank() == 0

    @contextlib.contextmanager
    def starting(self, trainer):
        failure = None
        try:
            yield
        except Exception as error:  # rank 0's refusal, which the others must hear of
            failure = error
        settle(self.comm, failure)

    def started(self, trainer):
        if trainer.config.processes > 1:  # every rank checks that all start alike
            trainer.parallel = Distributed(
                trainer.model, self.comm, facts=self.facts(trainer), asked_to_stop=lambda: trainer._stop
            )

    def finished(self, trainer):
        if trainer.parallel:
            trainer.parallel.close()
            trainer.parallel = None

    def facts(self, trainer):
        """What every rank must have alike to train as one (the weights are compared too, by Distributed)."""
        settings = {k: v for k, v in asdict(trainer.config).items() if k != "out_dir"}
        return {
            "the data (a hash of its token ids)": digest(trainer.train_ids, trainer.val_ids),
            "the model config": json.dumps(trainer.meta.get("model"), sort_keys=True),
            "the training config": json.dumps(settings, sort_keys=True),
        }


def launched(code, out_dir):
    """The exit code of `gradflow train --processes N` from mpiexec's (launch's), with one line on stderr
    when a rank died without a word. Ctrl-C or `kill` of the launcher reaches every rank through mpiexec:
    they stop together and rank 0 saves (distributed.launch)."""
    code = code if code >= 0 else 128 - code  # killed by a signal: the shell's convention
    if code not in (0, 1, 2, 130):  # the ranks report their own errors (1, 2) and Ctrl-C (130); not a death
        print(
            f"gradflow train: a rank died without a word (mpiexec ended with code {code}: killed, or out of "
            f"memory), and mpiexec stopped every rank; the last checkpoint in {out_dir} is as it was",
            file=sys.stderr,
        )
    return code


def as_rank(processes, out_dir, prepare, finish):
    """One rank of an MPI job: prepare() its Trainer with the others, then finish(trainer); the exit code.
    processes: how many ranks the run asked for. Rank 0 alone prints. A failure that every rank meets together (the
    setup, a shard's error, divergence) is raised on every rank, and rank 0 prints it; one that a
    rank meets alone ends the whole job, in one line naming the rank (else the others wait forever)."""
    comm = world()
    if comm.Get_size() == 1 and processes == 1:
        print("--distributed: this process runs alone (not under mpiexec): training in one process", flush=True)
    if comm.Get_rank() > 0:  # to the end of the process: the error main() prints is rank 0's to print
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - open until the process ends
    with _locked_by_rank_0(comm, out_dir):
        trainer = agree(comm, prepare)
        with _ends_every_rank(comm):
            return finish(trainer)


@contextlib.contextmanager
def _locked_by_rank_0(comm, out_dir):
    """The run folder's lock, held by rank 0 alone, the one rank that writes there (were every rank to
    take it, they would lock each other out); if another process holds it, every rank raises the refusal."""
    lock = run_lock(out_dir, "gradflow train")
    refusal = None
    if comm.Get_rank() == 0:
        try:
            lock.acquire()
        except FolderInUse as e:
            refusal = str(e)
    refusal = comm.bcast(refusal)
    if refusal:
        raise FolderInUse(refusal)
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def _ends_every_rank(comm):
    """An error raised on this rank alone: its one line, then MPI_Abort, which ends every rank.
    RankError and TrainingDiverged are raised by every rank at the same step, so they go on."""
    try:
        yield
    except (RankError, TrainingDiverged):
        raise
    except BaseException as error:
        if comm.Get_size() == 1:
            raise
        interrupted = isinstance(error, KeyboardInterrupt)  # a second Ctrl-C, which every rank is given
        if comm.Get_rank() == 0 or not interrupted:
            said = first_line(error).removeprefix("train: ")
            said = "interrupted" if interrupted else f"rank {comm.Get_rank()}: {said}"
            # one write, newline included: mpiexec forwards each rank's writes as they come, and a line
            # written in two pieces (print's text, then its end) could take another rank's output between them
            sys.__stderr__.write(f"gradflow train: {said}\n")
            sys.__stderr__.flush()
            # mpiexec's proxy forwards a rank's output while the rank lives, and Abort ends every rank at
            # once: half a second lets the line through (without it, a full test run once lost it)
            time.sleep(0.5)
        nowhere = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nowhere, 2)  # MPI's own report of the abort would follow the line above
        comm.Abort(130 if interrupted else 1)
