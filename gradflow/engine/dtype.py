"""The dtypes a tensor holds, by name, and the default floating-point dtype.

Python numbers and lists become tensors of the default dtype (float32 unless changed); a numpy
array keeps its own dtype, as `torch.tensor` does. Gradients are only defined for float32 and
float64; integer tensors hold token ids and bool tensors masks. The names are DTypes, which print as
PyTorch's (torch.int64) and which numpy reads as their np.dtype, so `gf.zeros(3, dtype=gf.long)` and
`np.zeros(3, dtype=gf.long)` mean the same, and a tensor's `x.dtype` is one too; gradflow exports
PyTorch's aliases of them too (gf.float is float32, gf.double float64, gf.long int64, gf.int int32).
`finfo` and `iinfo` are numpy's (torch.finfo(torch.float32).min reads the same).
float16 (gf.half) and bfloat16 are names only, so that a program that picks its dtype by name
(`{"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]`)
imports: a tensor asked to hold one refuses, naming it, because numpy computes float16 slowly,
has no bfloat16, and gradients in either are not checked here; computing in float32 instead would
give other numbers than PyTorch's without a word. An op's result keeps its inputs' float dtype
(keep_dtype), whatever numpy would promote it to.
"""

import numpy as np


class DType:
    """A dtype as PyTorch names it, torch.float32, and as numpy reads it: the np.dtype in `.dtype`.

    numpy takes any object with a `.dtype` as that dtype (`np.zeros(3, dtype=gf.long)`,
    `a.astype(x.dtype)`, `np.dtype(x.dtype)`); it compares equal to the np.dtype, the numpy scalar type
    and the other DType of the same kind, hashes as the np.dtype does (a dict keyed by either finds it),
    and reads numpy's attributes through (`x.dtype.kind`, `.itemsize`, `.name`), with PyTorch's
    `is_floating_point` and `is_signed` beside them. It prints as PyTorch prints it, `torch.float32`;
    inside an f-string it reads `float32`, the form gradflow's messages use (as a torch.Size reads (5, 27)
    there: engine/shape.py).
    """

    # numpy 2.4 asks an object for `__numpy_dtype__` before `.dtype`: held here as a slot, the answer costs
    # what an np.dtype's does (through __getattr__ below, numpy's missing attribute raised and caught
    # took 10 us, at every astype and np.zeros(..., dtype=x.dtype))
    __slots__ = ("dtype", "__numpy_dtype__")

    def __init__(self, dtype):
        object.__setattr__(self, "dtype", np.dtype(dtype))
        object.__setattr__(self, "__numpy_dtype__", self.dtype)

    def __repr__(self):
        return f"torch.{_TORCH_NAMES.get(self.dtype.name, self.dtype.name)}"

    __str__ = __repr__

    def __format__(self, spec):
        return format(self.dtype.name, spec)

    def __eq__(self, other):
        if type(other) is DType:
            return self.dtype == other.dtype
        if isinstance(other, np.dtype) or (isinstance(other, type) and issubclass(other, np.generic)):
            return self.dtype == np.dtype(other)
        return NotImplemented

    def __hash__(self):
        return hash(self.dtype)

    def __getattr__(self, name):
        return getattr(self.dtype, name)

    def __setattr__(self, name, value):
        raise AttributeError(f"{self!r} is a dtype: it cannot be changed")

    def __reduce__(self):
        return DType, (self.dtype.name,)

    @property
    def is_floating_point(self):
        return self.dtype.kind == "f"

    @property
    def is_signed(self):
        return self.dtype.kind in "if"


_TORCH_NAMES = {"bool": "bool", "float16": "float16"}  # numpy's names are PyTorch's, bool_ aside
_KNOWN = {}


def torch_dtype(dtype):
    """The DType of np.dtype `dtype`, made once per dtype (Tensor.dtype asks at every read)."""
    known = _KNOWN.get(dtype)
    if known is None:
        known = _KNOWN[dtype] = DType(dtype)
    return known


float32 = torch_dtype(np.dtype(np.float32))
float64 = torch_dtype(np.dtype(np.float64))
int32 = torch_dtype(np.dtype(np.int32))
int64 = torch_dtype(np.dtype(np.int64))
int16 = torch_dtype(np.dtype(np.int16))
int8 = torch_dtype(np.dtype(np.int8))
uint8 = torch_dtype(np.dtype(np.uint8))  # PyTorch's byte masks: torch.triu(...).type(torch.uint8) == 0
bool_ = torch_dtype(np.dtype(np.bool_))
float16 = torch_dtype(np.dtype(np.float16))  # a name only: see this file's docstring
half = float16


class NarrowFloat:
    """A float format numpy has not (bfloat16), as a name that every tensor refuses to hold."""

    def __init__(self, name):
        self.name = name
        self.is_floating_point = True

    def __repr__(self):
        return f"gradflow.{self.name}"


bfloat16 = NarrowFloat("bfloat16")
finfo, iinfo = np.finfo, np.iinfo  # a float dtype's min, max, eps, tiny; an integer's min, max

FLOAT_DTYPES = (float32, float64)

_default = np.dtype(np.float32)


def set_default_dtype(dtype):
    """Set the dtype that Python floats and lists become: float32 (the default) or float64."""
    global _default
    dtype = np.dtype(dtype)
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"set_default_dtype: dtype must be float32 or float64, got {dtype}")
    _default = dtype


def get_default_dtype():
    """The dtype that Python floats and lists become (torch.float32 unless set)."""
    return torch_dtype(_default)


def is_float(dtype):
    return np.dtype(dtype).kind == "f"


def as_dtype(op, dtype):
    """dtype as a numpy dtype a tensor may hold (float32, float64, an integer type or bool), or a clear error."""
    if isinstance(dtype, NarrowFloat):
        raise TypeError(f"{op}: gradflow's tensors hold float32, float64, integers or bool, not {dtype.name}")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: {dtype!r} is not a dtype; use gf.float32, gf.float64, gf.int64, gf.bool, ...") from None
    if dtype.kind not in "biu" and dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: gradflow's tensors hold float32, float64, integers or bool, not {dtype}")
    return dtype


def keep_dtype(out, arrays):
    """An op's result `out` in its inputs' float dtype: the widest float dtype of `arrays`.

    numpy 2 promotes float32 with a float64 scalar or constant to float64 without a word; an op's
    result is cast back (integer inputs that produce floats, as in the mean of token ids, give the
    default float dtype).
    """
    if out.dtype.kind != "f":
        return out
    dtype = None
    for a in arrays:
        if a is not None and a.dtype.kind == "f" and (dtype is None or a.dtype.itemsize > dtype.itemsize):
            dtype = a.dtype
    dtype = dtype or _default
    return out if out.dtype == dtype else out.astype(dtype)
