"""Functions of tensors: where, cat, stack, split, maximum, minimum, einsum, and the Tensor methods
PyTorch also spells as functions (torch.tanh(x) is x.tanh(), torch.topk(x, k) is x.topk(k)); PyTorch's
eye, bernoulli and normal (from gradflow's seeded generator), its grad modes (inference_mode,
set_grad_enabled) and its thread count (numpy's BLAS threads here).

Where a function takes an axis, numpy's axis= and PyTorch's dim= are both accepted (not both at once).
Each op runs as the Tensor methods run theirs, as kernel(op).apply(...) (see tensor.py).
"""

import builtins
import functools
from collections import Counter
from typing import NamedTuple

import numpy as np

from gradflow.engine import ops, threads
from gradflow.engine.autograd import _GradMode, no_grad
from gradflow.engine.checks import broadcast_shape, normalize_axis, shape_arg, spelling
from gradflow.engine.creation import tensor
from gradflow.engine.dtype import get_default_dtype
from gradflow.engine.kernels import kernel
from gradflow.engine.rng import generator as draws_from
from gradflow.engine.tensor import Tensor, _binary, _lift, as_tensor


def _method_as_function(name):
    """The Tensor method `name` as a function of the tensor first: gf.tanh(x) is x.tanh(), gf.sum(x, dim=1)
    is x.sum(dim=1), as PyTorch spells them both ways."""
    method = getattr(Tensor, name)

    @functools.wraps(method)
    def function(input, *args, **kwargs):
        return getattr(as_tensor(input), name)(*args, **kwargs)

    function.__qualname__ = name
    return function


# the Tensor methods PyTorch programs call as torch.X(x, ...) (abs, all, any, max, min, pow, round and sum,
# here and below, take the place of Python's own in this file: builtins.any is Python's; torch.max(a, b)
# is a.max(b), the elementwise maximum)
(
    abs, all, amax, amin, any, argsort, ceil, chunk, clamp, clip, clone, cos, cumsum, dot, exp, flatten, flip,
    floor, gather, index_select, log, log10, log1p, log2, log_softmax, logsumexp, masked_fill, masked_select,
    max, mean, min, mm, narrow, neg, nonzero, norm, permute, prod, reciprocal, relu, reshape, roll, round, rsqrt,
    scatter_add, sigmoid, sign, sin, softmax, sort, sqrt, square, squeeze, std, sum, t, tanh, transpose,
    unbind, unique, unsqueeze, var,
) = map(_method_as_function, """
    abs all amax amin any argsort ceil chunk clamp clip clone cos cumsum dot exp flatten flip
    floor gather index_select log log10 log1p log2 log_softmax logsumexp masked_fill masked_select
    max mean min mm narrow neg nonzero norm permute prod reciprocal relu reshape roll round rsqrt scatter_add
    sigmoid sign sin softmax sort sqrt square squeeze std sum t tanh transpose unbind
    unique unsqueeze var""".split())  # fmt: skip


def tril(input, diagonal=None, *, k=None):
    """x with zeros above the diagonal `diagonal` (0 the main one; numpy's k= too): x.tril(diagonal)."""
    return as_tensor(input).tril(diagonal, k=k)


def triu(input, diagonal=None, *, k=None):
    """x with zeros below the diagonal `diagonal` (0 the main one; numpy's k= too): x.triu(diagonal)."""
    return as_tensor(input).triu(diagonal, k=k)


def pow(input, exponent):
    """input ** exponent; either may be a number (torch.pow(2, x) is 2 ** x)."""
    return _binary(ops.Pow, input, exponent)


def bmm(a, b):
    """a @ b for two batches of matrices, (B, n, k) @ (B, k, m) -> (B, n, m), as PyTorch's bmm."""
    a, b = as_tensor(a), as_tensor(b)
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise ValueError(f"bmm: needs two 3-D tensors with the same batch size, got shapes {a.shape} and {b.shape}")
    return a @ b


def outer(a, b):
    """y[i, j] = a[i] b[j] for two vectors, as PyTorch's outer: a product, so its gradient is Mul's."""
    a, b = as_tensor(a), as_tensor(b)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"outer: needs two vectors, got shapes {a.shape} and {b.shape}")
    return a.reshape(-1, 1) * b


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True if |a - b| <= atol + rtol |b| everywhere (with broadcasting), as PyTorch's and numpy's allclose."""
    return bool(np.allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True where |input - other| <= atol + rtol |other| (with broadcasting): a boolean tensor, outside the graph."""
    a, b = np.asarray(input), np.asarray(other)
    return Tensor._constant(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(input, other):
    """True if the two have one shape and the same elements, as PyTorch's equal (a bool, not a tensor)."""
    a, b = np.asarray(input), np.asarray(other)
    return a.shape == b.shape and bool(np.array_equal(a, b))


def is_tensor(obj):
    """True if obj is a gradflow Tensor."""
    return isinstance(obj, Tensor)


def tile(input, dims):
    """input repeated dims[i] times along axis i, as PyTorch's tile: fewer dims than axes count from
    the last axis ((2,) on a matrix is (1, 2)), more add leading axes. Repeat's composition, so each
    element's gradient sums over its copies."""
    x, dims = as_tensor(input), shape_arg((dims,), "tile")
    return x.repeat(*((1,) * (x.ndim - len(dims)) + dims))


def broadcast_to(input, size):
    """input broadcast to size without copying (-1 keeps an axis's size): input.expand(size)."""
    return as_tensor(input).expand(size)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """The n x m identity matrix (n x n without m): ones on the diagonal i = j, zeros elsewhere, in the
    default float dtype unless dtype= says otherwise."""
    dtype = get_default_dtype() if dtype is None else dtype
    return tensor(np.eye(n, m), dtype=dtype, device=device, requires_grad=requires_grad)


def bernoulli(input, p=None, *, generator=None):
    """1 with probability input[i] (or p, for every element), else 0, in input's dtype: PyTorch's
    bernoulli, drawn from gradflow's generator (or generator=). A draw has no gradient: outside the graph."""
    x = as_tensor(input)
    probs = np.asarray(x) if p is None else np.float64(p)
    if probs.size and not np.all((probs >= 0) & (probs <= 1)):
        raise ValueError(f"bernoulli: probabilities must lie in [0, 1], got values from {probs.min()} to {probs.max()}")
    shape = None if p is None else x.shape  # one p for every element: PyTorch's bernoulli(x, p)
    return Tensor._constant(draws_from(generator).bernoulli(probs, x.dtype, shape))


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Draws of mean + std z, z ~ N(0, 1), from gradflow's generator (or generator=), as PyTorch's normal:
    normal(means, stds) for tensors of them (one draw each, broadcast together; the tensor's dtype), or
    normal(mean, std, size) for two numbers (the default float dtype unless dtype= says otherwise).
    Outside the graph: PyTorch's normal gives mean and std a gradient of zero."""
    tensors = [v for v in (mean, std) if isinstance(v, Tensor)]
    if size is None and not tensors:
        raise TypeError("normal: give size= for a number mean and std, e.g. gf.normal(0.0, 1.0, (3,))")
    if size is not None and tensors:
        raise TypeError("normal: size= goes with a number mean and std; tensors give the shape themselves")
    m, s = np.asarray(mean), np.asarray(std)
    if np.any(s < 0):
        raise ValueError(f"normal: std must be non-negative, got {s.min()}")
    shape = broadcast_shape("normal", m.shape, s.shape) if size is None else shape_arg((size,), "normal")
    dtype = np.dtype(tensors[0].dtype if tensors else get_default_dtype() if dtype is None else dtype)
    if size is not None:  # PyTorch's normal_(mean, std) on a new tensor
        draws = draws_from(generator).normal(shape, dtype, float(mean), float(std))
    else:  # standard normals, then mean + std z in the tensors' dtype
        draws = m.astype(dtype) + s.astype(dtype) * draws_from(generator).normal(shape, dtype)
    return tensor(draws, dtype=dtype, device=device, requires_grad=requires_grad)


class set_grad_enabled(_GradMode):
    """Record the graph or not, as PyTorch's set_grad_enabled(mode): a call, which takes effect at once;
    a context (`with gf.set_grad_enabled(False):`), which restores the mode before it on exit; and a
    decorator (`@gf.set_grad_enabled(False)`), which sets the mode for each call of the function only."""

    def __init__(self, mode):
        self.enabled = bool(mode)
        super().__enter__()

    def __enter__(self):
        pass  # already set by __init__, as PyTorch's is

    def __call__(self, fn):
        self.__exit__()  # a decorator changes nothing until its function runs

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(self.enabled):
                return fn(*args, **kwargs)

        return wrapper


def set_num_threads(n):
    """Use n threads for matrix products from now on, for the process (engine/threads.py).

    PyTorch's threads for one op are numpy's BLAS threads here: matmul, linear and attention's
    products run on them; the other plain ops run on one thread whatever n is.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"set_num_threads: n must be a positive integer, got {n!r}")
    threads.limit_blas_threads(int(n))


def get_num_threads():
    """The number of threads numpy's matrix products use (the most any loaded BLAS library uses)."""
    return threads.blas_threads()


class inference_mode(no_grad):
    """PyTorch's inference_mode: here it is no_grad (nothing is recorded), as a context and a decorator."""

    def __init__(self, mode=True):
        if not mode:
            raise ValueError("inference_mode: mode=False is not supported (gradflow's inference_mode is no_grad)")


def where(cond, a, b):
    """a where cond is True, else b (cond boolean; all three broadcast together)."""
    cond = np.asarray(cond)
    if cond.dtype != bool:
        raise TypeError(f"where: cond must be boolean, got {cond.dtype}")
    a = _lift(a, b) if isinstance(b, Tensor) else as_tensor(a)
    b = _lift(b, a)
    broadcast_shape("where", cond.shape, a.shape, b.shape)
    return kernel(ops.Where).apply(a, b, cond=cond)


def _check_joinable(op, tensors):
    if len(tensors) == 0:
        raise ValueError(f"{op}: needs at least one tensor")
    return [as_tensor(t) for t in tensors]


def cat(tensors, axis=None, *, dim=None):
    """Join tensors along an existing axis (0 by default); all other sizes must agree."""
    tensors = _check_joinable("cat", tensors)
    first = tensors[0].shape
    axis = normalize_axis("cat", spelling("cat", "axis", axis, "dim", dim, 0), first)
    for i, t in enumerate(tensors):
        if t.ndim != len(first) or builtins.any(n != m for j, (n, m) in enumerate(zip(t.shape, first)) if j != axis):
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise ValueError(
                f"cat: tensor {i} has shape {t.shape}, which differs from {first} outside axis {axis} (shapes {shapes})"
            )
    return kernel(ops.Cat).apply(*tensors, axis=axis)


def stack(tensors, axis=None, *, dim=None):
    """Join equally shaped tensors along a new axis (0 by default)."""
    tensors = _check_joinable("stack", tensors)
    first = tensors[0].shape
    axis = normalize_axis("stack", spelling("stack", "axis", axis, "dim", dim, 0), (None,) * (len(first) + 1))
    for i, t in enumerate(tensors):
        if t.shape != first:
            raise ValueError(f"stack: tensor {i} has shape {t.shape}, but tensor 0 has shape {first}")
    return kernel(ops.Stack).apply(*tensors, axis=axis)


def split(x, size_or_sizes, axis=None, *, dim=None):
    """Cut x along axis (0 by default) into pieces of `size` (the last may be smaller) or of the listed sizes."""
    return as_tensor(x).split(size_or_sizes, axis, dim=dim)


def topk(x, k, axis=None, largest=True, sorted=True, *, dim=None):
    """(values, indices) of the k largest elements along axis (the last by default): x.topk(k)."""
    return as_tensor(x).topk(k, axis, largest, sorted, dim=dim)


def argmax(x, axis=None, keepdims=None, *, dim=None, keepdim=None):
    """Positions of the largest values along axis (of all elements for None): x.argmax(axis)."""
    return as_tensor(x).argmax(axis, keepdims, dim=dim, keepdim=keepdim)


def argmin(x, axis=None, keepdims=None, *, dim=None, keepdim=None):
    """Positions of the smallest values along axis (of all elements for None): x.argmin(axis)."""
    return as_tensor(x).argmin(axis, keepdims, dim=dim, keepdim=keepdim)


def numel(x):
    """How many numbers x holds: x.numel()."""
    return as_tensor(x).numel()


def maximum(a, b):
    return _binary(ops.Maximum, a, b)


def minimum(a, b):
    return _binary(ops.Minimum, a, b)


def einsum(equation, *operands):
    """The sum of products that `equation` names, as PyTorch's and numpy's einsum: "bij,bjk->bik" is a
    batched matrix product, "ij,j->i" a matrix times a vector, "bhqd,bhkd->bhqk" attention's scores.

    One letter per axis; without "->" the output takes the letters that appear once, in alphabetical
    order. Letters only (no "..."), none repeated within one operand (no diagonals or traces).
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]  # torch.einsum("ij,jk", [a, b])
    operands = [as_tensor(x) for x in operands]
    spec = equation.replace(" ", "")
    if "..." in spec:
        raise ValueError(f"einsum: {equation!r}: '...' is not supported; name every axis with a letter")
    inputs, arrow, output = spec.partition("->")
    inputs = inputs.split(",")
    counts = Counter("".join(inputs))
    if not arrow:
        output = "".join(sorted(c for c, n in counts.items() if n == 1))
    if len(inputs) != len(operands):
        raise ValueError(f"einsum: {equation!r} names {len(inputs)} operand(s), {len(operands)} given")
    sizes = {}
    for k, (letters, x) in enumerate(zip(inputs, operands)):
        if not letters.isalpha() and letters or len(letters) != x.ndim:
            raise ValueError(f"einsum: {equation!r}: operand {k} of shape {x.shape} is given letters {letters!r}")
        if len(set(letters)) != len(letters):
            raise ValueError(f"einsum: {equation!r}: a letter repeats in operand {k} (diagonals are not supported)")
        for c, n in zip(letters, x.shape):
            if sizes.setdefault(c, n) != n:
                raise ValueError(f"einsum: {equation!r}: letter {c!r} has size {sizes[c]} and {n}")
    if len(set(output)) != len(output) or not set(output) <= set(counts):
        raise ValueError(f"einsum: {equation!r}: output {output!r} must name input letters, each once")
    return kernel(ops.Einsum).apply(*operands, letters=tuple(inputs), output=output)


class Histogram(NamedTuple):
    """torch.histogram's result: the counts (or densities) of the bins and the bins' edges."""

    hist: Tensor
    bin_edges: Tensor


def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """The histogram of input's values, outside the graph, as PyTorch's: `bins` equal bins over `range`
    (the values' min and max by default) or the edges given; weight= counts each value by its weight;
    density=True divides the counts so that the bars' areas sum to 1. Both tensors in input's dtype."""
    x = as_tensor(input)
    if x.dtype.kind != "f":
        raise TypeError(f"histogram: input must be a floating-point tensor, got {x.dtype}")
    edges = np.asarray(getattr(bins, "data", bins))
    weights = None if weight is None else np.asarray(getattr(weight, "data", weight)).ravel()
    counts, edges = np.histogram(x.data.ravel(), bins=edges if edges.ndim else int(edges), range=range,
                                 weights=weights, density=density)  # fmt: skip
    return Histogram(Tensor(counts.astype(x.dtype)), Tensor(edges.astype(x.dtype)))
