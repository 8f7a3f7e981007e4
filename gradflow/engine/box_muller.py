"""Normal draws as PyTorch's CPU kernels make them from uniform draws u: the Box-Muller transform
(Box and Muller, "A note on the generation of random normal deviates", 1958),

    z1 = r cos(theta),  z2 = r sin(theta),   r = sqrt(-2 log(1 - u1)),  theta = 2 pi u2,

then mean + std z. PyTorch has two forms, and the numbers differ between them:
- one draw at a time (fewer than 16 values, in double whatever the dtype): u1 and u2 are 53-bit, r uses
  log1p(-u2) and theta u1, z1 is returned and z2 kept for the next single draw (`scalar`);
- blocks of 16 (16 or more values): all the uniform draws first, then per block the first 8 are u1 and
  the last 8 u2, giving z1 in the first half and z2 in the second; a tail of fewer than 16 draws 16 new
  uniforms and recomputes the last 16 values (`blocks`). In float64 with the C library's log, cos and sin.
  In float32, on x86 processors with AVX2 (what PyTorch's wheels run on them), with Cephes' polynomials
  for log, sin and cos (Moshier, "Methods and Programs for Mathematical Functions", 1989, as vectorized by
  Pommier's sse_mathfun) in float32 arithmetic, fused multiply-adds where the compiled kernel fuses them:
  `log_cephes` and `sincos_cephes` repeat those steps so the last bit agrees.
"""

import math

import numpy as np

from gradflow.engine.kernels import kernel

f32 = np.float32


def round_to_odd(s, err):
    """s = a + b rounded to nearest, err = the exact a + b - s: the sum rounded to odd instead (ties and
    inexact sums land on the neighbour with an odd last bit), so that rounding it once more to a narrower
    float is the correct rounding of a + b (Boldo and Melquiond, "Emulation of FMA and correctly rounded
    sums: proved algorithms using rounding to odd", IEEE Trans. Computers 2008)."""
    bits = s.view(np.int64)
    even_and_inexact = (err != 0) & (bits & 1 == 0)
    away = (err > 0) == (s > 0)  # the exact sum is farther from zero than s
    return np.where(even_and_inexact, bits + np.where(away, 1, -1), bits).view(np.float64)


def two_sum(a, b):
    """s = a + b rounded, and its exact error (Knuth's TwoSum)."""
    s = a + b
    b_part = s - a
    return s, (a - (s - b_part)) + (b - b_part)


def two_product(a, b):
    """p = a b rounded, and its exact error (Dekker's product, by Veltkamp's halves)."""
    p = a * b
    halves = []
    for x in (a, b):
        big = x * 134217729.0  # 2^27 + 1
        high = big - (big - x)
        halves.append((high, x - high))
    (ah, al), (bh, bl) = halves
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def fma(a, b, c):
    """a b + c rounded once, in a's dtype (float32 or float64), as a fused multiply-add computes it."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if a.dtype == np.float32:  # the product is exact in float64, the sum rounded once more to float32
        p = np.multiply(a, b, dtype=np.float64)
        s = np.add(p, c, dtype=np.float64)
        # rounding twice errs only where s fell exactly halfway between two float32 (its 29 low bits
        # 1 then 0s): there the sum rounded to odd decides, rarely needed, so computed for those alone
        halfway = s.view(np.int64) & 0x1FFFFFFF == 0x10000000
        if halfway.any():
            c = np.broadcast_to(c.astype(np.float64), s.shape)
            s[halfway] = round_to_odd(*two_sum(p[halfway], c[halfway]))
        return s.astype(np.float32)
    p, p_err = two_product(a, b)
    s, s_err = two_sum(c, p)
    return s + round_to_odd(*two_sum(s_err, p_err))


def scalar(gen, n, mean, std):
    """n draws one at a time (PyTorch's normal_distribution<double>), with gen's kept second value."""
    out = np.empty(n)
    for i in range(n):
        if gen.next_normal is not None:
            z, gen.next_normal = gen.next_normal, None
        else:
            u1, u2 = gen.uniform53(2)
            r, theta = math.sqrt(-2.0 * math.log1p(-u2)), 2.0 * math.pi * u1
            z, gen.next_normal = r * math.cos(theta), r * math.sin(theta)
        out[i] = z if (mean, std) == (0, 1) else fma(np.float64(z), np.float64(std), np.float64(mean))
    return out


def blocks(gen, n, mean, std, dtype):
    """n >= 16 draws in blocks of 16 (PyTorch's normal_fill), dtype float32 or float64."""
    uniform = gen.uniform24 if dtype == np.float32 else gen.uniform53
    out = kernel(block_normals)(uniform(n), mean, std, dtype)
    if n % 16:
        out[-16:] = kernel(block_normals)(uniform(16), mean, std, dtype)
    return out


def block_normals(u, mean, std, dtype):
    """The normals of the whole blocks of 16 in the uniforms u (the first 8 of a block give u1, the last 8
    u2; z1 fills the first half and z2 the second), and u's last len(u) mod 16 values as they are."""
    whole = len(u) // 16 * 16
    out = u.copy()
    d = u[:whole].reshape(-1, 2, 8)
    u1, u2 = 1 - d[:, 0], d[:, 1]  # 1 - u in (0, 1] for the log
    mean, std = dtype.type(mean), dtype.type(std)
    if dtype == np.float32:
        z = normals32(u1, u2, mean, std)
    else:
        r = np.sqrt(-2 * np.log(u1))
        theta = 2.0 * math.pi * u2
        z = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)
        z = z if (mean, std) == (0, 1) else fma(z, std, mean)  # z 1 + 0 is z
    out[:whole] = z.reshape(-1)
    return out


def normals32(u1, u2, mean, std):
    """The float32 blocks' normals, (blocks, 2, 8): mean + std r (cos, sin) with Cephes' log and sincos."""
    r = np.sqrt(f32(-2) * log_cephes(u1))
    sin, cos = sincos_cephes(f32(2.0 * math.pi) * u2)
    z = np.stack([r * cos, r * sin], axis=1)
    return z if (mean, std) == (0, 1) else fma(z, std, mean)


# Cephes' float32 constants, as sse_mathfun writes them
LOG_P = [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
          -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1]  # fmt: skip
LOG_Q1, LOG_Q2 = f32(-2.12194440e-4), f32(0.693359375)  # log 2 in two parts: q2 exact, q1 the rest
PI_4_PARTS = [f32(-0.78515625), f32(-2.4187564849853515625e-4), f32(-3.77489497744594108e-8)]  # -pi/4
SIN_P = [f32(-1.9515295891e-4), f32(8.3321608736e-3), f32(-1.6666654611e-1)]
COS_P = [f32(2.443315711809948e-5), f32(-1.388731625493765e-3), f32(4.166664568298827e-2)]


def log_cephes(x):
    """log x for float32 x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log x = log m + e log 2, log m
    = f - f^2/2 + f^3 P(f) for f = m - 1 (a degree-8 polynomial P, Horner's rule)."""
    bits = np.maximum(x, np.float32(np.finfo(np.float32).tiny)).view(np.int32)
    e = ((bits >> 23) - 0x7F).astype(f32) + f32(1)
    m = ((bits & ~0x7F800000) | f32(0.5).view(np.int32)).view(f32)  # in [0.5, 1)
    small = m < f32(math.sqrt(0.5))
    f = m - f32(1) + np.where(small, m, f32(0))  # m in [0.5, sqrt(1/2)): use 2m - 1, one less in e
    e = e - small.astype(f32)
    f2 = f * f
    poly = np.full_like(f, f32(LOG_P[0]))
    for p in LOG_P[1:]:
        poly = fma(poly, f, f32(p))
    y = fma(poly * f, f2, e * LOG_Q1)  # f^3 P(f) + e q1
    y = fma(f2, f32(-0.5), y)
    return fma(e, LOG_Q2, f + y)


def sincos_cephes(x):
    """(sin x, cos x) for float32 x >= 0: j = the even integer nearest x / (pi/4), reduced x - j pi/4 in
    three parts of pi/4, then the sine or the cosine polynomial of it by the octant j, and the signs."""
    j = (x * f32(4 / math.pi)).astype(np.int32)
    j = (j + 1) & ~1
    y = j.astype(f32)
    for part in PI_4_PARTS:
        x = fma(y, part, x)
    z = x * x
    cos_poly = np.full_like(x, COS_P[0])
    for p in COS_P[1:]:
        cos_poly = fma(cos_poly, z, p)
    cos_poly = fma(cos_poly * z, z, -(z * f32(0.5))) + f32(1)  # 1 - z/2 + z^2 C(z)
    sin_poly = np.full_like(x, SIN_P[0])
    for p in SIN_P[1:]:
        sin_poly = fma(sin_poly, z, p)
    sin_poly = fma(sin_poly * z, x, x)  # x + x z S(z)
    swap = (j & 2) != 0  # octants where sin and cos trade polynomials
    sin = np.where(swap, cos_poly, sin_poly)
    cos = np.where(swap, sin_poly, cos_poly)
    sin = np.where((j & 4) != 0, -sin, sin)
    cos = np.where(((j - 2) & 4) == 0, -cos, cos)
    return sin, cos
