"""Worked elements of the ops whose backward mixes a row's numbers (explore_worked.py picks the
element): each rule of the op's docstring evaluated on that row, its intermediate numbers named as
the docstring names them.

    softmax          dL/dx_j = y_j (g_j - s),             s = sum_i g_i y_i
    log_softmax      dL/dx_j = g_j - softmax(x)_j s,      s = sum_i g_i
    layer_norm       dL/dx_k = r (gh_k - mean(gh) - xhat_k mean(gh xhat)),   gh = g w
    rms_norm         dL/dx_k = r (gh_k - xhat_k mean(gh xhat))
    cross_entropy    dL/dz_nc = g (softmax(z_n)_c - [c = t_n]) / N
    linear_cross_entropy   dL/dx_nk = g sum_c D_nc W_ck,  D_n = (softmax(x_n W^T + b) - onehot(t_n)) / N
    attention        dq_ic = scale sum_j dS_ij k_jc,  dS_ij = A_ij (dA_ij - sum_j' A_ij' dA_ij'),  dA = g v^T
    max, min         dL/dx_e = g [x_e = y] / #ties;   var: g 2 (x_e - mean) / (N - ddof)
    log_sum_exp      dL/dx_e = g exp(x_e - y);        prod: g times the product of the others

Their inputs that enter linearly (a norm's w and b, attention's v) are worked as sums of terms
(explore_worked_terms.py).
"""

import math

import numpy as np

from gradflow.engine.ops.attention import allowed_keys, softmax_of_scores
from gradflow.tools.explore_worked_terms import COPY, SHOWN, at, d, element, linear, number


def _some(values):
    """The first SHOWN numbers of a row, written out."""
    values = list(values)
    tail = f", … ({len(values)})" if len(values) > SHOWN else ""
    return "[" + ", ".join(number(v) for v in values[:SHOWN]) + tail + "]"


def _products(pairs):
    """a*b + c*d + … of the first SHOWN pairs."""
    return " + ".join(f"{number(x)}*{number(y)}" for x, y in pairs[:SHOWN]) + (" + …" if len(pairs) > SHOWN else "")


def _where(e, axis):
    """The row through e along axis, written [0, :, 3]."""
    return "[" + ", ".join(":" if k == axis else str(i) for k, i in enumerate(e)) + "]"


def _along(case, e):
    """The row through e along the op's axis: its axis, e's place in it, and y and g there."""
    axis = case.params.get("axis", -1) % case.y.ndim
    row = tuple(slice(None) if k == axis else i for k, i in enumerate(e))
    return axis, e[axis], case.y[row], case.g[row]


def softmax(case, j, e):
    x = case.names[0]
    axis, k, y, g = _along(case, e)
    s = float(np.sum(g * y))
    value = y[k] * (g[k] - s)
    return [
        f"the row {_where(e, axis)}: y = {_some(y)}, g = {_some(g)}",
        f"s = sum_i g_i y_i = {_products(list(zip(g, y)))} = {number(s)}",
        f"{d(x)}{at(e)} = y_j (g_j - s) = {number(y[k])} * ({number(g[k])} - {number(s)}) = {number(value)}",
    ], value


def log_softmax(case, j, e):
    x = case.names[0]
    _, k, y, g = _along(case, e)
    s, p = float(np.sum(g)), math.exp(y[k])
    value = g[k] - p * s
    return [
        f"s = sum_i g_i = {' + '.join(number(v) for v in g[:SHOWN])}{' + …' if len(g) > SHOWN else ''} = {number(s)}",
        f"softmax(x)_j = exp(y_j) = exp({number(y[k])}) = {number(p)}",
        f"{d(x)}{at(e)} = g_j - softmax(x)_j s = {number(g[k])} - {number(p)} * {number(s)} = {number(value)}",
    ], value


def _normalized(case, e, centred):
    """The row of x through e over the last axis: r, xhat, gh = g w, and the lines that give them."""
    row = e[:-1]
    x, g = case.xs[0][row], case.g[row]
    w = case.xs[1]
    eps = case.params.get("eps", 1e-5 if centred else 1e-6)
    lines = [f"{case.names[0]}{at(row)} = {_some(x)}"]
    if centred:
        mu = x.mean()
        var = ((x - mu) ** 2).mean()
        r = 1 / math.sqrt(var + eps)
        lines.append(f"mu = mean = {number(mu)},  var = {number(var)},  r = 1 / sqrt(var + eps) = {number(r)}")
        xhat = (x - mu) * r
    else:
        ms = (x * x).mean()
        r = 1 / math.sqrt(ms + eps)
        lines.append(f"mean(x^2) = {number(ms)},  r = 1 / sqrt(mean(x^2) + eps) = {number(r)}")
        xhat = x * r
    gh = g if w is None else g * w
    lines.append(f"gh = g * w = {_some(gh)}" if w is not None else f"gh = g = {_some(gh)}")
    return r, xhat, gh, lines


def layer_norm(case, j, e):
    if j > 0:
        return linear("", "xhat", COPY)(case, j, e)
    r, xhat, gh, lines = _normalized(case, e, centred=True)
    k = e[-1]
    m1, m2 = gh.mean(), (gh * xhat).mean()
    value = r * (gh[k] - m1 - xhat[k] * m2)
    return lines + [
        f"mean(gh) = {number(m1)},  mean(gh * xhat) = {number(m2)},  xhat_k = {number(xhat[k])}",
        f"{d(case.names[0])}{at(e)} = r (gh_k - mean(gh) - xhat_k mean(gh xhat))",
        f"  = {number(r)} * ({number(gh[k])} - {number(m1)} - {number(xhat[k])} * {number(m2)}) = {number(value)}",
    ], value


def rms_norm(case, j, e):
    if j > 0:
        return linear("", "xhat")(case, j, e)
    r, xhat, gh, lines = _normalized(case, e, centred=False)
    k = e[-1]
    m2 = (gh * xhat).mean()
    value = r * (gh[k] - xhat[k] * m2)
    return lines + [
        f"mean(gh * xhat) = {number(m2)},  xhat_k = {number(xhat[k])}",
        f"{d(case.names[0])}{at(e)} = r (gh_k - xhat_k mean(gh xhat)) = {number(r)} * ({number(gh[k])} - "
        f"{number(xhat[k])} * {number(m2)}) = {number(value)}",
    ], value


def cross_entropy(case, j, e):
    z = case.xs[0]
    t = case.xs[1] if len(case.xs) > 1 else np.asarray(case.params["targets"])
    n, c = e
    ignore, reduction = case.params.get("ignore_index"), case.params.get("reduction", "mean")
    valid = np.ones(t.shape, bool) if ignore is None else t != ignore
    row = z[n]
    p = np.exp(row - row.max())
    p = p / p.sum()
    hot = float(c == t[n])
    g = case.g[n] if reduction == "none" else float(case.g)
    count = int(valid.sum()) if reduction == "mean" else 1
    value = g * (p[c] - hot) / count if valid[n] else 0.0
    over = f" / N, N = {count} rows that count" if reduction == "mean" else ""
    return [
        f"row {n}: z_n = {_some(row)}, target t_n = {t[n]}",
        f"softmax(z_n)_c = exp(z_nc) / sum_c' exp(z_nc') = {number(p[c])}",
        f"onehot(t_n)_c = [{c} = {t[n]}] = {int(hot)}",
        f"{d(case.names[0])}{at(e)} = g (softmax(z_n)_c - onehot(t_n)_c){over}",
        f"  = {number(g)} * ({number(p[c])} - {int(hot)}){f' / {count}' if over else ''} = {number(value)}",
    ], value


def linear_cross_entropy(case, j, e):
    x, w, b = case.xs[0], case.xs[1], case.xs[2] if len(case.xs) > 2 else None
    t = np.asarray(case.params["targets"])
    ignore, reduction = case.params.get("ignore_index"), case.params.get("reduction", "mean")
    valid = np.ones(t.shape, bool) if ignore is None else t != ignore
    count = int(valid.sum()) if reduction == "mean" else 1
    z = x @ w.T if b is None else x @ w.T + b
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p = p / p.sum(axis=1, keepdims=True)
    hot = np.arange(len(w)) == np.where(valid, t, 0)[:, None]
    dz = (p - hot) * valid[:, None] / count  # D: dL/dz per unit of g
    g = float(case.g)
    over = f" / {count}" if reduction == "mean" else ""
    rule = f"D = (softmax(z_n) - onehot(t_n)){over} for the rows that count, z = x W^T{' + b' if b is not None else ''}"
    if j == 0:
        n, k = e
        pairs, says = list(zip(dz[n], w[:, k])), f"g sum_c D_nc W_ck, D_n = {_some(dz[n])}"
    elif j == 1:
        c, k = e
        pairs, says = list(zip(dz[:, c], x[:, k])), f"g sum_n D_nc x_nk, D_:c = {_some(dz[:, c])}"
    else:
        (c,) = e
        pairs, says = [(v, 1.0) for v in dz[:, c]], f"g sum_n D_nc, D_:c = {_some(dz[:, c])}"
    total = float(sum(u * v for u, v in pairs))
    value = g * total
    return [
        rule,
        f"{d(case.names[j])}{at(e)} = {says}",
        f"  = {number(g)} * ({_products(pairs)}) = {number(g)} * {number(total)} = {number(value)}",
    ], value


def _attention_parts(case):
    """A = softmax(S), dA = (g v^T) * drop and dS = A (dA - rowsum(dA A)), over the broadcast batch."""
    q, k, v = case.xs[:3]
    bias = case.xs[3] if len(case.xs) > 3 else None
    p = case.params
    scale = 1 / math.sqrt(q.shape[-1]) if p.get("scale") is None else p["scale"]
    allowed = allowed_keys(p.get("allowed"), p.get("causal", False), q.shape[-2], k.shape[-2])
    a = softmax_of_scores(q, k, allowed, scale, bias)
    da = case.g @ np.swapaxes(v, -1, -2)
    if p.get("drop") is not None:
        da = da * p["drop"]
    s = (da * a).sum(axis=-1, keepdims=True)
    return scale, a, da, s, a * (da - s)


def _batches(full, shape, lead):
    """Every batch index of the broadcast batch shape `full` that reads batch index `lead` of an input."""
    shape = (1,) * (len(full) - len(shape)) + tuple(shape)
    lead = (0,) * (len(full) - len(lead)) + tuple(lead)
    return [b for b in np.ndindex(*full) if all(n == 1 or i == L for i, n, L in zip(b, shape, lead))]


def attention(case, j, e):
    if j == 2:
        return linear("", "", "A'[i, j], the weight query i gives key j")(case, j, e)
    q, k = case.xs[:2]
    scale, a, da, s, ds = _attention_parts(case)
    full = ds.shape[:-2]
    batches = _batches(full, case.xs[j].shape[:-2], e[:-2])
    b = batches[0]
    shared = f", summed over the {len(batches)} heads that share it" if len(batches) > 1 else ""
    if j == 3:  # the bias: dL/dbias = dS
        value = float(sum(ds[bb + e[-2:]] for bb in batches))
        return [f"{d(case.names[3])}{at(e)} = dS{at(b + e[-2:])}{shared} = {number(value)}"], value
    if j == 0:
        i, c = e[-2:]
        kk = np.broadcast_to(k, full + k.shape[-2:])
        value = scale * float(sum(ds[bb + (i,)] @ kk[bb][:, c] for bb in batches))
        terms = list(zip(ds[b + (i,)], kk[b][:, c]))
        return [
            f"query {i}{f' of batch {at(b)}' if b else ''}: dA[i, j] = g[i, :] · v[j, :] = {_some(da[b + (i,)])}",
            f"dS[i, j] = A[i, j] (dA[i, j] - s), s = sum_j A[i, j] dA[i, j] = {number(s[b + (i, 0)])}: "
            f"{_some(ds[b + (i,)])}",
            f"{d(case.names[0])}{at(e)} = scale sum_j dS[i, j] {case.names[1]}[j, {c}]{shared}",
            f"  = {number(scale)} * ({_products(terms)}) = {number(value)}",
        ], value
    key, c = e[-2:]
    qq = np.broadcast_to(q, full + q.shape[-2:])
    value = scale * float(sum(ds[bb][:, key] @ qq[bb][:, c] for bb in batches))
    terms = list(zip(ds[b][:, key], qq[b][:, c]))
    return [
        f"key {key}: dS[i, j] = A[i, j] (dA[i, j] - s_i) for each query i = {_some(ds[b][:, key])}",
        f"{d(case.names[1])}{at(e)} = scale sum_i dS[i, j] {case.names[0]}[i, {c}]{shared}",
        f"  = {number(scale)} * ({_products(terms)}) = {number(value)}",
    ], value


def _reduced(case, e):
    """g of the output element that x_e was reduced into, and the axes reduced."""
    x = case.xs[0]
    axis = case.params.get("axis")
    axes = tuple(range(x.ndim)) if axis is None else tuple(a % x.ndim for a in np.atleast_1d(axis))
    g = case.g if case.params.get("keepdims") else np.expand_dims(case.g, axes)
    y = case.y if case.params.get("keepdims") else np.expand_dims(case.y, axes)
    into = tuple(0 if a in axes else i for a, i in enumerate(e))
    return float(g[into]), float(y[into]), axes


def _extreme(word):
    def rule(case, j, e):
        g, y, axes = _reduced(case, e)
        x = case.xs[0]
        group = x[tuple(slice(None) if a in axes else i for a, i in enumerate(e))]
        ties = int(np.sum(group == y))
        value = g * float(x[e] == y) / ties
        return [
            f"{element(case.names[0], e)} = {number(x[e])}; the {word} of its {group.size} numbers is y = {number(y)}"
            + (f" ({ties} tie)" if ties > 1 else ""),
            f"{d(case.names[0])}{at(e)} = g [x_e = y] / #ties = {number(g)} * {int(x[e] == y)} / {ties} "
            f"= {number(value)}",
        ], value

    return rule


def var(case, j, e):
    g, _, axes = _reduced(case, e)
    x = case.xs[0]
    group = x[tuple(slice(None) if a in axes else i for a, i in enumerate(e))]
    n = group.size - case.params.get("ddof", 0)
    mean = group.mean()
    value = g * 2 * (x[e] - mean) / n
    return [
        f"mean of its {group.size} numbers = {number(mean)}",
        f"{d(case.names[0])}{at(e)} = g * 2 (x_e - mean) / (N - ddof) = {number(g)} * 2 * ({number(x[e])} - "
        f"{number(mean)}) / {n} = {number(value)}",
    ], value


def log_sum_exp(case, j, e):
    g, y, _ = _reduced(case, e)
    x = case.xs[0][e]
    value = g * math.exp(x - y)
    return [
        f"{d(case.names[0])}{at(e)} = g exp(x_e - y) = g softmax(x)_e = {number(g)} * exp({number(x)} - {number(y)}) "
        f"= {number(value)}"
    ], value


def prod(case, j, e):
    g, _, axes = _reduced(case, e)
    x = case.xs[0]
    group = x[tuple(slice(None) if a in axes else i for a, i in enumerate(e))].ravel()
    mine = np.ravel_multi_index(tuple(i for a, i in enumerate(e) if a in axes), [x.shape[a] for a in axes])
    others = float(np.prod(np.delete(group, mine)))
    value = g * others
    return [
        f"the product of the other {group.size - 1} numbers of its group = {number(others)}",
        f"{d(case.names[0])}{at(e)} = g * that = {number(g)} * {number(others)} = {number(value)}",
    ], value


FUSED = {
    "softmax": softmax,
    "log_softmax": log_softmax,
    "layer_norm": layer_norm,
    "rms_norm": rms_norm,
    "cross_entropy": cross_entropy,
    "linear_cross_entropy": linear_cross_entropy,
    "attention": attention,
    "max": _extreme("max"),
    "min": _extreme("min"),
    "var": var,
    "log_sum_exp": log_sum_exp,
    "prod": prod,
}
