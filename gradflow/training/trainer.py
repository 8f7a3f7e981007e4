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
    distributed.py  over MPI (distributed=True, under `mpiexec -n N`), the step calls the model
                    through Distributed: each rank runs a shard of the batch, and loss.backward()
                    ends in one Allreduce summing the shards' gradients; the same step, on more
                    cores or machines. Rank 0 alone prints, logs and writes the checkpoints.

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
import warnings
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np

from gradflow.engine import bounded_json
from gradflow.engine.autograd import no_grad
from gradflow.engine.files import opened, write_atomically
from gradflow.engine.grad_norm import grad_norm
from gradflow.engine.kernels import fast_unless_chosen
from gradflow.engine.rng import get_rng_state, is_state, manual_seed, set_rng_state
from gradflow.optim import AdamW, Constant, WarmupCosine, clip_grad_norm, set_lr
from gradflow.text import get_batch
from gradflow.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from gradflow.training.distributed import Distributed, agree, digest, world
from gradflow.training.divergence import StopOnDivergence, TrainingDiverged
from gradflow.training.health import Health
from gradflow.training.hooks import AnomalyMode, Hooks, KeepFreedMemory
from gradflow.training.plot import plot_run
from gradflow.training.progress import Progress
from gradflow.training.shared_cores import SharedCores


@dataclass
class TrainConfig:
    max_iters: int = 2000
    batch_size: int = 12
    block_size: int = 64  # T: the length of each training window
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_iters: int = 100
    schedule: str = "cosine"  # "cosine" (warmup, then cosine to min_lr) or "constant"
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # 0 turns clipping off
    eval_interval: int = 250
    eval_iters: int = 20  # batches per loss estimate
    seed: int = 1337
    out_dir: str = "out"
    processes: int = 1  # MPI ranks sharing each batch (gradflow.training.distributed); `gradflow train` starts them
    detect_anomaly: bool = False  # check every op's output and gradient, naming the first non-finite one


# What each setting may be: (test, wording). A value that fails is refused by name before any work.
_POSITIVE_INT = (lambda v: _is_int(v) and v >= 1, "a positive integer")
_COUNT = (lambda v: _is_int(v) and v >= 0, "a non-negative integer")
_RULES = {
    "max_iters": _COUNT,
    "batch_size": _POSITIVE_INT,
    "block_size": _POSITIVE_INT,
    "lr": (lambda v: _is_number(v) and v > 0, "a positive number"),
    "min_lr": (lambda v: _is_number(v) and v >= 0, "a non-negative number"),
    "warmup_iters": _COUNT,
    "schedule": (lambda v: v in ("cosine", "constant"), '"cosine" or "constant"'),
    "weight_decay": (lambda v: _is_number(v) and v >= 0, "a non-negative number"),
    "beta1": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "beta2": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "grad_clip": (lambda v: _is_number(v) and v >= 0, "a non-negative number (0 turns clipping off)"),
    "eval_interval": _POSITIVE_INT,
    "eval_iters": _POSITIVE_INT,
    "seed": _COUNT,
    "out_dir": (lambda v: isinstance(v, str) and v != "", "a directory name"),
    "processes": _POSITIVE_INT,
    "detect_anomaly": (lambda v: isinstance(v, bool), "True or False"),
}

# On resume these may change (they steer the run, not what it has learned); the others are fixed.
RESUMABLE = ("max_iters", "batch_size", "lr", "min_lr", "warmup_iters", "schedule", "grad_clip", "eval_interval",
             "eval_iters", "processes", "detect_anomaly", "out_dir")  # fmt: skip


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_pcg64_state(state):
    """numpy's PCG64 state as bit_generator.state gives it, its two 128-bit integers in range (numpy before 2
    takes a negative one without a word)."""
    try:
        numbers = [state["state"]["state"], state["state"]["inc"]]
        return state["bit_generator"] == "PCG64" and all(_is_int(n) and 0 <= n < 1 << 128 for n in numbers)
    except (TypeError, KeyError):
        return False


def _is_gradflow_state(state):
    """gradflow's generator's state (rng.get_state), or numpy's PCG64 state, which drew dropout's masks
    before gradflow drew PyTorch's stream (a checkpoint written then still resumes)."""
    return is_state(state) or _is_pcg64_state(state)


def _restore_gradflow_state(state):
    """Set gradflow's generator to a saved state; an older checkpoint's PCG64 state cannot continue in
    PyTorch's stream, so its state's number seeds it: resuming twice from it draws the same masks."""
    if is_state(state):
        set_rng_state(state)
    else:
        manual_seed(state["state"]["state"] % 2**64)


def _is_number(v, finite=True):
    """A real number (not a bool); finite unless told otherwise (a logged loss may be inf)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and (not finite or math.isfinite(v))


def flag(name):
    """How the command line spells a setting: eval_interval -> --eval-interval."""
    return "--" + name.replace("_", "-")


def check_config(config, spell=str):
    """Refuse a setting outside its range, naming it as `spell(name)` says (a field, or a flag)."""
    for name, (ok, wording) in _RULES.items():
        value = getattr(config, name)
        if not ok(value):
            raise ValueError(f"{spell(name)} must be {wording}, got {value!r}")


def check_parallel(config):
    """Refuse settings that do not go together with sharing the batch out."""
    if config.detect_anomaly and config.processes > 1:
        raise ValueError("train: detect_anomaly checks the ops of one process; use processes=1 with it")


def _world_of(ranks, wanted):
    if ranks > 1:
        return f"mpiexec started {ranks} ranks"
    return f"this process runs alone: start {wanted} with mpiexec -n {wanted}, each with distributed=True"


def resume_config(saved, requested, spell=str):
    """The config to continue a run with: the saved one, with the requested changes that may change.

    saved: the checkpoint's train_config (a dict); requested: {field: value} the user asked for.
    Returns (config, changes), changes a list of "name old -> new"; a fixed field asked to change
    is refused by name, since the checkpoint's weights and random state were made with it.
    """
    known = {f.name for f in fields(TrainConfig)}
    if not isinstance(saved, dict) or set(saved) - known:
        raise CheckpointError(f"train_config must be a dict of TrainConfig fields, got {saved!r}")
    config = TrainConfig(**saved)
    changes = []
    for name, value in requested.items():
        old = getattr(config, name)
        if value == old:
            continue
        if name not in RESUMABLE:
            raise ValueError(f"{spell(name)} {value} conflicts with the checkpoint, which was trained with {old}")
        setattr(config, name, value)
        if name != "out_dir":
            changes.append(f"{name} {old} -> {value}")
    return config, changes


def check_fresh(out_dir):
    """Refuse to start a new run where a checkpoint lies: it would be overwritten at step 0."""
    path = Path(out_dir) / "ckpt.npz"
    if path.exists():
        try:
            step = f"at step {load_checkpoint(path)['step']}"
        except (CheckpointError, KeyError):
            step = "(unreadable)"
        raise FileExistsError(
            f"{path} holds a run's checkpoint {step}: continue it with --resume, or replace it with --overwrite"
        )


def read_metrics(path, numbered=False):
    """The records of a metrics.jsonl (none if there is no file: a checkpoint copied alone), as (line number,
    record) pairs if `numbered`; a line cut short (a full disk, a kill), holding bytes that are not UTF-8,
    nested too deep or too long to be a record (bounded_json) is dropped with a warning."""
    if not Path(path).exists():
        return []
    records = []
    for number, record in bounded_json.lines(path):
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            warnings.warn(f"{path}: line {number} is not a complete record; dropped", stacklevel=2)
            continue
        records.append((number, record) if numbered else record)
    return records


def _record_problem(record, last_step):
    """What is wrong with an evaluation's record read from a checkpoint (as evaluate() writes it), or None."""
    step = record.get("step")
    if not _is_int(step) or not 0 <= step <= last_step:
        return f"has step {step!r}, not an integer in [0, {last_step}]"
    numbers = ["train_loss", "val_loss"] + (["grad_norm", "clip_fraction"] if "blocks" in record else [])
    for key in numbers:
        if not _is_number(record.get(key), finite=False):
            return f"has {key} {record.get(key)!r}, not a number"
    blocks = record.get("blocks", {})
    if not isinstance(blocks, dict) or not all(isinstance(b, dict) for b in blocks.values()):
        return "has blocks that are not a dict of each block's measures"
    if not all(_is_number(v, finite=False) for b in blocks.values() for v in b.values()):
        return "has a block's measure that is not a number"
    return None


def default_optimizer(model, config):
    """AdamW that decays the matrices (weights, embeddings) but not the vectors (biases, norm gains)."""
    params = list(model.parameters())
    groups = [
        {"params": [p for p in params if p.ndim >= 2]},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return AdamW(
        [g for g in groups if g["params"]],
        lr=config.lr,
        betas=(config.beta1, config.beta2),
        weight_decay=config.weight_decay,
    )


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
        check_parallel(config)
        self.comm = world() if distributed else None
        ranks = self.comm.Get_size() if distributed else 1
        if config.processes not in (1, ranks):
            raise ValueError(f"train: processes={config.processes} but {_world_of(ranks, config.processes)}")
        config = replace(config, processes=ranks)  # what the checkpoint records: how many ranks trained
        self.rank = self.comm.Get_rank() if distributed else 0
        self.model, self.config, self.overwrite = model, config, overwrite
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
        self.hooks = Hooks(  # what watches the run (hooks.py)
            [StopOnDivergence(), Health(), AnomalyMode(), SharedCores(), KeepFreedMemory()]
        )
        self.parallel = None  # over more than one rank, while fit() runs: the model as Distributed shares it out
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
        if self.rank == 0:
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
        step, rng, history = ckpt.meta.get("step"), ckpt.meta.get("rng"), ckpt.meta.get("history", [])
        if not _is_int(step) or step < 0:
            raise CheckpointError(f"checkpoint {ckpt.path}: step must be a non-negative integer, got {step!r}")
        if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
            raise CheckpointError(f"checkpoint {ckpt.path}: history must be a list of records")
        for i, record in enumerate(history):
            problem = _record_problem(record, step)
            if problem:
                raise CheckpointError(f"checkpoint {ckpt.path}: history[{i}] {problem}")
        if not (
            isinstance(rng, dict) and _is_pcg64_state(rng.get("batches")) and _is_gradflow_state(rng.get("gradflow"))
        ):
            raise CheckpointError(f"checkpoint {ckpt.path}: rng is not a pair of saved generator states")
        ckpt.restore(self.model, self.optimizer, adapters=self.adapters_only)
        try:
            self.batch_rng.bit_generator.state = rng["batches"]
            _restore_gradflow_state(rng["gradflow"])
        except (TypeError, KeyError, ValueError, OverflowError):  # a state out of its integers' range overflows
            raise CheckpointError(f"checkpoint {ckpt.path}: rng is not a pair of saved generator states") from None
        self.step, self.history, self.saved_step = step, history, step
        self._truncate_log(self.step)
        return ckpt

    def _truncate_log(self, step):
        """Forget metrics logged after `step` (a run that crashed after its last checkpoint)."""
        path = self.out_dir / "metrics.jsonl"
        if self.rank == 0 and path.exists():
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
        model = self.parallel or self.model  # over MPI, Distributed: each rank runs a shard of the batch
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
        if self.on_eval is not None and self.rank == 0:
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
        if self.comm is None:
            self._start()
        else:  # rank 0 looks at out_dir; if it refuses, every rank does
            agree(self.comm, self._start)
        self.hooks.started(self)
        self.model.train()
        bar = Progress(c.max_iters, start=self.step, unit="it") if self.show_progress and self.rank == 0 else None
        previous = self._catch_interrupt()
        started, first = time.perf_counter(), self.tokens_seen
        try:
            if c.processes > 1:  # every rank checks that all start alike
                self.parallel = Distributed(
                    self.model, self.comm, facts=self._facts(), asked_to_stop=lambda: self._stop
                )
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
            if self.parallel:
                self.parallel.close()
                self.parallel = None
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if bar is not None:
                bar.close()
        if stopped:
            self.save()
        self.plot()

    def _start(self):
        """A fresh run (step 0, not resumed) refuses a checkpoint in out_dir, and starts a new log."""
        if self.saved_step is None and self.step == 0 and self.rank == 0:
            if not self.overwrite:
                check_fresh(self.out_dir)
            (self.out_dir / "metrics.jsonl").unlink(missing_ok=True)

    def _facts(self):
        """What every rank must have alike to train as one (the weights are compared too, by Distributed)."""
        settings = {k: v for k, v in asdict(self.config).items() if k != "out_dir"}
        return {
            "the data (a hash of its token ids)": digest(self.train_ids, self.val_ids),
            "the model config": json.dumps(self.meta.get("model"), sort_keys=True),
            "the training config": json.dumps(settings, sort_keys=True),
        }

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
            if self.rank == 0:
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
        if self.rank > 0:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with opened(self.out_dir / "metrics.jsonl", "a") as f:  # never through a link (files.py)
            f.write(json.dumps(record) + "\n")

    def plot(self):
        """Draw out_dir/loss.png (plot.py) from metrics.jsonl and the evaluations; rank 0 alone (None elsewhere)."""
        if self.rank > 0:
            return None
        records = read_metrics(self.out_dir / "metrics.jsonl")
        return plot_run(self.out_dir / "loss.png", records, self.history, self.config.grad_clip)
