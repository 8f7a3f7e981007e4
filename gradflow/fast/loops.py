"""Compiled loops (numba) for the fast tier's elementwise and row-wise passes.

Imported only by gradflow/fast/compiled.py, the first time the fast tier needs one of them: with
random_loops.py (PyTorch's random stream, imported by fast/mt19937.py once compiled.py has loaded
numba), one of the two modules of gradflow that import numba. Each loop is compiled ahead of its first call for
float32 and float64 (the signatures below) and cached on disk (cache=True), so the compilation is
paid once per installation (compiled.py times it).

The loops are the plain ops' formulas element by element, in the same order of operations. The
one freedom taken is in the sums along a row (total, total_of_product): they may add in any
order ("reassoc", so that they vectorize; numpy's own sums add pairwise, in another order
again), so each value is the plain op's up to the rounding of its sums. No other fastmath.
Where a loop needs exp (the softmax of attention and of cross-entropy, GELU's tanh form, SiLU's sigmoid), it
computes its own (exp_of_nonpositive), to within an ulp or three of numpy's: numba would call the C
library's exp once per element, which keeps the loop from being vectorized. Vectorized, it takes 0.039 ms for
196,608 float32 values, numpy's own exp 0.063 (0.096 when 2^k was read from a table).
A loop with parallel=True shares its elements out among numba's threads (prange); those that
take less time than waking the threads run on one core.
"""

import math

import numba
import numpy as np
from numba import prange, types
from numba.extending import intrinsic, overload

from gradflow.engine.ops.elementwise import GELU_A, GELU_C

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


@compiled("void(F[:, ::1], F[:, ::1], F[::1], F[::1], F[:, ::1], f8[::1], f8[::1])", parallel=False)
def layer_norm_backward(g, xhat, r, w, dx, dw, db):
    """Each row i, with gh = g_i w:  dx_i = r_i (gh - mean(gh) - xhat_i mean(gh xhat_i))
    (ops.LayerNorm's backward for x), and over the rows  dw = sum_i g_i xhat_i,  db = sum_i g_i,
    added up in float64 while each row is at hand (dw, db empty: not wanted)."""
    n, d = g.shape
    for i in range(n):
        if dw.size:
            for j in range(d):
                dw[j] += g[i, j] * xhat[i, j]
        if db.size:
            for j in range(d):
                db[j] += g[i, j]
        for j in range(d):
            dx[i, j] = g[i, j] * w[j]  # gh, then dx in the same row
        gh_mean, ghx_mean = total(dx[i]) / d, total_of_product(dx[i], xhat[i]) / d
        for j in range(d):
            dx[i, j] = r[i] * (dx[i, j] - gh_mean - xhat[i, j] * ghx_mean)


@compiled("void(F[:, ::1], F[::1], f8, F[:, ::1], F[:, ::1], F[::1])", parallel=False)
def rms_norm_forward(x, w, eps, y, xhat, r):
    """Each row i of x (n, D):  r_i = 1 / sqrt(mean(x_i^2) + eps),  xhat_i = x_i r_i,  y_i = xhat_i w
    (ops.RMSNorm's forward: LayerNorm's without the centring and the bias)."""
    n, d = x.shape
    for i in range(n):
        r[i] = 1 / math.sqrt(total_of_product(x[i], x[i]) / d + eps)
        for j in range(d):
            xhat[i, j] = x[i, j] * r[i]
            y[i, j] = xhat[i, j] * w[j]


@compiled("void(F[:, ::1], F[:, ::1], F[::1], F[::1], F[:, ::1], f8[::1])", parallel=False)
def rms_norm_backward(g, xhat, r, w, dx, dw):
    """Each row i, with gh = g_i w:  dx_i = r_i (gh - xhat_i mean(gh xhat_i))  (ops.RMSNorm's backward
    for x), and over the rows  dw = sum_i g_i xhat_i, added up in float64 while each row is at hand
    (dw empty: not wanted)."""
    n, d = g.shape
    for i in range(n):
        if dw.size:
            for j in range(d):
                dw[j] += g[i, j] * xhat[i, j]
        for j in range(d):
            dx[i, j] = g[i, j] * w[j]  # gh, then dx in the same row
        ghx_mean = total_of_product(dx[i], xhat[i]) / d
        for j in range(d):
            dx[i, j] = r[i] * (dx[i, j] - xhat[i, j] * ghx_mean)


def exp_of_nonpositive(kind):
    """exp(x) for x <= 0 (or NaN), as a polynomial that vectorizes, for floats of one kind.

    numba calls the C library's exp once per element (numba has no vector exp since 0.61), which
    keeps a loop from being vectorized. Here, as in the C library: x = k ln 2 + r with k an integer
    (the nearest to x / ln 2, by adding and subtracting 1.5 2^p, p the kind's mantissa bits) and
    |r| <= ln 2 / 2, so exp(x) = 2^k exp(r): exp(r) is its Taylor series (to r^7 in float32, r^13 in
    float64: the next term is below half an ulp), and 2^k is the float whose exponent bits are
    k + bias (float_from_bits). ln 2 is split in two (LN2[kind]: a short high part, so that k ln2_hi
    is exact, and the rest), so r keeps every bit. Below the smallest normal number the result is
    0; exp(-inf) = 0, NaN stays NaN. Within 3 ulps of numpy's exp in float32, 1 in float64.
    """
    f, bits = np.dtype(kind).type, {"f4": np.int32, "f8": np.int64}[kind]
    ln2_hi, ln2_lo = (f(c) for c in LN2[kind])
    log2e, magic = f(1 / math.log(2)), f(1.5 * 2.0 ** np.finfo(kind).nmant)
    degree = 7 if kind == "f4" else 13
    taylor = tuple(f(1 / math.factorial(n)) for n in range(degree + 1))
    k_min = np.finfo(kind).minexp  # 2^k_min: the smallest normal number
    low, bias, mantissa = f(k_min * math.log(2)), bits(np.finfo(kind).maxexp - 1), np.finfo(kind).nmant

    @numba.njit(inline="always", error_model="numpy")
    def exp(x):
        if not x >= low:  # below the smallest normal (0), or NaN (itself)
            return f(0) if x < low else x
        k = (x * log2e + magic) - magic  # the integer nearest to x / ln 2, in k_min .. 0
        r = (x - k * ln2_hi) - k * ln2_lo
        p = taylor[degree]
        for n in range(degree - 1, -1, -1):
            p = p * r + taylor[n]
        return p * float_from_bits(bits((bits(k) + bias) << mantissa))  # p 2^k (numba widens int32 arithmetic)

    return exp


@intrinsic
def float_from_bits(typingctx, bits):
    """The float whose bits are those of `bits` (an int32 gives a float32, an int64 a float64)."""
    kind = {types.int32: types.float32, types.int64: types.float64}[bits]

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(kind))

    return kind(bits), codegen


LN2 = {"f4": (0.693359375, -2.12194440e-4), "f8": (6.93147180369123816490e-01, 1.90821492927058770002e-10)}
EXP = {kind: exp_of_nonpositive(kind) for kind in KINDS}


def exp_for(x):
    """exp_of_nonpositive of x's kind, chosen as numba compiles (overload below)."""


@overload(exp_for, inline="always")
def _exp_for(x):
    exp = EXP["f4"] if x == numba.float32 else EXP["f8"]
    return lambda x: exp(x)


@compiled("void(F[:, :, ::1], F, i8)", parallel=False)
def attention_softmax(s, scale, shift):
    """Attention's weights, in place of its scores: s[n, j, i] is matrix n's score of key j for query i
    (each matrix stored keys-first, so that every pass below runs along the queries and vectorizes).
    Query i sees key j when j <= i + shift (shift >= the number of keys: every key). For each query,
    over the keys it sees:  x = s * scale,  a = exp(x - max x) / sum exp(x - max x);  a = 0 for the
    others. As fast.attention.softmax_weights's numpy passes, in the same order; a query that sees no
    key gets zeros.
    """
    matrices, keys, queries = s.shape
    m, total, one = np.empty(queries, s.dtype), np.empty(queries, s.dtype), s.dtype.type(1)
    for n in range(matrices):
        m[:] = -np.inf
        for j in range(keys):
            x, m_seen = s[n, j, max(0, j - shift) :], m[max(0, j - shift) :]  # the queries that see key j
            for i in range(x.size):
                x[i] *= scale
                if x[i] > m_seen[i] or x[i] != x[i]:  # max, and NaN if any is, as np.max
                    m_seen[i] = x[i]
        for i in range(queries):
            if m[i] == -np.inf:  # no key seen, or all at -inf: subtract 0 (-inf - -inf would be NaN)
                m[i] = 0
        total[:] = 0
        for j in range(keys):
            first = min(max(0, j - shift), queries)
            s[n, j, :first] = 0
            x, m_seen, total_seen = s[n, j, first:], m[first:], total[first:]
            for i in range(x.size):
                x[i] = exp_for(x[i] - m_seen[i])
                total_seen[i] += x[i]
        for i in range(queries):
            total[i] = one / total[i] if total[i] > 0 else one  # 1 / sum, in s's kind
        for j in range(keys):
            for i in range(queries):
                s[n, j, i] *= total[i]


@compiled("void(F[:, :, ::1], F[:, :, ::1], F)", parallel=False)
def attention_softmax_backward(d, a, scale):
    """In place, laid out as attention_softmax's s: d holds dA and becomes dS * scale, where for each
    query  dS = A * (dA - sum over keys of dA * A)  (the softmax's backward; fast.attention's numpy
    passes, in the same order)."""
    matrices, keys, queries = d.shape
    t = np.empty(queries, d.dtype)
    for n in range(matrices):
        t[:] = 0
        for j in range(keys):
            for i in range(queries):
                t[i] += d[n, j, i] * a[n, j, i]
        for j in range(keys):
            for i in range(queries):
                d[n, j, i] = ((d[n, j, i] - t[i]) * a[n, j, i]) * scale


@compiled("void(F[::1], F[::1], F[::1])", parallel=False)
def gelu_forward(x, y, dydx):
    """GELU's tanh form and its derivative in one pass (fast.gelu's algebra; dydx empty: not wanted):
    u = (ca x^2 + c) x,  h = (1 + tanh(u)) / 2 = 1 / (1 + exp(-2u)),  y = x h,
    dy/dx = h (1 + (x - y)(6ca x^2 + 2c)).  h is written with e = exp(-2|u|), whose argument is never
    positive: 1 / (1 + e) for u >= 0, e / (1 + e) below (the same number, without overflow).
    Every constant is of x's kind (an integer or a Python float would turn float32 into float64).
    Whether dydx is wanted is asked once, outside the loops: asked per element, it kept the loop
    from being vectorized (1.6 to 1.8 times as long, float32, (12, 64, 512))."""
    f = x.dtype.type
    one, two, c, ca = f(1), f(2), f(GELU_C), f(GELU_C * GELU_A)
    dydx_c, dydx_a = f(2 * GELU_C), f(6 * GELU_C * GELU_A)
    if dydx.size == 0:
        for i in range(x.size):
            u = (x[i] * x[i] * ca + c) * x[i]
            e = exp_for(-two * abs(u))
            y[i] = x[i] * ((one if u >= 0 else e) / (one + e))
        return
    for i in range(x.size):
        x2 = x[i] * x[i]
        u = (x2 * ca + c) * x[i]
        e = exp_for(-two * abs(u))
        h = (one if u >= 0 else e) / (one + e)
        y[i] = x[i] * h
        dydx[i] = h * (one + (x[i] - y[i]) * (x2 * dydx_a + dydx_c))


@compiled("void(F[::1], F[::1], F[::1])", parallel=False)
def silu_forward(x, y, dydx):
    """SiLU and its derivative in one pass (dydx empty: not wanted):  s = sigmoid(x),  y = x s,
    dy/dx = s (1 + x (1 - s)).  s is written as ops.elementwise.sigmoid writes it, with e = exp(-|x|),
    whose argument is never positive: 1 / (1 + e) for x >= 0, e / (1 + e) below. As gelu_forward,
    constants of x's kind, and whether dydx is wanted asked once, outside the loops."""
    one = x.dtype.type(1)
    if dydx.size == 0:
        for i in range(x.size):
            e = exp_for(-abs(x[i]))
            y[i] = x[i] * ((one if x[i] >= 0 else e) / (one + e))
        return
    for i in range(x.size):
        e = exp_for(-abs(x[i]))
        s = (one if x[i] >= 0 else e) / (one + e)
        y[i] = x[i] * s
        dydx[i] = s * (one + x[i] * (one - s))


@compiled("void(F[::1], F[::1], F[::1])", parallel=True)
def gelu_erf_forward(x, y, cdf):
    """y = x Phi(x),  Phi(x) = (1 + erf(x / sqrt(2))) / 2, with erf in float64 and Phi rounded once
    to x's kind, as ops.GeluErf (whose erf is math.erf: the same C library function)."""
    for i in prange(x.size):
        cdf[i] = (1 + math.erf(float(x[i]) / math.sqrt(2))) / 2
        y[i] = x[i] * cdf[i]


@compiled("void(F[::1], F[::1], F[::1], F[::1], F[::1], F, F, F, F, F, F, F, F, F)", parallel=False)
def adam_step(p, g, m, v, v_max, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, correction1, correction2, eps,
              lr):  # fmt: skip
    """Each element, in optim.adam.adam_steps's order of operations (correction1 = 1 - beta1^t,
    correction2 = 1 - beta2^t, every constant rounded to p's kind as numpy rounds them):
    p = p decay (AdamW's decay; decay = 1 leaves p as it is),  m = beta1 m + (1 - beta1) g,
    v = beta2 v + (1 - beta2) g^2,  v_max = max(v_max, v) when v_max is not empty (AMSGrad),
    p = p - lr (m / correction1) / (sqrt(v / correction2) + eps)."""
    amsgrad = v_max.size > 0
    for i in range(p.size):
        mi = beta1 * m[i] + one_minus_beta1 * g[i]
        vi = beta2 * v[i] + one_minus_beta2 * (g[i] * g[i])
        m[i], v[i] = mi, vi
        if amsgrad:
            if v_max[i] > vi or v_max[i] != v_max[i]:  # np.maximum: the larger, or NaN if either is
                vi = v_max[i]
            v_max[i] = vi
        p[i] = p[i] * decay - lr * (mi / correction1) / (np.sqrt(vi / correction2) + eps)


@compiled("void(F[:, ::1], F[:, ::1], F[::1])", parallel=False)
def cross_entropy_softmax(z, p, lse):
    """Each row n of the logits z (N, C):  m = max(z_n),  e = exp(z_n - m),  lse_n = m + log(sum e),
    p_n = e / sum e = softmax(z_n)  (ops.CrossEntropy's forward, whose p = exp(z - lse) is the same up
    to rounding). Where m is not finite it is 0, as in ops.reduce.logsumexp, and the row's exp, whose
    argument may then be positive, is the C library's."""
    rows, classes = z.shape
    zero = z.dtype.type(0)  # of z's kind, as m is (an integer 0 would make m a float64)
    for n in range(rows):
        m = z[n, 0]
        for c in range(1, classes):
            if z[n, c] > m or z[n, c] != z[n, c]:  # max, and NaN if any is, as np.max
                m = z[n, c]
        if m - m == 0:  # finite: every z_n - m <= 0
            for c in range(classes):
                p[n, c] = exp_for(z[n, c] - m)
        else:
            m = zero
            for c in range(classes):
                p[n, c] = math.exp(z[n, c])
        s = total(p[n])
        lse[n] = m + math.log(s)
        inverse = 1 / s  # 1 / 0 = inf: the row's p is NaN, as exp(-inf - -inf) in the plain op
        for c in range(classes):
            p[n, c] *= inverse


@compiled("void(F[:, ::1], i8[::1], F[::1], F[:, ::1])", parallel=False)
def cross_entropy_backward(p, t, w, dz):
    """dz_n = (p_n - onehot(t_n)) w_n for each row n, in ops.CrossEntropy's backward's order (the one
    subtracted from p, then the product), so the same numbers to the last bit."""
    rows, classes = p.shape
    one = p.dtype.type(1)
    for n in range(rows):
        for c in range(classes):
            dz[n, c] = p[n, c] * w[n]
        dz[n, t[n]] = (p[n, t[n]] - one) * w[n]
