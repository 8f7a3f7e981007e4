"""Reading a pickle from elsewhere without running its code: torch.load's weights_only=True.

A pickle is a small program for a stack machine: its opcodes push numbers, strings and containers,
and a few of them run code, by naming a global (a class or a function: `os.system`) and calling it
(REDUCE, NEWOBJ, INST, OBJ) or its __setstate__ (BUILD). Every global a pickle names reaches the
unpickler through one method, find_class (the "Restricting Globals" section of Python's pickle
documentation), so a reader whose find_class answers from an allow-list runs nothing the list does
not name: containers, numbers and strings need no global; tensors come back through gradflow's
rebuild function; anything else (a model's class, a function) is refused in one line naming it,
unless the program allowed it by name (add_safe_globals, safe_globals), as PyTorch's weights-only
reader does. No module is imported on a pickle's word: an allowed global is the object registered,
or one of gradflow's own, looked up among the modules already loaded.

Bounded before a single object is built: the opcodes are read once with pickletools.genops, which
reads each argument's bytes without allocating the length a header claims (Python's own unpickler
allocates a claimed length before reading it). Each opcode builds at most one object or adds one
reference, so the memory the objects would take is at most OBJECT_BYTES per opcode plus the bytes
of its string argument; a pickle whose estimate passes MAX_OBJECT_BYTES is refused. Unpickling
itself is a loop over the opcodes, never a recursion, and load walks nothing of what it returns.
"""

import collections
import contextlib
import io
import pickle
import pickletools
import sys

OBJECT_BYTES = 128  # the largest object one opcode builds without a string argument: an empty dict is 64
MAX_OBJECT_BYTES = 256 << 20  # a model's pickle (its weights are arrays beside it) estimates at a few MB

# what weights_only=True loads without being asked: containers PyTorch's reader allows, and gradflow's
# tensors (Parameter lives in nn, named here by its path: the engine imports nothing above it)
SAFE_BY_DEFAULT = {
    "collections.OrderedDict": collections.OrderedDict,
    "collections.Counter": collections.Counter,
    "builtins.set": set,
    "builtins.frozenset": frozenset,
    "builtins.complex": complex,
    "builtins.bytearray": bytearray,
}
GRADFLOW_GLOBALS = (
    "gradflow.engine.dtype.DType",
    "gradflow.engine.serialize.rebuilt_tensor",
    "gradflow.engine.tensor.Tensor",
    "gradflow.engine.shape.Size",
    "gradflow.nn.module.Parameter",
)

_allowed = {}  # what the program allowed: "module.qualname" -> the object


def global_name(obj):
    """How a pickle names obj: its module and qualified name, `gradflow.nn.recurrent.LSTM`."""
    return f"{obj.__module__}.{obj.__qualname__}"


def add_safe_globals(safe_globals):
    """Allow each class or function (or (object, "module.name") pair) under weights_only=True."""
    for item in safe_globals:
        obj, name = item if isinstance(item, tuple) else (item, None)
        _allowed[name or global_name(obj)] = obj


def get_safe_globals():
    """The objects the program allowed, in the order allowed."""
    return list(_allowed.values())


def clear_safe_globals():
    _allowed.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """Allow the objects inside a `with` block only; what was allowed before is what is allowed after."""
    before = dict(_allowed)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _allowed.clear()
        _allowed.update(before)


def _gradflow_global(name):
    """One of gradflow's own allowed globals, from its module if loaded (never imported here), or None."""
    if name not in GRADFLOW_GLOBALS:
        return None
    module, qualname = name.rsplit(".", 1)
    return getattr(sys.modules.get(module), qualname, None)


class _Reader(pickle.Unpickler):
    """An unpickler whose persistent ids name the arrays stored beside the pickle; with `restricted`,
    its globals are the allowed ones only."""

    def __init__(self, data, arrays, where, restricted):
        super().__init__(io.BytesIO(data))
        self.arrays, self.where, self.restricted = arrays, where, restricted

    def persistent_load(self, pid):
        if not isinstance(pid, str) or pid not in self.arrays:
            raise pickle.UnpicklingError(f"load: {self.where} refers to an array {pid!r} the file does not hold")
        return self.arrays[pid]

    def find_class(self, module, name):
        if not self.restricted:
            return super().find_class(module, name)
        module = "builtins" if module == "__builtin__" else module  # Python 2's name, in protocols 0 to 2
        full = f"{module}.{name}"
        found = _allowed.get(full) or SAFE_BY_DEFAULT.get(full) or _gradflow_global(full)
        if found is None:
            raise pickle.UnpicklingError(
                f"load: {self.where} holds the global {full}, which weights_only=True does not load, since "
                f"loading it could run code; if you trust the file, allow it with "
                f"torch.serialization.add_safe_globals([{name}]) or the torch.serialization.safe_globals([...]) "
                "context manager, or load with weights_only=False"
            )
        return found


def estimated_bytes(data):
    """An upper bound on the memory of the objects pickle `data` builds, read from its opcodes without
    building any (a ValueError for bytes that are not a whole pickle)."""
    total = 0
    for _, arg, _ in pickletools.genops(data):
        total += OBJECT_BYTES + (len(arg) if isinstance(arg, (str, bytes, bytearray)) else 0)
    return total


def load(data, arrays, where, weights_only):
    """The object pickled in `data`, its persistent ids naming `arrays`; with weights_only, only allowed
    globals, and within MAX_OBJECT_BYTES. `where` names the file in errors."""
    if weights_only:
        try:
            size = estimated_bytes(data)
        except ValueError as e:
            raise pickle.UnpicklingError(f"load: {where} holds a broken pickle ({e})") from None
        if size > MAX_OBJECT_BYTES:
            raise pickle.UnpicklingError(
                f"load: {where} holds a pickle whose objects would take up to {size >> 20} MiB; "
                f"weights_only=True reads at most {MAX_OBJECT_BYTES >> 20} MiB (weights belong in tensors)"
            )
    return _Reader(data, arrays, where, weights_only).load()
