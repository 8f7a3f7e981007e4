"""Scaled dot-product attention, fused: softmax(q k^T / sqrt(d) + mask) v in one op."""

import functools
import math

import numpy as np

from .. import parallel
from ..autograd import Function


def attention_weights(q, k, bias=None, scale=None, out=None):
    """attn = softmax(q @ k^T * scale + bias) along keys (numpy arrays; scale defaults to 1/sqrt(d)).

    `bias` (from mask_bias) is 0 where a query may attend to a key and -inf where not, so those
    weights are exp(-inf) = 0; a query with no allowed key gets all-zero weights (the row's max is
    taken as 0 and its sum as 1) instead of 0/0 = NaN. `out`, if given, receives the weights (the
    softmax is computed in that buffer); otherwise they are laid out keys-first (see keys_first).
    """
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    if out is None:
        out = keys_first(np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2]), q, k)
    scores = out
    np.matmul(k, np.swapaxes(q, -1, -2), out=np.swapaxes(scores, -1, -2))  # scores^T = k q^T, row by row
    scores *= scale
    if bias is not None:
        scores += bias
    m = scores.max(axis=-1, keepdims=True)
    scores -= np.where(np.isfinite(m), m, 0)
    e = np.exp(scores, out=scores)  # the softmax is computed in the scores' own buffer
    s = e.sum(axis=-1, keepdims=True)
    e *= 1 / np.where(s > 0, s, 1)
    return e


def causal_mask(tq, tk):
    """(tq, tk) boolean, True where query i may attend to key j: j <= i + (tk - tq).

    With tq == tk this is the lower triangle; with fewer queries than keys (decoding with a KV
    cache) the queries are the last tq positions, so the last query sees every key.
    """
    return np.tri(tq, tk, k=tk - tq, dtype=bool)


def mask_bias(allowed, causal, tq, tk, dtype):
    """0 where a query may attend to a key, -inf elsewhere: added to the scores, it masks them.

    `allowed` is a boolean mask (or None) and `causal` forbids later keys as well; None when
    nothing is masked. Stored keys-first like the scores, so that adding it walks both arrays in
    the same order (x + 0 = x and x - inf = -inf exactly: the same numbers as writing -inf where
    masked). The causal-only bias is the same for every call of a size, so it is made once.
    """
    causal = causal and tq > 1  # a single query (decoding a token) is the last: it sees every key
    if allowed is None and causal and tq * tk <= 1 << 20:  # up to 4 MB each in float32
        return causal_bias(tq, tk, np.dtype(dtype))
    if causal:
        allowed = causal_mask(tq, tk) if allowed is None else allowed & causal_mask(tq, tk)
    if allowed is None:
        return None
    bias = np.where(allowed, 0, -np.inf).astype(dtype)
    if bias.ndim < 2:  # a mask over keys only: nothing to reorder
        return bias
    stored = keys_first(bias.shape, bias)
    stored[...] = bias
    return stored


@functools.lru_cache(maxsize=16)
def causal_bias(tq, tk, dtype):
    """mask_bias of the causal mask alone, made once per size and dtype (read-only)."""
    bias = mask_bias(causal_mask(tq, tk), False, tq, tk, dtype)
    bias.flags.writeable = False  # shared by every call of this size
    return bias


def keys_first(shape, *like):
    """An empty (..., Tq, Tk) array stored keys-first: its memory is that of a (Tk, ..., Tq) array.

    Why: softmax reduces each query's row of Tk scores. numpy runs a reduction over a short
    contiguous row as one small loop per row (75 ns each, 3,072 rows in the baby GPT's attention);
    when the keys axis is the outermost in memory, the same reduction becomes Tk vectorized passes
    over all rows at once, 14x faster. BLAS writes and reads this layout nearly as fast as the
    usual one (through the transposed view: scores^T = k q^T is an ordinary row-major product).
    """
    n = len(shape)
    return np.empty(shape[-1:] + shape[:-1], np.result_type(*like)).transpose(*range(1, n), 0)


def over_batch(*arrays, tail):
    """Views of the arrays broadcast to one batch shape (at least one axis), so that a slice of the
    first axis picks the same sequences in each; `tail` gives each array's own last two sizes."""
    batches = {a.shape[:-2] for a in arrays if a is not None} - {()}  # () broadcasts to any batch
    batch = (batches.pop() if len(batches) == 1 else np.broadcast_shapes(*batches)) if batches else (1,)
    shapes = [batch + t for t in tail]
    return batch, [a if a is None or a.shape == s else np.broadcast_to(a, s) for a, s in zip(arrays, shapes)]


def add_product(a, b, into):
    """into += a @ b, the product made in into's own memory order (adding across orders is slow)."""
    product = np.empty_like(into)
    np.matmul(a, b, out=product)
    into += product


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


class ScaledDotProductAttention(Function):
    """out = attn' @ v,  attn' = attn * drop,  attn = softmax(scores),  scores = q @ k^T * scale

    q: (..., Tq, d), k: (..., Tk, d), v: (..., Tk, dv); `allowed`: boolean, broadcastable to
    (..., Tq, Tk), True where a query may attend to a key; `causal`: also not to later keys.
    `drop` is dropout's mask already scaled (0 or 1/(1-p)); without dropout attn' = attn.

    Backward, with G = dL/d(out):
      dv = attn'^T @ G
      dattn = (G @ v^T) * drop
      dscores = attn * (dattn - rowsum(dattn * attn))     (the softmax backward, per query row)
      dq = dscores @ k * scale,   dk = dscores^T @ q * scale

    Under a causal mask the queries go in blocks that skip the keys they cannot see (query_blocks),
    so long contexts compute about half the scores. Sequences are independent, so both passes
    can run on chunks of the batch shared among threads (gradflow.parallel, when turned on).
    """

    name = "attention"

    @staticmethod
    def forward(ctx, q, k, v, allowed=None, causal=False, scale=None, drop=None):
        scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        if not ctx.recording and drop is None and q.size * k.shape[-2] < parallel.MIN_ELEMENTS:
            # inference on a few queries (decoding a token): nothing to save, nothing worth
            # sharing among threads, and numpy broadcasts the shared key/value heads itself
            return attention_weights(q, k, mask_bias(allowed, causal, q.shape[-2], k.shape[-2], q.dtype), scale) @ v
        (tq, d), (tk, dv) = q.shape[-2:], v.shape[-2:]
        shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]) + (tq, dv)
        tails = [(tq, d), (tk, d), (tk, dv), (tq, tk), (tq, tk)]
        bias = mask_bias(allowed, causal, tq, tk, np.result_type(q, k))  # small: (Tq, Tk) before broadcasting
        batch, (q, k, v, bias, drop) = over_batch(q, k, v, bias, drop, tail=tails)
        # the weights of each block of queries (see query_blocks), each stored keys-first
        blocks = query_blocks(tq, tk, causal)
        attn = [keys_first(batch + (rows.stop - rows.start, keys.stop), q, k) for rows, keys in blocks]
        dropped = attn if drop is None else [np.empty_like(a) for a in attn]
        # out, and dq, dk, dv in backward, are laid out like the queries (usually a transposed view
        # of (B, T, n_heads * hs)): then the transpose and reshape back to (B, T, d) need no copy
        out = like(q, batch + (tq, dv), np.result_type(q, k, v))

        def kernel(seqs):
            for (rows, keys), a, a_dropped in zip(blocks, attn, dropped):
                if keys.stop == 0:  # queries before every key (more queries than keys): all masked
                    out[seqs, ..., rows, :] = 0
                    continue
                b = None if bias is None else bias[seqs, ..., rows, keys]
                attention_weights(q[seqs, ..., rows, :], k[seqs, ..., keys, :], b, scale, out=a[seqs])
                if drop is not None:
                    np.multiply(a[seqs], drop[seqs, ..., rows, keys], out=a_dropped[seqs])
                np.matmul(a_dropped[seqs], v[seqs, ..., keys, :], out=out[seqs, ..., rows, :])

        parallel.for_rows(kernel, batch[0], sum(a.size for a in attn))
        ctx.save_for_backward(q, k, v, attn, dropped)
        ctx.scale, ctx.drop, ctx.blocks = scale, drop, blocks
        return out.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        q, k, v, attn, dropped = ctx.saved_tensors
        grad = grad.reshape(q.shape[:-1] + grad.shape[-1:])  # the batch of one added by over_batch
        drop = ctx.drop
        dq, dk, dv = (like(a, a.shape, grad.dtype) for a in (q, k, v))
        dscores = [keys_first(a.shape, a) for a in attn]

        def kernel(seqs):
            # the last block of queries sees every key: it writes dk and dv, earlier blocks add theirs
            for i in reversed(range(len(attn))):
                (rows, keys), last = ctx.blocks[i], i == len(attn) - 1
                if keys.stop == 0:
                    dq[seqs, ..., rows, :] = 0
                    continue
                g, ds, a, a_dropped = grad[seqs, ..., rows, :], dscores[i][seqs], attn[i][seqs], dropped[i][seqs]
                q_, k_, v_ = q[seqs, ..., rows, :], k[seqs, ..., keys, :], v[seqs, ..., keys, :]
                if last:
                    np.matmul(np.swapaxes(a_dropped, -1, -2), g, out=dv[seqs])
                else:
                    add_product(np.swapaxes(a_dropped, -1, -2), g, into=dv[seqs, ..., keys, :])
                np.matmul(v_, np.swapaxes(g, -1, -2), out=np.swapaxes(ds, -1, -2))  # dattn^T = v g^T, then
                # dattn is turned into dscores in place
                if drop is not None:
                    ds *= drop[seqs, ..., rows, keys]
                ds -= np.einsum("...i,...i->...", ds, a)[..., None]  # dattn - rowsum(dattn * attn)
                ds *= a
                ds *= ctx.scale  # the scale's own factor, for both dq and dk
                np.matmul(ds, k_, out=dq[seqs, ..., rows, :])
                if last:
                    np.matmul(np.swapaxes(ds, -1, -2), q_, out=dk[seqs])
                else:
                    add_product(np.swapaxes(ds, -1, -2), q_, into=dk[seqs, ..., keys, :])

        parallel.for_rows(kernel, len(q), sum(a.size for a in attn))
        return dq, dk, dv
