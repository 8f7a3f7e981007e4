"""Benchmark: the engine's own cost per op, on long chains of ops too small for the arithmetic to count.

Each op of gradflow builds a node, checks its arguments, guards what backward will read and, in
backward, walks the node back: bookkeeping that every small model and every notebook pays, whatever
the size of its arrays. Three chains measure it, forward (building the graph) and backward (walking it):

  mul N      y = x * 1.0000001, N times, from x of one element (float32), then y.sum().backward()
  mixed N    N steps on arrays of 16 elements, five ops each:
                 y = exp(y * w + b);  total = total + y.sum()
             (w = 0.1, b = -1: y stays near 0.4), then total.backward(): gradients for x, w and b

against the same math in plain numpy (the forward's operations, then the chain rule written out by
hand, operation by operation: the floor any engine on numpy stands on) and against PyTorch's eager
mode (when torch is installed), and, with --against REV, against gradflow as it was at a git revision.

Every engine runs each round in a fresh process (import, one short warm-up chain, then each chain
once, a full garbage collection before each); the engines alternate, their order rotating every
round, so that a busier minute on a shared machine falls on each of them in turn. Reported, in wall
time and in the process's CPU time (the steadier of the two when other work shares the cores): the
median time of each engine over the rounds, microseconds per op, and gradflow's ratio to each other
engine as the median of the rounds' own ratios (the two runs of a round were seconds apart), with
their range.

    python benchmarks/per_op.py                          # gradflow, numpy, PyTorch; 5 rounds
    python benchmarks/per_op.py --against 97efb7c        # and gradflow at that revision
    python benchmarks/per_op.py --chains mul:20000 --rounds 9
"""

import argparse
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from anomaly_overhead import extract  # gradflow as it was at a revision, in a directory of its own

ROOT = Path(__file__).resolve().parents[1]
CHAINS = ("mul:20000", "mul:50000", "mixed:4000")
OPS_PER_STEP = {"mul": 1, "mixed": 5}
FACTOR, WIDTH, W, B = 1.0000001, 16, 0.1, -1.0


# --- the chains, in each engine -------------------------------------------------------------------


def mul_chain(lib, n):
    """gradflow or torch: y = x * FACTOR n times; the clocks (lap) at the start, after forward, after backward."""
    start = lap()
    x = lib.tensor([1.0001], requires_grad=True)
    y = x
    for _ in range(n):
        y = y * FACTOR
    loss = y.sum()
    middle = lap()
    loss.backward()
    return start, middle, lap()


def mixed_chain(lib, n):
    """gradflow or torch: n steps of y = exp(y * w + b), total = total + y.sum(); backward from total."""
    start = lap()
    x = lib.tensor([0.5] * WIDTH, requires_grad=True)
    w = lib.tensor([W] * WIDTH, requires_grad=True)
    b = lib.tensor([B] * WIDTH, requires_grad=True)
    y, total = x, 0.0
    for _ in range(n):
        y = (y * w + b).exp()
        total = total + y.sum()
    middle = lap()
    total.backward()
    return start, middle, lap()


def mul_chain_numpy(np, n):
    """The same math in numpy: y_k = y_(k-1) c forward; dL/dy_(k-1) = dL/dy_k c backward."""
    start = lap()
    c = np.float32(FACTOR)
    y = np.array([1.0001], dtype=np.float32)
    for _ in range(n):
        y = y * c
    loss = y.sum()
    middle = lap()
    grad = np.ones_like(y) * np.ones_like(loss)
    for _ in range(n):
        grad = grad * c
    return start, middle, lap()


def mixed_chain_numpy(np, n):
    """The same math in numpy, forward keeping what backward reads (each y), and backward by hand:
    with h = y w + b and y' = exp(h): dL/dh = dL/dy' y', dL/dw += dL/dh y, dL/db += dL/dh,
    dL/dy = dL/dh w, where dL/dy' is 1 (from the total) plus what the next step sends back."""
    start = lap()
    x = np.full(WIDTH, 0.5, dtype=np.float32)
    w = np.full(WIDTH, W, dtype=np.float32)
    b = np.full(WIDTH, B, dtype=np.float32)
    ys, total = [x], 0.0
    for _ in range(n):
        ys.append(np.exp(ys[-1] * w + b))
        total = total + ys[-1].sum()
    middle = lap()
    grad_w, grad_b, grad_y = np.zeros_like(w), np.zeros_like(b), np.zeros_like(x)
    for k in range(n, 0, -1):
        grad_h = (grad_y + np.ones_like(x)) * ys[k]
        grad_w = grad_w + grad_h * ys[k - 1]
        grad_b = grad_b + grad_h
        grad_y = grad_h * w
    return start, middle, lap()


def lap():
    """Both clocks: wall time, and this process's CPU time (steadier on a machine shared with other work)."""
    return time.perf_counter(), time.process_time()


def engine_chains(engine):
    """The module an engine computes with and its two chain functions."""
    if engine == "numpy":
        import numpy

        return numpy, {"mul": mul_chain_numpy, "mixed": mixed_chain_numpy}
    if engine == "torch":
        import torch

        torch.set_num_threads(1)  # one-element arrays: threads could only add their own overhead
        return torch, {"mul": mul_chain, "mixed": mixed_chain}
    sys.path.insert(0, engine)  # a gradflow: this tree, or a revision extracted into a directory
    import gradflow

    if not Path(gradflow.__file__).resolve().is_relative_to(Path(engine).resolve()):
        raise SystemExit(f"per_op: imported {gradflow.__file__}, not the gradflow in {engine}")
    return gradflow, {"mul": mul_chain, "mixed": mixed_chain}


def child(engine, chains):
    """In a fresh process: one warm-up of each chain, then each chain once; print their times as JSON."""
    lib, run = engine_chains(engine)
    times = {}
    for spec in chains:
        kind, n = spec.split(":")
        run[kind](lib, 200)
        gc.collect()
        start, middle, end = run[kind](lib, int(n))
        times[spec] = [middle[0] - start[0], end[0] - middle[0], middle[1] - start[1], end[1] - middle[1]]
    print(json.dumps(times))


# --- alternating rounds, and the report --------------------------------------------------------------


def one_round(engine, chains):
    out = subprocess.run(
        [sys.executable, __file__, "--child", engine, "--chains", *chains],
        check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""},
    )  # fmt: skip
    return json.loads(out.stdout)


def measure(engines, chains, rounds):
    """{engine label: [one round's {chain: (forward s, backward s)}, ...]}, the order rotating each round."""
    results = {label: [] for label in engines}
    labels = list(engines)
    for r in range(rounds):
        order = labels[r % len(labels) :] + labels[: r % len(labels)]
        for label in order:
            results[label].append(one_round(engines[label], chains))
        print(f"round {r + 1} of {rounds} done", file=sys.stderr)
    return results


def report(results, chains):
    labels = list(results)
    rounds = len(results["gradflow"])
    for spec in chains:
        kind, n = spec.split(":")
        ops = int(n) * OPS_PER_STEP[kind]
        print(f"\n{kind} chain, {ops} ops ({spec}): medians over {rounds} rounds, seconds (us per op)")
        for phase, k in (("forward", 0), ("backward", 1)):
            for clock, c in (("wall", 0), ("CPU", 2)):
                cells = []
                for label in labels:
                    t = statistics.median(r[spec][k + c] for r in results[label])
                    cells.append(f"{label} {t:.3f} ({1e6 * t / ops:.2f})")
                ratios = []
                for label in labels[1:]:
                    paired = [g[spec][k + c] / o[spec][k + c] for g, o in zip(results["gradflow"], results[label])]
                    ratios.append(f"{label} {statistics.median(paired):.2f} ({min(paired):.2f} to {max(paired):.2f})")
                print(f"  {phase:8s} {clock:4s} " + "; ".join(cells))
                print(f"  {'':13s} gradflow / " + "; ".join(ratios))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", nargs="+", default=list(CHAINS), help="kind:N, kind mul or mixed")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", metavar="REV", help="also time gradflow at this git revision")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for spec in args.chains:
        kind, _, n = spec.partition(":")
        if kind not in OPS_PER_STEP or not n.isdigit() or int(n) < 1:
            print(f"per_op: --chains takes mul:N or mixed:N with N >= 1, got {spec!r}", file=sys.stderr)
            raise SystemExit(2)
    if args.rounds < 1:
        print(f"per_op: --rounds must be at least 1, got {args.rounds}", file=sys.stderr)
        raise SystemExit(2)
    if args.child:
        return child(args.child, args.chains)
    engines = {"gradflow": str(ROOT), "numpy": "numpy"}
    if not args.no_torch and importlib.util.find_spec("torch") is None:
        print("per_op: PyTorch is not installed; comparing with numpy only", file=sys.stderr)
    elif not args.no_torch:
        engines["torch"] = "torch"
    with tempfile.TemporaryDirectory() as old:
        if args.against:
            engines[f"gradflow@{args.against}"] = extract(args.against, old)
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average at start "
            + ", ".join(f"{x:.1f}" for x in os.getloadavg())
        )
        results = measure(engines, args.chains, args.rounds)
    report(results, args.chains)
    print("\nload average at the end " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
