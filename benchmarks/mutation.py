"""Mutation testing of the exercises' graders: every wrong variant of a reference that computes
something different must fail its check. Prints the kill rate per exercise and writes the survivors.

    python3 benchmarks/mutation.py --jobs 2                 # every exercise (CI: --min-rate 0.95)
    python3 benchmarks/mutation.py --exercise mul_backward --jobs 1 --survivors

For each exercise, mutation_ast.py makes the one-step variants of its reference's source; each runs
in a process of its own, under a time limit, where the oracle (mutation_oracle.py) says whether it
computes something different from the reference, and the exercise's check says whether it fails.
kill rate = killed / non-equivalent. Exit status 1 when an exercise's rate is below --min-rate.
Docs: docs/mutation.md.
"""

import argparse
import datetime
import inspect
import multiprocessing
import multiprocessing.connection
import resource
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from mutation_ast import variants
from mutation_oracle import differs
from threadpoolctl import threadpool_limits

from gradflow.exercises.catalog import BY_NAME, EXERCISES
from gradflow.exercises.checks import Learner
from gradflow.exercises.diagnose import Failed

RESULTS = Path(__file__).parent / "results" / "mutation.txt"
MEMORY = 3 << 30  # bytes a variant may take: one that grows a list forever fails instead of swapping
PATH = "mutant.py"  # the file a variant is said to come from, as a learner's would


@dataclass
class Outcome:
    exercise: str
    variant: object  # mutation_ast.Variant
    different: str = None  # the oracle's first difference, None: equivalent
    verdict: str = None  # "killed", "killed: ..." (a hang, the check crashing), "survived"

    @property
    def survived(self):
        return self.different is not None and self.verdict == "survived"


def compiled(piece, source):
    """The variant's function, its names resolved in the reference's module (in a copy of its globals)."""
    namespace = dict(piece.function.__globals__)
    exec(compile(source, PATH, "exec"), namespace)
    return namespace[piece.function.__name__]


def checked(exercise, fn, seed):
    """The check's verdict on fn: "killed" when it raises Failed, "survived" when it passes."""
    kwargs = {"seed": seed} if "seed" in inspect.signature(exercise.check).parameters else {}
    try:
        exercise.check(exercise.piece, Learner(fn, PATH, exercise.piece.qualname), **kwargs)
    except Failed:
        return "killed"
    except Exception as error:  # the grader would show a traceback: a failure, but one worth reading
        return f"killed: the check raised {type(error).__name__}"
    return "survived"


def _child(exercise, source, phases, seed, conn):
    """In the variant's own process: each phase's answer sent as soon as it is known."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    fn = compiled(exercise.piece, source)
    for phase in phases:
        conn.send(differs(exercise, fn, seed) if phase == "oracle" else checked(exercise, fn, seed))
    conn.close()


@dataclass
class Task:
    outcome: Outcome
    phases: tuple  # ("oracle", "check"), or ("check",) after the oracle hung
    seed: int
    limit: float  # seconds per phase


def run(tasks, jobs, progress):
    """Run every task in a forked process, `jobs` at a time; a phase past its time limit is a hang."""
    fork = multiprocessing.get_context("fork")
    queue, running = list(tasks), {}
    while queue or running:
        while queue and len(running) < jobs:
            task = queue.pop(0)
            ours, theirs = fork.Pipe(duplex=False)
            v = task.outcome.variant
            p = fork.Process(
                target=_child, args=(BY_NAME[task.outcome.exercise], v.source, task.phases, task.seed, theirs)
            )
            p.start()
            theirs.close()
            running[ours] = [task, p, list(task.phases), time.monotonic() + task.limit]
        for conn in multiprocessing.connection.wait(list(running), timeout=0.2):
            task, p, left, _ = running[conn]
            try:
                _record(task.outcome, left.pop(0), conn.recv())
                running[conn][3] = time.monotonic() + task.limit  # the next phase's own time
            except EOFError:  # the process died without an answer (out of memory in C code, a signal)
                _record(task.outcome, left.pop(0), "died")
                _finish(running, conn, queue, progress)
                continue
            if not left:
                _finish(running, conn, queue, progress)
        for conn, (task, p, left, deadline) in list(running.items()):
            if time.monotonic() > deadline:
                p.kill()
                _record(task.outcome, left.pop(0), "hang")
                _finish(running, conn, queue, progress)


def _record(outcome, phase, answer):
    if phase == "oracle":
        outcome.different = {"hang": "it hangs", "died": "its process died"}.get(answer, answer)
    else:
        outcome.verdict = {"hang": "killed: a hang (the grader's time limit)", "died": "killed: died"}.get(
            answer, answer
        )


def _finish(running, conn, queue, progress):
    task, p, left, _ = running.pop(conn)
    p.join(1)
    if p.is_alive():
        p.kill()
        p.join()
    if left:  # the oracle hung or died before the check ran: the check gets a process of its own
        queue.insert(0, Task(task.outcome, ("check",), task.seed, task.limit))
        return
    progress(task.outcome)


def time_limit(exercise, seed):
    """Seconds per phase: ten times what the reference takes, and at least 5 (a loaded machine)."""
    start = time.monotonic()
    if differs(exercise, exercise.piece.function, seed) is not None:
        raise SystemExit(f"mutation.py: the oracle finds {exercise.name}'s reference unlike itself")
    if checked(exercise, exercise.piece.function, seed) != "survived":
        raise SystemExit(f"mutation.py: {exercise.name}'s check fails its own reference")
    return max(5.0, 10 * (time.monotonic() - start))


def table(outcomes_by_exercise):
    """The kill-rate table, one row per exercise and the overall row, in Markdown."""
    rows = ["| exercise | variants | equivalent | non-equivalent | killed | survived | kill rate |", "|---" * 7 + "|"]
    totals = np.zeros(5, dtype=int)
    for name, outcomes in outcomes_by_exercise.items():
        counts = _counts(outcomes)
        totals += counts
        rows.append(_row(name, counts))
    rows.append(_row("**all**", totals))
    return "\n".join(rows)


def _counts(outcomes):
    different = [o for o in outcomes if o.different is not None]
    survived = sum(o.survived for o in different)
    return np.array(
        [len(outcomes), len(outcomes) - len(different), len(different), len(different) - survived, survived]
    )


def _row(name, counts):
    return f"| {name} | " + " | ".join(str(c) for c in counts) + f" | {_rate(counts)} |"


def _rate(counts):
    return "-" if counts[2] == 0 else f"{counts[3] / counts[2]:.1%}"


def report(outcomes_by_exercise, args, seconds):
    """The whole result: how it was run, the table, every survivor with the difference the oracle saw,
    the checks that crashed, and the variants judged equivalent (to audit the oracle)."""
    git = ["git", "-C", str(Path(__file__).parent)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = subprocess.run([*git, "status", "--porcelain", "--", "../gradflow"], capture_output=True, text=True)
    commit += " with uncommitted changes under gradflow/" if changed.stdout.strip() else ""
    lines = [
        f"# mutation testing of the exercises' checks: {datetime.date.today()}, commit {commit or '?'}",
        f"# seed {args.seed}, at most {args.limit or 'all'} variants per exercise, {args.jobs} jobs, "
        f"{seconds / 60:.1f} min",
        "",
        table(outcomes_by_exercise),
        "",
        "## survivors (the variant; what the oracle saw differ)",
    ]
    sections = (
        ("## checks that crashed", lambda o: o.verdict.startswith("killed: the check")),
        ("## equivalent by the oracle, yet failed by the check (a right answer rejected, or the oracle blind)",
         lambda o: o.different is None and o.verdict != "survived"),
    )  # fmt: skip
    for name, outcomes in outcomes_by_exercise.items():
        survivors = [o for o in outcomes if o.survived]
        if survivors:
            lines.append(f"\n{name}:")
            lines += [f"  {o.variant}\n      differs {o.different}" for o in survivors]
    for title, keep in sections:
        lines += ["", title]
        lines += [
            f"  {o.exercise}: {o.variant} ({o.verdict})"
            for os_ in outcomes_by_exercise.values()
            for o in os_
            if o.verdict and keep(o)
        ]
    lines += ["", "## equivalent (not counted)"]
    lines += [
        f"  {o.exercise}: {o.variant}" for os_ in outcomes_by_exercise.values() for o in os_ if o.different is None
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exercise", action="append", help="only this exercise (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="variants run at once (default 1)")
    parser.add_argument(
        "--seed", type=int, default=0, help="draws the oracle's and the checks' inputs, and --limit's sample"
    )
    parser.add_argument(
        "--limit", type=int, default=0, help="at most this many variants per exercise, a sample drawn by --seed"
    )
    parser.add_argument(
        "--min-rate", type=float, default=0.95, help="exit 1 if an exercise's kill rate is below (default 0.95)"
    )
    parser.add_argument("--survivors", action="store_true", help="print the survivors too")
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="the report (default benchmarks/results/mutation.txt)"
    )
    args = parser.parse_args(argv)
    threadpool_limits(1)  # the jobs are the parallelism; a BLAS thread pool per job would fight them
    warnings.simplefilter("ignore")  # the overflows and NaNs of random inputs and variants are answers, not news
    chosen = [BY_NAME[n] for n in args.exercise] if args.exercise else list(EXERCISES)
    started = time.monotonic()
    tasks, outcomes = [], {}
    for e_index, exercise in enumerate(chosen):
        found = variants(exercise.piece.source())
        if args.limit and len(found) > args.limit:
            picked = np.random.default_rng([args.seed, e_index]).choice(len(found), args.limit, replace=False)
            found = [found[i] for i in sorted(picked)]
        limit = time_limit(exercise, args.seed)
        outcomes[exercise.name] = [Outcome(exercise.name, v) for v in found]
        for v_index, outcome in enumerate(outcomes[exercise.name]):
            seed = int(np.random.SeedSequence([args.seed, e_index, v_index]).generate_state(1)[0])
            tasks.append(Task(outcome, ("oracle", "check"), seed, limit))
    print(f"{len(tasks)} variants of {len(chosen)} exercises, {args.jobs} at a time", file=sys.stderr, flush=True)
    run(tasks, args.jobs, _progress(outcomes, len(tasks), started))
    seconds = time.monotonic() - started
    text = report(outcomes, args, seconds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text if args.survivors else text.split("\n## survivors")[0])
    print(f"survivors and equivalents: {args.out}; {seconds / 60:.1f} min")
    low = [n for n, os_ in outcomes.items() if _counts(os_)[2] and _counts(os_)[3] / _counts(os_)[2] < args.min_rate]
    if low:
        print(f"kill rate below {args.min_rate:.0%}: {', '.join(low)}", file=sys.stderr)
    return 1 if low else 0


def _progress(outcomes, total, started):
    """A line per exercise as its last variant is judged, and the count so far every 100 variants."""
    done = {name: 0 for name in outcomes}
    count = [0]

    def progress(outcome):
        count[0] += 1
        done[outcome.exercise] += 1
        minutes = (time.monotonic() - started) / 60
        if done[outcome.exercise] == len(outcomes[outcome.exercise]):
            counts = _counts(outcomes[outcome.exercise])
            said = f"{counts[2]} non-equivalent, {counts[3]} killed, {counts[4]} survived ({_rate(counts)})"
            print(f"[{count[0]}/{total}, {minutes:.1f} min] {outcome.exercise}: {said}", file=sys.stderr, flush=True)
        elif count[0] % 100 == 0:
            print(f"[{count[0]}/{total}, {minutes:.1f} min]", file=sys.stderr, flush=True)

    return progress


if __name__ == "__main__":
    sys.exit(main())
