"""The threads numpy's matrix products run on (its BLAS library's): how many, and setting them.

gradflow's ops are numpy's, so a product (matmul, linear, attention's scores) runs on BLAS's
threads and every other pass on one core. threadpoolctl reads and sets whichever BLAS numpy
loaded (OpenBLAS, MKL, Accelerate); it is imported on first use, not with gradflow.
"""


def blas_threads():
    """The threads numpy's products run on (the most any loaded BLAS library uses)."""
    from threadpoolctl import threadpool_info

    return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1)


def limit_blas_threads(threads):
    """Products on `threads` threads from now on; returns the limiter, whose restore_original_limits()
    gives the previous number back."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=threads, user_api="blas")
