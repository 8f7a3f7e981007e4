"""`gradflow export`: a trained checkpoint as a Hugging Face model folder, for PyTorch and transformers.

    gradflow export --checkpoint out --to hf exported
    # in Python: AutoModelForCausalLM.from_pretrained("exported"), AutoTokenizer.from_pretrained("exported")

The folder holds model.safetensors and config.json (a GPT becomes a GPT2LMHeadModel, a Llama a
LlamaForCausalLM, computing the same logits up to float rounding) and the tokenizer as
tokenizer.json and tokenizer_config.json. A tokenizer that file cannot express is written as
gradflow's own gradflow_tokenizer.json instead, and the command says so. The folder is written
beside its destination and renamed into place, so a failed export leaves nothing half-written.

An export never deletes or replaces what it did not write. A folder that already holds files is
replaced only with --force, and only if it is an earlier export as that export left it: every export
writes gradflow_export.json last, listing each file it wrote with its size and sha256, and the
folder must hold those regular files with those bytes, and nothing else (a manifest that is a link,
or that names a folder, is refused). A run's folder (the one exported, or any holding ckpt.npz or a
run's lock) is never written into, replaced, or replaced with a folder holding it, --force or not.
Two exports to one folder do not run at once; the temporary folders of an export that was killed
(`.NAME.PID.tmp`, its process gone) are removed by the next one, file by file, only files export writes.
"""

import contextlib
import hashlib
import json
import os
import re
import stat
from pathlib import Path

from gradflow.cli.build import context_of, model_from_meta, tokenizer_for
from gradflow.engine import bounded_json
from gradflow.engine.files import NotAFile, alive, kind_of, write_atomically
from gradflow.models.hf import write_hf
from gradflow.text.hf_tokenizer import hf_tokenizer_files
from gradflow.training.checkpoint import load_checkpoint
from gradflow.training.run_lock import NAME as LOCK_NAME
from gradflow.training.run_lock import FolderLock

MARKER = "gradflow_export.json"  # what makes a folder an earlier export: written last, naming every file
EXPORTED = {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "gradflow_tokenizer.json"}
MARKER_LIMIT = 1 << 16  # a manifest lists a handful of files


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
        listed = [{"name": name, **fingerprint(folder / name)} for name in written]
        said = {"written_by": "gradflow export", "checkpoint": str(ckpt.path), "files": listed}
        write_atomically(folder / MARKER, json.dumps(said, indent=1) + "\n")

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
    written = written_before(out)
    as_written = "--force replaces only an earlier export as it was written; choose another folder"
    for name in sorted(p.name for p in out.iterdir()):
        if name != MARKER and name not in written:
            raise ValueError(f"{out} holds {name}, which gradflow export did not write: {as_written}")
        mode = os.lstat(out / name).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{out}/{name} is {kind_of(mode)}, which gradflow export never writes: {as_written}")
        if name != MARKER and fingerprint(out / name) != written[name]:
            raise ValueError(f"{out}/{name} changed since gradflow export wrote it: {as_written}")


def fingerprint(path):
    """{"size", "sha256"} of the file at `path`: what a manifest records, and --force compares."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
        return {"size": os.fstat(f.fileno()).st_size, "sha256": digest.hexdigest()}


def written_before(out):
    """{name: {"size", "sha256"}} of the files an earlier export wrote in `out`, as its manifest lists them;
    a ValueError in one line for a folder without one that --force may trust."""
    untrusted = "--force replaces only an earlier export; choose another folder"
    try:
        said = bounded_json.read(out / MARKER, max_bytes=MARKER_LIMIT, follow=False)
    except NotAFile as err:  # a link to a listing made elsewhere: never trusted
        raise ValueError(f"{err}: {untrusted}") from None
    except (OSError, ValueError):
        said = None
    files = said.get("files") if isinstance(said, dict) else None
    if not isinstance(files, list):
        raise ValueError(f"{out} holds files gradflow export did not write (no {MARKER} listing them): {untrusted}")
    written = {}
    for entry in files:
        if isinstance(entry, str):
            raise ValueError(
                f"{out}/{MARKER} lists {entry} without its sha256 (an export of an older gradflow): {untrusted}"
            )
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or name not in EXPORTED:  # a subfolder, a file of the user's
            said = str(entry if name is None else name)[:80]
            raise ValueError(f"{out}/{MARKER} lists {said!r}, which gradflow export never writes: {untrusted}")
        if not _is_fingerprint({k: v for k, v in entry.items() if k != "name"}):
            raise ValueError(f"{out}/{MARKER} lists {name} without its size and sha256: {untrusted}")
        written[name] = {"size": entry["size"], "sha256": entry["sha256"]}
    return written


def _is_fingerprint(d):
    return (
        set(d) == {"size", "sha256"}
        and type(d["size"]) is int
        and d["size"] >= 0
        and isinstance(d["sha256"], str)
        and re.fullmatch("[0-9a-f]{64}", d["sha256"]) is not None
    )


def _holds_run(folder):
    """Whether a run (train's, finetune's) keeps its checkpoint or its lock in `folder`."""
    return (folder / "ckpt.npz").exists() or (folder / LOCK_NAME).exists()


def replace_folder(out, write):
    """Make the folder `out` hold what write(folder) writes, atomically: a sibling is written, then renamed.

    A folder already at `out` is moved aside first and removed once the new one is in place, so a
    failure at any point leaves either the old folder or the new one, never a mixture.
    """
    remove_dead_temporaries(out)
    tmp, old = (out.parent / f".{out.name}.{os.getpid()}.{what}" for what in ("tmp", "old"))
    for leftover in (tmp, old):  # from an export of a process of the same id that was killed
        remove_export_files(leftover)
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
        remove_export_files(tmp)
        remove_export_files(old)  # the earlier export, checked by check_target to hold its own files alone


def remove_dead_temporaries(out):
    """Remove the `.NAME.PID.tmp` folders that a killed export to `out` left beside it (their process is gone),
    and the `.NAME.PID.old` ones once `out` is whole again (until then, one may be the only copy)."""
    for leftover in out.parent.glob(f".{out.name}.*.*"):
        pid, _, what = leftover.name[len(out.name) + 2 :].partition(".")
        if pid.isdigit() and not alive(int(pid)) and (what == "tmp" or what == "old" and out.is_dir()):
            remove_export_files(leftover)


def remove_export_files(folder):
    """Remove the files export writes (and their temporaries) from `folder`, then the folder if that
    emptied it: never a subfolder, never a file of another name, never what a link points to (a link in
    its place is removed itself: `.hf.4242.tmp -> ~/models` must not empty ~/models)."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        os.unlink(folder)
    if not stat.S_ISDIR(mode):
        return
    entries = list(os.scandir(folder))
    ours = EXPORTED | {MARKER}
    for entry in entries:
        temporary = re.fullmatch(r"\.(.+)\.\d+\.tmp", entry.name)
        if entry.is_file(follow_symlinks=False) and (entry.name in ours or temporary and temporary[1] in ours):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
    with contextlib.suppress(OSError):  # not empty: something else is there, and stays
        os.rmdir(folder)


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
