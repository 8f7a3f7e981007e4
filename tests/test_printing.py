"""A tensor prints as PyTorch prints it (gradflow/engine/printing.py): 4 digits after the point in one
column width, whole numbers as "5.", scientific notation for wide ranges, 80-character lines, long
tensors summarized; the dtype named only where PyTorch names it. By hand, and beside PyTorch's own
printing when torch is installed (skipped without it, unless GRADFLOW_REQUIRE_TORCH=1)."""

import os
import re

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
    assert repr(gf.tensor([1, 2], dtype=gf.int32)) == "tensor([1, 2], dtype=int32)"
    assert repr(gf.tensor([1.0, 2.0], dtype=gf.float64)) == "tensor([1., 2.], dtype=float64)"
    assert repr(gf.tensor([1.0, 2.0], requires_grad=True)) == "tensor([1., 2.], requires_grad=True)"
    wide = gf.tensor(np.full((2, 9), 0.5), dtype=gf.float64)  # its last line is 80 characters
    assert repr(wide).splitlines()[-1] == "       dtype=float64)"


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
    ours, theirs = repr(gf.tensor(a)), repr(torch.from_numpy(a)).replace("dtype=torch.", "dtype=")
    # the dtype's name is shorter than PyTorch's (float64, torch.float64): it may fit where PyTorch's wraps
    assert re.sub(r",\n +dtype=", ", dtype=", ours) == re.sub(r",\n +dtype=", ", dtype=", theirs)
