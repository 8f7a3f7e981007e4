"""`gradflow train`: train a GPT (or Llama-style) model on a text file, or continue a saved run.

With no arguments it trains the char-level "baby GPT" (4 layers, 4 heads, 128 wide, context 64)
on the built-in corpus (the documentation text CPython ships in pydoc_data), prints a sample at
every evaluation, and leaves a checkpoint, metrics.jsonl and loss.png in out/.

On more cores or machines, each step's batch is shared out among MPI ranks: `gradflow train
--processes N ...` runs `mpiexec -n N python -m gradflow train ... --distributed`, and each rank runs
the command with --distributed; gradflow/training/mpi.py runs both sides. Rank 0 alone prints; an
error on any rank ends them all, in one line that names the rank.
"""

import functools
import hashlib
import sys
from dataclasses import fields
from pathlib import Path

from gradflow.cli.build import (
    CONFIG_NAMES,
    MODEL_DEFAULTS,
    build_model,
    check_model_flags,
    data_file,
    model_from_meta,
    tokenizer_for,
)
from gradflow.engine.rng import manual_seed
from gradflow.fast.compiled import describe as describe_kernels
from gradflow.inference import generate
from gradflow.text import BPETokenizer, CharTokenizer, default_corpus, load_text, split
from gradflow.training.checkpoint import load_checkpoint
from gradflow.training.mpi import as_rank, launch, launched, mpiexec
from gradflow.training.run_lock import run_lock
from gradflow.training.settings import TrainConfig, check_config, check_fresh, check_parallel, flag, resume_config
from gradflow.training.trainer import Trainer


def read_data(path):
    """The text of --data: a regular UTF-8 file."""
    return load_text(data_file(path))


def corpus_digest(text):
    """The sha256 of a corpus: a resumed run must train on the text it started with."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _tokenizer(args, text):
    if args.tokenizer == "bpe":
        vocab_size = 512 if args.vocab_size is None else args.vocab_size
        if vocab_size < 256:
            raise ValueError(f"--vocab-size must be at least 256 (one token per byte), got {vocab_size}")
        return BPETokenizer.train(text, vocab_size)
    if args.vocab_size is not None:
        raise ValueError("--vocab-size is for --tokenizer bpe: a char tokenizer's vocabulary is the text's characters")
    return CharTokenizer(text)


def _fresh_run(args, given):
    """A new run: every setting checked before any work, and no checkpoint in the way."""
    config = TrainConfig(**given)
    check_config(config, spell=flag)
    if args.sample_tokens < 0:
        raise ValueError(f"--sample-tokens must be a non-negative integer, got {args.sample_tokens}")
    sizes = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in MODEL_DEFAULTS.items()}
    kind = sizes.pop("model")
    check_model_flags(kind, **sizes)
    if not args.overwrite:
        check_fresh(config.out_dir)
    manual_seed(config.seed)
    text = read_data(args.data) if args.data else default_corpus()
    tokenizer = _tokenizer(args, text)
    model, described = build_model(kind, tokenizer.vocab_size, config.block_size, **sizes)
    data = str(Path(args.data).resolve()) if args.data else "built-in"
    meta = {"model": described, "tokenizer": tokenizer.to_dict(), "data": data, "data_sha256": corpus_digest(text)}
    return config, model, tokenizer, text, meta


def _resumed_run(args, given):
    """The run saved in --out-dir, with the flags that may change applied and the others refused."""
    ckpt = _saved(given)
    path = ckpt.path
    model = model_from_meta(ckpt)
    described = ckpt.meta["model"]
    for name, config_name in CONFIG_NAMES[described["type"]].items():
        value, saved = getattr(args, name), described["config"][config_name]
        if value is not None and value != saved:
            raise ValueError(f"{flag(name)} {value} conflicts with the checkpoint, whose model has {saved}")
    if args.model is not None and args.model != described["type"]:
        raise ValueError(f"--model {args.model} conflicts with the checkpoint, which holds a {described['type']}")
    tokenizer = tokenizer_for(ckpt, model)
    if args.tokenizer is not None and args.tokenizer != tokenizer.type_name:
        raise ValueError(f"--tokenizer {args.tokenizer} conflicts with the checkpoint's, {tokenizer.type_name}")
    if args.vocab_size is not None and args.vocab_size != tokenizer.vocab_size:
        raise ValueError(f"--vocab-size {args.vocab_size} conflicts with the checkpoint's {tokenizer.vocab_size}")
    config, changes = resume_config(ckpt.meta.get("train_config"), given, spell=flag)
    check_config(config, spell=flag)
    meta = {k: ckpt.meta.get(k) for k in ("model", "tokenizer", "data", "data_sha256")}
    if args.data:
        meta["data"] = str(Path(args.data).resolve())
    text = default_corpus() if meta["data"] == "built-in" else read_data(meta["data"])
    if meta["data_sha256"] is None:  # a checkpoint from before the data's digest was kept
        meta["data_sha256"] = corpus_digest(text)
    elif corpus_digest(text) != meta["data_sha256"]:
        raise ValueError(
            f"--resume: the text in {meta['data']} is not the text this run was trained on "
            "(its sha256 differs); pass the original file with --data"
        )
    step = ckpt.meta.get("step")
    print(f"resuming {path} at step {step}" + (f"; changed: {', '.join(changes)}" if changes else ""), flush=True)
    return config, model, tokenizer, text, meta


def run_train(args):
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name) is not None}
    given["out_dir"] = given.get("out_dir", TrainConfig.out_dir)
    given["detect_anomaly"] = args.detect_anomaly or None
    given = {k: v for k, v in given.items() if v is not None}
    if args.distributed:  # one of the MPI ranks (training/mpi.py)
        prepare = functools.partial(_prepare, args, given, distributed=True)
        return as_rank(given.get("processes", 1), given["out_dir"], prepare, _finish)
    processes = _planned(args, given).processes
    if processes > 1:  # mpiexec starts the ranks, each running this command with --distributed
        command = [mpiexec(), "-n", str(processes), sys.executable, "-m", "gradflow", "train", *_flags(args)]
        return launched(launch([*command, "--distributed"]), given["out_dir"])
    with run_lock(given["out_dir"], "gradflow train"):
        return _finish(_prepare(args, given))


def _planned(args, given):
    """The run's TrainConfig as the flags (and, resuming, the checkpoint) make it, checked."""
    if args.resume:
        config, _ = resume_config(_saved(given).meta.get("train_config"), given, spell=flag)
    else:
        config = TrainConfig(**given)
    check_config(config, spell=flag)
    check_parallel(config)
    return config


def _saved(given):
    """The checkpoint --resume continues."""
    path = Path(given["out_dir"]) / "ckpt.npz"
    if not path.exists():
        raise FileNotFoundError(f"--resume: {path} does not exist; start a new run without --resume")
    return load_checkpoint(path)


def _flags(args):
    """The command line that gives `args` again: every train flag is named after its destination."""
    flags = []
    for name, value in vars(args).items():
        if name in ("command", "run") or value is None or value is False:
            continue
        flags += [flag(name)] if value is True else [flag(name), str(value)]
    return flags


def _prepare(args, given, distributed=False):
    """The Trainer of the run the flags ask for: a fresh one, or the one saved in --out-dir."""
    if args.resume:
        config, model, tokenizer, text, meta = _resumed_run(args, given)
    else:
        config, model, tokenizer, text, meta = _fresh_run(args, given)
    train_ids, val_ids = split(tokenizer.encode(text), block_size=config.block_size)
    print(
        f"training a {meta['model']['type']} of {model.num_parameters():,} parameters on "
        f"{len(train_ids):,} tokens ({tokenizer.vocab_size} in the vocabulary) for {config.max_iters} steps; "
        f"writing to {config.out_dir}/; kernels: {describe_kernels()}",
        flush=True,
    )

    def show_sample(trainer, step):
        prompt = tokenizer.encode(text[: config.block_size // 2])
        ids = generate(trainer.model, prompt, args.sample_tokens, temperature=0.8, seed=step, context=config.block_size)
        sample = tokenizer.decode(ids[len(prompt) :])
        print(f"--- sample at step {step} ---\n{sample}\n---", flush=True)

    on_eval = show_sample if args.sample_tokens else None
    trainer = Trainer(
        model, train_ids, val_ids, config, meta=meta, on_eval=on_eval, overwrite=args.overwrite, distributed=distributed
    )
    if args.resume:
        trainer.resume()
    return trainer


def _finish(trainer):
    """Train, and say where the run ended."""
    history = trainer.fit()
    if history:
        last = history[-1]  # the last evaluation: after a Ctrl-C, earlier than the step reached
        val = f"val loss {last['val_loss']:.4f} at step {last['step']}"
        print(f"done at step {trainer.step}: {val}; {trainer.config.out_dir}/loss.png")
    return 0


def add_command(sub):
    train = sub.add_parser(
        "train",
        help="train a small language model on text",
        description="Train a GPT (or Llama-style) model on a text file, or on the built-in corpus.",
    )
    train.add_argument("--data", help="a UTF-8 text file (default: the built-in corpus)")
    train.add_argument("--tokenizer", choices=["char", "bpe"], help="(default char)")
    train.add_argument("--vocab-size", type=int, help="for --tokenizer bpe (default 512)")
    train.add_argument("--model", choices=["gpt", "llama"], help="architecture (default gpt)")
    train.add_argument("--n-layer", type=int, help="blocks (default 4)")
    train.add_argument("--n-head", type=int, help="attention heads (default 4)")
    train.add_argument("--n-kv-head", type=int, help="key/value heads, llama only (default: n-head)")
    train.add_argument("--n-embd", type=int, help="width (default 128)")
    train.add_argument("--dropout", type=float, help="(default 0)")
    defaults = TrainConfig()
    said = {"processes": "MPI ranks sharing each batch; more than 1 runs this command under mpiexec "}
    for f in fields(TrainConfig):
        default = getattr(defaults, f.name)
        if not isinstance(default, bool):
            train.add_argument(flag(f.name), type=type(default), help=f"{said.get(f.name, '')}(default {default})")
    train.add_argument("--sample-tokens", type=int, default=200, help="sample length at each evaluation; 0: none")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run saved in --out-dir (model, tokenizer and data stay; lr, max-iters, batch size, "
        "intervals and processes may change)",
    )
    train.add_argument("--overwrite", action="store_true", help="start a new run over the checkpoint in --out-dir")
    train.add_argument(
        "--distributed",
        action="store_true",
        help="run as one rank of an MPI job: mpiexec -n N gradflow train --distributed ... (--processes N "
        "starts that job itself; mpiexec -f hosts spreads it over machines)",
    )
    train.add_argument(
        "--detect-anomaly",
        action="store_true",
        help="check every op's output and gradient, naming the first op that makes a NaN or inf (slower)",
    )
    train.set_defaults(run=run_train)
