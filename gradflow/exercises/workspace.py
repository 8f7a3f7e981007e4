"""A learner's workspace: one Python file per exercise, written from gradflow's own code, then graded.

    02_mul_backward.py     the exercise's text, the imports its solution uses, gradflow's code around
                           the blank (as comments), and the function to write, raising
                           NotImplementedError("TODO ...") until it is written
    .progress.json         each exercise's last result, with the sha256 of the file it was for, and
                           how many of its hints were given

Nothing the learner wrote is ever overwritten: `start` refuses a folder that holds any exercise
file, and the progress file is written atomically beside it.
"""

import hashlib
import json
import os
import secrets
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gradflow.engine import bounded_json
from gradflow.engine.files import write_atomically
from gradflow.exercises import isolation
from gradflow.exercises.catalog import CAPSTONE_TRACKS, EXERCISES
from gradflow.exercises.diagnose import Failed, still_todo
from gradflow.exercises.pieces import given_context

PROGRESS = ".progress.json"
PROGRESS_LIMIT = 1 << 20  # every exercise's record takes a few KB in all


def file_name(exercise):
    return f"{EXERCISES.index(exercise) + 1:02d}_{exercise.name}.py"


def file_text(exercise, solution=False):
    """The file `start` writes for an exercise (with `solution`, gradflow's own code in the blank)."""
    piece = exercise.piece
    number = EXERCISES.index(exercise) + 1
    task = textwrap.fill(exercise.task, 96)
    head = f'''"""Exercise {number} of {len(EXERCISES)} ({exercise.track}): {exercise.title}

Write the body of `{piece.function.__name__}` below: gradflow runs it in place of its own {piece.qualname}
({piece.path}) and grades it.

{task}

Check it, from this folder:  gradflow exercises check {exercise.name}
Stuck?  gradflow exercises hint {exercise.name}  (again for more: the idea, the shape, the formula)
"""
'''
    imports = piece.imports()  # "import ..." lines, sorted, then one "from ... import ..."
    modules = sorted({line for line in imports if line.startswith("import ")} | {"import numpy as np"})
    parts = [head, "\n".join(modules + [line for line in imports if line.startswith("from ")])]
    for owner in exercise.given:
        code = "\n".join(f"#     {line}" if line.strip() else "#" for line in given_context(owner, piece).splitlines())
        parts.append(f"# Given, gradflow's own code around the part you write:\n#\n{code}")
    body = piece.source() if solution else piece.stub(exercise.states)
    return "\n\n".join(p.strip("\n") for p in parts) + "\n\n\n" + body


def start(directory):
    """Write a fresh workspace: one file per exercise. Refuses a folder holding any exercise file."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{directory} is a file, not a folder for the exercises")
    present = [file_name(e) for e in EXERCISES if (directory / file_name(e)).exists()]
    if present:
        raise FileExistsError(
            f"{directory} already holds {len(present)} exercise file{'s' * (len(present) != 1)} ({present[0]}, ...); "
            "start never overwrites your work: check them with `gradflow exercises check --dir "
            f"{directory}`, or start in a new folder"
        )
    directory.mkdir(parents=True, exist_ok=True)
    for exercise in EXERCISES:
        write_atomically(directory / file_name(exercise), file_text(exercise))
    return [directory / file_name(e) for e in EXERCISES]


def restore(exercise, directory):
    """Write one exercise's file again as `start` wrote it: only where it is missing, never over work."""
    path = Path(directory) / file_name(exercise)
    if path.exists():
        raise FileExistsError(f"{path} exists: --restore writes only a missing file, never over your work")
    if not Path(directory).is_dir():
        raise FileNotFoundError(f"{directory} is not a folder: start a workspace with `gradflow exercises start DIR`")
    write_atomically(path, file_text(exercise))
    return path


def located(directory):
    """The workspace `directory` names. From inside a workspace, `--dir ws` names a folder ws/ws that does
    not exist: the folder you are in is meant."""
    directory, here = Path(directory), Path.cwd()
    if directory.exists() or here.name != directory.name or not _holds_files(here):
        return directory
    return here


def _holds_files(directory):
    return any((Path(directory) / file_name(e)).exists() for e in EXERCISES)


def check_has_files(directory):
    """Refuse a folder that holds no exercise file at all: the learner is not where they think."""
    if not _holds_files(directory):
        raise FileNotFoundError(
            f"{directory} holds no exercise files: write them with `gradflow exercises start DIR`, or pass --dir DIR"
        )


def path_of(exercise, directory):
    path = Path(directory) / file_name(exercise)
    if not path.exists():
        raise Failed(
            f"no file {path}: write it again, blank, with "
            f"`gradflow exercises start {directory} --restore {exercise.name}`",
            "missing",
        )
    return path


def load(exercise, directory):
    """The learner's function for the exercise, read from their file and run in this process (the
    capstone's training run; a grade runs it in a process of its own, isolation.py)."""
    path = path_of(exercise, directory)
    return isolation.learner_from(exercise, path, isolation.compiled(path))


def check(exercise, directory, seed=None, timeout=isolation.TIMEOUT):
    """Grade one exercise and remember the result in the progress file: the isolation.Verdict."""
    return check_all([exercise], directory, seed, timeout)[0]


def check_all(exercises, directory, seed=None, timeout=isolation.TIMEOUT):
    """Grade the exercises on inputs drawn from `seed` (a fresh one each when None), each in a process
    of its own (isolation.py), as many at a time as there are cores, and remember each result in the
    progress file: their isolation.Verdicts, in order."""
    seeds = [secrets.randbelow(2**31) if seed is None else seed for _ in exercises]
    # Read the files and write the stubs here, one at a time: only the waits for the processes run in
    # threads (CPython 3.11's ast.parse, which inspect.getsource calls for a stub, is not thread-safe).
    to_run = [_to_run(e, directory, s) for e, s in zip(exercises, seeds)]
    waits = [(e, path, s) for e, (path, _), s in zip(exercises, to_run, seeds) if path]
    with ThreadPoolExecutor(max_workers=max(1, min(len(waits), os.cpu_count() or 1))) as pool:
        graded = iter(list(pool.map(lambda wait: isolation.grade(*wait, timeout), waits)))
    verdicts = [next(graded) if path else verdict for path, verdict in to_run]
    for exercise, verdict in zip(exercises, verdicts):  # one at a time: the progress file is one file
        if (Path(directory) / file_name(exercise)).exists():
            remember(exercise, directory, verdict.ok)
    return verdicts


def _to_run(exercise, directory, seed):
    """(the learner's file, None) when it has something to grade, else (None, its Verdict): no file,
    or the file as `start` wrote it."""
    try:
        path = path_of(exercise, directory)
    except Failed as failed:
        return None, isolation.Verdict(False, failed, seed)
    if path.read_text(errors="replace") == file_text(exercise):
        return None, isolation.Verdict(False, still_todo(exercise.piece.qualname, path), seed)
    return path, None


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def progress(directory):
    """{exercise name: {"sha256", "passed"}} of the last checks (empty for a folder never checked).

    The file is written atomically, so one gradflow cannot read (too large, nested too deep, not JSON,
    not a regular file) was put there by something else: it is refused in one line, never rewritten."""
    path = Path(directory) / PROGRESS
    try:
        saved = bounded_json.read(path, max_bytes=PROGRESS_LIMIT, follow=False)  # gradflow's own: never a link
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise ValueError(
            f"{err}: it is not the progress file gradflow writes (it keeps your hints and passes, never your "
            "work); move it away to start it afresh"
        ) from None
    return saved if isinstance(saved, dict) else {}


def remember(exercise, directory, passed):
    _update(exercise, directory, sha256=digest(Path(directory) / file_name(exercise)), passed=passed)


def _update(exercise, directory, **entries):
    saved = progress(directory)
    last = saved.get(exercise.name)
    saved[exercise.name] = {**(last if isinstance(last, dict) else {}), **entries}
    write_atomically(Path(directory) / PROGRESS, json.dumps(saved, indent=1, sort_keys=True) + "\n")


def next_hint(exercise, directory):
    """(level, the hint): the next of the exercise's hints, the last one again once all were given; the
    level is remembered in the workspace, so that each call says a little more."""
    path_of(exercise, directory)  # the workspace is where the level is kept
    level = min(hints_taken(exercise, directory), len(exercise.hints) - 1)
    _update(exercise, directory, hints=level + 1)
    return level + 1, exercise.hints[level]


def hints_taken(exercise, directory):
    """How many levels of the exercise's hints `hint` has given in this workspace."""
    last = progress(directory).get(exercise.name)
    given = last.get("hints", 0) if isinstance(last, dict) else 0
    return given if isinstance(given, int) and given >= 0 else 0


def status(exercise, directory):
    """'pass', 'fail', 'todo' (the file as start wrote it), 'changed' (edited since its last check) or 'missing'."""
    path = Path(directory) / file_name(exercise)
    if not path.exists():
        return "missing"
    if path.read_text() == file_text(exercise):
        return "todo"
    last = progress(directory).get(exercise.name)
    if not isinstance(last, dict) or last.get("sha256") != digest(path):
        return "changed"
    return "pass" if last.get("passed") else "fail"


def capstone_exercises():
    return [e for e in EXERCISES if e.track in CAPSTONE_TRACKS]


def after_a_pass(exercise, directory):
    """What comes after passing `exercise`, in words: the next exercise, a finished track, the capstone."""
    i = EXERCISES.index(exercise)
    said = []
    if i + 1 < len(EXERCISES):
        after = EXERCISES[i + 1]
        said.append(f"next: exercise {i + 2}, {after.name} ({after.title}) in {file_name(after)}")
    track = [e for e in EXERCISES if e.track == exercise.track]
    if all(e is exercise or status(e, directory) == "pass" for e in track):
        said.append(f"track done: {exercise.track}")
        if exercise.track in CAPSTONE_TRACKS and all(status(e, directory) == "pass" for e in capstone_exercises()):
            said.append(f"the capstone is open: gradflow exercises train --dir {directory}")
    return said
