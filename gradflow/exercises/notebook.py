"""A notebook's your-turn verdict, with hints in levels: each failure of a check says a little more.

    check(got, want, ("the idea", "the shape of the answer", "the formula"))

prints "✓ right" when got equals want, else "not yet: " and the next hint: the first failure the
idea, the next the shape of the answer, then the formula, and the last level again from then on.
No level holds the code: the cell's own blank is the learner's to write (tests/test_tutorials.py
checks that no visible part of a your-turn cell holds its solution).
"""

import numpy as np

_failures = {}  # hints -> how many times that check has said "not yet" in this kernel


def check(got, want, hints, tol=1e-6):
    """✓ when got equals want (numbers to within tol), else "not yet" and the next level of `hints`.

    got may be a function of no arguments: check calls it, so a blank or an error inside it prints the
    hint. `hints` is one string or a tuple of them, from the idea to the formula.
    """
    levels = (hints,) if isinstance(hints, str) else tuple(hints)
    try:
        got = got() if callable(got) else got
        if got is ...:
            ok, error = False, None
        elif isinstance(want, (str, set, dict)):
            ok, error = got == want, None
        else:
            g, w = (np.asarray(getattr(v, "data", v), dtype=np.float64) for v in (got, want))
            ok, error = g.shape == w.shape and np.allclose(g, w, rtol=tol, atol=tol), None
    except Exception as e:  # a blank left in, or a mistake: a hint, not a traceback
        ok, error = False, None if "ellipsis" in str(e) else f"{type(e).__name__}: {e}"
    if ok:
        print("✓ right")
        return
    seen = _failures.get(levels, 0)
    _failures[levels] = seen + 1
    hint = levels[min(seen, len(levels) - 1)]
    more = f" (run it again for more: hint {seen + 1} of {len(levels)})" if seen + 1 < len(levels) else ""
    print(f"not yet: {hint}" + (f" ({error})" if error else "") + more)
