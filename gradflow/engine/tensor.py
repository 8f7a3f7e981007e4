"""The Tensor: a numpy array, its gradient, and the edge to the op that made it.

A tensor made by an op keeps that op's node in `grad_fn`; the node keeps its input tensors. That
chain of nodes is the computation graph that `backward()` walks from the output to the leaves.
Every operator and method here only checks its arguments and runs one op of engine/ops, always
as `kernel(op).apply(...)`: kernels.kernel names the class that runs the op in the tier in use, the
plain op itself (what a learner steps into) or the fast tier's kernel that replaces it. So no method
is special: a kernel added to the fast tier serves the Tensor methods as it serves nn.functional.

This file speaks numpy's language (axis=, keepdims=, astype). Beside it: tensor_torch.py gives the
same methods PyTorch's names and keywords (dim=, keepdim=, size(), view, float(), ...), inplace.py
the in-place changes (add_, zero_, x[i] = v), and saved.py the guards of the memory a graph saved
for backward (data, version).
"""

import math
import numbers

import numpy as np

from gradflow.engine import autograd, ops
from gradflow.engine.checks import broadcast_shape, check_mask, normalize_axes, normalize_axis, shape_arg, spelling
from gradflow.engine.data_array import DataArray
from gradflow.engine.dtype import FLOAT_DTYPES, as_dtype, get_default_dtype, is_float, torch_dtype
from gradflow.engine.inplace import InPlace
from gradflow.engine.kernels import kernel
from gradflow.engine.ops.shape import Cast, Copy
from gradflow.engine.printing import array_text, with_suffixes
from gradflow.engine.saved import SavedMemory
from gradflow.engine.shape import Size
from gradflow.engine.tensor_torch import (
    PyTorchNames,
    max_as_pytorch,
    min_as_pytorch,
    pytorch_keywords,
    var_as_pytorch,
)


def as_array(data, dtype=None):
    """A numpy array from data: a numpy array keeps its dtype, Python floats get the default one."""
    if isinstance(data, Tensor):
        data = data._data
    if isinstance(data, (np.ndarray, np.generic)):
        array = np.array(data, dtype=dtype)
    else:
        try:
            array = np.array(data)
        except ValueError as e:
            raise ValueError(f"tensor: cannot make a tensor of this data: {e}") from None
        if dtype is not None:
            array = array.astype(dtype)
        elif is_float(array.dtype):
            array = array.astype(get_default_dtype())
    if array.dtype.kind not in "biuf":
        raise TypeError(f"tensor: cannot make a tensor of {array.dtype} data ({type(data).__name__})")
    return array


def as_tensor(x):
    """x itself if it is a Tensor, else a constant tensor of it."""
    return x if isinstance(x, Tensor) else Tensor(x)


def _lift(x, other):
    """x as a Tensor; a Python or numpy scalar takes `other`'s dtype, as in PyTorch.

    This is where float32 stays float32: `x * np.float64(2)` would otherwise promote to float64.
    """
    if isinstance(x, Tensor):
        return x
    if isinstance(other, Tensor) and (isinstance(x, (int, float)) or np.ndim(x) == 0):  # (np.ndim(2.0): 4 us)
        scalar = np.asarray(x)
        dtype = other._data.dtype  # numpy's dtype: the engine reads its arrays, not the DType users see
        if dtype.kind != "f" and scalar.dtype.kind == "f":
            dtype = get_default_dtype()
        return Tensor._constant(scalar.astype(dtype))
    return Tensor(x)


def _binary(op, a, b):
    a, b = _lift(a, b), _lift(b, a)
    _check_broadcast(op.name, a, b)
    return kernel(op).apply(a, b)


def _check_broadcast(op, a, b):
    """Tensors a and b broadcast together, or the error names op and the axis where they clash."""
    a_shape, b_shape = a._data.shape, b._data.shape  # numpy's tuples: a torch.Size is built for users only
    if a_shape != b_shape and a_shape and b_shape:  # (a 0-d operand, a number, broadcasts to any shape)
        broadcast_shape(op, a_shape, b_shape)


def _index_arg(index):
    """Normalise x[index]: tensors and lists become arrays, boolean masks become integer arrays."""
    index = index if isinstance(index, tuple) else (index,)
    out = []
    for i in index:
        if isinstance(i, Tensor):
            i = i._data
        elif isinstance(i, list):
            i = np.array(i)
        if isinstance(i, np.ndarray) and i.dtype == bool:
            out.extend(np.nonzero(i))  # x[mask] selects the same elements as x[mask.nonzero()]
        else:
            out.append(i)
    return tuple(out)


def _scatter_index(op, index, axis, shape, src_shape=None):
    """gather's and scatter_add's index as an int64 array: as many axes as x, no longer than x off `axis`
    (and than src on every axis, for scatter_add), every position within axis."""
    index = np.asarray(index._data if isinstance(index, Tensor) else index)
    if index.dtype.kind not in "iu":
        raise TypeError(f"{op}: index must hold integers, got {index.dtype}")
    bounds = [(shape, {axis})] + ([(src_shape, set())] if src_shape is not None else [])
    if index.ndim != len(shape) or any(
        len(s) != index.ndim or any(n > m for a, (n, m) in enumerate(zip(index.shape, s)) if a not in free)
        for s, free in bounds
    ):
        against = f"x {shape}" + (f" and src {src_shape}" if src_shape is not None else "")
        raise ValueError(f"{op}: index of shape {index.shape} does not fit {against} along axis {axis}")
    if index.size and not (index.min() >= 0 and index.max() < shape[axis]):
        raise IndexError(
            f"{op}: index holds {index.min() if index.min() < 0 else index.max()}, "
            f"out of range for axis {axis} of size {shape[axis]}"
        )
    return index.astype(np.int64)


# numpy's ufunc -> (Tensor's method when the tensor is on the left, its reflected twin for the right)
_OPERATORS = {
    np.add: ("__add__", "__radd__"),
    np.subtract: ("__sub__", "__rsub__"),
    np.multiply: ("__mul__", "__rmul__"),
    np.true_divide: ("__truediv__", "__rtruediv__"),
    np.power: ("__pow__", "__rpow__"),
    np.matmul: ("__matmul__", "__rmatmul__"),
    np.negative: ("__neg__", None),
    np.equal: ("__eq__", "__eq__"),
    np.not_equal: ("__ne__", "__ne__"),
    np.less: ("__lt__", "__gt__"),
    np.less_equal: ("__le__", "__ge__"),
    np.greater: ("__gt__", "__lt__"),
    np.greater_equal: ("__ge__", "__le__"),
}


class Tensor(PyTorchNames, InPlace, SavedMemory):
    """An n-dimensional array that records how it was computed, for reverse-mode differentiation.

    `data` is the numpy array; `grad`, after `backward()`, is dL/d(this tensor) as a tensor of the
    same shape and dtype, outside the graph, as in PyTorch (p.grad.zero_(), p.grad.norm(); numpy reads
    it as an array); `grad_fn` is the op that produced it (None for a leaf). While an op in a
    live graph keeps the array for backward, `data` refuses writes into it; `version` counts the
    updates made in place (SavedMemory, in saved.py, with the rest of those guards).

    Methods that take an axis are written with numpy's axis= and keepdims=; @pytorch_keywords lets
    PyTorch's dim= and keepdim= call them too (x.sum(axis=1), x.sum(dim=1) and x.sum(1) are the same
    call), with PyTorch's result where PyTorch's call means something else (tensor_torch.py, with
    PyTorch's other names: PyTorchNames). The in-place methods (add_, fill_, ...) are in inplace.py.
    """

    __hash__ = object.__hash__  # == compares elements, as in numpy; identity stays the hash

    def __init__(self, data, requires_grad=False, dtype=None):
        self._init(as_array(data, dtype), False, None)
        self.requires_grad = requires_grad

    @classmethod
    def _make(cls, data, requires_grad, grad_fn):
        t = cls.__new__(cls)
        t._init(data, requires_grad, grad_fn)
        return t

    def _init(self, data, requires_grad, grad_fn):
        self._data = data
        self._requires_grad = requires_grad
        self.grad_fn = grad_fn
        self._grad = None
        self.name = None

    @staticmethod
    def _constant(array):
        """A tensor outside the graph holding `array` itself: a mask, positions, an integer cast."""
        return Tensor._make(array, False, None)

    # --- attributes ----------------------------------------------------------------------------

    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        if value and self.dtype not in FLOAT_DTYPES:
            raise TypeError(
                f"tensor: requires_grad=True needs a float32 or float64 tensor, this one is {self.dtype} "
                "(integer tensors hold token ids and have no gradient)"
            )
        if self.grad_fn is not None and not value:
            raise ValueError("tensor: requires_grad can only be switched off on a leaf; use .detach()")
        self._requires_grad = bool(value)

    @property
    def grad(self):
        """dL/d(this tensor), summed over the backward passes since it was last set to None: a tensor
        outside the graph, or None before the first backward."""
        return self._grad

    @grad.setter
    def grad(self, value):
        """None, a tensor or an array of this tensor's shape (kept as given, converted to this dtype)."""
        if value is not None:
            array = value._data if isinstance(value, Tensor) else np.asarray(value)
            if array.shape != self._data.shape:
                raise ValueError(f"grad: shape {array.shape} does not match the tensor's shape {self.shape}")
            if not isinstance(value, Tensor) or array.dtype != self._data.dtype or value.requires_grad:
                value = Tensor._constant(np.array(array, dtype=self._data.dtype))
        self._grad = value

    def _accumulate_grad(self, g):
        if self._grad is None:
            # a copy (g may be shared with other tensors), in C order like the data: a weight's gradient
            # often arrives transposed, and the optimizer's passes over it are faster in the data's order
            self._grad = Tensor._constant(np.array(g, dtype=self._data.dtype, order="C"))
        else:  # in place, as PyTorch does; the version count protects a graph that saved the old sum
            total = self._grad.in_place()
            total += g

    shape = property(lambda self: Size(self._data.shape))  # a tuple that prints as torch.Size([5, 27])
    dtype = property(lambda self: torch_dtype(self._data.dtype))  # prints as torch.float32; numpy reads its np.dtype
    ndim = property(lambda self: self._data.ndim)

    def numel(self):
        """How many numbers the tensor holds: the product of its shape."""
        return self._data.size

    @property
    def is_leaf(self):
        """True for tensors no op produced (inputs, parameters); backward fills only their .grad."""
        return self.grad_fn is None

    def numpy(self):
        return self.data

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        """numpy's functions on tensors. An arithmetic operator with an array on its left (`array *
        tensor`) is the tensor op, recorded as `tensor * array` would be; with out= arrays the ufunc
        writes into them (`p.data -= lr * p.grad` updates p's array in place); any other ufunc
        computes on the arrays and gives an array (np.sqrt(p.grad)), as numpy code expects."""
        operator = _OPERATORS.get(ufunc) if method == "__call__" and out is None and not kwargs else None
        if operator is not None:
            left, right = (inputs + (None,))[:2]
            if isinstance(left, Tensor):
                return getattr(left, operator[0])(*inputs[1:])
            return getattr(right, operator[1])(left)
        arrays = [x._data if isinstance(x, Tensor) else x for x in inputs]
        if out is not None:
            if any(isinstance(o, Tensor) for o in out):
                raise TypeError(f"{ufunc.__name__}: out= takes arrays (x.data), not tensors; or use an in-place method")
            kwargs["out"] = out
        return getattr(ufunc, method)(*arrays, **kwargs)

    def tolist(self):
        """The elements as (nested lists of) Python numbers; a 0-d tensor gives one number."""
        return self._data.tolist()

    def item(self):
        if self.numel() != 1:
            raise ValueError(f"item: only a one-element tensor converts to a Python number, shape is {self.shape}")
        return self._data.item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise ValueError(
                f"bool: a tensor of shape {self.shape} has no single truth value; "
                "use x.data.any() or x.data.all(), or reduce it first"
            )
        return bool(self._data)

    def detach(self):
        """The same data as a new leaf, outside the graph: gradients stop here. Detached from a leaf
        (a parameter), it shares the leaf's guards too (version and saved-array checks); not from an
        op's output, which it would keep alive with its whole graph."""
        t = Tensor._constant(self._data)
        owner = self if self._base is None else self._base
        if owner.grad_fn is None:
            t._base = owner
        return t

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in .grad after backward (leaves always keep theirs)."""
        if self.grad_fn is not None:
            autograd.set_retained(self.grad_fn, self)

    def backward(self, grad=None, retain_graph=False):
        """Add d(self)/d(leaf) to every leaf's .grad that requires one, as PyTorch's torch.autograd.backward.

        grad: dL/d(self), of self's shape; required unless self has one element (then 1). Gradients add
        up in the leaves' .grad over backward calls until zeroed (zero_grad), so that several losses can
        be summed. retain_graph=True keeps what the graph saved for a second backward through it; by
        default it is freed, and a second backward says so. docs/engine.md ("Autograd") walks through it.
        """
        autograd.backward(self, grad, retain_graph)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self):
        body = array_text(self._data, indent=len("tensor("))  # PyTorch's layout: 4 digits, one column width
        extras = []
        if self.dtype not in (get_default_dtype(), np.int64, np.bool_):  # the dtypes PyTorch does not name
            extras.append(f"dtype={self.dtype!r}")  # torch.float64, as PyTorch writes it
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        if self.name:
            extras.append(f"name={self.name!r}")
        return with_suffixes(f"tensor({body}", extras, indent=len("tensor(")) + ")"

    # --- arithmetic: both sides, with broadcasting ---------------------------------------------

    def __add__(self, other):
        return _binary(ops.Add, self, other)

    def __radd__(self, other):
        return _binary(ops.Add, other, self)

    def __sub__(self, other):
        return _binary(ops.Sub, self, other)

    def __rsub__(self, other):
        return _binary(ops.Sub, other, self)

    def __mul__(self, other):
        return _binary(ops.Mul, self, other)

    def __rmul__(self, other):
        return _binary(ops.Mul, other, self)

    def __truediv__(self, other):
        return _binary(ops.Div, self, other)

    def __rtruediv__(self, other):
        return _binary(ops.Div, other, self)

    def __pow__(self, other):
        return _binary(ops.Pow, self, other)

    def __rpow__(self, other):
        return _binary(ops.Pow, other, self)

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def __neg__(self):
        return kernel(ops.Neg).apply(self)

    def __pos__(self):
        return self

    # --- comparisons give boolean tensors (masks), outside the graph ----------------------------

    def _compare(self, fn, other):
        if not isinstance(other, (Tensor, np.ndarray, np.generic, numbers.Number, list, tuple)):
            return NotImplemented  # pytest.approx and the like compare themselves with the tensor
        other = _lift(other, self)
        _check_broadcast(fn.__name__, self, other)
        return Tensor._constant(fn(self._data, other._data))

    def __eq__(self, other):
        return self._compare(np.equal, other)

    def __ne__(self, other):
        return self._compare(np.not_equal, other)

    def __lt__(self, other):
        return self._compare(np.less, other)

    def __le__(self, other):
        return self._compare(np.less_equal, other)

    def __gt__(self, other):
        return self._compare(np.greater, other)

    def __ge__(self, other):
        return self._compare(np.greater_equal, other)

    # --- & | ^ combine masks (the bits of integers), outside the graph, as comparisons are -------

    def _bitwise(self, symbol, fn, other):
        if not isinstance(other, (Tensor, np.ndarray, np.generic, numbers.Number, list, tuple)):
            return NotImplemented
        other = _lift(other, self)
        if not {self.dtype.kind, other.dtype.kind} <= set("biu"):
            raise TypeError(f"{symbol}: needs bool or integer tensors, got {self.dtype} and {other.dtype}")
        return self._compare(fn, other)

    def __and__(self, other):
        return self._bitwise("&", np.bitwise_and, other)

    def __or__(self, other):
        return self._bitwise("|", np.bitwise_or, other)

    def __xor__(self, other):
        return self._bitwise("^", np.bitwise_xor, other)

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__  # each is symmetric

    # --- elementwise functions ------------------------------------------------------------------

    def neg(self):
        return kernel(ops.Neg).apply(self)

    def exp(self):
        return kernel(ops.Exp).apply(self)

    def log(self):
        return kernel(ops.Log).apply(self)

    def log1p(self):
        return kernel(ops.Log1p).apply(self)

    def sqrt(self):
        return kernel(ops.Sqrt).apply(self)

    def rsqrt(self):
        return kernel(ops.Rsqrt).apply(self)

    def abs(self):
        return kernel(ops.Abs).apply(self)

    __abs__ = abs  # abs(x), Python's spelling

    def tanh(self):
        return kernel(ops.Tanh).apply(self)

    def sin(self):
        return kernel(ops.Sin).apply(self)

    def cos(self):
        return kernel(ops.Cos).apply(self)

    def sigmoid(self):
        return kernel(ops.Sigmoid).apply(self)

    def relu(self):
        return kernel(ops.Relu).apply(self)

    def gelu(self):
        """GPT-2's GELU, the tanh form: x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2. PyTorch's default
        is the exact erf form, F.gelu(x) (F.gelu(x, approximate="tanh") is this one)."""
        return kernel(ops.Gelu).apply(self)

    def silu(self):
        return kernel(ops.Silu).apply(self)

    def maximum(self, other):
        return _binary(ops.Maximum, self, other)

    def minimum(self, other):
        return _binary(ops.Minimum, self, other)

    def clip(self, min=None, max=None):
        """Limit every element to [min, max]; either bound may be None."""
        if min is None and max is None:
            raise ValueError("clip: give min, max or both")
        if min is not None and max is not None and min > max:
            raise ValueError(f"clip: min {min} is greater than max {max}")
        return kernel(ops.Clip).apply(self, lo=min, hi=max)

    # --- reductions over axis: an int, a tuple, or None for every axis --------------------------

    def _reduce(self, name, op, axis, keepdims, **params):
        return kernel(op).apply(self, axis=normalize_axes(name, axis, self._data.shape), keepdims=keepdims, **params)

    @pytorch_keywords
    def sum(self, axis=None, keepdims=False):
        """y = sum of x over axis."""
        return self._reduce("sum", ops.Sum, axis, keepdims)

    @pytorch_keywords
    def mean(self, axis=None, keepdims=False):
        return self._reduce("mean", ops.Mean, axis, keepdims)

    @pytorch_keywords(answered_by=var_as_pytorch)  # x.var(dim=1): PyTorch's unbiased estimate
    def var(self, axis=None, keepdims=False, *, ddof=0):
        """y = 1/(N - ddof) sum (x - mean)^2 over axis: the population variance, as numpy's, unless ddof=1."""
        axes = normalize_axes("var", axis, self._data.shape)
        n = math.prod(self._data.shape[a] for a in axes)
        if n - ddof <= 0:
            raise ValueError(
                f"var: {n} element(s) along axis {axes} of shape {self.shape} leave nothing to divide by "
                f"with ddof {ddof} (the variance divides by N - ddof)"
            )
        return self._reduce("var", ops.Var, axes, keepdims, ddof=ddof)

    def std(self, *args, **kwargs):
        """The standard deviation: sqrt(x.var(...)) with the same arguments, so the same rule holds (with
        PyTorch's dim= the unbiased estimate, with numpy's axis= the population one)."""
        return self.var(*args, **kwargs).sqrt()

    @pytorch_keywords(answered_by=max_as_pytorch)  # x.max(dim=1): PyTorch's (values, indices)
    def max(self, axis=None, keepdims=False):
        """The largest values over axis, as numpy's max; the gradient of a tie is split evenly among
        the tied elements (as PyTorch's amax)."""
        return self._reduce("max", ops.Max, axis, keepdims)

    @pytorch_keywords(answered_by=min_as_pytorch)  # x.min(dim=1): PyTorch's (values, indices)
    def min(self, axis=None, keepdims=False):
        """The smallest values over axis (see max)."""
        return self._reduce("min", ops.Min, axis, keepdims)

    @pytorch_keywords
    def all(self, axis=None, keepdims=False):
        """True where every element over axis is nonzero: a boolean tensor, outside the graph."""
        axes = normalize_axes("all", axis, self.shape)
        return self._constant(np.asarray(np.all(self._data, axis=axes, keepdims=keepdims)))

    @pytorch_keywords
    def any(self, axis=None, keepdims=False):
        """True where some element over axis is nonzero: a boolean tensor, outside the graph."""
        axes = normalize_axes("any", axis, self.shape)
        return self._constant(np.asarray(np.any(self._data, axis=axes, keepdims=keepdims)))

    @pytorch_keywords
    def logsumexp(self, axis=None, keepdims=False):
        return self._reduce("logsumexp", ops.LogSumExp, axis, keepdims)

    @pytorch_keywords
    def cumsum(self, axis=None):
        """y_i = x_0 + ... + x_i along axis (required, as in PyTorch: x.cumsum(0), x.cumsum(dim=1))."""
        if axis is None:
            raise TypeError("cumsum: give the axis to sum along, e.g. x.cumsum(dim=0)")
        return kernel(ops.Cumsum).apply(self, axis=normalize_axis("cumsum", axis, self._data.shape))

    @pytorch_keywords
    def softmax(self, axis=-1):
        return kernel(ops.Softmax).apply(self, axis=normalize_axis("softmax", axis, self._data.shape))

    @pytorch_keywords
    def log_softmax(self, axis=-1):
        return kernel(ops.LogSoftmax).apply(self, axis=normalize_axis("log_softmax", axis, self._data.shape))

    # --- shape ----------------------------------------------------------------------------------

    def reshape(self, *shape):
        """The same elements in row-major order, in a new shape: reshape(B, T, -1), reshape((B, T, C)),
        reshape(-1); one -1 stands for the size that makes the element count match."""
        return self._reshape("reshape", shape)

    def _reshape(self, op, shape):
        shape = shape_arg(shape, op)
        n = self.numel()
        known = math.prod(x for x in shape if x != -1)
        free = shape.count(-1)
        bad = free > 1 or any(x < -1 for x in shape)
        if not bad:
            bad = known != n if free == 0 else (known == 0 or n % known != 0)
        if bad:
            raise ValueError(f"{op}: cannot reshape a tensor of shape {self.shape} ({n} elements) into shape {shape}")
        return kernel(ops.Reshape).apply(self, shape=shape)

    def clone(self):
        """A copy in memory of its own, in the graph:  y = x,  dL/dx = dL/dy."""
        return kernel(Copy).apply(self)

    def permute(self, *axes):
        """Reorder all axes: y.shape[i] = x.shape[axes[i]] (PyTorch's permute)."""
        axes = shape_arg(axes)
        if sorted(a % self.ndim if -self.ndim <= a < self.ndim else a for a in axes) != list(range(self.ndim)):
            raise ValueError(
                f"permute: axes {axes} are not a permutation of the {self.ndim} axes of shape {self.shape}"
            )
        return kernel(ops.Permute).apply(self, axes=tuple(a % self.ndim for a in axes))

    @pytorch_keywords
    def transpose(self, axis0=None, axis1=None):
        """Swap two axes (PyTorch's transpose; numpy's transpose is `permute` here)."""
        if axis0 is None or axis1 is None:
            raise TypeError("transpose: give the two axes to swap, e.g. x.transpose(1, 2)")
        a = normalize_axis("transpose", axis0, self._data.shape)
        b = normalize_axis("transpose", axis1, self._data.shape)
        axes = list(range(self.ndim))
        axes[a], axes[b] = b, a
        return kernel(ops.Permute).apply(self, axes=tuple(axes))

    def swapaxes(self, axis0, axis1):
        return self.transpose(axis0, axis1)

    @property
    def T(self):
        """All axes reversed."""
        return kernel(ops.Permute).apply(self, axes=tuple(reversed(range(self.ndim))))

    @pytorch_keywords
    def squeeze(self, axis=None):
        """Remove axes of size 1 (all of them, or the given ones, which must have size 1)."""
        axes = normalize_axes("squeeze", axis, self.shape)
        if axis is None:
            axes = tuple(a for a in axes if self.shape[a] == 1)
        for a in axes:
            if self.shape[a] != 1:
                raise ValueError(f"squeeze: axis {a} of shape {self.shape} has size {self.shape[a]}, not 1")
        return kernel(ops.Reshape).apply(self, shape=tuple(n for i, n in enumerate(self.shape) if i not in axes))

    @pytorch_keywords
    def unsqueeze(self, axis=None):
        """Insert an axis of size 1 at `axis` (of the result; negative counts from its end)."""
        if axis is None:
            raise TypeError("unsqueeze: give the position of the new axis, e.g. x.unsqueeze(0)")
        if not -self.ndim - 1 <= axis <= self.ndim:
            raise ValueError(
                f"unsqueeze: axis {axis} is out of range for a tensor of shape {self.shape} "
                f"(a new axis goes at -{self.ndim + 1} to {self.ndim})"
            )
        new = axis % (self.ndim + 1)
        return kernel(ops.Reshape).apply(self, shape=self.shape[:new] + (1,) + self.shape[new:])

    def expand(self, *shape):
        """Broadcast to `shape` without copying (-1 keeps an axis's size)."""
        shape = shape_arg(shape)
        extra = len(shape) - self.ndim
        if extra < 0:
            raise ValueError(f"expand: cannot expand shape {self.shape} to fewer axes {shape}")
        shape = tuple(self.shape[i - extra] if n == -1 and i >= extra else n for i, n in enumerate(shape))
        for i, n in enumerate(self.shape):
            if n != 1 and n != shape[extra + i]:
                raise ValueError(f"expand: cannot expand shape {self.shape} to {shape}: axis {i} has size {n}, not 1")
        return kernel(ops.Expand).apply(self, shape=shape)

    def flip(self, *axes, dims=None):
        """The elements in reverse order along each of the axes: x.flip(0), x.flip((0, 1)), x.flip(dims=[1])."""
        if not axes and dims is None:
            raise TypeError("flip: give the axes to reverse, e.g. x.flip(0) or x.flip(dims=[0, 1])")
        axes = axes or (dims,)
        axes = tuple(normalize_axis("flip", a, self.shape) for a in shape_arg(axes, "flip"))
        if len(set(axes)) != len(axes):
            raise ValueError(f"flip: axis repeated in {axes}")
        return kernel(ops.Flip).apply(self, axes=axes)

    def roll(self, shifts, axis=None, *, dims=None):
        """Shift the elements by `shifts` places along axis, those that fall off the end coming back at the
        start; shifts and axis may be tuples of the same length; without axis, over the flattened tensor
        (PyTorch's roll, whose dims= is axis= here)."""
        axis = spelling("roll", "axis", axis, "dims", dims, None)
        if axis is None:
            return self.reshape(-1).roll(shifts, 0).reshape(self.shape)
        shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        if len(shifts) != len(axes):
            raise ValueError(f"roll: {len(shifts)} shifts {shifts} for {len(axes)} axes {axes}")
        axes = tuple(normalize_axis("roll", a, self.shape) for a in axes)
        return kernel(ops.Roll).apply(self, shifts=tuple(int(s) for s in shifts), axes=axes)

    def __getitem__(self, index):
        return kernel(ops.Index).apply(self, index=_index_arg(index))

    def __setitem__(self, index, value):
        """x[index] = value, in place: indexed and masked assignment (x[x < v] = -inf), as in PyTorch,
        with the guards of every in-place change (inplace.py)."""
        index = _index_arg(index)
        if getattr(value, "ndim", 0) > 1 and value.shape[0] == 1:  # only then can it have axes to drop
            value = _leading_ones_dropped(value, self._data[index].ndim)
        self._update("setitem", lambda x: value, value, index=index, casting="unsafe")

    def masked_fill(self, mask, value):
        """value where mask is True, self elsewhere; mask is boolean and broadcasts to self's shape."""
        return kernel(ops.MaskedFill).apply(self, mask=check_mask("masked_fill", mask, value, self.shape), value=value)

    def gather(self, axis, index):
        """y[i, j, k] = x[i, index[i, j, k], k] for axis 1: picks along axis at the positions index holds;
        y has index's shape (PyTorch's gather; index an integer tensor with x's number of axes)."""
        axis = normalize_axis("gather", axis, self.shape)
        index = _scatter_index("gather", index, axis, self.shape)
        return kernel(ops.Gather).apply(self, index=index, axis=axis)

    def scatter_add(self, axis, index, src):
        """A copy of x with src[i, j, k] added at x[i, index[i, j, k], k] for axis 1, places named twice
        getting both (PyTorch's scatter_add, out of place)."""
        axis = normalize_axis("scatter_add", axis, self.shape)
        src = _lift(src, self)
        index = _scatter_index("scatter_add", index, axis, self.shape, src.shape)
        return kernel(ops.ScatterAdd).apply(self, src, index=index, axis=axis)

    # --- dtype ----------------------------------------------------------------------------------

    def astype(self, dtype):
        """This tensor in `dtype`: between float32 and float64 in the graph (the gradient is cast back);
        to an integer type or bool, a new tensor outside it. Its own dtype gives the tensor itself."""
        dtype = as_dtype("astype", dtype)
        if dtype == self.dtype:
            return self
        if dtype in FLOAT_DTYPES and self.dtype in FLOAT_DTYPES:
            return kernel(Cast).apply(self, dtype=dtype)
        return Tensor._constant(self._data.astype(dtype))


def matmul(a, b):
    """a @ b: 1-D, 2-D or batched, with the batch axes broadcast."""
    a, b = _lift(a, b), _lift(b, a)
    a_shape, b_shape = a._data.shape, b._data.shape
    if not a_shape or not b_shape:
        raise ValueError(f"matmul: both operands need at least 1 dimension, got shapes {a.shape} and {b.shape}")
    k_b = b_shape[0] if len(b_shape) == 1 else b_shape[-2]
    if a_shape[-1] != k_b:
        raise ValueError(f"matmul: {a.shape} @ {b.shape}: inner sizes {a_shape[-1]} and {k_b} differ")
    try:
        np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: {a.shape} @ {b.shape}: batch dimensions {a.shape[:-2]} and {b.shape[:-2]} cannot be broadcast"
        ) from None
    return kernel(ops.Matmul).apply(a, b)


def _leading_ones_dropped(value, ndim):
    """value without its leading axes of size 1 beyond ndim: x[i] = v puts a (1, n) v into a row (n,), as
    PyTorch's (and numpy's) assignment does; any other extra axis is left for the in-place guard to name."""
    shape = getattr(value, "shape", None)
    if shape is None or len(shape) <= ndim or any(n != 1 for n in shape[: len(shape) - ndim]):
        return value
    return value.reshape(shape[len(shape) - ndim :])


DataArray.tensor_type = Tensor  # x.data's in-place methods act through a tensor over x's memory (data_array.py)
