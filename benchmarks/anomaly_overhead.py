"""Benchmark: what the engine's safety checks cost on a training step of the baby GPT.

The step: GPT(vocab 65, context 64, 4 layers, 4 heads, width 128, no biases), batch 12, forward,
backward and an AdamW step, on random token ids. Two measurements, each the median over rounds
of each round's median step time, the rounds alternating so that a slower minute hits both sides:

  1. the guards of saved arrays (version counters, read-only views of held arrays): this tree
     (or --current REV) against an earlier revision of gradflow (--baseline REV, e.g. the commit
     before the guards), each round a fresh process importing one or the other;
  2. detect_anomaly(): the same step with anomaly mode on against off, in one process.

Both wall time and CPU time are given: on a machine shared with other work, CPU time (BLAS on
one thread, so the process's CPU time is its step's) is the steadier of the two.

    python benchmarks/anomaly_overhead.py --baseline 7a4fb23^ --current 7a4fb23
    python benchmarks/anomaly_overhead.py              # only the anomaly-mode ratio
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, bias=False)
BATCH = 12


def training_step(gf, models_gpt, seed=0):
    """A function running one training step of the baby GPT, and its batches (made once)."""
    import numpy as np

    gf.manual_seed(seed)
    model = models_gpt.GPT(models_gpt.GPTConfig(**MODEL))
    optimizer = gf.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    rng = np.random.default_rng(seed)
    ids = rng.integers(MODEL["vocab_size"], size=(BATCH, MODEL["block_size"] + 1))
    x, y = ids[:, :-1], ids[:, 1:]

    def step():
        optimizer.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def time_steps(step, n):
    """The median of n steps' wall times and of their CPU times, in ms."""
    wall, cpu = [], []
    for _ in range(n):
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def child(root, steps):
    """Run in a fresh process: time `steps` steps with gradflow imported from `root`; print the times."""
    sys.path.insert(0, root)
    from threadpoolctl import threadpool_limits

    import gradflow as gf
    from gradflow.models import gpt

    assert Path(gf.__file__).resolve().is_relative_to(Path(root).resolve()), gf.__file__
    with threadpool_limits(1, "blas"):
        step = training_step(gf, gpt)
        time_steps(step, 3)  # warm up: first-call costs, memory reaching its working size
        print(json.dumps(time_steps(step, steps)))


def round_in_process(root, steps):
    out = subprocess.run(
        [sys.executable, __file__, "--child", root, "--steps", str(steps)],
        check=True, capture_output=True, text=True, cwd=root,
    )  # fmt: skip
    return json.loads(out.stdout)


def extract(revision, into):
    """gradflow and models/ as they were at a git revision, written into the directory `into`."""
    archive = subprocess.run(
        ["git", "archive", revision, "gradflow", "models"], cwd=ROOT, check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)
    return into


def guards_cost(baseline, current, rounds, steps):
    """Round medians (wall, CPU) of the baseline revision and of the current one, in alternating processes."""
    with tempfile.TemporaryDirectory() as old, tempfile.TemporaryDirectory() as new:
        roots = {"baseline": extract(baseline, old), "current": extract(current, new) if current else str(ROOT)}
        medians = {"baseline": [], "current": []}
        for _ in range(rounds):
            for side, root in roots.items():
                medians[side].append(round_in_process(root, steps))
    return medians


def anomaly_cost(rounds, steps):
    """Median ms per step with detect_anomaly off and on, alternating in this process."""
    sys.path.insert(0, str(ROOT))
    from threadpoolctl import threadpool_limits

    import gradflow as gf
    from gradflow.models import gpt

    medians = {"off": [], "on": []}
    with threadpool_limits(1, "blas"):
        step = training_step(gf, gpt)
        time_steps(step, 3)
        for _ in range(rounds):
            medians["off"].append(time_steps(step, steps))
            with gf.detect_anomaly():
                medians["on"].append(time_steps(step, steps))
    return medians


def report(title, medians, a, b):
    """One line per clock: the median of the rounds' medians of both sides, b relative to a, and the
    median of the rounds' own ratios (each round's two sides ran a minute apart: the steadier figure)."""
    for clock, k in (("wall", 0), ("CPU", 1)):
        ta, tb = (statistics.median(r[k] for r in medians[side]) for side in (a, b))
        paired = statistics.median(rb[k] / ra[k] for ra, rb in zip(medians[a], medians[b]))
        rounds = "; ".join(f"{side}: " + ", ".join(f"{r[k]:.1f}" for r in medians[side]) for side in (a, b))
        print(
            f"{title}, {clock} ms/step: {a} {ta:.1f}, {b} {tb:.1f} ({100 * (tb / ta - 1):+.1f}%; "
            f"median of the rounds' ratios {b}/{a} {paired:.3f})   rounds {rounds}"
        )


def main():
    os.environ.setdefault("GRADFLOW_KERNELS", "fast")  # the tier gradflow train runs, here and in the children
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="git revision to compare the guards against (e.g. the commit before)")
    parser.add_argument("--current", help="git revision to compare with the baseline (default: this tree)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.steps)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    print(f"baby GPT {MODEL}, batch {BATCH}, AdamW, BLAS on 1 thread; {args.rounds} rounds of {args.steps} steps")
    if args.baseline:
        report("guards", guards_cost(args.baseline, args.current, args.rounds, args.steps), "baseline", "current")
    report("detect_anomaly", anomaly_cost(args.rounds, args.steps), "off", "on")


if __name__ == "__main__":
    main()
