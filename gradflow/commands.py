"""`gradflow train`, `gradflow generate` and `gradflow chat`: language models from the shell.

With no arguments, `gradflow train` trains the char-level "baby GPT" (4 layers, 4 heads, 128 wide,
context 64) on the built-in corpus (the documentation text CPython ships in pydoc_data), prints a
sample at every evaluation, and leaves a checkpoint, metrics.jsonl and loss.png in out/.
`gradflow chat` talks with the pretrained SmolLM2-135M-Instruct, and `gradflow generate --model
smollm2` continues a prompt with it (`--trace` prints each step of the prompt's forward pass).
"""

import contextlib
import sys
from dataclasses import asdict, fields
from pathlib import Path

from .chat import SMOLLM2_SYSTEM, Chat, chatml
from .checkpoint import load_checkpoint
from .generate import generate
from .rng import manual_seed
from .text import BPETokenizer, CharTokenizer, default_corpus, load_text, load_tokenizer, split
from .train import TrainConfig, Trainer

MODEL_DEFAULTS = dict(model="gpt", n_layer=4, n_head=4, n_kv_head=None, n_embd=128, dropout=0.0)


def build_model(kind, vocab_size, block_size, n_layer, n_head, n_embd, dropout=0.0, n_kv_head=None):
    """A GPT or Llama-style model of the given size, and its {"type", "config"} description."""
    from models.gpt import GPT, GPTConfig
    from models.llama import Llama, LlamaConfig

    if kind == "gpt":
        config = GPTConfig(vocab_size, block_size, n_layer, n_head, n_embd, dropout=dropout, bias=False)
        return GPT(config), {"type": "gpt", "config": asdict(config)}
    if kind == "llama":
        d_ff = 32 * round(8 * n_embd / 3 / 32)  # SwiGLU's usual width: 2/3 of 4d, rounded to 32
        config = LlamaConfig(vocab_size, n_layer, n_embd, n_head, n_kv_head or n_head, d_ff)
        return Llama(config), {"type": "llama", "config": asdict(config), "block_size": block_size}
    raise ValueError(f"unknown model {kind!r}: choose gpt or llama")


def model_from_meta(meta):
    """Rebuild the (untrained) model a checkpoint describes."""
    from models.gpt import GPT, GPTConfig
    from models.llama import Llama, LlamaConfig

    described = meta["model"]
    if described["type"] == "gpt":
        return GPT(GPTConfig(**described["config"]))
    return Llama(LlamaConfig(**described["config"]))


def context_of(meta):
    described = meta["model"]
    return described["config"]["block_size"] if described["type"] == "gpt" else described["block_size"]


def _tokenizer(args, text):
    if args.tokenizer == "char":
        return CharTokenizer(text)
    if args.tokenizer == "bpe":
        return BPETokenizer.train(text, args.vocab_size)
    raise ValueError(f"unknown tokenizer {args.tokenizer!r}: choose char or bpe")


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


def run_train(args):
    if args.resume:
        ckpt = load_checkpoint(Path(args.out_dir or "out"))
        config = TrainConfig(**ckpt["train_config"])
        if args.max_iters is not None:
            config.max_iters = args.max_iters
        meta = {k: ckpt[k] for k in ("model", "tokenizer", "data")}
        tokenizer = load_tokenizer(meta["tokenizer"])
        text = load_text(meta["data"]) if meta["data"] != "built-in" else default_corpus()
        model = model_from_meta(meta)
    else:
        chosen = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name) is not None}
        config = TrainConfig(**chosen)
        manual_seed(config.seed)
        text = load_text(args.data) if args.data else default_corpus()
        tokenizer = _tokenizer(args, text)
        sizes = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in MODEL_DEFAULTS.items()}
        kind = sizes.pop("model")
        model, described = build_model(kind, tokenizer.vocab_size, config.block_size, **sizes)
        meta = {"model": described, "tokenizer": tokenizer.to_dict(), "data": str(args.data or "built-in")}
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

    trainer = Trainer(model, train_ids, val_ids, config, meta=meta, on_eval=show_sample if args.sample_tokens else None)
    if args.resume:
        trainer.resume()
    history = trainer.fit()
    if history:
        last = history[-1]  # the last evaluation: after a Ctrl-C, earlier than the step reached
        val = f"val loss {last['val_loss']:.4f} at step {last['step']}"
        print(f"done at step {trainer.step}: {val}; {config.out_dir}/loss.png")
    return 0


def run_generate(args):
    if args.model == "smollm2":
        return _generate_smollm2(args)
    ckpt = load_checkpoint(args.checkpoint)
    model = model_from_meta(ckpt.meta)
    ckpt.restore(model)
    model.eval()
    tokenizer = load_tokenizer(ckpt["tokenizer"])
    return _stream(args, model, tokenizer, args.prompt, context=context_of(ckpt.meta))


def _stream(args, model, tokenizer, text, skip=(), **options):
    """Print `text`, then its continuation token by token, sampled as the command's flags say."""
    prompt = tokenizer.encode(text)
    sys.stdout.write(text)
    sampling = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    generate(model, prompt, args.max_new_tokens, on_token=Printer(tokenizer, prompt, skip=skip), **sampling, **options)
    sys.stdout.write("\n")
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
    train.add_argument("--tokenizer", choices=["char", "bpe"], default="char")
    train.add_argument("--vocab-size", type=int, default=512, help="for --tokenizer bpe (default 512)")
    train.add_argument("--model", choices=["gpt", "llama"], help="architecture (default gpt)")
    train.add_argument("--n-layer", type=int, help="blocks (default 4)")
    train.add_argument("--n-head", type=int, help="attention heads (default 4)")
    train.add_argument("--n-kv-head", type=int, help="key/value heads, llama only (default: n-head)")
    train.add_argument("--n-embd", type=int, help="width (default 128)")
    train.add_argument("--dropout", type=float, help="(default 0)")
    defaults = TrainConfig()
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        train.add_argument(flag, type=type(getattr(defaults, f.name)), help=f"(default {getattr(defaults, f.name)})")
    train.add_argument("--sample-tokens", type=int, default=200, help="sample length at each evaluation; 0: none")
    train.add_argument("--resume", action="store_true", help="continue the run saved in --out-dir")
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
