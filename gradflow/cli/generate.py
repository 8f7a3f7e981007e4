"""`gradflow generate` and `gradflow chat`: sample from a trained checkpoint, or talk with SmolLM2.

`gradflow chat` talks with the pretrained SmolLM2-135M-Instruct, and `gradflow generate --model
smollm2` continues a prompt with it; `--adapter DIR` gives either one the LoRA adapters that
`gradflow finetune` trained. `--trace` first prints the prompt's tokens, every step of its
forward pass with shapes and numbers, and one KV-cached decode step (models/trace.py), for a
checkpoint as for SmolLM2; with `--chat`, also which tokens the chat template added.
"""

import contextlib
import math
import sys
import warnings

from gradflow.cli.build import SMOLLM2_CONTEXT, context_of, load_smollm2, model_from_meta, tokenizer_for
from gradflow.inference import SMOLLM2_SYSTEM, Chat, chatml, generate
from gradflow.inference.generate import beyond_context
from gradflow.models.trace import trace
from gradflow.training.checkpoint import load_checkpoint

TRACE_HELP = (
    "first print the prompt's tokens, each step of its forward pass (shapes, norms, first numbers) and one "
    "KV-cached decode step; with --chat, which tokens the chat template added"
)


ADAPTER_HELP = "a directory `gradflow finetune` wrote: its LoRA adapters change SmolLM2"


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


def run_generate(args):
    check_sampling_flags(args)
    check_flag_combinations(args)
    if args.model == "smollm2":
        return _generate_smollm2(args)
    ckpt = load_checkpoint(args.checkpoint or "out")
    model = model_from_meta(ckpt)
    ckpt.restore(model)
    model.eval()
    tokenizer = tokenizer_for(ckpt, model)
    context = context_of(ckpt.meta)
    if args.trace:
        _trace(model, tokenizer, args.prompt, context)
    return _stream(args, model, tokenizer, args.prompt, context=context)


def check_flag_combinations(args):
    """Refuse a model and a checkpoint at once, --chat without the chat model, and a trace of nothing."""
    if args.model is not None and args.checkpoint is not None:
        raise ValueError(f"--model {args.model} and --checkpoint {args.checkpoint}: give one of them, not both")
    if args.adapter is not None and args.model is None:
        raise ValueError(f"--adapter {args.adapter} adapts a pretrained model: it needs --model smollm2")
    if args.chat and args.model is None:
        raise ValueError("--chat writes the prompt in SmolLM2's chat template: it needs --model smollm2")
    if args.trace and not args.prompt and not args.chat:
        raise ValueError("--trace needs a prompt of at least one token, got --prompt ''")


def _trace(model, tokenizer, text, context=None, chat=None):
    """Print the trace of `text`'s tokens and one decode step, then a blank line before the generation."""
    ids = tokenizer.encode(text)
    if context is not None and len(ids) + 1 > context:
        raise ValueError(
            f"--trace: --prompt is {len(ids)} tokens; with the decode step's token it must fit the model's "
            f"context of {context}"
        )
    trace(model, ids, tokenizer, chat=chat)
    print(flush=True)


@contextlib.contextmanager
def warnings_in_one_line(command):
    """Show each warning raised inside as a line of its own, `gradflow <command>: <message>`, when it is
    raised: the line begun on stdout (a reply's "smollm2> ") goes on after it."""

    def show(message, *_, **__):
        print(flush=True)
        print(f"gradflow {command}: {message}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        yield


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
    prompt = tokenizer.encode(text).tolist()
    context = options.get("context")
    if context is not None and len(prompt) > context:  # said before the prompt is printed, then cut as generate would
        print(f"gradflow {args.command}: {beyond_context(len(prompt), context)}", file=sys.stderr, flush=True)
        prompt = prompt[-context:]
    sys.stdout.write(text)
    sampling = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    printer = Printer(tokenizer, prompt, skip=skip)
    try:
        generate(model, prompt, args.max_new_tokens, on_token=printer, **sampling, **options)
    finally:  # an error's line starts on a line of its own, not after the prompt
        sys.stdout.write("\n")
        sys.stdout.flush()
    return 0


def _generate_smollm2(args):
    model, tokenizer = load_smollm2(args.adapter)
    messages = [{"role": "user", "content": args.prompt}]
    text = chatml(messages) if args.chat else args.prompt
    if args.trace:
        _trace(model, tokenizer, text, SMOLLM2_CONTEXT, chat=messages if args.chat else None)
    ends = (tokenizer.token_id["<|im_end|>"], tokenizer.token_id["<|endoftext|>"])
    return _stream(args, model, tokenizer, text, skip=ends, stop=ends, context=SMOLLM2_CONTEXT)


def run_chat(args):
    check_sampling_flags(args)
    if sys.stdin is None or sys.stdin.closed:
        raise ValueError("standard input is closed: chat reads your messages from it")
    model, tokenizer = load_smollm2(args.adapter)
    sampling = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    sampling |= dict(context=SMOLLM2_CONTEXT, max_new_tokens=args.max_new_tokens)
    chat = Chat(model, tokenizer, system=args.system, **sampling)
    tty = sys.stdin.isatty()
    if tty:
        adapted = f", adapted by {args.adapter}" if args.adapter else ""
        said = f"Chat with SmolLM2-135M-Instruct{adapted}. An empty line or Ctrl-D ends; /reset starts over."
        print(said, file=sys.stderr)
    while True:
        try:
            text = input("you> " if tty else "")
        except (EOFError, KeyboardInterrupt):
            break
        if not text.strip():
            break
        if text.strip() == "/reset":
            chat = Chat(model, tokenizer, system=args.system, **sampling)
            continue
        sys.stdout.write("smollm2> ")
        with contextlib.suppress(KeyboardInterrupt), warnings_in_one_line("chat"):  # Ctrl-C: this reply stops
            chat.say(text, on_token=Printer(tokenizer, [], skip=(chat.end,)))
        sys.stdout.write("\n")
        sys.stdout.flush()
    return 0


def add_command(sub):
    """Register `gradflow generate` and `gradflow chat`."""
    gen = sub.add_parser("generate", help="sample text from a trained checkpoint, or from SmolLM2")
    gen.add_argument("--checkpoint", help="a checkpoint file or the directory holding ckpt.npz (default: out)")
    gen.add_argument("--model", choices=["smollm2"], help="a pretrained model instead of a checkpoint")
    gen.add_argument("--chat", action="store_true", help="with --model: write the prompt as a user's chat turn")
    gen.add_argument("--adapter", help=ADAPTER_HELP)
    gen.add_argument("--trace", action="store_true", help=TRACE_HELP)
    gen.add_argument("--prompt", default="\n", help="text to continue (default: a new line)")
    add_sampling_flags(gen, max_new_tokens=300, temperature=0.8)
    gen.set_defaults(run=run_generate)

    chat = sub.add_parser("chat", help="talk with SmolLM2-135M-Instruct (fetched once, 98 MB)")
    chat.add_argument("--system", default=SMOLLM2_SYSTEM, help="the system message")
    chat.add_argument("--adapter", help=ADAPTER_HELP)
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
