"""`gradflow explore`: write an interactive page of one computation, forward and backward, to open offline.

    gradflow explore --toy -o toy.html                        the worked walk-through's loss
    gradflow explore --model gpt --n-layer 1 -o gpt.html      one training step of a small GPT (or llama)
    gradflow explore --checkpoint out --prompt "The" -o run.html     a trained run: its loss on the prompt,
                                                              attention maps and the training scrub
    gradflow explore --model smollm2 --prompt "Hi" -o smol.html      SmolLM2 on a prompt

Each page is the next-token loss of the text, its backward pass with every gradient kept, and the
plain tier's ops (what a learner reads). An existing file is replaced only with --force.
"""

import sys
from pathlib import Path

import numpy as np

from gradflow.cli.build import model_from_meta, tokenizer_for
from gradflow.engine.kernels import use_kernels
from gradflow.engine.rng import generator, manual_seed
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.llama import Llama, LlamaConfig, smollm2_instruct
from gradflow.models.toy import ToyModel
from gradflow.tools.explore import explore
from gradflow.training.checkpoint import load_checkpoint
from gradflow.training.metrics import read_metrics
from gradflow.training.snapshots import explored, read_snapshot, saved


def add_command(subparsers):
    """Register `gradflow explore`."""
    p = subparsers.add_parser("explore", help="write an interactive page to step through forward and backward")
    p.add_argument("--toy", action="store_true", help="the worked walk-through's toy model")
    p.add_argument("--model", choices=("gpt", "llama", "smollm2"), help="a small untrained model, or SmolLM2")
    p.add_argument("--n-layer", type=int, default=1, metavar="N", help="blocks of --model gpt|llama (default: 1)")
    p.add_argument("--checkpoint", metavar="DIR", help="a trained run's directory (or its .npz checkpoint)")
    p.add_argument("--prompt", metavar="TEXT", help="the text, for --checkpoint and --model smollm2")
    p.add_argument("--weight", metavar="NAME", help="with --checkpoint: the parameter the training scrub shows")
    p.add_argument("--max-decompositions", type=int, default=64, metavar="N", help="fused ops opened (default: 64)")
    p.add_argument("-o", "--output", default="explorer.html", metavar="PATH", help="the page (default: explorer.html)")
    p.add_argument("--force", action="store_true", help="replace the output file if it exists")
    p.set_defaults(run=run)


def _check(args):
    given = {"--toy": args.toy, "--model": args.model, "--checkpoint": args.checkpoint}
    chosen = [flag for flag, value in given.items() if value]
    if len(chosen) != 1:
        raise ValueError(f"give one of --toy, --model or --checkpoint (got {', '.join(chosen) or 'none'})")
    needs_prompt = args.checkpoint or args.model == "smollm2"
    if needs_prompt and not args.prompt:
        raise ValueError(f"{chosen[0]} needs --prompt TEXT")
    if args.prompt and not needs_prompt:
        raise ValueError("--prompt is for --checkpoint and --model smollm2")
    if args.n_layer < 1:
        raise ValueError(f"--n-layer must be at least 1, got {args.n_layer}")
    if args.max_decompositions < 0:
        raise ValueError(f"--max-decompositions must be a non-negative integer, got {args.max_decompositions}")
    output = Path(args.output)
    if output.exists() and not args.force:
        raise FileExistsError(f"--output {output} exists; add --force to replace it")
    if not output.parent.is_dir():
        raise FileNotFoundError(f"--output {output}: there is no directory {output.parent}")


def _toy():
    """The walk-through's loss for "the cat sat" -> "on", each printed quantity named."""
    model = ToyModel()
    ids = model.encode("the cat sat")
    out = model.walkthrough(ids, target=model.config.vocab.index("on"))
    names = {t: name for name, t in out.items()}
    title = "toy model: the cat sat -> on"
    return dict(root=out["loss"], model=model, names=names, tokens=["the", "cat", "sat"], title=title)


def _small(kind, n_layer):
    """One training step's loss of a small untrained GPT or Llama on random tokens."""
    manual_seed(0)
    if kind == "gpt":
        model = GPT(GPTConfig(vocab_size=32, block_size=8, n_layer=n_layer, n_head=2, n_embd=16))
    else:
        model = Llama(LlamaConfig(vocab_size=32, n_layer=n_layer, d_model=16, n_heads=2, n_kv_heads=1, d_ff=32))
    ids = generator().integers(0, 32, (1, 9))
    _, loss = model(ids[:, :-1], ids[:, 1:])
    tokens = [str(i) for i in ids[0, :-1]]
    title = f"{kind}, {n_layer} layer{'s' * (n_layer > 1)}: one training step"
    return dict(root=loss, model=model, names={loss: "loss"}, tokens=tokens, title=title)


def _prompt_loss(model, tokenizer, prompt, title):
    """The next-token loss of the prompt: each token predicted from the ones before it."""
    ids = np.array(tokenizer.encode(prompt))
    if len(ids) < 2:
        raise ValueError(f"--prompt {prompt!r} is {len(ids)} token(s); the loss needs at least 2")
    _, loss = model(ids[None, :-1], ids[None, 1:])
    tokens = [tokenizer.decode([int(i)]) for i in ids[:-1]]
    return dict(root=loss, model=model, names={loss: "loss"}, tokens=tokens, title=title)


def _snapshots(directory, weight, ckpt):
    """{step: {weight: array}} from the run's weight snapshots (training/snapshots.py) and from its checkpoint
    at the checkpoint's step; and the parameters held by snapshots that do not hold `weight` (None if none)."""
    shots, others = {}, set()
    for step, path in saved(directory).items():
        arrays = read_snapshot(path)
        if weight in arrays:
            shots[step] = {weight: arrays[weight]}
        else:
            others |= set(arrays)
    if isinstance(ckpt.meta.get("step"), int) and f"model/{weight}" in ckpt.arrays:
        shots.setdefault(ckpt.meta["step"], {weight: ckpt.arrays[f"model/{weight}"]})
    return shots, sorted(others) or None


def _run_name(path):
    """The run's name: its folder's (a checkpoint file's folder), never a path with the user's home in it."""
    path = Path(path).resolve()
    return (path if path.is_dir() else path.parent).name or str(path)


def _checkpoint(path, prompt, weight):
    ckpt = load_checkpoint(path)
    model = model_from_meta(ckpt)
    ckpt.restore(model)
    tokenizer = tokenizer_for(ckpt, model)
    parameters = dict(model.named_parameters())
    weight = weight or explored(parameters.items())
    if weight not in parameters:
        raise ValueError(
            f"--weight {weight!r} is not a parameter of the model; for example {explored(parameters.items())}"
        )
    directory, name = Path(path) if Path(path).is_dir() else Path(path).parent, _run_name(path)
    numbered = read_metrics(directory / "metrics.jsonl", numbered=True)
    snapshots, others = _snapshots(directory, weight, ckpt)
    training = {
        "run": name,
        "metrics": [record for _, record in numbered],
        "lines": [number for number, _ in numbered],  # so that the page names where a NaN came from
        "source": f"{name}/metrics.jsonl",
        "snapshots": snapshots,
        "weight": weight,
        "others": others,
    }
    return dict(_prompt_loss(model, tokenizer, prompt, _titled(name, prompt)), training=training)


def _titled(name, prompt):
    """The page's title: what ran, and on which text (in quotes, as typed)."""
    return f"{name}: \u201c{prompt}\u201d"


def run(args):
    """`gradflow explore`: build the computation in the plain tier, explore it, write the page."""
    _check(args)
    with use_kernels("plain"):
        if args.toy:
            what = _toy()
        elif args.checkpoint:
            what = _checkpoint(args.checkpoint, args.prompt, args.weight)
        elif args.model == "smollm2":
            print("loading SmolLM2-135M-Instruct ...", file=sys.stderr, flush=True)
            model, tokenizer = smollm2_instruct()
            what = _prompt_loss(model, tokenizer, args.prompt, _titled("SmolLM2-135M-Instruct", args.prompt))
        else:
            what = _small(args.model, args.n_layer)
        page = explore(max_decompositions=args.max_decompositions, **what)
    path = page.write(args.output, force=args.force)
    print(f"wrote {path} ({page.size / 1e6:.2f} MB): open it in a browser")
    return 0
