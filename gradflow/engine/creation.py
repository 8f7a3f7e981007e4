"""Making tensors: from data, filled with a value, ranges, and random draws from gradflow's generator."""

import numpy as np

from gradflow.engine.dtype import get_default_dtype
from gradflow.engine.rng import generator
from gradflow.engine.tensor import Tensor, _shape_arg


def tensor(data, requires_grad=False, dtype=None):
    """A new leaf tensor holding a copy of data (floats become the default dtype unless data is a numpy array)."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype)


def _float(dtype):
    """The dtype asked for, else the default float dtype."""
    return np.dtype(dtype) if dtype is not None else get_default_dtype()


def _shape(shape):
    shape = _shape_arg(shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"shape {shape} has a negative size")
    return shape


def zeros(*shape, dtype=None, requires_grad=False):
    return Tensor(np.zeros(_shape(shape), _float(dtype)), requires_grad)


def ones(*shape, dtype=None, requires_grad=False):
    return Tensor(np.ones(_shape(shape), _float(dtype)), requires_grad)


def full(shape, value, dtype=None, requires_grad=False):
    """A tensor filled with value; an int value gives int64 and a bool gives bool, as in PyTorch."""
    if dtype is None and isinstance(value, (bool, int, np.integer, np.bool_)):
        dtype = np.bool_ if isinstance(value, (bool, np.bool_)) else np.int64
    return Tensor(np.full(_shape((shape,)), value, _float(dtype)), requires_grad)


def arange(start, stop=None, step=1, dtype=None, requires_grad=False):
    """Evenly spaced values in [start, stop); integers give int64, as in PyTorch."""
    start, stop = (0, start) if stop is None else (start, stop)
    if dtype is None and all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
        dtype = np.int64
    return Tensor(np.arange(start, stop, step, dtype=_float(dtype)), requires_grad)


def randn(*shape, dtype=None, requires_grad=False):
    """Standard normal draws, N(0, 1)."""
    return Tensor(generator().standard_normal(_shape(shape)).astype(_float(dtype)), requires_grad)


def rand(*shape, dtype=None, requires_grad=False):
    """Uniform draws in [0, 1)."""
    return Tensor(generator().random(_shape(shape)).astype(_float(dtype)), requires_grad)


def _like(fn, x, dtype, requires_grad):
    return fn(x.shape, dtype=x.dtype if dtype is None else dtype, requires_grad=requires_grad)


def zeros_like(x, dtype=None, requires_grad=False):
    return _like(zeros, x, dtype, requires_grad)


def ones_like(x, dtype=None, requires_grad=False):
    return _like(ones, x, dtype, requires_grad)


def full_like(x, value, dtype=None, requires_grad=False):
    return full(x.shape, value, dtype=x.dtype if dtype is None else dtype, requires_grad=requires_grad)


def randn_like(x, dtype=None, requires_grad=False):
    return _like(randn, x, dtype, requires_grad)


def rand_like(x, dtype=None, requires_grad=False):
    return _like(rand, x, dtype, requires_grad)
