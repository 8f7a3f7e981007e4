"""Benchmark: can a second pool of threads share a training step's cores with numpy's BLAS?

Why gradflow's compiled loops run on one core (gradflow/fast/compiled.py). After each matrix
product OpenBLAS's threads keep spinning for a while before they sleep (about 2^28 cycles unless
OPENBLAS_THREAD_TIMEOUT, read when numpy loads, says otherwise), so that the next product finds
them awake. A loop that shares its work with another pool of threads right after a product then
waits for the core a spinning thread holds. Each figure comes from a fresh process:

1. a loop over the baby GPT's GELU activations (393,216 values), on 2 threads with numba's
   `workqueue` and OpenMP layers and on one, alone and right after a product;
2. the baby GPT's training step (benchmarks/bench_distributed.py's) with OpenBLAS's default spin
   and with the spin cut short, so that its threads sleep before a loop starts (and must be woken
   for the next product), alternating.

    python benchmarks/threads.py
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

LAYERS = ("workqueue", "omp")
SPINS = {"default spin": None, "spin cut to 2^16 cycles": "16", "spin cut to 2^20 cycles": "20"}


def loop_child(layer):
    """Median ms of the loop on 2 threads and on 1, alone and after a product: one JSON line."""
    os.environ["NUMBA_THREADING_LAYER"] = layer
    import numba
    import numpy as np

    def scaled(x, y):  # the work of one elementwise pass: y = x (x^2 c + 1)
        for i in numba.prange(x.size):
            y[i] = x[i] * (x[i] * x[i] * np.float32(0.0356) + np.float32(1))

    threads = {2: numba.njit(parallel=True)(scaled), 1: numba.njit(scaled)}
    x = np.random.default_rng(0).standard_normal(12 * 64 * 512, dtype=np.float32)
    y = np.empty_like(x)
    a, b = np.ones((768, 512), np.float32), np.ones((512, 128), np.float32)  # the MLP's down projection
    result = {}
    for n, loop in threads.items():
        loop(x, y)
        for after_product in (False, True):
            times = []
            for _ in range(200):
                if after_product:
                    a @ b
                start = time.perf_counter()
                loop(x, y)
                times.append(time.perf_counter() - start)
            result[f"{n} {'after a product' if after_product else 'alone'}"] = statistics.median(times) * 1e3
    print(json.dumps(result))


def step_child(steps):
    """Median ms per training step of the baby GPT: one JSON line."""
    from bench_distributed import baby_gpt, batches, training_step

    from gradflow.engine.kernels import fast_unless_chosen
    from gradflow.fast.memory import tune_malloc

    tune_malloc()  # as the Trainer does
    with fast_unless_chosen():
        model, optimizer, _, train_ids = baby_gpt()
        step, work = training_step(model, optimizer), batches(train_ids, steps)
        for x, y in work[:5]:
            step(x, y)
        times = []
        for x, y in work:
            start = time.perf_counter()
            step(x, y)
            times.append(time.perf_counter() - start)
    print(json.dumps({"step": statistics.median(times) * 1e3}))


def child(arguments, **environment):
    """Run this file with `arguments` in a fresh process: its JSON line."""
    env = {**os.environ, **{k: v for k, v in environment.items() if v is not None}}
    out = subprocess.run([sys.executable, __file__, *arguments], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of the step")
    parser.add_argument("--steps", type=int, default=200, help="training steps per round")
    parser.add_argument("--loop-child", choices=LAYERS, help=argparse.SUPPRESS)
    parser.add_argument("--step-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loop_child:
        return loop_child(args.loop_child)
    if args.step_child:
        return step_child(args.steps)

    print("1. a loop over 393,216 values, ms (median of 200 calls, each layer in a fresh process)", flush=True)
    for layer in LAYERS:
        result = child(["--loop-child", layer])
        print(f"  {layer:9}  " + "   ".join(f"{name} {ms:.3f}" for name, ms in result.items()), flush=True)
    print(f"2. the baby GPT's step, ms ({args.rounds} alternating rounds of {args.steps} steps, medians)", flush=True)
    steps = {name: [] for name in SPINS}
    arguments = ["--step-child", "--steps", str(args.steps)]
    for r in range(args.rounds):
        for name, spin in SPINS.items():
            steps[name].append(child(arguments, OPENBLAS_THREAD_TIMEOUT=spin)["step"])
        done = ", ".join(f"{name} {times[-1]:.1f}" for name, times in steps.items())
        print(f"  round {r + 1}/{args.rounds}: {done}", flush=True)
    default = statistics.median(steps["default spin"])
    for name, times in steps.items():
        print(f"  {name:25} {statistics.median(times):5.1f} ms   / default {statistics.median(times) / default:.3f}")


if __name__ == "__main__":
    main()
