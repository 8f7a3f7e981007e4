"""The `gradflow` command: `gradflow gradcheck` verifies every op's gradient and prints the table."""

import argparse
import sys
import time

import numpy as np

from . import commands, graph


def _gradcheck(args):
    from .gradcheck import analytic_and_numerical
    from .optable import CASES

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


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="gradflow", description="gradflow: an autograd engine you can read, check and train with."
    )
    sub = parser.add_subparsers(dest="command", metavar="command")
    check = sub.add_parser("gradcheck", help="check every op's backward against finite differences")
    check.add_argument("--op", help="only this op (e.g. matmul, softmax, cross_entropy)")
    check.add_argument("--atol", type=float, default=1e-5)
    check.add_argument("--rtol", type=float, default=1e-4)
    check.set_defaults(run=_gradcheck)
    commands.add_commands(sub)
    graph.add_command(sub)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.run(args)
    except (ValueError, OSError) as e:  # bad input: one clear line, not a traceback
        print(f"gradflow {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
