"""What the baby GPT's benchmark figures depend on, printed before them, so that two machines can be compared.

gradflow's step is numpy's BLAS doing the matrix products plus numpy's (or numba's) passes over the
activations; PyTorch's is its own BLAS plus its own kernels. The ratio of their tokens/s therefore
moves with the machine, most of all with how fast numpy's BLAS runs the step's products. So the
header names the processor, numpy's BLAS with the kernels it chose for this processor and its
threads, the kernels gradflow runs (numba's loops, or numpy only and why), and the matmul floor:
the step's own matrix products (each linear layer's y = x W^T, dx = dy W, dW = dy^T x, and
attention's six) timed alone, in GFLOP/s. A machine whose floor is lower spends a larger share of
the step in products, where gradflow and PyTorch differ least.

    from machine import header, step_products, matmul_floor   # beside this file
    for line in header(step_products(batch, block, model, vocab_size)): print(line)
"""

import math
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info

from gradflow.fast.compiled import describe as describe_kernels


def describe_processor():
    """The processor's name, the cores this process may use, the vector instructions numpy found, and how
    busy the machine is (the load average: other work on the cores slows BLAS's threads most)."""
    cpuinfo = Path("/proc/cpuinfo")  # Linux's; elsewhere platform's name for the processor
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    name = names[0] if names else platform.processor() or platform.machine()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    simd = np.show_config(mode="dicts")["SIMD Extensions"]
    busy = f"; load average {os.getloadavg()[0]:.2f} over the last minute" if hasattr(os, "getloadavg") else ""
    return f"processor: {name}, {cores} cores; numpy's SIMD: {', '.join(simd['found']) or 'the baseline only'}{busy}"


def describe_blas():
    """numpy's BLAS, the kernels it chose and its threads, as it runs (threadpoolctl asks OpenBLAS for its
    core type at run time; numpy's build information names the build machine's). An OPENBLAS_CORETYPE in
    the environment overrides OpenBLAS's own choice for the processor."""
    running = [
        f"{i['internal_api']} {i['version']}, {i.get('architecture') or 'unnamed'} kernels, {i['num_threads']} threads"
        for i in threadpool_info()
        if i["user_api"] == "blas"
    ]
    if not running:  # a BLAS threadpoolctl does not know (Apple's Accelerate): what numpy was built with
        built = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        running = [f"{built['name']} {built.get('version', '')} (threads not known)"]
    forced = os.environ.get("OPENBLAS_CORETYPE")
    return f"numpy's BLAS: {'; '.join(running)}" + (
        f" (chosen by OPENBLAS_CORETYPE={forced} in the environment)" if forced else ""
    )


def step_products(batch, block, model, vocab_size):
    """The (a, b) operand shapes of every matrix product in a training step of a GPT of `model`'s sizes
    (GPTConfig's fields), forward and backward: each linear layer's y = x W^T, dx = dy W, dW = dy^T x on
    the B T rows, and attention's S = q k^T, y = A v and their four gradients on each (batch, head)."""
    n, d, heads = batch * block, model["n_embd"], model["n_head"]
    layer = [(d, d)] * 4 + [(d, 4 * d), (4 * d, d)]  # q, k, v and output projections (nn.attention), MLP up, down
    linears = layer * model["n_layer"] + [(d, vocab_size)]  # and the head, tied to the embedding
    products = []
    for i, o in linears:
        products += [((n, i), (i, o)), ((n, o), (o, i)), ((o, n), (n, i))]
    bh, t, hs = batch * heads, block, d // heads
    attention = [((bh, t, hs), (bh, hs, t)), ((bh, t, t), (bh, t, hs))]  # S = q k^T, y = A v
    attention += [((bh, t, t), (bh, t, hs)), ((bh, t, hs), (bh, hs, t))]  # dv = A^T dy, dA = dy v^T
    attention += [((bh, t, t), (bh, t, hs)), ((bh, t, t), (bh, t, hs))]  # dq = dS k, dk = dS^T q
    return products + attention * model["n_layer"]


def matmul_floor(products, matmul=np.matmul, array=np.asarray):
    """A step of these matrix products alone (float32, numpy's BLAS), timed as an engine is: the time a
    training step cannot go below. Returns (GFLOP per step, step); a product (m, k) by (k, n) is 2 m k n flops.
    Another library's floor: its `matmul` (with out=) and its `array` made from a numpy array
    (torch.matmul and torch.from_numpy give PyTorch's own BLAS on the same shapes)."""
    rng = np.random.default_rng(0)
    operands = [tuple(array(rng.standard_normal(s, dtype=np.float32)) for s in pair) for pair in products]
    outs = [array(np.empty(a.shape[:-1] + b.shape[-1:], np.float32)) for a, b in operands]

    def step(x=None, y=None):
        for (a, b), out in zip(operands, outs):
            matmul(a, b, out=out)

    return sum(2 * math.prod(a.shape) * b.shape[-1] for a, b in operands) / 1e9, step


def header(products, rounds=5, round_seconds=0.2):
    """The lines that say what the figures after them depend on. The floor is the median over `rounds`
    rounds, each of as many steps as fill `round_seconds` (at least one) after a pause that lets other
    threads go idle: about a second on a quiet machine, and not minutes on a busy one."""
    gflop, step = matmul_floor(products)
    for _ in range(3):  # warm up: BLAS's threads start, the caches fill
        step()
    seconds = []
    for _ in range(rounds):
        time.sleep(0.25)  # OpenBLAS's threads spin for about 0.1 s after a product
        steps, start = 0, time.perf_counter()
        while steps == 0 or time.perf_counter() - start < round_seconds:
            step()
            steps += 1
        seconds.append((time.perf_counter() - start) / steps)
    floor = statistics.median(seconds)
    return [
        describe_processor(),
        describe_blas(),
        f"gradflow's kernels: {describe_kernels()} (GRADFLOW_KERNELS, GRADFLOW_NUMBA)",
        f"matmul floor: the step's {gflop:.2f} GFLOP of products alone in {1000 * floor:.1f} ms, "
        f"{gflop / floor:.0f} GFLOP/s (median of {rounds} rounds)",
    ]
