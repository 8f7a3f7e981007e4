"""gf.profile: per-op forward and backward time."""

import numpy as np

import gradflow as gf
from gradflow.engine.hooks import watchers


def test_profile_counts_every_op_call_and_times_both_phases():
    x = gf.randn(8, 8, requires_grad=True)
    with gf.profile() as prof:
        for _ in range(3):
            ((x @ x).tanh() @ x).sum().backward()
    rows = {op: (calls, f, b) for op, calls, f, b in prof.rows()}
    assert rows["matmul"][0] == 6 and rows["tanh"][0] == 3 and rows["sum"][0] == 3
    assert all(f > 0 and b > 0 for _, f, b in rows.values())
    table = prof.table(per=3)
    assert table.splitlines()[0].split()[:2] == ["op", "calls"] and "matmul" in table and "total" in table
    assert prof not in watchers  # switched off after the block


def test_no_profiling_outside_the_block():
    with gf.profile() as prof:
        pass
    (gf.randn(3, requires_grad=True) * 2).sum().backward()
    assert prof.rows() == [] and np.isfinite(prof.wall)
