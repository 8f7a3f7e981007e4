"""Each exercise graded in a process of its own, which sends back a verdict and nothing else.

    parent (grade)                              child (main, `python -m gradflow.exercises.isolation`)
    a fresh secret, a pipe for the verdict  ->  reads the secret and the request, closes stdin
                                                loads gradflow, the check and the file's imports
                                                seal.install: stand-ins, the hook, the snapshot
                                                runs the learner's file, then the check
    one line: secret, pass or not, message  <-  the hook writes it, once, when main asks

The parent believes a verdict only if it is the one line the pipe carried and it holds the secret, so
a file that exits early, prints "pass", writes to the pipe or hangs never passes: each of these is a
failure, in one line naming the exercise. The child is bounded: a time limit (the parent kills it), a
memory limit and a limit on what it prints (the kernel enforces both), one thread of BLAS.
"""

import ast
import builtins
import importlib
import importlib.util
import json
import os
import resource
import secrets
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

from gradflow.exercises import seal
from gradflow.exercises.catalog import find
from gradflow.exercises.checks import VERIFY, Learner
from gradflow.exercises.diagnose import Failed, learner_error

TIMEOUT = 60.0  # seconds for one exercise: every check takes under 2 s on a laptop core
MEMORY = 3 << 30  # bytes of address space: numpy and gradflow take about 0.5 GiB of it
PRINTED = 1 << 20  # bytes the learner's file may print
SHOWN = 4000  # characters of what it printed that the learner is shown


class Verdict:
    """What grading one exercise found: passed, what was checked or what is wrong (a Failed), the
    seed its inputs were drawn from, and what the learner's code printed."""

    def __init__(self, ok, said, seed, printed=""):
        self.ok, self.said, self.seed, self.printed = ok, said, seed, printed


def grade(exercise, path, seed, timeout=TIMEOUT):
    """Grade the learner's file `path` for `exercise` in a process of its own: a Verdict."""
    secret = secrets.token_hex(16)
    read_end, write_end = os.pipe()
    request = json.dumps({"exercise": exercise.name, "path": str(Path(path).resolve()), "seed": seed})
    environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "GRADFLOW_KERNELS": "plain"}
    environment |= {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    with tempfile.TemporaryFile() as printed:
        child = subprocess.Popen(
            [sys.executable, "-m", "gradflow.exercises.isolation", str(write_end), str(timeout)],
            stdin=subprocess.PIPE, stdout=printed, stderr=subprocess.STDOUT, pass_fds=(write_end,),
            cwd=Path(path).parent, env=environment,
        )  # fmt: skip
        os.close(write_end)
        received = []
        reader = threading.Thread(target=_read_into, args=(read_end, received), daemon=True)
        reader.start()
        try:
            child.stdin.write(f"{secret}\n{request}\n".encode())
            child.stdin.close()
        except BrokenPipeError:  # the child is already gone: its exit status says why
            pass
        try:
            child.wait(timeout)
            stopped = False
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            stopped = True
        reader.join()
        os.close(read_end)
        printed.seek(0)
        shown = printed.read(SHOWN).decode(errors="replace")
    if stopped:
        said = Failed(
            f"{exercise.name}: stopped after {timeout:g} s: your code runs too long (an endless loop?)", "time"
        )
        return Verdict(False, said, seed, shown)
    return Verdict(*_believed(exercise, b"".join(received), secret, child.returncode), seed, shown)


def _read_into(fd, received, limit=1 << 16):
    while chunk := os.read(fd, 4096):
        if sum(map(len, received)) < limit:
            received.append(chunk)


def _believed(exercise, data, secret, status):
    """(ok, what was checked or a Failed) from what the pipe carried, if it is the grader's verdict."""
    lines = [line for line in data.split(b"\n") if line]
    mine = [line for line in lines if line.startswith(f"{secret}\t".encode())]
    if len(lines) == 1 and len(mine) == 1:
        _, ok, kind, message = mine[0].decode("ascii").split("\t", 3)
        message = message.encode("ascii").decode("unicode_escape")
        return (True, message) if ok == "1" else (False, Failed(message, kind))
    if lines:
        return False, Failed(
            f"{exercise.name}: your file wrote to the grader's channel: no verdict can be believed", "refused"
        )
    return False, Failed(f"{exercise.name}: {_how_it_ended(status)}, before the grader's verdict", "error")


def _how_it_ended(status):
    if status < 0:
        name = signal.Signals(-status).name
        why = {"SIGXCPU": ": too much time", "SIGXFSZ": ": it printed more than 1 MB", "SIGSEGV": ": a crash"}
        return f"the grading process was stopped by {name}{why.get(name, '')}"
    return f"the grading process ended with exit status {status} (sys.exit or os._exit in your file?)"


# --- the child ----------------------------------------------------------------------------------------


def main():
    """Grade one exercise (the request on stdin, the verdict to the descriptor in argv[1])."""
    channel, timeout = int(sys.argv[1]), float(sys.argv[2])
    _bounded(timeout)
    raw = b""
    while chunk := os.read(0, 1 << 16):
        raw += chunk
    os.close(0)
    secret, request = raw.split(b"\n", 1)
    request = json.loads(request)
    exercise, path, seed = find(request["exercise"]), Path(request["path"]), request["seed"]
    try:
        code, failed = compiled(path), None
    except Failed as error:
        code, failed = compile("", str(path), "exec"), error
    if not failed:
        _import_what_it_imports(path)
    seal.install(secret.decode(), channel, code, exercise.piece, main.__code__)
    del secret, raw
    ok, kind, message = (False, failed.kind, str(failed)) if failed else _graded(exercise, path, code, seed)
    sys.audit(seal.VERDICT, ok, kind, message)
    os._exit(0)


def _bounded(timeout):
    """Limits the kernel enforces on this process: memory, processor time, what it writes."""
    for limit, value in ((resource.RLIMIT_AS, MEMORY), (resource.RLIMIT_CPU, int(timeout) + 5),
                         (resource.RLIMIT_FSIZE, PRINTED)):  # fmt: skip
        soft, hard = resource.getrlimit(limit)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, hard))


def _unreadable(path, error):
    if isinstance(error, SyntaxError):
        line = (error.text or "").rstrip()
        return Failed(f"{path.name}, line {error.lineno}: {error.msg}\n    {line}", "error")
    return Failed(f"{path.name} cannot be read: {error}", "error")


def _import_what_it_imports(path):
    """Import, before the seal, the installed modules the learner's file imports (numpy, math, ...): no
    module can be imported after it. The learner's own modules beside the file are not run here."""
    tree = ast.parse(path.read_bytes())
    installed = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        for name in names:
            try:
                spec = importlib.util.find_spec(name.split(".")[0])
                where = getattr(spec, "origin", None) or ""
                if spec and (where in ("built-in", "frozen") or any(where.startswith(p + os.sep) for p in installed)):
                    importlib.import_module(name)
            except Exception:  # the file's own import line will say what is wrong, in its own words
                continue


def compiled(path):
    """The learner's file compiled (its frames then carry its name), or Failed saying why it cannot be."""
    try:
        return compile(Path(path).read_bytes(), str(path), "exec")
    except (OSError, SyntaxError, ValueError) as error:
        raise _unreadable(Path(path), error) from None


def learner_from(exercise, path, code):
    """Run the learner's compiled file and take its function for the exercise, as a Learner."""
    scope = {"__name__": f"exercise_{exercise.name}", "__file__": str(path), "__builtins__": builtins}
    name = exercise.piece.function.__name__
    try:
        exec(code, scope)  # the learner's own file, run as they wrote it
    except Failed:
        raise
    except Exception as error:
        raise learner_error(error, path, f"file {path.name}") from None
    sys.audit(VERIFY)
    if not callable(scope.get(name)):
        raise Failed(f"{path.name} defines no function {name}: keep the name of the function the file started with")
    return Learner(scope[name], path, exercise.piece.qualname)


def _graded(exercise, path, code, seed):
    """(ok, kind, message): the learner's file run, its function checked, everything caught."""
    check, piece = exercise.check, exercise.piece  # taken before the learner's file runs
    try:
        learner = learner_from(exercise, path, code)
        said = check(piece, learner, seed=seed)
        sys.audit(VERIFY)
        if not learner.calls:  # a check that never met the learner's function has graded nothing
            raise Failed(f"{exercise.name}: your function was never called: the grader's cases were changed", "refused")
        return True, "pass", said
    except Failed as failed:
        return False, failed.kind, _text(failed)
    except BaseException as error:  # SystemExit, KeyboardInterrupt, a MemoryError outside the learner's call
        return False, "error", f"{exercise.name}: your code raised {type(error).__name__}: grading stopped there"


def _text(failed):
    try:
        return str(failed)
    except Exception:
        return "your code raised an exception whose message cannot be shown"


if __name__ == "__main__":
    main()
