"""PyTorch's spellings on Tensor and at gradflow's top level: each idiom beside its PyTorch twin.

IDIOMS is the table: a name, the call in gradflow, the same call in PyTorch. Where torch is installed
(pip install torch==2.13.0) each row is run on both and the values, dtypes and gradients must agree;
without torch those rows skip, unless GRADFLOW_REQUIRE_TORCH=1 (CI sets it), which makes the missing
import a failure. The tests after the table need no torch: values worked out by hand, gradients
checked by finite differences, and every refusal's message.
"""

import math
import os
import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import gradflow as gf

try:
    import torch
except ImportError:
    if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
        raise
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (pip install torch==2.13.0)")


def leaf(data, dtype=np.float64):
    return gf.tensor(np.asarray(data, dtype=dtype), requires_grad=True)


def masked_assignment(y):
    y[y < 0] = 0.0
    return y


def row_assignment(y):
    y[0, 1] = y[1, 2] * 2
    return y


def augmented_assignments(y):
    """y += ..., y -= ..., y *= ..., y /= ... change y itself, as PyTorch's do."""
    same = y
    y += 1.5
    y -= 0.5 * same
    y *= 3
    y /= 2
    assert y is same
    return same


# Each row: the call in gradflow, the same call in PyTorch. x is a float64 tensor of shape (2, 3, 4)
# with distinct values that requires grad; y is a copy of it outside the graph, for the in-place forms.
IDIOMS = [
    # reductions: dim= and keepdim=, and positional axes
    ("x.sum(dim=1)",                              "x.sum(dim=1)"),
    ("x.sum(1)",                                  "x.sum(1)"),
    ("x.sum(dim=(0, 2), keepdim=True)",           "x.sum(dim=(0, 2), keepdim=True)"),
    ("x.mean(-1, keepdim=True)",                  "x.mean(-1, keepdim=True)"),
    ("x.var(dim=1)",                              "x.var(dim=1)"),
    ("x.var(dim=-1, unbiased=False)",             "x.var(dim=-1, unbiased=False)"),
    ("x.var(dim=0, correction=0, keepdim=True)",  "x.var(dim=0, correction=0, keepdim=True)"),
    ("x.max()",                                   "x.max()"),
    ("x.max(dim=1)",                              "x.max(dim=1)"),
    ("x.max(dim=-1, keepdim=True)",               "x.max(dim=-1, keepdim=True)"),
    ("x.min(dim=0)",                              "x.min(dim=0)"),
    ("x.max(dim=1).values",                       "x.max(dim=1).values"),
    ("x.min(dim=2).indices",                      "x.min(dim=2).indices"),
    ("x.logsumexp(dim=2)",                        "x.logsumexp(dim=2)"),
    ("x.argmax()",                                "x.argmax()"),
    ("x.argmax(dim=1)",                           "x.argmax(dim=1)"),
    ("x.argmin(dim=-1, keepdim=True)",            "x.argmin(dim=-1, keepdim=True)"),
    ("gf.argmax(x, dim=2)",                       "torch.argmax(x, dim=2)"),
    ("x.softmax(dim=1)",                          "x.softmax(dim=1)"),
    ("x.log_softmax(dim=-1)",                     "x.log_softmax(dim=-1)"),
    ("x.topk(2)",                                 "x.topk(2)"),
    ("x.topk(2, dim=1, largest=False)",           "x.topk(2, dim=1, largest=False)"),
    ("gf.topk(x, 3)",                             "torch.topk(x, 3)"),
    ("gf.topk(x, 2, dim=0)[0]",                   "torch.topk(x, 2, dim=0)[0]"),
    # shape
    ("x.size()",                                  "x.size()"),
    ("x.size(-1)",                                "x.size(-1)"),
    ("x.dim()",                                   "x.dim()"),
    ("x.numel()",                                 "x.numel()"),
    ("gf.numel(x)",                               "torch.numel(x)"),
    ("x.view(2, 3, -1)",                          "x.view(2, 3, -1)"),
    ("x.view((6, 4))",                            "x.view((6, 4))"),
    ("x.view(-1)",                                "x.view(-1)"),
    ("x.transpose(1, 2).contiguous().view(2, -1)", "x.transpose(1, 2).contiguous().view(2, -1)"),
    ("x.transpose(dim0=0, dim1=2)",               "x.transpose(dim0=0, dim1=2)"),
    ("x.flatten()",                               "x.flatten()"),
    ("x.flatten(1)",                              "x.flatten(1)"),
    ("x.flatten(0, 1)",                           "x.flatten(0, 1)"),
    ("x.unsqueeze(dim=1)",                        "x.unsqueeze(dim=1)"),
    ("x[:, :1].squeeze(dim=1)",                   "x[:, :1].squeeze(dim=1)"),
    ("x.split(3, dim=2)",                         "x.split(3, dim=2)"),
    ("x.split([1, 2], dim=1)",                    "x.split([1, 2], dim=1)"),
    ("gf.split(x, 1)",                            "torch.split(x, 1)"),
    ("x.chunk(3, dim=2)",                         "x.chunk(3, dim=2)"),
    ("x.chunk(2, 1)",                             "x.chunk(2, 1)"),
    ("gf.cat([x, 2 * x], dim=1)",                 "torch.cat([x, 2 * x], dim=1)"),
    ("gf.cat((x, x), 2)",                         "torch.cat((x, x), 2)"),
    ("gf.stack([x, x.exp()], dim=-1)",            "torch.stack([x, x.exp()], dim=-1)"),
    ("x.repeat(2, 1, 3)",                         "x.repeat(2, 1, 3)"),
    ("x[0].repeat(2, 1, 2)",                      "x[0].repeat(2, 1, 2)"),
    ("x.clone() * x",                             "x.clone() * x"),
    ("x.clamp(-0.5, 0.5)",                        "x.clamp(-0.5, 0.5)"),
    ("x.tolist()",                                "x.tolist()"),
    # dtypes
    ("x.float()",                                 "x.float()"),
    ("x.float().double() * x",                    "x.float().double() * x"),
    ("(x * 3).long()",                            "(x * 3).long()"),
    ("(x * 3).int()",                             "(x * 3).int()"),
    ("(x > 0).float().bool()",                    "(x > 0).float().bool()"),
    ("(x > 0).long()",                            "(x > 0).long()"),
    ("x.to(gf.float32)",                          "x.to(torch.float32)"),
    ("x.to('cpu')",                               "x.to('cpu')"),
    ("x.to(device='cpu', dtype=gf.float32)",      "x.to(device='cpu', dtype=torch.float32)"),
    ("x.float().type_as(x)",                      "x.float().type_as(x)"),
    ("gf.zeros(2, 3, dtype=gf.long)",             "torch.zeros(2, 3, dtype=torch.long)"),
    ("gf.ones(2, dtype=gf.int)",                  "torch.ones(2, dtype=torch.int)"),
    ("gf.ones(2, dtype=gf.int32)",                "torch.ones(2, dtype=torch.int32)"),
    ("gf.ones(2, dtype=gf.float)",                "torch.ones(2, dtype=torch.float)"),
    ("gf.ones(2, dtype=gf.double)",               "torch.ones(2, dtype=torch.double)"),
    ("gf.ones(2, dtype=gf.float64)",              "torch.ones(2, dtype=torch.float64)"),
    ("gf.tensor([1, 0], dtype=gf.bool)",          "torch.tensor([1, 0], dtype=torch.bool)"),
    ("gf.tensor([3], dtype=gf.int64)",            "torch.tensor([3], dtype=torch.int64)"),
    ("gf.arange(0, 4, dtype=gf.long)",            "torch.arange(0, 4, dtype=torch.long)"),
    # in place, on y
    ("y.add_(x.detach(), alpha=2)",               "y.add_(x.detach(), alpha=2)"),
    ("y.sub_(1.5)",                               "y.sub_(1.5)"),
    ("y.mul_(2).div_(4)",                         "y.mul_(2).div_(4)"),
    ("y.zero_()",                                 "y.zero_()"),
    ("y.fill_(3.0)",                              "y.fill_(3.0)"),
    ("y.copy_(2 * x.detach())",                   "y.copy_(2 * x.detach())"),
    ("y.copy_(x.detach()[1, 2])",                 "y.copy_(x.detach()[1, 2])"),
    ("y.clamp_(-0.1, 0.1)",                       "y.clamp_(-0.1, 0.1)"),
    ("y.masked_fill_(y > 0, 0.0)",                "y.masked_fill_(y > 0, 0.0)"),
    ("masked_assignment(y)",                      "masked_assignment(y)"),
    ("row_assignment(y)",                         "row_assignment(y)"),
    ("augmented_assignments(y)",                  "augmented_assignments(y)"),
    # elementwise functions, running sums, sorting, picking along an axis
    ("x.sin()",                                   "x.sin()"),
    ("x.cos() * x",                               "x.cos() * x"),
    ("x.pow(2)",                                  "x.pow(2)"),
    ("x.abs().pow(x)",                            "x.abs().pow(x)"),
    ("x.cumsum(dim=1)",                           "x.cumsum(dim=1)"),
    ("x.cumsum(-1)",                              "x.cumsum(-1)"),
    ("(x > 0).long().cumsum(2)",                  "(x > 0).long().cumsum(2)"),
    ("x.sort()",                                  "x.sort()"),
    ("x.sort(dim=1, descending=True)",            "x.sort(dim=1, descending=True)"),
    ("x.sort(0).values",                          "x.sort(0).values"),
    ("x.gather(2, gf.tensor(GATHER_INDEX))",      "x.gather(2, torch.tensor(GATHER_INDEX))"),
    ("x.gather(1, gf.zeros(2, 1, 4, dtype=gf.long))", "x.gather(1, torch.zeros(2, 1, 4, dtype=torch.long))"),
    ("x.scatter_add(2, gf.tensor(GATHER_INDEX), 2 * x[..., :2])",
     "x.scatter_add(2, torch.tensor(GATHER_INDEX), 2 * x[..., :2])"),
    ("gf.zeros(2, 3, 5, dtype=gf.double).scatter_add(-1, gf.tensor(GATHER_INDEX), x[..., 1:3])",
     "torch.zeros(2, 3, 5, dtype=torch.double).scatter_add(-1, torch.tensor(GATHER_INDEX), x[..., 1:3])"),
    ("x.flip(0)",                                 "x.flip(0)"),
    ("x.flip(dims=(1, 2))",                       "x.flip(dims=(1, 2))"),
    ("x.roll(1, 2)",                              "x.roll(1, 2)"),
    ("x.roll(shifts=(1, -2), dims=(0, 2))",       "x.roll(shifts=(1, -2), dims=(0, 2))"),
    ("x.roll(5)",                                 "x.roll(5)"),
    ("x.nelement()",                              "x.nelement()"),
    ("gf.einsum('bij,bjk->bik', x, x.transpose(1, 2))", "torch.einsum('bij,bjk->bik', x, x.transpose(1, 2))"),
    ("gf.einsum('ij,j->i', x[0], x[1, 0])",       "torch.einsum('ij,j->i', x[0], x[1, 0])"),
    ("gf.einsum('bqd,bkd->bqk', x, 2 * x)",       "torch.einsum('bqd,bkd->bqk', x, 2 * x)"),
    ("gf.einsum('ijk->', x)",                     "torch.einsum('ijk->', x)"),
    ("gf.einsum('ij,kj', x[0], x[1])",            "torch.einsum('ij,kj', x[0], x[1])"),
    # PyTorch's free functions: torch.X(x, ...) is x.X(...)
    ("gf.sin(x) + gf.cos(x)",                     "torch.sin(x) + torch.cos(x)"),
    ("gf.tanh(x) * gf.sigmoid(x)",                "torch.tanh(x) * torch.sigmoid(x)"),
    ("gf.exp(x) + gf.relu(x) + gf.neg(x)",        "torch.exp(x) + torch.relu(x) + torch.neg(x)"),
    ("gf.log(gf.abs(x)) + gf.sqrt(x.abs())",      "torch.log(torch.abs(x)) + torch.sqrt(x.abs())"),
    ("gf.rsqrt(x * x + 1)",                       "torch.rsqrt(x * x + 1)"),
    ("gf.pow(x, 3)",                              "torch.pow(x, 3)"),
    ("gf.pow(2, x)",                              "torch.pow(2, x)"),
    ("gf.sum(x)",                                 "torch.sum(x)"),
    ("gf.sum(x, dim=1)",                          "torch.sum(x, dim=1)"),
    ("gf.mean(x, -1, keepdim=True)",              "torch.mean(x, -1, keepdim=True)"),
    ("gf.var(x, dim=0)",                          "torch.var(x, dim=0)"),
    ("gf.max(x)",                                 "torch.max(x)"),
    ("gf.max(x, dim=1)",                          "torch.max(x, dim=1)"),
    ("gf.max(x, x.flip(0))",                      "torch.max(x, x.flip(0))"),
    ("gf.min(x, dim=-1, keepdim=True)",           "torch.min(x, dim=-1, keepdim=True)"),
    ("gf.logsumexp(x, dim=2)",                    "torch.logsumexp(x, dim=2)"),
    ("gf.softmax(x, dim=-1)",                     "torch.softmax(x, dim=-1)"),
    ("gf.log_softmax(x, 1)",                      "torch.log_softmax(x, 1)"),
    ("gf.cumsum(x, 0)",                           "torch.cumsum(x, 0)"),
    ("gf.sort(x, 1, descending=True)",            "torch.sort(x, 1, descending=True)"),
    ("gf.gather(x, 2, gf.tensor(GATHER_INDEX))",  "torch.gather(x, 2, torch.tensor(GATHER_INDEX))"),
    ("gf.flip(x, [0, 2])",                        "torch.flip(x, [0, 2])"),
    ("gf.roll(x, 2, 1)",                          "torch.roll(x, 2, 1)"),
    ("gf.clamp(x, -0.5, 0.5)",                    "torch.clamp(x, -0.5, 0.5)"),
    ("gf.clip(x, min=0.0)",                       "torch.clip(x, min=0.0)"),
    ("gf.reshape(x, (6, 4))",                     "torch.reshape(x, (6, 4))"),
    ("gf.transpose(x, 0, 1)",                     "torch.transpose(x, 0, 1)"),
    ("gf.permute(x, (2, 0, 1))",                  "torch.permute(x, (2, 0, 1))"),
    ("gf.squeeze(x[:, :1], 1)",                   "torch.squeeze(x[:, :1], 1)"),
    ("gf.unsqueeze(x, 0)",                        "torch.unsqueeze(x, 0)"),
    ("gf.flatten(x, 1)",                          "torch.flatten(x, 1)"),
    ("gf.tril(x, diagonal=-1)",                   "torch.tril(x, diagonal=-1)"),
    ("gf.chunk(x, 2, dim=2)",                     "torch.chunk(x, 2, dim=2)"),
    ("gf.clone(x) * x",                           "torch.clone(x) * x"),
    ("gf.masked_fill(x, x > 0.5, 0.0)",           "torch.masked_fill(x, x > 0.5, 0.0)"),
    ("x.std(dim=1)",                              "x.std(dim=1)"),
    ("x.std(dim=(0, 1), keepdim=True)",           "x.std(dim=(0, 1), keepdim=True)"),
    ("gf.std(x, dim=-1, unbiased=False)",         "torch.std(x, dim=-1, unbiased=False)"),
    ("gf.bmm(x, x.transpose(1, 2))",              "torch.bmm(x, x.transpose(1, 2))"),
    ("gf.outer(x[0, 0], x[1, 1, :3])",            "torch.outer(x[0, 0], x[1, 1, :3])"),
    ("gf.allclose(x, x + 1e-9)",                  "torch.allclose(x, x + 1e-9)"),
    ("gf.allclose(x, x.flip(0))",                 "torch.allclose(x, x.flip(0))"),
    ("(x * 2).detach().requires_grad_()",         "(x * 2).detach().requires_grad_()"),
    ("gf.triu(x[0], 1)",                          "torch.triu(x[0], 1)"),
    # factories and constants
    ("gf.linspace(0, 1, 7)",                      "torch.linspace(0, 1, 7)"),
    ("gf.linspace(-3.3, 2.9, 100)",               "torch.linspace(-3.3, 2.9, 100)"),
    ("gf.linspace(2, -7, 1000, dtype=gf.float64)", "torch.linspace(2, -7, 1000, dtype=torch.float64)"),
    ("gf.linspace(0, 1, 1)",                      "torch.linspace(0, 1, 1)"),
    ("x * gf.linspace(-1, 2, 4, dtype=gf.double)", "x * torch.linspace(-1, 2, 4, dtype=torch.double)"),
    ("gf.pi * x + gf.e",                          "torch.pi * x + torch.e"),
    ("x.masked_fill(x > 1, -gf.inf).softmax(-1)", "x.masked_fill(x > 1, -torch.inf).softmax(-1)"),
    # a 0-d tensor as an index and in a format string
    ("list(range(30))[x.argmax()]",               "list(range(30))[x.argmax()]"),
    ("range(24)[x.argmin()]",                     "range(24)[x.argmin()]"),
    ("f'{x.sum():.4f} {x[0, 1, 2]:8.3e}'",        "f'{x.sum():.4f} {x[0, 1, 2]:8.3e}'"),
    ("f'{x[1, 0, 3]}'",                           "f'{x[1, 0, 3]}'"),
    ("f'{x.argmax():d}'",                         "f'{x.argmax():d}'"),
]  # fmt: skip

# gather's and scatter_add's index into axis 2 (size 4) of x, with repeats: (2, 3, 2)
GATHER_INDEX = [[[0, 3], [1, 1], [2, 0]], [[3, 3], [0, 1], [1, 2]]]


def _call(code, lib, x):
    """Evaluate a row's call with x, y = a copy of x outside the graph, and lib's names in scope."""
    names = {"gf": gf, "GATHER_INDEX": GATHER_INDEX} if lib is gf else {"torch": torch, "GATHER_INDEX": GATHER_INDEX}
    names |= {f.__name__: f for f in (masked_assignment, row_assignment, augmented_assignments)}
    return eval(code, names, {"x": x, "y": x.detach().clone()})


def _pieces(out):
    """An idiom's result as a flat list: tensors, numbers, shapes and lists of numbers."""
    if isinstance(out, (tuple, list)) and out and not isinstance(out[0], (int, float, bool, list)):
        return [p for o in out for p in _pieces(o)]
    return [out]


def _run(code, lib, x):
    """The pieces of the call's result, and x's gradient after backward of sum(u_k * piece_k) over the
    pieces in the graph (the same random u_k for both libraries)."""
    pieces = _pieces(_call(code, lib, x))
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(tuple(p.shape)) if hasattr(p, "shape") else None for p in pieces]
    weights = [torch.from_numpy(w) if lib is torch and w is not None else w for w in weights]
    terms = [(p * w).sum() for p, w in zip(pieces, weights) if w is not None and p.requires_grad]
    if terms:
        sum(terms[1:], terms[0]).backward()
    return pieces, x.grad


def _array(p, lib):
    if lib == "torch":
        return p.detach().numpy() if isinstance(p, torch.Tensor) else p
    return p.data if isinstance(p, gf.Tensor) else p


X = np.random.default_rng(0).standard_normal((2, 3, 4))


@needs_torch
@pytest.mark.parametrize("ours, theirs", IDIOMS, ids=[ours for ours, _ in IDIOMS])
def test_idiom_matches_pytorch(ours, theirs):
    pieces, grad = _run(ours, gf, gf.tensor(X.copy(), requires_grad=True))
    their_pieces, their_grad = _run(theirs, torch, torch.tensor(X.copy(), requires_grad=True))
    assert len(pieces) == len(their_pieces)
    for p, q in zip(pieces, their_pieces):
        a, b = _array(p, "gradflow"), _array(q, "torch")
        if isinstance(b, np.ndarray):
            assert isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
            assert_allclose(a, b, rtol=1e-6 if a.dtype == np.float32 else 1e-12, atol=1e-12)
            assert p.requires_grad == q.requires_grad
        else:
            assert a == b and type(a) is type(b) or (isinstance(b, tuple) and tuple(a) == b)
    if their_grad is None:
        assert grad is None
    else:
        assert_allclose(grad, their_grad.numpy(), rtol=1e-6, atol=1e-12)


@needs_torch
def test_from_numpy_shares_memory_as_pytorchs_does():
    a = np.arange(3.0)
    t, ref = gf.from_numpy(a), torch.from_numpy(a.copy())
    a[0] = 7.0
    ref.numpy()[0] = 7.0
    assert t.tolist() == ref.tolist() == [7.0, 1.0, 2.0]
    assert t.dtype == np.float64


# --- reductions: values and gradients by hand --------------------------------------------------

M = [[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]]


def test_max_and_min_with_dim_give_values_and_indices():
    values, indices = leaf(M).max(dim=1)
    assert_array_equal(values.data, [5.0, 6.0])
    assert_array_equal(indices.data, [1, 2])
    assert indices.dtype == np.int64 and not indices.requires_grad
    kept = leaf(M).min(dim=0, keepdim=True)
    assert_array_equal(kept.values.data, [[1.0, 2.0, 3.0]])
    assert_array_equal(kept.indices.data, [[0, 1, 0]])


def test_max_with_numpy_keywords_gives_values_only_and_positional_gives_values_and_indices():
    """The one rule: numpy's keywords mean numpy's call, any other call PyTorch's."""
    result = leaf(M).max(axis=1)
    assert isinstance(result, gf.Tensor)
    assert_array_equal(result.data, [5.0, 6.0])
    assert_array_equal(leaf(M).min(axis=1, keepdim=True).data, [[1.0], [2.0]])
    values, indices = leaf(M).max(1)
    assert_array_equal(values.data, [5.0, 6.0]) and assert_array_equal(indices.data, [1, 2])
    values, indices = leaf(M).min(0, True)
    assert values.shape == (1, 3) and indices.dtype == np.int64
    assert leaf(M).max().item() == 6.0
    assert_array_equal(gf.tensor(M).max(gf.tensor(np.full((2, 3), 3.0))).data, np.maximum(M, 3.0))
    if torch is not None:
        t = torch.tensor(M)
        assert_array_equal(leaf(M).max(1).indices.data, t.max(1).indices.numpy())
        assert_array_equal(leaf(M).min(0, True).values.data, t.min(0, True).values.numpy())


def test_a_tie_under_dim_sends_the_gradient_to_the_first_maximum_and_under_axis_splits_it():
    x = leaf([[2.0, 2.0, 1.0]])
    x.max(dim=1).values.sum().backward()
    assert_array_equal(x.grad, [[1.0, 0.0, 0.0]])
    y = leaf([[2.0, 2.0, 1.0]])
    y.max(axis=1).sum().backward()
    assert_array_equal(y.grad, [[0.5, 0.5, 0.0]])


def test_argmax_and_argmin():
    x = gf.tensor(M)
    assert x.argmax().item() == 5 and x.argmin().item() == 0
    assert_array_equal(x.argmax(dim=1).data, [1, 2])
    assert_array_equal(gf.argmin(x, 0).data, [0, 1, 0])
    assert_array_equal(gf.argmax(x, axis=1, keepdims=True).data, [[1], [2]])
    assert x.argmax(dim=1).dtype == np.int64


def test_topk_values_indices_and_gradient():
    x = leaf([3.0, 1.0, 4.0, 1.0, 5.0])
    values, indices = x.topk(2)
    assert_array_equal(values.data, [5.0, 4.0])
    assert_array_equal(indices.data, [4, 2])
    values.sum().backward()
    assert_array_equal(x.grad, [0.0, 0.0, 1.0, 0.0, 1.0])
    smallest = gf.topk(x, 2, largest=False)
    assert_array_equal(smallest.values.data, [1.0, 1.0])
    assert_array_equal(smallest.indices.data, [1, 3])  # ties in index order
    assert x.topk(0).values.shape == (0,)


def test_topk_along_dim_0_of_a_matrix():
    values, indices = gf.tensor(M).topk(1, dim=0)
    assert_array_equal(values.data, [[4.0, 5.0, 6.0]])
    assert_array_equal(indices.data, [[1, 0, 1]])


def test_var_is_unbiased_as_pytorch_unless_numpy_keywords_are_used():
    x = [1.0, 2.0, 3.0, 4.0]  # mean 2.5, sum of squared deviations 5: 5/3 unbiased, 5/4 population
    for unbiased in (lambda t: t.var(), lambda t: t.var(0), lambda t: t.var(dim=0), lambda t: t.var(unbiased=True)):
        assert unbiased(gf.tensor(x)).item() == pytest.approx(5 / 3)
    for population in (
        lambda t: t.var(axis=0),
        lambda t: t.var(axis=None),
        lambda t: t.var(ddof=0),
        lambda t: t.var(0, False),
        lambda t: t.var(False),
        lambda t: t.var(dim=0, correction=0),
        lambda t: t.var(dim=0, unbiased=False),
    ):
        assert population(gf.tensor(x)).item() == 1.25
    assert gf.tensor(x).var(axis=0, ddof=1).item() == pytest.approx(5 / 3)
    assert gf.tensor([x]).var(1, True, True).shape == (1, 1)
    assert gf.tensor(x).std().item() == pytest.approx(math.sqrt(5 / 3))
    if torch is not None:
        t = torch.tensor([x, x[::-1]], dtype=torch.float64)
        ours = gf.tensor([x, x[::-1]], dtype=gf.float64)
        for call in (lambda a: a.var(), lambda a: a.var(1), lambda a: a.var(0, False), lambda a: a.std(1, True, True)):
            assert_allclose(call(ours).data, call(t).numpy(), rtol=1e-15)


def test_unbiased_var_gradient_by_hand():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    x.var(dim=0).backward()
    assert_allclose(x.grad, 2 * (np.array([1.0, 2.0, 3.0, 4.0]) - 2.5) / 3, rtol=1e-15)


def test_reductions_keep_working_positionally():
    x = gf.tensor(np.arange(24.0).reshape(2, 3, 4))
    assert x.sum(1).shape == (2, 4) and x.mean(-1, keepdim=True).shape == (2, 3, 1)
    assert x.sum(1, True).shape == (2, 1, 4) and x.logsumexp(0).shape == (3, 4)
    assert_array_equal(x.sum(dim=[0, 2]).data, np.arange(24.0).reshape(2, 3, 4).sum(axis=(0, 2)))


# --- shape ----------------------------------------------------------------------------------------


def test_size_is_the_shape_and_size_d_one_length():
    x = gf.zeros(2, 3)
    assert x.size() == (2, 3) and isinstance(x.size(), tuple)
    assert x.size(0) == 2 and x.size(-1) == 3 and x.size(-2) == 2
    assert x.numel() == 6 and gf.numel(x) == 6 and x.dim() == 2 and gf.tensor(1.0).size() == ()


@pytest.mark.parametrize("d", [2, -3])
def test_size_of_an_axis_out_of_range(d):
    with pytest.raises(
        ValueError, match=re.escape(f"size: axis {d} is out of range for a tensor of shape (2, 3) (2 dims)")
    ):
        gf.zeros(2, 3).size(d)


def test_view_in_every_form():
    x = gf.tensor(np.arange(24.0))
    assert x.view(2, 3, -1).shape == (2, 3, 4)
    assert x.view((2, 3, 4)).shape == (2, 3, 4)
    assert x.view([6, -1]).shape == (6, 4)
    assert x.view(2, 3, 4).view(-1).shape == (24,)


def test_view_of_a_transposed_tensor_copies_where_pytorch_would_refuse():
    a = np.arange(6.0).reshape(2, 3)
    assert_array_equal(gf.tensor(a).T.view(-1).data, a.T.reshape(-1))


def test_view_errors_name_view():
    with pytest.raises(
        ValueError, match=re.escape("view: cannot reshape a tensor of shape (2, 3) (6 elements) into shape (4, -1)")
    ):
        gf.zeros(2, 3).view(4, -1)
    with pytest.raises(TypeError, match=re.escape("view: shape entries must be ints, got (2.0, 3)")):
        gf.zeros(2, 3).view(2.0, 3)


def test_flatten_shapes():
    x = gf.zeros(2, 3, 4, 5)
    assert x.flatten().shape == (120,) and x.flatten(1).shape == (2, 60)
    assert x.flatten(1, 2).shape == (2, 12, 5) and x.flatten(-2).shape == (2, 3, 20)
    assert gf.tensor(3.0).flatten().shape == (1,)
    with pytest.raises(ValueError, match=re.escape("flatten: start_dim 2 comes after end_dim 1 in shape (2, 3, 4, 5)")):
        x.flatten(2, 1)


def test_split_and_chunk_piece_sizes_follow_pytorch():
    def sizes(pieces):
        return [p.shape[0] for p in pieces]

    x = gf.zeros(6)
    assert sizes(x.chunk(4)) == [2, 2, 2]  # ceil(6 / 4) = 2 each: fewer pieces than asked
    assert sizes(gf.zeros(5).chunk(3)) == [2, 2, 1]
    assert sizes(gf.zeros(2).chunk(5)) == [1, 1]
    assert sizes(gf.zeros(0).chunk(3)) == [0, 0, 0]
    assert sizes(x.split(4)) == [4, 2] and sizes(x.split([1, 5])) == [1, 5]
    assert sizes(gf.zeros(0).split(2)) == [0]
    q, k, v = gf.zeros(2, 9).split(3, dim=1)
    assert q.shape == k.shape == v.shape == (2, 3)
    assert isinstance(x.split(2), tuple) and isinstance(x.chunk(2), tuple)


def test_chunk_with_a_bad_count():
    with pytest.raises(ValueError, match=re.escape("chunk: chunks must be a positive integer, got 0")):
        gf.zeros(4).chunk(0)


def test_repeat_tiles_as_numpy_tile():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert_array_equal(gf.tensor(a).repeat(2, 3).data, np.tile(a, (2, 3)))
    assert_array_equal(gf.tensor(a).repeat(2, 1, 2).data, np.tile(a, (2, 1, 2)))
    assert_array_equal(gf.tensor([1, 2]).repeat(2).data, [1, 2, 1, 2])
    assert gf.tensor(a).repeat(0, 1).shape == (0, 2)


def test_repeat_gradient_sums_over_the_copies():
    x = leaf([1.0, 2.0])
    u = np.array([1.0, 10.0, 100.0, 1000.0, 1e4, 1e5])
    x.repeat(3).backward(u)
    assert_array_equal(x.grad, [1.0 + 100.0 + 1e4, 10.0 + 1000.0 + 1e5])


def test_repeat_with_fewer_sizes_than_axes():
    with pytest.raises(
        ValueError, match=re.escape("repeat: sizes (2,) must be non-negative, at least one per axis of shape (2, 3)")
    ):
        gf.zeros(2, 3).repeat(2)


def test_contiguous_is_the_tensor_itself_when_already_in_row_major_order():
    x = leaf(np.arange(6.0).reshape(2, 3))
    assert x.contiguous() is x
    t = x.T
    c = t.contiguous()
    assert c is not t and c.data.flags.c_contiguous and not t.data.flags.c_contiguous
    assert_array_equal(c.data, np.arange(6.0).reshape(2, 3).T)
    c.backward(np.arange(6.0).reshape(3, 2))
    assert_array_equal(x.grad, np.arange(6.0).reshape(3, 2).T)


def test_clone_has_memory_of_its_own_and_passes_the_gradient_back():
    x = leaf([1.0, 2.0])
    y = x.clone()
    assert not np.shares_memory(y.data, x.data) and y.grad_fn is not None
    (y * y).sum().backward()
    assert_array_equal(x.grad, [2.0, 4.0])
    z = gf.tensor([1.0, 2.0]).clone()
    z[0] = 5.0
    assert z.tolist() == [5.0, 2.0]


def test_tolist_and_dim():
    assert gf.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert gf.tensor(2.5).tolist() == 2.5 and gf.tensor(2.5).dim() == 0


# --- dtype conversions --------------------------------------------------------------------------


def test_float_casts_keep_the_gradient_and_cast_it_back():
    x = gf.tensor(np.array([0.1, 0.2], dtype=np.float32), requires_grad=True)
    y = x.double()
    assert y.dtype == np.float64 and y.grad_fn is not None
    w = np.array([1 / 3, 2 / 3])
    (y * w).sum().backward()
    assert x.grad.dtype == np.float32
    assert_array_equal(x.grad, w.astype(np.float32))


def test_integer_and_bool_targets_are_outside_the_graph():
    x = leaf([1.7, -1.7, 0.0])
    for y, dtype, values in [
        (x.long(), np.int64, [1, -1, 0]),
        (x.int(), np.int32, [1, -1, 0]),
        (x.bool(), np.bool_, [True, True, False]),
        (x.to(gf.long), np.int64, [1, -1, 0]),
    ]:
        assert y.dtype == dtype and not y.requires_grad and y.grad_fn is None
        assert y.tolist() == values


def test_converting_to_its_own_dtype_or_to_the_cpu_is_the_tensor_itself():
    x = gf.zeros(2)
    assert x.float() is x and x.to(gf.float32) is x and x.to("cpu") is x and x.to(device="cpu") is x
    assert x.type_as(gf.ones(3)) is x
    assert gf.tensor([1, 2]).to(gf.float64).dtype == np.float64
    assert gf.tensor([1, 2]).float().dtype == np.float32  # not the default dtype: float is 32-bit


def test_dtype_names():
    assert gf.float is gf.float32 and gf.double is gf.float64 and gf.long is gf.int64 and gf.int is gf.int32
    assert gf.float32 == np.float32 and gf.int64 == np.int64 and gf.bool == np.bool_
    assert np.zeros(2, dtype=gf.long).dtype == np.int64
    assert gf.float16 == np.float16 and gf.half is gf.float16 and repr(gf.bfloat16) == "gradflow.bfloat16"
    with pytest.raises(TypeError, match="not float16"):  # names only: gradients are checked in float32 and float64
        gf.zeros(2, dtype=gf.float16)


def test_float_casts_gradcheck_through_float32_with_a_wider_step():
    """y = float(x) rounds x + eps to float32's 24 bits, so central differences with eps 1e-6 are off by
    up to 6%; y is linear in x, so a wide eps is exact up to that rounding (1e-7 / 1e-2)."""
    w = gf.tensor(np.array([[0.5, -2.0, 3.0], [1.0, 0.25, -1.0]]))
    x = leaf(np.random.default_rng(0).standard_normal((2, 3)))
    assert gf.gradcheck(lambda x: x.float().double() * w, x, eps=1e-2, rtol=1e-5)
    assert gf.gradcheck(lambda x: x.to(gf.float32).type_as(w) * w, x, eps=1e-2, rtol=1e-5)


def test_to_another_device_or_a_dtype_gradflow_does_not_hold():
    with pytest.raises(ValueError, match=re.escape("to: gradflow runs on numpy on the CPU; there is no device 'cuda'")):
        gf.zeros(2).to("cuda")
    with pytest.raises(ValueError, match=re.escape("to: gradflow runs on numpy on the CPU; there is no device 'mps'")):
        gf.zeros(2).to(device="mps")
    with pytest.raises(
        TypeError, match=re.escape("to: gradflow's tensors hold float32, float64, integers or bool, not float16")
    ):
        gf.zeros(2).to(np.float16)
    with pytest.raises(
        TypeError, match=re.escape("to: 3.5 is not a dtype; use gf.float32, gf.float64, gf.int64, gf.bool, ...")
    ):
        gf.zeros(2).to(3.5)


# --- gradients by finite differences, in float64 -------------------------------------------------

GRADCHECKS = {
    "clone": lambda x: x.clone() * x,
    "contiguous": lambda x: x.transpose(0, 2).contiguous() * 2,
    "flatten": lambda x: x.flatten(1) ** 2,
    "view": lambda x: x.view(4, -1).exp(),
    "split": lambda x: x.split([1, 2], dim=1)[1] * x.split(2, dim=2)[0].sum(),
    "chunk": lambda x: x.chunk(3, dim=-1)[0] * x.chunk(2)[1][..., :2],
    "repeat": lambda x: x.repeat(2, 1, 1, 3).tanh(),
    "topk values": lambda x: x.topk(2, dim=1).values ** 2,
    "max(dim=) values": lambda x: x.max(dim=2, keepdim=True).values * x,
    "var(dim=)": lambda x: x.var(dim=(0, 2)),
}


@pytest.mark.parametrize("name", GRADCHECKS)
def test_gradcheck(name):
    x = leaf(np.random.default_rng(1).standard_normal((2, 3, 4)))
    assert gf.gradcheck(GRADCHECKS[name], x)


def test_the_pytorch_surface_records_no_op_of_its_own():
    """tensor_torch.py gives tensor.py's methods PyTorch's names: every op is recorded in tensor.py."""
    import inspect

    from gradflow.engine import tensor_torch

    source = inspect.getsource(tensor_torch)
    assert ".apply(" not in source and "kernel(" not in source


# --- both spellings at once ----------------------------------------------------------------------

BOTH = [
    ("sum", "axis", lambda x: x.sum(axis=1, dim=1)),
    ("sum", "keepdims", lambda x: x.sum(1, keepdims=True, keepdim=True)),
    ("mean", "axis", lambda x: x.mean(axis=0, dim=0)),
    ("var", "axis", lambda x: x.var(axis=0, dim=0)),
    ("var", "ddof", lambda x: x.var(ddof=1, correction=1)),
    ("max", "axis", lambda x: x.max(axis=1, dim=1)),
    ("max", "keepdims", lambda x: x.max(dim=1, keepdims=True, keepdim=True)),
    ("min", "axis", lambda x: x.min(axis=1, dim=1)),
    ("logsumexp", "axis", lambda x: x.logsumexp(axis=1, dim=1)),
    ("argmax", "axis", lambda x: x.argmax(axis=1, dim=1)),
    ("argmin", "keepdims", lambda x: x.argmin(1, keepdims=True, keepdim=True)),
    ("softmax", "axis", lambda x: x.softmax(axis=1, dim=1)),
    ("log_softmax", "axis", lambda x: x.log_softmax(axis=1, dim=1)),
    ("squeeze", "axis", lambda x: x.squeeze(axis=0, dim=0)),
    ("unsqueeze", "axis", lambda x: x.unsqueeze(axis=0, dim=0)),
    ("transpose", "axis0", lambda x: x.transpose(0, 1, dim0=0)),
    ("topk", "axis", lambda x: x.topk(1, axis=0, dim=0)),
    ("split", "axis", lambda x: x.split(1, axis=0, dim=0)),
    ("chunk", "axis", lambda x: x.chunk(2, axis=0, dim=0)),
    ("cat", "axis", lambda x: gf.cat([x, x], axis=0, dim=0)),
    ("stack", "axis", lambda x: gf.stack([x, x], axis=0, dim=0)),
    ("split", "axis", lambda x: gf.split(x, 1, axis=1, dim=1)),
    ("topk", "axis", lambda x: gf.topk(x, 1, axis=1, dim=1)),
    ("argmax", "axis", lambda x: gf.argmax(x, axis=1, dim=1)),
]
TORCH_NAME = {"axis": "dim", "keepdims": "keepdim", "ddof": "correction", "axis0": "dim0"}


@pytest.mark.parametrize("op, numpy_name, call", BOTH, ids=[f"{op}-{name}-{i}" for i, (op, name, _) in enumerate(BOTH)])
def test_giving_both_spellings_is_an_error_naming_the_op(op, numpy_name, call):
    message = f"{op}: give {numpy_name}= (numpy's name) or {TORCH_NAME[numpy_name]}= (PyTorch's), not both"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        call(gf.ones(1, 2))


def test_other_argument_errors():
    with pytest.raises(TypeError, match=re.escape("var: give correction= or unbiased=, not both")):
        gf.ones(3).var(correction=1, unbiased=True)
    with pytest.raises(
        TypeError, match=re.escape("max: dim=(0, 1) gives values and indices along one axis; for several, use axis=")
    ):
        gf.ones(2, 3).max(dim=(0, 1))
    with pytest.raises(TypeError, match=re.escape("unsqueeze: give the position of the new axis, e.g. x.unsqueeze(0)")):
        gf.ones(2).unsqueeze()
    with pytest.raises(TypeError, match=re.escape("transpose: give the two axes to swap, e.g. x.transpose(1, 2)")):
        gf.ones(2, 3).transpose(0)
    with pytest.raises(
        ValueError, match=re.escape("topk: k must be an integer from 0 to 3, the size of axis 1 of shape (2, 3); got 4")
    ):
        gf.ones(2, 3).topk(4)
    with pytest.raises(ValueError, match=re.escape("argmax: axis 0 of shape (0, 3) is empty")):
        gf.zeros(0, 3).argmax(dim=0)
    with pytest.raises(ValueError, match=re.escape("max: axis 1 of shape (2, 0) is empty")):
        gf.zeros(2, 0).max(dim=1)
    message = (
        "var: 1 element(s) along axis (0,) of shape (1,) leave nothing to divide by with ddof 1 "
        "(the variance divides by N - ddof)"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        gf.ones(1).var(dim=0)


# --- in place ------------------------------------------------------------------------------------


def test_in_place_forms_compute_their_out_of_place_twins():
    x = gf.tensor([1.0, -2.0, 3.0])
    assert x.add_(gf.tensor([1.0, 1.0, 1.0]), alpha=2) is x
    assert x.tolist() == [3.0, 0.0, 5.0]
    assert x.sub_(1).mul_(2).div_(4).tolist() == [1.0, -0.5, 2.0]
    assert x.clamp_(max=1.5).tolist() == [1.0, -0.5, 1.5]
    assert x.masked_fill_(np.array([True, False, False]), 9).tolist() == [9.0, -0.5, 1.5]
    assert x.fill_(2).tolist() == [2.0, 2.0, 2.0] and x.zero_().tolist() == [0.0, 0.0, 0.0]
    assert x.copy_(np.array([4.0, 5.0, 6.0])).tolist() == [4.0, 5.0, 6.0]
    x[x > 4.5] = -1.0
    assert x.tolist() == [4.0, -1.0, -1.0] and x.dtype == np.float32


def gradient_descent(lib, steps=3, lr=0.1):
    """The update PyTorch's own tutorials write: p -= lr * p.grad under no_grad, for each parameter."""
    w = lib.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    b = lib.tensor([0.1, -0.2], requires_grad=True)
    x = lib.tensor([[1.0, 2.0], [-1.0, 0.5], [0.0, 3.0]])
    losses = []
    for _ in range(steps):
        loss = ((x @ w + b) ** 2).mean()
        loss.backward()
        with lib.no_grad():
            for p in (w, b):
                p -= lr * p.grad
                p.grad = None
        losses.append(loss.item())
    return losses, np.asarray(w.detach()), np.asarray(b.detach())


def test_p_minus_equals_lr_times_grad_under_no_grad_trains_the_parameters():
    losses, w, b = gradient_descent(gf)
    assert losses[1] < losses[0] and losses[2] < losses[1]  # the weights change: the loss falls
    assert not np.allclose(w, [[0.5, -1.0], [2.0, 0.25]])
    if torch is not None:
        expected = gradient_descent(torch)
        assert_allclose(losses, expected[0], rtol=1e-6)
        assert_allclose(w, expected[1], rtol=1e-6)
        assert_allclose(b, expected[2], rtol=1e-6)


def test_augmented_assignment_outside_no_grad():
    w = gf.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape("-=: a tensor of shape (2,) is a leaf that requires grad")):
        w -= 0.1  # as PyTorch: a leaf that requires grad is not changed in place while recording
    h = w * 2
    before = h
    h += 1  # an op's output in the graph: rebound to h + 1, with the same values and gradient as PyTorch's
    assert h is not before and h.grad_fn.name == "add" and h.tolist() == [3.0, 5.0]
    h.sum().backward()
    assert w.grad.tolist() == [2.0, 2.0]
    total = gf.zeros(2)
    total += w  # a value that requires grad: the sum is recorded, as PyTorch records it
    assert total.requires_grad and total.tolist() == [1.0, 2.0]
    counts = gf.zeros(2)
    counts += 1  # nothing requires grad: in place, counted in the version
    assert counts.version == 1


def test_every_in_place_change_counts_in_the_version():
    x = gf.zeros(3)
    x.add_(1).mul_(2)
    x[0] = 5.0
    with gf.no_grad():
        x.normal_()
    assert x.version == 4


def test_an_assignment_converts_as_pytorch_and_arithmetic_refuses_a_wider_kind():
    ids = gf.tensor([1, 2, 3])
    ids[0] = 7.9
    ids.fill_(True)
    assert ids.tolist() == [1, 1, 1] and ids.dtype == np.int64
    with pytest.raises(TypeError, match=re.escape(
        "add_: the result is float32 and cannot be written into a int64 tensor in place; "
        "convert the tensor first (e.g. x = x.float())"
    )):  # fmt: skip
        ids.add_(0.5)


def test_weight_init_under_no_grad_draws_from_gradflows_generator():
    w = gf.zeros(2000, requires_grad=True)
    with gf.no_grad():
        gf.manual_seed(3)
        w.normal_(0.0, 0.02)
        first = w.data.copy()
        gf.manual_seed(3)
        w.normal_(0.0, 0.02)
    assert_array_equal(w.data, first)
    assert abs(w.data.mean()) < 0.002 and abs(w.data.std() - 0.02) < 0.002
    with gf.no_grad():
        w.uniform_(-0.5, 0.5)
    assert w.data.min() >= -0.5 and w.data.max() < 0.5 and abs(w.data.mean()) < 0.03


def test_an_in_place_change_on_a_leaf_that_requires_grad_is_refused_outside_no_grad():
    w = gf.zeros(3, requires_grad=True)
    w.name = "w"
    with pytest.raises(RuntimeError) as e:
        w.normal_()
    assert str(e.value) == (
        "normal_: w of shape (3,) is a leaf that requires grad, and an in-place change would be hidden from "
        "backward; to update it (an optimizer's step, a weight init), wrap it in `with gf.no_grad():`"
    )
    assert w.version == 0


def test_an_in_place_change_of_an_output_in_the_graph_is_recorded_as_in_pytorch():
    """masked_fill_ on attention scores, x[i] -= v, add_ and relu_ on an op's output: the change is an op of
    the graph, and the gradient is PyTorch's; an op that read the old values sends its gradient to them."""

    def program(lib, data):
        x = lib.tensor(data, requires_grad=True)
        scores = x @ x.transpose(1, 2)
        scores.masked_fill_(lib.triu(lib.ones(3, 3), diagonal=1).bool(), -lib.inf)
        h = lib.softmax(scores, dim=-1) * 2
        before = h.exp()  # reads h before the changes below
        h[:, 0] += 1
        h[0, 1, :] = x[0, 0, :] * 3
        h.add_(x)
        h.relu_()
        (h * h + before).sum().backward()
        return h, x.grad

    data = np.random.default_rng(0).standard_normal((2, 3, 3))
    h, grad = program(gf, data)
    assert type(h.grad_fn).__name__ == "Relu"
    if torch is not None:
        h_torch, grad_torch = program(torch, data)
        assert_allclose(h.data, h_torch.detach().numpy(), rtol=1e-14, atol=1e-15)
        assert_allclose(grad.data, grad_torch.numpy(), rtol=1e-12, atol=1e-14)
    w = gf.tensor([1.0, -2.0], requires_grad=True)
    y = w * 3
    y.add_(1)  # y = 3 w + 1
    (y * y).sum().backward()
    assert_allclose(w.grad.data, 2 * (3 * w.data + 1) * 3)  # dL/dw = 2 y * 3


def test_a_value_that_requires_grad_written_in_place_makes_the_tensor_require_grad():
    """makemore's backprop-by-hand writes dC[ix] += demb[k] outside no_grad, from tensors of the graph."""
    w = gf.tensor([1.0, 2.0], requires_grad=True)
    z = gf.zeros(3)
    z[1] += (w * 2)[0]
    assert_array_equal(z.data, [0.0, 2.0, 0.0])
    assert z.requires_grad and z.grad_fn.name == "index_put"
    (z * gf.tensor([0.0, 5.0, 0.0])).sum().backward()
    assert_array_equal(w.grad.data, [10.0, 0.0])
    with gf.no_grad():
        q = gf.zeros(2).copy_(gf.ones(2, requires_grad=True))
    assert not q.requires_grad and q.grad_fn is None


def test_an_in_place_change_through_a_view_of_an_output_in_the_graph_is_refused():
    y = (gf.ones(2, 3, requires_grad=True) * 2).reshape(3, 2)
    with pytest.raises(RuntimeError) as e:
        y.add_(1)
    assert str(e.value) == (
        "add_: a tensor of shape (3, 2), a view of a tensor of shape (2, 3), in the graph being recorded: gradflow "
        "records an in-place change of a tensor, not through a view of it; change the tensor it views "
        "(x[index] -= v), or write the change out of place (y = y - v)"
    )


def test_in_place_on_read_only_memory_and_with_a_wrong_shape_or_value():
    with pytest.raises(ValueError, match=re.escape(
        "fill_: the memory of a tensor of shape (2, 3), a view of a tensor of shape (3,) is read-only (an expand()ed "
        "tensor, or a read-only numpy array); change a copy of it instead (x = x.clone())"
    )):  # fmt: skip
        gf.zeros(3).expand(2, 3).fill_(1.0)
    with pytest.raises(ValueError, match=re.escape(
        "copy_: a value of shape (2, 3) does not fit into shape (3,) (an in-place change keeps the tensor's shape)"
    )):  # fmt: skip
        gf.zeros(3).copy_(np.ones((2, 3)))
    with pytest.raises(TypeError, match=re.escape("fill_: value must be a number, got list of shape (2,)")):
        gf.zeros(3).fill_([1, 2])
    with pytest.raises(ValueError, match=re.escape("normal_: std must be non-negative, got -1")):
        gf.zeros(3).normal_(0, -1)
    with pytest.raises(ValueError, match=re.escape("uniform_: low 1 is greater than high 0")):
        gf.zeros(3).uniform_(1, 0)


def test_backward_refuses_an_input_changed_in_place_after_the_forward_pass():
    w = gf.ones(3, requires_grad=True)
    w.name = "w"
    loss = (w * w).sum()
    with gf.no_grad():
        w.mul_(2)
    with pytest.raises(
        RuntimeError, match=re.escape("backward: mul's saved input 0 (w of shape (3,)) was modified in place")
    ):
        loss.backward()


def test_backward_refuses_a_saved_output_changed_in_place():
    y = gf.tensor([0.0, 1.0], requires_grad=True).exp()  # exp's backward reads its output
    with gf.no_grad():
        y.zero_()
    with pytest.raises(RuntimeError, match=re.escape(
        "backward: exp's saved output (a tensor of shape (2,)) was modified in place after the forward pass "
        "(version 0, now 1)"
    )):  # fmt: skip
        y.sum().backward()


def test_a_view_made_outside_the_graph_counts_in_its_base():
    w = gf.ones(3, requires_grad=True)
    loss = (w * w).sum()
    with gf.no_grad():
        w[0].zero_()  # a view of w's memory
    assert w.version == 1 and w.data[0] == 0.0
    with pytest.raises(RuntimeError, match="^backward: mul's saved input 0"):
        loss.backward()


# --- random draws and numpy ----------------------------------------------------------------------


def test_multinomial_draws_by_weight_from_gradflows_generator():
    gf.manual_seed(0)
    probs = gf.tensor([[0.1, 0.0, 0.6, 0.3], [0.0, 0.0, 0.0, 2.0]])
    ids = gf.multinomial(probs, 20000, replacement=True)
    assert ids.shape == (2, 20000) and ids.dtype == np.int64
    assert_allclose(np.bincount(ids.data[0], minlength=4) / 20000, [0.1, 0.0, 0.6, 0.3], atol=0.015)
    assert (ids.data[1] == 3).all()  # weights need not sum to 1
    gf.manual_seed(0)
    assert_array_equal(gf.multinomial(probs, 20000, replacement=True).data, ids.data)


def test_multinomial_without_replacement_draws_each_category_once():
    gf.manual_seed(1)
    ids = gf.multinomial(gf.tensor([0.2, 0.3, 0.5]), 3)
    assert ids.shape == (3,) and sorted(ids.tolist()) == [0, 1, 2]


def test_multinomial_refusals():
    with pytest.raises(ValueError, match=re.escape(
        "multinomial: cannot draw 2 samples without replacement from a row with 1 nonzero weights "
        "(pass replacement=True to draw one more than once)"
    )):  # fmt: skip
        gf.multinomial(gf.tensor([0.0, 1.0]), 2)
    with pytest.raises(ValueError, match=re.escape("multinomial: probs must be finite and non-negative")):
        gf.multinomial(gf.tensor([-0.1, 1.0]), 1)
    with pytest.raises(
        ValueError, match=re.escape("multinomial: a row of probs is all zeros: there is nothing to draw")
    ):
        gf.multinomial(gf.tensor([[0.0, 0.0]]), 1)
    with pytest.raises(
        ValueError, match=re.escape("multinomial: probs must be a vector or rows of weights, got shape (1, 1, 2)")
    ):
        gf.multinomial(gf.ones(1, 1, 2), 1)
    with pytest.raises(ValueError, match=re.escape("multinomial: num_samples must be a positive integer, got 0")):
        gf.multinomial(gf.ones(2), 0)


def test_randint_in_both_forms():
    gf.manual_seed(0)
    a = gf.randint(3, 7, (1000,))
    assert a.dtype == np.int64 and a.shape == (1000,) and set(a.tolist()) == {3, 4, 5, 6}
    b = gf.randint(5, (2, 3))
    assert b.shape == (2, 3) and b.data.min() >= 0 and b.data.max() < 5
    gf.manual_seed(0)
    assert_array_equal(gf.randint(3, 7, size=(1000,)).data, a.data)
    with pytest.raises(ValueError, match=re.escape("randint: low 3 must be less than high 3")):
        gf.randint(3, 3, (2,))
    with pytest.raises(TypeError, match=re.escape("randint: give the shape to draw, e.g. gf.randint(0, 10, (3,))")):
        gf.randint(3, 7)


def test_from_numpy_shares_memory_and_keeps_the_dtype():
    a = np.arange(4, dtype=np.int32)
    t = gf.from_numpy(a)
    t[0] = 9
    assert a[0] == 9 and t.dtype == np.int32
    with pytest.raises(TypeError, match=re.escape("from_numpy: expected a numpy array, got list")):
        gf.from_numpy([1, 2])


# --- save and load -------------------------------------------------------------------------------


def _trained():
    gf.manual_seed(0)
    model = gf.nn.Linear(3, 2)
    opt = gf.optim.AdamW(model.parameters(), lr=0.1)
    model(gf.randn(4, 3)).sum().backward()
    opt.step()
    return model, opt


def _same(a, b):
    """Equal structure, types and values (arrays compared element by element, with their dtype)."""
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, (np.ndarray, gf.Tensor)):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert_array_equal(np.asarray(a), np.asarray(b))
        if isinstance(a, gf.Tensor):
            assert a.requires_grad == b.requires_grad
    else:
        assert a == b


def test_save_and_load_a_training_state(tmp_path):
    model, opt = _trained()
    state = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "iter_num": 5,
        "best_val_loss": 1.25,
        "config": {"n_layer": 2, "name": "baby", "bias": True, "dropout": None, "betas": (0.9, 0.95)},
        "ids": gf.tensor([[1, 2, 3]]),
        "mask": np.array([True, False]),
        "w": gf.randn(2, 3, requires_grad=True),
        "w transposed": gf.randn(3, 2).T,
        "scalar": gf.tensor(2.5),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "list": [gf.ones(2), 3, "three"],
    }
    gf.save(state, tmp_path / "ckpt.safetensors")
    back = gf.load(tmp_path / "ckpt.safetensors")
    _same(state, back)
    fresh_model, fresh_opt = gf.nn.Linear(3, 2), gf.optim.AdamW(gf.nn.Linear(3, 2).parameters(), lr=0.1)
    fresh_model.load_state_dict(back["model"])
    fresh_opt.load_state_dict(back["optimizer"])
    assert_array_equal(fresh_model.weight.data, model.weight.data)


def test_save_and_load_a_bare_tensor_and_a_bare_array(tmp_path):
    gf.save(gf.tensor([1.0, 2.0], requires_grad=True), tmp_path / "t")
    t = gf.load(tmp_path / "t")
    assert isinstance(t, gf.Tensor) and t.requires_grad and t.tolist() == [1.0, 2.0] and t.dtype == np.float32
    gf.save(np.arange(3), tmp_path / "a")
    assert_array_equal(gf.load(tmp_path / "a"), np.arange(3))


def test_a_saved_file_is_plain_safetensors_with_the_arrays_under_their_paths(tmp_path):
    from safetensors.numpy import load_file

    model, opt = _trained()
    gf.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, tmp_path / "f")
    arrays = load_file(tmp_path / "f")
    assert sorted(arrays) == ["model/bias", "model/weight", "optimizer/state/0/m", "optimizer/state/0/v",
                              "optimizer/state/1/m", "optimizer/state/1/v"]  # fmt: skip
    assert_array_equal(arrays["model/weight"], model.weight.data)


def test_saving_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "f"
    gf.save({"step": 1}, path)
    with pytest.raises(TypeError):
        gf.save({"step": 2, "bad": lambda: 0}, path)  # a lambda does not pickle
    assert gf.load(path) == {"step": 1}
    gf.save({"step": 3}, path)
    assert gf.load(path) == {"step": 3} and os.listdir(tmp_path) == ["f"]


def test_keys_that_look_like_gradflows_own_markers_survive(tmp_path):
    obj = {"__tensor__": "not a tensor", "__dict__": [1], 3: {"__tuple__": (1, 2)}}
    gf.save(obj, tmp_path / "f")
    _same(gf.load(tmp_path / "f"), obj)


def test_loading_what_gf_save_did_not_write_is_one_error_naming_the_file(tmp_path):
    from safetensors.numpy import save_file

    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00" * 4 + b"not a safetensors file at all")
    with pytest.raises(ValueError, match=f"^load: {re.escape(str(junk))} is not a file written by gf.save"):
        gf.load(junk)
    other = tmp_path / "other.safetensors"
    save_file({"w": np.ones(2)}, other)
    with pytest.raises(ValueError, match=re.escape(
        f"load: {other} is not a file written by gf.save (a safetensors file without gradflow's description; "
        "safetensors.numpy.load_file reads it)"
    )):  # fmt: skip
        gf.load(other)
    with pytest.raises(FileNotFoundError, match=re.escape(f"load: there is no file {tmp_path / 'missing'}")):
        gf.load(tmp_path / "missing")


# --- PyTorch's missing forms (issue 27): refusals in one line, and what PyTorch does without torch ----


def test_a_0d_integer_tensor_is_an_index_and_a_float_one_is_refused():
    assert list(range(10))[gf.tensor(3)] == 3 and "abc"[gf.tensor([1])] == "b"
    for bad in (gf.tensor(1.0), gf.tensor([1, 2])):
        with pytest.raises(TypeError, match=r"^index: only integer tensors of a single element .* this one is"):
            [1, 2, 3][bad]


def test_format_of_a_0d_tensor_is_its_numbers_and_of_others_pytorchs_refusal():
    loss = gf.tensor(2.25, requires_grad=True) * 2
    assert f"{loss:.4f}" == "4.5000" and f"{loss}" == "4.5" and f"{gf.tensor(7):d}" == "7"
    assert f"{gf.zeros(2)}" == str(gf.zeros(2))
    with pytest.raises(TypeError, match=r"^unsupported format string passed to Tensor.__format__$"):
        f"{gf.zeros(2):.2f}"


def test_inference_mode_records_nothing_as_a_context_and_a_decorator():
    w = gf.ones(2, requires_grad=True)
    with gf.inference_mode():
        assert not (w * 2).requires_grad

    @gf.inference_mode()
    def predict(x):
        return x * w

    assert not predict(gf.ones(2)).requires_grad and (w * 2).requires_grad
    with pytest.raises(ValueError, match=r"^inference_mode: mode=False is not supported"):
        gf.inference_mode(False)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x: x.gather(1, gf.tensor([[0.5]])), TypeError, "gather: index must hold integers, got float32"),
        (
            lambda x: x.gather(1, gf.tensor([[3]])),
            IndexError,
            "gather: index holds 3, out of range for axis 1 of size 3",
        ),
        (
            lambda x: x.gather(1, gf.tensor([0])),
            ValueError,
            "gather: index of shape (1,) does not fit x (2, 3) along axis 1",
        ),
        (
            lambda x: x.scatter_add(0, gf.tensor([[0, 1, 1]]), gf.zeros(1, 2)),
            ValueError,
            "scatter_add: index of shape (1, 3) does not fit x (2, 3) and src (1, 2) along axis 0",
        ),
        (lambda x: x.cumsum(), TypeError, "cumsum: give the axis to sum along, e.g. x.cumsum(dim=0)"),
        (lambda x: x.flip(), TypeError, "flip: give the axes to reverse"),
        (lambda x: x.flip(0, 0), ValueError, "flip: axis repeated in (0, 0)"),
        (lambda x: x.roll((1, 2), 0), ValueError, "roll: 2 shifts (1, 2) for 1 axes (0,)"),
        (lambda x: x.sort(dim=2), ValueError, "sort: axis 2 is out of range"),
        (lambda x: gf.einsum("ii->i", x), ValueError, "einsum: 'ii->i': a letter repeats in operand 0"),
        (lambda x: gf.einsum("...j->j", x), ValueError, "einsum: '...j->j': '...' is not supported"),
        (lambda x: gf.einsum("ij,jk", x), ValueError, "einsum: 'ij,jk' names 2 operand(s), 1 given"),
        (
            lambda x: gf.einsum("ijk->i", x),
            ValueError,
            "einsum: 'ijk->i': operand 0 of shape (2, 3) is given letters 'ijk'",
        ),
        (lambda x: gf.einsum("ij,ij", x, x.T), ValueError, "einsum: 'ij,ij': letter 'i' has size 2 and 3"),
        (lambda x: gf.einsum("ij->ik", x), ValueError, "einsum: 'ij->ik': output 'ik' must name input letters"),
        (lambda x: gf.linspace(0, 1, -1), ValueError, "linspace: steps must be a non-negative integer, got -1"),
        (lambda x: gf.linspace(0, 1, 3, device="cuda"), ValueError, "linspace: gradflow runs on numpy on the CPU"),
        (lambda x: gf.randperm(-2), ValueError, "randperm: n must be a non-negative integer, got -2"),
        (lambda x: gf.bmm(x, x.T), ValueError, "bmm: needs two 3-D tensors with the same batch size, got shapes"),
        (lambda x: gf.outer(x, x[0]), ValueError, "outer: needs two vectors, got shapes (2, 3) and (3,)"),
    ],
)
def test_refusals_of_the_new_forms_name_the_op_and_the_argument(call, error, message):
    with pytest.raises(error, match="^" + re.escape(message)):
        call(gf.zeros(2, 3))


def test_a_recorded_in_place_change_keeps_no_cycle_and_frees_the_weights_for_an_update():
    """The node of a change reads a stand-in for the tensor as it was, not the tensor it becomes the
    grad_fn of, so the graph is freed as soon as nothing holds it; a graph that x[i] += v leaves in a
    cycle (x[i] is read first) is collected before a write into a weight is refused."""
    import gc
    import weakref

    w = gf.randn(3, 3, requires_grad=True)
    scores = w @ w
    scores.masked_fill_(gf.triu(gf.ones(3, 3), diagonal=1).bool(), -gf.inf)
    assert all(t is not scores for t in scores.grad_fn.inputs)
    node = weakref.ref(scores.grad_fn)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del scores
        assert node() is None  # freed by reference counting alone
        grads = gf.zeros(3, 3)
        for i in range(3):
            grads[i] += (w @ w)[i]  # a graph that saved w, in a cycle once grads is dropped
        del grads
        w.data += 1.0  # refused while a graph that saved w lives; this one is unreachable
    finally:
        if enabled:
            gc.enable()
