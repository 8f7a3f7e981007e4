"""The equivalence oracle: does a variant compute something different from gradflow's own piece?

Independent of the exercises' checks: it runs the reference and the variant on freshly drawn
random inputs, through the code paths the piece runs in, and compares everything observable.

    a backward, or an engine helper   forward and backward of gradcheck-table rows with the piece
                                      swapped in (a backward: the rows of the exercise's ops; a helper
                                      every op calls: every row), a random upstream gradient, every
                                      input's gradient and the output compared
    any other piece                   a driver (mutation_drivers.py) calls it with random valid
                                      arguments, and compares what it returns and what it leaves
                                      behind in its arguments
    topological_order                 "different" means the order breaks the rule: a node missing or
                                      twice, the root not first, a node after one that made its input

`differs(exercise, fn, seed)` returns None when no difference showed, else the first one in words.
An exception in the variant where the reference gave a value is a difference; a hang is caught by
the caller's time limit.
"""

import numpy as np
from mutation_compare import Different, same
from mutation_drivers import DRIVERS

from gradflow.engine.kernels import use_kernels
from gradflow.engine.tensor import Tensor
from gradflow.exercises.checks import OnTable, table_cases
from gradflow.tools.gradcheck_table import CASES


def differs(exercise, fn, seed):
    """None if `fn` agreed with the exercise's reference on every draw, else the first difference in words."""
    try:
        if isinstance(exercise.check, OnTable):
            _on_table(exercise, fn, seed)
        else:
            DRIVERS[exercise.name](exercise.piece, fn, np.random.default_rng(seed))
    except Different as d:
        return str(d)
    return None


def table_rows(exercise):
    """The rows a piece runs in: its ops' rows for a backward, every row for a helper every op calls."""
    return table_cases(*exercise.check.ops) if exercise.piece.attribute == "backward" else CASES


def _on_table(exercise, fn, seed):
    rng = np.random.default_rng(seed)
    rows = table_rows(exercise)
    for draw in ("normal", "coarse", "some inputs without grad"):
        for case in rows:
            arrays = [_drawn(rng, shape, case, coarse=draw == "coarse") for shape in case.shapes]
            wanted = [True] * len(arrays)
            if draw == "some inputs without grad" and len(arrays) > 1:
                wanted = list(rng.random(len(arrays)) < 0.5)
                wanted[rng.integers(len(arrays))] = True
            try:
                want = _run(case, arrays, wanted, None, rng)
            except Exception:  # the reference itself cannot run here (outside the op's domain): skip
                continue
            upstream = want.pop()
            try:
                with exercise.piece.replaced_by(fn):
                    got = _run(case, arrays, wanted, upstream, rng)[:-1]
            except Exception as error:
                raise Different(f"on {case.label} ({draw}): raised {type(error).__name__}: {error}") from None
            same(got, want, f"on {case.label} ({draw}): the output and input gradients")


def _drawn(rng, shape, case, coarse):
    """Random inputs: normal, or small integers (ties and zeros), positive where the op needs it."""
    draw_shape = shape[::-1] if case.transposed else shape
    if coarse:
        a = rng.integers(1, 4, draw_shape) if case.positive else rng.integers(-2, 3, draw_shape)
        a = a.astype(np.float64)
    else:
        a = rng.uniform(0.5, 2.0, draw_shape) if case.positive else rng.standard_normal(draw_shape)
    return a.T if case.transposed else a


def _run(case, arrays, wanted, upstream, rng):
    """[output, the gradient of each input (None where not wanted), the upstream gradient used]."""
    with use_kernels("plain"):
        xs = [Tensor(a.copy(), requires_grad=w) for a, w in zip(arrays, wanted)]
        y = case.fn(*xs)
        if upstream is None:
            upstream = rng.standard_normal(y.shape)
        y.backward(upstream.copy())
        return [y.data, *(x.grad.data if w and x.grad is not None else None for x, w in zip(xs, wanted)), upstream]
