"""Benchmark: each fast kernel (gradflow/fast) against the plain op it replaces (gradflow/engine/ops),
alone and in a whole training step of the baby GPT (4 layers, 4 heads, width 128, batch 12).

    python benchmarks/kernels.py                  # context 64, as benchmarks/train_char_gpt.py
    python benchmarks/kernels.py --context 256    # longer context: attention's causal blocks count
    python benchmarks/kernels.py --rounds 5       # quicker, noisier
    python benchmarks/kernels.py --alone CrossEntropy,AdamW --skip-step   # these kernels alone, no step
    python benchmarks/kernels.py --skip-alone --each adam_steps,CrossEntropy --parts   # and their parts of a step

Alone: forward and backward of one call on the baby GPT's shapes (SiLU and RMSNorm, which it does not run,
on SmolLM2-135M's in its LoRA step; and AdamW's step over the baby GPT's weights),
fast, fast with numpy kernels only (no numba: gradflow/fast/compiled.py), and plain (AdamW's step also
as the fast loop a weight at a time, the decay in a pass of its own). In a step: forward,
backward and the AdamW update, with every kernel fast, with each fast kernel in turn left plain, with
numpy kernels only, and with every op plain (the price of reading). Variants are timed in alternating rounds, and
each figure is the median over rounds: of the time, and of the ratio to the fast tier's time in
the same round, so that a machine whose load drifts slows both sides of a ratio alike. Each
round starts with the next variant, since the first of a round was measured to run about 3%
slower; the fast tier is timed twice, to show how far apart two equal variants come out.
"""

import argparse
import contextlib
import time

import numpy as np

import gradflow as gf
from gradflow import fast
from gradflow.engine import ops
from gradflow.engine.autograd import topological_order
from gradflow.fast import attention as fast_attention
from gradflow.fast import compiled
from gradflow.fast.memory import tune_malloc
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.nn import functional as F
from gradflow.optim import adam as plain_adam
from gradflow.training.trainer import TrainConfig, default_optimizer

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--context", type=int, default=64)
parser.add_argument("--rounds", type=int, default=15, help="alternating rounds per comparison")
parser.add_argument("--steps", type=int, default=5, help="training steps per round")
parser.add_argument("--calls", type=int, default=20, help="calls of a kernel per round")
parser.add_argument("--skip-alone", action="store_true", help="only the training step")
parser.add_argument("--alone", help="time only these alone, e.g. CrossEntropy,AdamW (AdamW: the optimizer's step)")
parser.add_argument("--skip-step", action="store_true", help="only the kernels alone")
parser.add_argument("--each", help="in a step, leave only these kernels plain in turn, e.g. adam_steps,CrossEntropy")
parser.add_argument("--parts", action="store_true", help="in a step, also the optimizer's and cross-entropy's ms")
parser.add_argument("--plain-together", help="also a step with these kernels plain at once, e.g. LayerNorm,Embedding")
args = parser.parse_args()

BATCH, VOCAB, WIDTH, HEADS = 12, 65, 128, 4
T = args.context
LLAMA_ROWS, LLAMA_WIDTH, LLAMA_HIDDEN = (8, 78), 576, 1536  # SmolLM2-135M's LoRA step (bench_finetune.py's batch)


@contextlib.contextmanager
def plain(*replaced):
    """The fast tier with the given plain ops left plain (every op plain when none is given)."""
    if not replaced:
        with gf.use_kernels("plain"):
            yield
        return
    taken = {op: fast.REPLACES.pop(op) for op in replaced}  # the table gradflow.engine.kernels reads
    try:
        with gf.use_kernels("fast"):
            yield
    finally:
        fast.REPLACES.update(taken)


@contextlib.contextmanager
def one_block():
    """The fast tier with causal attention in one block of queries (no keys skipped)."""
    block = fast_attention.QUERY_BLOCK
    fast_attention.QUERY_BLOCK = 1 << 30
    try:
        with gf.use_kernels("fast"):
            yield
    finally:
        fast_attention.QUERY_BLOCK = block


@contextlib.contextmanager
def numpy_only():
    """The fast tier with its numpy kernels only, as without numba."""
    with gf.use_kernels("fast"), compiled.numpy_only():
        yield


def alternate(variants, run, rounds):
    """{name: (median ms, median ratio to the first variant's ms in the same round)}. Where run() returns
    milliseconds of its own (an array: the parts of a step), those are taken, each part's median apart."""
    times = {name: [] for name in variants}
    for setting in variants.values():  # warm up: first calls allocate and fill caches
        with setting():
            run()
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # each round starts elsewhere
            with variants[name]():
                time.sleep(0.05)  # BLAS's threads spin for a while after a product: let them stop
                start = time.perf_counter()
                parts = run()
                times[name].append(1000 * (time.perf_counter() - start) if parts is None else parts)
    first = np.array(next(iter(times.values())))
    return {name: (np.median(t, axis=0), np.median(np.array(t) / first, axis=0)) for name, t in times.items()}


def kernel_calls():
    """One forward and backward of each replaced op on the baby GPT's shapes; of SiLU and RMSNorm, which the
    baby GPT does not run, on SmolLM2-135M's in its LoRA step (the norm's weight frozen, as LoRA leaves it)."""
    rng = np.random.default_rng(0)

    def leaf(*shape, scale=1.0):
        return gf.tensor((rng.standard_normal(shape) * scale).astype(np.float32), requires_grad=True)

    x, h, ln_w = leaf(BATCH, T, WIDTH), leaf(BATCH, T, 4 * WIDTH), leaf(WIDTH)
    table, ids = leaf(VOCAB, WIDTH), rng.integers(0, VOCAB, (BATCH, T))
    qkv = [leaf(BATCH, T, HEADS, WIDTH // HEADS) for _ in range(3)]  # viewed as (B, heads, T, hs), as in the model
    logits, targets = leaf(BATCH * T, VOCAB, scale=3.0), rng.integers(0, VOCAB, BATCH * T)
    mlp, stream = leaf(*LLAMA_ROWS, LLAMA_HIDDEN, scale=3.0), leaf(*LLAMA_ROWS, LLAMA_WIDTH)
    frozen = gf.tensor(1 + 0.1 * rng.standard_normal(LLAMA_WIDTH).astype(np.float32))
    return {
        ops.CrossEntropy: lambda: F.cross_entropy(logits, targets),
        ops.Gelu: lambda: F.gelu(h, approximate="tanh"),
        ops.GeluErf: lambda: F.gelu(h),
        ops.LayerNorm: lambda: F.layer_norm(x, ln_w.shape, ln_w),
        ops.RMSNorm: lambda: F.rms_norm(stream, frozen.shape, frozen, eps=1e-5),
        ops.Silu: lambda: F.silu(mlp),
        ops.Embedding: lambda: F.embedding(ids, table),
        ops.ScaledDotProductAttention: lambda: F.scaled_dot_product_attention(
            *(a.transpose(1, 2) for a in qkv), causal=True
        ),
    }


def alone():
    print(f"each kernel alone, forward and backward, ms per call ({args.rounds} rounds of {args.calls} calls):")
    variants = {"fast": lambda: gf.use_kernels("fast"), "numpy only": numpy_only, "plain": plain}
    chosen = args.alone.split(",") if args.alone else None
    for op, call in kernel_calls().items():
        if chosen and op.__name__ not in chosen:
            continue
        u = np.ones(call().shape, np.float32)  # the upstream gradient

        def run(call=call, u=u):
            for _ in range(args.calls):
                call().backward(u)

        show(op.__name__, alternate(variants, run, args.rounds))
    if chosen and "AdamW" not in chosen:
        return
    model, optimizer = baby_gpt()
    for q in model.parameters():
        q.grad = np.full(q.shape, 1e-3, q.dtype)

    def step():
        for _ in range(args.calls):
            optimizer.step()

    one_at_a_time = {"fast, a weight at a time": lambda: plain(plain_adam.adam_steps)}  # decay in its own pass
    show("AdamW's step", alternate(variants | one_at_a_time, step, args.rounds))


def baby_gpt():
    """The baby GPT and its AdamW, as benchmarks/train_char_gpt.py trains it."""
    gf.manual_seed(0)
    config = GPTConfig(vocab_size=VOCAB, block_size=T, n_layer=4, n_head=HEADS, n_embd=WIDTH, dropout=0.0, bias=False)
    model = GPT(config)
    return model, default_optimizer(model, TrainConfig(lr=1e-3, weight_decay=0.1))


def show(name, result):
    """One line: each variant's ms per call, then each one's ratio to the fast tier's."""
    times = "  ".join(f"{variant} {ms / args.calls:7.3f}" for variant, (ms, _) in result.items())
    ratios = "  ".join(f"{variant} / fast {ratio:5.2f}" for variant, (_, ratio) in list(result.items())[1:])
    print(f"  {name:<26} {times}  {ratios}")


def ops_in_the_step(model, batch):
    """The plain ops whose nodes a training step's graph holds (as the plain tier builds it)."""
    with gf.use_kernels("plain"):
        return {type(node) for node in topological_order(model(*batch)[1].grad_fn)}


def in_a_step():
    model, optimizer = baby_gpt()
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, VOCAB, (2, BATCH, T)) for _ in range(args.steps)]

    def run():
        for x, y in batches:
            optimizer.zero_grad()
            model(x, y)[1].backward()
            optimizer.step()

    def run_in_parts():
        """ms of the steps, of the optimizer's steps in them, and of cross-entropy's forward and backward."""
        whole = optimizer_step = 0.0
        with gf.profile() as profile:
            for x, y in batches:
                start = time.perf_counter()
                optimizer.zero_grad()
                model(x, y)[1].backward()
                middle = time.perf_counter()
                optimizer.step()
                end = time.perf_counter()
                whole, optimizer_step = whole + end - start, optimizer_step + end - middle
        loss = sum(f + b for op, _, f, b in profile.rows() if op == ops.CrossEntropy.name)
        return 1000 * np.array([whole, optimizer_step, loss])

    variants = {"every kernel fast": lambda: gf.use_kernels("fast")}
    variants["every kernel fast, again"] = lambda: gf.use_kernels("fast")  # how far equals come apart
    variants["fast, numpy kernels only"] = numpy_only
    # a kernel the step never runs (SiLU, RMSNorm, the random draws at dropout 0) changes nothing there
    in_the_step = ops_in_the_step(model, batches[0]) | {plain_adam.adam_steps, plain_adam.adam_step}
    for op in [op for op in fast.REPLACES if not args.each or op.__name__ in args.each.split(",")]:
        if op in in_the_step:
            variants[f"fast, but {op.__name__} plain"] = lambda op=op: plain(op)
    if args.plain_together:
        together = [op for op in fast.REPLACES if op.__name__ in args.plain_together.split(",")]
        variants[f"fast, but {' and '.join(op.__name__ for op in together)} plain"] = lambda: plain(*together)
    if T > fast_attention.QUERY_BLOCK:
        variants["fast, attention in one block"] = one_block
    if not args.each:
        variants["every op plain"] = plain
    print(f"a training step, context {T}, ms ({args.rounds} rounds of {args.steps} steps):")
    parts = f"  {'optimizer':>9} / fast  {'cross-entropy':>13} / fast" if args.parts else ""
    print(f"  {'':<42} {'step':>7} / fast{parts}")
    for name, (ms, ratio) in alternate(variants, run_in_parts if args.parts else run, args.rounds).items():
        cells = zip(np.atleast_1d(ms / args.steps), np.atleast_1d(ratio), (7, 9, 13))
        print(f"  {name:<42} " + "  ".join(f"{m:{width}.2f} {r:5.3f}" for m, r, width in cells))


if __name__ == "__main__":
    with gf.use_kernels("fast"):
        print(f"malloc tuned: {tune_malloc()} (as the Trainer does); kernels: {compiled.describe()}")
    if not args.skip_alone:
        alone()
    if not args.skip_step:
        in_a_step()
