"""In-place changes of a tensor, under PyTorch's names: add_, mul_, fill_, normal_, ..., and += -= *= /=.

Each computes its out-of-place twin (x + alpha * y for add_) and writes the result into the
tensor's own memory, through `in_place()`, which counts the change in the tensor's version: a
graph that saved these values for backward then refuses to use the new ones, with an error
naming the op, instead of computing a wrong gradient.

On a leaf that requires grad (a parameter) an in-place change is refused while the graph is
recorded, as in PyTorch: updating parameters in place (an optimizer's step, a weight init) is what
`with gf.no_grad():` is for. On an op's output in the graph (`scores.masked_fill_(mask, -inf)`), or
with a value that requires grad (`dC[ix] += demb[k]`), the change is recorded, as PyTorch records
it: the out-of-place twin is an op of the graph (x[index] = v is ops.IndexPut), and the tensor
takes that op's output, its memory and its node (grad_fn). The ops that read the tensor before keep
the old memory, and in their input_nodes the node that made it (autograd.py), so their gradients
are still right. Two differences from PyTorch: such a change through a view is refused (change the
tensor it views), and views of the tensor taken before the change keep the old values.
"""

import numpy as np

from gradflow.engine import autograd
from gradflow.engine.checks import broadcast_shape, normalize_axis
from gradflow.engine.naming import describe
from gradflow.engine.ops.index import IndexPut
from gradflow.engine.rng import generator as draws_from


class InPlace:
    """The in-place methods of Tensor; each returns the tensor itself, so calls chain as in PyTorch."""

    def _update(self, op, compute, *sources, index=..., casting="same_kind"):
        """Write compute(x) into self[index] (index already normalized, as Tensor.__setitem__ does), in
        place, after checking that the graph can do without it. x is self, or, where the change is
        recorded, a stand-in for self as it is now (its values and its node), so that the nodes the
        change makes read the stand-in: self, which becomes their output, is not their input too.

        casting "same_kind" refuses arithmetic whose result has a wider kind than the tensor (an
        integer tensor += 0.5); assignments (fill_, copy_, x[i] = v) convert as PyTorch's do.
        """
        recorded = autograd.is_grad_enabled() and self._needed_by_the_graph(op, sources)
        if not self._data.flags.writeable:
            raise ValueError(
                f"{op}: the memory of {describe(self)} is read-only (an expand()ed tensor, or a "
                "read-only numpy array); change a copy of it instead (x = x.clone())"
            )
        x = self._make(self._data, self._requires_grad, self.grad_fn) if recorded else self
        result = compute(x)
        new = np.asarray(result)
        target = self._data if index is ... else self._data[index]
        if not np.can_cast(new.dtype, self.dtype, casting):
            raise TypeError(
                f"{op}: the result is {new.dtype} and cannot be written into a {self.dtype} tensor in place; "
                "convert the tensor first (e.g. x = x.float())"
            )
        if broadcast_shape(op, new.shape, target.shape) != target.shape:
            raise ValueError(
                f"{op}: a value of shape {new.shape} does not fit into shape {target.shape} "
                "(an in-place change keeps the tensor's shape)"
            )
        if recorded:  # self becomes the output of an op of the graph: its memory, its node
            result = self._recorded(x, result, sources, index)
            self._data, self._requires_grad, self.grad_fn = result._data, result.requires_grad, result.grad_fn
        else:
            self.in_place()[index] = new
        return self

    def _recorded(self, x, result, sources, index):
        """The tensor self becomes, made by a node of the graph, in memory of its own: the op that made
        result just now (self + other for add_), or the op that writes a value given (x[index] = v
        is IndexPut; a value written whole, copy_(src) or fill_(0), a copy in self's shape and dtype)."""
        value = result if hasattr(result, "grad_fn") else self._constant(np.asarray(result))
        value = value.astype(self.dtype)
        if index is not ...:
            return IndexPut.apply(x, value, index=index)
        made_now = value.grad_fn is not None and value._base is None and not any(value is s for s in (x, *sources))
        return value if made_now and value.shape == self.shape else value.expand(*self.shape).clone()

    def _needed_by_the_graph(self, op, sources):
        """True if the graph being recorded needs the change: self is an op's output in it, or a value
        written requires grad. On a leaf that requires grad, or through a view, it is refused."""
        if self.requires_grad and self.grad_fn is None:
            raise RuntimeError(
                f"{op}: {describe(self)} is a leaf that requires grad, and an in-place change would be "
                "hidden from backward; to update it (an optimizer's step, a weight init), wrap it in "
                "`with gf.no_grad():`"
            )
        needed = self.requires_grad or any(getattr(s, "requires_grad", False) for s in sources)
        if needed and self._base is not None:
            raise RuntimeError(
                f"{op}: {describe(self)}, in the graph being recorded: gradflow records an in-place change "
                "of a tensor, not through a view of it; change the tensor it views (x[index] -= v), or write "
                "the change out of place (y = y - v)"
            )
        return needed

    # x += y, x -= y, x *= y, x /= y: PyTorch changes x in place. Without these Python would rebind x to
    # x + y, and the update `for p in model.parameters(): p -= lr * p.grad` would change no parameter.
    def __iadd__(self, other):
        return self._augmented("+=", lambda x: x + other, other)

    def __isub__(self, other):
        return self._augmented("-=", lambda x: x - other, other)

    def __imul__(self, other):
        return self._augmented("*=", lambda x: x * other, other)

    def __itruediv__(self, other):
        return self._augmented("/=", lambda x: x / other, other)

    # mask &= other, |=, ^=: in place too; masks are outside the graph, so nothing is recorded
    def __iand__(self, other):
        return self._update("&=", lambda x: x & other, other)

    def __ior__(self, other):
        return self._update("|=", lambda x: x | other, other)

    def __ixor__(self, other):
        return self._update("^=", lambda x: x ^ other, other)

    def _augmented(self, op, compute, other):
        """x op= other: in place, through _update and its version count, where PyTorch changes x in place
        without recording it (under no_grad, or where nothing requires grad). Where the graph being
        recorded needs the change (x is an op's output that requires grad, or other requires grad),
        PyTorch records it in place; gradflow records no in-place change, so x is rebound to the
        out-of-place result, with the same values and gradient. A leaf that requires grad is refused
        by _update, as PyTorch refuses it."""
        recorded = self.requires_grad and self.grad_fn is not None or getattr(other, "requires_grad", False)
        if autograd.is_grad_enabled() and recorded and not (self.requires_grad and self.grad_fn is None):
            return compute(self)
        return self._update(op, compute, other)

    def add_(self, other, alpha=1):
        """x <- x + alpha * other"""
        return self._update("add_", lambda x: x + alpha * other, other)

    def sub_(self, other, alpha=1):
        """x <- x - alpha * other"""
        return self._update("sub_", lambda x: x - alpha * other, other)

    def mul_(self, other):
        """x <- x * other"""
        return self._update("mul_", lambda x: x * other, other)

    def div_(self, other):
        """x <- x / other"""
        return self._update("div_", lambda x: x / other, other)

    def clamp_(self, min=None, max=None):
        """x <- x limited to [min, max] (either bound may be None)"""
        return self._update("clamp_", lambda x: x.clip(min, max))

    def masked_fill_(self, mask, value):
        """x <- value where mask is True (mask broadcasts to x's shape)"""
        return self._update("masked_fill_", lambda x: x.masked_fill(mask, value), casting="unsafe")

    def zero_(self):
        """x <- 0"""
        return self._update("zero_", lambda x: 0, casting="unsafe")

    def fill_(self, value):
        """x <- value, a number"""
        if np.ndim(value) != 0:
            raise TypeError(f"fill_: value must be a number, got {type(value).__name__} of shape {np.shape(value)}")
        return self._update("fill_", lambda x: value, value, casting="unsafe")

    def copy_(self, src):
        """x <- src (broadcast to x's shape, converted to x's dtype)"""
        return self._update("copy_", lambda x: src, src, casting="unsafe")

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """x <- draws from N(mean, std^2), from gradflow's generator (reproducible after gf.manual_seed) or
        generator=, PyTorch's numbers (engine/rng.py)"""
        if not std >= 0:
            raise ValueError(f"normal_: std must be non-negative, got {std}")
        return self._update("normal_", lambda x: draws_from(generator).normal(x.shape, x.dtype, mean, std))

    def uniform_(self, low=0.0, high=1.0, *, generator=None):
        """x <- draws from the uniform distribution on [low, high), from gradflow's generator or generator="""
        if not low <= high:
            raise ValueError(f"uniform_: low {low} is greater than high {high}")
        return self._update("uniform_", lambda x: draws_from(generator).uniform(x.shape, x.dtype, low, high))

    def addcmul_(self, tensor1, tensor2, value=1):
        """x <- x + value * tensor1 * tensor2 (Adam's second moment, written as PyTorch writes it)"""
        return self._update("addcmul_", lambda x: x + value * tensor1 * tensor2, tensor1, tensor2)

    def addcdiv_(self, tensor1, tensor2, value=1):
        """x <- x + value * tensor1 / tensor2 (Adam's step, written as PyTorch writes it)"""
        return self._update("addcdiv_", lambda x: x + value * tensor1 / tensor2, tensor1, tensor2)

    def lerp_(self, end, weight):
        """x <- x + weight * (end - x): the moving average m <- beta m + (1 - beta) g is m.lerp_(g, 1 - beta)"""
        return self._update("lerp_", lambda x: x + weight * (end - x), end, weight)

    def pow_(self, exponent):
        """x <- x ** exponent"""
        return self._update("pow_", lambda x: x**exponent, exponent)

    # x <- f(x) for the elementwise functions: each computes the tensor.py op and writes it back
    def exp_(self):
        return self._update("exp_", lambda x: x.exp())

    def log_(self):
        return self._update("log_", lambda x: x.log())

    def sqrt_(self):
        return self._update("sqrt_", lambda x: x.sqrt())

    def abs_(self):
        return self._update("abs_", lambda x: x.abs())

    def neg_(self):
        return self._update("neg_", lambda x: x.neg())

    def tanh_(self):
        return self._update("tanh_", lambda x: x.tanh())

    def sigmoid_(self):
        return self._update("sigmoid_", lambda x: x.sigmoid())

    def relu_(self):
        return self._update("relu_", lambda x: x.relu())

    def scatter_(self, dim, index, src=None, *, value=None):
        """x[i][index[i][j][k]][k] <- src[i][j][k] for dim 1 (a number src, or value=, is written at every
        position index names): PyTorch's scatter_, as the assignment x[positions] = src, so that it is
        recorded in the graph where it must be (IndexPut)."""
        src = value if src is None else src
        index = np.asarray(getattr(index, "_data", index))
        dim = normalize_axis("scatter_", dim, self.shape)
        if index.ndim != self.ndim or index.dtype.kind not in "iu":
            raise ValueError(
                f"scatter_: index must be an integer tensor with {self.ndim} axes, got {index.dtype} {index.shape}"
            )
        positions = [
            np.arange(n).reshape([-1 if a == b else 1 for a in range(self.ndim)]) for b, n in enumerate(index.shape)
        ]
        positions[dim] = index
        if np.ndim(src):
            src = src[tuple(slice(0, n) for n in index.shape)]
        self[tuple(positions)] = src
        return self

    def index_fill_(self, dim, index, value):
        """x[..., index, ...] <- value along dim (index a 1-D integer tensor)"""
        dim = normalize_axis("index_fill_", dim, self.shape)
        self[(slice(None),) * dim + (np.asarray(getattr(index, "_data", index)),)] = value
        return self
