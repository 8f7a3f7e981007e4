"""Attention with its scores stored keys-first, in blocks of queries under a causal mask:
replaces ops.ScaledDotProductAttention (gradflow/engine/ops/attention.py), same formulas.

What changes, and why:
- The scores are stored keys-first (see keys_first): the softmax's reductions along each
  query's row of keys then run as a few vectorized passes over all rows at once instead of one
  small loop per row.
- The softmax runs in the scores' own buffer, and backward turns dA into dS in its own buffer.
- With numba, the passes after each product are one compiled loop each
  (loops.attention_softmax and its backward): a causal mask is applied in the loop, which skips
  the exponentials of the keys it hides, and each matrix of scores is stored transposed (see
  keys_first). Without numba, numpy's passes.
- Under a causal mask the queries go in blocks that skip the keys they cannot see (query_blocks):
  long contexts compute about half the scores.
- The output and the gradients are laid out like the inputs (see like): heads are usually a
  transposed view of (B, T, n_heads * hs), and transposing back to (B, T, d) is then a view.

Measured (benchmarks/kernels.py, float32, default threads, 2 cores): forward and backward of the
baby GPT's causal attention, (12, 4, 64, 32), take 0.70 ms with the loops, 0.93 with numpy's passes
and 1.31 with the plain op; a whole training step at context 64 is 1.14 times as long with the
plain op, and 1.03 to 1.04 times as long with numpy's passes instead of the loops (alternating
runs, before the loops' exp built 2^k from its bits). Earlier, with one BLAS thread and no loops:
at context 256 the step was 1.16 to 1.18 times as long with the plain op, and 1.09 times as long
with this kernel in one block of queries.
"""

import math

import numpy as np

from gradflow.engine.autograd import Function
from gradflow.engine.ops.attention import allowed_keys
from gradflow.fast import compiled


def keys_first(shape, *like, outermost=True):
    """An empty (..., Tq, Tk) array stored keys-first: its memory is that of a (Tk, ..., Tq) array, or
    with outermost=False that of a (..., Tk, Tq) array (each matrix transposed).

    Why: softmax reduces each query's row of Tk scores. numpy runs a reduction over a short
    contiguous row as one small loop per row (75 ns each, 3,072 rows in the baby GPT's attention);
    when the keys axis is the outermost in memory, the same reduction becomes Tk vectorized passes
    over all rows at once. The compiled loop (loops.attention_softmax) runs along the queries of one
    matrix at a time, so it takes each matrix transposed: BLAS then writes and reads each matrix in
    one block of memory, about twice as fast as spread over the whole array (130 against 65 us for
    the baby GPT's scores). Either way scores^T = k q^T is an ordinary row-major product.
    """
    dtype = np.result_type(*like)
    if outermost:
        return np.empty(shape[-1:] + shape[:-1], dtype).transpose(*range(1, len(shape)), 0)
    return np.swapaxes(np.empty(shape[:-2] + shape[:-3:-1], dtype), -1, -2)


def score_bias(allowed, bias, tq, tk, dtype, outermost):
    """What is added to the scores, of shape (..., tq, tk) stored keys-first like them (keys_first's
    `outermost`; adding it then walks both in the same order): the additive `bias` (PyTorch's float
    attn_mask), and -inf where `allowed` forbids a key; None when there is neither. Adding it gives
    exactly the plain op's scores: x + b where allowed, and x - inf = -inf where not."""
    if allowed is None and bias is None:
        return None
    added = np.zeros((), dtype) if bias is None else bias.astype(dtype, copy=False)
    if allowed is not None:
        added = np.where(allowed, added, -np.inf).astype(dtype, copy=False)
    added = np.broadcast_to(added, np.broadcast_shapes(added.shape, (tq, tk)))
    stored = keys_first(added.shape, added, outermost=outermost)
    stored[...] = added
    return stored


def matrices_of(scores):
    """Scores stored keys-first, each matrix transposed, as one (matrices, Tk, Tq) array (a view)."""
    return np.swapaxes(scores, -1, -2).reshape((-1,) + scores.shape[:-3:-1])


def softmax_weights(q, k, bias, scale, out, loops, shift):
    """out = softmax(q k^T * scale + bias) along the keys, computed in out's own buffer (keys-first);
    a query with no allowed key gets zeros, as ops.attention.softmax_of_scores.

    With the compiled `loops` (out stored with each matrix transposed), the passes after the
    product are one loop, which also applies a causal mask given by `shift` (query i sees key j
    when j <= i + shift; None: every key) and skips the keys it hides. Without them (loops None),
    numpy's passes over out stored keys-outermost, with any mask in the bias.
    """
    np.matmul(k, np.swapaxes(q, -1, -2), out=np.swapaxes(out, -1, -2))  # scores^T = k q^T, row-major
    if loops is not None:
        if bias is not None:
            out *= scale
            out += bias
            scale = 1
        keys = out.shape[-1] if shift is None else shift
        loops.attention_softmax(matrices_of(out), out.dtype.type(scale), keys)
        return out
    out *= scale
    if bias is not None:
        out += bias
    m = out.max(axis=-1, keepdims=True)
    out -= np.where(np.isfinite(m), m, 0)
    np.exp(out, out=out)
    s = out.sum(axis=-1, keepdims=True)
    out *= 1 / np.where(s > 0, s, 1)
    return out


QUERY_BLOCK = 128  # causal attention runs on blocks of this many queries (see query_blocks)


def query_blocks(tq, tk, causal):
    """(queries, keys) slice pairs that cover every score a mask can leave nonzero.

    Under a causal mask query i sees keys j <= i + (tk - tq) only. Cut into blocks of QUERY_BLOCK
    queries, each block needs the keys up to its last query's, not all of them: with T queries
    and keys about (T + QUERY_BLOCK) / 2 keys per query instead of T, so long contexts do about
    half the products and exponentials. (FlashAttention's tiles, without its running softmax:
    here a block holds whole rows of scores.) The last block always sees every key.
    """
    if not causal or tq <= QUERY_BLOCK:
        return [(slice(0, tq), slice(0, tk))]
    return [
        (slice(a, min(a + QUERY_BLOCK, tq)), slice(0, max(min(a + QUERY_BLOCK, tq) + tk - tq, 0)))
        for a in range(0, tq, QUERY_BLOCK)
    ]


def like(a, shape, dtype):
    """An empty array of `shape`, its memory in the axis order of a's when a is of that shape and
    not broadcast (numpy's 'K' order), else row-major."""
    if a.shape == shape and 0 not in a.strides:
        return np.empty_like(a, dtype=dtype)
    return np.empty(shape, dtype)


def add_product(a, b, into):
    """into += a @ b, the product made in into's own memory order (adding across orders is slow)."""
    product = np.empty_like(into)
    np.matmul(a, b, out=product)
    into += product


class ScaledDotProductAttention(Function):
    """out = softmax(q k^T * scale + bias, masked) * drop @ v, as ops.ScaledDotProductAttention, with
    the same arguments and backward; the scores keys-first, and in blocks of queries under a causal mask."""

    name = "attention"

    @staticmethod
    def forward(ctx, q, k, v, bias=None, allowed=None, causal=False, scale=None, drop=None):
        scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        tq, (tk, dv) = q.shape[-2], v.shape[-2:]
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        # q, k and v viewed over one batch shape, so that every product and slice below lines up
        q, k, v = (a if a.shape[:-2] == batch else np.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))
        kind = np.result_type(q, k)
        loops = compiled.loops_for(kind)
        loop_masks = causal and allowed is None and bias is None and loops is not None  # a causal mask alone:
        # the compiled loop applies it, skipping the keys it hides; any other goes into the bias
        outermost = loops is None
        bias = score_bias(allowed_keys(allowed, causal and not loop_masks, tq, tk), bias, tq, tk, kind, outermost)
        blocks = query_blocks(tq, tk, causal)
        attn = [keys_first(batch + (r.stop - r.start, keys.stop), q, k, outermost=outermost) for r, keys in blocks]
        dropped = attn if drop is None else [np.empty_like(a) for a in attn]
        out = like(q, batch + (tq, dv), np.result_type(q, k, v))
        for (rows, keys), a, a_dropped in zip(blocks, attn, dropped):
            if keys.stop == 0:  # queries before every key (more queries than keys): all masked
                out[..., rows, :] = 0
                continue
            b = None if bias is None else bias[..., rows, keys]
            shift = rows.start + tk - tq if loop_masks else None  # query rows.start + i sees keys j <= i + shift
            softmax_weights(q[..., rows, :], k[..., keys, :], b, scale, a, loops, shift)
            if drop is not None:
                np.multiply(a, drop[..., rows, keys], out=a_dropped)
            np.matmul(a_dropped, v[..., keys, :], out=out[..., rows, :])
        ctx.save_for_backward(q, k, v, attn, dropped)
        ctx.scale, ctx.drop, ctx.blocks, ctx.loops = scale, drop, blocks, loops
        ctx.biased = len(ctx.needs_input_grad) == 4  # called with the bias input
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, attn, dropped = ctx.saved_tensors
        dq, dk, dv = (like(a, a.shape, grad.dtype) for a in (q, k, v))
        dscores = [np.empty_like(a) for a in attn]  # stored as attn is
        dbias = np.zeros(q.shape[:-1] + k.shape[-2:-1], grad.dtype) if ctx.biased else None  # (..., Tq, Tk)
        # the last block of queries sees every key: it writes dk and dv, earlier blocks add theirs
        for i in reversed(range(len(attn))):
            (rows, keys), last = ctx.blocks[i], i == len(attn) - 1
            if keys.stop == 0:
                dq[..., rows, :] = 0
                continue
            g, ds, a, a_dropped = grad[..., rows, :], dscores[i], attn[i], dropped[i]
            q_, k_, v_ = q[..., rows, :], k[..., keys, :], v[..., keys, :]
            if last:
                np.matmul(np.swapaxes(a_dropped, -1, -2), g, out=dv)
            else:
                add_product(np.swapaxes(a_dropped, -1, -2), g, into=dv[..., keys, :])
            np.matmul(v_, np.swapaxes(g, -1, -2), out=np.swapaxes(ds, -1, -2))  # dA^T = v g^T; then
            # dA becomes dS in its own buffer
            if ctx.drop is not None:
                ds *= ctx.drop[..., rows, keys]
            if ctx.loops is not None:  # the three lines below as one loop
                scale = ds.dtype.type(1 if ctx.biased else ctx.scale)
                ctx.loops.attention_softmax_backward(matrices_of(ds), matrices_of(a), scale)
            else:
                ds -= np.einsum("...i,...i->...", ds, a)[..., None]  # dA - rowsum(dA * A)
                ds *= a
                if not ctx.biased:
                    ds *= ctx.scale  # the scale's own factor, for both dq and dk
            if dbias is not None:  # S = q k^T * scale + bias: dbias = dS, before the scale's factor
                dbias[..., rows, keys] = ds
                ds *= ctx.scale
            np.matmul(ds, k_, out=dq[..., rows, :])
            if last:
                np.matmul(np.swapaxes(ds, -1, -2), q_, out=dk)
            else:
                add_product(np.swapaxes(ds, -1, -2), q_, into=dk[..., keys, :])
        return (dq, dk, dv) if dbias is None else (dq, dk, dv, dbias)
