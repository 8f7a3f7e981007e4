"""torch.save of any object and torch.load with PyTorch's safety rules (engine/serialize.py, engine/unpickle.py).

weights_only=True (the default) loads tensors, containers, numbers and strings, and refuses any other
global a file names in one line, unless the program allowed it (torch.serialization.safe_globals with
the torch.nn.modules.* paths); a crafted pickle runs no code unless weights_only=False asks for it.
Beside torch==2.13.0 where installed: the same objects are loaded and refused by both.
"""

import base64
import collections
import dataclasses
import io
import os
import pickle
import re

import numpy as np
import pytest
import safetensors.numpy

import gradflow as gf
import gradflow.nn as nn
from gradflow.engine import unpickle
from gradflow.engine.serialize import PICKLED


@pytest.fixture(autouse=True)
def no_safe_globals_left():
    yield
    gf.serialization.clear_safe_globals()


def saved(obj):
    f = io.BytesIO()
    gf.save(obj, f)
    f.seek(0)
    return f


def crafted(pickle_bytes, arrays=None):
    """A file in gf.save's pickled form holding the given pickle, as someone else could write one."""
    data = safetensors.numpy.save(arrays or {}, metadata={PICKLED: base64.b64encode(pickle_bytes).decode()})
    return io.BytesIO(data)


@dataclasses.dataclass
class Config:
    n_layer: int = 2
    name: str = "baby"


class TinyLM(nn.Module):
    """An embedding, an LSTM and a decoder tied to the embedding, as PyTorch's word language model."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(11, 6)
        self.rnn = nn.LSTM(6, 6, 2)
        self.decoder = nn.Linear(6, 11)
        self.decoder.weight = self.encoder.weight
        self.drop = nn.Dropout(0.1)

    def forward(self, ids):
        return self.decoder(self.rnn(self.drop(self.encoder(ids)))[0])


SAFE = [TinyLM, nn.modules.sparse.Embedding, nn.modules.rnn.LSTM, nn.modules.linear.Linear, nn.modules.dropout.Dropout]


# --- a model saved whole -------------------------------------------------------------------------------


def test_a_model_saved_whole_loads_whole_under_safe_globals_named_by_pytorchs_paths():
    model = TinyLM()
    model(gf.tensor([[1, 2, 3]])).sum().backward()  # a gradient, which is not saved (as in PyTorch)
    with gf.serialization.safe_globals(SAFE):
        assert gf.serialization.get_safe_globals() == SAFE
        back = gf.load(saved(model))
    assert gf.serialization.get_safe_globals() == []  # the context manager allowed them inside only
    assert type(back) is TinyLM and type(back.rnn) is nn.LSTM and back.training == model.training
    assert back.decoder.weight is back.encoder.weight  # tied stays tied
    for (name, p), (_, q) in zip(model.named_parameters(), back.named_parameters()):
        assert type(q) is nn.Parameter and q.requires_grad and q.grad is None and q.is_leaf, name
        np.testing.assert_array_equal(q.data, p.data)
    back.eval(), model.eval()
    ids = gf.tensor([[4, 5], [6, 7]])
    np.testing.assert_array_equal(back(ids).data, model(ids).data)


def test_the_default_refuses_a_model_in_one_line_naming_its_class():
    f = saved(TinyLM())
    with pytest.raises(pickle.UnpicklingError) as refused:
        gf.load(f)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"load: the file object holds the global {__name__}.TinyLM,")
    assert "torch.serialization.add_safe_globals([TinyLM])" in message and "weights_only=False" in message
    f.seek(0)
    with (
        gf.serialization.safe_globals([TinyLM]),
        pytest.raises(
            pickle.UnpicklingError,
            match=r"the global gradflow\.nn\.layers\.Embedding, .*add_safe_globals\(\[Embedding\]\)",
        ),
    ):  # the next class it meets
        gf.load(f, weights_only=True)
    gf.serialization.add_safe_globals(SAFE)  # for the rest of the process (the fixture clears them)
    f.seek(0)
    assert type(gf.load(f)) is TinyLM
    f.seek(0)
    gf.serialization.clear_safe_globals()
    assert type(gf.load(f, weights_only=False)) is TinyLM  # asked for: the whole pickle


def test_every_torch_nn_modules_path_is_gradflows_class():
    import gradflow.nn.modules as modules

    count = 0
    for sub in modules.__all__:
        for name in getattr(modules, sub).__all__:
            ours = getattr(getattr(modules, sub), name)
            assert ours is getattr(nn, name, None) or name == "NonDynamicallyQuantizableLinear", (sub, name)
            count += 1
    assert count >= 40 and nn.parameter.Parameter is nn.Parameter


def test_torch_nn_modules_paths_are_pytorchs():
    torch = require_torch()
    import gradflow.nn.modules as modules

    for sub in modules.__all__:
        for name in getattr(modules, sub).__all__:
            assert getattr(getattr(torch.nn.modules, sub), name).__module__ == f"torch.nn.modules.{sub}", name


# --- containers and numbers load by default; other objects as PyTorch loads them -------------------------


def test_containers_numbers_and_tensors_load_by_default_in_their_types():
    obj = {
        "ordered": collections.OrderedDict(a=gf.ones(2), b=np.arange(3)),
        "tags": {"a", "b"},
        "frozen": frozenset({1}),
        1.5: complex(1, 2),  # a float key: not JSON's, so the object is pickled
        "counts": collections.Counter("aab"),
        "bytes": b"\x00\x01",
        "tensor": gf.tensor([[1.0, 2.0]], requires_grad=True),
        "ids": gf.tensor([1, 2]),
        "shape and dtype": (gf.zeros(2, 3).shape, gf.zeros(1).dtype),  # torch.Size and torch.float32
    }
    back = gf.load(saved(obj))
    assert type(back["ordered"]) is collections.OrderedDict and back["tags"] == {"a", "b"}
    assert back[1.5] == complex(1, 2) and back["counts"] == {"a": 2, "b": 1} and back["bytes"] == b"\x00\x01"
    assert back["frozen"] == frozenset({1}) and str(back["shape and dtype"]) == "(torch.Size([2, 3]), torch.float32)"
    assert back["tensor"].requires_grad and back["tensor"].dtype == np.float32 and back["ids"].dtype == np.int64
    np.testing.assert_array_equal(back["ordered"]["b"], np.arange(3))


def test_a_dataclass_is_refused_by_default_and_is_itself_when_asked():
    f = saved({"config": Config(), "step": 3})
    with pytest.raises(pickle.UnpicklingError, match=f"holds the global {__name__}.Config,"):
        gf.load(f)
    f.seek(0)
    back = gf.load(f, weights_only=False)
    assert back == {"config": Config(), "step": 3}


def test_paths_that_clash_in_the_plain_form_are_pickled():
    obj = {"a/b": np.ones(1), "a": {"b": np.zeros(1)}}
    back = gf.load(saved(obj))
    np.testing.assert_array_equal(back["a/b"], np.ones(1))
    np.testing.assert_array_equal(back["a"]["b"], np.zeros(1))


def test_what_does_not_pickle_or_has_no_folder_is_one_error(tmp_path):
    with pytest.raises(TypeError, match=r"^save: cannot store a dict: .*lambda"):
        gf.save({"f": lambda: 0}, io.BytesIO())
    with pytest.raises(FileNotFoundError, match=re.escape(f"save: the folder {tmp_path / 'no'} does not exist")):
        gf.save({}, tmp_path / "no" / "f")


def test_pytorch_loads_and_refuses_the_same_objects():
    torch = require_torch()
    for obj, loads in [
        ({"a": collections.OrderedDict(x=1), "s": {1, 2}, "c": 1j}, True),
        ({"config": Config()}, False),
        ({"when": {np.float64(1.5)}}, False),  # a numpy scalar (in a set: pickled) names numpy's global
    ]:
        f = io.BytesIO()
        torch.save(obj, f)
        f.seek(0)
        try:
            torch.load(f)
            theirs = True
        except pickle.UnpicklingError:
            theirs = False
        try:
            gf.load(saved(obj))
            ours = True
        except pickle.UnpicklingError:
            ours = False
        assert ours == theirs == loads, obj


# --- a crafted file runs no code ---------------------------------------------------------------------


class WritesAFile:
    """What a hostile pickle holds: loading it would call os.system."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.system, (f"echo owned > {self.path}",)


def hostile_pickles(target):
    """Pickles that would write `target` when loaded, through each way a pickle calls code."""
    command = f"echo owned > {target}".encode()
    size = len(command).to_bytes(1, "little")
    return {
        "REDUCE of os.system": pickle.dumps(WritesAFile(target), protocol=4),
        "GLOBAL, protocol 0": b"cos\nsystem\n(V" + command + b"\ntR.",
        "INST": b"(V" + command + b"\nios\nsystem\n.",
        "STACK_GLOBAL": b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c" + size + command + b"\x85R.",
        "builtins.exec": pickle.dumps(_Exec(f"open({str(target)!r}, 'w').write('owned')"), protocol=2),
        "a tensor rebuilt as os.system": b"\x80\x04\x8c\x19gradflow.engine.serialize\x8c\x0erebuilt_tensor\x93"
        b"\x8c\x02os\x8c\x06system\x93N\x88\x87R.",
    }


class _Exec:
    def __init__(self, code):
        self.code = code

    def __reduce__(self):
        return exec, (self.code,)


@pytest.mark.parametrize("how", list(hostile_pickles("x")))
def test_a_crafted_pickle_runs_no_code_unless_asked(tmp_path, how):
    target = tmp_path / "owned"
    data = hostile_pickles(target)[how]
    for weights_only in (None, True):
        with pytest.raises(
            pickle.UnpicklingError, match=r"^load: the file object holds the global (os|posix|builtins)"
        ):
            gf.load(crafted(data), weights_only=weights_only)
        assert not target.exists()
    if how != "a tensor rebuilt as os.system":
        gf.load(crafted(data), weights_only=False)  # the user asked for the whole pickle: it runs
        assert target.exists()


def test_a_pickle_naming_an_array_the_file_lacks_is_refused():
    data = pickle.dumps(0, protocol=4).replace(b"K\x00", b"\x8c\x011Q")  # BINPERSID "1"
    with pytest.raises(pickle.UnpicklingError, match="refers to an array '1' the file does not hold"):
        gf.load(crafted(data))


# --- bounds: what a pickle may build is estimated before anything is built -----------------------------


def test_a_length_claimed_past_the_data_is_refused_before_it_is_allocated():
    data = b"\x80\x04\x8e" + (1 << 60).to_bytes(8, "little") + b"abc."  # BINBYTES8 of 2**60 bytes
    with pytest.raises(pickle.UnpicklingError, match=r"^load: the file object holds a broken pickle \(expected"):
        gf.load(crafted(data))


def test_a_pickle_that_would_build_too_much_is_refused(monkeypatch):
    monkeypatch.setattr(unpickle, "MAX_OBJECT_BYTES", 1 << 20)
    data = b"\x80\x04]" + b"]a" * 10_000 + b"."  # ten thousand empty lists in a list: 20 KB of opcodes
    with pytest.raises(
        pickle.UnpicklingError,
        match=re.escape("load: the file object holds a pickle whose objects would take up to 2 MiB; "),
    ):
        gf.load(crafted(data))
    assert gf.load(crafted(data), weights_only=False) == [[]] * 10_000  # trusted: not bounded


def test_a_pickle_nested_100000_deep_loads_without_recursing():
    data = b"\x80\x04" + b"]" * 100_000 + b"a" * 99_999 + b"."
    nested = gf.load(crafted(data))
    depth = 0
    while nested:
        nested, depth = nested[0], depth + 1
    assert depth == 99_999


def require_torch():
    if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
        import torch

        return torch
    return pytest.importorskip("torch")


def test_a_file_written_before_dataclasses_were_pickled_still_loads():
    """gf.save stored a dataclass as its fields ({"__fields__": ...}); such a file loads as before."""
    description = '{"config": {"__fields__": {"n_layer": 2, "name": "baby"}}, "step": 3}'
    f = io.BytesIO(safetensors.numpy.save({}, metadata={"gradflow": description}))
    back = gf.load(f)
    assert back["config"].n_layer == 2 and back["config"].name == "baby" and back["step"] == 3
    assert gf.load(saved({"__fields__": 1})) == {"__fields__": 1}  # the key itself, in a dict of the user's
