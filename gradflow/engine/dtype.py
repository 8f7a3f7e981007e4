"""The default floating-point dtype.

Python numbers and lists become tensors of this dtype (float32 unless changed); a numpy array
keeps its own dtype, as `torch.tensor` does. Gradients are only defined for float32 and float64.
"""

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

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
