"""`gradflow gradcheck`: check every op's backward against finite differences and print the table."""

import math
import sys
import time

import numpy as np

from gradflow.engine.gradcheck import analytic_and_numerical
from gradflow.tools.gradcheck_table import CASES


def add_command(sub):
    check = sub.add_parser("gradcheck", help="check every op's backward against finite differences")
    check.add_argument("--op", help="only this op (e.g. matmul, softmax, cross_entropy)")
    check.add_argument("--atol", type=float, default=1e-5)
    check.add_argument("--rtol", type=float, default=1e-4)
    check.set_defaults(run=run)


def run(args):
    for flag, value in (("--atol", args.atol), ("--rtol", args.rtol)):
        if not (math.isfinite(value) and value >= 0):  # a negative tolerance fails every op, a NaN passes none
            raise ValueError(f"{flag} must be a finite non-negative number, got {value}")
    cases = [c for c in CASES if args.op is None or c.name.split()[0] == args.op]
    if not cases:
        names = sorted({c.name.split()[0] for c in CASES})
        print(f"gradflow gradcheck: no op named {args.op!r}; ops: {', '.join(names)}", file=sys.stderr)
        return 2
    print(f"{'op':<44} {'max abs err':>12} {'max rel err':>12}  result")
    failed = 0
    start = time.perf_counter()
    for case in cases:
        pairs = analytic_and_numerical(case.fn, *case.inputs())
        abs_err = max(float(np.abs(a - n).max(initial=0)) for _, a, n in pairs)
        rel_err = max(float((np.abs(a - n) / (np.abs(n) + args.atol)).max(initial=0)) for _, a, n in pairs)
        ok = all(np.allclose(a, n, rtol=args.rtol, atol=args.atol) for _, a, n in pairs)
        failed += not ok
        print(f"{case.label:<44} {abs_err:>12.2e} {rel_err:>12.2e}  {'pass' if ok else 'FAIL'}")
    took = time.perf_counter() - start
    print(f"{len(cases) - failed} passed, {failed} failed ({len(cases)} checks in float64, {took:.1f} s)")
    return 1 if failed else 0
