"""The dtypes a tensor holds, by name, and the default floating-point dtype.

Python numbers and lists become tensors of the default dtype (float32 unless changed); a numpy
array keeps its own dtype, as `torch.tensor` does. Gradients are only defined for float32 and
float64; integer tensors hold token ids and bool tensors masks. The names are numpy dtypes, so
`gf.zeros(3, dtype=gf.long)` and `np.zeros(3, dtype=gf.long)` mean the same; gradflow exports
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

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
int16 = np.dtype(np.int16)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)  # PyTorch's byte masks: torch.triu(...).type(torch.uint8) == 0
bool_ = np.dtype(np.bool_)
float16 = np.dtype(np.float16)  # a name only: see this file's docstring
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
    """The dtype that Python floats and lists become."""
    return _default


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
