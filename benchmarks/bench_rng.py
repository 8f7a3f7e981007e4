"""Benchmark: PyTorch's random stream (engine/rng.py, the Mersenne Twister) against the numpy draws gradflow
made before (PCG64's random, standard_normal, integers, permutation, random() < p).

1. Draws: a million uniforms and normals (float32 and float64, on (0, 1) and N(0, 1) and with a range, a
   mean and a scale, as nn.init draws), a million randint, randperm(100,000), and dropout's masks at the
   baby GPT's sizes (activations (12, 64, 128), attention (12, 4, 64, 64)), each in gradflow's plain tier
   (the twist in numpy ops), its fast tier (gradflow/fast/mt19937.py: numba's loops, and their numpy
   forms as where numba is not installed) and numpy's old draws.
2. Building GPTs (models/gpt.py): the test suite's small ones, the baby GPT and, with --gpt2, GPT-2's
   124M, from the same seed in each tier: nearly all of it is drawing the weights.
3. The baby GPT's training step (benchmarks/bench_distributed.py's model, in the fast tier, as the
   Trainer runs it) with dropout 0.2: its masks drawn from PyTorch's stream, and from numpy's (the
   Generator's bernoulli replaced by random() < p for those rounds), in ABBA order; beside the step,
   the time spent drawing its masks, which a busy machine blurs less than the whole step.
4. makemore's sampling draw: multinomial(probs of 27, 1) one at a time.

Variants alternate within each round; each figure is the median over rounds, and the ratios are
medians of per-round ratios. Run from the checkout:

    python benchmarks/bench_rng.py [--rounds 7] [--gpt2] [--skip-step]
"""

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_distributed import BATCH, BLOCK, MODEL, baby_gpt, batches, training_step  # noqa: E402

import gradflow as gf  # noqa: E402
from gradflow.engine import rng as gf_rng  # noqa: E402
from gradflow.fast import compiled  # noqa: E402
from gradflow.models.gpt import GPT, GPTConfig  # noqa: E402
from gradflow.training.trainer import TrainConfig, default_optimizer  # noqa: E402

MASKS = {"activations": (BATCH, BLOCK, 128), "attention": (BATCH, 4, BLOCK, BLOCK)}
TIERS = {"plain": ("plain", False), "fast": ("fast", False), "fast, numpy only": ("fast", True)}
GPTS = {  # the test suite's (tests/helpers.py, test_idioms_nn.py), the baby GPT, GPT-2's
    "GPT, 1,080 weights": dict(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=8),
    "GPT, 83,136 weights": dict(vocab_size=500, block_size=16, n_layer=1, n_head=2, n_embd=64),
    "baby GPT, 804,096 weights": dict(vocab_size=65, **{**MODEL, "block_size": BLOCK}),
}
GPT2 = {"GPT-2, 124M weights": {}}


def seconds(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def draws():
    """{name: (numpy's old draw, gradflow's)}: the same draw by numpy's old generator and by gradflow."""
    old = np.random.default_rng(0)
    g = gf.Generator().manual_seed(0)
    m = 10**6
    table = {
        "rand 1M float32": (lambda: old.random(m).astype(np.float32), lambda: gf.rand(m, generator=g)),
        "rand 1M float64": (lambda: old.random(m), lambda: gf.rand(m, generator=g, dtype=gf.float64)),
        "uniform_(-0.2, 0.3) float32": (
            lambda: old.uniform(-0.2, 0.3, m).astype(np.float32),
            lambda: gf.empty(m).uniform_(-0.2, 0.3, generator=g),
        ),
        "randn 1M float32": (lambda: old.standard_normal(m, np.float32), lambda: gf.randn(m, generator=g)),
        "randn 1M float64": (lambda: old.standard_normal(m), lambda: gf.randn(m, generator=g, dtype=gf.float64)),
        "normal_(0, 0.02) float32": (
            lambda: old.normal(0, 0.02, m).astype(np.float32),
            lambda: gf.empty(m).normal_(0, 0.02, generator=g),
        ),
        "normal_(0, 0.02) float64": (
            lambda: old.normal(0, 0.02, m),
            lambda: gf.empty(m, dtype=gf.float64).normal_(0, 0.02, generator=g),
        ),
        "randint 1M": (lambda: old.integers(0, 65, m), lambda: gf.randint(0, 65, (m,), generator=g)),
        "randperm 100k": (lambda: old.permutation(10**5), lambda: gf.randperm(10**5, generator=g)),
    }
    for name, shape in MASKS.items():
        table[f"dropout mask {name}"] = (
            lambda shape=shape: old.random(shape) >= 0.2,
            lambda shape=shape: g.bernoulli(0.8, np.float32, shape),
        )
    return table


def in_tier(tier, fn):
    """fn run in a tier of TIERS."""
    kernels, numpy_only = TIERS[tier]
    with gf.use_kernels(kernels), compiled.numpy_only() if numpy_only else contextlib.nullcontext():
        return fn()


def table(rows, rounds, baseline=None, repeat=3):
    """rows {name: {variant: callable}}: medians over rounds of each variant (alternating within a round),
    printed in ms with each variant's median per-round ratio to the baseline variant; a round's time is the
    best of `repeat` calls."""
    times = {name: {v: [] for v in variants} for name, variants in rows.items()}
    for _ in range(rounds):
        for name, variants in rows.items():
            for variant, fn in variants.items():
                times[name][variant].append(seconds(fn, repeat))
    variants = list(next(iter(rows.values())))
    width = max(len(name) for name in rows) + 2
    head = "".join(f"{v:>18}" for v in variants)
    ratios = [v for v in variants if v != baseline] if baseline else []
    print(f"{'':<{width}}{head}" + "".join(f"{v + '/' + baseline:>26}" for v in ratios))
    for name, row in times.items():
        ms = "".join(f"{statistics.median(row[v]) * 1e3:>15.2f} ms" for v in variants)
        x = "".join(f"{statistics.median(a / b for a, b in zip(row[v], row[baseline])):>25.2f}x" for v in ratios)
        print(f"{name:<{width}}{ms}{x}")


def gpt_builds(configs):
    """{name: {tier: callable}}: building each GPT from seed 0 in each tier."""

    def build(config):
        gf.manual_seed(0)
        GPT(GPTConfig(**config))

    return {
        name: {tier: lambda tier=tier, c=config: in_tier(tier, lambda: build(c)) for tier in TIERS}
        for name, config in configs.items()
    }


def numpy_bernoulli(self, probs, dtype, shape=None):
    """The old masks: numpy's random() < p (for the training step's comparison)."""
    return (np.random.default_rng().random(np.shape(probs) if shape is None else shape) < probs).astype(dtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5, help="training steps per round and variant")
    parser.add_argument("--gpt2", action="store_true", help="also build GPT-2's 124M (one round: minutes in plain)")
    parser.add_argument("--skip-step", action="store_true", help="leave out the training step and makemore's draw")
    args = parser.parse_args()
    print(f"{args.rounds} rounds, variants alternating; medians (ratios: medians of per-round ratios)")
    with gf.use_kernels("fast"):
        print(f"fast tier: {compiled.describe()}\n")
        gf.randn(16)  # numba's loops loaded (or compiled) before any round

    rows = {}
    for name, (old, new) in draws().items():
        rows[name] = {"numpy (before)": old} | {tier: lambda tier=tier, new=new: in_tier(tier, new) for tier in TIERS}
    table(rows, args.rounds, baseline="numpy (before)")
    print()
    table(gpt_builds(GPTS), args.rounds, baseline="fast")
    if args.gpt2:
        table(gpt_builds(GPT2), 1, baseline="fast", repeat=1)
    if args.skip_step:
        return

    _, _, vocab_size, train_ids = baby_gpt()
    gf.manual_seed(1337)
    model = GPT(GPTConfig(vocab_size=vocab_size, **{**MODEL, "dropout": 0.2}))
    step = training_step(model, default_optimizer(model, TrainConfig()))
    data = batches(train_ids, args.steps)
    pytorch_bernoulli = gf_rng.Generator.bernoulli
    variants = {"PyTorch's stream": pytorch_bernoulli, "numpy's masks": numpy_bernoulli}
    steps = {k: [] for k in variants}
    in_masks = {k: [] for k in variants}  # the time spent drawing masks, per step
    with gf.use_kernels("fast"):
        step(*data[0])  # warm up (numba's compilation, first allocations)
        for r in range(args.rounds):
            for variant in list(variants)[:: 1 if r % 2 == 0 else -1]:  # ABBA: neither always goes first
                spent = [0.0]

                def timed(self, *a, draw=variants[variant], spent=spent):
                    start = time.perf_counter()
                    out = draw(self, *a)
                    spent[0] += time.perf_counter() - start
                    return out

                gf_rng.Generator.bernoulli = timed
                start = time.perf_counter()
                for x, y in data:
                    step(x, y)
                steps[variant].append((time.perf_counter() - start) / len(data))
                in_masks[variant].append(spent[0] / len(data))
    gf_rng.Generator.bernoulli = pytorch_bernoulli
    ours, before = steps["PyTorch's stream"], steps["numpy's masks"]
    ratio = statistics.median(a / b for a, b in zip(ours, before))
    masks_ours, masks_before = (statistics.median(in_masks[k]) * 1e3 for k in variants)
    print(f"\nbaby GPT training step, dropout 0.2, fast tier: PyTorch's stream {statistics.median(ours) * 1e3:.1f} ms, "
          f"numpy's masks {statistics.median(before) * 1e3:.1f} ms: {ratio:.3f}x; of which drawing the masks "
          f"{masks_ours:.1f} ms against {masks_before:.1f} ms")  # fmt: skip

    probs = np.random.default_rng(0).random(27).astype(np.float32)
    probs /= probs.sum()
    old, g, p = np.random.default_rng(0), gf.Generator().manual_seed(0), gf.tensor(probs)
    sample = {"numpy choice (before)": lambda: old.choice(27, p=probs / probs.sum()),
              "gf.multinomial": lambda: gf.multinomial(p, 1, generator=g)}  # fmt: skip
    per_call = {k: [] for k in sample}
    for _ in range(args.rounds):
        for k, fn in sample.items():
            per_call[k].append(seconds(lambda fn=fn: [fn() for _ in range(200)]) / 200)
    print("makemore's sampling draw, multinomial(27 probabilities, 1): "
          + ", ".join(f"{k} {statistics.median(v) * 1e6:.0f} us" for k, v in per_call.items()))  # fmt: skip


if __name__ == "__main__":
    main()
