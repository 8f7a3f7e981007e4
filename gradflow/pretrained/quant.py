"""Block quantization as GGUF stores weights: Q8_0 (8-bit, symmetric) and Q4_1 (4-bit, scale and minimum).

The write-up "The Mathematics Behind LLM Thinking" quantizes a whole tensor with one scale,
s = max|w| / 7, q = clamp(round(w / s), -7, 7), and reads it back as w ~ q s. One outlier then
stretches s for every weight. GGUF instead cuts each row into blocks of 32 weights and gives every
block its own float16 scale, so an outlier costs precision only in its own block:

    Q8_0 (34 bytes per 32 weights, 8.5 bits each)
        d = max|w| / 127,   q = round(w / d) in [-127, 127] (int8)
        w ~ d q

    Q4_1 (20 bytes per 32 weights, 5 bits each)
        m = min w,   d = (max w - min w) / 15,   q = round((w - m) / d) in [0, 15] (4 bits)
        w ~ d q + m

    Q8_0 block:  d (float16) | q_0 ... q_31 (int8)
    Q4_1 block:  d (float16) | m (float16) | 16 bytes: byte j holds q_j in its low 4 bits, q_(j+16) in its high 4

Dequantizing is the second line of each: a multiply (and an add) per weight, done in float32 with
the scales widened from float16 first, which is what the gguf package does, so the results agree
bit for bit (tests/test_smollm2.py).
"""

import numpy as np

BLOCK = 32  # weights per block, both formats


def _blocks(data, nbytes, name):
    """(rows, row_bytes) uint8 -> (rows, blocks per row, nbytes)."""
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] % nbytes:
        raise ValueError(
            f"{name}: expected uint8 rows of {nbytes}-byte blocks, got dtype {data.dtype} and shape {data.shape}"
        )
    return data.reshape(data.shape[0], -1, nbytes)


def _half(blocks, start):
    """The float16 stored at bytes start, start+1 of every block, widened to float32: (rows, blocks, 1)."""
    return blocks[..., start : start + 2].copy().view(np.float16).astype(np.float32)


def dequantize_q8_0(data):
    """w = d q for every block of 32: (rows, 34 * blocks) uint8 -> (rows, 32 * blocks) float32."""
    blocks = _blocks(data, 2 + BLOCK, "dequantize_q8_0")
    d = _half(blocks, 0)
    w = blocks[..., 2:].view(np.int8).astype(np.float32)  # q: (rows, blocks, 32)
    w *= d  # in place: the embedding table alone is 113 MB as float32
    return w.reshape(blocks.shape[0], -1)


def dequantize_q4_1(data):
    """w = d q + m for every block of 32: (rows, 20 * blocks) uint8 -> (rows, 32 * blocks) float32."""
    blocks = _blocks(data, 4 + BLOCK // 2, "dequantize_q4_1")
    d, m = _half(blocks, 0), _half(blocks, 2)
    packed = blocks[..., 4:]  # (rows, blocks, 16): two 4-bit numbers a byte
    w = np.concatenate([packed & 0x0F, packed >> 4], axis=-1).astype(np.float32)  # q_0..q_15, q_16..q_31
    w *= d
    w += m
    return w.reshape(blocks.shape[0], -1)


def quantize_q8_0(w):
    """(rows, 32 * blocks) float -> (rows, 34 * blocks) uint8: d = max|w| / 127, q = round(w / d)."""
    w = _weight_blocks(w, "quantize_q8_0")
    d = np.abs(w).max(axis=-1, keepdims=True) / 127
    inv = np.divide(1, d, out=np.zeros_like(d), where=d > 0)  # an all-zero block stores d = 0, q = 0
    q = np.round(w * inv).astype(np.int8)
    return np.concatenate([d.astype(np.float16).view(np.uint8), q.view(np.uint8)], axis=-1).reshape(w.shape[0], -1)


def quantize_q4_1(w):
    """(rows, 32 k) float -> (rows, 20 k) uint8: m = min w, d = (max w - m) / 15, q = round((w - m) / d)"""
    w = _weight_blocks(w, "quantize_q4_1")
    m = w.min(axis=-1, keepdims=True)
    d = (w.max(axis=-1, keepdims=True) - m) / 15
    inv = np.divide(1, d, out=np.zeros_like(d), where=d > 0)  # a constant block stores d = 0, q = 0
    q = np.clip(np.round((w - m) * inv), 0, 15).astype(np.uint8)
    packed = q[..., : BLOCK // 2] | (q[..., BLOCK // 2 :] << 4)
    scales = np.concatenate([d.astype(np.float16), m.astype(np.float16)], axis=-1).view(np.uint8)
    return np.concatenate([scales, packed], axis=-1).reshape(w.shape[0], -1)


def _weight_blocks(w, name):
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2 or w.shape[1] % BLOCK:
        raise ValueError(f"{name}: expected a 2-D array whose rows hold whole blocks of {BLOCK}, got shape {w.shape}")
    return w.reshape(w.shape[0], -1, BLOCK)


DEQUANTIZE = {"Q8_0": dequantize_q8_0, "Q4_1": dequantize_q4_1}
