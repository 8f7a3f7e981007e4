"""A tensor prints as PyTorch prints it (gradflow/engine/printing.py): 4 digits after the point in one
column width, whole numbers as "5.", scientific notation for wide ranges, 80-character lines, long
tensors summarized; the dtype named only where PyTorch names it. By hand, and beside PyTorch's own
printing when torch is installed (skipped without it, unless GRADFLOW_REQUIRE_TORCH=1)."""

import os

import numpy as np
import pytest

import gradflow as gf

try:
    import torch
except ImportError:
    if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
        raise
    torch = None


@pytest.mark.parametrize(
    "values, printed",
    [
        ([[1.0, 0.0], [0.5, 1 / 3]], "tensor([[1.0000, 0.0000],\n        [0.5000, 0.3333]])"),
        ([-0.5, 0.25, 0.0], "tensor([-0.5000,  0.2500,  0.0000])"),  # one width: the minus sign counts
        ([5.0, -7.0], "tensor([ 5., -7.])"),  # whole numbers keep a point: the tensor holds floats
        ([1e-5, 1.0], "tensor([1.0000e-05, 1.0000e+00])"),  # the smallest below 1e-4
        ([1e9, 2.0], "tensor([1.0000e+09, 2.0000e+00])"),  # the largest past 1e8
        ([1.5, np.nan, np.inf], "tensor([1.5000,    nan,    inf])"),
        (7.0, "tensor(7.)"),
        (0.98670, "tensor(0.9867)"),
        ([0.0, 0.0], "tensor([0., 0.])"),
        ([1, 2], "tensor([1, 2])"),  # int64, PyTorch's default integer: not named
        ([True, False], "tensor([ True, False])"),
    ],
)
def test_a_tensor_prints_as_pytorch_prints_it(values, printed):
    assert repr(gf.tensor(values)) == printed
    if torch is not None:
        assert repr(torch.tensor(values)) == printed


def test_the_dtype_is_named_where_pytorch_names_it_and_a_long_last_line_puts_it_below():
    assert repr(gf.tensor([1, 2], dtype=gf.int32)) == "tensor([1, 2], dtype=torch.int32)"
    assert repr(gf.tensor([1.0, 2.0], dtype=gf.float64)) == "tensor([1., 2.], dtype=torch.float64)"
    assert repr(gf.tensor([1.0, 2.0], requires_grad=True)) == "tensor([1., 2.], requires_grad=True)"
    wide = gf.tensor(np.full((2, 9), 0.5), dtype=gf.float64)  # its last line is 80 characters
    assert repr(wide).splitlines()[-1] == "       dtype=torch.float64)"


ARRAYS = {
    "a matrix": lambda rng: rng.standard_normal((4, 6)),
    "three dimensions": lambda rng: rng.standard_normal((2, 3, 4)),
    "a long row that wraps": lambda rng: rng.standard_normal(30),
    "summarized": lambda rng: rng.standard_normal((40, 50)),
    "summarized, three dimensions": lambda rng: rng.standard_normal((10, 12, 14)),
    "small values": lambda rng: rng.standard_normal((3, 3)) * 1e-6,
    "a wide range": lambda rng: rng.standard_normal((3, 3)) * np.logspace(-2, 4, 3),
    "whole numbers": lambda rng: rng.integers(-20, 20, (3, 5)).astype(np.float32),
    "integers": lambda rng: rng.integers(-1000, 1000, (4, 7)),
    "float64": lambda rng: rng.standard_normal((2, 5)),
}


@pytest.mark.skipif(torch is None, reason="needs torch (pip install torch==2.13.0)")
@pytest.mark.parametrize("name", ARRAYS)
@pytest.mark.parametrize("dtype", ["float32", "as made"])
def test_printed_beside_pytorch(name, dtype):
    a = ARRAYS[name](np.random.default_rng(0))
    if dtype == "float32" and a.dtype.kind == "f":
        a = a.astype(np.float32)
    assert repr(gf.tensor(a)) == repr(torch.from_numpy(a))  # the dtype too: dtype=torch.float64


# --- shapes: torch.Size --------------------------------------------------------------------------------


def test_a_shape_is_a_tuple_that_prints_as_torch_size():
    x = gf.zeros(5, 27)
    assert str(x.shape) == repr(x.size()) == "torch.Size([5, 27])" and str([x.shape]) == "[torch.Size([5, 27])]"
    assert str(gf.tensor(1.0).shape) == "torch.Size([])" and f"{x.shape}" == "(5, 27)"  # messages' form
    B, T = x.shape  # every tuple use: unpacking, indexing, equality, hashing, numpy's shape arguments
    assert (B, T) == (5, 27) and x.shape[-1] == 27 and x.shape == (5, 27) and x.shape != (5, 26)
    assert hash(x.shape) == hash((5, 27)) and {x.shape: 1}[(5, 27)] == 1 and isinstance(x.shape, tuple)
    assert np.zeros(x.shape).shape == (5, 27) and np.ones(x.shape[1:]).shape == (27,) and len(x.shape) == 2
    assert str(x.shape[1:]) == "torch.Size([27])" and str(x.shape[:-1] + (3,)) == "torch.Size([5, 3])"
    assert x.shape.numel() == 135 and x.view(x.shape).shape == x.shape and gf.zeros(x.shape).shape == (5, 27)
    assert x.shape[0] == 5 and type(x.shape[0]) is int and x.size(1) == 27


@pytest.mark.skipif(torch is None, reason="needs torch (pip install torch==2.13.0)")
def test_shapes_print_as_pytorchs():
    for shape in [(5, 27), (), (3,), (2, 1, 4)]:
        ours, theirs = gf.zeros(shape), torch.zeros(shape)
        assert str(ours.shape) == str(theirs.shape) and repr(ours.size()) == repr(theirs.size())
        assert str(ours.shape[1:]) == str(theirs.shape[1:]) and ours.shape.numel() == theirs.shape.numel()
        assert str(ours.shape + (7,)) == str(theirs.shape + (7,))


# --- dtypes: torch.float32 -----------------------------------------------------------------------------


def test_a_dtype_prints_as_pytorchs_and_is_numpys_dtype_to_numpy():
    x = gf.zeros(2, 3)
    assert str(x.dtype) == repr(gf.float) == "torch.float32" and str([gf.long, gf.bool]) == "[torch.int64, torch.bool]"
    assert str(gf.get_default_dtype()) == "torch.float32" and f"{x.dtype}" == "float32"  # messages' form
    for same in (np.float32, np.dtype("float32"), gf.float32, gf.float):
        assert x.dtype == same and same == x.dtype and hash(x.dtype) == hash(np.dtype("float32"))
    assert x.dtype != gf.float64 and x.dtype != "float32" and x.dtype != None  # noqa: E711 (as PyTorch's dtype)
    assert {np.dtype("float32"): "F32"}[x.dtype] == "F32" and {gf.float32: 1}[np.dtype("float32")] == 1
    assert np.zeros(2, dtype=gf.long).dtype == np.int64 and np.ones(2).astype(x.dtype).dtype == np.float32
    assert np.dtype(x.dtype) == np.float32 and np.finfo(x.dtype).bits == 32 and np.issubdtype(x.dtype, np.floating)
    assert x.dtype.kind == "f" and x.dtype.itemsize == 4 and x.dtype.is_floating_point and x.dtype.is_signed
    assert not gf.tensor([True]).dtype.is_floating_point and gf.tensor([1]).dtype == gf.int64


@pytest.mark.skipif(torch is None, reason="needs torch (pip install torch==2.13.0)")
def test_dtypes_print_as_pytorchs():
    for name in ["float32", "float64", "int64", "int32", "int16", "int8", "uint8", "bool", "float16"]:
        ours, theirs = getattr(gf, name), getattr(torch, name)
        assert str(ours) == str(theirs) and repr([ours]) == repr([theirs])
        assert ours.is_floating_point == theirs.is_floating_point and ours.is_signed == theirs.is_signed
    for values in ([1, 2], [1.5], [True]):
        assert str(gf.tensor(values).dtype) == str(torch.tensor(values).dtype)
