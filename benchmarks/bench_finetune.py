"""Benchmark: a LoRA fine-tuning step of SmolLM2-135M-Instruct, gradflow against PyTorch with peft.

Both engines adapt q_proj and v_proj of every layer (r = 8, alpha = 16, no dropout), freeze the
rest, and take AdamW steps on the same padded batches of the built-in `records` task (8
conversations, the loss on the replies alone), in float32 on the CPU:

    gradflow   gradflow.nn.lora on the model `gradflow finetune` loads (models/llama.py)
    pytorch    transformers' LlamaForCausalLM with the same weights (written by Llama.to_hf),
               adapted by peft's get_peft_model, torch.optim.AdamW

Each engine runs in a process of its own, so that its peak memory (the process's maximum
resident set, the model's 540 MB of float32 weights included) is its own; the processes of one
round alternate engines and thread settings, and the figures are medians over rounds. Printed per
setting: tokens/s (rows x padded length, as both engines compute them), gradflow / pytorch, and the peak memory of each.

    python benchmarks/bench_finetune.py                 # 3 rounds of 6 timed steps
    python benchmarks/bench_finetune.py --rounds 5 --steps 10
    python benchmarks/bench_finetune.py --each Silu,RMSNorm,LinearCrossEntropy   # gradflow alone: each
        # fast kernel left plain in turn, steps of one process in alternating rounds (what each saves)

Needs torch==2.13.0, transformers==5.23.0 and peft (pip install peft; 0.21.2 measured); the SmolLM2 file
is fetched once.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

R, ALPHA, TARGETS, BATCH, LR = 8, 16, ("q_proj", "v_proj"), 8, 2e-3


def make_batches(folder, steps):
    """The batches both engines train on, SmolLM2 written as a Hugging Face folder for PyTorch, and
    the adapters' initial A matrices, so that both engines start from the same weights."""
    from gradflow.models.hf import write_hf
    from gradflow.models.llama import smollm2_instruct
    from gradflow.nn import lora
    from gradflow.text.chat_data import chat_example, pad
    from gradflow.text.tasks import TASKS

    model, tokenizer = smollm2_instruct()
    write_hf(folder, *model.to_hf())
    lora.apply(model, TARGETS, r=R, alpha=ALPHA)  # B starts at zero in both engines; A is drawn here, once
    np.savez(folder / "lora_A.npz", **{n: p.data for n, p in model.named_parameters() if n.endswith(".A")})
    conversations = TASKS["records"].conversations("train", BATCH * (steps + 1))
    examples = [chat_example(c["messages"], tokenizer) for c in conversations]
    pad_id = tokenizer.token_id["<|endoftext|>"]
    batches = [pad(examples[i : i + BATCH], pad_id) for i in range(0, len(examples), BATCH)]
    np.savez(folder / "batches.npz", **{f"{k}{i}": a for i, b in enumerate(batches) for k, a in zip("xy", b)})


def load_batches(folder):
    with np.load(folder / "batches.npz") as f:
        return [(f[f"x{i}"], f[f"y{i}"]) for i in range(len(f.files) // 2)]


def initial_a(folder):
    """The adapters' A matrices by gradflow's names (layers.3.attn.q_proj.A: (r, in))."""
    with np.load(folder / "lora_A.npz") as f:
        return {name: f[name] for name in f.files}


def run_gradflow(folder):
    """One fine-tuning step, as a function of the batch (x, y) returning the loss."""
    from gradflow.models.llama import smollm2_instruct
    from gradflow.nn import lora
    from gradflow.optim import AdamW

    model, _ = smollm2_instruct()
    lora.apply(model, TARGETS, r=R, alpha=ALPHA)
    model.fused_loss = True  # as gradflow finetune asks: the head and the loss as one op, no logits
    params = dict(model.named_parameters())
    for name, a in initial_a(folder).items():
        params[name].data[...] = a
    model.train()
    optimizer = AdamW([p for p in model.parameters() if p.requires_grad], lr=LR, weight_decay=0.0)

    def step(x, y):
        optimizer.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def keep_benchmarks_off_path():
    """Take this folder off sys.path before transformers is imported: its kernels.py (gradflow's)
    would hide the `kernels` package transformers imports."""
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]


def run_pytorch(folder):
    """The same step in PyTorch: transformers' model of the same weights, peft's adapters."""
    keep_benchmarks_off_path()
    import peft
    import torch
    import transformers

    model = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32)
    config = peft.LoraConfig(r=R, lora_alpha=ALPHA, target_modules=list(TARGETS), lora_dropout=0.0, bias="none")
    model = peft.get_peft_model(model, config)
    layers = model.base_model.model.model.layers
    with torch.no_grad():
        for name, a in initial_a(folder).items():  # layers.{i}.attn.{q,v}_proj.A: lora_A's (r, in) weight
            _, i, _, projection, _ = name.split(".")
            getattr(layers[int(i)].self_attn, projection).lora_A["default"].weight.copy_(torch.from_numpy(a))
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR, weight_decay=0.0)

    def step(x, y):
        optimizer.zero_grad()
        logits = model(torch.from_numpy(x)).logits
        flat = logits.reshape(-1, logits.shape[-1])
        loss = torch.nn.functional.cross_entropy(flat, torch.from_numpy(y).reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def each_kernel_plain(folder, names, rounds):
    """gradflow's step with every fast kernel, and with each named one left plain in turn (its plain op
    of gradflow/engine/ops), in one process: the variants alternate step by step, each round starting
    with the next, and the medians over rounds are printed with their ratio to the fast tier's."""
    from gradflow import fast

    ops_named = {op.__name__: op for op in fast.REPLACES if isinstance(op, type) and op.__name__ in names}
    step, batches = run_gradflow(folder), load_batches(folder)
    variants = ["fast", *names, "fast again"]  # the fast tier twice: how far two equal variants come apart
    seconds = {v: [] for v in variants}
    step(*batches[0])  # the first step allocates what the others reuse
    for r in range(rounds):
        for v in variants[r % len(variants) :] + variants[: r % len(variants)]:
            taken = {ops_named[v]: fast.REPLACES.pop(ops_named[v])} if v in ops_named else {}
            try:
                time.sleep(0.5)  # BLAS's threads go idle
                started = time.perf_counter()
                step(*batches[1 + r % (len(batches) - 1)])
                seconds[v].append(time.perf_counter() - started)
            finally:
                fast.REPLACES.update(taken)
        print(f"round {r + 1} of {rounds}", file=sys.stderr, flush=True)
    fast_step = np.array(seconds["fast"])
    print(
        f"gradflow's LoRA step, {rounds} alternating rounds (median s, and the median of each round's ratio to fast):"
    )
    for v in variants:
        ratio = statistics.median(np.array(seconds[v]) / fast_step)
        label = v if v.startswith("fast") else f"{v} plain"
        print(f"  {label:<28} {statistics.median(seconds[v]):.3f} s   {ratio:.3f}")


def child(engine, folder, steps):
    """One engine's timing, run in a process of its own: prints a JSON line."""
    if os.environ.get("OMP_NUM_THREADS") == "1" and engine == "pytorch":
        import torch

        torch.set_num_threads(1)
    batches = load_batches(folder)
    step = {"gradflow": run_gradflow, "pytorch": run_pytorch}[engine](folder)
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    losses = [step(*batches[0])]  # the first step allocates what the others reuse
    started = time.perf_counter()
    for x, y in batches[1 : steps + 1]:
        losses.append(step(x, y))
    seconds = time.perf_counter() - started
    tokens = sum(x.size for x, _ in batches[1 : steps + 1])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"tokens_per_s": tokens / seconds, "loaded_mb": loaded, "peak_mb": peak, "losses": losses}))


def main():
    os.environ.setdefault("GRADFLOW_KERNELS", "fast")  # the tier gradflow train runs, here and in the children
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--prepare", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--each", help="gradflow alone: leave each of these fast kernels plain in turn")
    args = parser.parse_args()
    if args.child:
        engine, folder, steps = args.child
        return child(engine, Path(folder), int(steps))
    if args.prepare:
        folder, steps = args.prepare
        return make_batches(Path(folder), int(steps))
    if args.each:
        from gradflow import fast

        kernels = sorted(op.__name__ for op in fast.REPLACES if isinstance(op, type))
        unknown = [name for name in args.each.split(",") if name not in kernels]
        if unknown:
            print(f"bench_finetune: --each {unknown[0]!r} is no fast kernel's op (one of {', '.join(kernels)})",
                  file=sys.stderr)  # fmt: skip
            return 2
    folder = Path(tempfile.mkdtemp(prefix="bench_finetune_"))
    # in a process of its own: a child started from this one would count this one's peak memory
    # (the model loaded to write the folder) as its own (Linux keeps ru_maxrss across fork and exec)
    subprocess.run([sys.executable, __file__, "--prepare", str(folder), str(args.steps)], check=True)
    if args.each:
        return each_kernel_plain(folder, args.each.split(","), args.rounds)
    one_thread = dict.fromkeys(["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"], "1")
    settings = [("default threads", {}), ("1 thread", one_thread)]
    results = {}
    for round_ in range(args.rounds):
        for name, env in settings:
            engines = ("gradflow", "pytorch") if round_ % 2 == 0 else ("pytorch", "gradflow")
            for engine in engines:
                time.sleep(2)  # the previous process's threads go idle
                command = [sys.executable, __file__, "--child", engine, str(folder), str(args.steps)]
                done = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, check=True)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                results.setdefault((name, engine), []).append(result)
                rate, peak = result["tokens_per_s"], result["peak_mb"]
                print(f"round {round_ + 1}, {name}, {engine}: {rate:.0f} tok/s, peak {peak:.0f} MB", flush=True)
    said = f"batch {BATCH} conversations, r={R}, {'+'.join(TARGETS)}"
    print(f"\nmedians over {args.rounds} rounds of {args.steps} steps ({said})")
    print("| threads | gradflow tok/s | pytorch tok/s | gradflow / pytorch | gradflow peak MB | pytorch peak MB |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, _ in settings:
        g, t = results[(name, "gradflow")], results[(name, "pytorch")]
        rate = [statistics.median(r["tokens_per_s"] for r in rs) for rs in (g, t)]
        peak = [statistics.median(r["peak_mb"] for r in rs) for rs in (g, t)]
        print(f"| {name} | {rate[0]:.0f} | {rate[1]:.0f} | {rate[0] / rate[1]:.2f} | {peak[0]:.0f} | {peak[1]:.0f} |")
    ours, theirs = (np.array(results[(settings[0][0], engine)][0]["losses"]) for engine in ("gradflow", "pytorch"))
    print(f"losses of the first round's {len(ours)} steps, from the same weights and batches: gradflow "
          f"{np.round(ours, 4).tolist()}, pytorch {np.round(theirs, 4).tolist()}, "
          f"largest relative difference {np.max(np.abs(ours - theirs) / np.abs(theirs)):.1e}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
