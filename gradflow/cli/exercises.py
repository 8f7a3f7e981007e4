"""`gradflow exercises`: write pieces of gradflow yourself, graded by gradflow's own checks.

    gradflow exercises list [--dir DIR]          the exercises in order, by track, with your status
    gradflow exercises start DIR                 a workspace: one file per exercise, each a blank to fill
    gradflow exercises check [NAME] [--dir DIR]  grade one exercise (or all): a pass says what comes next;
        [--format json] [--junit FILE]           one record per exercise, for a course's grading
    gradflow exercises hint NAME [--dir DIR]     the next hint: the idea, then the shape of the answer, then
                                                 the formula (remembered in the workspace)
    gradflow exercises solution NAME [--yes]     gradflow's own code for one exercise, after a confirmation
    gradflow exercises train [--dir DIR]         the capstone: the toy GPT trained on your ops and layers,
                                                 beside the same run on gradflow's own: both losses, a
                                                 sample from each, both loss curves (DIR/capstone.png)

--dir defaults to the current folder, so that inside a workspace `gradflow exercises check mul_backward`
is enough.
"""

import argparse
import contextlib
import sys
import tempfile
import textwrap
from pathlib import Path

from gradflow.cli.build import build_model
from gradflow.engine.files import check_kind, opened, written_atomically
from gradflow.engine.kernels import use_kernels
from gradflow.engine.rng import manual_seed
from gradflow.exercises import EXERCISES, TRACKS, Failed, find, isolation, report, workspace
from gradflow.inference.generate import generate
from gradflow.text import CharTokenizer, default_corpus, split
from gradflow.training.metrics import read_metrics
from gradflow.training.trainer import TrainConfig, Trainer


def run_list(args):
    args.dir = workspace.located(args.dir)
    has_workspace = any((Path(args.dir) / workspace.file_name(e)).exists() for e in EXERCISES)
    where = (
        f"; status in {args.dir}" if has_workspace else f" (no workspace in {args.dir}: gradflow exercises start DIR)"
    )
    print(f"{len(EXERCISES)} exercises, in order{where}")
    for track in TRACKS:
        print(f"\n{track}")
        for e in (e for e in EXERCISES if e.track == track):
            status = workspace.status(e, args.dir) if has_workspace else ""
            print(f"  {EXERCISES.index(e) + 1:2d} {e.name:<24} {status:<8} {e.title}")
    return 0


def run_start(args):
    if args.restore:
        path = workspace.restore(find(args.restore), args.dir)
        print(f"wrote {path} as `start` wrote it (the file was missing)")
        return 0
    paths = workspace.start(args.dir)
    print(f"wrote {len(paths)} exercises to {args.dir}/, from {paths[0].name} to {paths[-1].name}")
    print(f"each is a blank that raises NotImplementedError; fill in {paths[0].name} first, then:")
    print(f"  cd {args.dir} && gradflow exercises check {EXERCISES[0].name}")
    print(f"stuck? gradflow exercises hint {EXERCISES[0].name} gives the idea, then more each time you ask")
    return 0


def run_check(args):
    args.dir = workspace.located(args.dir)
    workspace.check_has_files(args.dir)
    chosen = [find(args.name)] if args.name else list(EXERCISES)
    verdicts = workspace.check_all(chosen, args.dir, args.seed, args.timeout)
    results = [(e, v.ok, v.said) for e, v in zip(chosen, verdicts)]
    records = [report.record(e, v, workspace.hints_taken(e, args.dir)) for e, v in zip(chosen, verdicts)]
    if args.junit:
        report.write_junit(args.junit, records)
    passed = sum(r["score"] for r in records)
    if args.format == "json":
        print(report.as_json(records, args.dir))
        return 0 if passed == len(chosen) else 1
    for (e, ok, said), verdict in zip(results, verdicts):
        number = f"{EXERCISES.index(e) + 1:2d} "
        if args.name and verdict.printed:
            print(f"{number}{e.name}: your code printed:\n{textwrap.indent(verdict.printed.rstrip(), '   | ')}")
        if ok:
            print(f"{number}{e.name}: pass ({said})")
            if args.name:
                print("\n".join(f"   {line}" for line in workspace.after_a_pass(e, args.dir)))
        elif said.kind in ("todo", "missing") and not args.name:
            print(f"{number}{e.name}: {said}")
        else:
            print(f"{number}{e.name}: not yet\n{textwrap.indent(str(said), '   ')}")
            print(f"   (inputs drawn from seed {verdict.seed}: --seed {verdict.seed} draws them again)")
            taken = workspace.hints_taken(e, args.dir)
            if args.name and said.kind != "todo" and taken < len(e.hints):
                print(f"   stuck? gradflow exercises hint {e.name} (hint {taken + 1} of {len(e.hints)})")
    if not args.name:
        left = [e for e in EXERCISES if workspace.status(e, args.dir) != "pass"]
        upnext = f"; next: {workspace.file_name(left[0])}" if left else "; all done"
        print(f"{passed} of {len(EXERCISES)} pass{upnext}")
    return 0 if passed == len(chosen) else 1


def run_hint(args):
    exercise = find(args.name)
    args.dir = workspace.located(args.dir)
    workspace.check_has_files(args.dir)
    try:
        level, hint = workspace.next_hint(exercise, args.dir)
    except Failed as failed:
        raise ValueError(f"hint {args.name}: {failed}") from None
    names = ("the idea", "the shape of the answer", "the formula")
    print(f"{exercise.name}, hint {level} of {len(exercise.hints)} ({names[level - 1]}):")
    print(textwrap.indent(textwrap.fill(hint, 96), "  "))
    if exercise.states and level == 1:
        print(f"  (the forward and what to find are in {workspace.file_name(exercise)}'s docstring)")
    if level < len(exercise.hints):
        print(f"more: gradflow exercises hint {args.name} (again)")
    else:
        print(f"that is the last hint; gradflow's own code, if you want it: gradflow exercises solution {args.name}")
    return 0


def run_solution(args):
    exercise = find(args.name)
    piece = exercise.piece
    if not args.yes:
        if not sys.stdin.isatty():
            raise ValueError(f"solution {args.name} gives the exercise away: confirm with --yes (no terminal to ask)")
        answer = input(f"Show gradflow's own {piece.qualname}? It gives exercise {args.name} away. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("not shown")
            return 0
    print(f"# gradflow's own {piece.qualname}, from {piece.path}\n")
    print("\n".join(piece.imports()) + "\n\n" if piece.imports() else "", end="")
    print(piece.source(), end="")
    return 0


def run_train(args):
    args.dir = workspace.located(args.dir)
    workspace.check_has_files(args.dir)
    needed = workspace.capstone_exercises()
    failing = [e for e in needed if not _passes_here(e, args.dir)]
    if failing:
        raise ValueError(
            f"train: {len(failing)} of the {len(needed)} exercises a training run is made of do not pass yet "
            f"(the first: {failing[0].name}); see them with `gradflow exercises check --dir {args.dir}`"
        )
    text = default_corpus()
    tokenizer = CharTokenizer(text)
    train_ids, val_ids = split(tokenizer.encode(text), block_size=args.block_size)
    print(
        f"training the toy GPT ({args.n_layer} layers, width {args.n_embd}, context {args.block_size}) for "
        f"{args.max_iters} steps on the built-in corpus, seed {args.seed}: first on gradflow's own pieces, then "
        f"on your {len(needed)}",
        flush=True,
    )
    runs = {}
    for who in ("gradflow's", "yours"):
        with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as out:
            if who == "yours":
                for e in needed:
                    stack.enter_context(e.piece.replaced_by(workspace.load(e, args.dir)))
            try:
                runs[who] = _train(args, tokenizer, train_ids, val_ids, out)
            except Failed as failed:
                print(f"gradflow exercises: train: your code failed while training:\n{failed}", file=sys.stderr)
                return 1
        print(f"{who:>10}: validation loss {runs[who]['val_loss']:.4f}", flush=True)
    gap = runs["yours"]["val_loss"] - runs["gradflow's"]["val_loss"]
    said = _gap_in_words(gap, runs["gradflow's"]["val_loss"])
    print(f"yours minus gradflow's: {gap:+.2e}: {said}")
    prompt = repr(args.prompt)
    print(f"\nwhat each model writes after {prompt} (the same seed, temperature {args.temperature}):")
    for who, run in runs.items():
        print(f"  {who:>10}: {run['sample']!r}")
    path = _draw_losses(Path(args.plot) if args.plot else Path(args.dir) / "capstone.png", runs)
    print(f"both loss curves: {path}")
    print(_what_you_built(needed))
    return 0


ROUNDING = 1e-6  # of the loss: float32 rounding in another order moved it 2e-8 in 2.72 (Adam's denominator in one line)


def _gap_in_words(gap, loss):
    """What a difference between the two runs' validation losses means: the same seed and batches, so
    only rounding or a piece that computes something else can move it."""
    if gap == 0:
        return "the same to the last digit: your pieces compute gradflow's numbers in gradflow's order"
    if abs(gap) <= ROUNDING * abs(loss):
        return "float32 rounding: your pieces compute the same numbers, rounded in another order"
    return (
        "more than float32 rounding explains (a few parts in 1e8 of the loss): one of your pieces computes "
        "something else on inputs its check did not draw; check them again, with a few --seed values"
    )


def _passes_here(exercise, directory):
    """Whether the learner's piece passes its check, run in this process: the capstone runs the learner's
    code here anyway, to train on it, so a process of its own would guard nothing (a grade is `check`)."""
    try:
        exercise.check(exercise.piece, workspace.load(exercise, directory))
        return True
    except Failed:
        return False


def _what_you_built(pieces):
    """The capstone's last words: the pieces of the run that were the learner's, track by track."""
    lines = [
        f"\nWhat trained this model was yours, {len(pieces)} pieces: the backward walk, the gradients of the ops\n"
        "it runs, the update, the clipping, the schedule and the batches."
    ]
    for track in dict.fromkeys(e.track for e in pieces):
        names = ", ".join(e.piece.qualname for e in pieces if e.track == track)
        lines.append(textwrap.fill(f"{track}: {names}", 100, initial_indent="  ", subsequent_indent="    "))
    lines.append("gradflow's own code ran the forward passes, the training loop and any backward not listed here.")
    return "\n".join(lines)


def _train(args, tokenizer, train_ids, val_ids, out):
    """Train the toy GPT with whatever pieces are in place, plain tier: its validation loss, the loss of each
    batch, and a sample it writes after the prompt."""
    manual_seed(args.seed)
    model, _ = build_model("gpt", tokenizer.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd)
    config = TrainConfig(
        max_iters=args.max_iters,
        batch_size=args.batch_size,
        block_size=args.block_size,
        warmup_iters=min(20, args.max_iters),
        eval_interval=args.max_iters,
        eval_iters=args.eval_iters,
        seed=args.seed,
        out_dir=out,
    )
    with use_kernels("plain"):  # the plain ops are the ones you wrote: the fast tier would run its own
        history = Trainer(model, train_ids, val_ids, config, progress=sys.stderr.isatty()).fit()
        ids = generate(
            model, tokenizer.encode(args.prompt), args.sample_tokens, temperature=args.temperature, seed=args.seed,
            context=args.block_size,
        )  # fmt: skip
    losses = [(r["step"], r["loss"]) for r in read_metrics(Path(out) / "metrics.jsonl") if "loss" in r]
    return {"val_loss": history[-1]["val_loss"], "losses": losses, "sample": tokenizer.decode(ids)}


def _draw_losses(path, runs):
    """Both runs' batch losses in one picture, written to path (a PNG)."""
    from matplotlib.figure import Figure  # only here: the picture is the capstone's alone

    figure = Figure(figsize=(7, 4))
    ax = figure.add_subplot()
    for (who, run), style in zip(runs.items(), ("-", "--")):  # dashed over solid: equal runs show as one
        ax.plot(*zip(*run["losses"]), style, lw=1.2, label="your pieces" if who == "yours" else f"{who} pieces")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.set_title("the toy GPT, trained on gradflow's pieces and on yours")
    ax.legend()
    check_kind(path, (b"\x89PNG",), "a PNG picture")  # `--plot ws/02_mul_backward.py` keeps the file
    with written_atomically(path) as tmp, opened(tmp, "wb") as f:  # never through a link (files.py)
        figure.savefig(f, dpi=100, format="png")
    return path


def _seed(text):
    value = int(text)
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"a seed is from 0 to 2^31 - 1, got {text}")
    return value


def _seconds(text):
    value = float(text)
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"seconds from more than 0 to 3600, got {text}")
    return value


def add_command(sub):
    exercises = sub.add_parser(
        "exercises",
        help="write pieces of gradflow yourself, graded by gradflow's own checks",
        description="Exercises made from gradflow's own code: fill in a blank, and gradflow grades it.",
    )
    actions = exercises.add_subparsers(dest="action", metavar="action")
    listed = actions.add_parser("list", help="the exercises in order, with your status")
    listed.add_argument("--dir", default=".", help="your workspace (default: this folder)")
    listed.set_defaults(run=run_list)
    started = actions.add_parser("start", help="write a workspace: one file per exercise")
    started.add_argument("dir", help="a new folder (an existing workspace is never overwritten)")
    started.add_argument("--restore", metavar="NAME", help="write back one exercise's file, if it is missing")
    started.set_defaults(run=run_start)
    checked = actions.add_parser("check", help="grade one exercise, or all of them")
    checked.add_argument("name", nargs="?", help="the exercise (default: all, in order)")
    checked.add_argument("--dir", default=".", help="your workspace (default: this folder)")
    checked.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="json: one record per exercise (status, score, message)",
    )
    checked.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML (for a course's CI)")
    checked.add_argument("--seed", type=_seed, help="draw the inputs from this seed (default: a fresh one each run)")
    checked.add_argument(
        "--timeout",
        type=_seconds,
        default=isolation.TIMEOUT,
        help=f"seconds per exercise (default {isolation.TIMEOUT:g})",
    )
    checked.set_defaults(run=run_check)
    hint = actions.add_parser("hint", help="the next hint for one exercise: the idea, the shape, the formula")
    hint.add_argument("name")
    hint.add_argument(
        "--dir", default=".", help="your workspace, which remembers the hints given (default: this folder)"
    )
    hint.set_defaults(run=run_hint)
    solution = actions.add_parser("solution", help="print gradflow's own code for one exercise")
    solution.add_argument("name")
    solution.add_argument("--yes", action="store_true", help="print it without asking")
    solution.set_defaults(run=run_solution)
    train = actions.add_parser("train", help="the capstone: the toy GPT trained on your pieces, beside gradflow's")
    train.add_argument("--dir", default=".", help="your workspace (default: this folder)")
    train.add_argument("--max-iters", type=int, default=150, help="steps of each run (default 150)")
    train.add_argument("--n-layer", type=int, default=2, help="(default 2)")
    train.add_argument("--n-head", type=int, default=4, help="(default 4)")
    train.add_argument("--n-embd", type=int, default=64, help="(default 64)")
    train.add_argument("--block-size", type=int, default=32, help="(default 32)")
    train.add_argument("--batch-size", type=int, default=8, help="(default 8)")
    train.add_argument("--eval-iters", type=int, default=10, help="batches per validation loss (default 10)")
    train.add_argument("--seed", type=int, default=1337, help="(default 1337)")
    train.add_argument("--prompt", default="The ", help="what both models continue (default 'The ')")
    train.add_argument("--sample-tokens", type=int, default=80, help="characters each model writes (default 80)")
    train.add_argument("--temperature", type=float, default=0.8, help="of the samples (default 0.8)")
    train.add_argument("--plot", metavar="FILE", help="the loss curves' picture (default: DIR/capstone.png)")
    train.set_defaults(run=run_train)
    exercises.set_defaults(run=lambda args: exercises.print_help() or 0)
