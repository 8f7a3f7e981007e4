"""One element of a backward step worked through with its numbers, for the explorer's step panel.

The element is the one with the largest incoming gradient g_i = dL/dy_i. An elementwise op sends
each input the gradient times its local derivative,

    dL/dx_i = g_i * dy_i/dx_i          e.g. g_i * y_i for exp, g_i * [x_i > 0] for relu

and a matrix product sums over the shared axis,

    dL/dA[i, k] = sum_j g[i, j] B[k, j]        dL/dB[k, j] = sum_i A[i, k] g[i, j]

Every number written here is the engine's: the shares are those its backward sent.
"""

import numpy as np

# dy/dx of an elementwise op, as a formula and from (the inputs' values, the output's value, which input)
# ({x}: this input's element, {y}: the output's, {other}: the other input's)
LOCAL = {
    "add": ("1", lambda xs, y, j: 1.0),
    "sub": ("1", lambda xs, y, j: 1.0 if j == 0 else -1.0),
    "neg": ("-1", lambda xs, y, j: -1.0),
    "mul": ("{other}", lambda xs, y, j: xs[1 - j]),
    "relu": ("[{x} > 0]", lambda xs, y, j: float(xs[0] > 0)),
    "exp": ("{y}", lambda xs, y, j: y),
    "tanh": ("(1 - {y}^2)", lambda xs, y, j: 1 - y * y),
    "sigmoid": ("{y} (1 - {y})", lambda xs, y, j: y * (1 - y)),
    "log": ("1 / {x}", lambda xs, y, j: 1 / xs[0]),
}


def _n(v):
    return f"{float(v):.4g}"


def _d(name):
    """dL/d of a name: d(W @ x) when it is an expression."""
    return f"d{name}" if name.replace("_", "").replace(".", "").isalnum() else f"d({name})"


def _at(name, at):
    return (name if _d(name) == "d" + name else f"({name})") + at


def worked(op, names, inputs, out, grad, shares, y="y"):
    """Lines that work one element of op's backward through, or None when it is not a case written here.

    names, inputs, shares: per input (None where it is no tensor); out, grad: the output's value and
    dL/d(out); y: the output's name."""
    if grad is None or grad.size == 0:
        return None
    i = np.unravel_index(int(np.argmax(np.abs(grad))), grad.shape)
    at = "[" + ", ".join(map(str, i)) + "]" if grad.ndim else ""
    lines = [f"take {_at(y, at)}: g{at} = dL/{_d(y)}{at} = {_n(grad[i])}"]
    same = [x is not None and x.shape == grad.shape for x in inputs]
    if op.name in LOCAL and any(same):
        symbol, local = LOCAL[op.name]
        values = [None if x is None or not s else x[i] for x, s in zip(inputs, same)]
        for j, (name, s, share) in enumerate(zip(names, same, shares)):
            if s and share is not None:
                d = local(values, out[i], j)
                if d is None:  # mul by a broadcast factor: its element is not the one at i
                    continue
                other = _at(names[1 - j], at) if len(names) == 2 and names[1 - j] else ""
                rule = symbol.format(x=_at(name, at), y=_at(y, at), other=other)
                lines.append(f"dL/{_d(name)}{at} = g{at} * {rule} = {_n(grad[i])} * {_n(d)} = {_n(share[i])}")
        return lines
    if op.name == "matmul" and len(inputs) == 2 and all(x is not None for x in inputs):
        return lines + _matmul(names, inputs, grad, shares, i)
    return None


def _matmul(names, inputs, grad, shares, i):
    """A @ B with A 2-D and B 1-D or 2-D: element [., 0] of each input's gradient, its sum written out."""
    (a, b), (na, nb) = inputs, names
    if a.ndim != 2 or b.ndim not in (1, 2):
        return []
    m, g = (b, grad) if b.ndim == 2 else (b[:, None], grad[:, None])  # a vector as a one-column matrix
    row, col = i[0], i[1] if b.ndim == 2 else 0
    g_at, b_at = (f"g[{row}, j]", "[0, j]") if b.ndim == 2 else (f"g[{row}]", "[0]")
    lines = []
    if shares[0] is not None:
        lines.append(_sum(f"dL/{_d(na)}[{row}, 0]", f"{g_at} {_at(nb, b_at)}", g[row], m[0], shares[0][row, 0]))
    if shares[1] is not None:
        at, where, g_r = ((0, col), f"[0, {col}]", f"g[r, {col}]") if b.ndim == 2 else ((0,), "[0]", "g[r]")
        lines.append(_sum(f"dL/{_d(nb)}{where}", f"{_at(na, '[r, 0]')} {g_r}", a[:, 0], g[:, col], shares[1][at]))
    return lines


def _sum(left, term, p, q, total):
    shown = " + ".join(f"{_n(x)}*{_n(y)}" for x, y in list(zip(p, q))[:4]) + (" + ..." if len(p) > 4 else "")
    return f"{left} = {'sum of ' if len(p) > 1 else ''}{term} = {shown} = {_n(total)}"
