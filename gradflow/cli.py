"""The `gradflow` command: `gradflow gradcheck` verifies every op's gradient and prints the table.

Every failure a user can cause ends in one line on stderr, `gradflow <command>: <what is wrong>`:
exit 2 for bad input (a flag, a file), exit 1 for a run that could not finish (it diverged, a
worker died, memory ran out), 130 for Ctrl-C. A traceback is left only for gradflow's own bugs.
"""

import argparse
import sys
import time

import numpy as np

from . import commands, graph
from .data_parallel import WorkerError


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


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (`gradflow train: argument --n-layer: ...`), not usage and error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message}\n")


def one_line(command, error):
    """`gradflow <command>: <message>`: the message's first line, without a repeated `<command>: `."""
    lines = str(error).strip().splitlines()
    message = lines[0] if lines else type(error).__name__
    if message.startswith(f"{command}: "):
        message = message[len(command) + 2 :]
    return f"gradflow {command}: {message}"


def main(argv=None):
    parser = Parser(prog="gradflow", description="gradflow: an autograd engine you can read, check and train with.")
    sub = parser.add_subparsers(dest="command", metavar="command")
    check = sub.add_parser("gradcheck", help="check every op's backward against finite differences")
    check.add_argument("--op", help="only this op (e.g. matmul, softmax, cross_entropy)")
    check.add_argument("--atol", type=float, default=1e-5)
    check.add_argument("--rtol", type=float, default=1e-4)
    check.set_defaults(run=_gradcheck)
    commands.add_commands(sub)
    graph.add_command(sub)
    args, extra = parser.parse_known_args(argv)
    if extra:  # named with the command they were given to
        prog = f"gradflow {args.command}" if args.command else "gradflow"
        print(f"{prog}: unrecognized arguments: {' '.join(extra)}", file=sys.stderr)
        return 2
    if args.command is None:
        parser.print_help()
        return 0
    try:
        with np.errstate(all="ignore"):  # an overflow is reported by gradflow's own checks, in its words
            return args.run(args)
    except (ValueError, OSError) as e:  # bad input: a flag, a file
        print(one_line(args.command, e), file=sys.stderr)
        return 2
    except (FloatingPointError, WorkerError, MemoryError) as e:  # the run could not go on
        print(one_line(args.command, e if str(e) else "out of memory"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C in training, or one while loading
        sys.stdout.flush()
        print(f"\ngradflow {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
