"""Telling a learner what is wrong, in their terms: which value, which element, expected and got, and
the mistake it looks like.

A wrong array is compared with gradflow's own (the expected one), and these mistakes are recognised
from the two arrays alone:

    broadcast   the gradient kept the broadcast shape: summing it over the broadcast axes gives the
                expected one (the input had size 1 there, or no such axis)
    keepdims    the same values with an axis of size 1 missing (a sum or mean without keepdims=True)
    transpose   the expected array with its last two axes swapped (or all axes reversed)
    sign        -expected at every element
    scale       c * expected at every element, c a constant named when it is a known one
                (2, 1/2, a size of the input, its square root)

An exception raised inside the learner's code is shown as their own line, not gradflow's traceback;
NotImplementedError("TODO ...") means the stub is still blank.
"""

import itertools
import math
import traceback
from pathlib import Path

import numpy as np

RTOL, ATOL = 1e-6, 1e-9  # float64 throughout: a right formula agrees to ~1e-12, a wrong one by far more


class Failed(Exception):
    """A learner's piece does not pass; the message is for the learner. `kind` names the mistake."""

    def __init__(self, message, kind="values"):
        super().__init__(message)
        self.kind = kind


def within(where, failed):
    """The Failed, said to have happened `where` (a blank stub is blank wherever it is met)."""
    if failed.kind == "todo":
        return failed
    return Failed(f"{where}:\n  {failed}", failed.kind)


def close(got, expected):
    """Same shape and the same values up to float64 rounding."""
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    return got.shape == expected.shape and bool(np.allclose(got, expected, rtol=RTOL, atol=ATOL * scale))


def compare(got, expected, what, sizes=()):
    """Return quietly if `got` is `expected`; else raise Failed saying what differs and how.

    `what` names the value ("the gradient of b (input 1, shape (3, 1))"); `sizes` are the sizes a
    wrong scale may be off by (the input's axes and their products).
    """
    expected = np.asarray(expected)
    if got is None:
        raise Failed(f"{what}: you returned None, expected an array of shape {expected.shape}", "none")
    try:
        got = np.asarray(got, dtype=np.float64 if expected.dtype.kind == "f" else None)
    except (TypeError, ValueError):
        said = f"{what}: you returned a {type(got).__name__}, expected an array of shape {expected.shape}"
        raise Failed(said) from None
    if got.shape == expected.shape and (close(got, expected) if expected.dtype.kind == "f" else _equal(got, expected)):
        return
    if got.shape != expected.shape:
        raise _shape_mistake(got, expected, what)
    if expected.dtype.kind != "f":
        raise Failed(f"{what}: {_first_difference(got, expected)}")
    raise _value_mistake(got, expected, what, sizes)


def _equal(got, expected):
    return bool(np.array_equal(got, expected))


def _shape_mistake(got, expected, what):
    said = f"{what} has shape {got.shape}, expected {expected.shape}"
    if summed_to(got, expected.shape) is not None and close(summed_to(got, expected.shape), expected):
        axes = _broadcast_axes(got.shape, expected.shape)
        return Failed(
            f"{said}.\n  hint: gradient not summed back over the broadcast axes {axes}: the input was broadcast "
            f"from {expected.shape} to {got.shape}, each of its elements copied along those axes, so its gradient is "
            "the sum over the copies (sum over those axes, then reshape to the input's shape)",
            "broadcast",
        )
    same_values = got.size == expected.size and close(got.reshape(expected.shape), expected)
    if same_values and _drop_ones(got.shape) == _drop_ones(expected.shape):
        if got.ndim < expected.ndim:
            axes = _ones_missing(got.shape, expected.shape)
            return Failed(
                f"{said}: the right values, but without the axis of size 1 at {axes}.\n  hint: keepdims lost: a "
                "sum or mean over an axis drops it unless you pass keepdims=True (or put it back with "
                "np.expand_dims / reshape)",
                "keepdims",
            )
        return Failed(
            f"{said}: the right values, with an extra axis of size 1.\n  hint: keepdims kept where the result "
            "should lose the axis: drop keepdims=True there, or reshape to the expected shape",
            "keepdims",
        )
    if got.ndim == expected.ndim >= 2 and _transposed(got, expected):
        return Failed(
            f"{said}: it is the transpose of the expected array.\n  hint: a missing transpose: the product's "
            "operands are in the wrong order, or one of them needs its last two axes swapped "
            "(np.swapaxes(x, -1, -2), x.T for a matrix)",
            "transpose",
        )
    if same_values:
        return Failed(f"{said}: the right values in the wrong shape; reshape it to {expected.shape}", "shape")
    return Failed(f"{said}.", "shape")


def _value_mistake(got, expected, what, sizes):
    first = _first_difference(got, expected)
    if not np.isfinite(got).all() and np.isfinite(expected).all():
        i = _index(np.argwhere(~np.isfinite(got))[0])
        return Failed(f"{what} has {got[i]} at element {i} (expected {expected[i]:.6g}); {first}", "nonfinite")
    if got.ndim >= 2 and _transposed(got, expected):
        return Failed(
            f"{what}: {first}: it is the transpose of the expected array.\n  hint: a missing transpose: the product's "
            "operands are in the wrong order, or one of them needs its last two axes swapped",
            "transpose",
        )
    if close(got, -expected):
        return Failed(
            f"{what}: {first}.\n  hint: a sign error: every element is the negative of the expected one "
            "(check each minus sign: the derivative of -x, of 1/x, the direction of a step)",
            "sign",
        )
    norm = float(np.vdot(expected, expected))
    c = float(np.vdot(got, expected)) / norm if norm > 0 else 0.0
    if abs(c) > 1e-9 and abs(c - 1) > 1e-6 and close(got, c * expected):
        name = _constant(c, sizes)
        return Failed(
            f"{what}: {first}.\n  hint: a scale factor off: every element is {name} times the expected one "
            "(check the constant factors: the 1/n of a mean, the 2 of a square, a 1/sqrt(d) scale, a learning rate)",
            "scale",
        )
    if not got.any() and expected.any():
        return Failed(f"{what}: {first}: all of yours are zero.", "zeros")
    return Failed(f"{what}: {first}.")


def _first_difference(got, expected):
    """'element (2, 0): expected 0.74, got -0.74 (5 of 12 elements differ)': the largest difference."""
    if expected.dtype.kind == "f":
        scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
        wrong = ~np.isclose(got, expected, rtol=RTOL, atol=ATOL * scale)
        gap = np.where(np.isfinite(got), np.abs(got - expected), np.inf)
        at = _index(np.unravel_index(int(np.argmax(np.where(wrong, gap, -1))), got.shape))
        values = f"expected {expected[at]:.6g}, got {got[at]:.6g}"
    else:
        wrong = got != expected
        at = _index(np.argwhere(wrong)[0])
        values = f"expected {expected[at]!r}, got {got[at]!r}"
    count = int(wrong.sum())
    where = f"element {at}: " if got.ndim else ""
    return f"{where}{values} ({count} of {got.size} element{'s' * (got.size != 1)} differ{'s' * (count == 1)})"


def _index(i):
    return tuple(int(j) for j in i)


def summed_to(got, shape):
    """got summed over the axes broadcasting would have created from `shape`, or None if it can't be
    (autograd.unbroadcast's rule, written again here: a check of unbroadcast must not rely on it)."""
    try:
        if np.broadcast_shapes(got.shape, shape) != got.shape:
            return None
    except ValueError:
        return None
    extra = got.ndim - len(shape)
    stretched = tuple(extra + i for i, n in enumerate(shape) if n == 1 and got.shape[extra + i] != 1)
    return got.sum(axis=tuple(range(extra)) + stretched, keepdims=True).reshape(shape)


def _broadcast_axes(big, small):
    extra = len(big) - len(small)
    return tuple(range(extra)) + tuple(extra + i for i, n in enumerate(small) if n == 1 and big[extra + i] != 1)


def _drop_ones(shape):
    return tuple(n for n in shape if n != 1)


def _ones_missing(short, long):
    """The axes of size 1 of `long` that `short` lacks (matching the other axes in order)."""
    missing, j = [], 0
    for i, n in enumerate(long):
        if j < len(short) and short[j] == n:
            j += 1
        else:
            missing.append(i)
    return missing[0] if len(missing) == 1 else tuple(missing)


def _transposed(got, expected):
    if got.shape == expected.shape[:-2] + expected.shape[:-3:-1] and close(got, np.swapaxes(expected, -1, -2)):
        return not close(got, expected)
    return expected.ndim > 2 and got.shape == expected.shape[::-1] and close(got, expected.T)


def _constant(c, sizes):
    """c by a name a learner recognises: 2, 1/2, 12, 1/sqrt(4), or its digits."""
    names = {"2": 2.0, "3": 3.0, "4": 4.0}
    for n in sizes:
        if n > 1:
            names[f"{n}"] = float(n)
            names[f"sqrt({n})"] = math.sqrt(n)
    candidates = {**names, **{f"1/{k}": 1 / v for k, v in names.items()}}
    candidates |= {f"-{k}": -v for k, v in candidates.items()}
    name, value = min(candidates.items(), key=lambda kv: abs(c / kv[1] - 1))
    return name if abs(c / value - 1) < 1e-6 else f"{c:.6g}"


def sizes_of(*shapes):
    """Every product of a subset of each shape's axes: the counts a mean or a scale may divide by."""
    sizes = set()
    for shape in shapes:
        for r in range(1, len(shape) + 1):
            sizes |= {math.prod(axes) for axes in itertools.combinations(shape, r)}
    return sorted(sizes)


def still_todo(who, path):
    return Failed(f"still TODO: write the body of {who} in {Path(path).name}", "todo")


def learner_error(error, path, who):
    """Failed for an exception from the learner's code: their line and the error, a hint if we know one."""
    if isinstance(error, NotImplementedError) and "TODO" in str(error):
        return still_todo(who, path)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _same_file(f.filename, path)]
    where = f" at line {frames[-1].lineno} of {Path(path).name}:\n    {frames[-1].line}" if frames else ""
    message = f"your {who} raised {type(error).__name__}{where}\n  {type(error).__name__}: {error}"
    hint = _error_hint(error)
    return Failed(message + (f"\n  hint: {hint}" if hint else ""), "error")


def _same_file(a, b):
    return Path(a).resolve() == Path(b).resolve()


def _error_hint(error):
    text = str(error)
    if isinstance(error, RecursionError):
        return "a recursive walk goes as deep as the graph is long: keep the nodes to visit in a list (a stack)"
    if "mismatch in its core dimension" in text or "matmul" in text and "mismatch" in text:
        return "the inner sizes of a product differ: an operand may need a transpose, or the order is swapped"
    if "could not be broadcast" in text:
        shapes = [tuple(int(n) for n in s.split(",") if n.strip()) for s in _shapes_in(text)]
        if len(shapes) >= 2 and any(len(a) == len(b) + 1 for a in shapes for b in shapes):
            return (
                "keepdims lost: one operand is missing the axis a sum or mean removed; reduce with keepdims=True "
                "(or, for a weight per row, index it [:, None] to multiply the rows)"
            )
        return "the shapes do not line up: print each array's shape, and the shape the result must have"
    if "'NoneType' object" in text:
        return "a value is None: an optional input (a bias, a mask) or an input without a gradient function"
    return None


def _shapes_in(text):
    """The shapes '(3,5) (3,)' numpy names in a broadcasting error, as '3,5' and '3,'."""
    out, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth, current = depth + 1, ""
        elif ch == ")" and depth:
            depth -= 1
            if all(c.isdigit() or c in ", " for c in current):
                out.append(current)
        elif depth:
            current += ch
    return out
