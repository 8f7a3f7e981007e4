"""Compiled loops (numba) for PyTorch's random stream: the Mersenne Twister's words, and the words turned
into uniforms, normals and permutations (gradflow/fast/mt19937.py calls them, only when compiled.py
loaded numba).

Each loop is the plain form's formula element by element, in the same order of operations and the same
dtype, so its numbers are the plain ones to the last bit (tests/test_torch_random.py): the twist and
tempering of engine/mt19937.py, the uniforms and the forward swaps of engine/rng.py, and the Box-Muller
blocks of engine/box_muller.py. Where the plain form emulates a fused multiply-add exactly (rounding
to odd), a loop asks for one (LLVM's llvm.fma: the processor's instruction where it has one, the C
library's fma otherwise), which rounds once as well. float64 normals call the C library's log, cos and
sin, as PyTorch's kernel does, and as numpy's passes do on the AVX2 processors measured here (numpy
has vectorized forms of its own for some processors with AVX-512: there the plain tier's float64
normals could differ in the last bit; not measured).

Integers are held in int64 between a load and a store: numba widens the arithmetic of narrower ones,
and an unsigned 64-bit integer mixed with a signed one would become a float.
"""

import math

import numba
import numpy as np
from numba import types
from numba.cpython.unsafe.numbers import viewer  # a bitcast: the same bits as another type
from numba.extending import intrinsic

from gradflow.engine import box_muller
from gradflow.engine.mt19937 import M, N

f32 = np.float32


def compiled(signature):
    """numba's njit for one signature, cached on disk, compiled as this module is imported."""
    return numba.njit(signature, cache=True, error_model="numpy")


@intrinsic
def fused_multiply_add(typingctx, a, b, c):
    """a b + c rounded once, for three floats of one kind (LLVM's llvm.fma)."""

    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return a(a, b, c), codegen


@intrinsic
def square_root(typingctx, x):
    """sqrt x, correctly rounded, as LLVM's llvm.sqrt (numba's math.sqrt calls the C library's sqrtf, which
    keeps a loop from being vectorized)."""

    def codegen(context, builder, signature, args):
        return builder.call(builder.module.declare_intrinsic("llvm.sqrt", [args[0].type]), args)

    return x(x), codegen


# --- the Mersenne Twister (engine/mt19937.py) ---


@numba.njit(inline="always")
def twisted(block, i, i_next, i_ahead):
    """T(x[i], x[i_next]) xor x[i_ahead] (engine/mt19937.py's next_block, one word)."""
    v = np.int64(block[i_next])
    y = (np.int64(block[i]) & 0x80000000) | (v & 0x7FFFFFFF)
    return np.int64(block[i_ahead]) ^ (y >> 1) ^ ((v & 1) * 0x9908B0DF)


@compiled("i8(u4[::1], i8, u4[::1])")
def draw_words(block, next, out):
    """out = the stream's next words from position `next` of `block`, tempered; returns the new position.
    A used-up block is twisted in place, in next_block's three parts: word i is new once computed, so
    x[i + 397] is the old block's word for the first 227 and the new block's after them."""
    filled = 0
    while filled < out.size:
        if next == N:
            for i in range(N - M):
                block[i] = twisted(block, i, i + 1, i + M)
            for i in range(N - M, N - 1):
                block[i] = twisted(block, i, i + 1, i + M - N)
            block[N - 1] = twisted(block, N - 1, 0, M - 1)
            next = 0
        take = min(out.size - filled, N - next)
        for k in range(take):
            y = np.int64(block[next + k])
            y ^= y >> 11
            y ^= (y << 7) & 0x9D2C5680
            y ^= (y << 15) & 0xEFC60000
            out[filled + k] = y ^ (y >> 18)
        filled, next = filled + take, next + take
    return next


# --- uniforms and permutations (engine/rng.py) ---


@compiled("void(u4[::1], f8[::1])")
def uniform53(words, out):
    """out[i] = (W_i mod 2^53) 2^-53, W_i the 64-bit draw of words 2i (high) and 2i + 1."""
    for i in range(out.size):
        high, low = np.int64(words[2 * i]) & 0x1FFFFF, np.int64(words[2 * i + 1])
        out[i] = np.float64((high << 32) | low) * 2.0**-53


@compiled("void(i8[::1], i8[::1])")
def forward_swaps(offsets, order):
    """order = 0 .. n-1, then for i = 0 .. n-2 swap order[i] and order[i + offsets[i]]."""
    for i in range(order.size):
        order[i] = i
    for i in range(offsets.size):
        j = i + offsets[i]
        order[i], order[j] = order[j], order[i]


@compiled("void(f4[::1], f4, f4, f4[::1])")
def scale_and_shift32(u, scale, shift, out):
    """out = u scale + shift, rounded once (box_muller.fma with one scale and one shift)."""
    for i in range(u.size):
        out[i] = fused_multiply_add(u[i], scale, shift)


@compiled("void(f8[::1], f8, f8, f8[::1])")
def scale_and_shift64(u, scale, shift, out):
    """out = u scale + shift, rounded once, in float64."""
    for i in range(u.size):
        out[i] = fused_multiply_add(u[i], scale, shift)


# --- normals in blocks of 16 (engine/box_muller.py's block_normals) ---

_LOG_P = tuple(f32(p) for p in box_muller.LOG_P)
_LOG_Q1, _LOG_Q2 = box_muller.LOG_Q1, box_muller.LOG_Q2
_PI_4_A, _PI_4_B, _PI_4_C = box_muller.PI_4_PARTS
_SIN_P0, _SIN_P1, _SIN_P2 = box_muller.SIN_P
_COS_P0, _COS_P1, _COS_P2 = box_muller.COS_P
_TINY, _SQRT_HALF = f32(np.finfo(np.float32).tiny), f32(math.sqrt(0.5))
_ZERO, _ONE, _HALF, _MINUS_TWO = f32(0), f32(1), f32(0.5), f32(-2)
_TWO_PI_32, _FOUR_OVER_PI = f32(2.0 * math.pi), f32(4 / math.pi)


@numba.njit(inline="always")
def log_cephes(x):
    """box_muller.log_cephes for one float32 x > 0, without branches (so that a block's 8 vectorize)."""
    bits = np.int64(viewer(max(x, _TINY), types.int32))
    m = viewer(np.int32((bits & 0x807FFFFF) | 0x3F000000), types.float32)  # in [0.5, 1)
    small = m < _SQRT_HALF  # then 2m - 1, and one less in e
    e = f32((bits >> 23) - 0x7F) + _ONE - (_ONE if small else _ZERO)
    f = (m - _ONE) + (m if small else _ZERO)
    f2 = f * f
    poly = _LOG_P[0]
    for k in range(1, len(_LOG_P)):
        poly = fused_multiply_add(poly, f, _LOG_P[k])
    y = fused_multiply_add(poly * f, f2, e * _LOG_Q1)
    y = fused_multiply_add(f2, -_HALF, y)
    return fused_multiply_add(e, _LOG_Q2, f + y)


@numba.njit(inline="always")
def sincos_cephes(x):
    """box_muller.sincos_cephes for one float32 x >= 0: (sin x, cos x), without branches."""
    j = np.int64(np.int32(x * _FOUR_OVER_PI))
    j = (j + 1) & ~1
    y = f32(j)
    x = fused_multiply_add(y, _PI_4_A, x)
    x = fused_multiply_add(y, _PI_4_B, x)
    x = fused_multiply_add(y, _PI_4_C, x)
    z = x * x
    cos_poly = fused_multiply_add(fused_multiply_add(_COS_P0, z, _COS_P1), z, _COS_P2)
    cos_poly = fused_multiply_add(cos_poly * z, z, -(z * _HALF)) + _ONE
    sin_poly = fused_multiply_add(fused_multiply_add(_SIN_P0, z, _SIN_P1), z, _SIN_P2)
    sin_poly = fused_multiply_add(sin_poly * z, x, x)
    swap = (j & 2) != 0
    sin = cos_poly if swap else sin_poly
    cos = sin_poly if swap else cos_poly
    return (-sin if (j & 4) != 0 else sin), (-cos if ((j - 2) & 4) == 0 else cos)


@compiled("void(f4[::1], f4, f4, b1, f4[::1])")
def block_normals32(u, mean, std, scaled, out):
    """For each block of 16 uniforms: u1 = 1 - the first 8, u2 = the last 8, r = sqrt(-2 log u1) and
    theta = 2 pi u2 in float32 with Cephes' log and sincos, out = r cos theta then r sin theta; then
    mean + std z (one rounding) when scaled. The uniforms after the last whole block are copied."""
    out[:] = u  # then each lane reads and writes the same two places of out: no two lanes touch one place
    whole = u.size // 16 * 16
    for b in range(0, whole, 16):
        for k in range(8):  # the 8 lanes of a block, one vector instruction each where the processor has AVX
            r = square_root(_MINUS_TWO * log_cephes(_ONE - out[b + k]))
            sin, cos = sincos_cephes(_TWO_PI_32 * out[b + 8 + k])
            out[b + k], out[b + 8 + k] = r * cos, r * sin
    if scaled:
        for i in range(whole):
            out[i] = fused_multiply_add(out[i], std, mean)


@compiled("void(f8[::1], f8, f8, b1, f8[::1])")
def block_normals64(u, mean, std, scaled, out):
    """block_normals32 in float64, with the C library's log, cos and sin."""
    whole = u.size // 16 * 16
    two_pi = 2.0 * math.pi
    for b in range(0, whole, 16):
        for k in range(8):
            r = math.sqrt(-2.0 * math.log(1.0 - u[b + k]))
            theta = two_pi * u[b + 8 + k]
            out[b + k], out[b + 8 + k] = r * math.cos(theta), r * math.sin(theta)
    if scaled:
        for i in range(whole):
            out[i] = fused_multiply_add(out[i], std, mean)
    out[whole:] = u[whole:]
