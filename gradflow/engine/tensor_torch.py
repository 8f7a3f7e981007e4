"""PyTorch's names and keywords for what tensor.py does, so that PyTorch programs run as written.

tensor.py speaks numpy's language: x.sum(axis=1, keepdims=True), x.astype(gf.float64). A learner
who copies PyTorch code writes x.sum(dim=1, keepdim=True), x.double(), x.size(-1), x.view(B, T, -1),
and that runs too, because of this file:

- keywords: every method of tensor.py that takes an axis also takes PyTorch's keyword for it
  (dim= for axis=, keepdim= for keepdims=, dim0=/dim1= for transpose's axes), through the
  decorator `pytorch_keywords`; one spelling or the other, not both. Where PyTorch's call means
  something else than numpy's (max, min, var, std), one rule: a call without numpy's keywords
  (axis=, keepdims=, ddof=) is read as PyTorch reads it. x.max(1) and x.max(dim=1) are (values,
  indices), x.max(y) is the elementwise maximum, x.var(1) and x.var() are the unbiased estimate;
  x.max(axis=1) is numpy's values and x.var(axis=1) numpy's population variance.
- names: size(), dim(), view, flatten, contiguous, repeat, split, chunk, clamp, argmax, argmin,
  topk, the dtype conversions to, float, double, long, int, bool, type_as, and the device's:
  device, is_cuda, cpu(), cuda() (refused: the CPU is gradflow's one device, engine/device.py),
  and the factories new_zeros, new_ones, new_full, new_empty, new_tensor.
- and sort, pow, norm, unique, nelement, requires_grad_, a one-element integer tensor as an index
  (range(n)[t]: __index__), a 0-d tensor as its number in f-strings (f"{loss:.4f}": __format__).
- PyTorch's math, matrix and picking methods: log10, log2, log1p, square, reciprocal, add/sub with
  alpha=, mul, div, eq ... ge, prod, amax, amin, mm, dot, matmul, t, tril, triu, unbind,
  index_select, masked_select, view_as, reshape_as, expand_as, is_floating_point, type; and the steps
  sign, round, floor, ceil and argsort, outside the graph as comparisons are.

Nothing here records an op of its own: each method is a tensor.py method (or a few of them) under
PyTorch's name, so what it computes, and its gradient, is tensor.py's (prod runs ops/prod.py through
tensor.py's reduction, as sum runs Sum). The in-place methods
(add_, zero_, ...) are PyTorch's too; they write into memory, and have a file of their own,
inplace.py.
"""

import functools
import inspect
import math
from typing import NamedTuple

import numpy as np

from gradflow.engine import ops
from gradflow.engine.checks import broadcast_shape, normalize_axis, shape_arg, spelling
from gradflow.engine.device import CPU, on_cpu
from gradflow.engine.device import device as device_type
from gradflow.engine.dtype import as_dtype, bfloat16, bool_, float16, float32, float64, int32, int64, is_float

# PyTorch's keyword -> numpy's
NUMPY_NAME = {"dim": "axis", "keepdim": "keepdims", "dim0": "axis0", "dim1": "axis1", "correction": "ddof"}
PYTORCH_KEYWORDS = frozenset(NUMPY_NAME) | {"unbiased"}  # (var's: see var_as_pytorch)
NUMPY_KEYWORDS = frozenset(NUMPY_NAME.values())


def pytorch_keywords(method=None, *, answered_by=None):
    """Let a method of tensor.py, written with numpy's keywords, be called with PyTorch's too.

    x.sum(dim=1, keepdim=True) is x.sum(axis=1, keepdims=True); giving both spellings of one
    argument is an error naming the op, and a keyword given as None counts as not given, as in
    both libraries. Where PyTorch's call means something else, `answered_by` answers every call
    without numpy's keywords, positional or not (see max_as_pytorch, var_as_pytorch), and a call
    with numpy's keywords goes straight to the method.
    """
    if method is None:
        return functools.partial(pytorch_keywords, answered_by=answered_by)
    names = list(inspect.signature(method).parameters)[1:]  # after self
    slots = {p: (n, names.index(n)) for p, n in NUMPY_NAME.items() if n in names}  # PyTorch's -> (numpy's, position)

    @functools.wraps(method)
    def either_spelling(self, *args, **kwargs):
        if answered_by is not None and NUMPY_KEYWORDS.isdisjoint(kwargs):
            return answered_by(self, *args, **kwargs)
        if kwargs and not PYTORCH_KEYWORDS.isdisjoint(kwargs):
            args = _as_numpy_keywords(method.__name__, slots, args, kwargs)
        return method(self, *args, **kwargs)

    return either_spelling


def _as_numpy_keywords(op, slots, args, kwargs):
    """A call to `op` with dim= given as axis= (etc.): its positional args; kwargs is changed in place.
    A PyTorch keyword the method has no slot for stays, for the call to refuse."""
    for pytorch_name, (numpy_name, at) in slots.items():
        value = kwargs.pop(pytorch_name, None)
        if value is None:
            continue
        if (args[at] if at < len(args) else kwargs.get(numpy_name)) is not None:
            raise TypeError(f"{op}: give {numpy_name}= (numpy's name) or {pytorch_name}= (PyTorch's), not both")
        if at < len(args):
            args = args[:at] + (value,) + args[at + 1 :]
        else:
            kwargs[numpy_name] = value
    return args


class ValuesIndices(NamedTuple):
    """What max(dim=), min(dim=) and topk return, as PyTorch's do: values (in the graph) and their
    positions along dim (int64, outside it); `values, indices = x.max(dim=1)` unpacks it."""

    values: "Tensor"  # noqa: F821  (tensor.py's Tensor, which imports this file)
    indices: "Tensor"  # noqa: F821


def max_as_pytorch(x, dim=None, keepdim=False):
    """PyTorch's max: over everything, the largest value; x.max(dim) is (values, indices) along dim
    (see _values_indices); x.max(y), for a tensor y, is the elementwise maximum."""
    return _values_indices("max", np.argmax, x.max, x.maximum, x, dim, keepdim)


def min_as_pytorch(x, dim=None, keepdim=False):
    """PyTorch's min, as max_as_pytorch."""
    return _values_indices("min", np.argmin, x.min, x.minimum, x, dim, keepdim)


def _values_indices(op, arg, over_all, elementwise, x, dim, keepdim):
    """PyTorch's max(dim) or min(dim): the index of the first extreme along dim, and the values
    gathered there (so a tie's gradient goes to that one element, as in PyTorch)."""
    if dim is None:
        return over_all(axis=None, keepdims=keepdim)
    if hasattr(dim, "grad_fn") or isinstance(dim, np.ndarray):  # a tensor (or array) of values
        return elementwise(dim)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}: dim={dim!r} gives values and indices along one axis; for several, use axis=")
    dim = normalize_axis(op, dim, x.shape)
    indices = _arg(op, arg, x, dim, keepdims=True)
    values = _gather(x, dim, indices)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return ValuesIndices(values, x._constant(indices))


def var_as_pytorch(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """PyTorch's var: the unbiased estimate, 1/(N - 1) sum (x - mean)^2, unless correction= (numpy's
    ddof) or unbiased=False says otherwise. Called as var(dim=None, *, correction=1, keepdim=False),
    var(dim, unbiased, keepdim) or var(unbiased), as PyTorch is."""
    if isinstance(dim, bool):  # x.var(False): PyTorch's var(unbiased)
        if unbiased is not None:
            raise TypeError(f"var: unbiased given twice ({dim} and unbiased={unbiased})")
        dim, unbiased = None, dim
    if unbiased is not None:
        if correction is not None:
            raise TypeError("var: give correction= or unbiased=, not both")
        correction = int(bool(unbiased))
    return x.var(axis=dim, keepdims=keepdim, ddof=1 if correction is None else correction)


def _positions(op, arg, x, axis, dim, keepdims, keepdim):
    """argmax or argmin: positions as a tensor outside the graph."""
    axis = spelling(op, "axis", axis, "dim", dim, None)
    keepdims = spelling(op, "keepdims", keepdims, "keepdim", keepdim, False)
    return x._constant(_arg(op, arg, x, axis, keepdims))


def _arg(op, arg, x, axis, keepdims):
    """np.argmax or np.argmin over axis (an int or None) as int64, with the error of an empty axis."""
    if axis is not None:
        axis = normalize_axis(op, axis, x.shape)
    if (x.shape[axis] if axis is not None else x.numel()) == 0:
        where = "the tensor" if axis is None else f"axis {axis}"
        raise ValueError(f"{op}: {where} of shape {x.shape} is empty")
    return np.asarray(arg(x._data, axis=axis, keepdims=keepdims), dtype=np.int64)  # (axis None: a 0-d array)


def _gather(x, axis, positions):
    """y = x picked at `positions` along axis, e.g. y[i, j, k] = x[i, positions[i, j, k], k] for axis 1
    (numpy's take_along_axis), as indexing, so that the gradient flows back to the picked elements."""
    index = [np.arange(n).reshape([-1 if i == j else 1 for i in range(x.ndim)]) for j, n in enumerate(x.shape)]
    index[axis] = positions
    return x[tuple(index)]


def _axes_or_all(dim):
    """amax's and amin's dim as max's axis: PyTorch's () (or []) means every axis."""
    if isinstance(dim, (tuple, list)):
        return tuple(dim) or None
    return dim


# x.type()'s names, PyTorch's for the CPU's tensor types
TENSOR_TYPES = {
    np.dtype(float32): "FloatTensor", np.dtype(float64): "DoubleTensor", np.dtype(int64): "LongTensor",
    np.dtype(int32): "IntTensor", np.dtype(np.int16): "ShortTensor", np.dtype(np.int8): "CharTensor",
    np.dtype(np.uint8): "ByteTensor", np.dtype(bool_): "BoolTensor",
}  # fmt: skip


class PyTorchNames:
    """The methods of Tensor that PyTorch names and numpy does not (see this file's docstring)."""

    # --- shape ----------------------------------------------------------------------------------

    def size(self, dim=None):
        """The shape (a tuple), or with dim the length of that one axis (negative counts from the end).

        PyTorch's meaning, where numpy's `size` is the number of elements: that is numel() here.
        """
        return self.shape if dim is None else self.shape[normalize_axis("size", dim, self.shape)]

    def dim(self):
        """The number of axes (PyTorch's name for ndim)."""
        return self.ndim

    def view(self, *shape):
        """reshape, under PyTorch's name: view(B, T, -1), view((B, T, C)), view(-1).

        PyTorch's view refuses memory that cannot be viewed in the new shape (a transposed tensor)
        and asks for contiguous() first; numpy copies in that case, so here view never refuses.
        """
        return self._reshape("view", shape)

    def flatten(self, start_dim=0, end_dim=-1):
        """Axes start_dim to end_dim (both included) merged into one: (2, 3, 4).flatten(1) has shape (2, 12).
        A 0-d tensor becomes shape (1,), as in PyTorch."""
        if self.ndim == 0:
            return self.reshape(1)
        a = normalize_axis("flatten", start_dim, self.shape)
        b = normalize_axis("flatten", end_dim, self.shape)
        if a > b:
            raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} in shape {self.shape}")
        return self.reshape(self.shape[:a] + (math.prod(self.shape[a : b + 1]),) + self.shape[b + 1 :])

    def contiguous(self):
        """This tensor with its memory in row-major (C) order: itself when it already is, as in PyTorch,
        else a copy that is (in the graph, as clone).

        Nothing in gradflow needs it: numpy computes on any layout, and view() works on a transposed
        tensor too. It is here so that PyTorch code runs; it can still pay before many reads of a
        transposed tensor, which then walk memory in order.
        """
        return self if self._data.flags.c_contiguous else self.clone()

    def repeat(self, *sizes):
        """The tensor tiled sizes[i] times along axis i (PyTorch's repeat, numpy's tile); extra leading
        sizes add axes: a (2, 3) tensor .repeat(2, 1, 2) has shape (2, 2, 6).

        Composed of a reshape that puts a size-1 axis before each axis, an expand along it, and a
        reshape that merges each pair, so each element's gradient sums over its copies (expand's backward).
        """
        sizes = shape_arg(sizes, "repeat")
        if len(sizes) < self.ndim or any(r < 0 for r in sizes):
            raise ValueError(f"repeat: sizes {sizes} must be non-negative, at least one per axis of shape {self.shape}")
        shape = (1,) * (len(sizes) - self.ndim) + self.shape
        paired = self.reshape(tuple(n for s in shape for n in (1, s)))
        copies = paired.expand(tuple(n for r, s in zip(sizes, shape) for n in (r, s)))
        return copies.reshape(tuple(r * s for r, s in zip(sizes, shape)))

    def split(self, size_or_sizes, axis=None, *, dim=None):
        """Cut along axis (0 by default) into pieces of `size` (the last may be smaller) or of the
        listed sizes, as PyTorch's split; a tuple of views, in the graph."""
        axis = normalize_axis("split", spelling("split", "axis", axis, "dim", dim, 0), self.shape)
        n = self.shape[axis]
        if isinstance(size_or_sizes, (int, np.integer)) and not isinstance(size_or_sizes, bool):
            if size_or_sizes <= 0:
                raise ValueError(f"split: size must be positive, got {size_or_sizes}")
            sizes = [min(size_or_sizes, n - start) for start in range(0, n, size_or_sizes)] or [0]
        else:
            sizes = list(size_or_sizes)
            if sum(sizes) != n or any(s < 0 for s in sizes):
                raise ValueError(
                    f"split: sizes {sizes} do not add up to {n}, the size of axis {axis} of shape {self.shape}"
                )
        starts = np.cumsum([0] + sizes[:-1])
        lead = (slice(None),) * axis
        return tuple(self[lead + (slice(int(s), int(s) + size),)] for s, size in zip(starts, sizes))

    def chunk(self, chunks, axis=None, *, dim=None):
        """Cut along axis (0 by default) into `chunks` pieces of ceil(n / chunks) elements, the last
        smaller, as PyTorch's chunk: so there may be fewer pieces (6 in 4 chunks gives 2, 2, 2)."""
        axis = normalize_axis("chunk", spelling("chunk", "axis", axis, "dim", dim, 0), self.shape)
        if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks <= 0:
            raise ValueError(f"chunk: chunks must be a positive integer, got {chunks!r}")
        n = self.shape[axis]
        return self.split(-(-n // chunks) if n else [0] * chunks, axis)  # an empty axis: `chunks` empty pieces

    # --- values ---------------------------------------------------------------------------------

    def clamp(self, min=None, max=None):
        """PyTorch's name for clip."""
        return self.clip(min, max)

    def argmax(self, axis=None, keepdims=None, *, dim=None, keepdim=None):
        """Positions of the largest values along axis (of all elements for None), the first of ties; int64, outside
        the graph."""
        return _positions("argmax", np.argmax, self, axis, dim, keepdims, keepdim)

    def argmin(self, axis=None, keepdims=None, *, dim=None, keepdim=None):
        """Positions of the smallest values along axis (see argmax)."""
        return _positions("argmin", np.argmin, self, axis, dim, keepdims, keepdim)

    def topk(self, k, axis=None, largest=True, sorted=True, *, dim=None):
        """The k largest (or, largest=False, smallest) elements along axis (the last by default), largest
        first: (values, indices), as PyTorch's topk. Ties come in index order.

        values = x gathered at indices, so the gradient flows back through the index to the k chosen
        elements. sorted=False is accepted; the result is sorted all the same (PyTorch leaves the order
        unspecified then).
        """
        axis = normalize_axis("topk", spelling("topk", "axis", axis, "dim", dim, -1), self.shape)
        n = self.shape[axis]
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= n:
            raise ValueError(
                f"topk: k must be an integer from 0 to {n}, the size of axis {axis} of shape {self.shape}; got {k!r}"
            )
        order = np.argsort(-self._data if largest else self._data, axis=axis, kind="stable")
        indices = np.take(order, np.arange(k), axis=axis).astype(np.int64)
        return ValuesIndices(_gather(self, axis, indices), self._constant(indices))

    def sort(self, axis=None, descending=False, stable=False, *, dim=None):
        """(values, indices): the elements along axis (the last by default) in increasing order (decreasing
        with descending=True), as PyTorch's sort; ties keep their index order (stable= is accepted).

        values = x.gather(axis, indices), so the gradient flows back through the gather to each element.
        """
        axis = normalize_axis("sort", spelling("sort", "axis", axis, "dim", dim, -1), self.shape)
        indices = np.argsort(-self._data if descending else self._data, axis=axis, kind="stable").astype(np.int64)
        return ValuesIndices(self.gather(axis, indices), self._constant(indices))

    def pow(self, exponent):
        """self ** exponent (PyTorch's name for the operator)."""
        return self**exponent

    def norm(self, p="fro", dim=None, keepdim=False):
        """||x||_p = (sum |x_i|^p)^(1/p) over dim (every element by default): p=2 (or "fro") the
        Euclidean length sqrt(sum x_i^2), p=1 the sum of |x_i|, p=inf the largest |x_i|. Written with
        the tensor's ops, so its gradient is theirs (at x = 0 the 2-norm's is NaN: 0 times sqrt's inf)."""
        if p in ("fro", 2):
            return (self * self).sum(axis=dim, keepdims=keepdim).sqrt()
        if p == 1:
            return self.abs().sum(axis=dim, keepdims=keepdim)
        if p == math.inf:
            return self.abs().max(axis=dim, keepdims=keepdim)
        if isinstance(p, (int, float)) and p > 0:
            return (self.abs() ** p).sum(axis=dim, keepdims=keepdim) ** (1 / p)
        raise ValueError(f"norm: p must be a positive number, inf or 'fro', got {p!r}")

    def unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):
        """The distinct elements, in increasing order (numpy's unique), outside the graph; with
        return_inverse, where each element of x is in them; with return_counts, how often each occurs."""
        if dim is not None:
            raise ValueError(f"unique: dim={dim} is not supported; gradflow finds the distinct elements of the tensor")
        values, inverse, counts = np.unique(self._data, return_inverse=True, return_counts=True)
        found = [self._constant(values)]
        if return_inverse:
            found.append(self._constant(inverse.reshape(self.shape).astype(np.int64)))
        if return_counts:
            found.append(self._constant(counts.astype(np.int64)))
        return found[0] if len(found) == 1 else tuple(found)

    @property
    def mT(self):
        """The last two axes swapped (a batch of matrices, each transposed)."""
        return self.transpose(-2, -1)

    def __invert__(self):
        """~mask: logical not of a bool tensor (bitwise not of an integer one), outside the graph."""
        if self.dtype.kind not in "biu":
            raise TypeError(f"~: needs a bool or integer tensor, this one is {self.dtype}")
        return self._constant(~self._data)

    def narrow(self, dim, start, length):
        """x[..., start:start + length, ...] along dim: a view, in the graph."""
        dim = normalize_axis("narrow", dim, self.shape)
        if not (start >= 0 and length >= 0 and start + length <= self.shape[dim]):
            raise ValueError(f"narrow: start {start} and length {length} leave axis {dim} of size {self.shape[dim]}")
        return self[(slice(None),) * dim + (slice(start, start + length),)]

    def nonzero(self, as_tuple=False):
        """The positions of the nonzero elements: an int64 tensor of shape (count, ndim), outside the
        graph, or with as_tuple=True one int64 tensor per axis (numpy's nonzero)."""
        where = np.nonzero(self._data)
        if as_tuple:
            return tuple(self._constant(w.astype(np.int64)) for w in where)
        return self._constant(np.stack(where, axis=1).astype(np.int64).reshape(-1, self.ndim))

    def index_fill(self, dim, index, value):
        """A copy of x with value along dim at index (index_fill_ out of place, in the graph)."""
        return self.clone().index_fill_(dim, index, value)

    def scatter(self, dim, index, src=None, *, value=None):
        """A copy of x with src (or value) written at index along dim (scatter_ out of place, in the graph)."""
        return self.clone().scatter_(dim, index, src, value=value)

    def nelement(self):
        """The number of elements (PyTorch's other name for numel)."""
        return self.numel()

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad on this tensor and return it: w = gf.randn(3, 4).requires_grad_()."""
        self.requires_grad = requires_grad
        return self

    def __index__(self):
        """A one-element integer tensor used where Python wants an index: range(n)[t], lst[t]."""
        if self._data.dtype.kind not in "iu" or self.numel() != 1:
            raise TypeError(
                f"index: only integer tensors of a single element can be converted to an index, "
                f"this one is {self.dtype} of shape {self.shape}"
            )
        return int(self._data.item())

    def __format__(self, spec):
        """A 0-d tensor formats as its number, f"{loss:.4f}"; any other tensor takes no format spec,
        as in PyTorch (f"{x}" is str(x))."""
        if self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    # --- math under PyTorch's names: compositions of tensor.py's ops, so the gradients are theirs ---

    def log10(self):
        """log10(x) = log(x) / ln 10."""
        return self.log() / math.log(10)

    def log2(self):
        """log2(x) = log(x) / ln 2."""
        return self.log() / math.log(2)

    def square(self):
        """x^2 = x * x."""
        return self * self

    def reciprocal(self):
        """1 / x."""
        return 1 / self

    def add(self, other, *, alpha=1):
        """x + alpha * other, as PyTorch's add."""
        return self + (other if alpha == 1 else alpha * other)

    def sub(self, other, *, alpha=1):
        """x - alpha * other, as PyTorch's sub."""
        return self - (other if alpha == 1 else alpha * other)

    def mul(self, other):
        """x * other."""
        return self * other

    def div(self, other, *, rounding_mode=None):
        """x / other; with rounding_mode="trunc" or "floor" the quotient rounded toward zero or down
        (Python's //), as PyTorch's div: rounded, it is a step function, outside the graph (see round)."""
        if rounding_mode is None:
            return self / other
        if rounding_mode not in ("trunc", "floor"):
            raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        a, b = self._data, other._data if isinstance(other, PyTorchNames) else other  # (a number stays weak)
        if rounding_mode == "floor":
            return self._constant(np.floor_divide(a, b))
        return self._constant(np.trunc(a / b).astype(np.result_type(a, b)))

    def eq(self, other):
        """x == other: a boolean tensor, outside the graph (eq ne lt le gt ge alike)."""
        return self == other

    def ne(self, other):
        return self != other

    def lt(self, other):
        return self < other

    def le(self, other):
        return self <= other

    def gt(self, other):
        return self > other

    def ge(self, other):
        return self >= other

    # Steps (sign, round, floor, ceil) have a derivative of 0 wherever they have one. PyTorch keeps their
    # results in the graph with that zero gradient; here they are tensors outside the graph, as comparisons
    # are: a loss that reaches x only through them asks for no gradient of x, and backward says so.

    def sign(self):
        """-1, 0 or 1 as x is negative, zero or positive; outside the graph (see above)."""
        return self._constant(np.sign(self._data))

    def round(self, *, decimals=0):
        """x rounded to `decimals` places, halves to the even neighbour (2.5 -> 2), as PyTorch's and numpy's
        round; outside the graph (see above)."""
        return self._constant(np.round(self._data, decimals))

    def floor(self):
        """The largest whole number <= x; outside the graph (see above). Integers are themselves."""
        return self._constant(np.floor(self._data) if self.is_floating_point() else self._data.copy())

    def ceil(self):
        """The smallest whole number >= x; outside the graph (see above). Integers are themselves."""
        return self._constant(np.ceil(self._data) if self.is_floating_point() else self._data.copy())

    @pytorch_keywords
    def prod(self, axis=None, keepdims=False, *, dtype=None):
        """y = prod_i x_i over axis (every element for None), in dtype if given; the gradient, the
        product of the other factors, holds where x has zeros (ops/prod.py)."""
        x = self if dtype is None else self.astype(as_dtype("prod", dtype))
        return x._reduce("prod", ops.Prod, axis, keepdims)

    def amax(self, dim=(), keepdim=False):
        """The largest values over dim (one axis, several, or every axis for the default ()), as
        PyTorch's amax: numpy's max, so a tie's gradient is split evenly among the tied elements."""
        return self.max(axis=_axes_or_all(dim), keepdims=keepdim)

    def amin(self, dim=(), keepdim=False):
        """The smallest values over dim (see amax)."""
        return self.min(axis=_axes_or_all(dim), keepdims=keepdim)

    def argsort(self, dim=-1, descending=False, stable=False):
        """The positions that sort x along dim: sort's indices (int64, outside the graph)."""
        return self.sort(dim=dim, descending=descending, stable=stable).indices

    # --- matrices -------------------------------------------------------------------------------

    def matmul(self, other):
        """x @ other."""
        return self @ other

    def mm(self, other):
        """x @ other for two matrices, as PyTorch's mm."""
        if self.ndim != 2 or np.ndim(other) != 2:
            raise ValueError(f"mm: needs two matrices, got shapes {self.shape} and {np.shape(other)}")
        return self @ other

    def dot(self, other):
        """sum_i x_i other_i for two vectors of one length, as PyTorch's dot (a 0-d tensor)."""
        if self.ndim != 1 or np.ndim(other) != 1 or self.shape != np.shape(other):
            raise ValueError(f"dot: needs two vectors of one length, got shapes {self.shape} and {np.shape(other)}")
        return self @ other

    def t(self):
        """The transpose of a matrix; a vector or a 0-d tensor is itself, and more axes are refused, as
        in PyTorch's t() (transpose(dim0, dim1) swaps two axes of any tensor)."""
        if self.ndim > 2:
            raise ValueError(f"t: needs at most 2 dimensions, got shape {self.shape}; use transpose(dim0, dim1)")
        return self.T if self.ndim == 2 else self

    def tril(self, diagonal=None, *, k=None):
        """x with the elements above the diagonal-th diagonal set to 0 (keeps j <= i + diagonal in the
        last two axes), as PyTorch's tril; numpy's name k= is accepted too."""
        diagonal = spelling("tril", "k", k, "diagonal", diagonal, 0)
        return self._triangle("tril", np.tri(*self.shape[-2:], k=diagonal, dtype=bool))

    def triu(self, diagonal=None, *, k=None):
        """x with the elements below the diagonal-th diagonal set to 0 (keeps j >= i + diagonal in the
        last two axes), as PyTorch's triu; numpy's name k= is accepted too."""
        diagonal = spelling("triu", "k", k, "diagonal", diagonal, 0)
        return self._triangle("triu", ~np.tri(*self.shape[-2:], k=diagonal - 1, dtype=bool))

    def _triangle(self, op, keep):
        if self.ndim < 2:
            raise ValueError(f"{op}: needs at least 2 dimensions, got shape {self.shape}")
        return self.masked_fill(~keep, 0)

    # --- picking and viewing --------------------------------------------------------------------

    def unbind(self, dim=0):
        """The slices along dim, each without that axis, as a tuple (x[0], x[1], ... for dim 0)."""
        axis = normalize_axis("unbind", dim, self.shape)
        lead = (slice(None),) * axis
        return tuple(self[lead + (i,)] for i in range(self.shape[axis]))

    def index_select(self, dim, index):
        """The slices of x at the positions `index` (a vector of integers, repeats allowed) along dim, as
        PyTorch's index_select: x[:, index] for dim 1; a repeated position's gradient adds up."""
        axis = normalize_axis("index_select", dim, self.shape)
        positions = np.asarray(index)
        if positions.ndim > 1 or positions.dtype.kind not in "iu":
            raise TypeError(
                f"index_select: index must be a vector of integers, got {positions.dtype} of shape {positions.shape}"
            )
        return self[(slice(None),) * axis + (positions.reshape(-1),)]

    def masked_select(self, mask):
        """The elements where mask (boolean, broadcast with x) is True, in row-major order, as a vector."""
        mask = np.asarray(mask)
        if mask.dtype != bool:
            raise TypeError(f"masked_select: mask must be boolean, got {mask.dtype}")
        shape = broadcast_shape("masked_select", self.shape, mask.shape)
        x = self if self.shape == shape else self.expand(shape)
        return x[np.broadcast_to(mask, shape)]

    def view_as(self, other):
        """view(other.shape)."""
        return self.view(other.shape)

    def reshape_as(self, other):
        """reshape(other.shape)."""
        return self.reshape(other.shape)

    def expand_as(self, other):
        """expand(other.shape)."""
        return self.expand(other.shape)

    # --- dtype ----------------------------------------------------------------------------------
    # (last in the class: `float`, `int` and `bool` name methods from here on in its body)

    def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False):
        """This tensor in `dtype` (see astype): to(gf.float64), to(other) for other's dtype, to(dtype=...).

        gradflow runs on numpy on the CPU: to("cpu"), to(gf.device("cpu")) and device="cpu" change
        nothing, another device is an error (engine/device.py). non_blocking= has nothing to wait for;
        copy=True gives a copy (clone) even when nothing changes.
        """
        for a in args:
            if isinstance(a, (str, device_type)):
                device = a
            else:
                dtype = a.dtype if isinstance(a, PyTorchNames) else a  # (a Tensor: other's dtype)
        on_cpu("to", device)
        same = self.clone() if copy else self
        return same if dtype is None else same.astype(as_dtype("to", dtype))

    @property
    def device(self):
        """gf.device("cpu"): gradflow's one device."""
        return CPU

    @property
    def is_cuda(self):
        """False: gradflow computes on the CPU."""
        return False

    def cpu(self):
        """This tensor itself: it is on the CPU already."""
        return self

    def cuda(self, device=None, non_blocking=False):
        """Refused: gradflow has no CUDA device."""
        on_cpu("cuda", "cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        """Zeros of the given size in this tensor's dtype (unless dtype= says otherwise), as PyTorch's new_zeros;
        new_ones, new_full, new_empty and new_tensor likewise."""
        return self._new("new_zeros", np.zeros(shape_arg(size, "new_zeros")), dtype, device, requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return self._new("new_ones", np.ones(shape_arg(size, "new_ones")), dtype, device, requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        """Zeros, as gf.empty gives."""
        return self._new("new_empty", np.zeros(shape_arg(size, "new_empty")), dtype, device, requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        return self._new("new_full", np.full(shape_arg((size,), "new_full"), fill_value), dtype, device, requires_grad)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return self._new("new_tensor", np.array(data), dtype, device, requires_grad)

    def _new(self, op, array, dtype, device, requires_grad):
        on_cpu(op, device)
        made = self._constant(array.astype(self.dtype if dtype is None else as_dtype(op, dtype)))
        made.requires_grad = requires_grad
        return made

    def pin_memory(self):
        """This tensor itself: pinned memory speeds copies to a GPU, and there is none."""
        return self

    def get_device(self):
        """-1, PyTorch's number for the CPU."""
        return -1

    def half(self):
        """Refused: gradflow computes in float32 or float64 (engine/dtype.py)."""
        return self.astype(as_dtype("half", float16))

    def bfloat16(self):
        """Refused: gradflow computes in float32 or float64 (engine/dtype.py)."""
        return self.astype(as_dtype("bfloat16", bfloat16))

    def is_floating_point(self):
        """True for float32 and float64 tensors."""
        return is_float(self.dtype)

    def type(self, dtype=None, non_blocking=False):
        """Without dtype, the tensor's type as a string: "gradflow.FloatTensor" where PyTorch says
        "torch.FloatTensor" (DoubleTensor, LongTensor, IntTensor, BoolTensor, ... likewise: TENSOR_TYPES).
        With a dtype, such a string under either prefix, or a typed constructor (gf.LongTensor), this
        tensor in that dtype (see astype)."""
        if isinstance(dtype, type) and hasattr(dtype, "dtype"):  # gf.LongTensor and the like: engine/creation.py
            dtype = dtype.dtype
        if dtype is None:
            return f"gradflow.{TENSOR_TYPES.get(self.dtype, self.dtype.name)}"
        if isinstance(dtype, str):
            prefix, _, name = dtype.rpartition(".")
            named = {v: k for k, v in TENSOR_TYPES.items()}
            if prefix not in ("torch", "gradflow") or name not in named:
                raise ValueError(f"type: unknown tensor type {dtype!r}; known: {', '.join(sorted(named))}")
            dtype = named[name]
        return self.astype(as_dtype("type", dtype))

    def type_as(self, other):
        """This tensor in other's dtype (see astype)."""
        return self.astype(other.dtype)

    def double(self):
        """In float64 (see astype)."""
        return self.astype(float64)

    def long(self):
        """In int64, rounded toward zero, outside the graph."""
        return self.astype(int64)

    def float(self):
        """In float32 (PyTorch's float is 32-bit; see astype)."""
        return self.astype(float32)

    def int(self):
        """In int32, rounded toward zero, outside the graph."""
        return self.astype(int32)

    def bool(self):
        """True where nonzero, outside the graph."""
        return self.astype(bool_)
