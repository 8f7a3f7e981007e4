"""A small thread pool that runs a large numpy kernel on several cores, one chunk of rows per thread.

Why: numpy runs each elementwise ufunc, reduction and batched matmul (a stack of small products)
on one core, while BLAS runs a 2-D matmul on all of them. numpy releases the GIL inside those
loops, though, so a kernel applied to the first half of an array's rows on one thread and to the
second half on another really runs on two cores at once. The result is the same numbers: each
element (or each row, for a row-wise kernel such as LayerNorm's) is computed by the same code,
only by another thread.

Splitting costs tens of microseconds (waking a thread; the threads take turns holding the GIL
between numpy calls), so only kernels that touch enough elements are split: MIN_ELEMENTS per
chunk at least. Measured on 2 cores, the pool never paid in a whole training step, at any size:
on the baby GPT's largest arrays (GELU over 393K elements, attention over 196K scores) two
threads saved 8 to 16% of those ops alone, yet the step got slower (by 4 ms of 42 with chunks
of 64K elements), and with longer contexts, where attention's T^2 scores are millions of
elements, steps were 8%, 5% and 11% slower at 128, 256 and 512 positions. Waking a Python
thread takes 50 to 100 us on that machine, and BLAS's own threads keep spinning between
matrix products, holding the second core.

So gradflow's own threads are off unless asked for: GRADFLOW_NUM_THREADS in the environment or
`gf.set_num_threads(n)` at run time (try it on a machine with more cores, and compare). With one
thread there is no pool at all: every kernel is one plain numpy call. BLAS keeps its own threads,
set by OPENBLAS_NUM_THREADS or OMP_NUM_THREADS before numpy is imported.

What does use every core in training is gradflow.data_parallel: each process computes the
gradient of a shard of the batch, so there is no GIL to share.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

MIN_ELEMENTS = 1 << 18  # elements per chunk below which splitting does not pay (see above)


def _threads_from_environment():
    value = os.environ.get("GRADFLOW_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) >= 1 else 1


_threads = _threads_from_environment()
_pool = None  # created on first use, with _threads - 1 workers: the calling thread does a chunk too


def get_num_threads():
    """The number of threads gradflow's kernels use (1: no threads, plain numpy calls)."""
    return _threads


def set_num_threads(n):
    """Use n threads (n >= 1) for gradflow's large kernels; 1 turns the pool off."""
    global _threads, _pool
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: n must be a positive integer, got {n!r}")
    if n != _threads and _pool is not None:
        _pool.shutdown()
        _pool = None
    _threads = n


def chunks(n, elements):
    """Slices that cut range(n) into one piece per thread, or just [slice(0, n)] when `elements`
    (the size of the work) is too small to share out."""
    parts = min(_threads, n, elements // MIN_ELEMENTS)
    if parts <= 1:
        return [slice(0, n)]
    bounds = [n * i // parts for i in range(parts + 1)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def for_rows(fn, n, elements):
    """Call fn(rows) for slices `rows` that together cover range(n), in parallel when it pays.

    fn must only write to the rows it is given (each call owns its slice of every output).
    """
    global _pool
    pieces = chunks(n, elements)
    if len(pieces) == 1:
        fn(pieces[0])
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=_threads - 1, thread_name_prefix="gradflow")
    futures = [_pool.submit(fn, rows) for rows in pieces[1:]]
    fn(pieces[0])
    for f in futures:
        f.result()


def multiply(a, b):
    """a * b for two arrays of the same shape, in chunks shared among the threads when large."""
    if a.shape != b.shape:
        return a * b
    out = np.empty(a.shape, np.result_type(a, b))
    a1, b1, out1 = a.reshape(-1), b.reshape(-1), out.reshape(-1)
    for_rows(lambda i: np.multiply(a1[i], b1[i], out=out1[i]), out1.size, out1.size)
    return out
