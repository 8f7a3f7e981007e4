"""What `tensor.data` hands out: the tensor's numpy array, with PyTorch's in-place methods on it.

In PyTorch `p.data` is a tensor sharing p's memory, outside autograd; programs write into it:
`p.data.add_(p.grad, alpha=-lr)`, `w.data.normal_(0, 0.02)`, `w.data.uniform_(-r, r)`,
`p.data.copy_(x)`, `p.data.zero_()`, `p.data.clamp_(-1, 1)`. In gradflow `p.data` stays the numpy
array (a learner reads and writes the numbers with numpy: `p.data[0, 1]`, `p.data -= lr * p.grad`,
`np.exp(p.data)`), viewed as a DataArray: the same memory, where each of PyTorch's in-place methods
(IN_PLACE) is the tensor method of that name applied to a tensor over this memory, outside the graph,
so its arguments and results are PyTorch's (alpha=, a tensor or a number, broadcasting, the dtype
kept) and it returns the array, so that calls chain. `clone()` is a tensor holding a copy, as
PyTorch's `x.data.clone()`; `cpu()` is the array, `numpy()` the plain array.

Everything else is numpy's: arithmetic and reductions give plain arrays, `copy()` and `astype()`
plain arrays too, so that nothing computed from `.data` carries these methods further. Where numpy
and PyTorch share a name with different meanings (`p.data.max(1)`, `p.data.std()`), numpy's holds:
the docs say so (docs/pytorch.md).
"""

import numpy as np

from gradflow.engine import autograd  # (as a module: autograd imports saved.py, which imports this file)

# PyTorch's in-place tensor methods, written through x.data into the tensor's memory (engine/inplace.py)
IN_PLACE = (
    "abs_", "add_", "addcdiv_", "addcmul_", "clamp_", "copy_", "div_", "exp_", "fill_", "index_fill_", "lerp_",
    "log_", "masked_fill_", "mul_", "neg_", "normal_", "pow_", "relu_", "scatter_", "sigmoid_", "sqrt_", "sub_",
    "tanh_", "uniform_", "zero_",
)  # fmt: skip


def _plain(a):
    return a.view(np.ndarray) if isinstance(a, DataArray) else a


def same_layout(a, b):
    """True if arrays a and b are the same memory, read the same way (x.data is a view of x's array)."""
    return (
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.shape == b.shape
        and a.strides == b.strides
        and a.dtype == b.dtype
    )


class DataArray(np.ndarray):
    """A tensor's array, as `tensor.data` gives it: a view of the same memory with PyTorch's in-place
    methods. tensor_type is Tensor (set by engine/tensor.py, which imports this file)."""

    tensor_type = None

    def _check_write(self):
        """Nothing to check here; SavedArray, the guarded form, refuses while a graph holds the memory."""

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        inputs = tuple(_plain(a) for a in inputs)
        if out is None:
            return getattr(ufunc, method)(*inputs, **kwargs)
        getattr(ufunc, method)(*inputs, out=tuple(_plain(a) for a in out), **kwargs)
        return out[0] if len(out) == 1 else out  # x.data *= 2 gives x.data back, as numpy's operator does

    def __repr__(self):
        return repr(self.view(np.ndarray))

    def copy(self, order="C"):
        return self.view(np.ndarray).copy(order)  # an ordinary array

    def astype(self, dtype, *args, **kwargs):
        return self.view(np.ndarray).astype(dtype, *args, **kwargs)

    def clone(self):
        """A tensor holding a copy of these numbers, outside the graph (PyTorch's x.data.clone())."""
        return self.tensor_type._constant(np.array(self))

    def cpu(self):
        return self

    def numpy(self):
        return self.view(np.ndarray)

    def __getattr__(self, name):
        """Reached only for a name neither numpy's arrays nor this class have: a tensor method called on
        x.data, where PyTorch's x.data is a tensor. Said in one line, rather than as an attribute
        missing from a class the user never made."""
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise AttributeError(
            f"x.data is the tensor's numpy array in gradflow (in PyTorch, a tensor), with PyTorch's in-place "
            f"methods (add_, copy_, normal_, ...) but no {name!r}: call it on the tensor, x.detach().{name}(...)"
        )


def _in_place(name):
    def method(self, *args, **kwargs):
        self._check_write()
        with autograd.no_grad():  # outside the graph, as PyTorch's .data: the numbers change, nothing is recorded
            getattr(self.tensor_type._constant(self.view(np.ndarray)), name)(*args, **kwargs)
        return self

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"x.data.{name}(...): the tensor method {name} (PyTorch's), written into this memory."
    return method


for _name in IN_PLACE:
    setattr(DataArray, _name, _in_place(_name))
