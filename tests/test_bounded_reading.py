"""A crafted file is refused in one line before it can make gradflow allocate: checkpoints, gf.load, from_hf.

Each file here is built the way an attacker (or a broken disk) would: a description that inflates
to 300 MB from 350 KB, JSON nested 100,000 deep, records and random states of the wrong kind, a
config.json asking for a billion layers, a tensor of a dtype numpy lacks.
"""

import io
import json
import resource
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from helpers import error_line, rewrite

import gradflow as gf
from gradflow import nn
from gradflow.cli import build, main
from gradflow.cli.build import SMOLLM2
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.hf import write_hf
from gradflow.models.llama import Llama, LlamaConfig
from gradflow.training.checkpoint import save_checkpoint


def write_npz(path, arrays, meta_parts, meta_size):
    """An .npz whose description (deflated) is the concatenation of meta_parts, meta_size bytes long."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False, "shape": (meta_size,)})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for key, value in arrays.items():
            stored = io.BytesIO()
            np.save(stored, value)
            archive.writestr(f"{key}.npy", stored.getvalue())
        with archive.open("__meta__.npy", "w", force_zip64=True) as f:
            f.write(header.getvalue())
            for part in meta_parts:
                f.write(part)


def arrays_and_meta(path):
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    return arrays, json.loads(arrays.pop("__meta__").tobytes())


def resume_and_generate_lines(checkpoint, capsys):
    """The one line `train --resume` and `generate --checkpoint` print for the checkpoint."""
    assert main(["train", "--resume", "--out-dir", str(checkpoint.parent), "--max-iters", "2"]) == 2
    resumed = error_line(capsys)
    assert main(["generate", "--checkpoint", str(checkpoint), "--max-new-tokens", "1"]) == 2
    return resumed, error_line(capsys)


def test_a_description_that_inflates_to_300_mb_is_refused_before_it_is_inflated(checkpoint, tmp_path):
    arrays, meta = arrays_and_meta(checkpoint)
    head = json.dumps(meta)[:-1].encode() + b', "pad": "'
    size = len(head) + (300 << 20) + 2
    write_npz(checkpoint, arrays, [head, *[b"a" * (1 << 20)] * 300, b'"}'], size)
    assert checkpoint.stat().st_size < 1 << 20  # 300 MB in a file under 1 MB
    # the command runs in a grandchild, measured by a lean child: a process forked from this one starts
    # with this one's peak (Linux keeps ru_maxrss across fork and exec)
    argv = [sys.executable, "-c", "import sys; from gradflow.cli import main; sys.exit(main(sys.argv[1:]))"]
    argv += ["generate", "--checkpoint", str(checkpoint), "--max-new-tokens", "1"]
    measure = (
        "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024); "
        "print(done.stderr, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", measure, *argv], capture_output=True, text=True, timeout=120)
    code, peak_mb = done.stdout.split()
    assert code == "2"
    assert done.stderr.strip() == (
        f"gradflow generate: checkpoint {checkpoint}: __meta__ declares shape ({size},), {size:,} values; "
        "at most 67,108,864 are read"
    )
    assert int(peak_mb) < 200, f"{peak_mb} MB to refuse it"  # inflating it took 645 MB


def test_a_description_nested_100000_deep_is_one_line(checkpoint, capsys):
    arrays, meta = arrays_and_meta(checkpoint)
    text = (json.dumps(meta)[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()
    write_npz(checkpoint, arrays, [text], len(text))
    resumed, generated = resume_and_generate_lines(checkpoint, capsys)
    said = f"checkpoint {checkpoint}: its description nests 100001 levels deep; at most 64 are read"
    assert (resumed, generated) == (f"gradflow train: {said}", f"gradflow generate: {said}")


def test_an_array_larger_than_its_config_allows_is_refused_before_it_is_inflated(checkpoint, capsys):
    arrays, meta = arrays_and_meta(checkpoint)
    arrays["model/wpe.weight"] = np.zeros((1 << 12, 16), np.float32)  # block_size 8 says (8, 16); 16 x 64 at most
    text = json.dumps(meta).encode()
    write_npz(checkpoint, arrays, [text], len(text))
    assert main(["generate", "--checkpoint", str(checkpoint)]) == 2
    assert error_line(capsys) == (
        f"gradflow generate: checkpoint {checkpoint}: model/wpe.weight declares shape (4096, 16), 65,536 values; "
        "at most 1,024 are read"
    )


def test_an_array_whose_header_and_archive_disagree_is_refused(checkpoint, capsys):
    arrays, meta = arrays_and_meta(checkpoint)
    text = json.dumps(meta).encode()
    write_npz(checkpoint, arrays, [text], len(text) + 1000)  # declares 1,000 bytes more than it holds
    assert main(["generate", "--checkpoint", str(checkpoint)]) == 2
    assert f"checkpoint {checkpoint}: __meta__ declares shape ({len(text) + 1000},) of uint8, but the archive" in (
        error_line(capsys)
    )


@pytest.mark.parametrize(
    "history, message",
    [
        ([{"step": 1, "loss": 2.0}], "history[0] has train_loss None, not a number"),
        ([{"step": 1, "train_loss": 2.0, "val_loss": "low"}], "history[0] has val_loss 'low', not a number"),
        ([{"step": 9, "train_loss": 2.0, "val_loss": 2.0}], "history[0] has step 9, not an integer in [0, 1]"),
        ([{"step": 1, "train_loss": 2.0, "val_loss": 2.0, "blocks": {"a": 1}, "grad_norm": 1.0,
           "clip_fraction": 0.0}], "history[0] has blocks that are not a dict of each block's measures"),
        ([{"step": 1, "train_loss": 2.0, "val_loss": 2.0, "blocks": {}}], "history[0] has grad_norm None"),
    ],
)  # fmt: skip
def test_a_history_record_of_another_kind_is_one_line(checkpoint, capsys, history, message):
    rewrite(checkpoint, change_meta=lambda meta: meta.update(history=history))
    assert main(["train", "--resume", "--out-dir", str(checkpoint.parent), "--max-iters", "2"]) == 2
    assert error_line(capsys).startswith(f"gradflow train: checkpoint {checkpoint}: {message}")


@pytest.mark.parametrize("value", [-1, 1 << 200])
def test_a_random_state_out_of_range_is_one_line(checkpoint, capsys, value):
    rewrite(checkpoint, change_meta=lambda meta: meta["rng"]["gradflow"]["state"].__setitem__(0, value))  # a word
    assert main(["train", "--resume", "--out-dir", str(checkpoint.parent), "--max-iters", "2"]) == 2
    assert error_line(capsys) == (
        f"gradflow train: checkpoint {checkpoint}: rng is not a pair of saved generator states"
    )


LORA = {"targets": ["q_proj"], "r": 2, "alpha": 4.0, "dropout": 0.0}


def set_group(key, value):
    return lambda meta: meta["optimizer"]["param_groups"][0].update({key: value})


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m: m.update(optimizer=5), "optimizer must hold param_groups and scalars, and nothing else"),
        (lambda m: m["optimizer"].update(scalars=[]), "optimizer.scalars must map each parameter's index to its "),
        (lambda m: m["optimizer"].update(scalars={"0": {"step": "x"}}), "optimizer.scalars must map each"),
        (lambda m: m["optimizer"].update(scalars={"99": {"step": 1}}), "optimizer.scalars names a parameter past"),
        (lambda m: m["optimizer"].update(param_groups=[5]), "optimizer.param_groups must be a list of groups"),
        (set_group("eps", "tiny"), "optimizer.param_groups must be a list of groups: params (their indices) and "),
        (set_group("params", ["a"]), "optimizer.param_groups must be a list of groups"),
        (lambda m: m.update(data=5), "data must be a string, got 5"),
    ],
)  # fmt: skip
def test_a_malformed_optimizer_or_text_field_is_one_line(checkpoint, capsys, change, message):
    rewrite(checkpoint, change_meta=change)
    assert main(["train", "--resume", "--out-dir", str(checkpoint.parent), "--max-iters", "2"]) == 2
    assert error_line(capsys).startswith(f"gradflow train: checkpoint {checkpoint}: {message}")


def test_lora_targets_of_another_kind_are_one_line(tmp_path, capsys, monkeypatch):
    def no_model():
        raise AssertionError("the base model was loaded (or fetched) before the adapter was checked")

    monkeypatch.setattr(build, "smollm2_instruct", no_model)
    adapter = tmp_path / "adapter"
    save_checkpoint(adapter / "ckpt.npz", nn.Linear(2, 2), meta={"base": SMOLLM2, "lora": LORA | {"targets": 5}})
    assert main(["generate", "--model", "smollm2", "--adapter", str(adapter), "--max-new-tokens", "1"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"gradflow generate: checkpoint {adapter / 'ckpt.npz'}: lora.targets must be a list of layer names, got 5"
    )


# --- safetensors: gf.load and from_hf -------------------------------------------------------------------


def write_safetensors(path, header, body=b""):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)


def test_gf_load_refuses_a_description_nested_50000_deep(tmp_path):
    path = tmp_path / "deep.safetensors"
    write_safetensors(path, {"__metadata__": {"gradflow": "[" * 50_000 + "]" * 50_000}})
    with pytest.raises(ValueError) as refused:
        gf.load(path)
    assert str(refused.value) == (
        f"load: {path} is not a file written by gf.save (its description nests 50000 levels deep; at most 64 are read)"
    )


F8 = {"x": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}}


def test_gf_load_refuses_a_dtype_numpy_lacks_by_name(tmp_path):
    path = tmp_path / "f8.safetensors"
    write_safetensors(path, {**F8, "__metadata__": {"gradflow": '{"__array__": "x"}'}}, b"\0\0")
    with pytest.raises(ValueError, match=r"\(x has dtype F8_E4M3, which gradflow cannot read; it reads BOOL, F16, "):
        gf.load(path)


def test_from_hf_refuses_a_dtype_numpy_lacks_by_name(tmp_path):
    write_safetensors(tmp_path / "model.safetensors", F8, b"\0\0")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="x has dtype F8_E4M3, which gradflow cannot read; it reads BF16, BOOL"):
        GPT.from_hf(tmp_path)


@pytest.fixture
def exported(tmp_path):
    """A small GPT and a small Llama written as Hugging Face folders: {cls: (folder, config.json's dict)}."""
    folders = {}
    for cls, model in ((GPT, GPT(GPTConfig(16, 8, 2, 2, 16))), (Llama, Llama(LlamaConfig(16, 2, 16, 2, 2, 32)))):
        folder = tmp_path / cls.__name__
        folder.mkdir()
        weights, config = model.to_hf()
        write_hf(folder, weights, config)
        folders[cls] = folder, config
    return folders


@pytest.mark.parametrize("cls, key", [(GPT, "n_layer"), (Llama, "num_hidden_layers")])
def test_from_hf_compares_a_billion_layers_with_the_weights_before_building(exported, cls, key):
    folder, config = exported[cls]
    (folder / "config.json").write_text(json.dumps({**config, key: 10**9}))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError) as refused:
        cls.from_hf(folder)
    assert (
        str(refused.value)
        == f"{cls.__name__}.from_hf: {folder}: config.json says 1000000000 layers but the weights hold 2"
    )
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50 << 10  # KB: no list of 10^9 names


def test_from_hf_refuses_a_config_json_nested_100000_deep(exported):
    folder, config = exported[GPT]
    (folder / "config.json").write_text(
        json.dumps({**config, "deep": 0}).replace("0}", "[" * 10**5 + "]" * 10**5 + "}")
    )
    with pytest.raises(
        ValueError, match="config.json is not JSON gradflow reads: it nests 100001 levels deep; at most"
    ):
        GPT.from_hf(folder)


@pytest.mark.parametrize("key", ["n_positions", "vocab_size", "n_embd"])
def test_from_hf_sizes_larger_than_the_weights_are_refused_without_allocating(exported, key):
    folder, config = exported[GPT]
    (folder / "config.json").write_text(json.dumps({**config, key: 1 << 30}))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match=f"GPT.from_hf: {folder}: "):
        GPT.from_hf(folder)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50 << 10


def test_bounded_json_measures_depth_outside_strings():
    from gradflow.engine.bounded_json import depth

    assert [depth("1"), depth("[1, 2]"), depth('{"a": [[]]}'), depth('["[[[", "\\"[["]')] == [0, 1, 3, 1]
    assert depth(b"[" * 3_000_000 + b"]" * 3_000_000) == 3_000_000  # in chunks, past the first
