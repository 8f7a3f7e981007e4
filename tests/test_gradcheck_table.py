"""Every differentiable op is gradient-checked in float64, and no op escapes the table."""

import numpy as np
import pytest
from helpers import all_ops

import gradflow as gf
from gradflow.engine.autograd import topological_order
from gradflow.tools.gradcheck_table import CASES

# Every differentiable name of the public API (docs/engine.md, "What is in the engine") must have a row in the table.
PUBLIC_DIFFERENTIABLE = """
add sub mul div pow radd rsub rmul rtruediv rpow neg matmul exp log sqrt rsqrt abs tanh sigmoid
relu gelu silu maximum minimum clip sum mean var max min logsumexp softmax log_softmax reshape
permute transpose swapaxes T squeeze unsqueeze expand index masked_fill where tril triu cat stack
split cross_entropy layer_norm rms_norm F.gelu F.silu dropout embedding attention gf.maximum linear rope
clone contiguous view flatten chunk repeat topk clamp double to type_as
F.relu F.tanh F.sigmoid F.softmax F.log_softmax mse_loss l1_loss nll_loss
sin cos cumsum sort gather scatter_add flip roll F.pad einsum pow std
prod log10 log1p square amax mm index_select masked_select unbind norm
x[slice]
""".split()


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_gradcheck(case):
    assert gf.gradcheck(case.fn, *case.inputs())


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_float32_stays_float32(case):
    xs = case.inputs(dtype=np.float32)
    y = case.fn(*xs)
    assert y.dtype == np.float32
    y.backward(np.ones(y.shape, dtype=np.float32))
    for x in xs:
        assert x.grad is not None and x.grad.dtype == np.float32 and x.grad.shape == x.shape


def test_every_op_is_in_the_table():
    """Every op of both tiers: the plain ops, and the fast kernels that replace some of them."""
    used = set()
    for tier in ("plain", "fast"):
        with gf.use_kernels(tier):
            for case in CASES:
                y = case.fn(*case.inputs())
                used |= {type(node) for node in topological_order(y.grad_fn)}
    # (an op whose subclass ran counts: fast/compiled_norm.py's LayerNorm runs fast/norm.py's where numba is absent)
    missing = sorted(op.__name__ for op in all_ops() if not any(issubclass(u, op) for u in used))
    assert not missing, f"ops without a gradcheck row in gradflow/tools/gradcheck_table.py: {missing}"
    assert len(all_ops()) >= 40


def test_every_public_name_is_in_the_table():
    names = {c.name.split()[0] for c in CASES}
    missing = [n for n in PUBLIC_DIFFERENTIABLE if n not in names]
    assert not missing, f"public ops without a row in gradflow/tools/gradcheck_table.py: {missing}"
