"""The trainer: gradient descent on any model called as model(x, y) -> (logits, loss), on token ids.

Read after models/gpt.py, the last file of the reading order (README.md gives it).

One step, the whole of learning (Trainer.train_step):

    x, y   = a random (B, T) window of the training ids, and the same window shifted by one
    L      = mean over positions of -log P(y_t | x_<=t)           forward: the model computes it
    g      = grad L(theta)                                         backward: loss.backward()
    theta <- theta - lr_t * update(clip(g))                        clip: g * min(1, grad_clip / ||g||);
                                                                   update: the optimizer's (AdamW's
                                                                   by default); lr_t: the schedule

Around the step, the rest of this file keeps a run going and safe: evaluations on fixed batches,
checkpoints, exact resume, Ctrl-C, metrics.jsonl. What watches the step attaches through its hooks
(hooks.py) or sits in a file of its own:

    divergence.py   a non-finite loss or gradient stops the run before the weights change
    health.py       per block, the gradient's norm and the update's size; how often clipping fired
    hooks.py        the points where these attach; anomaly mode (detect_anomaly) is one
    plot.py         loss.png: the losses and the health, drawn when the run ends
    shared_cores.py the products on one thread while other work keeps the cores busy
    mpi.py          over MPI (distributed=True, under `mpiexec -n N`), every rank runs this loop and
                    the step calls the model shared out: each rank runs a shard of the batch, and
                    loss.backward() ends in one Allreduce summing the shards' gradients; the same
                    step, on more cores or machines. Rank 0 alone writes (self.writes).
    settings.py     TrainConfig, what each setting may be, and the checks of a resumed run

Exact resume: a checkpoint holds the weights, the optimizer's moments, the step, and the states of
both random generators (the one that draws batches and gradflow's, which draws dropout masks), so
a run stopped at step s and resumed continues with the very same batches and updates. A fresh run
refuses a directory that holds a checkpoint, unless told to overwrite it.

fit() runs in the fast tier of kernels unless a tier was chosen (gradflow/engine/kernels.py).
"""

import json
import math
import signal
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from gradflow.engine.autograd import no_grad
from gradflow.engine.files import opened, write_atomically
from gradflow.engine.grad_norm import grad_norm
from gradflow.engine.kernels import fast_unless_chosen
from gradflow.engine.rng import get_rng_state
from gradflow.optim import Constant, WarmupCosine, clip_grad_norm, set_lr
from gradflow.text import get_batch
from gradflow.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from gradflow.training.divergence import StopOnDivergence, TrainingDiverged
from gradflow.training.health import Health
from gradflow.training.hooks import AnomalyMode, Hooks, KeepFreedMemory
from gradflow.training.metrics import read_metrics
from gradflow.training.mpi import OnRanks
from gradflow.training.plot import plot_run
from gradflow.training.progress import Progress
from gradflow.training.settings import (
    TrainConfig,
    check_config,
    check_fresh,
    check_parallel,
    default_optimizer,
    restore_gradflow_state,
    saved_progress,
)
from gradflow.training.shared_cores import SharedCores
from gradflow.training.snapshots import Snapshots

__all__ = ["TrainConfig", "Trainer", "default_optimizer", "read_metrics"]  # beside the Trainer, what it reads and makes


class Trainer:
    """Trains `model` on train_ids, estimating train and validation loss every eval_interval steps.

    meta: JSON-serialisable facts stored in every checkpoint (model type and config, tokenizer).
    on_eval(trainer, step): called after each evaluation (on rank 0 alone), e.g. to print a sample.
    Whatever else should watch each step joins trainer.hooks (hooks.py).
    overwrite: start a fresh run even where out_dir holds a checkpoint (else that is an error).
    distributed: this process is one rank of an MPI job (run as `mpiexec -n N python -m mpi4py
    script.py`, so that an error on one rank ends them all); config.processes is then the number
    of ranks (1: as many as mpiexec started). Alone in its MPI world, it trains as one process.
    """

    adapters_only = False  # checkpoints hold every weight; a fine-tuner of LoRA adapters keeps those alone

    def __init__(
        self,
        model,
        train_ids,
        val_ids,
        config,
        optimizer=None,
        meta=None,
        on_eval=None,
        progress=True,
        overwrite=False,
        distributed=False,
    ):
        check_config(config, spell=lambda name: f"train: {name}")
        check_parallel(config, alone=not distributed)
        self.model, self.config, self.overwrite = model, config, overwrite
        self.writes = True  # this process writes the checkpoints, the log and the picture, and prints
        self.parallel = None  # while fit() runs with the batch shared out: the model as the step calls it
        self.hooks = Hooks(  # what watches the run (hooks.py)
            [StopOnDivergence(), Health(), AnomalyMode(), SharedCores(), KeepFreedMemory(), Snapshots()]
        )
        if distributed:
            self.hooks.append(OnRanks(self))  # one rank of an MPI job (mpi.py): its config counts the ranks
        config = self.config
        self.take_data(train_ids, val_ids)
        self.optimizer = optimizer or default_optimizer(model, config)
        self.meta, self.on_eval, self.show_progress = meta or {}, on_eval, progress
        if config.schedule == "cosine":
            warmup = min(config.warmup_iters, config.max_iters)  # a short run is all warmup, not an error
            self.schedule = WarmupCosine(config.lr, warmup, config.max_iters, config.min_lr)
        else:
            self.schedule = Constant(config.lr)
        self.batch_rng = np.random.default_rng(config.seed)
        self.step = 0
        self.tokens_seen = 0  # in this process's run, for the progress bar's tokens per second
        self.out_dir = Path(config.out_dir)
        self.history = []  # one dict per evaluation
        self.names = {id(p): name for name, p in model.named_parameters()}
        self.saved_step = None  # the step of the checkpoint on disk that this run wrote or resumed
        self._stop = False  # Ctrl-C asked this process to stop

    # --- the data: a subclass that learns from other data overrides these three ----------------

    def take_data(self, train_ids, val_ids):
        """Keep the two splits' token ids, each long enough for one window of block_size + 1."""
        self.train_ids, self.val_ids = np.asarray(train_ids), np.asarray(val_ids)
        for name, ids in (("training", self.train_ids), ("validation", self.val_ids)):
            if len(ids) < self.config.block_size + 1:
                raise ValueError(
                    f"train: the {name} split has {len(ids)} tokens, "
                    f"fewer than block_size + 1 = {self.config.block_size + 1}"
                )

    def training_batch(self):
        """The next (x, y) to learn from: batch_size random windows of the training ids."""
        return get_batch(self.train_ids, self.config.batch_size, self.config.block_size, self.batch_rng)

    def evaluation_batches(self, split):
        """The (x, y) batches that estimate the loss on split ("train" or "val"): the same at every evaluation."""
        ids = self.train_ids if split == "train" else self.val_ids
        rng = np.random.default_rng(self.config.seed + 1)
        for _ in range(self.config.eval_iters):
            yield get_batch(ids, self.config.batch_size, self.config.block_size, rng)

    # --- measuring ------------------------------------------------------------------------------

    @no_grad()
    def estimate_loss(self):
        """Mean loss over the fixed evaluation batches of each split (the same batches at every evaluation)."""
        model, was_training = self.parallel or self.model, self.model.training
        self.model.eval()
        out = {}
        for split in ("train", "val"):
            losses = []
            for x, y in self.evaluation_batches(split):
                losses.append(model(x, y)[1].item())
            out[f"{split}_loss"] = float(np.mean(losses))
            out[f"{split}_ppl"] = math.exp(min(out[f"{split}_loss"], 709.0))  # e^709.8 is float64's largest
        self.model.train(was_training)
        return out

    # --- checkpoints ----------------------------------------------------------------------------

    def checkpoint_path(self):
        return self.out_dir / "ckpt.npz"

    def save(self):
        """Write the checkpoint (rank 0 alone: every rank holds the same weights and random states)."""
        path = self.checkpoint_path()
        if self.writes:
            rng = {"batches": self.batch_rng.bit_generator.state, "gradflow": get_rng_state()}
            meta = {"step": self.step, "train_config": asdict(self.config), "rng": rng, "history": self.history}
            save_checkpoint(path, self.model, self.optimizer, meta={**self.meta, **meta}, adapters=self.adapters_only)
        self.saved_step = self.step
        return path

    def resume(self, path=None):
        """Continue from a checkpoint written by save(): weights, optimizer, step, RNG states, history.

        It is read from `path` (default: out_dir's), and the run goes on writing to out_dir.
        """
        ckpt = load_checkpoint(path or self.checkpoint_path())
        step, history, rng = saved_progress(ckpt)  # checked (settings.py)
        ckpt.restore(self.model, self.optimizer, adapters=self.adapters_only)
        try:
            self.batch_rng.bit_generator.state = rng["batches"]
            restore_gradflow_state(rng["gradflow"])
        except (TypeError, KeyError, ValueError, OverflowError):  # a state out of its integers' range overflows
            raise CheckpointError(f"checkpoint {ckpt.path}: rng is not a pair of saved generator states") from None
        self.step, self.history, self.saved_step = step, history, step
        self._truncate_log(self.step)
        return ckpt

    def _truncate_log(self, step):
        """Forget metrics logged after `step` (a run that crashed after its last checkpoint)."""
        path = self.out_dir / "metrics.jsonl"
        if self.writes and path.exists():
            kept = [r for r in read_metrics(path) if r["step"] <= step]
            write_atomically(path, "".join(json.dumps(r) + "\n" for r in kept))

    # --- the loop -------------------------------------------------------------------------------

    def train_step(self):
        """One step of gradient descent on the next batch; returns the batch's loss.

            theta <- theta - lr_t * update(clip(grad L(theta)))

        The hooks hear of it after backward, before the update and after it (hooks.py); a loss or
        gradient that is not finite stops the run there, before the weights change (divergence.py).
        """
        c = self.config
        model = self.parallel or self.model  # over MPI, shared out: each rank runs a shard of the batch (mpi.py)
        set_lr(self.optimizer, self.schedule(self.step))
        x, y = self.training_batch()
        self.tokens_seen += x.size
        self.optimizer.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        self.hooks.after_backward(self)
        norm = clip_grad_norm(self.trainable, c.grad_clip) if c.grad_clip > 0 else grad_norm(self.trainable)
        self.hooks.before_update(self, loss.item(), norm)
        self.optimizer.step()
        self.step += 1
        self.hooks.after_update(self)
        return loss.item()

    @property
    def trainable(self):
        """The parameters that learn (a frozen weight has nothing to clip)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def evaluate(self, bar=None):
        """Estimate the losses, log them with what the hooks add, tell on_eval, save a checkpoint."""
        metrics = {"step": self.step, **self.estimate_loss()}
        self.hooks.evaluated(self, metrics)
        self.history.append(metrics)
        self.log(metrics)
        if bar is not None:
            bar.write(
                f"step {self.step}: train loss {metrics['train_loss']:.4f}, val loss {metrics['val_loss']:.4f} "
                f"(perplexity {metrics['val_ppl']:.2f})"
            )
        if self.on_eval is not None and self.writes:
            self.on_eval(self, self.step)
        self.save()
        return metrics

    def fit(self):
        """Train to max_iters (from the current step); Ctrl-C saves a checkpoint and stops cleanly.

        A fresh run (step 0) refuses an out_dir holding a checkpoint unless overwrite=True; a
        non-finite loss or gradient raises TrainingDiverged, leaving the last checkpoint as it was.
        """
        with fast_unless_chosen():
            self._run()
        return self.history

    def _run(self):
        """What fit() runs: evaluations and steps to max_iters, then the checkpoint and the picture."""
        c = self.config
        with self.hooks.starting(self):  # over MPI, rank 0's refusal is every rank's
            self._start()
        self.model.train()
        bar = Progress(c.max_iters, start=self.step, unit="it") if self.show_progress and self.writes else None
        previous = self._catch_interrupt()
        started, first = time.perf_counter(), self.tokens_seen
        try:
            self.hooks.started(self)  # over MPI, every rank checks that all start alike, and shares the model
            if self.step == 0:
                self.evaluate(bar)
            while self.step < c.max_iters and not self._stopping():
                with self.hooks.during_step(self):
                    loss = self.train_step()
                self.log({"step": self.step, "loss": loss, "lr": self.schedule(self.step - 1)})
                if bar is not None:
                    rate = (self.tokens_seen - first) / (time.perf_counter() - started)
                    bar.update(self.step, loss=loss, **{"tok/s": f"{rate:,.0f}"})
                if self.step % c.eval_interval == 0 or self.step == c.max_iters:
                    self.evaluate(bar)
            stopped = self._stopping()
        except TrainingDiverged:
            self.plot()  # the picture of the divergence helps; the checkpoint stays the last good one
            raise
        finally:
            self.hooks.finished(self)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if bar is not None:
                bar.close()
        if stopped:
            self.save()
        self.plot()

    def _start(self):
        """A fresh run (step 0, not resumed) refuses a checkpoint in out_dir, and starts a new log."""
        if self.saved_step is None and self.step == 0 and self.writes:
            if not self.overwrite:
                check_fresh(self.out_dir)
            (self.out_dir / "metrics.jsonl").unlink(missing_ok=True)

    def _stopping(self):
        """Whether to stop before the next step: asked by Ctrl-C; over MPI, asked of any rank by the
        last step's Allreduce, which every rank reads alike, so that all stop at the same step."""
        return self.parallel.stop_agreed if self.parallel else self._stop

    def _catch_interrupt(self):
        """First Ctrl-C: finish the current step, save, stop. A second one interrupts at once. A single
        process treats SIGTERM and SIGHUP (`kill`, the terminal closing) as Ctrl-C; over MPI the ranks
        hear them as Ctrl-C from `train --processes` (distributed.py): {signal: the handler it replaced}."""

        def handler(signum, frame):
            if self._stop:
                raise KeyboardInterrupt
            self._stop = True
            if self.writes:
                said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
                print(f"\n{said}: saving a checkpoint and stopping (Ctrl-C again to abort)", flush=True)

        names = ("SIGINT",) if self.config.processes > 1 else ("SIGINT", "SIGTERM", "SIGHUP")
        try:
            return {s: signal.signal(s, handler) for s in (getattr(signal, n) for n in names if hasattr(signal, n))}
        except ValueError:  # not the main thread: leave Ctrl-C alone
            return {}

    # --- records --------------------------------------------------------------------------------

    def log(self, record):
        """Append one JSON line to out_dir/metrics.jsonl (rank 0 alone)."""
        if not self.writes:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with opened(self.out_dir / "metrics.jsonl", "a") as f:  # never through a link (files.py)
            f.write(json.dumps(record) + "\n")

    def plot(self):
        """Draw out_dir/loss.png (plot.py) from metrics.jsonl and the evaluations; rank 0 alone (None elsewhere)."""
        if not self.writes:
            return None
        records = read_metrics(self.out_dir / "metrics.jsonl")
        return plot_run(self.out_dir / "loss.png", records, self.history, self.config.grad_clip)
