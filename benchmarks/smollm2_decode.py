"""Benchmark: SmolLM2-135M-Instruct decoding on gradflow beside transformers, from the same weights.

Both engines take the same 40-token prompt, in float32 on the CPU, on the same number of threads:

    gradflow      the model `gradflow chat` loads (models/llama.py), under gf.no_grad()
    transformers  LlamaForCausalLM of the same weights (written by Llama.to_hf), eager PyTorch (no
                  torch.compile; its default attention), under torch.no_grad(), use_cache=True

and are timed alike:

    prefill    the prompt through the model into a fresh KV cache (median of --repeats)
    cached     --new-tokens greedy tokens: the first from the prefill, each next one a forward step
               of one token against the KV cache, fed by this loop (not transformers' generate())
    uncached   --uncached-tokens greedy steps that each re-run the whole sequence so far (slow)

Printed per figure, each a speed in tokens/s: gradflow's, transformers' and gradflow / transformers
(above 1, gradflow is faster; prefill is the prompt's tokens over its median time, decoding one
over the median step).
Then how many of the greedy tokens agree (float32 rounding differs between the engines, so they
may part late), gradflow's load time (reading the GGUF, dequantizing), and each engine's peak
memory (its process's maximum resident set, the 540 MB of weights included).

Each engine runs in a process of its own, the two alternating in each of --rounds rounds; every
figure is a median over rounds. Processes, so that each engine's peak memory is its own and
neither library's threads are still spinning while the other computes. The parent itself stays
small (a first process writes the prompt's ids and the weights), as a process started by another
counts the starter's peak as its own. Both engines run on numpy's BLAS threads (--threads, or
OpenBLAS's default), torch by torch.set_num_threads.

    python benchmarks/smollm2_decode.py                             # default threads, 3 rounds
    python benchmarks/smollm2_decode.py --threads 1                 # one thread for each engine
    python benchmarks/smollm2_decode.py --new-tokens 20 --rounds 1  # a quick look

The comparison needs torch==2.13.0 and transformers==5.23.0; without them gradflow runs alone.
"""

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = (
    "The history of Paris begins with a small Celtic settlement on an island in the Seine. Over two "
    "thousand years it grew into the capital of France and one of the great cities of the world, a centre"
)
PROMPT_TOKENS = 40


def peak_mb():
    """This process's peak resident set in MB (with a starter's peak in it, if that was higher)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def transformers_installed():
    return all(importlib.util.find_spec(name) for name in ("torch", "transformers"))


def prepare(folder):
    """The prompt's ids and numpy's BLAS threads in prompt.json; SmolLM2 as a Hugging Face folder for transformers."""
    from gradflow.engine.threads import blas_threads
    from gradflow.models.hf import write_hf
    from gradflow.models.llama import smollm2_instruct

    model, tok = smollm2_instruct()
    ids = [int(i) for i in tok.encode(PROMPT)[:PROMPT_TOKENS]]
    assert len(ids) == PROMPT_TOKENS, len(ids)
    (folder / "prompt.json").write_text(json.dumps({"ids": ids, "threads": blas_threads()}))
    if transformers_installed():
        write_hf(folder, *model.to_hf())


def measure(forward, new_cache, ids, args):
    """Prefill, cached and uncached decoding of one engine; forward(ids, cache) returns the greedy next
    token after ids, cache None meaning none."""
    prefill = []
    for _ in range(args.repeats):
        cache = new_cache()
        started = time.perf_counter()
        forward(ids, cache)
        prefill.append(time.perf_counter() - started)

    cache = new_cache()
    tokens, cached = [forward(ids, cache)], []
    while len(tokens) < args.new_tokens:
        started = time.perf_counter()
        tokens.append(forward([tokens[-1]], cache))
        cached.append(time.perf_counter() - started)

    seq, uncached = list(ids), []
    for _ in range(args.uncached_tokens):
        started = time.perf_counter()
        seq.append(forward(seq, None))
        uncached.append(time.perf_counter() - started)
    return {
        "prefill_s": statistics.median(prefill),
        "cached_s": statistics.median(cached),
        "uncached_s": statistics.median(uncached),
        "tokens": tokens,
    }


def run_gradflow(ids, args):
    """measure() on gradflow, and the load time of its model (reading the GGUF, dequantizing)."""
    import numpy as np

    import gradflow as gf
    from gradflow.engine.kernels import fast_unless_chosen
    from gradflow.engine.threads import blas_threads
    from gradflow.models.llama import smollm2_instruct

    with fast_unless_chosen():  # the tier gradflow's commands run
        started = time.perf_counter()
        model, _ = smollm2_instruct()
        load = time.perf_counter() - started

        def forward(ids, cache):
            logits, _ = model(np.array([ids]), cache=cache)
            return int(logits.data[0, -1].argmax())

        with gf.no_grad():
            result = measure(forward, model.new_cache, ids, args)
    return {**result, "load_s": load, "threads": blas_threads()}


def run_transformers(folder, ids, threads, args):
    """measure() on transformers' LlamaForCausalLM of the weights in folder, on `threads` threads."""
    from bench_finetune import keep_benchmarks_off_path  # beside this file

    keep_benchmarks_off_path()
    import torch
    import transformers

    torch.set_num_threads(threads)
    transformers.logging.disable_progress_bar()  # its bar would come between this script's lines
    model = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32)

    def forward(ids, cache):
        logits = model(torch.tensor([ids]), past_key_values=cache, use_cache=cache is not None).logits
        return int(logits[0, -1].argmax())

    def new_cache():
        return transformers.DynamicCache(config=model.config)

    with torch.no_grad():
        result = measure(forward, new_cache, ids, args)
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    attention = model.config._attn_implementation
    return {**result, "threads": torch.get_num_threads(), "engine": f"{versions}, {attention} attention"}


def child(engine, folder, args):
    """One engine's round (or the preparation), in a process of its own: prints a JSON line."""
    if engine == "prepare":
        return prepare(folder)
    prompt = json.loads((folder / "prompt.json").read_text())
    if engine == "gradflow":
        result = run_gradflow(prompt["ids"], args)
    else:
        result = run_transformers(folder, prompt["ids"], prompt["threads"], args)
    print(json.dumps({**result, "peak_mb": peak_mb()}))


def run_child(engine, folder):
    """The JSON line a child prints (None from the preparation, which writes files)."""
    command = [sys.executable, __file__, *sys.argv[1:], "--child", engine, str(folder)]
    out = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1]) if out.strip() else None


def agreement(a, b):
    """How many of the first tokens of a and b are the same."""
    same = 0
    while same < min(len(a), len(b)) and a[same] == b[same]:
        same += 1
    return same


def report(results, args):
    """Medians over rounds: a table of the speed figures (with gradflow / transformers), then the rest."""
    engines = list(results)

    def median(engine, figure):
        return statistics.median(figure(r) for r in results[engine])

    p = PROMPT_TOKENS
    cached = f"context {p + 1} to {p + args.new_tokens - 1}"  # the step's token and those in the cache
    uncached = f"context {p} to {p + args.uncached_tokens - 1}"
    rows = [  # (what, its figure in one round's result, format)
        (f"prefill of {p} tokens, tokens/s", lambda r: p / r["prefill_s"], ".0f"),
        (f"decode with the KV cache, tokens/s ({cached})", lambda r: 1 / r["cached_s"], ".1f"),
        (f"decode without the cache, tokens/s ({uncached})", lambda r: 1 / r["uncached_s"], ".1f"),
    ]
    both = len(engines) == 2
    threads = ", ".join(f"{e} {results[e][0]['threads']}" for e in engines)
    print(f"\nSmolLM2-135M-Instruct, float32, threads: {threads}; medians over rounds ({args.rounds})")
    if both:
        print(results["transformers"][0]["engine"])
    print(f"load: {median('gradflow', lambda r: r['load_s']):.2f} s (gradflow: read the GGUF, dequantize 135M weights)")
    print("| | " + " | ".join(engines + ["gradflow / transformers"] * both) + " |")
    print("| --- " * (1 + len(engines) + both) + "|")
    for name, figure, form in rows:
        values = [median(e, figure) for e in engines]
        cells = [format(v, form) for v in values]
        if both:
            cells.append(f"{values[0] / values[1]:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    faster = ", ".join(f"{e} {median(e, lambda r: r['uncached_s'] / r['cached_s']):.1f}x" for e in engines)
    print(f"the cache makes decoding faster: {faster}")
    if both:
        same = agreement(results["gradflow"][0]["tokens"], results["transformers"][0]["tokens"])
        print(f"greedy tokens: the first {same} of {args.new_tokens} agree")
    peaks = ", ".join(f"{e} {median(e, lambda r: r['peak_mb']):.0f} MB" for e in engines)
    print(f"peak memory (each process's own, weights included): {peaks}")
    if not both:
        print("beside transformers: needs torch==2.13.0 and transformers==5.23.0 (pip install them)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, help="BLAS and torch threads (default: OpenBLAS's own)")
    parser.add_argument("--new-tokens", type=int, default=100, help="greedy tokens decoded with the KV cache")
    parser.add_argument("--uncached-tokens", type=int, default=10, help="steps without the cache")
    parser.add_argument("--repeats", type=int, default=5, help="prefills per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.new_tokens < 2:
        parser.error("--new-tokens: at least 2 (the first comes from the prefill)")
    if args.threads:  # in the environment the children start with, before numpy loads its BLAS
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    if args.child:
        engine, folder = args.child
        return child(engine, Path(folder), args)

    engines = ["gradflow", "transformers"] if transformers_installed() else ["gradflow"]
    results = {engine: [] for engine in engines}
    with tempfile.TemporaryDirectory(prefix="smollm2_decode_") as folder:
        run_child("prepare", folder)
        for round_ in range(args.rounds):
            for engine in engines if round_ % 2 == 0 else engines[::-1]:
                time.sleep(2)  # the previous process's threads go idle
                r = run_child(engine, folder)
                results[engine].append(r)
                print(
                    f"round {round_ + 1}, {engine}: prefill {1000 * r['prefill_s']:.0f} ms, "
                    f"{1 / r['cached_s']:.1f} tokens/s with the KV cache, {1 / r['uncached_s']:.1f} without, "
                    f"peak {r['peak_mb']:.0f} MB",
                    flush=True,
                )
    report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
