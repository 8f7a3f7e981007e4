"""`gradflow export`: a trained checkpoint as a Hugging Face model folder, for PyTorch and transformers.

    gradflow export --checkpoint out --to hf exported
    # in Python: AutoModelForCausalLM.from_pretrained("exported"), AutoTokenizer.from_pretrained("exported")

The folder holds model.safetensors and config.json (a GPT becomes a GPT2LMHeadModel, a Llama a
LlamaForCausalLM, computing the same logits up to float rounding) and the tokenizer as
tokenizer.json and tokenizer_config.json. A tokenizer that file cannot express is written as
gradflow's own gradflow_tokenizer.json instead, and the command says so. The folder is written
beside its destination and renamed into place, so a failed export leaves nothing half-written.

An export never deletes or replaces what it did not write. A folder that already holds files is
replaced only with --force, and only if it is an earlier export as that export left it: the list
of files in its gradflow_export.json, which every export writes last, and nothing else. A run's
folder (the one exported, or any holding ckpt.npz or a run's lock) is never written into, replaced,
or replaced with a folder holding it, --force or not. Two exports to one folder do not run at once.
"""

import json
import os
import shutil
from pathlib import Path

from gradflow.cli.build import context_of, model_from_meta, tokenizer_for
from gradflow.models.hf import write_hf
from gradflow.text.hf_tokenizer import hf_tokenizer_files
from gradflow.training.checkpoint import load_checkpoint
from gradflow.training.run_lock import NAME as LOCK_NAME
from gradflow.training.run_lock import FolderLock

MARKER = "gradflow_export.json"  # what makes a folder an earlier export: written last, naming every file


def run_export(args):
    out = Path(args.out)
    check_target(out, args.checkpoint, args.force)  # before the model loads
    ckpt = load_checkpoint(args.checkpoint)
    model = model_from_meta(ckpt)
    ckpt.restore(model)
    tokenizer = tokenizer_for(ckpt, model)
    kind = ckpt.meta["model"]["type"]
    weights, config = model.to_hf() if kind == "gpt" else model.to_hf(context=context_of(ckpt.meta))
    try:
        files, missing = hf_tokenizer_files(tokenizer), None
    except ValueError as err:
        files, missing = {"gradflow_tokenizer.json": tokenizer.to_dict()}, str(err)
    written = ["model.safetensors", "config.json", *files]

    def write(folder):
        write_hf(folder, weights, config, files)
        said = {"written_by": "gradflow export", "checkpoint": str(ckpt.path), "files": written}
        (folder / MARKER).write_text(json.dumps(said, indent=1) + "\n")

    with FolderLock(out.parent / f".{out.name}{LOCK_NAME}", out, "gradflow export"):
        check_target(out, args.checkpoint, args.force)  # again: another export may have written it meanwhile
        replace_folder(out, write)
    names = ", ".join(written)
    architecture = config["architectures"][0]
    print(f"exported a {kind} of {model.num_parameters():,} parameters as a {architecture} to {out}/: {names}")
    if missing:
        print(f"tokenizer not exported: {missing}; gradflow's own vocabulary is in {out}/gradflow_tokenizer.json")
    else:
        print(f'load it with transformers: AutoModelForCausalLM.from_pretrained("{out}") and AutoTokenizer')
    return 0


def check_target(out, checkpoint, force):
    """Refuse, in one line, a destination whose replacement would lose something export did not write."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; the export is a folder")
    there, run = out.resolve(), Path(checkpoint).resolve()
    run = run.parent if run.is_file() else run  # a checkpoint not there is load_checkpoint's to refuse
    for folder in (there, *there.parents):
        if folder == run or _holds_run(folder):
            where = "is a run's folder" if folder == there else f"lies inside the run folder {folder}"
            raise ValueError(f"{out} {where}; an export never writes into a run: choose another folder")
    if there in run.parents:
        raise ValueError(f"{out} holds the run {checkpoint}; an export never replaces a run: choose another folder")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not force:
        raise ValueError(f"{out} already holds files; choose another folder or pass --force to replace an export")
    try:
        written = json.loads((out / MARKER).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        written = None
    if not isinstance(written, list) or not all(isinstance(name, str) for name in written):
        raise ValueError(
            f"{out} holds files gradflow export did not write (no {MARKER} listing them): --force replaces only "
            "an earlier export; choose another folder"
        )
    other = sorted(p.name for p in out.iterdir() if p.name not in (MARKER, *written))
    if other:
        raise ValueError(
            f"{out} holds {other[0]}, which gradflow export did not write: --force replaces only an earlier "
            "export as it was written; choose another folder"
        )


def _holds_run(folder):
    """Whether a run (train's, finetune's) keeps its checkpoint or its lock in `folder`."""
    return (folder / "ckpt.npz").exists() or (folder / LOCK_NAME).exists()


def replace_folder(out, write):
    """Make the folder `out` hold what write(folder) writes, atomically: a sibling is written, then renamed.

    A folder already at `out` is moved aside first and removed once the new one is in place, so a
    failure at any point leaves either the old folder or the new one, never a mixture.
    """
    tmp, old = (out.parent / f".{out.name}.{os.getpid()}.{what}" for what in ("tmp", "old"))
    for leftover in (tmp, old):  # from an export of a process of the same id that was killed
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        write(tmp)
        if out.exists():
            os.replace(out, old)
        try:
            os.replace(tmp, out)
        except OSError:
            if old.exists():
                os.replace(old, out)
            raise
    except OSError as e:  # a full disk, say: name the folder, and say that what was there is untouched
        kept = "what was there is unchanged" if out.exists() else "nothing was written"
        raise OSError(f"could not write {out} ({e.strerror or e}); {kept}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def add_command(sub):
    export = sub.add_parser(
        "export",
        help="write a checkpoint as a Hugging Face model folder (PyTorch, transformers)",
        description="Write a trained checkpoint as a Hugging Face model folder: model.safetensors, config.json "
        "and the tokenizer, which transformers' from_pretrained reads.",
    )
    export.add_argument("--checkpoint", default="out", help="a checkpoint file or the directory holding ckpt.npz")
    export.add_argument("--to", choices=["hf"], required=True, help="the format: hf, a Hugging Face model folder")
    export.add_argument("out", help="the folder to write")
    export.add_argument("--force", action="store_true", help="replace an earlier export in that folder")
    export.set_defaults(run=run_export)
