"""Compiled loops (numba) for the fast tier's elementwise and row-wise passes.

Imported only by gradflow/fast/compiled.py, the first time the fast tier needs one of them: this is
the one module of gradflow that imports numba. Each loop is compiled ahead of its first call for
float32 and float64 (the signatures below) and cached on disk (cache=True), so the compilation is
paid once per installation (compiled.py times it).

The loops are the plain ops' formulas element by element, in the same order of operations. The
one freedom taken is in the sums along a row (total, total_of_product): they may add in any
order ("reassoc", so that they vectorize; numpy's own sums add pairwise, in another order
again), so each value is the plain op's up to the rounding of its sums. No other fastmath.
A loop with parallel=True shares its elements out among numba's threads (prange); those that
take less time than waking the threads run on one core.
"""

import math

import numba
import numpy as np
from numba import prange

KINDS = ("f4", "f8")


def compiled(*signatures, parallel):
    """numba's njit for the given signatures (F: each kind of float), cached on disk; with
    parallel=True its prange loop is shared out among numba's threads. A division by zero gives
    inf or NaN, as numpy's does (error_model="numpy"; Python's would raise, and test each divisor
    first, which keeps the loops from being vectorized)."""
    signatures = [s.replace("F", kind) for s in signatures for kind in KINDS]
    return numba.njit(signatures, parallel=parallel, cache=True, error_model="numpy")


@numba.njit(fastmath={"reassoc"})
def total(a):
    """sum(a) over a row, in float64, in the order that vectorizes best ("reassoc": the only
    freedom taken from the plain formulas)."""
    s = 0.0
    for j in range(a.size):
        s += a[j]
    return s


@numba.njit(fastmath={"reassoc"})
def total_of_product(a, b):
    """sum(a * b) over a row, in float64, as total()."""
    s = 0.0
    for j in range(a.size):
        s += a[j] * b[j]
    return s


@compiled("void(F[:, ::1], F[::1], F[::1], f8, F[:, ::1], F[:, ::1], F[::1])", parallel=False)
def layer_norm_forward(x, w, b, eps, y, xhat, r):
    """Each row i of x (n, D):  mu = mean(x_i),  var = mean((x_i - mu)^2),  r_i = 1 / sqrt(var + eps),
    xhat_i = (x_i - mu) r_i,  y_i = xhat_i w + b   (ops.LayerNorm's forward)."""
    n, d = x.shape
    for i in range(n):
        mu = total(x[i]) / d
        for j in range(d):
            xhat[i, j] = x[i, j] - mu  # centred first: var = mean(xhat_i^2)
        r[i] = 1 / math.sqrt(total_of_product(xhat[i], xhat[i]) / d + eps)
        for j in range(d):
            xhat[i, j] *= r[i]
            y[i, j] = xhat[i, j] * w[j] + b[j]


@compiled("void(F[:, ::1], F[:, ::1], F[::1], F[::1], F[:, ::1])", parallel=False)
def layer_norm_backward(g, xhat, r, w, dx):
    """Each row i, with gh = g_i w:  dx_i = r_i (gh - mean(gh) - xhat_i mean(gh xhat_i))
    (ops.LayerNorm's backward for x; dw and db are sums over rows, left to numpy)."""
    n, d = g.shape
    for i in range(n):
        for j in range(d):
            dx[i, j] = g[i, j] * w[j]  # gh, then dx in the same row
        gh_mean, ghx_mean = total(dx[i]) / d, total_of_product(dx[i], xhat[i]) / d
        for j in range(d):
            dx[i, j] = r[i] * (dx[i, j] - gh_mean - xhat[i, j] * ghx_mean)


@compiled("void(F[::1], F[::1], F[::1])", parallel=True)
def gelu_erf_forward(x, y, cdf):
    """y = x Phi(x),  Phi(x) = (1 + erf(x / sqrt(2))) / 2, with erf in float64 and Phi rounded once
    to x's kind, as ops.GeluErf (whose erf is math.erf: the same C library function)."""
    for i in prange(x.size):
        cdf[i] = (1 + math.erf(float(x[i]) / math.sqrt(2))) / 2
        y[i] = x[i] * cdf[i]


@compiled("void(F[::1], F[::1], F[::1], F[::1], F[::1], F, F, F, F, F, F, F)", parallel=False)
def adam_step(p, g, m, v, v_max, beta1, one_minus_beta1, beta2, one_minus_beta2, r, eps, s):
    """Each element, in optim.adam.adam_step's order of operations (r = 1 / sqrt(1 - beta2^t),
    s = lr / (1 - beta1^t), every constant rounded to p's kind as numpy rounds them):
    m = m beta1 + g (1 - beta1),  v = v beta2 + (g g)(1 - beta2),  v_max = max(v_max, v) when v_max
    is not empty (AMSGrad),  p = p - (m / (sqrt(v or v_max) r + eps)) s."""
    amsgrad = v_max.size > 0
    for i in range(p.size):
        mi = m[i] * beta1 + g[i] * one_minus_beta1
        vi = v[i] * beta2 + (g[i] * g[i]) * one_minus_beta2
        m[i], v[i] = mi, vi
        if amsgrad:
            if v_max[i] > vi or v_max[i] != v_max[i]:  # np.maximum: the larger, or NaN if either is
                vi = v_max[i]
            v_max[i] = vi
        p[i] -= (mi / (np.sqrt(vi) * r + eps)) * s
