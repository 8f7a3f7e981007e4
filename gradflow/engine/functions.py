"""Functions of tensors: where, cat, stack, split, maximum, minimum, tril, triu, einsum, and the Tensor
methods PyTorch also spells as functions (torch.tanh(x) is x.tanh(), torch.topk(x, k) is x.topk(k)),
and PyTorch's inference_mode (no_grad here).

Where a function takes an axis, numpy's axis= and PyTorch's dim= are both accepted (not both at once).
Each op runs as the Tensor methods run theirs, as kernel(op).apply(...) (see tensor.py).
"""

import functools
from collections import Counter

import numpy as np

from gradflow.engine import ops
from gradflow.engine.autograd import no_grad
from gradflow.engine.checks import broadcast_shape, normalize_axis, spelling
from gradflow.engine.kernels import kernel
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


# the Tensor methods PyTorch programs call as torch.X(x, ...) (abs, max, min, pow and sum, here and
# below, take the place of Python's own in this file; torch.max(a, b) is a.max(b), the elementwise maximum)
(
    abs, chunk, clamp, clip, clone, cos, cumsum, exp, flatten, flip, gather, log, log_softmax, logsumexp,
    masked_fill, max, mean, min, neg, norm, permute, relu, reshape, roll, rsqrt, scatter_add, sigmoid, sin,
    softmax, sort, sqrt, squeeze, std, sum, tanh, transpose, unique, unsqueeze, var,
) = map(_method_as_function, """
    abs chunk clamp clip clone cos cumsum exp flatten flip gather log log_softmax logsumexp
    masked_fill max mean min neg norm permute relu reshape roll rsqrt scatter_add sigmoid sin
    softmax sort sqrt squeeze std sum tanh transpose unique unsqueeze var""".split())  # fmt: skip


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
        if t.ndim != len(first) or any(n != m for j, (n, m) in enumerate(zip(t.shape, first)) if j != axis):
            shapes = ", ".join(str(t.shape) for t in tensors)
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


def _triangle(op, x, keep):
    x = as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"{op}: needs at least 2 dimensions, got shape {x.shape}")
    return x.masked_fill(~keep, 0)


def tril(x, k=None, *, diagonal=None):
    """x with the elements above the k-th diagonal set to 0 (keeps j <= i + k in the last two axes);
    PyTorch's diagonal= is k."""
    x, k = as_tensor(x), spelling("tril", "k", k, "diagonal", diagonal, 0)
    return _triangle("tril", x, np.tri(*x.shape[-2:], k=k, dtype=bool))


def triu(x, k=None, *, diagonal=None):
    """x with the elements below the k-th diagonal set to 0 (keeps j >= i + k in the last two axes);
    PyTorch's diagonal= is k."""
    x, k = as_tensor(x), spelling("triu", "k", k, "diagonal", diagonal, 0)
    return _triangle("triu", x, ~np.tri(*x.shape[-2:], k=k - 1, dtype=bool))


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
