"""The table of every differentiable op, with the inputs each is gradient-checked on.

The test suite gradchecks every row in float64 and fails if an op exists that no row uses;
`gradflow gradcheck` prints the same table. Shapes cover scalars, broadcasting ((1, n) with (n, 1)),
batches, and transposed (non-contiguous) arrays. Integer ids, targets and masks are constants
inside the row's function.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gradflow.engine.functions import cat, einsum, maximum, minimum, split, stack, tril, triu, where
from gradflow.engine.ops.shape import Cast
from gradflow.engine.rng import manual_seed
from gradflow.engine.tensor import Tensor
from gradflow.nn import functional as F


@dataclass(frozen=True)
class Case:
    name: str  # the op as a user writes it
    fn: Callable  # tensors -> tensor
    shapes: tuple  # one shape per input
    positive: bool = False  # inputs drawn from [0.5, 2) (log, sqrt, a power's base, a divisor)
    transposed: bool = False  # each input is the transpose of a contiguous array: non-contiguous memory

    def inputs(self, dtype=np.float64, seed=0):
        rng = np.random.default_rng(seed)
        xs = []
        for shape in self.shapes:
            draw_shape = shape[::-1] if self.transposed else shape
            a = rng.uniform(0.5, 2.0, draw_shape) if self.positive else rng.standard_normal(draw_shape)
            a = a.T if self.transposed else a
            xs.append(Tensor(np.asarray(a, dtype=dtype), requires_grad=True))
        return xs

    @property
    def label(self):
        shapes = ", ".join(str(s) for s in self.shapes)
        return f"{self.name} [{shapes}]" + (" T" if self.transposed else "")


def _cases(name, fn, *shape_sets, **flags):
    return [Case(name, fn, tuple(shapes), **flags) for shapes in shape_sets]


BINARY_SHAPES = (((3, 4), (3, 4)), ((), (3,)), ((1, 4), (3, 1)), ((2, 3, 4), (4,)))
UNARY_SHAPES = (((3, 4),), ((),), ((2, 3, 4),))

_rng = np.random.default_rng(1234)
IDS = np.array([[0, 3, 3], [4, 1, 0]])  # repeated ids: their embedding gradients must add up
TARGETS = np.array([2, 0, 4, 1, 2])
PAD_MASK = np.array([[True, True, True, False], [True, True, False, False]])[:, None, None, :]  # (B,1,1,Tk)
NO_KEYS = np.array([[True, True, True], [False, False, False], [True, False, True]])  # row 1 sees nothing
FILL_MASK = _rng.random((3, 4)) < 0.4
ANGLES = np.arange(3)[:, None] * 10.0 ** -np.arange(2)  # (T=3, d/2=2): m theta_i for RoPE
COS, SIN = np.cos(ANGLES), np.sin(ANGLES)
WHERE_COND = _rng.random((3, 4)) < 0.5
ZERO_AT = np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]], dtype=bool)  # one zero in a row, and two
GATHER_INDEX = np.array([[0, 2, 2], [3, 0, 1], [1, 1, 1]])  # (3, 3) into axis 1 of (3, 4): repeats add up


def _dropout(x):
    manual_seed(7)  # every evaluation must draw the same mask for finite differences to make sense
    return F.dropout(x, 0.3)


def _attention_dropout(q, k, v):
    manual_seed(7)
    return F.scaled_dot_product_attention(q, k, v, causal=True, dropout_p=0.4)


def _assigned(x, index, v):
    """y = 2 x with y[index] = v written in place, an op's output changed in the graph: IndexPut (inplace.py)."""
    y = x * 2.0
    y[index] = v
    return y


CASES = [
    # --- arithmetic, with broadcasting -----------------------------------------------------------
    *_cases("add", lambda a, b: a + b, *BINARY_SHAPES),
    *_cases("add", lambda a, b: a + b, ((4, 3), (4, 3)), transposed=True),
    *_cases("sub", lambda a, b: a - b, *BINARY_SHAPES),
    *_cases("mul", lambda a, b: a * b, *BINARY_SHAPES),
    *_cases("mul", lambda a, b: a * b, ((4, 3), (4, 3)), transposed=True),
    *_cases("div", lambda a, b: a / b, *BINARY_SHAPES, positive=True),
    *_cases("pow", lambda a, b: a**b, *BINARY_SHAPES, positive=True),
    *_cases("radd", lambda x: 2.5 + x, ((3, 4),)),
    *_cases("rsub", lambda x: 2.5 - x, ((3, 4),)),
    *_cases("rmul", lambda x: 2.5 * x, ((3, 4),)),
    *_cases("rtruediv", lambda x: 2.5 / x, ((3, 4),), positive=True),
    *_cases("pow scalar", lambda x: x**3, ((3, 4),)),
    *_cases("rpow", lambda x: 2.0**x, ((3, 4),)),
    *_cases("neg", lambda x: -x, *UNARY_SHAPES),
    *_cases("matmul", lambda a, b: a @ b, ((4,), (4,)), ((4,), (4, 3)), ((3, 4), (4,)), ((3, 4), (4, 2))),
    *_cases("matmul", lambda a, b: a @ b, ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((2, 3, 4), (4, 5))),
    *_cases("matmul", lambda a, b: a @ b, ((4,), (2, 4, 3)), ((2, 3, 4), (4,))),
    *_cases("matmul", lambda a, b: a @ b, ((3, 4), (4, 2)), transposed=True),
    # --- elementwise functions -------------------------------------------------------------------
    *_cases("exp", lambda x: x.exp(), *UNARY_SHAPES),
    *_cases("log", lambda x: x.log(), *UNARY_SHAPES, positive=True),
    *_cases("sqrt", lambda x: x.sqrt(), *UNARY_SHAPES, positive=True),
    *_cases("rsqrt", lambda x: x.rsqrt(), *UNARY_SHAPES, positive=True),
    *_cases("abs", lambda x: x.abs(), *UNARY_SHAPES),
    *_cases("tanh", lambda x: x.tanh(), *UNARY_SHAPES),
    *_cases("sigmoid", lambda x: x.sigmoid(), *UNARY_SHAPES),
    *_cases("relu", lambda x: x.relu(), *UNARY_SHAPES),
    *_cases("gelu", lambda x: x.gelu(), *UNARY_SHAPES),
    *_cases("silu", lambda x: x.silu(), *UNARY_SHAPES),
    *_cases("sin", lambda x: x.sin(), *UNARY_SHAPES),
    *_cases("cos", lambda x: x.cos(), *UNARY_SHAPES),
    *_cases("exp", lambda x: x.exp(), ((4, 3),), transposed=True),
    *_cases("maximum", lambda a, b: a.maximum(b), *BINARY_SHAPES),
    *_cases("minimum", lambda a, b: minimum(a, b), *BINARY_SHAPES),
    *_cases("gf.maximum", lambda a, b: maximum(a, b), ((1, 4), (3, 1))),
    *_cases("clip", lambda x: x.clip(-0.5, 0.8), *UNARY_SHAPES),
    *_cases("clip min", lambda x: x.clip(min=0.1), ((3, 4),)),
    # --- reductions ------------------------------------------------------------------------------
    *[
        c
        for name in ("sum", "mean", "var", "max", "min", "logsumexp")
        for c in [
            # (x.var() of one element is refused: PyTorch's unbiased estimate divides by N - 1 = 0)
            *_cases(name, lambda x, n=name: getattr(x, n)(), ((3, 4),), *([((),)] if name != "var" else [])),
            *_cases(f"{name} axis=0", lambda x, n=name: getattr(x, n)(axis=0), ((3, 4),)),
            *_cases(f"{name} axis=-1 keepdims", lambda x, n=name: getattr(x, n)(axis=-1, keepdims=True), ((2, 3, 4),)),
            *_cases(f"{name} axis=(0, 2)", lambda x, n=name: getattr(x, n)(axis=(0, 2)), ((2, 3, 4),)),
            *_cases(f"{name} axis=1", lambda x, n=name: getattr(x, n)(axis=1), ((4, 3),), transposed=True),
        ]
    ],
    *_cases("cumsum", lambda x: x.cumsum(0), ((4,),), ((3, 4),)),
    *_cases("cumsum dim=-1", lambda x: x.cumsum(dim=-1), ((2, 3, 4),)),
    *_cases("cumsum", lambda x: x.cumsum(1), ((4, 3),), transposed=True),
    *_cases("softmax", lambda x: x.softmax(), ((3, 5),), ((2, 3, 4),), ((4,),)),
    *_cases("softmax axis=0", lambda x: x.softmax(axis=0), ((3, 5),)),
    *_cases("softmax", lambda x: x.softmax(), ((4, 3),), transposed=True),
    *_cases("log_softmax", lambda x: x.log_softmax(), ((3, 5),), ((2, 3, 4),), ((4,),)),
    *_cases("log_softmax axis=0", lambda x: x.log_softmax(axis=0), ((3, 5),)),
    # --- shape -----------------------------------------------------------------------------------
    *_cases("reshape", lambda x: x.reshape(4, 3), ((3, 4),), ((2, 6),)),
    *_cases("reshape -1", lambda x: x.reshape(-1), ((2, 3, 4),)),
    *_cases("reshape", lambda x: x.reshape(12), ((4, 3),), transposed=True),
    *_cases("permute", lambda x: x.permute(2, 0, 1), ((2, 3, 4),)),
    *_cases("transpose", lambda x: x.transpose(0, 2), ((2, 3, 4),)),
    *_cases("swapaxes", lambda x: x.swapaxes(-1, -2), ((2, 3, 4),)),
    *_cases("T", lambda x: x.T, ((3, 4),), ((2, 3, 4),)),
    *_cases("squeeze", lambda x: x.squeeze(), ((3, 1, 4, 1),)),
    *_cases("squeeze axis", lambda x: x.squeeze(1), ((3, 1, 4),)),
    *_cases("unsqueeze", lambda x: x.unsqueeze(-1), ((3, 4),), ((),)),
    *_cases("expand", lambda x: x.expand(2, 3, 4), ((3, 1),), ((4,),)),
    *_cases("expand -1", lambda x: x.expand(-1, 5), ((3, 1),)),
    *_cases("flip", lambda x: x.flip(0), ((4,),), ((3, 4),)),
    *_cases("flip dims", lambda x: x.flip(dims=(0, 2)), ((2, 3, 4),)),
    *_cases("roll", lambda x: x.roll(1, 0), ((3, 4),)),
    *_cases("roll dims", lambda x: x.roll((2, -1), dims=(1, 2)), ((2, 3, 4),)),
    *_cases("roll flattened", lambda x: x.roll(5), ((3, 4),)),
    *_cases("F.pad", lambda x: F.pad(x, (1, 2)), ((3, 4),)),
    *_cases("F.pad two axes value", lambda x: F.pad(x, (0, 1, 2, 0), value=-1.0), ((2, 3, 4),)),
    *_cases("einsum", lambda a, b: einsum("bij,bjk->bik", a, b), ((2, 3, 4), (2, 4, 5))),
    *_cases("einsum", lambda a, b: einsum("ij,j->i", a, b), ((3, 4), (4,))),
    *_cases("einsum", lambda a, b: einsum("bhqd,bhkd->bhqk", a, b), ((2, 2, 3, 4), (2, 2, 5, 4))),
    *_cases("einsum implicit", lambda a, b: einsum("ij,kj", a, b), ((3, 4), (5, 4))),
    *_cases("einsum summed alone", lambda a: einsum("ijk->ki", a), ((2, 3, 4),)),
    *_cases("einsum three operands", lambda a, b, c: einsum("ij,jk,k->i", a, b, c), ((2, 3), (3, 4), (4,))),
    *_cases("einsum", lambda a, b: einsum("ij,jk->ik", a, b), ((3, 4), (4, 2)), transposed=True),
    # PyTorch's Tensor methods and spellings (dim=, keepdim=)
    *_cases("clone", lambda x: x.clone(), ((3, 4),), ((),)),
    *_cases("contiguous", lambda x: x.contiguous(), ((4, 3),), transposed=True),
    *_cases("view", lambda x: x.view(2, -1), ((3, 4),)),
    *_cases("view", lambda x: x.view((-1,)), ((4, 3),), transposed=True),
    *_cases("flatten", lambda x: x.flatten(1), ((2, 3, 4),)),
    *_cases("flatten 1..2", lambda x: x.flatten(1, 2), ((2, 3, 4, 2),), ((),)),
    *_cases("split dim", lambda x: x.split([1, 3], dim=1)[1] * x.split(2, dim=1)[0].sum(), ((3, 4),)),
    *_cases("chunk", lambda x: x.chunk(3)[1] * x.chunk(3, dim=0)[2], ((6, 2),)),
    *_cases("chunk uneven", lambda x: x.chunk(3, dim=1)[-1], ((2, 5),)),
    *_cases("repeat", lambda x: x.repeat(2, 3), ((2, 3),)),
    *_cases("repeat new axes", lambda x: x.repeat(2, 1, 2), ((3,),), ((2, 3),)),
    *_cases("topk", lambda x: x.topk(2).values, ((3, 5),)),
    *_cases("topk smallest dim=0", lambda x: x.topk(3, dim=0, largest=False).values, ((4, 3),)),
    *_cases("max dim", lambda x: x.max(dim=1).values, ((3, 4),)),
    *_cases("max dim keepdim", lambda x: x.max(dim=-1, keepdim=True).values, ((2, 3, 4),)),
    *_cases("min dim", lambda x: x.min(dim=0).values, ((3, 4),)),
    *_cases("sum dim keepdim", lambda x: x.sum(dim=(0, 2), keepdim=True), ((2, 3, 4),)),
    *_cases("var dim (unbiased)", lambda x: x.var(dim=1), ((3, 4),)),
    *_cases("std", lambda x: x.std(dim=0, keepdim=True) * x.std(), ((3, 4),)),
    *_cases("clamp", lambda x: x.clamp(-0.5, 0.8), ((3, 4),)),
    *_cases("pow method", lambda x: x.pow(3) + x.pow(x), ((3, 4),), positive=True),
    *_cases("sort", lambda x: x.sort().values, ((3, 5),)),
    *_cases("sort descending dim=0", lambda x: x.sort(dim=0, descending=True)[0], ((4, 3),)),
    *_cases("double", lambda x: x.double().type_as(x) * x, ((3, 4),)),  # the float32 run casts there and back
    *_cases("to", lambda x: x.to(np.float64).to(x.dtype) * x, ((3, 4),)),
    *_cases("type_as", lambda x: x.to("cpu", np.float64).type_as(x) * x, ((3, 4),)),
    # the cast op from float64 to float64: through float32, no function passes central differences at
    # eps 1e-6 (float32 rounds x + eps by up to 6% of eps); tests/test_idioms_tensor.py checks that with a wider eps
    *_cases("cast", lambda x: Cast.apply(x, dtype=np.float64).type_as(x), ((3, 4),)),
    *_cases("log10 log2 log1p", lambda x: x.log10() * x.log2() + x.log1p(), ((3, 4),), positive=True),
    *_cases("square reciprocal", lambda x: x.square() + x.reciprocal(), ((3, 4),), positive=True),
    *_cases("log1p (exact near 0)", lambda x: x.log1p(), ((3, 4),), positive=True),
    *_cases("norm 2, 1, inf, 3", lambda x: x.norm() + x.norm(1, dim=1).sum() + x.norm(3), ((3, 4),), positive=True),
    *_cases("norm dim keepdim", lambda x: x.norm(dim=0, keepdim=True), ((3, 4),), positive=True),
    *_cases("add sub alpha", lambda a, b: a.add(b, alpha=2.5).sub(a, alpha=0.5), *BINARY_SHAPES[:3]),
    *_cases("prod", lambda x: x.prod(), ((3, 4),), ((),), ((5,),)),
    *_cases("prod dim", lambda x: x.prod(dim=1), ((3, 4),), ((2, 3, 4),)),
    *_cases("prod dim keepdim", lambda x: x.prod(-1, keepdim=True), ((2, 3, 4),)),
    *_cases("prod dim=0", lambda x: x.prod(0), ((4, 3),), transposed=True),
    *_cases("prod axis=(0, 2)", lambda x: x.prod(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    *_cases("prod with zeros", lambda x: x.masked_fill(ZERO_AT, 0.0).prod(1), ((3, 4),)),
    *_cases("amax amin", lambda x: x.amax(dim=(0, 2)) * x.amin(1).sum(), ((2, 3, 4),)),
    *_cases("mm dot t", lambda a, b: a.mm(b.t()).sum() * a[0].dot(b[1]), ((3, 4), (2, 4))),
    # --- indexing and selection ------------------------------------------------------------------
    *_cases("index slice", lambda x: x[1:, ::2], ((4, 5),)),
    *_cases("index negative", lambda x: x[-1], ((4, 5),)),
    *_cases("index ellipsis", lambda x: x[..., -2:], ((2, 3, 4),)),
    *_cases("index int array (repeats)", lambda x: x[np.array([0, 2, 0, 0])], ((3, 4),)),
    *_cases("index 2-D int array", lambda x: x[IDS], ((5, 3),)),
    *_cases("index mixed", lambda x: x[[1, 1, 0], 1:], ((3, 4),)),
    *_cases("index pairs", lambda x: x[[0, 2, 0], [1, 1, 1]], ((3, 4),)),
    *_cases("index bool mask", lambda x: x[FILL_MASK], ((3, 4),)),
    *_cases("index slice", lambda x: x[:, 1], ((3, 4),), transposed=True),
    *_cases("x[slice] = v (index_put)", lambda x, v: _assigned(x, (slice(1, 3), 1), v), ((3, 4), (2,)), ((3, 4), ())),
    *_cases("x[pairs] = v (index_put)", lambda x, v: _assigned(x, ([0, 2], [1, 3]), v), ((3, 4), (2,))),
    *_cases("x[mask] = v (index_put)", lambda x, v: _assigned(x, FILL_MASK, v), ((3, 4), ())),
    *_cases("gather", lambda x: x.gather(1, GATHER_INDEX), ((3, 4),)),
    *_cases("gather dim=0", lambda x: x.gather(0, GATHER_INDEX[:2].T), ((4, 2),)),
    *_cases("scatter_add", lambda x, s: x.scatter_add(1, GATHER_INDEX, s), ((3, 4), (3, 3))),
    *_cases("scatter_add src larger", lambda x, s: x.scatter_add(0, GATHER_INDEX[:2], s), ((4, 3), (3, 4))),
    *_cases("gather", lambda x: x.gather(1, GATHER_INDEX), ((3, 4),), transposed=True),
    *_cases("index_select", lambda x: x.index_select(1, np.array([3, 0, 3])), ((3, 4),), ((2, 4, 3),)),
    *_cases("masked_select", lambda x: x.masked_select(FILL_MASK) * x.masked_select(FILL_MASK[0]).sum(), ((3, 4),)),
    *_cases("unbind", lambda x: x.unbind(1)[0] * x.unbind()[1][2], ((3, 4),)),
    *_cases("masked_fill", lambda x: x.masked_fill(FILL_MASK, -1.5), ((3, 4),)),
    *_cases("masked_fill broadcast", lambda x: x.masked_fill(FILL_MASK[0], 0.0), ((2, 3, 4),)),
    *_cases("where", lambda a, b: where(WHERE_COND, a, b), ((3, 4), (3, 4)), ((1, 4), (3, 1))),
    *_cases("where scalar", lambda a: where(WHERE_COND, a, 0.0), ((3, 4),)),
    *_cases("tril", lambda x: tril(x), ((4, 4),), ((2, 3, 4),)),
    *_cases("triu", lambda x: triu(x, 1), ((4, 4),)),
    *_cases("cat", lambda a, b: cat([a, b], axis=1), ((2, 3), (2, 4))),
    *_cases("cat", lambda a, b, c: cat([a, b, c]), ((1, 3), (2, 3), (3, 3))),
    *_cases("stack", lambda a, b: stack([a, b], axis=-1), ((2, 3), (2, 3))),
    *_cases("stack", lambda a, b: stack([a, b]), ((), ())),
    *_cases("split", lambda x: split(x, 2, axis=1)[1] * split(x, [1, 3], axis=1)[1][:, :2], ((3, 4),)),
    # --- nn functions ----------------------------------------------------------------------------
    *_cases("cross_entropy", lambda z: F.cross_entropy(z, TARGETS), ((5, 6),)),
    *_cases("cross_entropy sum", lambda z: F.cross_entropy(z, TARGETS, reduction="sum"), ((5, 6),)),
    *_cases("cross_entropy none", lambda z: F.cross_entropy(z, TARGETS, reduction="none"), ((5, 6),)),
    *_cases("cross_entropy ignore_index", lambda z: F.cross_entropy(z, TARGETS, ignore_index=2), ((5, 6),)),
    *_cases("cross_entropy", lambda z: F.cross_entropy(z, TARGETS), ((5, 6),), transposed=True),
    *_cases(
        "layer_norm", lambda x, w, b: F.layer_norm(x, w.shape, w, b), ((3, 5), (5,), (5,)), ((2, 3, 4), (4,), (4,))
    ),
    *_cases("layer_norm no affine", lambda x: F.layer_norm(x), ((3, 5),)),
    *_cases("layer_norm", lambda x, w, b: F.layer_norm(x, w.shape, w, b), ((4, 3), (3,), (3,)), transposed=True),
    *_cases("layer_norm two axes", lambda x, w, b: F.layer_norm(x, (3, 4), w, b), ((2, 3, 4), (3, 4), (3, 4))),
    *_cases("rms_norm", lambda x, w: F.rms_norm(x, w.shape, w), ((3, 5), (5,)), ((2, 3, 4), (4,))),
    *_cases("rms_norm no weight", lambda x: F.rms_norm(x), ((3, 5),)),
    *_cases("linear", lambda x, w, b: F.linear(x, w, b), ((3, 4), (5, 4), (5,)), ((2, 3, 4), (5, 4), (5,))),
    *_cases("linear no bias", lambda x, w: F.linear(x, w), ((3, 4), (5, 4)), ((2, 1, 4), (2, 4))),
    *_cases("linear_cross_entropy", lambda x, w, b: F.linear_cross_entropy(x, w, TARGETS, b), ((5, 4), (6, 4), (6,))),
    *_cases(
        "linear_cross_entropy sum, ignore_index, no bias",
        lambda x, w: F.linear_cross_entropy(x, w, TARGETS, ignore_index=2, reduction="sum"),
        ((5, 4), (6, 4)),
    ),
    *_cases("linear", lambda x, w, b: F.linear(x, w, b), ((3, 4), (5, 4), (5,)), transposed=True),
    *_cases("rope", lambda x: F.rope(x, COS, SIN), ((3, 4),), ((2, 3, 4),)),
    *_cases("rope interleaved", lambda x: F.rope(x, COS, SIN, interleaved=True), ((2, 3, 4),)),
    *_cases("rope", lambda x: F.rope(x, COS, SIN), ((3, 4),), transposed=True),
    *_cases("F.gelu approximate=tanh", lambda x: F.gelu(x, approximate="tanh"), ((3, 4),)),
    *_cases("F.gelu", lambda x: F.gelu(x), *UNARY_SHAPES),
    *_cases("F.relu", lambda x: F.relu(x), ((3, 4),)),
    *_cases("F.tanh", lambda x: F.tanh(x), ((3, 4),)),
    *_cases("F.sigmoid", lambda x: F.sigmoid(x), ((3, 4),)),
    *_cases("F.softmax dim=0", lambda x: F.softmax(x, dim=0), ((3, 5),)),
    *_cases("F.log_softmax dim=1", lambda x: F.log_softmax(x, dim=1), ((2, 3, 4),)),
    *_cases("mse_loss", lambda a, b: F.mse_loss(a, b), ((3, 4), (3, 4)), ((), ())),
    *_cases("mse_loss sum", lambda a, b: F.mse_loss(a, b, reduction="sum"), ((3, 4), (3, 4))),
    *_cases("mse_loss none", lambda a, b: F.mse_loss(a, b, reduction="none"), ((3, 4), (3, 4))),
    *_cases("l1_loss", lambda a, b: F.l1_loss(a, b), ((3, 4), (3, 4))),
    *_cases("nll_loss", lambda z: F.nll_loss(z, TARGETS), ((5, 6),)),
    *_cases(
        "nll_loss ignore_index none", lambda z: F.nll_loss(z, TARGETS, ignore_index=2, reduction="none"), ((5, 6),)
    ),
    *_cases(
        "cross_entropy classes on axis 1",
        lambda z: F.cross_entropy(z, np.array([[0, 3, 1], [2, 2, -100]])),
        ((2, 4, 3),),
    ),
    *_cases("F.silu", lambda x: F.silu(x), ((3, 4),)),
    *_cases("dropout", _dropout, ((4, 5),)),
    *_cases("embedding", lambda w: F.embedding(IDS, w), ((5, 3),)),
    *_cases(  # the padding row gets no gradient by design: its places are zeroed for finite differences to agree
        "embedding padding_idx", lambda w: F.embedding(IDS, w, padding_idx=3) * (IDS != 3)[..., None], ((5, 3),)
    ),
    *_cases("attention", lambda q, k, v: F.scaled_dot_product_attention(q, k, v), ((2, 3, 4), (2, 5, 4), (2, 5, 3))),
    *_cases(
        "attention causal",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True),
        ((2, 2, 4, 3), (2, 2, 4, 3), (2, 2, 4, 3)),
        ((2, 4, 3), (2, 6, 3), (2, 6, 3)),  # fewer queries than keys: the last positions, as with a cache
    ),
    *_cases(
        "attention padding mask",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=PAD_MASK),
        ((2, 2, 3, 4), (2, 2, 4, 4), (2, 2, 4, 4)),
    ),
    *_cases(
        "attention row with no keys",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=NO_KEYS),
        ((3, 2), (3, 2), (3, 2)),
    ),
    *_cases("attention dropout", _attention_dropout, ((2, 3, 4), (2, 5, 4), (2, 5, 3))),
    *_cases(
        "attention float attn_mask",
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        ((2, 3, 4), (2, 5, 4), (2, 5, 3), (3, 5)),  # the additive mask is learned here, shared by the batch
    ),
    *_cases(
        "attention -inf attn_mask",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=np.where(NO_KEYS, 0.0, -np.inf)),
        ((3, 2), (3, 2), (3, 2)),
    ),
    *_cases(
        "attention is_causal",  # PyTorch's: query i sees keys 0..i, counted from the first key
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        ((2, 4, 3), (2, 6, 3), (2, 6, 3)),
    ),
    *_cases(
        "attention shared kv heads",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True),
        ((2, 4, 3, 2), (2, 1, 3, 2), (2, 1, 3, 2)),  # k, v broadcast over 4 query heads
    ),
]
