"""Benchmark: the char-level "baby GPT" on tiny shakespeare, gradflow (and PyTorch, when installed).

Configuration (the published reference reaches a validation loss of about 1.88 at 2000 iterations):
4 layers, 4 heads, width 128, context 64, batch 12, no biases in linear and norm layers, head tied
to the token embedding, AdamW lr 1e-3 betas (0.9, 0.99) weight decay 0.1, warmup 100 then cosine
to 1e-4 over 2000 iterations, dropout 0, gradient clipping at 1.0; 90/10 split of the corpus.

It prints first what the figures depend on (machine.py: the processor, numpy's BLAS with its kernels
and threads, numba's loops or numpy's kernels, and the matmul floor in GFLOP/s), then gradflow's
validation loss at 2000 iterations (mean over 200 fixed batches) and, for throughput, times both
engines on the same batches in alternating rounds, taking medians.

    python benchmarks/train_char_gpt.py                   # full run + throughput, default threads
    python benchmarks/train_char_gpt.py --threads 1       # one BLAS / torch thread
    python benchmarks/train_char_gpt.py --skip-train      # throughput only
    python benchmarks/train_char_gpt.py --skip-train --floor   # and each step split: its products, the rest

Data parallelism (the batch shared out among processes) is measured by bench_distributed.py.
"""

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", default=str(Path(__file__).resolve().parent / "data" / "tinyshakespeare.txt"))
parser.add_argument("--iters", type=int, default=2000)
parser.add_argument("--threads", type=int, help="BLAS and torch threads (default: the libraries' own)")
parser.add_argument("--rounds", type=int, default=5, help="alternating timing rounds per engine")
parser.add_argument("--steps-per-round", type=int, default=30)
parser.add_argument("--skip-train", action="store_true", help="only measure throughput")
parser.add_argument("--torch-train", action="store_true", help="also train the PyTorch model (same batches)")
parser.add_argument("--skip-throughput", action="store_true", help="only train")
parser.add_argument("--profile", action="store_true", help="print gradflow's time per op over 20 steps")
parser.add_argument("--decode", action="store_true", help="generate's tokens/s with and without the KV cache")
parser.add_argument("--memory", action="store_true", help="peak memory of 1000 training steps, each engine alone")
parser.add_argument("--sweep", action="store_true", help="tokens/s against width and context, both engines")
parser.add_argument(
    "--floor",
    action="store_true",
    help="also time the step's products alone in the rounds, numpy's and PyTorch's: each engine's step split into "
    "its products and the rest",
)
parser.add_argument("--memory-child", choices=["gradflow", "pytorch"], help=argparse.SUPPRESS)
parser.add_argument("--seed", type=int, default=1337)
args = parser.parse_args()
if args.threads:  # must be set before numpy loads its BLAS
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)

import numpy as np  # noqa: E402
from machine import header, matmul_floor, step_products  # noqa: E402  (beside this file)
from torch_gpt import torch_training_step  # noqa: E402  (beside this file)

import gradflow as gf  # noqa: E402
from gradflow.engine.kernels import fast_unless_chosen  # noqa: E402
from gradflow.fast.memory import tune_malloc  # noqa: E402
from gradflow.models.gpt import GPT, GPTConfig  # noqa: E402
from gradflow.text import CharTokenizer, get_batch, load_text, split  # noqa: E402
from gradflow.training.trainer import TrainConfig, Trainer, default_optimizer  # noqa: E402

FLOOR = "matmul floor"  # the step's matrix products alone (--floor)
TORCH_FLOOR = "pytorch's products"  # the same products through torch.matmul: PyTorch's own floor
tune_malloc()  # as the Trainer does: freed arrays are reused without page faults (gradflow/fast/memory.py)
BATCH, BLOCK = 12, 64
MODEL = dict(block_size=BLOCK, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=False, tie_weights=True)
TRAIN = TrainConfig(
    max_iters=args.iters, batch_size=BATCH, block_size=BLOCK, lr=1e-3, min_lr=1e-4, warmup_iters=100,
    weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0, eval_interval=500, eval_iters=200, seed=args.seed,
    out_dir="out/bench_char_gpt",
)  # fmt: skip


def gradflow_engine(vocab_size):
    """gradflow's training step: forward, backward, clipping, AdamW, as in a Trainer run."""
    gf.manual_seed(args.seed)
    model = GPT(GPTConfig(vocab_size=vocab_size, **MODEL))
    optimizer = default_optimizer(model, TRAIN)

    def step(x, y):
        optimizer.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        gf.optim.clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()

    return step


def torch_engine(vocab_size):
    """The same model and update in PyTorch (CPU, eager), for the throughput comparison."""
    return torch_training_step(vocab_size, MODEL, args.seed, args.threads)


def train_torch(vocab_size, train_ids, val_ids):
    """PyTorch on gradflow's exact batch sequence, schedule and evaluation batches: its val loss."""
    step = torch_engine(vocab_size)
    schedule = gf.optim.WarmupCosine(TRAIN.lr, TRAIN.warmup_iters, TRAIN.max_iters, TRAIN.min_lr)
    rng = np.random.default_rng(TRAIN.seed)  # the Trainer draws its batches from this generator
    for t in range(TRAIN.max_iters):
        step(*get_batch(train_ids, BATCH, BLOCK, rng), lr=schedule(t))
    evaluation = np.random.default_rng(TRAIN.seed + 1)  # the Trainer's fixed evaluation batches
    return float(np.mean([step.loss(*get_batch(val_ids, BATCH, BLOCK, evaluation)) for _ in range(TRAIN.eval_iters)]))


def decode_speed(vocab_size):
    """Tokens/s of greedy decoding with the KV cache and without it (re-reading the whole context):
    the two alternate, three times each, and the medians are printed."""
    from gradflow.inference.generate import generate

    gf.manual_seed(args.seed)
    model = GPT(GPTConfig(vocab_size=vocab_size, **{**MODEL, "block_size": 512}))
    model.eval()
    new = 32

    def cached(prompt):
        generate(model, prompt, new, temperature=0)

    @gf.no_grad()
    def uncached(prompt):
        ids = list(prompt)
        for _ in range(new):
            logits, _ = model(np.array([ids]))
            ids.append(int(np.argmax(logits.data[0, -1])))

    for context in (16, 64, 256):
        prompt = np.arange(context) % vocab_size
        rates = {cached: [], uncached: []}
        for _ in range(3):
            for decode in rates:
                start = time.perf_counter()
                decode(prompt)
                rates[decode].append(new / (time.perf_counter() - start))
        with_cache, without = (float(np.median(r)) for r in rates.values())
        print(f"decoding after {context:>3} tokens: {with_cache:7.1f} tokens/s with the cache, {without:7.1f} without")


def memory_child(engine, vocab_size, train_ids):
    """Train 1000 steps in this process alone; print peak resident memory after 100 and 1000 steps."""
    step = torch_engine(vocab_size) if engine == "pytorch" else gradflow_engine(vocab_size)
    rng = np.random.default_rng(0)
    for i in range(1, 1001):
        step(*get_batch(train_ids, BATCH, BLOCK, rng))
        if i in (100, 1000):
            print(f"{engine}: peak memory {peak_memory('self'):.0f} MB after {i} steps")


def peak_memory(pid):
    """A process's peak resident memory in MB (Linux's VmHWM). Not getrusage's ru_maxrss: a process
    started by another inherits the starter's peak in it (measured: a parent that had imported
    PyTorch made a gradflow run of 111 MB report 218)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024  # kB


def sweep():
    """Tokens/s of both engines as the width and the context grow; a table and out/sweep.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    global MODEL
    base, results = dict(MODEL), {}
    for axis, values in (("n_embd", (64, 128, 256, 512)), ("block_size", (32, 64, 128, 256, 512))):
        for value in values:
            MODEL = {**base, axis: value}
            block = MODEL["block_size"]
            ids = np.random.default_rng(0).integers(0, 65, 20 * block)
            rng = np.random.default_rng(0)
            batches = [get_batch(ids, BATCH, block, rng) for _ in range(2)]
            engines = all_engines(65)
            for name, seconds in alternate(engines, batches, rounds=3, warmup=1).items():
                results[axis, value, name] = BATCH * block / seconds
            row = "  ".join(f"{n} {results[axis, value, n]:8,.0f}" for n in engines)
            print(f"{axis} {value:>4}: tokens/s  {row}")
    MODEL = base
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, (axis, label) in zip(axes, (("n_embd", "width (context 64)"), ("block_size", "context (width 128)"))):
        for name in dict.fromkeys(n for _, _, n in results):
            points = sorted((v, r) for (a, v, n), r in results.items() if a == axis and n == name)
            if points:
                ax.plot(*zip(*points), "o-", label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("training tokens/s")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    Path("out").mkdir(exist_ok=True)
    fig.savefig("out/sweep.png", dpi=100)
    print("drew out/sweep.png")


def settle():
    """Wait until the other engine's threads are idle before timing one: after a matrix product
    OpenBLAS's threads spin for about 0.1 s, and a round timed during that spin runs on a core
    that is not free (PyTorch's first steps after a gradflow round were up to 3 times slower)."""
    time.sleep(0.25)


def all_engines(vocab_size):
    """gradflow, and PyTorch if installed."""
    engines = {"gradflow": gradflow_engine(vocab_size)}
    with contextlib.suppress(ImportError):
        engines["pytorch"] = torch_engine(vocab_size)
    return engines


def alternate(engines, batches, rounds, warmup):
    """Seconds per step of each engine: after `warmup` steps each, alternate rounds of the same
    batches, each round after settle(); median over rounds."""
    times = {name: [] for name in engines}
    for step in engines.values():  # warm up: first calls allocate and fill caches
        for x, y in batches[:warmup]:
            step(x, y)
    for _ in range(rounds):
        for name, step in engines.items():
            settle()
            start = time.perf_counter()
            for x, y in batches:
                step(x, y)
            times[name].append((time.perf_counter() - start) / len(batches))
    return {name: float(np.median(t)) for name, t in times.items()}


def report_floors(seconds, gflop):
    """The floor's share of each engine's step; with PyTorch, each engine's step less its own library's
    products timed alone (numpy's BLAS for gradflow, PyTorch's for PyTorch): about each engine's own work,
    and where the ratio between them comes from. About: inside a step a product can run a little faster
    or slower than alone (its operands warmer or colder in the caches). (Removes the floors from `seconds`.)"""
    floor, torch_floor = seconds.pop(FLOOR), seconds.pop(TORCH_FLOOR, None)
    shares = ", ".join(f"{name} {floor / s:.0%}" for name, s in seconds.items())
    print(f"{FLOOR}: {gflop:.2f} GFLOP per step at {gflop / floor:.0f} GFLOP/s; its share of each step: {shares}")
    if torch_floor is None or "pytorch" not in seconds:
        return
    print(f"{TORCH_FLOOR}: the same {gflop:.2f} GFLOP through torch.matmul at {gflop / torch_floor:.0f} GFLOP/s")
    rest = {name: s - (torch_floor if name == "pytorch" else floor) for name, s in seconds.items()}
    print("each step less its products alone, ms: " + ", ".join(f"{name} {1000 * r:.1f}" for name, r in rest.items()))


def main():
    text = load_text(args.data)
    tokenizer = CharTokenizer(text)
    train_ids, val_ids = split(tokenizer.encode(text), block_size=BLOCK)
    if args.memory_child:
        memory_child(args.memory_child, tokenizer.vocab_size, train_ids)
        return 0
    print(f"tiny shakespeare: {len(train_ids):,} training and {len(val_ids):,} validation characters, "
          f"vocabulary {tokenizer.vocab_size}; threads: {args.threads or 'default'}")  # fmt: skip
    print("\n".join(header(step_products(BATCH, BLOCK, MODEL, tokenizer.vocab_size))), flush=True)
    if not args.skip_train:
        gf.manual_seed(args.seed)
        model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, **MODEL))
        start = time.perf_counter()
        history = Trainer(model, train_ids, val_ids, TRAIN).fit()
        took = time.perf_counter() - start
        print(f"gradflow: val loss {history[-1]['val_loss']:.4f} at {TRAIN.max_iters} iterations (reference 1.88), "
              f"{took:.0f} s wall time including evaluation")  # fmt: skip
    if args.torch_train:
        start = time.perf_counter()
        val = train_torch(tokenizer.vocab_size, train_ids, val_ids)
        print(f"pytorch: val loss {val:.4f} at {TRAIN.max_iters} iterations, {time.perf_counter() - start:.0f} s")
    if args.profile:
        step, rng = gradflow_engine(tokenizer.vocab_size), np.random.default_rng(0)
        for _ in range(10):  # warm up: the first steps fill the allocator and the optimizer's state
            step(*get_batch(train_ids, BATCH, BLOCK, rng))
        with gf.profile() as prof:
            for _ in range(20):
                step(*get_batch(train_ids, BATCH, BLOCK, rng))
        print(prof.table(per=20))
        matmul = sum(f + b for op, _, f, b in prof.rows() if op in ("linear", "matmul", "attention"))
        share = matmul / prof.wall
        print(f"matmul (linear, matmul, attention): {share:.0%} of the step; everything else {1 - share:.0%}")
    if args.decode:
        decode_speed(tokenizer.vocab_size)
    if args.memory:
        import subprocess

        for engine in ("gradflow", "pytorch"):
            child = [sys.executable, __file__, "--data", args.data, "--memory-child", engine]
            subprocess.run(child + (["--threads", str(args.threads)] if args.threads else []), check=False)
    if args.sweep:
        sweep()
    if args.skip_throughput:
        return 0
    engines = all_engines(tokenizer.vocab_size)
    if "pytorch" not in engines:
        print("PyTorch is not installed: timing gradflow alone (pip install torch==2.13.0 to compare)")
    else:  # torch_engine has loaded it
        import torch

        print(
            f"PyTorch {torch.__version__}: {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads"
        )
    rng = np.random.default_rng(0)
    batches = [get_batch(train_ids, BATCH, BLOCK, rng) for _ in range(args.steps_per_round)]
    if args.floor:  # timed in the same rounds as the engines, so that a machine's load counts alike
        products = step_products(BATCH, BLOCK, MODEL, tokenizer.vocab_size)
        gflop, engines[FLOOR] = matmul_floor(products)
        if "pytorch" in engines:
            _, engines[TORCH_FLOOR] = matmul_floor(products, torch.matmul, torch.from_numpy)
    seconds = alternate(engines, batches, args.rounds, warmup=3)
    for name, s in seconds.items():
        print(f"{name}: {1000 * s:.1f} ms per step, {BATCH * BLOCK / s:,.0f} tokens/s")
    if args.floor:
        report_floors(seconds, gflop)
    if "pytorch" in seconds:
        for name in seconds:
            if name != "pytorch":
                print(f"throughput ratio {name} / pytorch: {seconds['pytorch'] / seconds[name]:.2f}")
    return 0


if __name__ == "__main__":
    with fast_unless_chosen():  # the tier gradflow train runs
        status = main()
    sys.exit(status)
