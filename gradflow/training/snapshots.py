"""Weight snapshots: a run keeps its weights at each evaluation and at every tenth of the run, small and
bounded, so that the explorer's training scrub (`gradflow explore --checkpoint RUN`) shows them change.

    out/snapshots/step-00000200.npz     the weights at step 200, as model/<name> arrays, in a checkpoint's
                                        format (checkpoint.py: written atomically, read without pickle,
                                        each array's size checked before it is read)

What one holds: every parameter that learns, whole, while they hold at most WHOLE numbers together
(1 MB in float32: a 1-layer GPT 64 wide has about 60,000); in a larger model, the matrix the explorer
shows unless told otherwise (explored(): the first matrix of the first block), whole. A frozen weight
never changes, and is not kept.

When: at every evaluation, so that the scrub's losses and weights line up, and every max_iters / SPREAD
steps, so that a run with few evaluations still shows its weights move (200 steps with the default
--eval-interval 250 evaluate at steps 0 and 200 alone, and keep snapshots at 0, 20, 40, ..., 200).

Bounded: a run keeps at most MOST snapshots, holding at most BUDGET bytes together (or 3 snapshots, where
one is larger than a third of it). Past that, the snapshot whose neighbours lie closest together (the
one that says least, the latest of a tie) is deleted, never the first or the newest, so that those left
stay spread over the whole run; the explorer's page, which draws each of them, stays small too.

Resume: a run resumed at step s deletes the snapshots after s, as metrics.jsonl forgets their records,
and writes them anew as it takes those steps again; a fresh run starts with none. The checkpoint is
never touched: the snapshots have a folder of their own, and a snapshot is written whole before any
earlier one is deleted. One that cannot be written (a full disk) is said in a line, and the run goes on:
the checkpoint, not a snapshot, is what a run must keep.
"""

import math
import re
import sys
from pathlib import Path

import numpy as np

from gradflow.training.checkpoint import load_checkpoint, write_arrays
from gradflow.training.hooks import Hook

WHOLE = 1 << 18  # numbers of a model whose every learning parameter a snapshot holds
BUDGET = 16 << 20  # bytes of a run's snapshots together
MOST = 64  # snapshots of a run
SPREAD = 10  # snapshots spread over a run, besides those at its evaluations
FOLDER = "snapshots"
NAME = re.compile(r"step-(\d+)\.npz")


def explored(named):
    """The parameter the explorer shows unless told otherwise, of (name, parameter) pairs: the first matrix of
    the first block (a name holding ".0."), else the first matrix, else the first parameter."""
    named = list(named)
    matrices = [name for name, p in named if p.ndim == 2] or [name for name, _ in named]
    return next((name for name in matrices if ".0." in name), matrices[0])


def saved(out_dir):
    """{step: path} of the snapshots in a run's folder, in step order."""
    folder = Path(out_dir) / FOLDER
    found = {}
    if folder.is_dir():
        for path in folder.iterdir():
            match = NAME.fullmatch(path.name)
            if match:
                found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def read_snapshot(path):
    """{parameter name: array} of one snapshot, read as a checkpoint is (load_checkpoint's checks)."""
    return load_checkpoint(path).model_state()


class Snapshots(Hook):
    """Writes out_dir/snapshots/ as the module docstring says (rank 0 alone: every rank holds the same weights)."""

    def __init__(self):
        self.written = None  # the step of the last snapshot this run wrote

    def started(self, trainer):
        if not trainer.writes:
            return
        resumed_at = trainer.step if trainer.saved_step is not None else -1  # a fresh run keeps none
        for step, path in saved(trainer.out_dir).items():
            if step > resumed_at:
                path.unlink(missing_ok=True)

    def after_update(self, trainer):
        if trainer.step % max(1, math.ceil(trainer.config.max_iters / SPREAD)) == 0:
            self.keep(trainer)

    def evaluated(self, trainer, metrics):
        self.keep(trainer)

    def keep(self, trainer):
        """Write the snapshot of this step, then thin the earlier ones to the budget."""
        if not trainer.writes or self.written == trainer.step:
            return
        params = {trainer.names[id(p)]: p for p in trainer.trainable}
        if not params:
            return
        if sum(p.data.size for p in params.values()) > WHOLE:
            name = explored(params.items())
            params = {name: params[name]}
        arrays = {f"model/{name}": np.asarray(p.data) for name, p in params.items()}
        earlier = {step: path for step, path in saved(trainer.out_dir).items() if step != trainer.step}
        meta = {"step": trainer.step, "model": trainer.meta.get("model")}  # the model's sizes bound what is read
        path = Path(trainer.out_dir) / FOLDER / f"step-{trainer.step:08d}.npz"
        try:
            write_arrays(path, arrays, meta, what="weight snapshot")
        except OSError as e:  # already one line naming the file
            print(f"{e}; the run goes on without it", file=sys.stderr, flush=True)
            return
        self.written = trainer.step
        most = max(3, min(MOST, BUDGET // sum(a.nbytes for a in arrays.values())))
        kept = [*earlier, trainer.step]
        while len(kept) > most:
            i = max(range(1, len(kept) - 1), key=lambda i: (kept[i - 1] - kept[i + 1], i))  # the closest neighbours
            earlier[kept.pop(i)].unlink(missing_ok=True)
