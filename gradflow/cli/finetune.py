"""`gradflow finetune`: teach SmolLM2-135M-Instruct a new skill with LoRA adapters, on gradflow's own autograd.

    gradflow finetune --model smollm2 --task records        # a built-in task, graded on held-out examples
    gradflow finetune --model smollm2 --data chats.jsonl    # your conversations ({"messages": [...]} lines)
    gradflow chat --adapter out-finetune                    # talk with the result

With --task, the held-out split is answered by the model before and after fine-tuning and graded
exactly (gradflow.text.tasks); with --data, the last tenth of the examples is held out and its
loss is what is measured. Either way a few held-out prompts are answered before and after, and
out-dir gets the adapters' checkpoint (ckpt.npz, a few MB), metrics.jsonl, loss.png and
report.json.
"""

import hashlib
import json
import math
import sys
from dataclasses import asdict, fields
from pathlib import Path

from gradflow.cli.build import SMOLLM2, data_file, load_smollm2
from gradflow.engine.files import write_atomically
from gradflow.engine.rng import manual_seed
from gradflow.inference import reply
from gradflow.nn import lora
from gradflow.text.chat_data import chat_example, load_examples, read_chat_jsonl
from gradflow.text.tasks import TASKS, get_task
from gradflow.training.checkpoint import load_checkpoint
from gradflow.training.finetune import FineTuner
from gradflow.training.run_lock import run_lock
from gradflow.training.settings import TrainConfig, check_config, check_fresh, flag, resume_config

# What fine-tuning adapters needs that training a model from scratch does not: a higher learning
# rate (B starts at zero and has few numbers to move), no weight decay (it would pull the adapters
# towards "no change"), longer windows (a conversation is one example), and fewer, shorter evaluations.
DEFAULTS = dict(max_iters=60, batch_size=8, block_size=256, lr=2e-3, min_lr=2e-4, warmup_iters=10,
                weight_decay=0.0, eval_interval=20, eval_iters=4, out_dir="out-finetune")  # fmt: skip
SAMPLES = 3  # held-out prompts shown before and after
MAX_REPLY = 48  # tokens; a right answer takes at most 28, so only a rambling reply is cut short


def run_finetune(args):
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name, None) is not None}
    with run_lock(given.get("out_dir", DEFAULTS["out_dir"]), "gradflow finetune"):
        return _finetune(args, given)


def _finetune(args, given):
    """The run the flags ask for, in an out-dir no other process writes to."""
    if args.resume:
        ckpt = _saved(Path(given.get("out_dir", DEFAULTS["out_dir"])))
        config, changes = resume_config(ckpt.meta.get("train_config"), given, spell=flag)
        check_config(config, spell=flag)
        settings, source = ckpt.meta["lora"], ckpt.meta.get("data")
        _refuse_changes(args, settings, source)
        if source.startswith("task:"):
            args.task = source[len("task:") :]
        else:  # the file, where --data says it is now (a run moved with its data resumes in its new place)
            args.data = args.data or source
        print(f"resuming {ckpt.path} at step {ckpt['step']}" + (f"; changed: {', '.join(changes)}" if changes else ""))
    else:
        config = TrainConfig(**{**DEFAULTS, **given})
        check_config(config, spell=flag)
        settings = _lora_settings(args)
        if (args.task is None) == (args.data is None):
            raise ValueError("give --task NAME (a built-in task) or --data FILE (your conversations), one of them")
        if not args.overwrite:
            check_fresh(config.out_dir)
    if args.eval_examples < 1:
        raise ValueError(f"--eval-examples must be a positive integer, got {args.eval_examples}")
    if args.train_examples < 1:
        raise ValueError(f"--train-examples must be a positive integer, got {args.train_examples}")
    task = get_task(args.task) if args.task else None
    sha256 = data_sha256(args.data) if args.data else None
    if args.resume and ckpt.meta.get("data_sha256") not in (None, sha256):  # None: from before it was recorded
        raise ValueError(
            f"--resume: {args.data} is not the data this run was trained on (its sha256 differs); "
            "pass the original file with --data"
        )
    model, tokenizer = load_smollm2()
    model.fused_loss = True  # the step never forms the (B, T, vocab) logits: the head and the loss are one op
    train, held_out, prompts = _data(args, task, tokenizer)
    source = f"task:{task.name}" if task else str(Path(args.data).resolve())
    manual_seed(config.seed)  # A's initial values, then dropout's masks
    try:
        adapted = lora.apply(model, **settings)  # B = 0: the model still answers as the base model does
    except ValueError as e:  # a name that is no Linear of the model, or one tied to the embedding
        raise ValueError(f"--targets: {str(e).removeprefix('lora.apply: ')}") from None
    report = ckpt.meta.get("report", {}) if args.resume else {}
    if not args.resume:
        report["before"] = _measure(model, tokenizer, task, prompts, "before")
    trainable = sum(p.data.size for p in model.parameters() if p.requires_grad)
    print(
        f"fine-tuning {len(adapted)} adapters (r={settings['r']}, alpha={settings['alpha']}, "
        f"{trainable:,} numbers; the base's {model.num_parameters() - trainable:,} stay frozen) on "
        f"{len(train):,} examples for {config.max_iters} steps; writing to {config.out_dir}/",
        flush=True,
    )
    meta = {"base": SMOLLM2, "data": source, "data_sha256": sha256, "report": report}
    pad_id = tokenizer.token_id["<|endoftext|>"]
    trainer = FineTuner(model, train, held_out, config, pad_id, meta=meta, overwrite=args.overwrite)
    if args.resume:
        trainer.resume()
    history = trainer.fit()
    model.eval()
    report["after"] = _measure(model, tokenizer, task, prompts, "after")
    report["val_loss"] = {"first": history[0]["val_loss"], "last": history[-1]["val_loss"]} if history else None
    trainer.meta["report"] = report
    trainer.save()  # the report joins the checkpoint, beside the adapters it describes
    _write_report(Path(config.out_dir) / "report.json", {"config": asdict(config), "lora": settings, **report})
    _summary(report, config.out_dir)
    return 0


def _saved(out_dir):
    """The adapters' checkpoint --resume continues."""
    path = out_dir / "ckpt.npz"
    if not path.exists():
        raise FileNotFoundError(f"--resume: {path} does not exist; start a new run without --resume")
    ckpt = load_checkpoint(path)
    if not isinstance(ckpt.meta.get("lora"), dict) or not isinstance(ckpt.meta.get("data"), str):
        raise ValueError(f"--resume: {path} is not a fine-tuning checkpoint (gradflow train wrote it?)")
    return ckpt


def _lora_settings(args):
    """The adapters the flags ask for, checked before the model is loaded."""
    r, alpha, dropout = _given(args.lora_r, 8), _given(args.lora_alpha, 16.0), _given(args.lora_dropout, 0.0)
    if isinstance(r, bool) or r < 1:
        raise ValueError(f"--lora-r must be a positive integer, got {r}")
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"--lora-alpha must be a positive number, got {alpha}")
    if not 0 <= dropout < 1:
        raise ValueError(f"--lora-dropout must be in [0, 1), got {dropout}")
    return {"targets": _targets(_given(args.targets, "q_proj,v_proj")), "r": r, "alpha": alpha, "dropout": dropout}


def _targets(text):
    """--targets "q_proj, v_proj" -> ["q_proj", "v_proj"]: the names, sorted, each once."""
    targets = [t.strip() for t in text.split(",")]
    if not all(targets):
        raise ValueError(f"--targets must be comma-separated Linear names like q_proj,v_proj, got {text!r}")
    return sorted(set(targets))


def _given(value, default):
    return default if value is None else value


def _refuse_changes(args, settings, source):
    """On --resume the adapters and the data stay as they were trained (a file's content is compared later)."""
    asked = {"lora_r": "r", "lora_alpha": "alpha", "lora_dropout": "dropout"}
    for name, key in asked.items():
        value = getattr(args, name)
        if value is not None and value != settings[key]:
            raise ValueError(f"{flag(name)} {value} conflicts with the checkpoint, whose adapters have {settings[key]}")
    if args.targets is not None and _targets(args.targets) != settings["targets"]:
        raise ValueError(f"--targets {args.targets} conflicts with the checkpoint's {','.join(settings['targets'])}")
    asked = args.task and f"task:{args.task}"
    if source.startswith("task:"):
        asked = asked or args.data
    if asked and asked != source:  # a data file given again may have moved: its content is compared instead
        raise ValueError(f"--resume: this run was trained on {source}, not {asked}")


def data_sha256(path):
    """The sha256 of --data's bytes: a resumed run must train on the conversations it started with,
    wherever the file is now."""
    return hashlib.sha256(data_file(path).read_bytes()).hexdigest()


def _data(args, task, tokenizer):
    """(train examples, held-out examples, held-out conversations to answer): from the task, or the file."""
    if task:
        train = [chat_example(c["messages"], tokenizer) for c in task.conversations("train", args.train_examples)]
        held_out = task.conversations("held-out", args.eval_examples)
        return train, [chat_example(c["messages"], tokenizer) for c in held_out], held_out
    examples = load_examples(args.data, tokenizer)
    if len(examples) < 2:
        raise ValueError(f"--data {args.data}: one example cannot be split into training and held-out parts")
    cut = len(examples) - max(1, len(examples) // 10)
    chats = read_chat_jsonl(args.data)[cut:] if args.data.endswith(".jsonl") else []
    return examples[:cut], examples[cut:], [{"messages": m} for m in chats[:SAMPLES]]


def _measure(model, tokenizer, task, conversations, when):
    """Answer the held-out prompts (each conversation up to its last reply): a grade for each with a
    task, and a few answers printed beside what was expected."""
    if not conversations:
        return {}
    grades, shown = [], []
    print(f"--- held-out answers, {when} fine-tuning ---", flush=True)
    for i, conversation in enumerate(conversations):
        messages = conversation["messages"]
        last = max(j for j, m in enumerate(messages) if m["role"] == "assistant")
        answer = reply(model, tokenizer, messages[:last], max_new_tokens=MAX_REPLY, temperature=0.0)
        if task:
            grades.append(task.grade(answer, conversation))
            print(f"\r{i + 1}/{len(conversations)} answered", end="", file=sys.stderr, flush=True)
        if len(shown) < SAMPLES:
            expected = messages[last]["content"]
            shown.append({"prompt": messages[last - 1]["content"], "expected": expected, "got": answer})
    if task:
        print(file=sys.stderr)
    for s in shown:
        print(f"  prompt:   {s['prompt']}\n  expected: {s['expected']}\n  got:      {s['got']}\n")
    measured = {"samples": shown}
    if task:
        measured["grades"] = {g: grades.count(g) for g in ("exact", "fields", "wrong")}
        measured["examples"] = len(grades)
        print(f"{when}: {_score(measured)}", flush=True)
    return measured


def _score(measured):
    g, n = measured["grades"], measured["examples"]
    return f"exact {g['exact']}/{n}, right fields in other words {g['fields']}/{n}, wrong {g['wrong']}/{n}"


def _write_report(path, report):
    write_atomically(path, json.dumps(report, indent=1) + "\n")


def _summary(report, out_dir):
    before, after = report.get("before", {}), report["after"]
    if "grades" in after:
        said = f"held-out, before: {_score(before)}\nheld-out, after:  {_score(after)}" if "grades" in before else ""
        print(said or f"held-out, after: {_score(after)}")
    if report.get("val_loss"):
        v = report["val_loss"]
        print(f"held-out loss on the replies: {v['first']:.4f} -> {v['last']:.4f}")
    print(f"adapters in {out_dir}/ckpt.npz; talk with them: gradflow chat --adapter {out_dir}")


def add_command(sub):
    """Register `gradflow finetune`."""
    p = sub.add_parser(
        "finetune",
        help="teach SmolLM2 a skill with LoRA adapters",
        description="Fine-tune SmolLM2-135M-Instruct with LoRA adapters on a built-in task or your conversations.",
    )
    p.add_argument("--model", choices=["smollm2"], default="smollm2", help="the model to adapt (default smollm2)")
    p.add_argument("--task", choices=sorted(TASKS), help="a built-in task, graded exactly on held-out examples")
    p.add_argument("--data", help='a .jsonl of {"messages": [...]} conversations, or a plain text file')
    p.add_argument("--lora-r", type=int, help="the adapters' rank (default 8)")
    p.add_argument("--lora-alpha", type=float, help="the adapters' scale is alpha / r (default 16)")
    p.add_argument("--lora-dropout", type=float, help="dropout on the adapters' input (default 0)")
    p.add_argument("--targets", help="the Linear layers to adapt, by name (default q_proj,v_proj)")
    for f in fields(TrainConfig):
        default = DEFAULTS.get(f.name, f.default)
        if f.name not in ("processes", "detect_anomaly"):
            p.add_argument(flag(f.name), type=type(default), help=f"(default {default})")
    p.add_argument("--train-examples", type=int, default=2000, help="with --task: training conversations made")
    p.add_argument("--eval-examples", type=int, default=40, help="with --task: held-out conversations graded")
    p.add_argument("--resume", action="store_true", help="continue the run saved in --out-dir")
    p.add_argument("--overwrite", action="store_true", help="start a new run over the checkpoint in --out-dir")
    p.set_defaults(run=run_finetune)
