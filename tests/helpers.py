"""What several test files share, in one place: the tiny corpus and model the trainer tests learn on,
`gradflow train` run in-process and the one line it prints on failure, a checkpoint to tamper with,
MPI's command and what its ranks train, the explorer's views, PyTorch beside gradflow, the benchmarks' folder.

The test files import it as `from helpers import ...` (pytest puts tests/ on the path); a script run
under mpiexec puts tests/ on its path first (test_distributed.script). The fixtures built on it
(data, checkpoint, mpi) are in conftest.py.
"""

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

import gradflow as gf
from gradflow.cli import main
from gradflow.engine.autograd import Function
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.text import CharTokenizer, get_batch, split
from gradflow.training.trainer import TrainConfig

# --- a Trainer on a tiny corpus ---------------------------------------------------------------------

TEXT = "the cat sat on the mat. the dog sat on the log. " * 40
TOK = CharTokenizer(TEXT)
TRAIN, VAL = split(TOK.encode(TEXT))


def model(seed=0, dropout=0.1):
    gf.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=TOK.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16, dropout=dropout))


def config(out_dir, **kw):
    base = dict(max_iters=40, batch_size=4, block_size=16, warmup_iters=5, eval_interval=10, eval_iters=2)
    return TrainConfig(out_dir=str(out_dir), **{**base, **kw})


def records(out_dir):
    return [json.loads(line) for line in (Path(out_dir) / "metrics.jsonl").read_text().splitlines()]


def batch_losses(out_dir):
    """(step, loss) of every training step a run logged."""
    return [(r["step"], r["loss"]) for r in records(out_dir) if "loss" in r]


def steps_logged(out):
    return [r["step"] for r in records(out)]


# --- `gradflow train`, as a user runs it ------------------------------------------------------------

CORPUS = "to be or not to be, that is the question. " * 20
MODEL = ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "8"]
TINY = [*MODEL, "--batch-size", "2", "--eval-iters", "1", "--sample-tokens", "0"]
TINY_MPI = [
    *MODEL,
    "--batch-size",
    "3",
    "--eval-iters",
    "1",
    "--sample-tokens",
    "0",
]  # a batch two ranks cannot split evenly


def train(out, data, *flags):
    return main(["train", "--data", str(data), *TINY, "--out-dir", str(out), *flags])


def error_line(capsys):
    """The one line a failure printed: the last of stderr, and the only one naming gradflow (above it, progress)."""
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("gradflow")]
    assert len(lines) == 1 and err.strip().endswith(lines[0]), err
    assert "Warning" not in err  # numpy's wording never reaches the user
    return lines[0]


def rewrite(path, change_arrays=None, change_meta=None):
    """Edit a checkpoint as an attacker or a broken disk would: arrays and description, no checks."""
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(arrays["__meta__"].tobytes())
    if change_arrays:
        change_arrays(arrays)
    if change_meta:
        change_meta(meta)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


# --- MPI ----------------------------------------------------------------------------------------------


def train_line(data, out, *flags):
    """`gradflow train`'s arguments for a run that two ranks share."""
    return ["train", "--data", str(data), *TINY_MPI, "--out-dir", str(out), *flags]


def wait_for_steps(out_dir, steps, timeout=60):
    """Until rank 0 has logged `steps` training steps (so every rank's Ctrl-C handler is in place)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (out_dir / "metrics.jsonl").exists() and len(batch_losses(out_dir)) >= steps:
            return
        time.sleep(0.05)
    raise TimeoutError(f"{out_dir}: fewer than {steps} steps in {timeout} s")


def batch(rows=5, seed=0):
    return get_batch(TRAIN, rows, 16, np.random.default_rng(seed))


class Frozen(gf.nn.Module):
    """An embedding and a head, a frozen matrix, and a parameter no shard uses."""

    def __init__(self, vocab_size):
        super().__init__()
        self.embed = gf.nn.Embedding(vocab_size, 8)
        self.head = gf.nn.Linear(8, vocab_size)
        self.frozen = gf.nn.Parameter(np.ones((8, 8), np.float32))
        self.frozen.requires_grad = False
        self.unused = gf.nn.Parameter(np.zeros(3, np.float32))

    def forward(self, x, y):
        logits = self.head(self.embed(x) @ self.frozen)
        return logits, gf.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def frozen_model():
    gf.manual_seed(0)
    return Frozen(TOK.vocab_size)


# --- the ops, the explorer, the fast tier, PyTorch ---------------------------------------------------


def all_ops():
    """Every op of both tiers: each concrete Function subclass gradflow defines."""
    found, stack = set(), [Function]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            concrete = not sub.__name__.startswith("_")  # _Extreme is the shared base of Max and Min
            if sub.__module__.startswith("gradflow.") and concrete and sub.forward is not Function.forward:
                found.add(sub)
    return found


def views(page):
    """Every view's JSON in an explorer page, in order, each tensor with its numbers (written once per page)."""
    found = dict(re.findall(r'<script type="application/json" id="gf-(\S+?)">(.*?)</script>', page.html, re.S))
    parsed = {key: json.loads(text.replace("<\\/", "</")) for key, text in found.items()}
    result = [parsed[f"view-{i}"] for i in range(sum(k.startswith("view-") for k in parsed))]
    for v in result:
        for nid, node in v["nodes"].items():
            node.update(parsed.get(f"numbers-{nid}", {}))
    return result


def run_in_tier(tier, fn, arrays, seed=1):
    """fn's output and the gradient of each input in one tier of kernels ("plain" or "fast"), for one fixed
    upstream gradient: what the fast tier's tests compare."""
    with gf.use_kernels(tier):
        xs = [gf.tensor(a, requires_grad=True) for a in arrays]
        y = fn(*xs)
        y.backward(np.random.default_rng(seed).standard_normal(y.shape).astype(y.dtype))
        return [y.data.copy()] + [np.asarray(x.grad) for x in xs]


def heads(b, t, h, hs, rng):
    """(B, h, T, hs) as the models make them: a transposed view of (B, T, h * hs)."""
    return rng.standard_normal((b, t, h, hs)).transpose(0, 2, 1, 3)


def both(torch, ours, theirs, *arrays, rtol=1e-10):
    """Values and input gradients of one idiom in gradflow and in PyTorch (float64, random cotangent)."""
    xs = [gf.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, z = ours(*xs), theirs(*ts)
    u = np.random.default_rng(2).standard_normal(y.shape)
    y.backward(u)
    z.backward(torch.tensor(u))
    np.testing.assert_allclose(y.data, z.detach().numpy(), rtol=rtol, atol=1e-12)
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad, t.grad.numpy(), rtol=rtol, atol=1e-12)


# --- the benchmarks (files of the checkout, not of the package) ------------------------------------------

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
in_checkout = pytest.mark.skipif(not BENCHMARKS.is_dir(), reason="not run from a checkout")
