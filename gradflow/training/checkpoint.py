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
import math
import zipfile
import zlib
from pathlib import Path

import numpy as np

from gradflow.engine import bounded_json
from gradflow.engine.files import opened, written_atomically
from gradflow.nn.lora import load_lora_state_dict, lora_state_dict

FORMAT = "gradflow-checkpoint"
VERSION = 1
# the largest description read: a long run's history and a large vocabulary fit many times over
META_LIMIT = 64 << 20
# the most values one array of LoRA adapters may hold (r x the widest weight of any model gradflow loads)
ADAPTER_LIMIT = 1 << 26
# the description's fields that hold text: where the data came from, its hash, the base model
TEXT_FIELDS = ("data", "data_sha256", "base")
_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


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


def _optimizer_problem(saved):
    """What is wrong with a saved optimizer's description (as save_checkpoint writes it), or None."""
    if not isinstance(saved, dict) or set(saved) != {"param_groups", "scalars"}:
        return "optimizer must hold param_groups and scalars, and nothing else"
    groups, scalars = saved["param_groups"], saved["scalars"]
    if not isinstance(groups, list) or not all(_is_group(g) for g in groups):
        return "optimizer.param_groups must be a list of groups: params (their indices) and numbers (lr, betas, ...)"
    if not isinstance(scalars, dict) or not all(_is_counters(i, c) for i, c in scalars.items()):
        return "optimizer.scalars must map each parameter's index to its counters (numbers)"
    return None


def _is_number(value):
    return isinstance(value, (int, float)) and math.isfinite(value)  # a bool is one: a flag of the update


def _is_group(group):
    if not isinstance(group, dict) or not isinstance(group.get("params"), list):
        return False
    indices = group["params"]
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices):
        return False
    numbers = [v for k, v in group.items() if k != "params"]
    return all(v is None or _is_number(v) or (isinstance(v, list) and all(map(_is_number, v))) for v in numbers)


def _is_counters(index, counters):
    return index.isdigit() and isinstance(counters, dict) and all(map(_is_number, counters.values()))


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
    return write_arrays(path, arrays, meta)


def write_arrays(path, arrays, meta, what="checkpoint"):
    """Write `arrays` ({"model/<name>": floats, ...}) and `meta` as a checkpoint file at path, atomically;
    an array that is not real floating-point numbers, or holds NaN or inf, is refused and nothing written.
    load_checkpoint reads it back (a weight snapshot, snapshots.py, is such a file)."""
    path = Path(path)
    for key, value in arrays.items():
        problem = _bad_array(key, value)
        if problem:
            raise CheckpointError(f"{what} {path} not written: {problem}")
    meta = {"format": FORMAT, "version": VERSION, **meta}
    arrays = {**arrays, "__meta__": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with written_atomically(path, what + " ") as tmp, opened(tmp, "wb") as f:  # a full disk: one line
        np.savez(f, **arrays)
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
        problem = _optimizer_problem(saved)
        if problem:
            raise CheckpointError(f"checkpoint {self.path}: {problem}")
        state = {int(i): dict(s) for i, s in saved["scalars"].items()}
        n_params = sum(len(group["params"]) for group in saved["param_groups"])
        for key, value in self.arrays.items():
            if key.startswith("optim/"):
                _, i, name = key.split("/", 2)
                if not (i.isdigit() and int(i) < n_params):
                    raise CheckpointError(f"checkpoint {self.path}: {key} names no parameter of the optimizer's")
                state.setdefault(int(i), {})[name] = value
        if any(i >= n_params for i in state):
            raise CheckpointError(f"checkpoint {self.path}: optimizer.scalars names a parameter past its {n_params}")
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
        except CheckpointError:
            raise
        except ValueError as e:
            raise CheckpointError(f"checkpoint {self.path} does not fit this model: {e}") from None


def load_checkpoint(path):
    """Read a checkpoint written by save_checkpoint; anything else is a clear CheckpointError.

    Nothing is inflated before its size is known to be sensible: the description first, if its
    declared size is under META_LIMIT and its nesting under bounded_json.MAX_DEPTH; then each
    array, if the shape and dtype its .npy header declares fit within array_limit(description) and
    agree with the size the archive declares for it.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "ckpt.npz"
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} is not a regular file")
    try:
        with zipfile.ZipFile(path) as archive:
            members = {m.key: m for m in (_Member(archive, info, path) for info in archive.infolist())}
            if "__meta__" not in members:
                raise KeyError("__meta__ is not a file in the archive")
            meta = _read_meta(members.pop("__meta__"), path)
            limit = array_limit(meta)
            arrays = {key: member.read(limit) for key, member in members.items()}
    except CheckpointError:
        raise
    except ValueError as e:  # an .npy header numpy cannot parse
        raise CheckpointError(f"checkpoint {path} is corrupt or not a gradflow checkpoint ({e})") from None
    except zipfile.BadZipFile:
        reason = "not an .npz archive" if not zipfile.is_zipfile(path) else "a damaged archive"
        raise CheckpointError(f"checkpoint {path} is corrupt or not a gradflow checkpoint ({reason})") from None
    except (OSError, KeyError, EOFError, MemoryError, zlib.error) as e:
        reason = "an array larger than memory" if isinstance(e, MemoryError) else str(e) or type(e).__name__
        raise CheckpointError(f"checkpoint {path} is corrupt or not a gradflow checkpoint ({reason})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path} is not a gradflow checkpoint (format {meta.get('format')!r})")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"checkpoint {path} has version {meta.get('version')}, this gradflow reads {VERSION}")
    for field in TEXT_FIELDS:
        if meta.get(field) is not None and not isinstance(meta[field], str):
            raise CheckpointError(f"checkpoint {path}: {field} must be a string, got {meta[field]!r}")
    for key, value in arrays.items():
        problem = _bad_array(key, value) if key.startswith(("model/", "optim/")) else None
        if problem:
            raise CheckpointError(f"checkpoint {path}: {problem}; it cannot be used")
    return Checkpoint(path, meta, arrays)


def _read_meta(member, path):
    """The description: a uint8 array of UTF-8 JSON, its declared size and nesting checked before it is parsed."""
    text = member.read(META_LIMIT).tobytes()
    try:
        meta = bounded_json.loads(text.decode("utf-8"), "its description")
    except ValueError as e:  # not UTF-8, not JSON, or nested too deep
        raise CheckpointError(f"checkpoint {path}: {e}") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"checkpoint {path} is not a gradflow checkpoint (its description is not a JSON object)")
    return meta


def array_limit(meta):
    """The most values one array of this checkpoint may hold.

    Every weight of a GPT or a Llama is a (rows, width) matrix or smaller, its rows one of the
    config's sizes (vocabulary, context, d_ff) or at most 4 x width (GPT's MLP), and the optimizer's
    arrays have the weights' shapes. A checkpoint without a model's config (LoRA adapters) has
    ADAPTER_LIMIT.
    """
    described = meta.get("model")
    config = described.get("config") if isinstance(described, dict) else None
    if not isinstance(config, dict):
        return ADAPTER_LIMIT
    sizes = [v for v in config.values() if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    width = config.get("n_embd", config.get("d_model"))
    if width not in sizes:
        return ADAPTER_LIMIT
    return width * max(4 * width, *sizes)


class _Member:
    """One .npy file of the archive, its header (shape, dtype) read on opening, its values only by read()."""

    def __init__(self, archive, info, path):
        self.archive, self.info, self.path, self.key = archive, info, path, info.filename.removesuffix(".npy")
        with archive.open(info) as f:
            read_header = _NPY_HEADERS.get(np.lib.format.read_magic(f))
            if read_header is None:
                raise ValueError(f"{self.key} is not an .npy array of a version numpy.save writes")
            self.shape, _, self.dtype = read_header(f)
            self.header = f.tell()
        if self.dtype.hasobject:  # numpy would read them by unpickling, which runs code: never
            reason = "it holds Python objects"
            raise CheckpointError(f"checkpoint {path} is corrupt or not a gradflow checkpoint ({reason})")

    def read(self, limit):
        """The array, if it holds at most `limit` values and the archive declares its size alike."""
        count = math.prod(self.shape)
        if count > limit:
            raise CheckpointError(
                f"checkpoint {self.path}: {self.key} declares shape {self.shape}, {count:,} values; "
                f"at most {limit:,} are read"
            )
        if self.info.file_size != self.header + count * self.dtype.itemsize:
            raise CheckpointError(
                f"checkpoint {self.path}: {self.key} declares shape {self.shape} of {self.dtype}, but the archive "
                f"declares {self.info.file_size:,} bytes for it"
            )
        with self.archive.open(self.info) as f:
            return np.lib.format.read_array(f, allow_pickle=False)
