"""gf.save and gf.load (torch.save, torch.load): any object, in one safetensors file, read back safely.

What a PyTorch user hands torch.save: {"model": model.state_dict(), "optimizer": opt.state_dict(),
"iter_num": 5, "config": {...}}, or the model itself. The file is safetensors (a JSON header, then
the raw arrays), in one of two forms:

    plain     tensors, numpy arrays, and dicts, lists and tuples of them with numbers, strings, bools
              and None: the arrays under their paths in the object ("model/wte.weight",
              "optimizer/state/0/m") and, in the header's metadata under "gradflow", the object as
              JSON, each array replaced by {"__tensor__": path} or {"__array__": path}, tuples by
              {"__tuple__": [...]}, and dicts with keys JSON cannot keep (ints, as an optimizer's state
              has) by {"__dict__": [[k, v], ...]}. Loading it runs no code at all.
    pickled   anything else (a whole model, a dataclass config, a set): the arrays stored as "0", "1",
              ... and, under "gradflow.pickle", the object pickled (base64) with each array replaced by
              its name (a persistent id) and each tensor by rebuilt_tensor(class, array, requires_grad).

Loading a pickle follows PyTorch's rules. weights_only=True, PyTorch's default, builds containers,
numbers, strings and tensors only, and refuses any other global in one line naming it, unless the
program allowed it (torch.serialization.add_safe_globals, safe_globals: see unpickle.py, which also
bounds what a pickle may build); weights_only=False unpickles whatever the file names, running the
code it names, as PyTorch does when asked: only for a file you trust.

map_location may only name the CPU (a device, a {saved: "cpu"} dict, or a function of storage and
location), so `torch.load(path, map_location=device)` runs as written. Atomic: the file is written
beside its destination and renamed over it (os.replace), so a crash while saving leaves what was
there whole. Any safetensors reader opens it, PyTorch's too.
"""

import base64
import io
import json
import pickle
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import safetensors.numpy
from safetensors import SafetensorError, safe_open

from gradflow.engine import bounded_json, unpickle
from gradflow.engine.device import on_cpu
from gradflow.engine.files import written_atomically
from gradflow.engine.tensor import Tensor

_TAGS = ("__tensor__", "__array__", "__tuple__", "__dict__", "__fields__")
PICKLED = "gradflow.pickle"  # the metadata key of the pickled form
# the safetensors dtypes numpy has; a file holding another (F8_E4M3, say) is refused, naming it
NUMPY_DTYPES = {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64", "F16", "F32", "F64"}


class _NotPlain(Exception):
    """obj holds something the plain form cannot keep: it is pickled."""


def save(obj, f):
    """Write obj to f, a path or a file opened for writing bytes. Tensors, numpy arrays, and dicts,
    lists and tuples of them with int, float, str, bool and None leaves are stored plain; any other
    object that pickles (a model, a dataclass) is pickled, its arrays stored beside the pickle.
    Loading gives back the same structure, Tensors where Tensors were saved."""
    arrays = {}
    try:
        metadata = {"gradflow": json.dumps(_encode(obj, (), arrays))}
    except _NotPlain:
        arrays = {}
        metadata = {PICKLED: base64.b64encode(_pickled(obj, arrays)).decode("ascii")}
    data = safetensors.numpy.save(arrays, metadata=metadata)
    if hasattr(f, "write"):
        f.write(data)
        return
    path = Path(f)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"save: the folder {path.parent} does not exist")
    with written_atomically(path) as tmp:
        Path(tmp).write_bytes(data)  # into the temporary file itself (safetensors' save_file would replace it)


def load(f, map_location=None, *, weights_only=None):
    """Read what save wrote, from a path or a file opened for reading bytes; a file that is not one is
    an error naming it. Every array lands on the CPU, so map_location may only send it there. A pickled
    object loads with PyTorch's rules: weights_only=True (the default, as in PyTorch) builds tensors,
    containers, numbers, strings and the globals allowed by name, and refuses any other; False loads
    any object, running the code the file names."""
    locations = map_location.values() if isinstance(map_location, dict) else [map_location]
    for where in locations:
        if not callable(where):
            on_cpu("load", where)
    weights_only = weights_only is None or bool(weights_only)
    if not hasattr(f, "read"):
        return _read(Path(f), Path(f), weights_only)
    with tempfile.TemporaryDirectory() as folder:  # safetensors reads files: the bytes go through one
        copy = Path(folder, "copy.safetensors")
        copy.write_bytes(f.read())
        return _read(copy, getattr(f, "name", "the file object"), weights_only)


def _read(path, name, weights_only):
    if not path.is_file():
        raise FileNotFoundError(f"load: there is no file {name}")
    try:
        with safe_open(path, framework="np") as f:
            metadata = f.metadata() or {}
            check_dtypes(f, NUMPY_DTYPES)
            arrays = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (a safetensors file, not a dict)
        if PICKLED in metadata:
            data = base64.b64decode(metadata[PICKLED], validate=True)
        elif "gradflow" in metadata:
            return _decode(bounded_json.loads(metadata["gradflow"], "its description"), arrays)
        else:
            raise ValueError("a safetensors file without gradflow's description; safetensors.numpy.load_file reads it")
    except (SafetensorError, ValueError, KeyError, TypeError) as e:  # json's and base64's errors are ValueErrors
        raise ValueError(f"load: {name} is not a file written by gf.save ({e})") from None
    return unpickle.load(data, arrays, name, weights_only)


def check_dtypes(f, readable):
    """Refuse a safetensors file (opened with safe_open) holding a tensor whose dtype is not in `readable`."""
    for name in f.keys():  # noqa: SIM118 (a safetensors file, not a dict)
        dtype = f.get_slice(name).get_dtype()
        if dtype not in readable:
            known = ", ".join(sorted(readable))
            raise ValueError(f"{name} has dtype {dtype}, which gradflow cannot read; it reads {known}")


# --- the plain form: JSON and arrays ------------------------------------------------------------------


def _storable(array):
    """True for an array safetensors keeps: numbers or bools."""
    return array.dtype.kind in "biuf"


def _encode(obj, path, arrays):
    """obj as JSON, its arrays moved into `arrays` under their paths; _NotPlain if it holds anything else."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
        return obj.item()
    if (type(obj) is Tensor or isinstance(obj, np.ndarray)) and _storable(np.asarray(obj)):
        array = np.asarray(obj._data if isinstance(obj, Tensor) else obj)
        name = "/".join(str(p) for p in path) or "tensor"
        if name in arrays:  # {"a/b": x, "a": {"b": y}}: two arrays under one path
            raise _NotPlain
        arrays[name] = array if array.flags.c_contiguous else array.copy(order="C")  # safetensors reads memory in order
        if isinstance(obj, np.ndarray):
            return {"__array__": name}
        return {"__tensor__": name, "requires_grad": obj.requires_grad}
    if type(obj) in (list, tuple):
        items = [_encode(v, (*path, i), arrays) for i, v in enumerate(obj)]
        return items if isinstance(obj, list) else {"__tuple__": items}
    keys_kept = all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in obj) if type(obj) is dict else False
    if keys_kept:
        if all(isinstance(k, str) for k in obj) and not any(k in _TAGS for k in obj):
            return {k: _encode(v, (*path, k), arrays) for k, v in obj.items()}
        return {"__dict__": [[k, _encode(v, (*path, k), arrays)] for k, v in obj.items()]}
    raise _NotPlain


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
    if "__dict__" in node:
        return {k: _decode(v, arrays) for k, v in node["__dict__"]}
    if "__fields__" in node:  # a dataclass, as gradflow stored one before pickling it: its fields, by name
        return SimpleNamespace(**_decode(node["__fields__"], arrays))
    return {k: _decode(v, arrays) for k, v in node.items()}


# --- the pickled form: any object, its arrays beside it ----------------------------------------------


def rebuilt_tensor(cls, array, requires_grad):
    """A tensor of class cls (Tensor, Parameter) holding array: how a pickled tensor loads. A leaf, as
    PyTorch loads one (what computed it is not saved, nor its .grad)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor) and isinstance(array, np.ndarray)):
        raise pickle.UnpicklingError(f"load: a tensor is rebuilt from a tensor class and an array, not {cls!r}")
    return cls(array, requires_grad=bool(requires_grad))


class _Pickler(pickle.Pickler):
    """Pickles an object with each storable array as a persistent id (its name among `arrays`) and each
    Tensor or Parameter as rebuilt_tensor(its class, its array, requires_grad)."""

    def __init__(self, file, arrays):
        super().__init__(file, protocol=4)
        self.arrays, self.names = arrays, {}

    def persistent_id(self, obj):
        if not isinstance(obj, np.ndarray) or not _storable(obj):
            return None
        if id(obj) not in self.names:  # the same array twice is stored once
            self.names[id(obj)] = name = str(len(self.arrays))
            self.arrays[name] = np.ascontiguousarray(obj)  # a plain array, in memory order for safetensors
        return self.names[id(obj)]

    def reducer_override(self, obj):
        if isinstance(obj, Tensor) and unpickle.global_name(type(obj)) in unpickle.GRADFLOW_GLOBALS:
            return rebuilt_tensor, (type(obj), np.asarray(obj._data), obj.requires_grad)
        return NotImplemented


def _pickled(obj, arrays):
    out = io.BytesIO()
    try:
        _Pickler(out, arrays).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise TypeError(f"save: cannot store a {type(obj).__name__}: {e}") from None
    return out.getvalue()
