"""The terms of a worked element (explore_worked.py): dL/dx_e = sum_i g_i dy_i/dx_e over the outputs
y_i that x_e reaches, each term written with the page's numbers, as the page writes them.

An op linear in an input (a product, a sum, a copy, an index) gives dy_i/dx_e as its own forward
with x_e = 1 and the rest of x zero, minus its forward with x zero (Case.column); an elementwise op
gives it as its local derivative at the one output x_e becomes (or the several a broadcast x_e
reaches).
"""

import math

import numpy as np

COPY = "1"  # the coefficient of an op that copies (or sums) its input's numbers: each lands with weight 1
SHOWN = 3  # terms of a long sum written out before "…"
ROUNDING = 1e-5  # a sum this small beside the size of its terms is 0 but for float32's rounding


def number(v):
    """A number as the page writes it (explorer.js's fmt): 4 significant digits, exponent outside [1e-3, 1e4)."""
    v = float(v)
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else str(v)
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        mantissa, exponent = f"{v:.3e}".split("e")
        return f"{mantissa}e{int(exponent):+d}"
    return f"{v:.4g}"


def at(index):
    return "[" + ", ".join(map(str, index)) + "]" if len(index) else ""


def d(name):
    """dL/d of a name, bracketed when it is an expression: dL/d(W @ x)."""
    return f"dL/d{name}" if name.replace("_", "").replace(".", "").isalnum() else f"dL/d({name})"


def element(name, index):
    return (name if d(name) == "dL/d" + name else f"({name})") + at(index)


class Case:
    """What a worked element is computed from: the op, its inputs' names and values (float64, integer
    ids kept), its output's name and value, and g = dL/d(output)."""

    def __init__(self, op, names, inputs, out, grad, y):
        self.op, self.names, self.y_name = op, [n or f"x{i}" for i, n in enumerate(names)], y
        self.cancelled = None  # set by a sum whose terms cancel: the size below which it is rounding
        self.xs = [None if x is None else np.asarray(x) for x in inputs]
        self.xs = [x if x is None or x.dtype.kind not in "fc" else x.astype(np.float64) for x in self.xs]
        self.y, self.g = np.asarray(out, dtype=np.float64), np.asarray(grad, dtype=np.float64)
        self.params = op.params

    def forward(self, j, value):
        """The op's output with input j replaced by `value` (its own forward, nothing recorded)."""
        arrays = self.xs[:j] + [value] + self.xs[j + 1 :]
        ctx = type(self.op)()
        ctx._recording = False
        with np.errstate(all="ignore"):
            return np.asarray(type(self.op).forward(ctx, *arrays, **self.params), dtype=np.float64)

    def column(self, j, e):
        """dy_i/dx_e for every output i, of an op linear in input j: y(x = one-hot at e) - y(x = 0)."""
        zero = np.zeros_like(self.xs[j])
        one = zero.copy()
        one[e] = 1
        a, b = self.forward(j, one), self.forward(j, zero)
        with np.errstate(invalid="ignore"):
            return np.where(a == b, 0.0, a - b)  # a place filled with -inf in both reads 0, not nan


def through(case, j, e, c, coefficient, copy=False):
    """dL/dx_e = sum_i g_i c_i over the outputs i where c_i = dy_i/dx_e is not 0, written out; copy: an op
    that only moves numbers (a reshape, an index, an add), whose gradient lands where x_e went."""
    reached = [tuple(int(k) for k in i) for i in np.argwhere(c != 0)]
    gs, cs = [case.g[i] for i in reached], [c[i] for i in reached]
    value = float(sum(g * k for g, k in zip(gs, cs)))
    lines, value = _terms(case, j, e, reached, gs, cs, value, coefficient, copy)
    size = sum(abs(g * k) for g, k in zip(gs, cs))
    if reached and abs(value) <= ROUNDING * size:  # as a key's bias: its gradient is 0 in exact arithmetic
        case.cancelled = ROUNDING * size
        lines.append(f"  the terms cancel: 0 up to rounding, which leaves a number below {number(ROUNDING * size)}")
    return lines, value


def _terms(case, j, e, reached, gs, cs, value, coefficient, copy):
    name, left = case.names[j], d(case.names[j]) + at(e)
    more = f" + … ({len(reached)})" if len(reached) > SHOWN else ""
    if not reached:
        return [f"{left} = 0: {element(name, e)} reaches no output"], 0.0
    if copy and all(k == 1 for k in cs):  # the gradient of every place it landed, summed
        where = "the place" if len(reached) == 1 else f"{len(reached)} places,"
        shown = " + ".join(number(g) for g in gs[:SHOWN]) + more
        places = ", ".join(at(i) for i in reached[:2]) + ", …" * (len(reached) > 2)
        lines = [f"{element(name, e)} lands in {where} {places}"]
        return lines + [f"{left} = sum of g there = {shown} = {number(value)}"], value
    if len(reached) == 1:
        (i,) = reached
        rule = f"g{at(i)} * {coefficient}"
        return [f"{left} = {rule} = {number(gs[0])} * {number(cs[0])} = {number(value)}"], value
    shown = " + ".join(f"{number(g)}*{number(k)}" for g, k in zip(gs[:SHOWN], cs[:SHOWN])) + more
    return [
        f"{left} = sum of g * {coefficient} over the {len(reached)} outputs it reaches",
        f"  = {shown} = {number(value)}",
    ], value


def linear(*coefficients):
    """The rule of an op linear in an input: its terms found by its own forward (Case.column)."""

    def rule(case, j, e):
        text = coefficients[min(j, len(coefficients) - 1)].format(*case.names, y=case.y_name)
        return through(case, j, e, case.column(j, e), text, copy=text == COPY)

    return rule


def local(text, derivative):
    """The rule of an elementwise op: g times its local derivative dy/dx (an array over the output),
    summed over the outputs a broadcast input reaches."""

    def rule(case, j, e):
        xs = [None if x is None else np.broadcast_to(x, case.y.shape) for x in case.xs]
        dy = derivative(xs, case.y, j) * np.ones(case.y.shape)
        ids = np.broadcast_to(np.arange(case.xs[j].size).reshape(case.xs[j].shape), case.y.shape)
        here = ids == np.ravel_multi_index(e, case.xs[j].shape) if case.xs[j].ndim else np.ones(case.y.shape, bool)
        words = text[min(j, len(text) - 1)] if isinstance(text, tuple) else text
        same = case.xs[j].shape == case.y.shape  # then x_e makes the output at e: its names carry the index
        other = case.names[1 - j] if len(case.names) == 2 else ""
        x, y = (element(case.names[j], e), element(case.y_name, e)) if same else (case.names[j], case.y_name)
        coefficient = words.format(x=x, other=other, y=y)
        lines, value = through(case, j, e, np.where(here, dy, 0.0), coefficient)
        if not np.any(here & (dy != 0)):  # reached, but its local derivative is 0 there
            lines = [f"{d(case.names[j])}{at(e)} = g * {coefficient} = g * 0 = 0"]
        return lines, value

    return rule
