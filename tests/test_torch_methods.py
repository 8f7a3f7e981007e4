"""The rest of PyTorch's tensor surface (issue 27): each method and free function beside its PyTorch twin.

CALLS is the table: one call, written with `lib.` where it names the library (gf or torch). Where
torch is installed (pip install torch==2.13.0) each row runs on both, in float32 and in float64, and the
values, dtypes and gradients must agree; without torch those rows skip, unless GRADFLOW_REQUIRE_TORCH=1
(CI sets it), which makes the missing import a failure. The tests after the table need no torch: values
by hand, the choices where gradflow differs on purpose (steps outside the graph, x.type()'s string),
draws, grad modes, threads, refusals.
"""

import os

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from threadpoolctl import threadpool_info

import gradflow as gf

try:
    import torch
except ImportError:
    if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
        raise
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (pip install torch==2.13.0)")

# Each row: one call, run with lib = gf and lib = torch, and x a tensor of shape (2, 3, 4) with distinct values
# that requires grad
CALLS = [
    # math: compositions of existing ops, so their gradients are those ops'
    "(x.abs() + 0.5).log10()",
    "(x.abs() + 0.5).log2()",
    "x.abs().log1p()",
    "x.square()",
    "x.reciprocal()",
    "x.add(x.flip(0), alpha=2)",
    "x.add(1.5)",
    "x.sub(x.flip(0), alpha=0.5)",
    "x.mul(x.flip(2))",
    "x.div(x.flip(0))",
    "(x * 5).div(2, rounding_mode='floor')",
    "(x * 5).div(2, rounding_mode='trunc')",
    "(x * 5).long().div(2, rounding_mode='trunc')",
    # steps and comparisons: outside gradflow's graph, PyTorch's gradient of zero
    "x.sign() * x",
    "(x * 3).round() + x",
    "(x * 3).round(decimals=1)",
    "(x * 3).floor() * x",
    "(x * 3).ceil()",
    "(x * 3).long().floor()",
    "x.round().eq(0)",
    "x.ne(x[0])",
    "x.lt(0)",
    "x.le(x.flip(1))",
    "x.gt(0.5)",
    "x.ge(x[:, :1])",
    # reductions and sorting
    "x.prod()",
    "x.prod(1)",
    "x.prod(dim=-1, keepdim=True)",
    "(x * (x > 0)).prod(2)",  # zeros among the factors
    "x.amax()",
    "x.amax(dim=(0, 2))",
    "x.amin(1, keepdim=True)",
    "x.argsort()",
    "x.argsort(dim=1, descending=True)",
    # matrices
    "x[0].t()",
    "x[0, 0].t()",
    "x[0].mm(x[1].t())",
    "x[0].matmul(x[1].t())",
    "x.matmul(x[0, 0])",
    "x[0, 0].dot(x[1, 1])",
    "x.tril(1)",
    "x.triu(diagonal=-1)",
    # picking and viewing
    "x.unbind(1)",
    "x.unbind()",
    "x.index_select(2, lib.tensor([3, 0, 3]))",
    "x.index_select(0, lib.tensor([1]))",
    "x.masked_select(x > 0)",
    "x.masked_select(x[0] > 0)",
    "x.view_as(x.reshape(6, 4))",
    "x.reshape_as(x.reshape(4, 6))",
    "x[:, :1].expand_as(x)",
    "x.is_floating_point()",
    "x.long().is_floating_point()",
    "x.type(lib.float32)",
    "x.type(lib.float64) * x",
    # free functions: lib.X(x, ...) is x.X(...)
    "lib.all(x > -5)",
    "lib.all(x > 0, 2)",
    "lib.any(x > 1, dim=1)",
    "lib.equal(x, x.clone())",
    "lib.equal(x, x.flip(0))",
    "lib.equal(x, x[0])",
    "lib.isclose(x, x + 1e-9)",
    "lib.isclose(x, x.flip(0), atol=1.0)",
    "lib.log10(x.abs() + 1) + lib.log2(x.abs() + 1)",
    "lib.log1p(x.abs())",
    "lib.square(x)",
    "lib.reciprocal(x)",
    "lib.eye(3)",
    "lib.eye(2, 4, dtype=lib.float64) + x[0, :2]",
    "lib.prod(x, 1)",
    "lib.sign(x)",
    "lib.round(x * 3)",
    "lib.floor(x) + lib.ceil(x)",
    "lib.mm(x[0], x[1].t())",
    "lib.matmul(x, x[0].t())",
    "lib.dot(x[0, 0], x[1, 2])",
    "lib.t(x[1])",
    "lib.index_select(x, 1, lib.tensor([2, 2, 0]))",
    "lib.masked_select(x, x < 0)",
    "lib.argsort(x, 1)",
    "lib.amax(x, 1)",
    "lib.amin(x, (0, 1))",
    "lib.unbind(x, 2)",
    "lib.tile(x, (2,))",
    "lib.tile(x[0], (2, 1, 2))",
    "lib.broadcast_to(x[:, :1], (2, 3, 4))",
    "lib.broadcast_to(x[0, 0], (3, -1))",
    "lib.is_tensor(x)",
    "lib.is_tensor(x.tolist())",
    "lib.tril(x, diagonal=1)",
]  # fmt: skip

X = np.random.default_rng(0).standard_normal((2, 3, 4))


def _pieces(out):
    """A call's result as a flat list of tensors and plain values."""
    return [p for o in out for p in _pieces(o)] if isinstance(out, (tuple, list)) else [out]


def _run(code, lib, dtype):
    """The pieces of the call's result, and x's gradient after backward of sum(u_k * piece_k) over the pieces
    that require grad (the same random u_k for both libraries); zeros if none does."""
    x = lib.tensor(X.astype(dtype), requires_grad=True)
    pieces = _pieces(eval(code, {"lib": lib}, {"x": x}))
    rng = np.random.default_rng(1)
    terms = []
    for p in pieces:
        w = rng.standard_normal(tuple(p.shape)) if hasattr(p, "shape") else None
        if w is not None and p.requires_grad:
            w = w.astype(dtype)
            terms.append((p * (torch.from_numpy(w) if lib is torch else w)).sum())
    if terms:
        sum(terms[1:], terms[0]).backward()
    if x.grad is None:
        return pieces, np.zeros(X.shape, dtype)
    return pieces, x.grad.numpy() if lib is torch else np.asarray(x.grad)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("call", CALLS)
def test_call_matches_pytorch(call, dtype):
    ours, our_grad = _run(call, gf, dtype)
    theirs, their_grad = _run(call, torch, dtype)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    assert len(ours) == len(theirs)
    for p, q in zip(ours, theirs):
        if isinstance(q, torch.Tensor):
            a, b = np.asarray(p), q.detach().numpy()
            assert isinstance(p, gf.Tensor) and a.dtype == b.dtype and a.shape == b.shape
            assert_allclose(a, b, rtol=rtol, atol=1e-12 if dtype == np.float64 else 1e-6)
        else:
            assert p == q and type(p) is type(q)
    assert_allclose(our_grad, their_grad, rtol=rtol, atol=1e-12 if dtype == np.float64 else 1e-6)


@needs_torch
def test_prod_gradient_with_zeros_matches_pytorch():
    data = [[2.0, 0.0, 3.0, 5.0], [0.0, 2.0, 0.0, 4.0], [1.0, 2.0, 3.0, 4.0]]
    for call in (lambda t: t.prod(1), lambda t: t.prod(), lambda t: t[1:].prod(), lambda t: t.prod(0, True)):
        x, t = gf.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        call(x).sum().backward()
        call(t).sum().backward()
        assert_array_equal(x.grad, t.grad.numpy())


@needs_torch
def test_amax_splits_a_ties_gradient_evenly_as_pytorch():
    data = [[2.0, 2.0, 1.0], [3.0, 3.0, 3.0]]
    x, t = gf.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    (x.amax(1) * gf.tensor([1.0, 3.0])).sum().backward()
    (t.amax(1) * torch.tensor([1.0, 3.0])).sum().backward()
    assert_allclose(x.grad, [[0.5, 0.5, 0.0], [1.0, 1.0, 1.0]])
    assert_allclose(x.grad, t.grad.numpy())


@needs_torch
def test_the_type_string_is_pytorchs_under_gradflows_name():
    for ours, theirs in [
        (gf.zeros(2), torch.zeros(2)),
        (gf.zeros(2, dtype=gf.float64), torch.zeros(2, dtype=torch.float64)),
        (gf.zeros(2, dtype=gf.long), torch.zeros(2, dtype=torch.long)),
        (gf.zeros(2, dtype=gf.int), torch.zeros(2, dtype=torch.int)),
        (gf.zeros(2) > 0, torch.zeros(2) > 0),
    ]:
        assert ours.type() == theirs.type().replace("torch.", "gradflow.")


# --- by hand, without torch ----------------------------------------------------------------------


def test_prod_gradient_is_the_product_of_the_others_even_at_zeros():
    x = gf.tensor([[2.0, 0.0, 3.0], [0.0, 5.0, 0.0]], requires_grad=True)
    x.prod(dim=1).sum().backward()
    assert_array_equal(x.grad, [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0]])
    assert gf.tensor([[1, 2], [3, 4]]).prod(1).tolist() == [2, 12]
    assert gf.tensor([2.0, 3.0]).prod(dtype=gf.float64).dtype == np.float64


def test_steps_are_outside_the_graph_and_round_halves_to_even():
    x = gf.tensor([0.5, 1.5, 2.5, -0.5, -1.7], requires_grad=True)
    assert_array_equal(x.round().data, [0.0, 2.0, 2.0, -0.0, -2.0])
    assert_array_equal(x.floor().data, [0.0, 1.0, 2.0, -1.0, -2.0])
    assert_array_equal(x.ceil().data, [1.0, 2.0, 3.0, -0.0, -1.0])
    assert_array_equal(x.sign().data, [1.0, 1.0, 1.0, -1.0, -1.0])
    assert not any(s.requires_grad for s in (x.round(), x.floor(), x.ceil(), x.sign(), x.argsort(), x.eq(x)))
    (x.round() * x).sum().backward()  # the step is a constant factor: d/dx (round(x) x) = round(x) here
    assert_array_equal(x.grad, x.round().data)


def test_the_type_string_and_type_conversions():
    x = gf.tensor([1.5, -2.5])
    assert x.type() == "gradflow.FloatTensor" and x.double().type() == "gradflow.DoubleTensor"
    assert x.type("torch.LongTensor").tolist() == [1, -2] and x.type("gradflow.DoubleTensor").dtype == np.float64
    assert x.type(gf.float64).dtype == np.float64 and x.type(gf.float32) is x
    assert x.is_floating_point() and not x.long().is_floating_point()


def test_set_grad_enabled_is_a_call_a_context_and_a_decorator():
    assert gf.is_grad_enabled()
    gf.set_grad_enabled(False)
    try:
        assert not gf.is_grad_enabled() and not (gf.ones(2, requires_grad=True) * 2).requires_grad
    finally:
        gf.set_grad_enabled(True)
    with gf.set_grad_enabled(False):
        assert not gf.is_grad_enabled()
        with gf.set_grad_enabled(True):
            assert gf.is_grad_enabled()
        assert not gf.is_grad_enabled()
    assert gf.is_grad_enabled()

    @gf.set_grad_enabled(False)
    def evaluate():
        return gf.is_grad_enabled()

    assert gf.is_grad_enabled() and not evaluate() and gf.is_grad_enabled()
    with gf.no_grad():
        with gf.set_grad_enabled(True):
            assert (gf.ones(2, requires_grad=True) * 2).requires_grad
        assert not gf.is_grad_enabled()


def _blas_threads():
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


def test_set_num_threads_sets_numpys_blas_threads():
    before = gf.get_num_threads()
    assert before == _blas_threads()
    try:
        gf.set_num_threads(1)
        assert gf.get_num_threads() == 1 == _blas_threads()
        assert_allclose((gf.ones(3, 4) @ gf.ones(4, 2)).data, np.full((3, 2), 4.0))
    finally:
        gf.set_num_threads(before)
    assert gf.get_num_threads() == before


def test_bernoulli_and_normal_draw_from_the_seeded_generator():
    gf.manual_seed(3)
    first = gf.normal(2.0, 3.0, (20000,)), gf.bernoulli(gf.full((20000,), 0.3))
    gf.manual_seed(3)
    again = gf.normal(2.0, 3.0, (20000,)), gf.bernoulli(gf.full((20000,), 0.3))
    assert all(np.array_equal(a.data, b.data) for a, b in zip(first, again))
    draws, coins = first
    assert draws.dtype == np.float32 and abs(draws.data.mean() - 2.0) < 0.1 and abs(draws.data.std() - 3.0) < 0.1
    assert (
        coins.dtype == np.float32 and set(np.unique(coins.data)) == {0.0, 1.0} and abs(coins.data.mean() - 0.3) < 0.02
    )
    assert gf.bernoulli(gf.zeros(5, dtype=gf.float64), p=1.0).tolist() == [1.0] * 5
    means = gf.tensor([0.0, 100.0], dtype=gf.float64, requires_grad=True)
    draws = gf.normal(means, 0.0)
    assert draws.tolist() == [0.0, 100.0] and draws.dtype == np.float64 and not draws.requires_grad
    assert gf.normal(gf.zeros(3), gf.ones(3)).shape == (3,)
    g = gf.Generator().manual_seed(5)
    assert (
        gf.normal(0.0, 1.0, (3,), generator=g).tolist()
        == gf.normal(0.0, 1.0, (3,), generator=g.manual_seed(5)).tolist()
    )


def test_eye_tile_and_broadcast_to():
    assert_array_equal(gf.eye(2, 3).data, np.eye(2, 3)) and gf.eye(2).dtype == np.float32
    assert gf.tile(gf.tensor([[1, 2]]), (2,)).tolist() == [[1, 2, 1, 2]]
    x = gf.tensor([[1.0], [2.0]], requires_grad=True)
    gf.broadcast_to(x, (2, 3)).sum().backward()
    assert_array_equal(x.grad, [[3.0], [3.0]])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: gf.ones(2, 3, 4).mm(gf.ones(4, 2)), "mm: needs two matrices"),
        (lambda: gf.ones(2, 3).dot(gf.ones(3)), "dot: needs two vectors"),
        (lambda: gf.ones(3).dot(gf.ones(4)), "dot: needs two vectors of one length"),
        (lambda: gf.ones(2, 3, 4).t(), "t: needs at most 2 dimensions"),
        (lambda: gf.ones(2, 3).index_select(0, gf.tensor([0.0])), "index_select: index must be a vector of integers"),
        (lambda: gf.ones(2, 3).masked_select(gf.ones(2, 3)), "masked_select: mask must be boolean"),
        (lambda: gf.ones(2, 3).masked_select(gf.ones(4) > 0), "masked_select"),
        (lambda: gf.ones(2).div(2, rounding_mode="round"), "div: rounding_mode must be"),
        (lambda: gf.ones(2).type("torch.HalfTensor"), "type: unknown tensor type 'torch.HalfTensor'"),
        (lambda: gf.ones(2) & gf.tensor([True, False]), "&: needs bool or integer tensors, got float32 and bool"),
        (lambda: gf.set_num_threads(0), "set_num_threads: n must be a positive integer, got 0"),
        (lambda: gf.bernoulli(gf.tensor([0.5, 1.5])), "bernoulli: probabilities must lie in [0, 1]"),
        (lambda: gf.normal(0.0, -1.0, (2,)), "normal: std must be non-negative"),
        (lambda: gf.normal(0.0, 1.0), "normal: give size="),
        (lambda: gf.normal(gf.zeros(2), 1.0, (2,)), "normal: size= goes with a number mean and std"),
        (lambda: gf.ones(3).tril(), "tril: needs at least 2 dimensions"),
        (lambda: gf.ones(3, 3).tril(1, k=1), "tril: give k="),
        (lambda: gf.ones(2, 3).unbind(2), "unbind"),
    ],
)
def test_refusals_name_the_op_and_the_value(call, message):
    with pytest.raises((ValueError, TypeError, IndexError)) as e:
        call()
    assert message in str(e.value)


def _masks_and_writes(lib):
    """Annotated-Transformer and word-language-model idioms: a byte mask, ~, & | ^, mT, narrow, nonzero,
    finfo, scatter_ (label smoothing), index_fill_, the typed constructors, written as there."""
    keep = lib.triu(lib.ones(3, 3), diagonal=1).type(lib.uint8) == 0
    x = lib.arange(12.0).reshape(3, 4)
    padding = (lib.LongTensor([[5, 7, 0]]) != 0).unsqueeze(-2)
    both = keep.clone()
    both &= padding[0]
    smooth = lib.zeros(3, 5)
    smooth.fill_(0.025)
    smooth.scatter_(1, lib.tensor([[1], [3], [0]]), 0.9)
    smooth.index_fill_(1, lib.tensor([4]), 0.0)
    z = lib.zeros(3, 3)
    z.scatter_(0, lib.tensor([[0, 1, 2], [2, 0, 1]]), lib.arange(6.0).reshape(2, 3))
    return [
        (~keep).long(),
        padding & keep.type_as(padding.data),
        both,
        keep | (x[:, :3] > 6),
        True ^ keep,
        lib.LongTensor([[4, 5]]) & 6,
        lib.FloatTensor([[0, 0.2, 0.7]]),
        lib.FloatTensor(2, 3).fill_(0.5),
        x.type(lib.LongTensor),
        x.masked_fill(~keep[:, :3].repeat(1, 2)[:, :4], float(lib.finfo(lib.float32).min)),
        x.mT,
        x.narrow(1, 1, 2),
        lib.nonzero(x > 8),
        smooth,
        z,
    ]


@needs_torch
def test_masks_views_and_scatter_writes_match_pytorch():
    for ours, theirs in zip(_masks_and_writes(gf), _masks_and_writes(torch)):
        assert_array_equal(ours.data, theirs.numpy())
        assert ours.dtype == np.dtype(str(theirs.dtype).replace("torch.", ""))


def test_typed_constructors_make_and_recognise_their_dtype():
    assert gf.LongTensor([[1, 2]]).dtype == gf.int64 and gf.FloatTensor(2, 3).shape == (2, 3)
    assert gf.LongTensor().shape == (0,) and gf.BoolTensor([1, 0]).tolist() == [True, False]
    assert isinstance(gf.zeros(2, dtype=gf.long), gf.LongTensor) and not isinstance(gf.zeros(2), gf.LongTensor)
    assert isinstance(gf.zeros(2), gf.FloatTensor) and gf.ones(2).type(gf.DoubleTensor).dtype == gf.float64


def test_scatter_into_an_output_in_the_graph_is_recorded():
    x = gf.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    y = x * 2
    y.scatter_(1, gf.tensor([[2]]), x[:, :1] * 10)  # y = [2, 4, 10 x0]
    y.sum().backward()
    assert_array_equal(y.data, [[2.0, 4.0, 10.0]]) and assert_array_equal(x.grad.data, [[12.0, 2.0, 0.0]])


def test_modules_as_pytorch_builds_and_walks_them():
    from collections import OrderedDict

    net = gf.nn.Sequential(OrderedDict([("fc", gf.nn.Linear(2, 3)), ("act", gf.nn.ReLU())]))
    assert net.fc is net[0] and isinstance(net.act, gf.nn.ReLU)
    first = next(net.parameters())  # a generator, as PyTorch's
    assert first is net.fc.weight and len(list(net.parameters())) == 2
    first.data = first.data - 0.5 * gf.ones(3, 2)  # a tensor assigned to .data: its values
    assert isinstance(first.data, np.ndarray) and net(gf.ones(1, 2)).shape == (1, 3)


OPTIMIZERS = {  # PyTorch's signatures, the switches that change the numbers among them
    "SGD dampening": lambda lib, p: lib.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1),
    "SGD nesterov maximize": lambda lib, p: lib.optim.SGD(
        p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True
    ),
    "Adam amsgrad foreach": lambda lib, p: lib.optim.Adam(p, lr=0.1, amsgrad=True, foreach=False),
    "AdamW amsgrad fused maximize": lambda lib, p: lib.optim.AdamW(p, lr=0.1, amsgrad=True, fused=False, maximize=True),
    "RMSprop": lambda lib, p: lib.optim.RMSprop(p, lr=0.01),
    "RMSprop centered momentum decay": lambda lib, p: lib.optim.RMSprop(
        p, lr=0.01, alpha=0.9, momentum=0.8, centered=True, weight_decay=0.01
    ),
}


def _four_steps(lib, make):
    rng = np.random.default_rng(0)
    w = lib.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    x = lib.tensor(rng.standard_normal((5, 3)))
    opt = make(lib, [w])
    for _ in range(4):
        opt.zero_grad()
        ((x @ w).tanh() ** 2).sum().backward()
        opt.step()
    return w.detach().numpy()


@needs_torch
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_options_match_pytorch(name):
    assert_allclose(_four_steps(gf, OPTIMIZERS[name]), _four_steps(torch, OPTIMIZERS[name]), rtol=1e-12, atol=1e-14)


def test_an_optimizer_step_recorded_in_the_graph_is_refused():
    with pytest.raises(ValueError, match=r"Adam: differentiable=True is not supported"):
        gf.optim.Adam([gf.zeros(2, requires_grad=True)], differentiable=True)
    with pytest.raises(ValueError, match=r"SGD: nesterov=True needs momentum > 0 and dampening 0, got 0.0 and 0.0"):
        gf.optim.SGD([gf.zeros(2, requires_grad=True)], nesterov=True)


@needs_torch
def test_index_fill_and_scatter_out_of_place_match_pytorch_with_gradients():
    def run(lib):
        x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=lib.float64, requires_grad=True)
        y = x.index_fill(1, lib.tensor([0]), -1.0).scatter(1, lib.tensor([[2], [1]]), x[:, :1] * 10)
        (y * y).sum().backward()
        return np.array(y.tolist()), np.array(x.grad.tolist())

    for ours, theirs in zip(run(gf), run(torch)):
        assert_array_equal(ours, theirs)


# Ops on a bool tensor (a mask), each keeping the dtype PyTorch gives: a mask made by triu stays a mask
BOOL_CALLS = [
    "x.triu()", "x.triu(1)", "x.tril()", "x.tril(-1)", "lib.triu(x)", "lib.tril(x, 1)", "~x.triu()", "x.flip(0)",
    "x.roll(1, 0)", "x.roll(1)", "x.t()", "x.transpose(0, 1)", "x.reshape(9)", "x.flatten()", "x.unsqueeze(0)",
    "x.expand(2, 3, 3)", "x.repeat(2, 1)", "lib.cat([x, x])", "lib.stack([x, x])", "x.clone()", "x[0]", "x[:, 1:]",
    "x.masked_fill(x, False)", "lib.where(x, x, x)", "lib.zeros_like(x)", "lib.full_like(x, 1)", "x.sum()", "x.int()",
]  # fmt: skip
MASK = [[True, False, True], [False, True, True], [True, True, False]]


@needs_torch
@pytest.mark.parametrize("call", BOOL_CALLS)
def test_an_op_on_a_bool_tensor_gives_pytorchs_dtype(call):
    dtypes = []
    for lib in (gf, torch):
        x = lib.tensor(MASK)  # noqa: F841 (read by the call)
        dtypes.append(str(eval(call).dtype).removeprefix("torch."))
    assert dtypes[0] == dtypes[1], call


def test_a_mask_made_by_triu_stays_a_mask():
    """triu/tril of a bool tensor is bool (masked_fill keeps the tensor's dtype), so it indexes as a mask
    and ~ negates it; an int tensor filled with 1.5 takes 1, as PyTorch casts the value to the tensor's dtype."""
    above = gf.ones(3, 3, dtype=gf.bool).triu(1)
    assert above.dtype == np.bool_ and (~above).sum().item() == 6
    assert gf.arange(9.0).reshape(3, 3)[above].tolist() == [1.0, 2.0, 5.0]
    filled = gf.arange(6).reshape(2, 3).masked_fill(gf.tensor([[True, False, False], [False, False, True]]), 1.5)
    assert filled.dtype == np.int64 and filled.tolist() == [[1, 1, 2], [3, 4, 1]]


def test_assignment_drops_a_values_leading_axes_of_size_one():
    """logits[i] = model(X[[i]]): a (1, 27) value into a (27,) row, as PyTorch (and numpy) assign it; its
    gradient reaches the value's inputs; an extra axis of another size is still refused in one line."""
    w = gf.ones(2, 4, requires_grad=True)
    rows = gf.zeros(3, 4)
    rows[1] = (w * 3).sum(axis=0, keepdims=True)  # (1, 4) into a row
    rows[0:2] = rows[0:2] + gf.ones(1, 2, 4)  # (1, 2, 4) into two rows
    assert rows.tolist() == [[1.0] * 4, [7.0] * 4, [0.0] * 4]
    rows.sum().backward()
    assert w.grad.tolist() == [[3.0] * 4] * 2  # d(sum)/dw through row 1: 3 per element
    with pytest.raises(ValueError, match=r"setitem: a value of shape \(2, 4\) does not fit into shape \(4,\)"):
        rows[2] = gf.ones(2, 4)


@needs_torch
@pytest.mark.parametrize("options", [{"bins": 10}, {"bins": 10, "density": True}, {"bins": 5, "range": (-1.0, 1.0)}])
def test_histogram_matches_pytorch(options):
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    ours, theirs = gf.histogram(gf.tensor(x), **options), torch.histogram(torch.tensor(x), **options)
    assert ours.hist.dtype == np.float32 and ours.bin_edges.shape == tuple(theirs.bin_edges.shape)
    assert_allclose(ours.hist.numpy(), theirs.hist.numpy(), rtol=1e-6)
    assert_allclose(ours.bin_edges.numpy(), theirs.bin_edges.numpy(), rtol=1e-6)


def test_what_real_programs_call_beside_the_model():
    """get_worker_info in an IterableDataset (None: no worker processes), LSTM.flatten_parameters (nothing
    to pack), a histogram with weights by hand, and torch.onnx, importable, whose export refuses in one line."""
    assert gf.utils.data.get_worker_info() is None
    lstm = gf.nn.LSTM(3, 4)
    before = [p.data.copy() for p in lstm.parameters()]
    assert lstm.flatten_parameters() is None and all(
        np.array_equal(a, p.data) for a, p in zip(before, lstm.parameters())
    )
    hist, edges = gf.histogram(gf.tensor([0.0, 1.0, 1.0, 3.0]), bins=3, weight=gf.tensor([1.0, 2.0, 2.0, 0.5]))
    assert hist.tolist() == [1.0, 4.0, 0.5] and edges.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert gf.onnx.is_in_onnx_export() is False
    with pytest.raises(NotImplementedError, match=r"^torch.onnx.export: gradflow does not write ONNX files"):
        gf.onnx.export(lstm, gf.zeros(2, 1, 3), "model.onnx")
