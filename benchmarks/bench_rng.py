"""Benchmark: PyTorch's random stream (engine/rng.py, the Mersenne Twister in numpy) against the numpy
draws gradflow made before (PCG64's random, standard_normal, integers, permutation, random() < p).

1. Draws: a million uniforms and normals (float32 and float64), a million randint, randperm(100,000),
   and dropout's masks at the baby GPT's sizes (activations (12, 64, 128), attention (12, 4, 64, 64)),
   each in gradflow's plain tier (the twist in numpy ops), its fast tier (numpy's compiled MT19937,
   gradflow/fast/mt19937.py) and numpy's old draws.
2. The baby GPT's training step (benchmarks/bench_distributed.py's model, in the fast tier, as the
   Trainer runs it) with dropout 0.2: its masks drawn from PyTorch's stream, and from numpy's (the
   Generator's bernoulli replaced by random() < p for those rounds), in ABBA order; beside the step,
   the time spent drawing its masks, which a busy machine blurs less than the whole step.
3. makemore's sampling draw: multinomial(probs of 27, 1) one at a time.

Variants alternate within each round; each figure is the median over rounds, and the ratios are
medians of per-round ratios. Run from the checkout:

    python benchmarks/bench_rng.py [--rounds 7]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_distributed import BATCH, BLOCK, MODEL, baby_gpt, batches, training_step  # noqa: E402

import gradflow as gf  # noqa: E402
from gradflow.engine import rng as gf_rng  # noqa: E402
from gradflow.models.gpt import GPT, GPTConfig  # noqa: E402
from gradflow.training.trainer import TrainConfig, default_optimizer  # noqa: E402

MASKS = {"activations": (BATCH, BLOCK, 128), "attention": (BATCH, 4, BLOCK, BLOCK)}


def seconds(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def draws():
    """{name: {variant: callable}}: the same draw by numpy's old generator and by gradflow's two tiers."""
    old = np.random.default_rng(0)
    g = gf.Generator().manual_seed(0)
    table = {
        "rand 1M float32": (lambda: old.random(10**6).astype(np.float32), lambda: gf.rand(10**6, generator=g)),
        "rand 1M float64": (lambda: old.random(10**6), lambda: gf.rand(10**6, generator=g, dtype=gf.float64)),
        "randn 1M float32": (
            lambda: old.standard_normal(10**6).astype(np.float32),
            lambda: gf.randn(10**6, generator=g),
        ),
        "randn 1M float64": (
            lambda: old.standard_normal(10**6),
            lambda: gf.randn(10**6, generator=g, dtype=gf.float64),
        ),
        "randint 1M": (lambda: old.integers(0, 65, 10**6), lambda: gf.randint(0, 65, (10**6,), generator=g)),
        "randperm 100k": (lambda: old.permutation(10**5), lambda: gf.randperm(10**5, generator=g)),
    }
    for name, shape in MASKS.items():
        table[f"dropout mask {name}"] = (
            lambda shape=shape: old.random(shape) >= 0.2,
            lambda shape=shape: g.bernoulli(0.8, np.float32, shape),
        )
    return table


def numpy_bernoulli(self, probs, dtype, shape=None):
    """The old masks: numpy's random() < p (for the training step's comparison)."""
    return (np.random.default_rng().random(np.shape(probs) if shape is None else shape) < probs).astype(dtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5, help="training steps per round and variant")
    args = parser.parse_args()
    print(f"{args.rounds} rounds, variants alternating; medians (ratios: medians of per-round ratios)\n")

    times = {}
    for _ in range(args.rounds):
        for name, (old, new) in draws().items():
            row = times.setdefault(name, {"numpy (before)": [], "plain": [], "fast": []})
            row["numpy (before)"].append(seconds(old))
            for tier in ("plain", "fast"):
                with gf.use_kernels(tier):
                    row[tier].append(seconds(new))
    print(f"{'draw':<28}{'numpy before':>14}{'plain':>10}{'fast':>10}{'plain/numpy':>13}{'fast/numpy':>12}")
    for name, row in times.items():
        ms = {k: statistics.median(v) * 1e3 for k, v in row.items()}
        ratio = {t: statistics.median(a / b for a, b in zip(row[t], row["numpy (before)"])) for t in ("plain", "fast")}
        print(f"{name:<28}{ms['numpy (before)']:>11.2f} ms{ms['plain']:>7.2f} ms{ms['fast']:>7.2f} ms"
              f"{ratio['plain']:>12.2f}x{ratio['fast']:>11.2f}x")  # fmt: skip

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
