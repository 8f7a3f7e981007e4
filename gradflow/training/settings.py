"""A run's settings and their checks: TrainConfig, what each setting may be, and what a resumed run may
change; beside them, the checks of what a checkpoint says of the run it continues (its step, its
evaluations, its random generators), and the optimizer a run's settings make. The Trainer
(trainer.py) and `gradflow train` (cli/train.py) refuse a bad setting here, by name, before any work:
one check each, finite where a number must be.
"""

import math
from dataclasses import dataclass, fields
from pathlib import Path

from gradflow.engine.rng import is_state, manual_seed, set_rng_state
from gradflow.optim import AdamW
from gradflow.training.checkpoint import CheckpointError, load_checkpoint


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
_POSITIVE_INT = (lambda v: is_int(v) and v >= 1, "a positive integer")
_COUNT = (lambda v: is_int(v) and v >= 0, "a non-negative integer")
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


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


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


def check_parallel(config, alone=False):
    """Refuse settings that do not go together with sharing the batch out; alone: this process is not one
    of an MPI job's ranks (Trainer(distributed=False), or a rank mpiexec did not start), so it cannot share."""
    if config.detect_anomaly and config.processes > 1:
        raise ValueError("train: detect_anomaly checks the ops of one process; use processes=1 with it")
    wanted = config.processes
    if alone and wanted > 1:
        raise ValueError(
            f"train: processes={wanted} but this process runs alone: start {wanted} with mpiexec -n {wanted}, "
            "each with distributed=True"
        )


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


def saved_progress(ckpt):
    """(step, history, rng) of the run a checkpoint continues, each checked: the step a non-negative integer,
    the history a list of evaluation records as evaluate() writes them, none after the step, and the states
    of the two random generators (the batches', gradflow's)."""
    step, history, rng = ckpt.meta.get("step"), ckpt.meta.get("history", []), ckpt.meta.get("rng")
    if not is_int(step) or step < 0:
        raise CheckpointError(f"checkpoint {ckpt.path}: step must be a non-negative integer, got {step!r}")
    if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
        raise CheckpointError(f"checkpoint {ckpt.path}: history must be a list of records")
    for i, record in enumerate(history):
        problem = _record_problem(record, step)
        if problem:
            raise CheckpointError(f"checkpoint {ckpt.path}: history[{i}] {problem}")
    if not (isinstance(rng, dict) and _is_pcg64_state(rng.get("batches")) and is_gradflow_state(rng.get("gradflow"))):
        raise CheckpointError(f"checkpoint {ckpt.path}: rng is not a pair of saved generator states")
    return step, history, rng


def _record_problem(record, last_step):
    """What is wrong with an evaluation's record read from a checkpoint (as evaluate() writes it), or None."""
    step = record.get("step")
    if not is_int(step) or not 0 <= step <= last_step:
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


def _is_pcg64_state(state):
    """numpy's PCG64 state as bit_generator.state gives it, its two 128-bit integers in range (numpy before 2
    takes a negative one without a word)."""
    try:
        numbers = [state["state"]["state"], state["state"]["inc"]]
        return state["bit_generator"] == "PCG64" and all(is_int(n) and 0 <= n < 1 << 128 for n in numbers)
    except (TypeError, KeyError):
        return False


def is_gradflow_state(state):
    """gradflow's generator's state (rng.get_state), or numpy's PCG64 state, which drew dropout's masks
    before gradflow drew PyTorch's stream (a checkpoint written then still resumes)."""
    return is_state(state) or _is_pcg64_state(state)


def restore_gradflow_state(state):
    """Set gradflow's generator to a saved state; an older checkpoint's PCG64 state cannot continue in
    PyTorch's stream, so its state's number seeds it: resuming twice from it draws the same masks."""
    if is_state(state):
        set_rng_state(state)
    else:
        manual_seed(state["state"]["state"] % 2**64)


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
