"""The neural-network functions a transformer is made of (imported as `F`), with PyTorch's signatures.

linear, softmax, log_softmax, cross_entropy, layer_norm, rms_norm, rope, embedding and
scaled_dot_product_attention are fused ops: one node each, with the backward derived by hand in
the op's docstring (gradflow/engine/ops).
The test suite shows each one equals the same computation composed from primitive ops, in value
and in gradient. mse_loss, l1_loss, nll_loss, kl_div, the binary cross-entropies, normalize, leaky_relu,
softplus, logsigmoid, elu, mish, hardtanh, relu6, glu and cross_entropy's label smoothing are composed
of primitive ops, as written.

Each function runs `kernel(ops.X)`: the plain op ops.X itself, or the tuned kernel that replaces
it in the fast tier (gradflow/fast, chosen by gradflow/engine/kernels.py; same numbers).

PyTorch code runs as written: `F.softmax(x, dim=-1)` (or numpy's axis=), `F.layer_norm(x,
normalized_shape, weight, bias)`, `F.scaled_dot_product_attention(q, k, v, attn_mask=None,
dropout_p=0.0, is_causal=False, scale=None)`. Where gradflow's default differs from PyTorch's it
says so: gelu is the tanh approximation GPT-2 uses unless approximate="none".
"""

import numpy as np

from gradflow.engine import ops
from gradflow.engine.checks import spelling
from gradflow.engine.functions import maximum, where
from gradflow.engine.kernels import kernel
from gradflow.engine.ops.attention import allowed_keys, causal_mask  # noqa: F401  (causal_mask: part of the functional API)
from gradflow.engine.rng import generator
from gradflow.engine.tensor import Tensor, as_tensor


def softmax(x, dim=None, *, axis=None):
    """exp(x_i) / sum_j exp(x_j) along dim (the max is subtracted first, so 1e4 does not overflow).

    dim (PyTorch's name) or axis (numpy's) defaults to the last axis.
    """
    return as_tensor(x).softmax(spelling("softmax", "axis", axis, "dim", dim, -1))


def log_softmax(x, dim=None, *, axis=None):
    """x_i - log sum_j exp(x_j) along dim (or axis; the last by default)."""
    return as_tensor(x).log_softmax(spelling("log_softmax", "axis", axis, "dim", dim, -1))


def relu(x, inplace=False):
    """max(x, 0). inplace is accepted for PyTorch's sake and computes out of place: x is left as it
    was (backward may need it), so use the result, as `x = F.relu(x, inplace=True)` does."""
    return as_tensor(x).relu()


def tanh(x):
    """(e^x - e^-x) / (e^x + e^-x)"""
    return as_tensor(x).tanh()


def sigmoid(x):
    """1 / (1 + e^-x)"""
    return as_tensor(x).sigmoid()


def leaky_relu(x, negative_slope=0.01, inplace=False):
    """x where x > 0, negative_slope x elsewhere (PyTorch's default slope 0.01); the gradient is 1 or the
    slope. inplace computes out of place (see relu)."""
    x = as_tensor(x)
    return where(x > 0, x, x * negative_slope)


def softplus(x, beta=1.0, threshold=20.0):
    """log(1 + e^(beta x)) / beta, computed as (log(1 + e^-|beta x|) + max(beta x, 0)) / beta so that no
    exponential overflows; x itself where beta x > threshold, as PyTorch's."""
    x = as_tensor(x)
    bx = x * beta
    smooth = ((-bx.abs()).exp().log1p() + bx.relu()) / beta
    return where(bx > threshold, x, smooth)


def logsigmoid(x):
    """log(1 / (1 + e^-x)) = -softplus(-x), without overflow."""
    x = as_tensor(x)
    return -((-x.abs()).exp().log1p() + (-x).relu())


def elu(x, alpha=1.0, inplace=False):
    """x where x > 0, alpha (e^x - 1) elsewhere (Clevert et al., "Fast and Accurate Deep Network
    Learning by Exponential Linear Units"); inplace computes out of place (see relu)."""
    x = as_tensor(x)
    return where(x > 0, x, alpha * (x.clamp(max=0).exp() - 1))


def mish(x, inplace=False):
    """x tanh(softplus(x)) (Misra, "Mish: A Self Regularized Non-Monotonic Activation Function")."""
    x = as_tensor(x)
    return x * softplus(x).tanh()


def hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    """x clipped to [min_val, max_val]; the gradient is 1 inside, 0 outside."""
    return as_tensor(x).clamp(min_val, max_val)


def relu6(x, inplace=False):
    """min(max(x, 0), 6)"""
    return hardtanh(x, 0.0, 6.0)


def glu(x, dim=-1):
    """a sigmoid(b), a and b the two halves of x along dim (Dauphin et al., "Language Modeling with
    Gated Convolutional Networks")."""
    x = as_tensor(x)
    if x.shape[dim] % 2:
        raise ValueError(f"glu: dim {dim} has odd size {x.shape[dim]}; it is cut into two halves")
    a, b = x.chunk(2, dim=dim)
    return a * b.sigmoid()


GELU_OPS = {"tanh": ops.Gelu, "none": ops.GeluErf}


def gelu(x, approximate="none"):
    """GELU, x Phi(x) with Phi the standard normal's CDF.

    approximate="none" (PyTorch's default): exactly x (1 + erf(x / sqrt(2))) / 2.
    approximate="tanh" (GPT-2's, and x.gelu()'s): x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    The two differ by less than 5e-4 (most near |x| = 2.7). The default is PyTorch's, so that
    PyTorch code gives PyTorch's numbers; gradflow's own models ask for the tanh form, which GPT-2
    was trained with and which runs several times faster here (numpy has no erf).
    """
    if approximate not in GELU_OPS:
        raise ValueError(f'gelu: approximate must be "tanh" or "none", got {approximate!r}')
    return kernel(GELU_OPS[approximate]).apply(as_tensor(x))


def silu(x, inplace=False):
    """x sigmoid(x) (Swish with beta = 1), the gate of SwiGLU; inplace computes out of place (see relu)."""
    return kernel(ops.Silu).apply(as_tensor(x))


# --- losses ---------------------------------------------------------------------------------------

REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(op, reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(f'{op}: reduction must be "mean", "sum" or "none", got {reduction!r}')


def _reduce(losses, reduction):
    return losses.mean() if reduction == "mean" else losses.sum() if reduction == "sum" else losses


def _pointwise_pair(op, input, target, reduction):
    """input and target as tensors of one shape (PyTorch broadcasts them with a warning, which
    nearly always means a bug, e.g. (N, 1) against (N,))."""
    _check_reduction(op, reduction)
    input, target = as_tensor(input), as_tensor(target)
    if input.shape != target.shape:
        raise ValueError(
            f"{op}: input of shape {input.shape} and target of shape {target.shape} differ; "
            f"reshape one to the other, e.g. target.view({', '.join(map(str, input.shape)) or '()'})"
        )
    return input, target


def mse_loss(input, target, *, reduction="mean"):
    """(input - target)^2, averaged ("mean"), summed ("sum") or elementwise ("none");
    d/d input = 2 (input - target) / n for the mean."""
    input, target = _pointwise_pair("mse_loss", input, target, reduction)
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input, target, *, reduction="mean"):
    """|input - target|, averaged, summed or elementwise; d/d input = sign(input - target) / n for the mean."""
    input, target = _pointwise_pair("l1_loss", input, target, reduction)
    return _reduce((input - target).abs(), reduction)


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """-(y log x + (1 - y) log(1 - x)) per element, for probabilities x (a sigmoid's output) and targets
    y in [0, 1]; each log is kept above -100, as PyTorch keeps it, so x = 0 or 1 gives 100, not inf.
    weight multiplies each element's loss (broadcast)."""
    input, target = _pointwise_pair("binary_cross_entropy", input, target, reduction)
    losses = -(target * input.log().clamp(min=-100) + (1 - target) * (1 - input).log().clamp(min=-100))
    return _reduce(losses if weight is None else losses * weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """binary_cross_entropy(sigmoid(x), y) computed from the logits x without overflow:
    (1 - y) x + w (log(1 + e^-|x|) + max(-x, 0)), w = 1 + (pos_weight - 1) y (PyTorch's pos_weight
    scales the positive targets' term; 1 without it). weight multiplies each element's loss."""
    input, target = _pointwise_pair("binary_cross_entropy_with_logits", input, target, reduction)
    softplus_neg = (-input.abs()).exp().log1p() + (-input).relu()  # log(1 + e^-x), stable for any x
    w = 1 if pos_weight is None else 1 + (pos_weight - 1) * target
    losses = (1 - target) * input + w * softplus_neg
    return _reduce(losses if weight is None else losses * weight, reduction)


def kl_div(input, target, reduction="mean", log_target=False):
    """target (log target - input) per element, 0 where target is 0: the KL divergence from the target
    distribution to the one whose log-probabilities are `input` (log_target: target is given as its log,
    exp(target) (target - input)). reduction "batchmean" divides the sum by the batch size, the true
    KL per example; "mean" (PyTorch's default) divides by the number of elements, "sum", "none"."""
    if reduction not in (*REDUCTIONS, "batchmean"):
        raise ValueError(f'kl_div: reduction must be "batchmean", "mean", "sum" or "none", got {reduction!r}')
    input, target = _pointwise_pair("kl_div", input, target, "none")
    if log_target:
        losses = target.exp() * (target - input)
    else:
        positive = target > 0
        losses = where(positive, target * (where(positive, target, 1.0).log() - input), 0.0)
    if reduction == "batchmean":
        return losses.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(losses, reduction)


def _check_classes(op, targets, n_classes, ignore_index):
    """Every target that counts is a class id in [0, n_classes), or an IndexError naming the first that is not."""
    counted = targets if ignore_index is None else targets[targets != ignore_index]
    bad = counted[(counted < 0) | (counted >= n_classes)]
    if bad.size:
        skip = f" (only targets equal to ignore_index={ignore_index} are skipped)" if ignore_index is not None else ""
        raise IndexError(f"{op}: target {bad[0]} is out of range for {n_classes} classes{skip}")


def _class_scores(op, logits, targets, ignore_index):
    """Scores and integer class targets as (rows, C) and (rows,), checked, and the shape of the
    per-target losses: logits (N, C) with targets (N,), or PyTorch's (N, C, d1, ...) with classes
    on axis 1 and targets (N, d1, ...)."""
    logits, targets = as_tensor(logits), np.asarray(targets)
    if targets.dtype.kind not in "iu":
        raise TypeError(f"{op}: targets must be integer class ids, got {targets.dtype}")
    if logits.ndim < 2:
        raise ValueError(
            f"{op}: logits must be (N, C), got shape {logits.shape}; "
            "for a single example write logits.view(1, -1) with a target of shape (1,)"
        )
    n_classes = logits.shape[1]
    expected = logits.shape[:1] + logits.shape[2:]  # (N,) or (N, d1, ...)
    if logits.ndim > 2 and targets.shape != expected and targets.shape == logits.shape[:-1]:
        c = logits.shape[-1]
        raise ValueError(
            f"{op}: logits must be (N, C), got shape {logits.shape} with targets of shape {targets.shape}; "
            f"for classes on the last axis write {op}(logits.view(-1, {c}), targets.view(-1)) "
            "(PyTorch's (N, C, d1, ...) layout has the classes on axis 1)"
        )
    if targets.shape != expected:
        raise ValueError(f"{op}: targets of shape {targets.shape} do not match logits of shape {logits.shape}")
    _check_classes(op, targets, n_classes, ignore_index)
    if logits.ndim > 2:  # classes last, then one row per target
        logits = logits.permute(0, *range(2, logits.ndim), 1).reshape(-1, n_classes)
    return logits, targets.reshape(-1), expected


def cross_entropy(logits, targets, *, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """-log softmax(logits)[target] per target: logits (N, C) and targets (N,) integer class ids,
    or PyTorch's (N, C, d1, ...) with targets (N, d1, ...).

    reduction: "mean" over the targets that count, "sum", or "none" for the losses in the targets'
    shape. A target equal to ignore_index (PyTorch's default, -100, as padding in Hugging Face
    labels) counts for nothing; ignore_index=None counts every target. Perplexity is exp of the mean.

    label_smoothing = e aims at (1 - e) on the target and e / C on every class, as PyTorch's (Szegedy et
    al., "Rethinking the Inception Architecture"): (1 - e) -log p[target] + e mean_c(-log p[c]).
    """
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    z, t, shape = _class_scores("cross_entropy", logits, targets, ignore_index)
    loss = kernel(ops.CrossEntropy).apply(z, targets=t, ignore_index=ignore_index, reduction=reduction)
    loss = loss.reshape(shape) if reduction == "none" else loss
    if label_smoothing == 0.0:
        return loss
    counts = np.ones(t.shape, dtype=bool) if ignore_index is None else t != ignore_index
    uniform = where(counts, -log_softmax(z, dim=-1).mean(-1), 0.0)  # the mean over classes, per target
    if reduction == "none":
        uniform = uniform.reshape(shape)
    elif reduction == "sum":
        uniform = uniform.sum()
    else:
        uniform = uniform.sum() / int(counts.sum())
    return (1 - label_smoothing) * loss + label_smoothing * uniform


def linear_cross_entropy(x, weight, targets, bias=None, *, ignore_index=-100, reduction="mean"):
    """cross_entropy(linear(x, weight, bias), targets) without forming the logits: x (..., in), weight
    (C, in), targets x's shape without its last axis; reduction "mean" or "sum".

    A language model's loss from its last hidden states and its head, as one op taking the rows a
    few at a time (ops.LinearCrossEntropy): the same numbers, and none of the (rows, C) arrays
    that the logits, their softmax and their gradient would be.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f'linear_cross_entropy: reduction must be "mean" or "sum", got {reduction!r}')
    x, weight = as_tensor(x), as_tensor(weight)
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear_cross_entropy: input {x.shape} needs a weight (C, {x.shape[-1]}), got {weight.shape}")
    if bias is not None and as_tensor(bias).shape != weight.shape[:1]:
        raise ValueError(f"linear_cross_entropy: bias has shape {as_tensor(bias).shape}, expected {weight.shape[:1]}")
    targets = np.asarray(targets)
    if targets.dtype.kind not in "iu":
        raise TypeError(f"linear_cross_entropy: targets must be integer class ids, got {targets.dtype}")
    if targets.shape != x.shape[:-1]:
        raise ValueError(f"linear_cross_entropy: targets of shape {targets.shape} do not match input {x.shape}")
    _check_classes("linear_cross_entropy", targets, weight.shape[0], ignore_index)
    rows, t = x.reshape(-1, x.shape[-1]), targets.reshape(-1)
    return kernel(ops.LinearCrossEntropy).apply(
        rows, weight, bias, targets=t, ignore_index=ignore_index, reduction=reduction
    )


def nll_loss(log_probs, targets, *, ignore_index=-100, reduction="mean"):
    """-log_probs[target] per target, for log-probabilities (log_softmax's output): shapes, ignore_index
    and reduction as cross_entropy, and nll_loss(log_softmax(z, dim=1), t) == cross_entropy(z, t)."""
    _check_reduction("nll_loss", reduction)
    logp, t, shape = _class_scores("nll_loss", log_probs, targets, ignore_index)
    counts = np.ones(t.shape, dtype=bool) if ignore_index is None else t != ignore_index
    picked = logp[np.arange(len(t)), np.where(counts, t, 0)]  # an ignored row picks class 0, then counts 0
    losses = where(counts, -picked, 0.0)
    if reduction == "none":
        return losses.reshape(shape)
    if reduction == "sum":
        return losses.sum()
    if not counts.any():  # nothing counts: NaN, as PyTorch (and cross_entropy)
        return losses.sum() * np.nan
    return losses.sum() / int(counts.sum())


def linear(x, weight, bias=None):
    """x @ weight.T + bias: x (..., in), weight (out, in) as Linear stores it, bias (out,)."""
    x, weight = as_tensor(x), as_tensor(weight)
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {x.shape} needs a weight of shape (out, {x.shape[-1:]}), got {weight.shape}")
    if bias is not None and as_tensor(bias).shape != weight.shape[:1]:
        raise ValueError(f"linear: bias has shape {as_tensor(bias).shape}, expected {weight.shape[:1]}")
    return kernel(ops.Linear).apply(x, weight, bias)


def rope(x, cos, sin, interleaved=False):
    """Rotate feature pairs of x by the angles whose cos and sin are given (RotaryEmbedding makes them).

    cos, sin: arrays broadcasting against x's shape with its last axis halved; pairs are (x0, x1),
    (x2, x3), ... when interleaved, else (x_i, x_(i + d/2)).
    """
    x = as_tensor(x)
    cos, sin = (np.asarray(a, dtype=x.dtype) for a in (cos, sin))
    if x.ndim < 1 or x.shape[-1] % 2 or cos.shape != sin.shape:
        raise ValueError(f"rope: x {x.shape} needs an even last axis, cos and sin one shape: {cos.shape}, {sin.shape}")
    try:
        np.broadcast_shapes(x.shape[:-1] + (x.shape[-1] // 2,), cos.shape)
    except ValueError:
        raise ValueError(f"rope: cos and sin {cos.shape} do not broadcast against half of x {x.shape}") from None
    return kernel(ops.Rope).apply(x, cos=cos, sin=sin, interleaved=interleaved)


def _normalized_shape(op, x, normalized_shape):
    """The trailing axes a norm runs over, as a tuple: normalized_shape (an int or a shape), or the
    last axis when it is None."""
    if normalized_shape is None:
        return x.shape[-1:]
    if isinstance(normalized_shape, (Tensor, np.ndarray)):
        raise TypeError(
            f"{op}: normalized_shape must be a shape such as {x.shape[-1:]}, got a tensor of shape "
            f"{tuple(normalized_shape.shape)}; the weight comes third, as in PyTorch: "
            f"F.{op}(x, x.shape[-1:], weight{', bias' if op == 'layer_norm' else ''})"
        )
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    if not shape or shape != x.shape[len(x.shape) - len(shape) :]:
        raise ValueError(f"{op}: normalized_shape {shape} is not the last axes of the input's shape {x.shape}")
    return shape


def _check_norm_param(op, name, p, shape, x):
    if p is not None and as_tensor(p).shape != shape:
        raise ValueError(f"{op}: {name} has shape {as_tensor(p).shape}, expected {shape} for input {x.shape}")


def layer_norm(x, normalized_shape=None, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias, mean and var over the last len(normalized_shape)
    axes (PyTorch's signature; normalized_shape None means the last axis)."""
    x = as_tensor(x)
    shape = _normalized_shape("layer_norm", x, normalized_shape)
    _check_norm_param("layer_norm", "weight", weight, shape, x)
    _check_norm_param("layer_norm", "bias", bias, shape, x)
    return _over_trailing_axes(kernel(ops.LayerNorm), x, shape, weight, bias, eps=eps)


def rms_norm(x, normalized_shape=None, weight=None, eps=1e-6):
    """x / sqrt(mean(x^2) + eps) * weight, the mean over the last len(normalized_shape) axes
    (PyTorch's signature; normalized_shape None means the last axis). eps defaults to 1e-6, as
    Llama's; PyTorch's default is the dtype's machine epsilon."""
    x = as_tensor(x)
    shape = _normalized_shape("rms_norm", x, normalized_shape)
    _check_norm_param("rms_norm", "weight", weight, shape, x)
    return _over_trailing_axes(kernel(ops.RMSNorm), x, shape, weight, eps=eps)


def _over_trailing_axes(op, x, shape, *params, eps):
    """Apply a norm op (which normalizes over the last axis) over the trailing axes `shape`.

    Normalizing over several trailing axes is normalizing over one axis that holds all of them, so
    those axes are viewed as one for the op, and the per-element parameters flattened alike.
    """
    if len(shape) == 1:
        return op.apply(x, *params, eps=eps)
    rows = x.reshape(*x.shape[: x.ndim - len(shape)], -1)
    params = (None if p is None else as_tensor(p).reshape(-1) for p in params)
    return op.apply(rows, *params, eps=eps).reshape(*x.shape)


def dropout(x, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1/(1-p), so the expected value is
    unchanged; the identity when not training (or p = 0). p defaults to PyTorch's 0.5; inplace
    computes out of place (see relu)."""
    x = as_tensor(x)
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    keep = generator().bernoulli(1.0 - p, x.dtype, x.shape)  # PyTorch's noise.bernoulli_(1 - p)
    return x * Tensor._make(keep / x.dtype.type(1 - p), False, None)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """x / max(||x||_p, eps) along dim, ||x||_p = (sum |x|^p)^(1/p): unit vectors, as PyTorch's F.normalize
    (dim 1 by default, the feature axis of a batch); eps keeps a zero vector zero, and its norm's gradient
    is 0 there, as PyTorch's (the root's own derivative is infinite at 0)."""
    x = as_tensor(input)
    total = (x.abs() ** p).sum(dim, keepdim=True)
    positive = total > 0
    norm = where(positive, where(positive, total, 1.0) ** (1.0 / p), 0.0)
    return x / maximum(norm, eps)


def embedding(ids, weight, padding_idx=None):
    """Row lookup: out[..., :] = weight[ids[...], :];  the gradient of a row sums over its uses.
    padding_idx names a row that is looked up but gets no gradient (PyTorch's padding row)."""
    weight = as_tensor(weight)
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"embedding: ids must be integers, got {ids.dtype}")
    bad = ids[(ids < 0) | (ids >= weight.shape[0])]
    if bad.size:
        raise IndexError(f"embedding: id {bad[0]} is out of range for a vocabulary of {weight.shape[0]}")
    rows = kernel(ops.Embedding).apply(weight, ids=ids)
    if padding_idx is None:
        return rows
    padding = (ids == padding_idx % weight.shape[0])[..., None]
    return where(padding, weight.detach()[padding_idx], rows)  # the same values, no path back to the row


def one_hot(tensor, num_classes=-1):
    """out[..., c] = 1 where tensor[...] == c, else 0: int64, one more axis of num_classes (-1: the
    largest id + 1), outside the graph, as PyTorch's one_hot."""
    ids = np.asarray(tensor._data if isinstance(tensor, Tensor) else tensor)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"one_hot: the ids must be integers, got {ids.dtype}")
    if num_classes == -1:
        num_classes = int(ids.max()) + 1 if ids.size else 0
    bad = ids[(ids < 0) | (ids >= num_classes)]
    if bad.size:
        raise ValueError(f"one_hot: id {bad[0]} is out of range for num_classes {num_classes}")
    return Tensor._constant((ids[..., None] == np.arange(num_classes)).astype(np.int64))


def pad(input, pad, mode="constant", value=None):
    """input with `value` (0 unless given) added around it, as PyTorch's F.pad: pad lists (before, after)
    widths from the LAST axis backwards, (left, right) of the last axis, then (top, bottom) of the one
    before, ...;  the gradient is the part of g where input sits."""
    x = as_tensor(input)
    if mode != "constant":
        raise ValueError(f"pad: mode {mode!r} is not supported, only 'constant'")
    if len(pad) % 2 or len(pad) // 2 > x.ndim or any(int(w) != w or w < 0 for w in pad):
        raise ValueError(
            f"pad: pad {tuple(pad)} must be pairs of non-negative widths, at most one pair per axis of shape {x.shape}"
        )
    pairs = [(int(pad[i]), int(pad[i + 1])) for i in range(0, len(pad), 2)][::-1]  # first axis first
    widths = ((0, 0),) * (x.ndim - len(pairs)) + tuple(pairs)
    return kernel(ops.Pad).apply(x, widths=widths, value=0 if value is None else value)


def _attention_shapes(q, k, v):
    """Check q, k, v; returns the scores' shape (..., Tq, Tk)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim < 2:
            raise ValueError(f"attention: {name} must be (..., T, d), got shape {t.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: q {q.shape} and k {k.shape} must have the same last size d")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: k {k.shape} and v {v.shape} must have the same number of keys")
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"attention: batch dimensions of q {q.shape}, k {k.shape} and v {v.shape} cannot be broadcast"
        ) from None
    return batch + (q.shape[-2], k.shape[-2])


def _check_mask_shape(name, mask, scores_shape):
    try:
        np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        raise ValueError(
            f"attention: {name} of shape {mask.shape} does not broadcast to the scores' shape {scores_shape}"
        ) from None


def _boolean_mask(mask, scores_shape):
    """gradflow's mask=: boolean only, True = may attend."""
    allowed = np.asarray(mask)
    if allowed.dtype != bool:
        raise TypeError(
            f"attention: mask must be boolean (True = may attend), got {allowed.dtype}; "
            "a float mask added to the scores is PyTorch's attn_mask="
        )
    _check_mask_shape("mask", allowed, scores_shape)
    return allowed


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, *, mask=None, causal=False
):
    """softmax(q k^T * scale + mask) v on (..., T, d) inputs, with PyTorch's signature and meaning.

    attn_mask (PyTorch's), broadcastable to (..., Tq, Tk): boolean, True = may attend; or float,
      added to the scores (-inf forbids; a learned bias gets its gradient).
    mask (gradflow's name): the boolean kind only.
    is_causal (PyTorch's): query i attends to keys 0..i, counted from the first key.
    causal (gradflow's): the Tq queries are the last Tq of the Tk positions, as when decoding with a
      KV cache: query i attends to keys 0..i + Tk - Tq. With Tq == Tk the two are the same.
    scale: multiplies q k^T, by default 1 / sqrt(d).
    dropout_p: drop attention weights with this probability (scaling the rest by 1/(1-p)), drawn
      from gradflow's generator (gf.manual_seed).
    A query with nothing to attend to gets zeros (PyTorch gives zeros too).
    """
    q, k, v = as_tensor(query), as_tensor(key), as_tensor(value)
    scores_shape = _attention_shapes(q, k, v)
    if mask is not None and attn_mask is not None:
        raise TypeError("attention: give mask= (gradflow's name) or attn_mask= (PyTorch's), not both")
    if causal and is_causal:
        raise TypeError(
            "attention: give causal= (queries are the last positions, as with a KV cache) "
            "or is_causal= (PyTorch's: query i sees keys 0..i), not both"
        )
    if not 0 <= dropout_p < 1:
        raise ValueError(f"attention: dropout_p must be in [0, 1), got {dropout_p}")
    allowed = bias = None
    if mask is not None:
        allowed = _boolean_mask(mask, scores_shape)
    elif attn_mask is not None:
        array = np.asarray(attn_mask)  # a Tensor's array, or the data as given
        if array.dtype.kind not in "bf":
            raise TypeError(
                "attention: attn_mask must be boolean (True = may attend) or floating-point (added to "
                f"the scores), got {array.dtype}"
            )
        _check_mask_shape("attn_mask", array, scores_shape)
        if array.dtype.kind == "b":
            allowed = array
        else:
            bias = attn_mask if isinstance(attn_mask, Tensor) else Tensor(array.astype(q.dtype))
    tq, tk = scores_shape[-2:]
    if is_causal and tq == tk:
        causal = True
    elif is_causal:  # aligned at the first key, unlike `causal`
        first_keys = np.tri(tq, tk, dtype=bool)
        allowed = first_keys if allowed is None else allowed & first_keys
    drop = None
    if dropout_p > 0:
        drop = generator().bernoulli(1.0 - dropout_p, q.dtype, scores_shape) / q.dtype.type(1 - dropout_p)
    inputs = (q, k, v) if bias is None else (q, k, v, bias)  # a float mask is a fourth input: it may learn
    return kernel(ops.ScaledDotProductAttention).apply(*inputs, allowed=allowed, causal=causal, scale=scale, drop=drop)


def attention_weights(q, k, mask=None, causal=False, scale=None):
    """The (..., Tq, Tk) weights softmax(q k^T / sqrt(d) masked) as a Tensor outside the graph: for pictures."""
    q, k = as_tensor(q), as_tensor(k)
    shape = _attention_shapes(q, k, k)
    allowed = None if mask is None else _boolean_mask(mask, shape)
    weights = ops.attention.softmax_of_scores(q.data, k.data, allowed_keys(allowed, causal, *shape[-2:]), scale)
    return Tensor._make(weights, False, None)
