"""Fine-tuning the real SmolLM2-135M-Instruct: `gradflow finetune` end to end (with tiny settings), and one
step's adapter gradients against a PyTorch reference of the same adapted model on the same batch.

These read the SmolLM2 model file (fetched once, 98 MB). The PyTorch test needs torch==2.13.0 and
transformers==5.23.0 and is skipped without them, unless GRADFLOW_REQUIRE_TORCH=1 (CI sets it).
"""

import contextlib
import importlib
import io
import json
import os
import shutil

import numpy as np
import pytest

from gradflow.cli.main import main
from gradflow.models.llama import smollm2_instruct
from gradflow.nn import lora
from gradflow.text.chat_data import chat_example, pad
from gradflow.text.tasks import TASKS
from gradflow.training.checkpoint import load_checkpoint

TINY_RUN = ["--task", "records", "--max-iters", "2", "--batch-size", "2", "--train-examples", "8",
            "--eval-examples", "2", "--eval-iters", "1", "--eval-interval", "1", "--block-size", "96"]  # fmt: skip


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """(the folder, what it printed) of one tiny `gradflow finetune` run, shared: loading and adapting the
    model is most of each run's time."""
    out = tmp_path_factory.mktemp("finetune") / "ft"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["finetune", *TINY_RUN, "--out-dir", str(out)]) == 0
    return out, printed.getvalue()


def test_finetune_runs_saves_small_adapters_and_resumes(tiny_run, tmp_path, capsys):
    out = tmp_path / "ft"
    shutil.copytree(tiny_run[0], out)  # resumed below: the shared run stays at step 2
    said = tiny_run[1]
    assert "before: exact " in said and "after: exact " in said and "held-out answers, after" in said
    assert "60 adapters (r=8, alpha=16.0, 460,800 numbers" in said
    report = json.loads((out / "report.json").read_text())
    assert report["before"]["examples"] == report["after"]["examples"] == 2
    assert report["lora"] == {"targets": ["q_proj", "v_proj"], "r": 8, "alpha": 16.0, "dropout": 0.0}
    size = (out / "ckpt.npz").stat().st_size
    assert size < 6e6  # 460,800 adapter numbers and their two Adam moments in float32: 5.5 MB, not 540
    ckpt = load_checkpoint(out)
    assert ckpt["step"] == 2 and ckpt["report"]["after"]["examples"] == 2

    assert main(["finetune", "--task", "records", "--out-dir", str(out)]) == 2  # a fresh run over it
    assert "holds a run's checkpoint at step 2" in capsys.readouterr().err
    assert main(["finetune", "--resume", "--lora-r", "4", "--out-dir", str(out)]) == 2
    assert "--lora-r 4 conflicts with the checkpoint, whose adapters have 8" in capsys.readouterr().err
    resumed = ["--resume", "--max-iters", "3", "--eval-examples", "2", "--train-examples", "8", "--out-dir", str(out)]
    assert main(["finetune", *resumed]) == 0
    said = capsys.readouterr().out
    assert "resuming" in said and "at step 2; changed: max_iters 2 -> 3" in said
    assert "held-out answers, before" not in said  # measured once, when the run began, and kept in the checkpoint
    assert load_checkpoint(out)["step"] == 3


def test_a_target_that_is_not_a_linear_names_the_ones_there_are(tmp_path, capsys):
    assert main(["finetune", *TINY_RUN, "--targets", "q_proj,query", "--out-dir", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # after "loading SmolLM2-135M-Instruct ..."
    assert err.startswith("gradflow finetune: --targets: target 'query' matches no Linear; the Linear names are")
    assert "down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj" in err
    assert not (tmp_path / "x").exists()  # nothing was written


def test_a_bad_line_of_the_data_file_is_named(tmp_path, capsys):
    data = tmp_path / "chats.jsonl"
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    data.write_text(good + "\n" + good + "\n{not json\n")
    assert main(["finetune", "--data", str(data), "--out-dir", str(tmp_path / "x")]) == 2
    assert f"{data}, line 3: not valid JSON" in capsys.readouterr().err


def test_chat_with_the_adapter(tiny_run, tmp_path, capsys, monkeypatch):
    out = tiny_run[0]
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # noqa: SIM115 - closed at the test's end by pytest
    assert main(["chat", "--adapter", str(out), "--max-new-tokens", "2"]) == 0
    assert main(["chat", "--adapter", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err


# --- gradients against PyTorch ------------------------------------------------------------------


def require(name):
    """The package, or a skip where it is not installed (a failure when GRADFLOW_REQUIRE_TORCH=1)."""
    if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
        return importlib.import_module(name)
    return pytest.importorskip(name)


def test_adapter_gradients_equal_pytorchs_on_the_real_model():
    """The same adapted SmolLM2 (A and B random, so that every gradient is non-zero), the same padded batch
    of two conversations, the loss on the replies alone: gradflow's dL/dA and dL/dB against torch's autograd
    through transformers' LlamaForCausalLM with the adapters added by hand."""
    torch, transformers = require("torch"), require("transformers")
    model, tokenizer = smollm2_instruct()
    weights, hf_config = model.to_hf()
    lora.apply(model, ("q_proj", "v_proj"), r=4, alpha=8)
    rng = np.random.default_rng(0)
    for _, m in lora.adapters(model):
        m.A.data = (rng.standard_normal(m.A.shape) * 0.05).astype(np.float32)
        m.B.data = (rng.standard_normal(m.B.shape) * 0.05).astype(np.float32)
    conversations = TASKS["records"].conversations("train", 2)
    ids, targets = pad([chat_example(c["messages"], tokenizer) for c in conversations], pad_id=0)
    model.train()
    _, loss = model(ids, targets)
    loss.backward()
    ours = {name: (m.A.grad, m.B.grad) for name, m in lora.adapters(model)}

    torch.manual_seed(0)
    reference = transformers.LlamaForCausalLM(transformers.LlamaConfig(**hf_config)).float().eval()
    reference.requires_grad_(False)  # the base is frozen in both
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}
    loaded = reference.load_state_dict(state, strict=False)
    assert hf_config["tie_word_embeddings"] and loaded.missing_keys == ["lm_head.weight"]
    assert not loaded.unexpected_keys
    theirs = {}
    for name, m in lora.adapters(model):
        layer = int(name.split(".")[1])
        linear = getattr(reference.model.layers[layer].self_attn, name.rsplit(".", 1)[1])
        A = torch.tensor(m.A.data, requires_grad=True)
        B = torch.tensor(m.B.data, requires_grad=True)
        theirs[name] = (A, B)
        linear.register_forward_hook(lambda mod, inp, out, A=A, B=B, s=m.scale: out + s * (inp[0] @ A.T) @ B.T)
    logits = reference(torch.from_numpy(ids)).logits
    flat = logits.reshape(-1, logits.shape[-1])
    torch_loss = torch.nn.functional.cross_entropy(flat, torch.from_numpy(targets).reshape(-1))
    torch_loss.backward()
    assert abs(loss.item() - torch_loss.item()) < 1e-4 * abs(torch_loss.item())
    worst = 0.0
    for name, (A, B) in theirs.items():
        for got, want in zip(ours[name], (A.grad.numpy(), B.grad.numpy())):
            worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max()))
    assert worst < 2e-3, worst  # float32 through 30 layers, in two different orders of summation
