"""The thread pool: its setting, and kernels cut into chunks giving exactly the numbers of one call."""

import numpy as np
import pytest

import gradflow as gf
from gradflow import functional as F
from gradflow import memory, parallel
from gradflow.ops.index import add_rows


@pytest.fixture
def threads():
    """Run with `threads(n)` threads and every array split, however small; the setting is restored."""
    before, minimum = gf.get_num_threads(), parallel.MIN_ELEMENTS

    def use(n):
        gf.set_num_threads(n)
        parallel.MIN_ELEMENTS = 1

    yield use
    gf.set_num_threads(before)
    parallel.MIN_ELEMENTS = minimum


def test_set_num_threads(threads):
    threads(3)
    assert gf.get_num_threads() == 3
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="set_num_threads: n must be a positive integer"):
            gf.set_num_threads(bad)
    assert gf.get_num_threads() == 3


def test_threads_follow_the_environment(monkeypatch):
    """Off (one thread) unless GRADFLOW_NUM_THREADS asks for more; BLAS's variables are BLAS's."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    monkeypatch.delenv("GRADFLOW_NUM_THREADS", raising=False)
    assert parallel._threads_from_environment() == 1
    monkeypatch.setenv("GRADFLOW_NUM_THREADS", "3")
    assert parallel._threads_from_environment() == 3
    monkeypatch.setenv("GRADFLOW_NUM_THREADS", "many")  # not a number: off
    assert parallel._threads_from_environment() == 1


def test_chunks_cover_the_rows_once(threads):
    threads(3)
    for n in (1, 2, 3, 7, 100):
        pieces = parallel.chunks(n, elements=10**6)
        assert len(pieces) == min(3, n)
        assert np.array_equal(np.concatenate([np.arange(n)[s] for s in pieces]), np.arange(n))
    parallel.MIN_ELEMENTS = 1000
    assert parallel.chunks(100, elements=1500) == [slice(0, 100)]  # too little work to share out
    assert len(parallel.chunks(100, elements=2000)) == 2


def test_one_thread_runs_one_call(threads):
    threads(1)
    calls = []
    parallel.for_rows(calls.append, 10, 10**9)
    assert calls == [slice(0, 10)]


def test_an_error_in_a_worker_reaches_the_caller(threads):
    threads(2)

    def fail(rows):
        if rows.start:
            raise ValueError("bad chunk")

    with pytest.raises(ValueError, match="bad chunk"):
        parallel.for_rows(fail, 10, 10**6)


def _run(fn, arrays, seed=1):
    """fn's output and the gradient of every input, for a fixed upstream gradient."""
    xs = [gf.tensor(a, requires_grad=True) for a in arrays]
    y = fn(*xs)
    y.backward(np.random.default_rng(seed).standard_normal(y.shape).astype(y.dtype))
    return [y.data] + [x.grad for x in xs]


CAUSAL = np.tril(np.ones((6, 6), dtype=bool))
KERNELS = {
    "gelu": (F.gelu, [(5, 7, 3)]),
    "attention causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True),
        [(4, 2, 6, 3), (4, 2, 6, 3), (4, 2, 6, 5)],
    ),
    "attention shared keys and a mask": (  # k and v broadcast over the query heads, as in grouped-query attention
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=CAUSAL[None, None] & (np.arange(6) < 4)),
        [(3, 2, 6, 3), (3, 1, 6, 3), (3, 1, 6, 4)],
    ),
    "attention without a batch": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [(6, 3), (4, 3), (4, 2)]),
    "mul": (lambda a, b: a * b, [(9, 4), (9, 4)]),
}


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threads_give_the_numbers_of_one_call(name, dtype, threads):
    fn, shapes = KERNELS[name]
    rng = np.random.default_rng(0)
    arrays = [(rng.standard_normal(s) * 3).astype(dtype) for s in shapes]
    threads(1)
    serial = _run(fn, arrays)
    threads(3)
    chunked = _run(fn, arrays)
    for a, b in zip(serial, chunked):
        assert a.dtype == dtype and b.dtype == dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("query_block", [128, 2])
def test_attention_dropout_in_chunks_equals_one_call(threads, monkeypatch, query_block):
    """Chunks of the batch on two threads, also with causal blocks of 2 queries inside each chunk."""
    from gradflow.ops import attention

    monkeypatch.setattr(attention, "QUERY_BLOCK", query_block)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((4, 2, 6, 3)) for _ in range(3)]

    def fn(q, k, v):
        gf.manual_seed(5)  # the same dropout mask both times
        return F.scaled_dot_product_attention(q, k, v, causal=True, dropout_p=0.3)

    threads(1)
    serial = _run(fn, arrays)
    threads(2)
    for a, b in zip(serial, _run(fn, arrays)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("weight_shape", [(10, 3), (10,)])
def test_add_rows_equals_add_at(weight_shape):
    rng = np.random.default_rng(0)
    ids = np.array([[3, 1, 3], [-1, 9, 0]])  # repeated ids, and -1 naming the same row as 9
    grad = rng.standard_normal(ids.shape + weight_shape[1:])
    expected = np.zeros(weight_shape)
    np.add.at(expected, ids, grad)
    dx = np.zeros(weight_shape)
    add_rows(dx, ids, grad)
    np.testing.assert_allclose(dx, expected, rtol=1e-15)
    empty = np.zeros(weight_shape)
    add_rows(empty, np.zeros(0, dtype=int), grad[:0, 0])
    assert not empty.any()


def test_embedding_gradient_sums_repeated_rows():
    w = gf.randn(5, 2, requires_grad=True)
    F.embedding(np.array([[4, 4, 0]]), w).sum().backward()
    np.testing.assert_array_equal(w.grad, [[1, 1], [0, 0], [0, 0], [0, 0], [2, 2]])


def test_transposed_weight_gradient_arrives_in_the_weights_order():
    x = gf.randn(2, 3, 4, requires_grad=True)
    w = gf.randn(5, 4, requires_grad=True)
    (x @ w.T).sum().backward()
    assert w.grad.flags.c_contiguous
    np.testing.assert_allclose(w.grad, np.ones((2, 3, 5)).reshape(-1, 5).T @ x.data.reshape(-1, 4), rtol=1e-6)


def test_keep_freed_memory_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("GRADFLOW_KEEP_FREED_MEMORY", "0")
    assert memory.keep_freed_memory() is False
    monkeypatch.delenv("GRADFLOW_KEEP_FREED_MEMORY")
    assert memory.keep_freed_memory() in (True, False)  # True with glibc
