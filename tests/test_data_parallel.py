"""The math of data parallelism, in one process: the shards' weighted gradients sum to the batch's gradient.

tests/test_distributed.py runs the same math over MPI ranks.
"""

import numpy as np
import pytest
from helpers import TRAIN, VAL
from helpers import model as dropout_model

import gradflow as gf
from gradflow.engine.rng import get_rng_state
from gradflow.engine.threads import limit_blas_threads
from gradflow.text import get_batch
from gradflow.training.data_parallel import own_stream, shard_loss, shard_seeds, shards
from gradflow.training.trainer import TrainConfig, Trainer


def model(seed=0, dropout=0.0):
    return dropout_model(seed, dropout)


def batch(rows=5, seed=0):
    return get_batch(TRAIN, rows, 16, np.random.default_rng(seed))


def plain_gradients(m, x, y):
    for p in m.parameters():
        p.grad = None
    _, loss = m(x, y)
    loss.backward()
    return loss.item(), [p.grad.clone() for p in m.parameters()]


def sharded_gradients(m, x, y, parts):
    """What `parts` processes compute between them, computed here one shard after another."""
    for p in m.parameters():
        p.grad = None
    pieces, seeds = shards(len(x), parts), shard_seeds(parts)
    loss = 0.0
    for rows, seed in zip(pieces, seeds):
        with own_stream(seed):
            loss += shard_loss(m, x[rows], y[rows], (rows.stop - rows.start) / len(x), backward=True)
    return loss, [p.grad.clone() for p in m.parameters()]


def test_shards_cut_the_rows_evenly_and_never_empty():
    assert shards(12, 2) == [slice(0, 6), slice(6, 12)]
    assert shards(5, 3) == [slice(0, 1), slice(1, 3), slice(3, 5)]
    assert shards(2, 4) == [slice(0, 1), slice(1, 2)]  # fewer rows than processes: fewer shards


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_the_weighted_shard_gradients_sum_to_the_whole_batch_gradient(parts):
    m = model()
    x, y = batch(rows=5)  # 5 rows: shards of unequal size (2 + 3, or 1 + 2 + 2)
    loss, grads = plain_gradients(m, x, y)
    sharded_loss, sharded = sharded_gradients(m, x, y, parts)
    assert sharded_loss == pytest.approx(loss, rel=1e-6)
    for g, expected in zip(sharded, grads):
        np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-6)


def test_shard_loss_without_backward_records_nothing():
    m = model()
    x, y = batch(rows=4)
    loss = shard_loss(m, x, y, 0.25, backward=False)
    with gf.no_grad():
        assert loss == pytest.approx(0.25 * m(x, y)[1].item(), rel=1e-6)
    assert all(p.grad is None for p in m.parameters())


def test_own_stream_draws_from_its_seed_and_gives_gradflow_its_generator_back():
    gf.manual_seed(3)
    before = get_rng_state()
    with own_stream(42):
        drawn = gf.rand(4).numpy()
    np.testing.assert_array_equal(drawn, gf.rand(4, generator=gf.Generator().manual_seed(42)).numpy())
    assert get_rng_state() == before


def test_dropout_masks_follow_the_seeds_gradflow_s_generator_gives():
    """Every process draws the same seeds, so the same shards get the same masks, and the generator
    is left alike everywhere: what a checkpoint saves is every process's state."""
    m = model(dropout=0.3)
    x, y = batch(rows=4)
    runs = []
    for _ in range(2):
        gf.manual_seed(7)
        runs.append((sharded_gradients(m, x, y, parts=2), get_rng_state()))
    (loss_a, grads_a), state_a = runs[0]
    (loss_b, grads_b), state_b = runs[1]
    assert loss_a == loss_b and state_a == state_b
    for a, b in zip(grads_a, grads_b):
        np.testing.assert_array_equal(a, b)
    _, plain = plain_gradients(m, x, y)
    assert not all(np.allclose(a, b) for a, b in zip(grads_a, plain))  # other masks than one process's


def test_limit_blas_threads_can_give_the_threads_back():
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    limiter = limit_blas_threads(1)
    assert all(n == 1 for n in blas_threads())
    limiter.restore_original_limits()
    assert blas_threads() == before


def test_trainer_with_processes_outside_mpiexec_says_how_to_start_them(tmp_path):
    """The Trainer's processes are MPI ranks (tests/test_distributed.py trains with two)."""
    cfg = TrainConfig(out_dir=str(tmp_path), processes=2)
    with pytest.raises(ValueError, match=r"^train: processes=2 but this process runs alone: start 2 with mpiexec -n 2"):
        Trainer(model(), TRAIN, VAL, cfg, progress=False)


def test_trainer_rejects_a_bad_number_of_processes(tmp_path):
    with pytest.raises(ValueError, match="processes must be a positive integer"):
        Trainer(model(), TRAIN, VAL, TrainConfig(out_dir=str(tmp_path), processes=0), progress=False)
