"""One element of each input's gradient worked through with the page's own numbers, for the explorer's
backward step: the op's backward rule evaluated line by line, in float64 from the values forward saw,
to the number panel ③ shows (the engine's).

The element is the one of the input's gradient with the largest size |dL/dx_e|. By the chain rule it
is a sum over the outputs y_i that x_e reaches,

    dL/dx_e = sum_i g_i dy_i/dx_e,        g = dL/dy, the gradient that came in

written out term by term: one term for an elementwise op (g_i * its local derivative, as relu's
g * [x > 0]), the outputs a copied element lands in for a reshape, an index or an embedding (their
g summed over repeats), the shared axis of a matrix product. An op linear in one input (a product,
a sum, a mean, a copy) has dy_i/dx_e = y with x_e = 1 and the rest of x zero, minus y with all of x
zero, which is how its terms are found here; the fused ops (softmax, layer_norm, cross_entropy,
attention, ...) are written out with their own intermediate numbers in explore_worked_fused.py.
"""

import math

import numpy as np

from gradflow.tools.explore_worked_fused import FUSED
from gradflow.tools.explore_worked_terms import COPY, Case, at, d, linear, local, number


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


GELU_C, GELU_A = math.sqrt(2 / math.pi), 0.044715


def _silu(x):
    return _sigmoid(x) * (1 + x * (1 - _sigmoid(x)))


def _pow(xs, y, j):
    a, b = xs
    return b * a ** (b - 1) if j == 0 else y * np.log(a)


def _gelu(x):
    t = np.tanh(GELU_C * (x + GELU_A * x**3))
    return (1 + t) / 2 + x * (1 - t * t) / 2 * GELU_C * (1 + 3 * GELU_A * x * x)


def _gelu_erf(x):
    cdf = (1 + np.vectorize(math.erf)(x / math.sqrt(2))) / 2
    return cdf + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def _first(says, rule):
    """rule, its lines after one that gives the intermediate numbers at x_e: says(x_e) -> text."""

    def worked(case, j, e):
        lines, value = rule(case, j, e)
        x = float(case.xs[0][e])
        return [f"{case.names[0]}{at(e)} = {number(x)}: {says(x)}"] + lines, value

    return worked


def _gelu_numbers(x):
    u = GELU_C * (x + GELU_A * x**3)
    return f"u = c (x + a x^3) = {number(u)}, tanh(u) = {number(math.tanh(u))}, h = {number((1 + math.tanh(u)) / 2)}"


GELU_RULE = "(h + x (1 - tanh(u)^2) / 2 * c (1 + 3 a x^2))"  # dy/dx, the docstring's names


def _silu_numbers(x):
    return f"s = sigmoid(x) = {number(_sigmoid(x))}"


def _gelu_erf_numbers(x):
    cdf, pdf = (1 + math.erf(x / math.sqrt(2))) / 2, math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    return f"Phi(x) = {number(cdf)}, phi(x) = exp(-x^2 / 2) / sqrt(2 pi) = {number(pdf)}"


def _clip(case):
    lo, hi = case.params.get("lo"), case.params.get("hi")
    return lambda xs, y, j: (xs[0] >= (-np.inf if lo is None else lo)) & (xs[0] <= (np.inf if hi is None else hi))


def _tie(keep):
    return lambda xs, y, j: (keep(xs[j], xs[1 - j])) + 0.5 * (xs[0] == xs[1])


# dy/dx of each elementwise op: its text ({x} this input, {other} the other one, {y} the output) and values
LOCAL = {
    "exp": local("{y}", lambda xs, y, j: y),
    "log": local("1 / {x}", lambda xs, y, j: 1 / xs[0]),
    "log1p": local("1 / (1 + {x})", lambda xs, y, j: 1 / (1 + xs[0])),
    "sqrt": local("1 / (2 {y})", lambda xs, y, j: 1 / (2 * y)),
    "rsqrt": local("-{y}^3 / 2", lambda xs, y, j: -(y**3) / 2),
    "abs": local("sign({x})", lambda xs, y, j: np.sign(xs[0])),
    "tanh": local("1 - {y}^2", lambda xs, y, j: 1 - y * y),
    "sin": local("cos({x})", lambda xs, y, j: np.cos(xs[0])),
    "cos": local("-sin({x})", lambda xs, y, j: -np.sin(xs[0])),
    "sigmoid": local("{y} (1 - {y})", lambda xs, y, j: y * (1 - y)),
    "relu": local("[{x} > 0]", lambda xs, y, j: (xs[0] > 0) * 1.0),
    "gelu": _first(_gelu_numbers, local(GELU_RULE, lambda xs, y, j: _gelu(xs[0]))),
    "gelu_erf": _first(_gelu_erf_numbers, local("(Phi(x) + x phi(x))", lambda xs, y, j: _gelu_erf(xs[0]))),
    "silu": _first(_silu_numbers, local("s (1 + x (1 - s))", lambda xs, y, j: _silu(xs[0]))),
    "maximum": local(("[a > b] + [a = b] / 2", "[b > a] + [a = b] / 2"), _tie(lambda p, q: p > q)),
    "minimum": local(("[a < b] + [a = b] / 2", "[b < a] + [a = b] / 2"), _tie(lambda p, q: p < q)),
    "pow": local(("b a^(b-1)", "{y} log(a)"), lambda xs, y, j: _pow(xs, y, j)),
}


def _div(case, j, e):
    if j == 0:
        return linear("1 / {1}")(case, j, e)
    return local("-{y} / {x}", lambda xs, y, j: -y / xs[1])(case, j, e)


RULES = dict(LOCAL) | {
    "clip": lambda case, j, e: local("[lo <= {x} <= hi]", _clip(case))(case, j, e),
    "div": _div,
    "add": linear(COPY),
    "sub": linear(COPY, "-1"),
    "neg": linear("-1"),
    "mul": linear("{1}", "{0}"),
    "matmul": linear("{1}", "{0}"),  # dy_ij/dA_ik = B_kj, dy_ij/dB_kj = A_ik: the other factor's matching number
    "linear": linear("{1}", "{0}", COPY),
    "einsum": linear("the product of the other factors"),
    "mean": linear("1/n for the n numbers averaged"),
    "cumsum": linear(COPY),
    "rope": linear("cos or ±sin of its angle (its pair turned by R)"),
    **{
        name: linear(COPY)
        for name in "sum reshape permute expand cat stack flip roll pad copy cast index index_put gather embedding "
        "scatter_add masked_fill where".split()
    },
}


def worked(op, names, inputs, out, grad, shares, y="y", reads=None, slots=None):
    """[{"input": j, "at": index, "value": dL/dx_j at index from the rule, "lines": [...]}] for each input
    that gets a gradient; None when the op has no rule here (a test fails for such an op).

    names, inputs, shares: per input (None where it is no tensor); out, grad: the output's value and g.
    reads, slots: per input, the tensor it is (any key) and the name forward gives it (a, b): a tensor the
    op reads twice (x * x) is worked once per read, each named by its slot, and its shares summed."""
    rule = FUSED.get(op.name) or RULES.get(op.name)
    if grad is None or rule is None:
        return None
    twice = _read_twice(reads or [None] * len(names))
    case = Case(op, [slots[j] if j in twice else n for j, n in enumerate(names)], inputs, out, grad, y)
    items = []
    for j, share in enumerate(shares):
        if share is None or share.size == 0:
            continue
        e = np.unravel_index(int(np.argmax(np.abs(np.nan_to_num(share)))), share.shape)
        e = tuple(int(k) for k in e)
        lines, value = rule(case, j, e)
        item = {"input": j, "at": list(e), "value": float(f"{value:.8g}"), "lines": lines}
        if case.cancelled is not None:
            item["rounding"], case.cancelled = float(f"{case.cancelled:.3g}"), None
        items.append(item)
    for group in {tuple(js) for js in twice.values()}:
        _summed([item for item in items if item["input"] in group], names[group[0]], [slots[j] for j in group])
    return items


def _read_twice(reads):
    """{input: the inputs that read the same tensor} of every input whose tensor the op reads more than once."""
    same = {
        j: [k for k, other in enumerate(reads) if other is not None and other == key] for j, key in enumerate(reads)
    }
    return {j: js for j, js in same.items() if len(js) > 1}


def _summed(items, name, slots):
    """The worked reads of one tensor, said to be its shares, and their sum where they work the same element."""
    if not items:
        return
    times = "twice" if len(slots) == 2 else f"{len(slots)} times"
    items[0]["lines"].insert(0, f"{name} is read {times}, as {' and '.join(slots)}: each read sends a share")
    places = {tuple(item["at"]) for item in items}
    if len(items) > 1 and len(places) == 1:
        total = sum(item["value"] for item in items)
        parts = " + ".join(d(slots[k]) for k in range(len(items)))
        values = " + ".join(number(item["value"]) for item in items)
        items[-1]["lines"].append(f"{d(name)}{at(items[0]['at'])} from this op = {parts} = {values} = {number(total)}")
