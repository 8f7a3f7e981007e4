"""The matmul floor (benchmarks/machine.py) is the baby GPT step's own products, and PyTorch's floor is the
same products through torch.matmul: what `train_char_gpt.py --floor` splits each engine's step by."""

import math
import sys

import numpy as np
import pytest
from helpers import BENCHMARKS, in_checkout

BABY_GPT = dict(block_size=64, n_layer=4, n_head=4, n_embd=128)


@pytest.fixture(scope="module")
def machine():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import machine
    finally:
        sys.path.remove(str(BENCHMARKS))
    return machine


def recorded(machine, products, matmul, array):
    """Each call matmul_floor's step makes, with its operands and output after the call."""
    calls = []

    def record(a, b, out):
        matmul(a, b, out=out)
        calls.append((a, b, out))

    gflop, step = machine.matmul_floor(products, record, array)
    step()
    return gflop, calls


@in_checkout
def test_the_floor_is_the_baby_gpts_products(machine):
    products = machine.step_products(12, 64, BABY_GPT, vocab_size=65)
    rows, d = 12 * 64, 128
    linear = 4 * (d * 3 * d + d * d + d * 4 * d + 4 * d * d) + d * 65  # in * out of each linear layer
    attention = 4 * 6 * (12 * 4) * 64 * 64 * 32  # 6 products of (64 x 32) by (32 x 64) sizes per head
    gflop, calls = recorded(machine, products, np.matmul, np.asarray)
    assert len(calls) == len(products) == 25 * 3 + 4 * 6
    assert gflop == pytest.approx(2 * (3 * rows * linear + attention) / 1e9) == pytest.approx(3.96, abs=0.005)
    for (a, b, out), shapes in zip(calls, products):
        assert (a.shape, b.shape) == shapes and out.shape == a.shape[:-1] + b.shape[-1:]
        assert math.prod(a.shape) * b.shape[-1] > 0


@in_checkout
def test_pytorchs_floor_runs_the_same_products(machine, torch):
    products = machine.step_products(2, 8, dict(block_size=8, n_layer=1, n_head=2, n_embd=16), vocab_size=5)
    numpy_gflop, numpy_calls = recorded(machine, products, np.matmul, np.asarray)
    torch_gflop, torch_calls = recorded(machine, products, torch.matmul, torch.from_numpy)
    assert torch_gflop == numpy_gflop
    for (a, b, _), (ta, tb, tout) in zip(numpy_calls, torch_calls, strict=True):
        assert isinstance(tout, torch.Tensor)
        np.testing.assert_array_equal(ta.numpy(), a)  # the same operands (one seed)
        np.testing.assert_array_equal(tb.numpy(), b)
        np.testing.assert_allclose(tout.numpy(), a @ b, rtol=1e-5, atol=1e-5)
