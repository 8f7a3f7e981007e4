"""x.data: the numpy array, with PyTorch's in-place methods writing into the tensor's memory (engine/data_array.py).

Each of PyTorch's in-place calls on `.data` gives PyTorch's numbers (torch==2.13.0 beside, where installed);
the array stays numpy's for everything else (arithmetic gives plain arrays, repr is numpy's).
"""

import os

import numpy as np
import pytest

import gradflow as gf
from gradflow.engine.data_array import IN_PLACE, DataArray

START = np.array([[0.5, -1.25, 2.0], [3.0, -0.75, 0.0]], dtype=np.float32)
GRAD = np.array([[1.0, 2.0, -3.0], [0.5, 0.25, 4.0]], dtype=np.float32)

CALLS = {  # name: the call on (data, grad, lib), the call PyTorch programs write
    "add_ alpha": lambda d, g, lib: d.add_(g, alpha=-0.1),
    "add_ number": lambda d, g, lib: d.add_(2),
    "sub_": lambda d, g, lib: d.sub_(g, alpha=2),
    "mul_": lambda d, g, lib: d.mul_(0.5),
    "div_": lambda d, g, lib: d.div_(g),
    "copy_": lambda d, g, lib: d.copy_(g),
    "copy_ broadcast": lambda d, g, lib: d.copy_(lib.tensor([1.0, 2.0, 3.0])),
    "zero_": lambda d, g, lib: d.zero_(),
    "fill_": lambda d, g, lib: d.fill_(7),
    "clamp_": lambda d, g, lib: d.clamp_(-1, 1),
    "clamp_ min": lambda d, g, lib: d.clamp_(min=0),
    "chained": lambda d, g, lib: d.mul_(2).add_(1).clamp_(max=3),
    "masked_fill_": lambda d, g, lib: d.masked_fill_(lib.tensor(START > 0), 0.0),
    "addcmul_": lambda d, g, lib: d.addcmul_(g, g, value=0.5),
    "lerp_": lambda d, g, lib: d.lerp_(g, 0.25),
}


def torch_or_skip():
    if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
        import torch

        return torch
    return pytest.importorskip("torch")


@pytest.mark.parametrize("call", list(CALLS))
def test_in_place_calls_on_data_change_the_parameter_as_pytorchs(call):
    p = gf.nn.Parameter(START.copy())
    p.grad = GRAD.copy()
    out = CALLS[call](p.data, p.grad, gf)
    assert isinstance(out, DataArray) and np.shares_memory(out, p._data)  # the array, for chaining
    assert p.grad_fn is None and p.requires_grad and p.version == 0  # outside the graph, as PyTorch's .data
    torch = torch_or_skip()
    q = torch.nn.Parameter(torch.tensor(START.copy()))
    q.grad = torch.tensor(GRAD.copy())
    CALLS[call](q.data, q.grad, torch)
    np.testing.assert_array_equal(p.data, q.detach().numpy())
    assert p.dtype == np.float32


def test_the_hand_written_sgd_step_of_the_word_language_model():
    model = gf.nn.Linear(3, 2)
    model(gf.ones(4, 3)).sum().backward()  # outside no_grad, as the program writes it
    before = model.weight.data.copy()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-20.0)
    np.testing.assert_allclose(model.weight.data, before - 20.0 * np.asarray(model.weight.grad))


def test_draws_write_into_the_tensor_as_the_tensor_methods_do():
    w = gf.zeros(200, 50)
    gf.manual_seed(3)
    out = w.data[1:].normal_(0, 0.02)  # a slice of the memory: rows 1 and on
    assert isinstance(out, DataArray) and np.all(w.data[0] == 0)
    expected = gf.zeros(199, 50)
    gf.manual_seed(3)
    expected.normal_(0, 0.02)
    np.testing.assert_array_equal(w.data[1:], expected.data)  # the same draws as the tensor method's
    w.data.uniform_(-0.5, 0.5)
    assert w.data.min() >= -0.5 and w.data.max() < 0.5 and abs(float(w.data.mean())) < 0.02


def test_every_in_place_method_is_the_tensor_method_of_that_name():
    for name in IN_PLACE:
        assert hasattr(gf.Tensor, name) and getattr(DataArray, name).__name__ == name


def test_the_rest_is_numpys_and_gives_plain_arrays():
    p = gf.nn.Parameter(START.copy())
    for derived in (p.data * 2, p.data.sum(axis=0), p.data.copy(), p.data.astype(np.float64), np.exp(p.data)):
        assert type(derived) is np.ndarray
    assert repr(p.data) == repr(START) and type(gf.nn.Linear(2, 2).state_dict()["weight"]) is np.ndarray
    p.data *= 2  # numpy's operator, in place: the array stays the parameter's
    assert p.data[0, 0] == 1.0 and np.shares_memory(p.data, p._data)
    copy = p.data.clone()  # PyTorch's x.data.clone(): a tensor of its own
    assert type(copy) is gf.Tensor and not np.shares_memory(copy.data, p.data) and not copy.requires_grad
    assert p.data.cpu() is not None and type(p.data.numpy()) is np.ndarray


def test_writing_through_data_while_a_graph_holds_the_memory_is_refused():
    layer, x = gf.nn.Linear(3, 2), gf.randn(4, 3, requires_grad=True)
    loss = layer(x).sum()
    with pytest.raises(RuntimeError, match=r"^tensor\.data: .* cannot be written in place: linear saved it"):
        layer.weight.data.normal_(0, 0.02)
    loss.backward()
    layer.weight.data.normal_(0, 0.02)  # backward used it: writing is allowed again
