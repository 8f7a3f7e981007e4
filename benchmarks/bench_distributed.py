"""Benchmark: data-parallel training of the baby GPT, one process against N MPI ranks and PyTorch.

The model is `gradflow train`'s default: a GPT of 4 layers, 4 heads, width 128, context 64, no
biases, head tied to the token embedding, batch 12, the built-in corpus with a char tokenizer;
each step is the Trainer's (forward, backward, clipping at 1.0, AdamW). The engines:

    gradflow, 1 process     BLAS with its default threads, as `gradflow train` runs
    gradflow, MPI N         gradflow.training.distributed.Distributed, N ranks under mpiexec
    pytorch, 1 process      the same model and update (benchmarks/torch_gpt.py), torch's default threads

Each times the same batches in rounds that alternate between the engines, after a short sleep
that lets the previous engine's threads go idle; the figures are medians over rounds. Printed:
first what the figures depend on (machine.py: the processor, numpy's BLAS with its kernels and
threads, numba's loops or numpy's kernels, the matmul floor in GFLOP/s), then tokens/s, each
engine's ratio to one process, the scaling efficiency of N processes
(tokens/s / (N x tokens/s of one process)), and for MPI the time per step spent in Allreduce
(waiting for the slower rank included) beside a bare Allreduce of the step's buffer.

(The fork-based processes gradflow had before MPI were timed here too, at commit 0aa22f8: three
runs of 9 rounds gave MPI / fork tokens/s of 0.993, 1.009 and 1.000, so MPI replaced them.)

The MPI ranks are one mpiexec job for the whole run: between its rounds rank 0 waits on a pipe
from this process and the other ranks sleep, so no round runs beside another engine's work.

    python benchmarks/bench_distributed.py                     # 2 ranks, 5 rounds of 20 steps
    python benchmarks/bench_distributed.py --ranks 2 --rounds 9 --steps 30
"""

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time

import numpy as np
from machine import header, step_products  # beside this file

import gradflow as gf
from gradflow.engine.kernels import fast_unless_chosen
from gradflow.fast.memory import tune_malloc
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.text import CharTokenizer, default_corpus, get_batch, split
from gradflow.training.trainer import TrainConfig, default_optimizer

BATCH, BLOCK, SEED = 12, 64, 1337
MODEL = dict(block_size=BLOCK, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False, tie_weights=True)
ROUND, BARE, QUIT = 1, 2, 3  # what rank 0 tells the other ranks to do next


def baby_gpt():
    """The default `gradflow train` model, its optimizer, and the benchmark's batches."""
    tokenizer = CharTokenizer(default_corpus())
    train_ids, _ = split(tokenizer.encode(default_corpus()), block_size=BLOCK)
    gf.manual_seed(SEED)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, **MODEL))
    return model, default_optimizer(model, TrainConfig()), tokenizer.vocab_size, train_ids


def batches(train_ids, steps):
    rng = np.random.default_rng(0)
    return [get_batch(train_ids, BATCH, BLOCK, rng) for _ in range(steps)]


def training_step(model, optimizer, forward_backward=None):
    """The Trainer's step; forward_backward(x, y), when given, computes the gradient instead of one process."""

    def step(x, y):
        optimizer.zero_grad()
        if forward_backward:
            forward_backward(x, y)
        else:
            model(x, y)[1].backward()
        gf.optim.clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()

    return step


# --- the MPI job ---------------------------------------------------------------------------------


def mpi_child(steps):
    """Run under mpiexec: every rank builds the same model; rank 0 takes orders from stdin (round,
    bare, quit), the others wait for them asleep, and rank 0 answers each with a JSON line."""
    from mpi4py import MPI

    from gradflow.training.distributed import Distributed, world

    comm = world()
    model, optimizer, _, train_ids = baby_gpt()
    dp = Distributed(model, comm)
    step = training_step(model, optimizer, dp.forward_backward)
    work = batches(train_ids, steps)
    order = np.zeros(1, np.int64)
    while True:
        if comm.rank == 0:
            order[0] = {"round": ROUND, "bare": BARE, "quit": QUIT}[sys.stdin.readline().strip() or "quit"]
        request = comm.Ibcast(order, root=0)
        while not request.Test():  # asleep, not spinning: the core stays free for the other engines' rounds
            time.sleep(0.001)
        if order[0] == QUIT:
            break
        comm.Barrier()
        if order[0] == ROUND:
            reduced, start = dp.allreduce_seconds, time.perf_counter()
            for x, y in work:
                step(x, y)
            seconds, reducing = time.perf_counter() - start, dp.allreduce_seconds - reduced
            answer = {"seconds": seconds / steps, "allreduce": reducing / steps}
        else:  # the step's buffer alone, all ranks ready: what the transfer itself costs
            start = MPI.Wtime()
            for _ in range(steps):
                comm.Allreduce(MPI.IN_PLACE, dp.buffer, op=MPI.SUM)
            answer = {"seconds": (MPI.Wtime() - start) / steps, "bytes": dp.buffer.nbytes}
        if comm.rank == 0:
            print(json.dumps(answer), flush=True)
    dp.close()


class MPIEngine:
    """The MPI job seen from here: a step-less engine whose round() runs a round over there."""

    def __init__(self, ranks, steps):
        command = ["mpiexec", "-n", str(ranks), sys.executable, __file__, "--mpi-child", "--steps", str(steps)]
        self.job = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, order):
        self.job.stdin.write(order + "\n")
        self.job.stdin.flush()
        line = self.job.stdout.readline()
        if not line:
            raise RuntimeError(f"the MPI job ended (exit code {self.job.wait()})")
        return json.loads(line)

    def close(self):
        with contextlib.suppress(OSError):
            self.job.stdin.write("quit\n")
            self.job.stdin.close()
        self.job.wait(timeout=60)


# --- the engines of this process -----------------------------------------------------------------


def local_engines():
    """{name: step}: gradflow in one process, and PyTorch if installed."""
    model, optimizer, vocab_size, _ = baby_gpt()
    engines = {"gradflow, 1 process": training_step(model, optimizer)}
    with contextlib.suppress(ImportError):
        from torch_gpt import torch_training_step  # beside this file

        engines["pytorch, 1 process"] = torch_training_step(vocab_size, MODEL, SEED)
    return engines


def settle():
    """Let the previous engine's threads go idle (OpenBLAS's and torch's spin for a while after work)."""
    time.sleep(0.25)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2, help="MPI ranks")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="steps per round")
    parser.add_argument("--mpi-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    tune_malloc()  # as the Trainer does
    if args.mpi_child:
        return mpi_child(args.steps)
    _, _, vocab_size, train_ids = baby_gpt()
    print(
        f"baby GPT (gradflow train's default), batch {BATCH} x {BLOCK} tokens; {args.rounds} rounds of "
        f"{args.steps} steps",
        *header(step_products(BATCH, BLOCK, MODEL, vocab_size)),  # before any engine's threads start
        sep="\n",
        flush=True,
    )
    engines = local_engines()
    mpi_name = f"gradflow, MPI {args.ranks}"
    mpi = MPIEngine(args.ranks, args.steps)
    work = batches(train_ids, args.steps)
    for step in engines.values():  # warm up: first calls allocate and fill caches
        for x, y in work[:3]:
            step(x, y)
    mpi.ask("round")
    seconds = {name: [] for name in [*engines, mpi_name]}
    allreduce = []
    for _ in range(args.rounds):
        for name, step in engines.items():
            settle()
            start = time.perf_counter()
            for x, y in work:
                step(x, y)
            seconds[name].append((time.perf_counter() - start) / args.steps)
        settle()
        answer = mpi.ask("round")
        seconds[mpi_name].append(answer["seconds"])
        allreduce.append(answer["allreduce"])
    bare = mpi.ask("bare")
    mpi.close()
    report(seconds, args.ranks, statistics.median(allreduce), bare)


def report(seconds, ranks, allreduce, bare):
    """Tokens/s per engine with its rounds, the ratios, and what MPI's Allreduce cost."""
    tokens = BATCH * BLOCK
    median = {name: statistics.median(times) for name, times in seconds.items()}
    one = median["gradflow, 1 process"]
    for name, s in median.items():
        line = f"{name:<20} {1000 * s:6.1f} ms/step {tokens / s:7,.0f} tokens/s  x{one / s:.2f} one process"
        if "MPI" in name:
            line += f", scaling efficiency {one / s / ranks:.0%}"
        print(f"{line}  (rounds: {', '.join(f'{tokens / t:,.0f}' for t in seconds[name])})")
    if "pytorch, 1 process" in median:
        torch = median["pytorch, 1 process"]
        ratios = (f"{name} {torch / s:.3f}" for name, s in median.items() if name != "pytorch, 1 process")
        print(f"tokens/s relative to pytorch: {', '.join(ratios)}")
    mpi = median[f"gradflow, MPI {ranks}"]
    print(
        f"MPI: Allreduce {1000 * allreduce:.2f} ms per step ({allreduce / mpi:.1%} of the step, waiting for the "
        f"slower rank included); a bare Allreduce of the step's {bare['bytes'] / 1e6:.2f} MB: "
        f"{1000 * bare['seconds']:.2f} ms"
    )


if __name__ == "__main__":
    with fast_unless_chosen():  # the tier gradflow train runs
        status = main()
    sys.exit(status)
