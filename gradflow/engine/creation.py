"""Making tensors: from data, filled with a value, ranges, and random draws from gradflow's generator.

Every factory takes PyTorch's keywords: dtype=, requires_grad=, device= (the CPU only: engine/device.py)
and, for random draws, generator= (a gf.Generator of one's own: engine/rng.py).
"""

import numpy as np

from gradflow.engine.checks import shape_arg
from gradflow.engine.device import on_cpu
from gradflow.engine.dtype import as_dtype, get_default_dtype, int64
from gradflow.engine.rng import generator as draws_from
from gradflow.engine.tensor import Tensor


def tensor(data, requires_grad=False, dtype=None, *, device=None):
    """A new leaf tensor holding a copy of data (floats become the default dtype unless data is a numpy array)."""
    on_cpu("tensor", device)
    return Tensor(data, requires_grad=requires_grad, dtype=None if dtype is None else as_dtype("tensor", dtype))


def from_numpy(array):
    """A tensor of array's own memory, as PyTorch's from_numpy: a write into one shows in the other."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy array, got {type(array).__name__}")
    if array.dtype.kind not in "biuf":
        raise TypeError(f"from_numpy: cannot make a tensor of {array.dtype} data")
    return Tensor._make(array, False, None)


def as_tensor(data, dtype=None, device=None):
    """data as a tensor, sharing memory where it can, as PyTorch's as_tensor: a tensor of that dtype is
    itself, a numpy array of it is from_numpy's view; anything else is a new tensor (as gf.tensor)."""
    on_cpu("as_tensor", device)
    dtype = None if dtype is None else as_dtype("as_tensor", dtype)
    if isinstance(data, Tensor):
        return data if dtype is None or dtype == data.dtype else data.astype(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or dtype == data.dtype) and data.dtype.kind in "biuf":
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def _float(op, dtype, device=None):
    """The dtype asked for, else the default float dtype; on the CPU, the one device."""
    on_cpu(op, device)
    return as_dtype(op, dtype) if dtype is not None else get_default_dtype()


def _shape(shape):
    shape = shape_arg(shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"shape {shape} has a negative size")
    return shape


def zeros(*shape, dtype=None, device=None, requires_grad=False):
    return Tensor(np.zeros(_shape(shape), _float("zeros", dtype, device)), requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False):
    return Tensor(np.ones(_shape(shape), _float("ones", dtype, device)), requires_grad)


def empty(*shape, dtype=None, device=None, requires_grad=False):
    """A tensor to be filled: zeros here (PyTorch leaves the memory as it finds it; a learner reading
    the numbers should see no garbage)."""
    return Tensor(np.zeros(_shape(shape), _float("empty", dtype, device)), requires_grad)


def full(shape, value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with value; an int value gives int64 and a bool gives bool, as in PyTorch."""
    if dtype is None and isinstance(value, (bool, int, np.integer, np.bool_)):
        dtype = np.bool_ if isinstance(value, (bool, np.bool_)) else np.int64
    return Tensor(np.full(_shape((shape,)), value, _float("full", dtype, device)), requires_grad)


def arange(start, stop=None, step=1, dtype=None, device=None, requires_grad=False):
    """Evenly spaced values in [start, stop); integers give int64, as in PyTorch."""
    start, stop = (0, start) if stop is None else (start, stop)
    if dtype is None and all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
        dtype = np.int64
    return Tensor(np.arange(start, stop, step, dtype=_float("arange", dtype, device)), requires_grad)


def randn(*shape, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal draws, N(0, 1)."""
    dtype = _float("randn", dtype, device)
    return Tensor(draws_from(generator).normal(_shape(shape), dtype), requires_grad)


def rand(*shape, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform draws in [0, 1)."""
    dtype = _float("rand", dtype, device)
    return Tensor(draws_from(generator).uniform(_shape(shape), dtype), requires_grad)


def _like(fn, x, dtype, device, requires_grad):
    return fn(x.shape, dtype=x.dtype if dtype is None else dtype, device=device, requires_grad=requires_grad)


def zeros_like(x, dtype=None, device=None, requires_grad=False):
    return _like(zeros, x, dtype, device, requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False):
    return _like(ones, x, dtype, device, requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False):
    return _like(empty, x, dtype, device, requires_grad)


def full_like(x, value, dtype=None, device=None, requires_grad=False):
    dtype = x.dtype if dtype is None else dtype
    return full(x.shape, value, dtype=dtype, device=device, requires_grad=requires_grad)


def randn_like(x, dtype=None, device=None, requires_grad=False):
    return _like(randn, x, dtype, device, requires_grad)


def rand_like(x, dtype=None, device=None, requires_grad=False):
    return _like(rand, x, dtype, device, requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Integers drawn uniformly from [low, high), int64: randint(low, high, size), or randint(high, size)
    from [0, high), as PyTorch's."""
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint: give the shape to draw, e.g. gf.randint(0, 10, (3,))")
    if not low < high:
        raise ValueError(f"randint: low {low} must be less than high {high}")
    on_cpu("randint", device)
    dtype = int64 if dtype is None else as_dtype("randint", dtype)
    return Tensor(draws_from(generator).integers(int(low), int(high), _shape((size,)), dtype), requires_grad)


def multinomial(probs, num_samples, replacement=False, *, generator=None):
    """num_samples category indices drawn from each row of probs (weights: non-negative, not necessarily
    summing to 1), as PyTorch's multinomial: int64 of shape (num_samples,), or (rows, num_samples) for 2-D
    probs. Without replacement each category is drawn at most once per row. Draws from gradflow's generator,
    or from generator= (a gf.Generator).
    """
    p = np.asarray(probs)
    p = p if p.dtype in (np.float32, np.float64) else p.astype(np.float64)
    if p.ndim not in (1, 2) or p.shape[-1] == 0:
        raise ValueError(f"multinomial: probs must be a vector or rows of weights, got shape {p.shape}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be a positive integer, got {num_samples!r}")
    if not (np.isfinite(p).all() and (p >= 0).all()):
        raise ValueError("multinomial: probs must be finite and non-negative")
    rows = p.reshape(-1, p.shape[-1])
    nonzero = np.count_nonzero(rows, axis=-1)
    if (nonzero == 0).any():
        raise ValueError("multinomial: a row of probs is all zeros: there is nothing to draw")
    if not replacement and num_samples > nonzero.min():
        raise ValueError(
            f"multinomial: cannot draw {num_samples} samples without replacement from a row with "
            f"{nonzero.min()} nonzero weights (pass replacement=True to draw one more than once)"
        )
    draws = draws_from(generator).multinomial(rows, int(num_samples), replacement)
    return Tensor(draws.reshape(p.shape[:-1] + (num_samples,)))


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """`steps` evenly spaced values from start to end, both included, as PyTorch's linspace (in the
    default float dtype unless dtype= says otherwise). gradflow computes on the CPU: device="cpu" only."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"linspace: steps must be a non-negative integer, got {steps!r}")
    dtype = _float("linspace", dtype, device)
    # PyTorch's numbers to the last bit: step in dtype, the first half counted up from start and the second
    # half down from end, each value one rounding of start + i step (its fused multiply-add), which a wider
    # float gives here (numpy's linspace rounds differently and differs from PyTorch's in the last bit)
    first, last = dtype.type(start), dtype.type(end if steps > 1 else start)  # one step: [start]
    step = (last - first) / dtype.type(steps - 1) if steps > 1 else dtype.type(0)
    wide = np.float64 if dtype.itemsize < 8 else np.longdouble
    i = np.arange(steps)
    up, down = wide(first) + wide(step) * i, wide(last) - wide(step) * (steps - 1 - i)
    return Tensor(np.where(i < steps // 2, up, down).astype(dtype), requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """The integers 0 .. n-1 in a random order drawn from gradflow's generator (or generator=), int64, as
    PyTorch's randperm."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"randperm: n must be a non-negative integer, got {n!r}")
    on_cpu("randperm", device)
    dtype = int64 if dtype is None else as_dtype("randperm", dtype)
    return Tensor(draws_from(generator).permutation(int(n)).astype(dtype), requires_grad)


class TypedTensor(type):
    """PyTorch's typed tensor constructors, torch.LongTensor and the like: `LongTensor([[1, 2]])` holds
    that data in int64, `FloatTensor(2, 3)` is a (2, 3) float32 tensor to fill (zeros, as empty's), and
    `isinstance(x, LongTensor)` asks for a tensor of that dtype, as in PyTorch."""

    def __call__(cls, *data_or_shape, device=None):
        on_cpu(cls.__name__, device)
        if len(data_or_shape) == 1 and not isinstance(data_or_shape[0], (int, np.integer)):
            return Tensor(data_or_shape[0], dtype=cls.dtype)
        return empty(*(data_or_shape or (0,)), dtype=cls.dtype)

    def __instancecheck__(cls, x):
        return isinstance(x, Tensor) and x.dtype == cls.dtype


def _typed(name, dtype):
    return TypedTensor(name, (), {"dtype": np.dtype(dtype), "__module__": __name__})


FloatTensor, DoubleTensor = _typed("FloatTensor", np.float32), _typed("DoubleTensor", np.float64)
LongTensor, IntTensor = _typed("LongTensor", np.int64), _typed("IntTensor", np.int32)
ShortTensor, CharTensor = _typed("ShortTensor", np.int16), _typed("CharTensor", np.int8)
ByteTensor, BoolTensor = _typed("ByteTensor", np.uint8), _typed("BoolTensor", np.bool_)
