"""The `gradflow` command: one parser, a subcommand per file of this folder, one line per error.

Every failure a user can cause ends in one line on stderr, `gradflow <command>: <what is wrong>`:
exit 2 for bad input (a flag, a file), exit 1 for a run that could not finish (it diverged, a
worker died, memory ran out), 130 for Ctrl-C. A traceback is left only for gradflow's own bugs.
"""

import argparse
import os
import sys

import numpy as np

from gradflow.cli import exercises, explore, export, finetune, generate, gradcheck, graph, train
from gradflow.engine.kernels import fast_unless_chosen
from gradflow.training.data_parallel import WorkerError
from gradflow.version import __version__


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
    parser.add_argument("--version", action="version", version=f"gradflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="command")
    for command in (train, finetune, generate, graph, explore, gradcheck, export, exercises):
        command.add_command(sub)
    args, extra = parser.parse_known_args(argv)
    if extra:  # named with the command they were given to
        prog = f"gradflow {args.command}" if args.command else "gradflow"
        print(f"{prog}: unrecognized arguments: {' '.join(extra)}", file=sys.stderr)
        return 2
    if args.command is None:
        parser.print_help()
        return 0
    try:
        # an overflow is reported by gradflow's own checks, in its words; the commands train and
        # generate with the fast kernels unless GRADFLOW_KERNELS chose (explore and exercises choose plain)
        with np.errstate(all="ignore"), fast_unless_chosen():
            return args.run(args)
    except BrokenPipeError:  # the reader went away (`gradflow generate ... | head`): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit goes nowhere
        return 0
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
