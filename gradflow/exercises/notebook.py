"""A notebook's your-turn verdict: "✓ right", or "not yet" and a hint from what went wrong first.

    check("01.central_difference", central_1e4, f=f, x0=x0)

compares the answer with the value that notebook_checks.EXERCISES computes from the problem's data
the cell passes (never the answer itself). When they differ, "not yet" says, in this order:

    a blank        still `...`: fill it in (no hint is used up)
    a diagnosis    a mistake recognised from the two values by diagnose.compare (a wrong shape, a lost
                   keepdims, a sign, a scale factor, a transpose, a broadcast not summed back): its hint
    the ladder     the exercise's next hint level, one per such failed run: the idea, the shape of the
                   answer, then the formula (so the formula shows after two failed filled-in runs)

hint(id) prints the next level on request; solution(id) prints the solution once every level is shown.
"""

import numpy as np

from gradflow.exercises.diagnose import Failed, compare, sizes_of
from gradflow.exercises.notebook_checks import EXERCISES

# a blank uses up no hint level: it is told only to be filled
_FILL = "not yet: fill in the blank (the `...` on the # YOUR CODE line), then run the cell again"
_shown = {}  # check id -> how many of its hint levels this kernel has printed
_SHAPES = ("broadcast", "keepdims", "shape")  # diagnoses whose whole message names shapes only, no values
_VALUES = ("sign", "scale", "transpose")  # diagnoses whose message shows values: their hint alone is printed


def check(name, got, /, **data):
    """Print ✓ when `got` is the answer to exercise `name` for `data`, else "not yet" and a hint.

    got may be a function of no arguments (an answer that runs the learner's code): check calls it,
    so an error inside it is a hint, not a traceback.
    """
    exercise = EXERCISES[name]
    if _blank(got):
        print(_FILL)
        return
    try:
        got = got() if callable(got) else got
    except Exception as error:  # the learner's code failed: say so, with the next level of the ladder
        blank = "ellipsis" in str(error)
        print(_FILL if blank else f"not yet: your code raised {type(error).__name__}: {error}\n  {_next_level(name)}")
        return
    if got is ...:
        print(_FILL)
        return
    expected = exercise.expected(**data)
    if _agrees(got, expected, exercise.tol):
        print("✓ right")
        return
    print(f"not yet: {_diagnosis(got, expected) or _next_level(name)}")


def hint(name):
    """Print the next hint level of exercise `name`, as a failed run would."""
    print(_next_level(name))


def solution(name):
    """Print the solution of exercise `name`, once all its hint levels have been shown."""
    exercise = EXERCISES[name]
    left = len(exercise.hints) - _shown.get(name, 0)
    if left > 0:
        print(f'{left} hint level(s) first: hint("{name}")')
    else:
        print("\n".join(exercise.solution) or "this check follows from the blank of the check before it")


def _next_level(name):
    levels = EXERCISES[name].hints
    seen = _shown.get(name, 0)
    _shown[name] = seen + 1
    level = min(seen, len(levels) - 1)
    more = f'hint("{name}") or a run for the next' if level + 1 < len(levels) else f'solution("{name}") to see it'
    return f"{levels[level]} (hint {level + 1} of {len(levels)}; {more})"


def _blank(got):
    """True while the answer is still the blank: `...` itself, a function of no arguments reading a name
    bound to `...`, or a cell still holding a blank statement (a `...` line in a function body, which
    leaves no value behind to see, so the running cell's source is read)."""
    if got is ...:
        return True
    names = getattr(got, "__globals__", {})
    if any(names.get(n, None) is ... for n in getattr(getattr(got, "__code__", None), "co_names", ())):
        return True
    return any(_statement_blank(line) for line in _running_cell().splitlines())


def _statement_blank(line):
    code, _, comment = line.partition("#")
    return comment.strip().startswith("YOUR CODE") and code.strip() in ("...", "return ...", "if ...:")


def _running_cell():
    """The source of the cell being run, when it runs in IPython (Jupyter); else nothing."""
    try:
        return get_ipython().history_manager.input_hist_raw[-1]  # noqa: F821 (IPython's builtin)
    except (NameError, AttributeError, IndexError):
        return ""


def _agrees(got, expected, tol):
    if isinstance(expected, (str, set, dict)):
        return got == expected
    try:
        g, w = (np.asarray(getattr(v, "data", v), dtype=np.float64) for v in (got, expected))
    except (TypeError, ValueError):
        return False
    if np.asarray(getattr(expected, "data", expected)).dtype.kind in "biu":  # a count, a shape, a mask: exactly
        return g.shape == w.shape and bool(np.array_equal(g, w))
    return g.shape == w.shape and bool(np.allclose(g, w, rtol=tol, atol=tol))


def _diagnosis(got, expected):
    """The hint of the mistake diagnose.compare recognises in `got`, without the expected values; None
    when it recognises none (then the ladder speaks)."""
    if isinstance(expected, (str, set, dict)):
        return None
    expected = np.asarray(getattr(expected, "data", expected))
    try:
        compare(getattr(got, "data", got), expected, "your answer", sizes_of(expected.shape))
    except Failed as failed:
        said = " ".join(str(failed).split())
        if failed.kind in _SHAPES:
            return said
        if failed.kind in _VALUES:
            return said.partition("hint: ")[2]
    return None
