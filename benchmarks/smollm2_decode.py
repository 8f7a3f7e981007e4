"""Benchmark: SmolLM2-135M-Instruct on gradflow: load time, prefill, decoding with and without the KV cache, memory.

    python benchmarks/smollm2_decode.py               # default threads
    python benchmarks/smollm2_decode.py --threads 1   # one BLAS thread

Prefill runs a 40-token prompt through the model once (median of --repeats). Decoding generates
--new-tokens tokens greedily after that prompt, each a forward step of one token against the KV
cache; without the cache, every step re-runs the whole sequence so far (a few steps only, it is
slow). Peak memory is the process's peak resident set, weights included.
"""

import argparse
import os
import resource
import sys
import time

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--threads", type=int, help="BLAS threads (default: the library's own)")
parser.add_argument("--new-tokens", type=int, default=100)
parser.add_argument("--uncached-tokens", type=int, default=10)
parser.add_argument("--repeats", type=int, default=5)
args = parser.parse_args()
if args.threads:  # must be set before numpy loads its BLAS
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)

import numpy as np  # noqa: E402

import gradflow as gf  # noqa: E402
from gradflow.engine.kernels import fast_unless_chosen  # noqa: E402
from gradflow.models.llama import smollm2_instruct  # noqa: E402
from gradflow.training.progress import Progress  # noqa: E402

PROMPT = (
    "The history of Paris begins with a small Celtic settlement on an island in the Seine. Over two "
    "thousand years it grew into the capital of France and one of the great cities of the world, a centre"
)


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    started = time.perf_counter()
    model, tok = smollm2_instruct()
    load = time.perf_counter() - started
    print(f"load: {load:.2f} s (read the GGUF, dequantize 135M weights), peak memory {peak_mb():.0f} MB")
    ids = tok.encode(PROMPT)[:40]
    assert len(ids) == 40, len(ids)

    with gf.no_grad():
        prefill = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            logits, _ = model(ids[None], cache=model.new_cache())
            prefill.append(time.perf_counter() - t)
        print(f"prefill of {len(ids)} tokens: {1000 * np.median(prefill):.0f} ms (median of {args.repeats})")

        cache = model.new_cache()
        logits, _ = model(ids[None], cache=cache)
        token, steps = int(logits.data[0, -1].argmax()), []
        bar = Progress(args.new_tokens, unit="tok")
        for i in range(args.new_tokens):
            t = time.perf_counter()
            logits, _ = model(np.array([[token]]), cache=cache)
            token = int(logits.data[0, -1].argmax())
            steps.append(time.perf_counter() - t)
            bar.update(i + 1)
        bar.close()
        cached = 1 / np.median(steps)
        print(
            f"decode with the KV cache: {cached:.1f} tokens/s (median step {1000 * np.median(steps):.1f} ms, "
            f"context {len(ids)} to {len(ids) + args.new_tokens})"
        )

        seq, steps = list(ids), []
        for _ in range(args.uncached_tokens):
            t = time.perf_counter()
            logits, _ = model(np.array([seq]))
            seq.append(int(logits.data[0, -1].argmax()))
            steps.append(time.perf_counter() - t)
        uncached = 1 / np.median(steps)
        print(f"decode without the cache: {uncached:.1f} tokens/s (context {len(ids)}+)")
        print(f"the cache is {cached / uncached:.1f}x faster")
    print(f"peak memory: {peak_mb():.0f} MB")
    return 0


if __name__ == "__main__":
    with fast_unless_chosen():  # the tier gradflow train runs
        status = main()
    sys.exit(status)
