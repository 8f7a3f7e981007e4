"""While a learner's file is graded: what it cannot reach and what it cannot change.

The grading process (isolation.py) loads gradflow and the exercise's check first, then calls
`install`, then runs the learner's file. From then on:

    stand-ins    gradflow's own piece, wherever gradflow keeps it (its class or module, every module
                 that imported it by name, the exercise's Piece), is a stand-in: called by the
                 grader it runs gradflow's code; called with the learner's code anywhere on the
                 stack it refuses, in one line. The fast tier, which holds other versions of some
                 pieces, is closed.
    the hook     an audit hook (PEP 578: hooks cannot be removed, and nothing in Python lists them)
                 holds what the learner must not reach: gradflow's own functions behind the
                 stand-ins, the secret that marks a verdict as the grader's, and the snapshot. It
                 refuses the learner's code the ways to other code's frames (sys._getframe, a
                 traceback's tb_frame, a generator's gi_frame), and refuses everyone what grading
                 never needs: gc's lists of objects, ctypes, tracing, new code (compile, exec,
                 marshal), new imports, other processes, signals' timers, the network, writing or
                 removing files, reading gradflow's sources or /proc.
    the snapshot every module's namespace (and its lists, dicts and sets), gradflow's classes, the
                 threads and the signal handlers, taken once the stand-ins are in: the grader asks
                 the hook to compare after the file is loaded, after each call of the learner's
                 function and before the verdict; a change is a failure that nothing undoes.
    the verdict  sent by the hook alone, once, when the grader's `main` asks, with the secret.

The learner's code runs in the same process as the check, so this is a set of locks, not a sandbox:
it closes the ways a file can make a wrong answer pass from Python (patching the grader, capturing
gradflow's piece, exiting early, printing or writing a verdict, looping, allocating, writing into
the workspace), and the process itself is bounded in time and memory by isolation.py. A course
that grades code written to attack the grader should also run the check in a container.
"""

import _thread
import inspect
import os
import signal
import sys
import types
from pathlib import Path

import gradflow
from gradflow.engine import kernels
from gradflow.exercises.catalog import EXERCISES
from gradflow.exercises.checks import BEFORE, VERIFY
from gradflow.exercises.diagnose import Failed

REFERENCE, VERDICT = "gradflow.exercises.reference", "gradflow.exercises.verdict"
GRADFLOW = str(Path(gradflow.__file__).parent.resolve())

# Refused to everyone once the learner's file may run: grading needs none of them.
NEVER = {
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile",
    "compile", "marshal.loads", "marshal.load", "code.__new__", "function.__new__", "import",
    "object.__setattr__", "object.__delattr__", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
    "os.fork", "os.forkpty", "subprocess.Popen", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill",
    "resource.setrlimit", "resource.prlimit", "os.remove", "os.unlink", "os.rename", "os.replace",
    "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime", "os.symlink", "os.link",
    "os.chdir", "sys._current_frames", "sys.setswitchinterval",
}  # fmt: skip
NEVER_PREFIXES = ("ctypes.", "socket.", "shutil.", "urllib.", "http.", "ftplib.", "smtplib.", "webbrowser.")
# Refused to the learner's code only: the grader's own error reports read frames and signatures.
NOT_TO_THE_LEARNER = {"sys._getframe", "object.__getattr__"}
# What the grader itself changes while it grades: every other name is compared with the seal's
# snapshot after the file is loaded, after each of the learner's calls and before the verdict.
GRADERS_OWN = (
    "gradflow.engine.kernels._tier",  # set at the first op, and by use_kernels
    "gradflow.engine.kernels._chosen",
    "gradflow.engine.rng._generator",  # manual_seed starts a new generator
    "gradflow.engine.autograd._grad_enabled",  # no_grad, enable_grad, and backward itself
)
# The modules watched: gradflow, numpy, and the ones the grader's own code calls into.
WATCHED = (
    "gradflow", "numpy", "builtins", "math", "itertools", "functools", "operator", "inspect", "traceback",
    "linecache", "json", "json.encoder", "json.decoder", "os", "posixpath", "types", "contextlib", "textwrap",
    "pathlib", "dataclasses", "collections", "abc", "_thread", "threading", "signal", "_signal", "_imp",
    "importlib", "io", "_io", "resource", "copy", "warnings", "re", "unicodedata",
)  # fmt: skip
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class Refused(Failed, PermissionError):
    """What the learner's code tried and may not, in one line (a PermissionError too: code that reads
    files, linecache for one, knows what to do with it)."""

    def __init__(self, message):
        Failed.__init__(self, message, "refused")


def install(secret, channel, learner_code, piece, main_code):
    """Put the stand-ins in, close the fast tier, take the snapshot and start the hook. `learner_code`
    is the learner's file compiled (its frames carry its file name), `channel` the descriptor the
    verdict goes to, `main_code` the code of the only function that may ask for a verdict."""
    own, slots = _stand_ins(piece)
    _close_fast_tier()
    _close_signals()
    sys.addaudithook(_hook(secret, channel, learner_code, own, slots, main_code))


def _stand_ins(piece):
    """Replace gradflow's own piece wherever gradflow keeps it; {key: gradflow's function} for the hook."""
    real = piece.function
    key = object()

    def stand_in(*args, **kwargs):
        box = []
        sys.audit(REFERENCE, key, box)  # the hook hands over gradflow's function, unless the learner asked
        return box.pop()(*args, **kwargs)

    stand_in.__name__, stand_in.__qualname__, stand_in.__doc__ = real.__name__, real.__qualname__, real.__doc__
    stand_in.__signature__ = inspect.signature(real)  # the grader names a call's arguments from it
    stored = staticmethod(stand_in) if isinstance(piece.stored, staticmethod) else stand_in
    if isinstance(piece.owner, types.ModuleType):
        holders = [(name, m) for name, m in list(sys.modules.items()) if name.startswith("gradflow")
                   and getattr(m, piece.attribute, None) is real]  # fmt: skip
        for _, module in holders:
            setattr(module, piece.attribute, stand_in)
        slots = [(name, vars(module)) for name, module in holders]
    else:
        setattr(piece.owner, piece.attribute, stored)
        slots = [(f"{piece.owner.__module__}.{piece.owner.__name__}", vars(piece.owner))]
    for exercise in EXERCISES:
        if exercise.piece.function is real:
            object.__setattr__(exercise.piece, "stored", stored)
    return {key: real}, [(f"{name}.{piece.attribute}", space, piece.attribute) for name, space in slots]


def _close_fast_tier():
    """The fast tier holds its own versions of some pieces (LayerNorm's backward, Adam's step, ...):
    while an exercise is graded, every op runs plain and every fast kernel refuses."""
    kernels.offer({})

    def closed(*args, **kwargs):
        raise Refused("gradflow's fast tier is closed while an exercise is graded: the exercise asks for your own code")

    for name, module in list(sys.modules.items()):
        if not name.startswith("gradflow.fast") or module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if getattr(value, "__module__", None) != name or not callable(value):
                continue
            if isinstance(value, type):
                for method in ("forward", "backward", "apply"):
                    if method in vars(value):
                        setattr(value, method, staticmethod(closed))
            else:
                setattr(module, attribute, closed)


def _close_signals():
    """A signal handler is handed the frame it interrupted, and from it every frame below: the learner's
    code may not set one (nor build a fresh copy of the signal module to set one with)."""

    def closed(*args, **kwargs):
        raise Refused("the grader refuses signal handlers and timers while your file is graded")

    for module in (signal, sys.modules["_signal"]):
        for name in (
            "signal",
            "setitimer",
            "alarm",
            "set_wakeup_fd",
            "pthread_sigmask",
            "raise_signal",
            "siginterrupt",
        ):
            if hasattr(module, name):
                setattr(module, name, closed)
    for name in ("create_builtin", "exec_builtin", "create_dynamic", "exec_dynamic"):
        setattr(sys.modules["_imp"], name, closed)


def _namespaces():
    """[(name, namespace)]: the watched modules' and gradflow's classes' (a class keeps its methods in its
    own), found once at the seal: no module can be imported after it."""
    spaces = []
    for name, module in list(sys.modules.items()):
        if isinstance(module, types.ModuleType) and (name in WATCHED or name.startswith(("gradflow.", "numpy."))):
            spaces.append((name, vars(module)))
            if name.startswith("gradflow"):
                spaces += [(f"{name}.{k}", vars(v)) for k, v in list(vars(module).items())
                           if isinstance(v, type) and getattr(v, "__module__", None) == name]  # fmt: skip
    return spaces


def _watcher():
    """(take, first_change): a snapshot of the watched namespaces, what gradflow's lists, tuples, dicts
    and sets hold (the grader's data: the gradcheck table's rows, the exercises), the threads and the
    signal handlers; and the first difference between two snapshots, in words.

    Everything they call is bound here, once, before the learner's file runs, and reached only
    through the hook: a learner's code that replaced a builtin, a module's function or this module's
    own names would otherwise fool the comparison that is meant to catch it. A snapshot is a few
    tuples built in C (about 2 ms), since one is taken after every call of the learner's function.
    """
    getsignal, count = signal.getsignal, _thread._count
    signals = [s for s in signal.valid_signals() if s < signal.NSIG]
    tuple_, id_, map_, zip_, set_, getattr_, isinstance_ = tuple, id, map, zip, set, getattr, isinstance
    containers, plain = (list, tuple, dict, set), (type, types.ModuleType)
    spaces = _namespaces()
    held, seen = [], set()  # (name, namespace, key, whether its items are objects whose fields count)
    for name, space in spaces:
        for key, value in list(space.items()) if name.startswith("gradflow") else ():
            if isinstance(value, containers) and key != "__builtins__" and id(value) not in seen:
                seen.add(id(value))
                items = value.values() if isinstance(value, dict) else value
                deep = any(
                    getattr(item, "__dict__", None) is not None and not isinstance(item, plain) for item in items
                )
                held.append((f"{name}.{key}", space, key, deep))

    def fields(item):  # what an object in the grader's data holds (a gradcheck row's function, ...)
        space = getattr_(item, "__dict__", None)
        return () if space is None or isinstance_(item, plain) else tuple_(map_(id_, space.values()))

    def contents(value, deep):  # what a container holds, by identity, and what the objects in it hold
        items = (
            tuple_(value.values())
            if isinstance_(value, dict)
            else tuple_(value)
            if isinstance_(value, containers)
            else ()
        )
        return tuple_(map_(id_, value)), tuple_(map_(id_, items)), tuple_(map_(fields, items)) if deep else ()

    def take():
        return (
            tuple_(tuple_(space) for _, space in spaces),
            tuple_(tuple_(map_(id_, space.values())) for _, space in spaces),
            tuple_(contents(space.get(key), deep) for _, space, key, deep in held),
            count(),
            tuple_(id_(getsignal(s)) for s in signals),
        )

    def first_change(before, after, exempt):
        if before == after:
            return None
        (keys, ids, contained, threads, handlers), (keys_now, ids_now, contained_now, threads_now, handlers_now) = (
            before,
            after,
        )
        if threads_now != threads:
            return "your code started a thread"
        if handlers_now != handlers:
            return "your code changed a signal handler"
        for (name, _), k, k_now, i, i_now in zip_(spaces, keys, keys_now, ids, ids_now):
            if k != k_now:
                return f"your code changed {name}.{sorted(set_(k) ^ set_(k_now))[0]}"
            changed = [key for key, a, b in zip_(k, i, i_now) if a != b and f"{name}.{key}" not in exempt]
            if changed:
                return f"your code changed {name}.{changed[0]}"
        for (where, *_), c, c_now in zip_(held, contained, contained_now):
            if c != c_now and where not in exempt:
                return f"your code changed {where}"
        return None

    return take, first_change


def _hook(secret, channel, learner_code, own, slots, main_code):
    """The audit hook: it alone holds gradflow's own functions, the secret and the snapshot. What it
    calls is bound here, before the learner's file runs (see _watcher)."""
    learner_file = learner_code.co_filename
    getframe, ident, write, encode, int_, bool_ = sys._getframe, _thread.get_ident, os.write, str.encode, int, bool
    tuple_, id_ = tuple, id
    refused, never, prefixes, opened = Refused, frozenset(NEVER), NEVER_PREFIXES, _open
    take, first_change = _watcher()
    snapshot = take()
    busy = set()  # the threads inside the hook: the events the hook's own work raises pass through
    state = {"loaded": False, "broken": None, "said": False}
    # The piece's slots change as the grader puts the learner's function in and takes it out: compared
    # over each of the learner's calls instead (from BEFORE to VERIFY), so that no call swaps them.
    exempt = frozenset(GRADERS_OWN) | {name for name, _, _ in slots}
    held = []  # for each of the learner's calls under way: what the slots held as it began

    def learner_running():
        frame = getframe(2)
        while frame is not None:
            if frame.f_code.co_filename == learner_file:
                return True
            frame = frame.f_back
        return False

    def called_by_main():
        frame = getframe(2)
        while frame is not None and frame.f_code is not main_code:
            frame = frame.f_back
        return frame is not None

    def refuse(what):
        raise refused(f"the grader refuses {what} while your file is graded: the exercise asks for your own code alone")

    def in_slots():
        return tuple_(id_(space.get(attribute)) for _, space, attribute in slots)

    def verify():
        """Compare with the snapshot taken at the seal (but for what the grader changes itself), and the
        slots with what they held as the learner's call began; once broken, always broken."""
        if state["broken"] is None:
            state["broken"] = first_change(snapshot, take(), exempt)
        if state["broken"] is None and held and held.pop() != in_slots():
            state["broken"] = f"your code changed {slots[0][0]}, where gradflow runs the piece you write"
        if state["broken"]:
            raise refused(f"{state['broken']}: a file graded must leave gradflow, numpy and Python as it found them")

    def send(ok, kind, message):
        if state["said"] or learner_running() or not called_by_main():
            state["broken"] = state["broken"] or "a verdict was asked for by other code than the grader's"
            ok = False
        if ok:
            try:
                verify()
            except refused as error:
                ok, kind, message = False, error.kind, error.args[0]
        if state["broken"] and ok is False and not message:
            message = state["broken"]
        state["said"] = True
        text = encode(message[:8000], "unicode_escape").decode("ascii")
        write(channel, encode(f"{secret}\t{int_(bool_(ok))}\t{kind}\t{text}\n"))

    def judge(event, args):
        if event == REFERENCE:
            if learner_running():
                refuse("gradflow's own version of the piece you are writing")
            args[1].append(own[args[0]])
        elif event == BEFORE:
            held.append(in_slots())
        elif event == VERIFY:
            verify()
        elif event == VERDICT:
            send(*args)
        elif event == "exec":
            if args[0] is learner_code and not state["loaded"]:
                state["loaded"] = True
            else:
                refuse("running code made at run time (exec)")
        elif event in never or event.startswith(prefixes):
            refuse(event)
        elif event == "open":
            opened(args, refuse, learner_running)
        elif event in NOT_TO_THE_LEARNER and learner_running():
            refuse(f"{event}")

    def hook(event, args):
        me = ident()
        if me in busy:
            return
        busy.add(me)
        try:
            judge(event, args)
        finally:
            busy.discard(me)

    return hook


def _open(args, refuse, learner_running):
    """Writing is refused; so is reading /proc (this process's memory) and, to the learner's code,
    gradflow's sources (the grader reads them to show where an error happened)."""
    path, mode, flags = args
    if (mode is not None and any(c in mode for c in "wax+")) or (mode is None and flags & WRITING):
        refuse(f"writing to {path}")
    if isinstance(path, (str, bytes, os.PathLike)):
        where = os.path.abspath(os.fsdecode(path))
        if where.startswith(("/proc/", "/dev/mem")) or where.startswith(GRADFLOW + os.sep) and learner_running():
            refuse(f"reading {where}")
