"""The cross-entropy trainer: it trains any model called as model(x, y) -> (logits, loss) on token ids.

One step, the whole of learning:
    x, y = a random (B, T) window of the training ids and the same window shifted by one
    loss = mean over positions of -log P(y_t | x_<=t)        (the model computes it)
    loss.backward()                                          dloss/dtheta for every parameter
    clip the gradient's norm, set the learning rate from the schedule, optimizer.step()

With processes > 1 the batch is cut into shards whose gradients are computed in parallel processes
and summed (gradflow.data_parallel): the same step, on more cores.

Exact resume: a checkpoint holds the weights, the optimizer's moments, the step, and the states of
both random generators (the one that draws batches and gradflow's, which draws dropout masks), so
a run stopped at step s and resumed continues with the very same batches and updates.
"""

import json
import math
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .autograd import no_grad
from .checkpoint import load_checkpoint, save_checkpoint
from .data_parallel import DataParallel
from .optim import AdamW, Constant, WarmupCosine, clip_grad_norm, set_lr
from .progress import Progress
from .rng import get_rng_state, set_rng_state
from .text import get_batch


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
    processes: int = 1  # > 1: each step's batch is shared out among processes (gradflow.data_parallel)


def default_optimizer(model, config):
    """AdamW that decays the matrices (weights, embeddings) but not the vectors (biases, norm gains)."""
    params = model.parameters()
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
    on_eval(trainer, step): called after each evaluation, e.g. to print a sample.
    """

    def __init__(self, model, train_ids, val_ids, config, optimizer=None, meta=None, on_eval=None, progress=True):
        self.model, self.config = model, config
        self.train_ids, self.val_ids = np.asarray(train_ids), np.asarray(val_ids)
        for name, ids in (("training", self.train_ids), ("validation", self.val_ids)):
            if len(ids) < config.block_size + 1:
                raise ValueError(
                    f"train: the {name} split has {len(ids)} tokens, "
                    f"fewer than block_size + 1 = {config.block_size + 1}"
                )
        if isinstance(config.processes, bool) or not isinstance(config.processes, int) or config.processes < 1:
            raise ValueError(f"train: processes must be a positive integer, got {config.processes!r}")
        self.optimizer = optimizer or default_optimizer(model, config)
        self.meta, self.on_eval, self.show_progress = meta or {}, on_eval, progress
        if config.schedule == "cosine":
            warmup = min(config.warmup_iters, config.max_iters)  # a short run is all warmup, not an error
            self.schedule = WarmupCosine(config.lr, warmup, config.max_iters, config.min_lr)
        elif config.schedule == "constant":
            self.schedule = Constant(config.lr)
        else:
            raise ValueError(f'train: schedule must be "cosine" or "constant", got {config.schedule!r}')
        self.batch_rng = np.random.default_rng(config.seed)
        self.step = 0
        self.out_dir = Path(config.out_dir)
        self.history = []  # one dict per evaluation
        self._stop = False
        self._parallel = None  # the DataParallel of a run with processes > 1, while fit() runs

    # --- measuring ------------------------------------------------------------------------------

    @no_grad()
    def estimate_loss(self):
        """Mean loss over eval_iters fixed batches of each split (the same batches at every evaluation)."""
        was_training = self.model.training
        self.model.eval()
        out = {}
        for split, ids in (("train", self.train_ids), ("val", self.val_ids)):
            rng = np.random.default_rng(self.config.seed + 1)
            losses = []
            for _ in range(self.config.eval_iters):
                x, y = get_batch(ids, self.config.batch_size, self.config.block_size, rng)
                losses.append(self._parallel.loss(x, y) if self._parallel else self.model(x, y)[1].item())
            out[f"{split}_loss"] = float(np.mean(losses))
            out[f"{split}_ppl"] = math.exp(out[f"{split}_loss"])
        self.model.train(was_training)
        return out

    # --- checkpoints ----------------------------------------------------------------------------

    def checkpoint_path(self):
        return self.out_dir / "ckpt.npz"

    def save(self):
        rng = {"batches": self.batch_rng.bit_generator.state, "gradflow": get_rng_state()}
        meta = {"step": self.step, "train_config": asdict(self.config), "rng": rng, "history": self.history}
        return save_checkpoint(self.checkpoint_path(), self.model, self.optimizer, meta={**self.meta, **meta})

    def resume(self, path=None):
        """Continue from a checkpoint written by save(): weights, optimizer, step, RNG states, history."""
        ckpt = load_checkpoint(path or self.checkpoint_path())
        ckpt.restore(self.model, self.optimizer)
        self.step = ckpt["step"]
        self.batch_rng.bit_generator.state = ckpt["rng"]["batches"]
        set_rng_state(ckpt["rng"]["gradflow"])
        self.history = ckpt.meta.get("history", [])
        self._truncate_log(self.step)
        return ckpt

    def _truncate_log(self, step):
        """Forget metrics logged after `step` (a run that crashed after its last checkpoint)."""
        path = self.out_dir / "metrics.jsonl"
        if path.exists():
            kept = [line for line in path.read_text().splitlines() if json.loads(line)["step"] <= step]
            path.write_text("".join(line + "\n" for line in kept))

    # --- the loop -------------------------------------------------------------------------------

    def train_step(self):
        """One update; returns the batch loss."""
        c = self.config
        set_lr(self.optimizer, self.schedule(self.step))
        x, y = get_batch(self.train_ids, c.batch_size, c.block_size, self.batch_rng)
        self.optimizer.zero_grad()
        if self._parallel:  # the same gradient, each process computing a shard of the batch
            loss = self._parallel.forward_backward(x, y)
        else:
            _, loss = self.model(x, y)
            loss.backward()
            loss = loss.item()
        if c.grad_clip > 0:
            clip_grad_norm(self.model.parameters(), c.grad_clip)
        self.optimizer.step()
        self.step += 1
        return loss

    def evaluate(self, bar=None):
        metrics = {"step": self.step, **self.estimate_loss()}
        self.history.append(metrics)
        self.log(metrics)
        if bar is not None:
            bar.write(
                f"step {self.step}: train loss {metrics['train_loss']:.4f}, val loss {metrics['val_loss']:.4f} "
                f"(perplexity {metrics['val_ppl']:.2f})"
            )
        if self.on_eval is not None:
            self.on_eval(self, self.step)
        self.save()
        return metrics

    def fit(self):
        """Train to max_iters (from the current step); Ctrl-C saves a checkpoint and stops cleanly."""
        c = self.config
        self.model.train()
        tokens = c.batch_size * c.block_size
        bar = Progress(c.max_iters, start=self.step, unit="it") if self.show_progress else None
        previous = self._catch_interrupt()
        started, first = time.perf_counter(), self.step
        if c.processes > 1:
            self._parallel = DataParallel(self.model, c.processes)
        try:
            if self.step == 0:
                self.evaluate(bar)
            while self.step < c.max_iters and not self._stop:
                loss = self.train_step()
                self.log({"step": self.step, "loss": loss, "lr": self.schedule(self.step - 1)})
                if bar is not None:
                    rate = (self.step - first) * tokens / (time.perf_counter() - started)
                    bar.update(self.step, loss=loss, **{"tok/s": f"{rate:,.0f}"})
                if self.step % c.eval_interval == 0 or self.step == c.max_iters:
                    self.evaluate(bar)
        finally:
            if self._parallel:
                self._parallel.close()
                self._parallel = None
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            if bar is not None:
                bar.close()
        if self._stop:
            self.save()
        self.plot()
        return self.history

    def _catch_interrupt(self):
        """First Ctrl-C: finish the current step, save, stop. A second one interrupts at once."""

        def handler(signum, frame):
            if self._stop:
                raise KeyboardInterrupt
            self._stop = True
            print("\ninterrupted: saving a checkpoint and stopping (Ctrl-C again to abort)", flush=True)

        try:
            return signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread: leave Ctrl-C alone
            return None

    # --- records --------------------------------------------------------------------------------

    def log(self, record):
        """Append one JSON line to out_dir/metrics.jsonl."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with open(self.out_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")

    def plot(self):
        """Draw the loss curves (batch loss, and train/validation estimates) to out_dir/loss.png."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        steps, losses = [], []
        with open(self.out_dir / "metrics.jsonl") as f:
            for line in f:
                record = json.loads(line)
                if "loss" in record:
                    steps.append(record["step"])
                    losses.append(record["loss"])
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(steps, losses, lw=0.8, alpha=0.5, label="batch loss")
        if self.history:
            evals = [h["step"] for h in self.history]
            ax.plot(evals, [h["train_loss"] for h in self.history], "o-", label="train (estimate)")
            ax.plot(evals, [h["val_loss"] for h in self.history], "o-", label="validation (estimate)")
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (nats per token)")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = self.out_dir / "loss.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path
