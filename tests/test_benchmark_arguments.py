"""A benchmark's bad argument is one line on stderr naming the script, the argument and the value, exit 2,
before any model is loaded. (The benchmarks are files of the checkout: skipped when the tests run from a copy.)"""

import subprocess
import sys

from helpers import BENCHMARKS, in_checkout


@in_checkout
def test_bench_finetune_names_a_kernel_it_does_not_know():
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_finetune.py"), "--each", "Silu,Softmax"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench_finetune: --each 'Softmax' is no fast kernel's op")
    assert "Silu" in lines[0] and "RMSNorm" in lines[0]  # the names it takes
