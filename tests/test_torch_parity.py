"""Parity with PyTorch where it is installed (pip install torch==2.13.0); skipped otherwise.

CI installs torch and sets GRADFLOW_REQUIRE_TORCH=1, which turns the skip into a failure.
"""

import os

import numpy as np
import pytest
from helpers import both

import gradflow as gf
from gradflow.nn import Parameter
from gradflow.nn import functional as F

if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
    import torch
else:
    torch = pytest.importorskip("torch")

OPTIMIZERS = {
    "SGD momentum + decay": (
        lambda ps: gf.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    ),
    "Adam + L2": (
        lambda ps: gf.optim.Adam(ps, lr=0.01, betas=(0.8, 0.95), weight_decay=0.1),
        lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.8, 0.95), weight_decay=0.1),
    ),
    "AdamW": (
        lambda ps: gf.optim.AdamW(ps, lr=0.01, betas=(0.9, 0.99), weight_decay=0.1),
        lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.9, 0.99), weight_decay=0.1),
    ),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_steps_match_torch_in_float64(name):
    ours, theirs = OPTIMIZERS[name]
    rng = np.random.default_rng(0)
    start = rng.standard_normal((3, 4))
    p = Parameter(start.copy())
    q = torch.nn.Parameter(torch.tensor(start.copy()))
    opt_p, opt_q = ours([p]), theirs([q])
    for _ in range(20):
        g = rng.standard_normal((3, 4))
        p.grad = g.copy()
        q.grad = torch.tensor(g.copy())
        opt_p.step()
        opt_q.step()
    np.testing.assert_allclose(p.data, q.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_clip_grad_norm_matches_torch():
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(s) * 3 for s in ((3, 4), (5,))]
    ps = [Parameter(np.zeros(g.shape)) for g in grads]
    qs = [torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.float64)) for g in grads]
    for p, q, g in zip(ps, qs, grads):
        p.grad, q.grad = g.copy(), torch.tensor(g.copy())
    total = gf.optim.clip_grad_norm(ps, 1.0)
    assert total == pytest.approx(float(torch.nn.utils.clip_grad_norm_(qs, 1.0)), rel=1e-12)
    for p, q in zip(ps, qs):
        np.testing.assert_allclose(p.grad, q.grad.numpy(), rtol=1e-12)


def test_fused_ops_match_torch():
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((2, 3, 8)), rng.standard_normal(8), rng.standard_normal(8)
    both(torch, lambda x: F.softmax(x), lambda x: torch.softmax(x, -1), x)
    both(torch, lambda x: F.log_softmax(x, axis=1), lambda x: torch.log_softmax(x, 1), x)
    both(torch, F.gelu, torch.nn.functional.gelu, x)
    both(torch, lambda x: x.gelu(), lambda x: torch.nn.functional.gelu(x, approximate="tanh"), x)
    both(torch, F.silu, torch.nn.functional.silu, x)
    both(
        torch,
        lambda x, w, b: F.layer_norm(x, (8,), w, b),
        lambda x, w, b: torch.nn.functional.layer_norm(x, (8,), w, b, eps=1e-5),
        x,
        w,
        b,
    )
    both(
        torch,
        lambda x, w: F.rms_norm(x, (8,), w),
        lambda x, w: torch.nn.functional.rms_norm(x, (8,), w, eps=1e-6),
        x,
        w,
    )
    targets = np.array([1, 0, 3, 7, 7, 2])
    both(
        torch,
        lambda z: F.cross_entropy(z, targets, ignore_index=7),
        lambda z: torch.nn.functional.cross_entropy(z, torch.tensor(targets), ignore_index=7),
        rng.standard_normal((6, 9)),
    )


def test_attention_matches_torch():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)) for _ in range(3))
    mask = rng.random((5, 5)) < 0.7
    np.fill_diagonal(mask, True)  # every query sees something
    both(
        torch,
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True),
        lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
        q,
        k,
        v,
    )
    both(
        torch,
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=mask),
        lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(mask)),
        q,
        k,
        v,
    )
