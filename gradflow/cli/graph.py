"""`gradflow graph`: draw the toy model's loss, or one GPT training step, to .svg, .png or .dot.

An existing file is replaced only with --force.
"""

import sys
from pathlib import Path

from gradflow.engine.rng import generator, manual_seed
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.toy import ToyModel
from gradflow.tools.graph import RANKDIRS, draw_graph, layout_program


def add_command(subparsers):
    """Register `gradflow graph`: draw the toy model's loss or one GPT training step to a file."""
    p = subparsers.add_parser("graph", help="draw a computation graph with values and gradients to .svg/.png/.dot")
    p.add_argument("--model", choices=("toy", "gpt"), default="toy", help="what to draw (default: toy)")
    p.add_argument("--toy", dest="model", action="store_const", const="toy", help="the worked walk-through's toy model")
    p.add_argument("--n-layer", type=int, default=1, metavar="N", help="transformer blocks of the GPT (default: 1)")
    p.add_argument("-o", "--output", default="graph.svg", metavar="PATH", help="file to write: .svg, .png, .dot or .gv")
    p.add_argument("--force", action="store_true", help="replace the output file if it exists")
    p.add_argument("--no-values", dest="values", action="store_false", help="do not print tensors' data")
    p.add_argument("--no-grads", dest="grads", action="store_false", help="do not print gradients")
    p.add_argument(
        "--rankdir",
        choices=RANKDIRS,
        default="TB",
        help="TB: top to bottom (this command's default), LR: left to right (draw_graph's default)",
    )
    p.add_argument("--max-elements", type=int, default=20, metavar="N", help="print tensors of at most N elements")
    p.add_argument(
        "--modules",
        choices=("none", "cluster", "collapse"),
        help="group ops by module (default: none for the toy, collapse for the GPT)",
    )
    p.set_defaults(run=run)


def _toy_step():
    """The walk-through's loss for "the cat sat" -> "on", each printed quantity named and its gradient kept."""
    model = ToyModel()
    ids = model.encode("the cat sat")
    out = model.walkthrough(ids, target=model.config.vocab.index("on"))
    for t in out.values():
        t.retain_grad()
    out["loss"].backward()
    return out["loss"], model, {t: name for name, t in out.items()}


def _gpt_step(n_layer):
    """One training step (forward and backward) of a small GPT on random tokens."""
    if n_layer < 1:
        raise ValueError(f"--n-layer must be at least 1, got {n_layer}")
    manual_seed(0)
    config = GPTConfig(vocab_size=32, block_size=8, n_layer=n_layer, n_head=2, n_embd=16)
    model = GPT(config)
    ids = generator().integers(0, config.vocab_size, (2, 9))
    _, loss = model(ids[:, :-1], ids[:, 1:])
    loss.backward()
    return loss, model, {loss: "loss"}


def run(args):
    """`gradflow graph`: build the chosen computation, draw it, write it; errors as one line."""
    if Path(args.output).exists() and not args.force:
        raise FileExistsError(f"--output {args.output} exists; add --force to replace it")
    mode = args.modules or ("collapse" if args.model == "gpt" else "none")
    try:
        loss, model, names = _gpt_step(args.n_layer) if args.model == "gpt" else _toy_step()
        graph = draw_graph(
            loss,
            model=model,
            values=args.values,
            grads=args.grads,
            rankdir=args.rankdir,
            max_elements=args.max_elements,
            modules=None if mode == "none" else mode,
            names=names,
        )
        path = graph.write(args.output)
    except RuntimeError as e:  # no layout program: one line, as the other commands' failures (bad input: cli.main)
        print(f"gradflow graph: {e}", file=sys.stderr)
        return 1
    drawn = "" if path.suffix.lower() in (".dot", ".gv") else f" (laid out by {Path(layout_program()).name})"
    print(f"wrote {path}{drawn}")
    return 0
