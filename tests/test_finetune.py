"""LoRA fine-tuning: the built-in task, the FineTuner (adapters alone learn, are saved, resume exactly),
loading adapters back, `gradflow finetune` end to end on SmolLM2, and its gradients against PyTorch's."""

import json

import numpy as np
import pytest

import gradflow as gf
from gradflow.cli.main import main
from gradflow.models.llama import Llama, LlamaConfig
from gradflow.nn import lora
from gradflow.text.chat_data import IGNORE_INDEX
from gradflow.text.tasks import CITIES, FIRST_NAMES, SURNAMES, TASKS, answer, get_task
from gradflow.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from gradflow.training.finetune import FineTuner, load_adapter
from gradflow.training.trainer import TrainConfig

RECORDS = TASKS["records"]
TINY = LlamaConfig(vocab_size=17, n_layer=2, d_model=16, n_heads=2, n_kv_heads=1, d_ff=24)


# --- the built-in task --------------------------------------------------------------------------


def test_records_are_made_the_same_every_time_and_answered_in_one_format():
    a, b = RECORDS.conversations("train", 30), RECORDS.conversations("train", 30)
    assert a == b
    for c in a:
        user, assistant = c["messages"]
        assert user["role"] == "user" and user["content"].startswith("Turn into a JSON record: ")
        record = c["record"]
        for value in (record["name"], str(record["age"]), record["city"]):
            assert value in user["content"]  # the answer is in the sentence: a skill, not a fact
        assert assistant == {"role": "assistant", "content": answer(record)}
        assert json.loads(assistant["content"]) == record
    in_any_order = {"city": "Oslo", "age": 40, "name": "Ana Silva"}
    assert answer(in_any_order) == '{"name": "Ana Silva", "age": 40, "city": "Oslo"}'


def test_the_held_out_split_uses_names_and_cities_training_never_shows():
    def words(split):
        found = {"first": set(), "last": set(), "city": set()}
        for c in RECORDS.conversations(split, 400):
            first, last = c["record"]["name"].split()
            found["first"].add(first), found["last"].add(last), found["city"].add(c["record"]["city"])
        return found

    train, held_out = words("train"), words("held-out")
    for kind in train:
        assert not train[kind] & held_out[kind], kind
    assert held_out["first"] <= set(FIRST_NAMES) and held_out["last"] <= set(SURNAMES)
    assert held_out["city"] <= set(CITIES)


def test_grades_exact_fields_and_wrong():
    example = RECORDS.conversations("held-out", 1)[0]
    record = example["record"]
    assert RECORDS.grade(answer(record), example) == "exact"
    assert RECORDS.grade(" " + answer(record) + "\n", example) == "exact"
    fenced = "```json\n" + json.dumps(record, indent=2) + "\n```"
    assert RECORDS.grade(fenced, example) == "fields"  # right values, the wrong format
    assert RECORDS.grade(json.dumps({**record, "country": "x"}), example) == "wrong"  # an extra key
    assert RECORDS.grade(json.dumps({**record, "age": str(record["age"])}), example) == "wrong"  # age as text
    assert RECORDS.grade("I cannot do that.", example) == "wrong"
    assert RECORDS.grade("{not json}", example) == "wrong"


def test_unknown_task_and_split_are_named():
    with pytest.raises(ValueError, match="--task must be one of records, got 'sums'"):
        get_task("sums")
    with pytest.raises(ValueError, match="split must be one of train, held-out, got 'test'"):
        RECORDS.conversations("test", 1)


# --- the FineTuner, on a tiny Llama -------------------------------------------------------------


def tiny_base(seed=0):
    """A tiny Llama whose token embedding, tied to its head, is large enough (std 0.2, not 0.02) for confident
    logits, as a pretrained model's are: adapters change the blocks, and the frozen head must be able to show it."""
    gf.manual_seed(seed)
    model = Llama(TINY)
    model.embed_tokens.weight.data *= 10
    return model


def tiny_adapted(adapter_seed=0, dropout=0.0):
    """The same base every time; adapter_seed draws A's initial values."""
    model = tiny_base()
    gf.manual_seed(adapter_seed)
    lora.apply(model, ("q_proj", "v_proj"), r=2, alpha=4, dropout=dropout)
    return model


def examples(n, seed):
    """(ids, targets) pairs: a random prompt the loss ignores, then the same short reply to every prompt."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        prompt = rng.integers(1, TINY.vocab_size, size=int(rng.integers(3, 6)))
        tokens = np.concatenate([prompt, [7, 3, 11]])
        targets = np.concatenate([np.full(len(prompt) - 1, IGNORE_INDEX), tokens[len(prompt) :], [IGNORE_INDEX]])
        out.append((tokens, targets))
    return out


def config(tmp_path, **changes):
    settings = dict(max_iters=6, batch_size=4, block_size=16, lr=0.1, warmup_iters=0, weight_decay=0.0,
                    eval_interval=3, eval_iters=2, out_dir=str(tmp_path / "run"))  # fmt: skip
    return TrainConfig(**{**settings, **changes})


def tuner(tmp_path, model=None, on_eval=None, **changes):
    model = model or tiny_adapted()
    train, val = examples(40, 0), examples(8, 1)
    return FineTuner(model, train, val, config(tmp_path, **changes), pad_id=0, on_eval=on_eval, progress=False)


def test_only_the_adapters_learn(tmp_path):
    trainer = tuner(tmp_path, max_iters=30, eval_interval=10)
    base = {n: p.data.copy() for n, p in trainer.model.named_parameters() if not p.requires_grad}
    history = trainer.fit()
    assert history[-1]["val_loss"] < 0.8 * history[0]["val_loss"]
    for name, p in trainer.model.named_parameters():
        if not p.requires_grad:
            assert np.array_equal(p.data, base[name]), name
            assert p.grad is None, name  # a frozen weight gets no gradient
    stepped = [trainer.names[id(p)] for group in trainer.optimizer.param_groups for p in group["params"]]
    assert stepped and all(name.endswith((".A", ".B")) for name in stepped)  # no optimizer state for the base


def test_the_checkpoint_holds_the_adapters_and_their_moments_alone(tmp_path):
    trainer = tuner(tmp_path)
    trainer.fit()
    ckpt = load_checkpoint(tmp_path / "run")
    assert set(ckpt.model_state()) == set(lora.lora_state_dict(trainer.model))
    assert ckpt.meta["lora"] == {"targets": ["q_proj", "v_proj"], "r": 2, "alpha": 4, "dropout": 0.0}
    adapters = sum(v.size for v in ckpt.model_state().values())
    moments = sum(v.size for k, v in ckpt.arrays.items() if k.startswith("optim/"))
    assert moments == 2 * adapters  # Adam's m and v, for the adapters only


def stop_at_3(trainer, step):
    """What Ctrl-C does at step 3: finish the step, save, stop."""
    if step == 3:
        trainer._stop = True


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_resume_is_exact(tmp_path, dropout):
    straight = tuner(tmp_path / "a", model=tiny_adapted(dropout=dropout))
    straight.fit()
    first = tuner(tmp_path / "b", model=tiny_adapted(dropout=dropout), on_eval=stop_at_3)
    first.fit()
    assert load_checkpoint(tmp_path / "b" / "run")["step"] == 3
    second = tuner(tmp_path / "b", model=tiny_adapted(adapter_seed=5, dropout=dropout))  # other initial adapters
    gf.manual_seed(123)  # and another state of the generator that draws dropout's masks: both come from the file
    second.resume()
    second.fit()
    assert second.step == straight.step == 6
    for name, value in lora.lora_state_dict(straight.model).items():
        assert np.array_equal(lora.lora_state_dict(second.model)[name], value), name
    assert [h["val_loss"] for h in second.history] == [h["val_loss"] for h in straight.history]


def test_a_fresh_run_never_replaces_a_saved_one(tmp_path):
    tuner(tmp_path).fit()
    before = (tmp_path / "run" / "ckpt.npz").read_bytes()
    with pytest.raises(FileExistsError, match="--resume"):
        tuner(tmp_path).fit()
    assert (tmp_path / "run" / "ckpt.npz").read_bytes() == before


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's, about the inf this test puts in
def test_a_diverging_run_keeps_its_last_good_adapters(tmp_path):
    trainer = tuner(tmp_path, max_iters=3, eval_interval=1)
    trainer.fit()
    saved = (tmp_path / "run" / "ckpt.npz").read_bytes()
    trainer.config.max_iters = 4
    _, adapter = lora.adapters(trainer.model)[0]
    adapter.A.data[0, 0] = np.inf  # the next step's loss is not finite
    with pytest.raises(FloatingPointError, match="the weights were not updated"):
        trainer.fit()
    assert (tmp_path / "run" / "ckpt.npz").read_bytes() == saved


def test_load_adapter_rebuilds_the_fine_tuned_model(tmp_path):
    trainer = tuner(tmp_path)
    trainer.fit()
    base = tiny_base()  # the same base weights, without adapters
    load_adapter(base, tmp_path / "run")
    ids = np.array([[3, 1, 4, 1, 5]])
    trainer.model.eval(), base.eval()
    np.testing.assert_array_equal(base(ids)[0].data, trainer.model(ids)[0].data)


def test_a_whole_model_checkpoint_is_not_an_adapter(tmp_path):
    save_checkpoint(tmp_path / "ckpt.npz", Llama(TINY), meta={"model": {"type": "llama"}})
    with pytest.raises(CheckpointError, match="not a LoRA adapter checkpoint"):
        load_adapter(Llama(TINY), tmp_path)


def test_examples_without_a_reply_in_the_window_and_models_without_adapters_are_refused(tmp_path):
    with pytest.raises(ValueError, match="training example 0 has no reply token within block_size 2"):
        FineTuner(tiny_adapted(), examples(3, 0), examples(2, 1), config(tmp_path, block_size=2), pad_id=0)
    with pytest.raises(ValueError, match="no LoRA adapters"):
        FineTuner(Llama(TINY), examples(3, 0), examples(2, 1), config(tmp_path), pad_id=0)


# --- the command --------------------------------------------------------------------------------


def run(capsys, *argv):
    code = main(["finetune", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, said",
    [
        ([], "give --task NAME (a built-in task) or --data FILE (your conversations), one of them"),
        (["--task", "records", "--data", "x.jsonl"], "one of them"),
        (["--task", "records", "--lora-r", "0"], "--lora-r must be a positive integer, got 0"),
        (["--task", "records", "--lora-alpha", "nan"], "--lora-alpha must be a positive number, got nan"),
        (["--task", "records", "--lora-dropout", "1"], "--lora-dropout must be in [0, 1), got 1.0"),
        (["--task", "records", "--targets", "q_proj,"], "--targets must be comma-separated Linear names"),
        (["--task", "records", "--lr", "-1"], "--lr must be a positive number, got -1.0"),
        (["--task", "records", "--eval-examples", "0"], "--eval-examples must be a positive integer, got 0"),
        (["--data", "no/such.jsonl"], "--data no/such.jsonl: no such file"),
        (["--resume", "--task", "records"], "--resume: out-finetune/ckpt.npz does not exist"),
    ],
)
def test_bad_flags_are_one_line_before_the_model_loads(capsys, argv, said, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("gradflow finetune: ") and said in err, err


def test_a_training_checkpoint_is_not_resumed_as_adapters(capsys, tmp_path):
    save_checkpoint(tmp_path / "ckpt.npz", Llama(TINY), meta={"model": {"type": "llama"}})
    code, _, err = run(capsys, "--resume", "--out-dir", str(tmp_path))
    assert code == 2 and "is not a fine-tuning checkpoint" in err


def test_generate_names_the_flag_that_uses_an_adapter_checkpoint(capsys, tmp_path):
    trainer = tuner(tmp_path)
    trainer.fit()
    assert main(["generate", "--checkpoint", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "holds LoRA adapters, not a whole model: use them with --model smollm2 --adapter" in err


def test_adapter_flags_that_cannot_work_are_one_line_before_the_model_loads(capsys, tmp_path):
    assert main(["generate", "--adapter", str(tmp_path), "--prompt", "hi"]) == 2
    assert capsys.readouterr().err == (
        f"gradflow generate: --adapter {tmp_path} adapts a pretrained model: it needs --model smollm2\n"
    )
    save_checkpoint(tmp_path / "ckpt.npz", Llama(TINY), meta={"model": {"type": "llama"}})
    assert main(["chat", "--adapter", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no LoRA adapters for SmolLM2-135M-Instruct" in err
    assert "loading" not in err  # refused before the 98 MB model is read


def test_data_that_is_not_a_regular_file_is_refused(capsys, tmp_path):
    code, _, err = run(capsys, "--data", str(tmp_path), "--out-dir", str(tmp_path / "run"))
    assert code == 2 and err == f"gradflow finetune: --data {tmp_path} is not a regular file\n"
