"""The fast tier's compiled loops (gradflow/fast/loops.py, numba), loaded the first time a kernel asks.

numba comes with gradflow wherever it ships a wheel (pyproject.toml's markers name the Pythons and
platforms) and is left out elsewhere, since gradflow installs wherever numpy does. Where numba is not
installed, or GRADFLOW_NUMBA=0 in the environment switches it off, or it fails to load, every
kernel that has a compiled loop runs its numpy form instead, with the same numbers.

Importing gradflow does not import numba. The first kernel that asks for the loops (loops())
imports it, and then, once for the process:
- threads: as many as numpy's BLAS uses (threadpoolctl's count), so that a product and a loop
  never want more cores than BLAS was given; and they never run at once, since each op runs its
  products and its loops one after the other. numba's `workqueue` layer runs them, whose idle
  threads sleep: OpenMP's threads spin after each loop, and on a machine that is busy with other
  work spinning threads take cores that the next op's threads are waiting for (measured: two
  processes at once on 2 cores, each running the baby GPT's step and an exact GELU, were 13 times
  slower than one alone with OpenMP's layer, 5 times with workqueue, most of that BLAS's). A
  layer chosen with NUMBA_THREADING_LAYER, or a count with NUMBA_NUM_THREADS, stays as chosen.
  The loops that run during a training step use one thread (parallel=False): benchmarks/threads.py
  measures why. A workqueue launch takes about 0.1 ms, as long as a pass over the baby GPT's
  largest activations on one core; OpenMP's takes microseconds, but right after a product
  OpenBLAS's threads are still spinning (they wait about 0.1 s for the next one) and a loop on
  two OpenMP threads then takes 3.8 ms instead of 0.03. Cutting OpenBLAS's spin short enough for
  the loops (OPENBLAS_THREAD_TIMEOUT, read once as numpy loads) makes the step 1.06 times as long.
- compilation: the loops compile for float32 and float64 as they are imported, and numba keeps
  them on disk (cache=True: beside loops.py, or in the user's cache directory when the package
  is installed read-only, or NUMBA_CACHE_DIR), so only the first run compiles; the seconds it
  took are kept in `load_seconds` (measured: 5 s for the first compilation, 0.5 s from the cache).
"""

import contextlib
import importlib.util
import os
import time

import numpy as np

from gradflow.engine.kernels import kernels_in_use
from gradflow.engine.threads import blas_threads

ENVIRONMENT_VARIABLE = "GRADFLOW_NUMBA"
# what runs compiled loops (loops.py, random_loops.py)
COMPILED = (
    "LayerNorm, RMSNorm, both GELUs, SiLU, attention's softmax, cross-entropy's softmax, Adam's step, "
    "PyTorch's random stream"
)

_loops = None
_why_not = None  # why the loops did not load (None: they did, or were not asked for yet)
_numpy_only = False  # True inside numpy_only()
load_seconds = None  # how long importing (compiling or reading the cache of) the loops took


def loops():
    """gradflow.fast.loops, imported on the first call; None where numba is absent, switched off or broken."""
    if _loops is None and _why_not is None:
        _load()
    return None if _numpy_only else _loops


KINDS = (np.float32, np.float64)  # the floats the loops are compiled for


def loops_for(kind):
    """loops() when they take arrays of this kind of float (KINDS), else None."""
    return loops() if kind in KINDS else None


@contextlib.contextmanager
def numpy_only():
    """Inside the block, every kernel runs its numpy form, as without numba (benchmarks time both)."""
    global _numpy_only
    before, _numpy_only = _numpy_only, True
    try:
        yield
    finally:
        _numpy_only = before


def describe():
    """The kernels the ops run, in one line: "plain", or "fast" and what the fast tier runs compiled
    (numba's loops, on how many threads) or why it runs numpy only. Asked in the fast tier, it loads the loops."""
    if kernels_in_use() == "plain":
        return "plain"
    if loops() is None:
        return f"fast, numpy only ({_why_not or 'numpy_only()'})"
    import numba

    return (
        f"fast, numba {numba.__version__} loops for {COMPILED} on {numba.get_num_threads()} threads "
        f"({numba.config.THREADING_LAYER}), loaded in {load_seconds:.1f} s"
    )


def _load():
    global _loops, _why_not, load_seconds
    if os.environ.get(ENVIRONMENT_VARIABLE, "") == "0":
        _why_not = f"{ENVIRONMENT_VARIABLE}=0"
        return
    if importlib.util.find_spec("numba") is None:
        _why_not = "numba is not installed: gradflow brings it only where numba has a wheel; pip install numba"
        return
    start = time.perf_counter()
    try:
        import numba

        if "NUMBA_THREADING_LAYER" not in os.environ:
            numba.config.THREADING_LAYER = "workqueue"
        if "NUMBA_NUM_THREADS" not in os.environ:
            numba.set_num_threads(max(1, min(blas_threads(), numba.config.NUMBA_NUM_THREADS)))
        from gradflow.fast import loops as compiled_loops
    except Exception as error:  # an installed numba that cannot run here: the numpy kernels do
        _why_not = f"numba failed to load: {type(error).__name__}: {error}"
        return
    _loops, load_seconds = compiled_loops, time.perf_counter() - start
