"""gf.save and gf.load: a tensor, an array, or nested dicts and lists of them, in one safetensors file.

What a PyTorch user hands torch.save: {"model": model.state_dict(), "optimizer": opt.state_dict(),
"iter_num": 5, "config": {...}}. The file is safetensors (a JSON header, then the raw arrays):

    arrays            each under its path in the object: "model/wte.weight", "optimizer/state/0/m"
    header metadata   "gradflow": the object as JSON, each array replaced by {"__tensor__": path}
                      or {"__array__": path}, tuples by {"__tuple__": [...]}, and dicts with keys
                      that JSON cannot keep (ints, as an optimizer's state has) by {"__dict__": [[k, v], ...]}

A dataclass (a model's config, as build-nanogpt saves it) is stored as its fields, {"__fields__": {...}},
and loads as a types.SimpleNamespace with the same attributes (`checkpoint["config"].n_layer`): the class
itself is not looked up, since importing it by name would run code.

Safe: the file holds arrays and text only, so loading it runs no code (torch.save pickles; this never
does), which is what PyTorch's `weights_only=True` asks for: load takes the flag and changes nothing
for it, and takes a `map_location=` that names the CPU (a device, a {saved: "cpu"} dict, or a
function of storage and location), so `torch.load(path, map_location=device, weights_only=True)`
runs as written. Atomic: it is written beside its destination and renamed over it (os.replace), so
a crash while saving leaves what was there whole. Any safetensors reader opens it, PyTorch's too.
"""

import dataclasses
import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import safetensors.numpy
from safetensors import SafetensorError, safe_open

from gradflow.engine import bounded_json
from gradflow.engine.device import on_cpu
from gradflow.engine.files import written_atomically
from gradflow.engine.tensor import Tensor

_TAGS = ("__tensor__", "__array__", "__tuple__", "__dict__", "__fields__")
# the safetensors dtypes numpy has; a file holding another (F8_E4M3, say) is refused, naming it
NUMPY_DTYPES = {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64", "F16", "F32", "F64"}


def save(obj, f):
    """Write obj to f, a path or a file opened for writing bytes: a Tensor, a numpy array, or dicts,
    lists and tuples of them with int, float, str, bool and None leaves. Loading gives back the same
    structure, Tensors where Tensors were saved."""
    arrays = {}
    metadata = {"gradflow": json.dumps(_encode(obj, (), arrays))}
    if hasattr(f, "write"):
        f.write(safetensors.numpy.save(arrays, metadata=metadata))
        return
    path = Path(f)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"save: the folder {path.parent} does not exist")
    with written_atomically(path) as tmp:
        safetensors.numpy.save_file(arrays, tmp, metadata=metadata)


def load(f, map_location=None, *, weights_only=None):
    """Read what save wrote, from a path or a file opened for reading bytes; a file that is not one is
    an error naming it. Every array lands on the CPU, so map_location may only send it there;
    weights_only changes nothing (no file runs code)."""
    locations = map_location.values() if isinstance(map_location, dict) else [map_location]
    for where in locations:
        if not callable(where):
            on_cpu("load", where)
    if not hasattr(f, "read"):
        return _read(Path(f), Path(f))
    with tempfile.TemporaryDirectory() as folder:  # safetensors reads files: the bytes go through one
        copy = Path(folder, "copy.safetensors")
        copy.write_bytes(f.read())
        return _read(copy, getattr(f, "name", "the file object"))


def _read(path, name):
    if not path.is_file():
        raise FileNotFoundError(f"load: there is no file {name}")
    try:
        with safe_open(path, framework="np") as f:
            description = (f.metadata() or {}).get("gradflow")
            check_dtypes(f, NUMPY_DTYPES)
            arrays = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (a safetensors file, not a dict)
        if description is None:
            raise ValueError("a safetensors file without gradflow's description; safetensors.numpy.load_file reads it")
        return _decode(bounded_json.loads(description, "its description"), arrays)
    except (SafetensorError, ValueError, KeyError, TypeError) as e:  # json's errors are ValueErrors
        raise ValueError(f"load: {name} is not a file written by gf.save ({e})") from None


def check_dtypes(f, readable):
    """Refuse a safetensors file (opened with safe_open) holding a tensor whose dtype is not in `readable`."""
    for name in f.keys():  # noqa: SIM118 (a safetensors file, not a dict)
        dtype = f.get_slice(name).get_dtype()
        if dtype not in readable:
            known = ", ".join(sorted(readable))
            raise ValueError(f"{name} has dtype {dtype}, which gradflow cannot read; it reads {known}")


def _where(path):
    return "obj" + "".join(f"[{p!r}]" for p in path)


def _encode(obj, path, arrays):
    """obj as JSON, its arrays moved into `arrays` under their paths."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
        return obj.item()
    if isinstance(obj, (Tensor, np.ndarray)):
        array = obj._data if isinstance(obj, Tensor) else obj
        if array.dtype.kind not in "biuf":
            raise TypeError(f"save: the array at {_where(path)} holds {array.dtype}, not numbers or bools")
        name = "/".join(str(p) for p in path) or "tensor"
        if name in arrays:
            raise ValueError(f"save: two arrays would be stored as {name!r}; one is at {_where(path)}: rename a key")
        arrays[name] = array if array.flags.c_contiguous else array.copy(order="C")  # safetensors reads memory in order
        if isinstance(obj, np.ndarray):
            return {"__array__": name}
        return {"__tensor__": name, "requires_grad": obj.requires_grad}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, (*path, i), arrays) for i, v in enumerate(obj)]
        return items if isinstance(obj, list) else {"__tuple__": items}
    if isinstance(obj, dict):
        for k in obj:
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"save: the dict at {_where(path)} has a key {k!r}; keys must be strings or ints")
        if all(isinstance(k, str) for k in obj) and not any(k in _TAGS for k in obj):
            return {k: _encode(v, (*path, k), arrays) for k, v in obj.items()}
        return {"__dict__": [[k, _encode(v, (*path, k), arrays)] for k, v in obj.items()]}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # a config: its fields, by name
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return {"__fields__": _encode(fields, path, arrays)}
    if hasattr(obj, "state_dict"):  # a whole model: PyTorch pickles it, which runs code when loaded
        raise TypeError(
            f"save: cannot store a {type(obj).__name__} at {_where(path)}: gf.save stores tensors, never pickled "
            f"objects; save its state_dict() and load that into a new {type(obj).__name__} with load_state_dict"
        )
    raise TypeError(
        f"save: cannot store a {type(obj).__name__} at {_where(path)}: gf.save takes tensors, numpy arrays, "
        "dicts, lists and tuples of them, numbers, strings, bools and None"
    )


def _decode(node, arrays):
    if isinstance(node, list):
        return [_decode(v, arrays) for v in node]
    if not isinstance(node, dict):
        return node
    if "__tensor__" in node:
        return Tensor(arrays[node["__tensor__"]], requires_grad=node["requires_grad"])
    if "__array__" in node:
        return arrays[node["__array__"]]
    if "__tuple__" in node:
        return tuple(_decode(v, arrays) for v in node["__tuple__"])
    if "__fields__" in node:
        return SimpleNamespace(**_decode(node["__fields__"], arrays))
    if "__dict__" in node:
        return {k: _decode(v, arrays) for k, v in node["__dict__"]}
    return {k: _decode(v, arrays) for k, v in node.items()}
