"""Checkpoints: one .npz file holding arrays and a JSON description, written atomically, read without pickle.

    <name>.npz
      model/<parameter name>      the weights (state_dict)
      optim/<index>/<key>         the optimizer's per-parameter arrays (Adam's m and v, ...)
      __meta__                    UTF-8 JSON: format, step, model type and config, tokenizer,
                                  optimizer hyperparameters and counters, RNG states, anything else

Atomic: the file is written next to its destination and renamed over it (os.replace), so a crash
while saving leaves the previous checkpoint whole; the temporary files of a save that was killed
are removed at the next save. Safe: np.load(allow_pickle=False) reads only arrays, so opening a
checkpoint never runs code from it.

Never worse than what it replaces: weights or optimizer moments holding NaN or inf are never
written (a diverged run keeps its last good checkpoint), and a file holding them, or arrays that
are not real floating-point numbers, is refused when read.
"""

import json
import zipfile
from pathlib import Path

import numpy as np

from gradflow.engine.files import written_atomically
from gradflow.nn.lora import load_lora_state_dict, lora_state_dict

FORMAT = "gradflow-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A file that is not a readable gradflow checkpoint, or one that does not fit the model."""


def _bad_array(key, value):
    """Why an array may not be stored as weights or optimizer moments, or None if it may."""
    if value.dtype.kind != "f":
        return f"{key} has dtype {value.dtype}, not a floating-point type"
    bad = value.size - int(np.count_nonzero(np.isfinite(value)))
    if bad:
        return f"{key} holds {bad} non-finite value{'s' * (bad != 1)} (NaN or inf)"
    return None


def save_checkpoint(path, model, optimizer=None, meta=None, adapters=False):
    """Write model weights, optimizer state and `meta` (a dict of JSON-serialisable values) to path, atomically.

    adapters: store only the model's LoRA adapters (nn.lora.lora_state_dict), not its frozen weights.
    """
    path, meta = Path(path), dict(meta or {})
    state = lora_state_dict(model) if adapters else model.state_dict()
    arrays = {f"model/{name}": value for name, value in state.items()}
    if optimizer is not None:
        state = optimizer.state_dict()
        scalars = {}
        for i, entries in state["state"].items():
            for key, value in entries.items():
                if isinstance(value, np.ndarray):
                    arrays[f"optim/{i}/{key}"] = value
                else:
                    scalars.setdefault(str(i), {})[key] = value
        meta["optimizer"] = {"param_groups": state["param_groups"], "scalars": scalars}
    for key, value in arrays.items():
        problem = _bad_array(key, value)
        if problem:
            raise CheckpointError(f"checkpoint {path} not written: {problem}")
    meta = {"format": FORMAT, "version": VERSION, **meta}
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with written_atomically(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, **arrays)
    except OSError as e:  # a full disk, say: name the file, and say that what was there is untouched
        kept = "the previous one is unchanged" if path.exists() else "nothing was there before"
        raise OSError(f"could not write checkpoint {path} ({e.strerror or e}); {kept}") from None
    return path


class Checkpoint:
    """A loaded checkpoint: `meta` (the JSON description) and its arrays."""

    def __init__(self, path, meta, arrays):
        self.path, self.meta, self.arrays = path, meta, arrays

    def __getitem__(self, key):
        return self.meta[key]

    def model_state(self):
        return {k[len("model/") :]: v for k, v in self.arrays.items() if k.startswith("model/")}

    def optimizer_state(self):
        """What Optimizer.load_state_dict takes, or None if no optimizer was saved."""
        saved = self.meta.get("optimizer")
        if saved is None:
            return None
        state = {int(i): dict(s) for i, s in saved["scalars"].items()}
        for key, value in self.arrays.items():
            if key.startswith("optim/"):
                _, i, name = key.split("/", 2)
                state.setdefault(int(i), {})[name] = value
        return {"param_groups": saved["param_groups"], "state": state}

    def restore(self, model, optimizer=None, adapters=False):
        """Load the weights (and the optimizer state) into model (and optimizer); mismatches are clear errors.

        adapters: the checkpoint holds LoRA adapters alone, which must be exactly the model's.
        """
        try:
            if adapters:
                load_lora_state_dict(model, self.model_state())
            else:
                model.load_state_dict(self.model_state())
            if optimizer is not None and self.optimizer_state() is not None:
                optimizer.load_state_dict(self.optimizer_state())
        except ValueError as e:
            raise CheckpointError(f"checkpoint {self.path} does not fit this model: {e}") from None


def load_checkpoint(path):
    """Read a checkpoint written by save_checkpoint; anything else is a clear CheckpointError."""
    path = Path(path)
    if path.is_dir():
        path = path / "ckpt.npz"
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} is not a regular file")
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
        meta = json.loads(arrays.pop("__meta__").tobytes().decode("utf-8"))
    except ValueError as e:  # numpy's advice for object arrays is to load them "unsafely": never
        if "allow_pickle" not in str(e):
            reason = str(e)
        elif zipfile.is_zipfile(path):
            reason = "it holds Python objects"
        else:
            reason = "not an .npz archive"
        raise CheckpointError(f"checkpoint {path} is corrupt or not a gradflow checkpoint ({reason})") from None
    except (OSError, KeyError, zipfile.BadZipFile, EOFError, MemoryError) as e:
        reason = "an array larger than memory" if isinstance(e, MemoryError) else str(e) or type(e).__name__
        raise CheckpointError(f"checkpoint {path} is corrupt or not a gradflow checkpoint ({reason})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"checkpoint {path} is not a gradflow checkpoint (its description is not a JSON object)")
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path} is not a gradflow checkpoint (format {meta.get('format')!r})")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"checkpoint {path} has version {meta.get('version')}, this gradflow reads {VERSION}")
    for key, value in arrays.items():
        problem = _bad_array(key, value) if key.startswith(("model/", "optim/")) else None
        if problem:
            raise CheckpointError(f"checkpoint {path}: {problem}; it cannot be used")
    return Checkpoint(path, meta, arrays)
