"""`gradflow train`, `gradflow generate` and `gradflow chat`: language models from the shell.

With no arguments, `gradflow train` trains the char-level "baby GPT" (4 layers, 4 heads, 128 wide,
context 64) on the built-in corpus (the documentation text CPython ships in pydoc_data), prints a
sample at every evaluation, and leaves a checkpoint, metrics.jsonl and loss.png in out/.
`gradflow chat` talks with the pretrained SmolLM2-135M-Instruct, and `gradflow generate --model
smollm2` continues a prompt with it (`--trace` prints each step of the prompt's forward pass).
"""

import contextlib
import hashlib
import math
import stat
import sys
from dataclasses import asdict, fields
from pathlib import Path

from .chat import SMOLLM2_SYSTEM, Chat, chatml
from .checkpoint import CheckpointError, load_checkpoint
from .generate import generate
from .nn import init
from .rng import manual_seed
from .text import BPETokenizer, CharTokenizer, default_corpus, load_text, load_tokenizer, split
from .train import TrainConfig, Trainer, check_config, check_fresh, flag, resume_config

MODEL_DEFAULTS = dict(model="gpt", n_layer=4, n_head=4, n_kv_head=None, n_embd=128, dropout=0.0)
# what each model flag is called in each architecture's config
CONFIG_NAMES = {
    "gpt": dict(n_layer="n_layer", n_head="n_head", n_embd="n_embd", dropout="dropout"),
    "llama": dict(n_layer="n_layer", n_head="n_heads", n_kv_head="n_kv_heads", n_embd="d_model"),
}
# the largest sizes a checkpoint's config may ask for: a crafted file must not make us allocate 60 GiB
LIMITS = dict(vocab_size=1 << 20, block_size=1 << 16, n_layer=1024, n_head=1024, n_heads=1024, n_kv_heads=1024,
              n_embd=1 << 15, d_model=1 << 15, d_ff=1 << 17)  # fmt: skip


def check_model_flags(kind, n_layer, n_head, n_embd, dropout=0.0, n_kv_head=None):
    """Refuse sizes no model can have, naming the flag: a model with no blocks is not a model."""
    for name, value in (("n_layer", n_layer), ("n_head", n_head), ("n_embd", n_embd), ("n_kv_head", n_kv_head)):
        if value is not None and value < 1:
            raise ValueError(f"{flag(name)} must be a positive integer, got {value}")
    if n_embd % n_head:
        raise ValueError(f"--n-embd {n_embd} must be a multiple of --n-head {n_head} (each head gets n_embd / n_head)")
    if kind == "llama" and (n_embd // n_head) % 2:
        raise ValueError(f"--n-embd / --n-head = {n_embd // n_head} must be even for llama (RoPE rotates pairs)")
    if n_kv_head is not None and n_head % n_kv_head:
        raise ValueError(f"--n-head {n_head} must be a multiple of --n-kv-head {n_kv_head}")
    if not (math.isfinite(dropout) and 0 <= dropout < 1):
        raise ValueError(f"--dropout must be in [0, 1), got {dropout}")


def build_model(kind, vocab_size, block_size, n_layer, n_head, n_embd, dropout=0.0, n_kv_head=None):
    """A GPT or Llama-style model of the given size, and its {"type", "config"} description."""
    from models.gpt import GPT, GPTConfig
    from models.llama import Llama, LlamaConfig

    check_model_flags(kind, n_layer, n_head, n_embd, dropout, n_kv_head)
    if kind == "gpt":
        config = GPTConfig(vocab_size, block_size, n_layer, n_head, n_embd, dropout=dropout, bias=False)
        return GPT(config), {"type": "gpt", "config": asdict(config)}
    if kind == "llama":
        d_ff = 32 * round(8 * n_embd / 3 / 32)  # SwiGLU's usual width: 2/3 of 4d, rounded to 32
        config = LlamaConfig(vocab_size, n_layer, n_embd, n_head, n_kv_head or n_head, d_ff)
        return Llama(config), {"type": "llama", "config": asdict(config), "block_size": block_size}
    raise ValueError(f"unknown model {kind!r}: choose gpt or llama")


def model_from_meta(ckpt):
    """Rebuild the (untrained) model a checkpoint describes, checking its description first.

    The sizes are checked against limits, and the shapes the config implies against the arrays in
    the file, before any weight is allocated: a crafted config cannot make us allocate more than
    the file itself holds.
    """
    from models.gpt import GPT, GPTConfig
    from models.llama import Llama, LlamaConfig

    described = ckpt.meta.get("model")
    kinds = {"gpt": (GPT, GPTConfig), "llama": (Llama, LlamaConfig)}
    if not isinstance(described, dict) or described.get("type") not in kinds:
        raise CheckpointError(f"checkpoint {ckpt.path}: model must name its type, gpt or llama, got {described!r}")
    cls, config_cls = kinds[described["type"]]
    given = described.get("config")
    names = {f.name: getattr(f.type, "__name__", f.type) for f in fields(config_cls)}
    if not isinstance(given, dict) or set(given) - set(names):
        raise CheckpointError(f"checkpoint {ckpt.path}: model.config must hold {config_cls.__name__} fields")
    for name, value in given.items():
        kind = {"int": int, "float": (int, float), "bool": bool}[names[name]]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise CheckpointError(f"checkpoint {ckpt.path}: model.config.{name} has the wrong type: {value!r}")
        if names[name] == "int" and not 1 <= value <= LIMITS.get(name, 1 << 20):
            raise CheckpointError(f"checkpoint {ckpt.path}: model.config.{name} = {value} is out of range")
    if described["type"] == "llama" and not _is_size(described.get("block_size")):
        raise CheckpointError(f"checkpoint {ckpt.path}: model.block_size must be a positive integer")
    config = config_cls(**given)
    with init.meta():  # shapes only, no storage
        shapes = {n: p.shape for n, p in cls(config).named_parameters(remove_duplicate=False)}
    saved = {k[len("model/") :]: v.shape for k, v in ckpt.arrays.items() if k.startswith("model/")}
    for name, shape in shapes.items():
        if name not in saved:
            raise CheckpointError(f"checkpoint {ckpt.path}: model/{name} is missing")
        if saved[name] != shape:
            raise CheckpointError(
                f"checkpoint {ckpt.path}: model/{name} has shape {saved[name]} but its config implies {shape}"
            )
    return cls(config)


def _is_size(value):
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= LIMITS["block_size"]


def tokenizer_for(ckpt, model):
    """The checkpoint's tokenizer, checked to speak the model's vocabulary."""
    tokenizer = load_tokenizer(ckpt.meta.get("tokenizer"), source=f"checkpoint {ckpt.path}: tokenizer")
    if tokenizer.vocab_size != model.config.vocab_size:
        raise CheckpointError(
            f"checkpoint {ckpt.path}: its tokenizer has {tokenizer.vocab_size} tokens but the model "
            f"{model.config.vocab_size}"
        )
    return tokenizer


def context_of(meta):
    described = meta["model"]
    return described["config"]["block_size"] if described["type"] == "gpt" else described["block_size"]


def read_data(path):
    """The text of --data: a regular UTF-8 file (a device or a pipe would never end)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"--data {path}: no such file")
    if not stat.S_ISREG(path.stat().st_mode):
        raise ValueError(f"--data {path} is not a regular file")
    return load_text(path)


def fingerprint(text):
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


class Printer:
    """Streams decoded text as tokens arrive, holding back an incomplete multi-byte character."""

    def __init__(self, tokenizer, ids, out=None, skip=()):
        self.tokenizer, self.ids, self.out, self.skip = tokenizer, list(ids), out or sys.stdout, skip
        self.shown = len(tokenizer.decode(self.ids))

    def __call__(self, token):
        if token in self.skip:  # an end-of-turn token is not text to show
            return
        self.ids.append(token)
        text = self.tokenizer.decode(self.ids).rstrip("\ufffd")
        self.out.write(text[self.shown :])
        self.out.flush()
        self.shown = max(self.shown, len(text))


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
    meta = {"model": described, "tokenizer": tokenizer.to_dict(), "data": data, "data_sha256": fingerprint(text)}
    return config, model, tokenizer, text, meta


def _resumed_run(args, given):
    """The run saved in --out-dir, with the flags that may change applied and the others refused."""
    path = Path(given["out_dir"]) / "ckpt.npz"
    if not path.exists():
        raise FileNotFoundError(f"--resume: {path} does not exist; start a new run without --resume")
    ckpt = load_checkpoint(path)
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
    if meta["data_sha256"] is None:  # a checkpoint from before data was fingerprinted
        meta["data_sha256"] = fingerprint(text)
    elif fingerprint(text) != meta["data_sha256"]:
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
    if args.resume:
        config, model, tokenizer, text, meta = _resumed_run(args, given)
    else:
        config, model, tokenizer, text, meta = _fresh_run(args, given)
    train_ids, val_ids = split(tokenizer.encode(text), block_size=config.block_size)
    print(
        f"training a {meta['model']['type']} of {model.num_parameters():,} parameters on "
        f"{len(train_ids):,} tokens ({tokenizer.vocab_size} in the vocabulary) for {config.max_iters} steps; "
        f"writing to {config.out_dir}/",
        flush=True,
    )

    def show_sample(trainer, step):
        prompt = tokenizer.encode(text[: config.block_size // 2])
        ids = generate(trainer.model, prompt, args.sample_tokens, temperature=0.8, seed=step, context=config.block_size)
        sample = tokenizer.decode(ids[len(prompt) :])
        print(f"--- sample at step {step} ---\n{sample}\n---", flush=True)

    on_eval = show_sample if args.sample_tokens else None
    trainer = Trainer(model, train_ids, val_ids, config, meta=meta, on_eval=on_eval, overwrite=args.overwrite)
    if args.resume:
        trainer.resume()
    history = trainer.fit()
    if history:
        last = history[-1]  # the last evaluation: after a Ctrl-C, earlier than the step reached
        val = f"val loss {last['val_loss']:.4f} at step {last['step']}"
        print(f"done at step {trainer.step}: {val}; {config.out_dir}/loss.png")
    return 0


def run_generate(args):
    check_sampling_flags(args)
    if args.model == "smollm2":
        return _generate_smollm2(args)
    ckpt = load_checkpoint(args.checkpoint)
    model = model_from_meta(ckpt)
    ckpt.restore(model)
    model.eval()
    tokenizer = tokenizer_for(ckpt, model)
    return _stream(args, model, tokenizer, args.prompt, context=context_of(ckpt.meta))


def check_sampling_flags(args):
    """Refuse sampling settings that mean nothing, by flag, before the prompt is printed."""
    if args.max_new_tokens < 0:
        raise ValueError(f"--max-new-tokens must be a non-negative integer, got {args.max_new_tokens}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise ValueError(f"--temperature must be a non-negative number (0 is greedy), got {args.temperature}")
    if args.top_k is not None and args.top_k < 1:
        raise ValueError(f"--top-k must be a positive integer, got {args.top_k}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise ValueError(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.seed is not None and args.seed < 0:
        raise ValueError(f"--seed must be a non-negative integer, got {args.seed}")


def _stream(args, model, tokenizer, text, skip=(), **options):
    """Print `text`, then its continuation token by token, sampled as the command's flags say."""
    prompt = tokenizer.encode(text)
    sys.stdout.write(text)
    sampling = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    printer = Printer(tokenizer, prompt, skip=skip)
    try:
        generate(model, prompt, args.max_new_tokens, on_token=printer, **sampling, **options)
    finally:  # an error's line starts on a line of its own, not after the prompt
        sys.stdout.write("\n")
        sys.stdout.flush()
    return 0


def _load_smollm2():
    from models.llama import smollm2_instruct

    print("loading SmolLM2-135M-Instruct ...", file=sys.stderr, flush=True)
    return smollm2_instruct()


def _generate_smollm2(args):
    model, tokenizer = _load_smollm2()
    text = chatml([{"role": "user", "content": args.prompt}]) if args.chat else args.prompt
    if args.trace:
        from models.llama_trace import trace

        trace(model, tokenizer.encode(text), tokenizer)
    ends = (tokenizer.token_id["<|im_end|>"], tokenizer.token_id["<|endoftext|>"])
    return _stream(args, model, tokenizer, text, skip=ends, stop=ends)


def run_chat(args):
    check_sampling_flags(args)
    if sys.stdin is None or sys.stdin.closed:
        raise ValueError("standard input is closed: chat reads your messages from it")
    model, tokenizer = _load_smollm2()
    sampling = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    chat = Chat(model, tokenizer, system=args.system, max_new_tokens=args.max_new_tokens, **sampling)
    tty = sys.stdin.isatty()
    if tty:
        print("Chat with SmolLM2-135M-Instruct. An empty line or Ctrl-D ends; /reset starts over.", file=sys.stderr)
    while True:
        try:
            text = input("you> " if tty else "")
        except (EOFError, KeyboardInterrupt):
            break
        if not text.strip():
            break
        if text.strip() == "/reset":
            chat = Chat(model, tokenizer, system=args.system, max_new_tokens=args.max_new_tokens, **sampling)
            continue
        sys.stdout.write("smollm2> ")
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops this reply, keeps the conversation
            chat.say(text, on_token=Printer(tokenizer, [], skip=(chat.end,)))
        sys.stdout.write("\n")
        sys.stdout.flush()
    return 0


def add_commands(sub):
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
    for f in fields(TrainConfig):
        default = getattr(defaults, f.name)
        if not isinstance(default, bool):
            train.add_argument(flag(f.name), type=type(default), help=f"(default {default})")
    train.add_argument("--sample-tokens", type=int, default=200, help="sample length at each evaluation; 0: none")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run saved in --out-dir (model, tokenizer and data stay; lr, max-iters, batch size, "
        "intervals and processes may change)",
    )
    train.add_argument("--overwrite", action="store_true", help="start a new run over the checkpoint in --out-dir")
    train.add_argument(
        "--detect-anomaly",
        action="store_true",
        help="check every op's output and gradient, naming the first op that makes a NaN or inf (slower)",
    )
    train.set_defaults(run=run_train)

    gen = sub.add_parser("generate", help="sample text from a trained checkpoint, or from SmolLM2")
    gen.add_argument("--checkpoint", default="out", help="a checkpoint file or the directory holding ckpt.npz")
    gen.add_argument("--model", choices=["smollm2"], help="a pretrained model instead of a checkpoint")
    gen.add_argument("--chat", action="store_true", help="with --model: write the prompt as a user's chat turn")
    gen.add_argument("--trace", action="store_true", help="with --model: print each step's shape")
    gen.add_argument("--prompt", default="\n", help="text to continue (default: a new line)")
    add_sampling_flags(gen, max_new_tokens=300, temperature=0.8)
    gen.set_defaults(run=run_generate)

    chat = sub.add_parser("chat", help="talk with SmolLM2-135M-Instruct (fetched once, 98 MB)")
    chat.add_argument("--system", default=SMOLLM2_SYSTEM, help="the system message")
    # greedy by default: a 135M model gets facts right most reliably on its most likely path;
    # the model card's sampling is --temperature 0.2 --top-p 0.9
    add_sampling_flags(chat, max_new_tokens=512, temperature=0.0)
    chat.set_defaults(run=run_chat)


def add_sampling_flags(parser, max_new_tokens, temperature):
    """--max-new-tokens, --temperature, --top-k, --top-p and --seed, with these defaults."""
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    parser.add_argument("--temperature", type=float, default=temperature, help=f"0 is greedy (default {temperature})")
    parser.add_argument("--top-k", type=int)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--seed", type=int)
