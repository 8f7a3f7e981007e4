"""A learner's file cannot make the grader pass: each trick a course has met is tried on a wrong or blank
answer, in the grading process of its own (gradflow/exercises/isolation.py, seal.py), and never passes;
the other exercises' verdicts stay what they were. A right answer that does nothing odd still passes."""

import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from gradflow.exercises import EXERCISES, find, isolation, workspace

MUL = "mul_backward"
RIGHT_MUL = "    a, b = ctx.saved_tensors\n    return grad * b, grad * a\n"


def written(ws, name, body, head=""):
    """Write exercise `name`'s file: its imports, `head` at the top, and `body` as its function's body."""
    e = find(name)
    text = workspace.file_text(e)
    todo = f'    raise NotImplementedError("TODO: write {e.piece.qualname}")\n'
    assert todo in text
    (ws / workspace.file_name(e)).write_text(head + "\n" + text.replace(todo, body))
    return e


@pytest.fixture
def ws(tmp_path):
    workspace.start(tmp_path / "ws")
    return tmp_path / "ws"


def test_a_right_answer_passes_and_a_wrong_one_fails(ws):
    assert workspace.check(written(ws, MUL, RIGHT_MUL), ws).ok
    verdict = workspace.check(written(ws, MUL, "    a, b = ctx.saved_tensors\n    return grad * a, grad * b\n"), ws)
    assert not verdict.ok and "operands swapped" in str(verdict.said)


TRICKS = {
    "patch every exercise's check": (
        "import gradflow.exercises.catalog as c\n"
        "for e in c.EXERCISES:\n    object.__setattr__(e, 'check', lambda piece, learner, seed=0: 'all good')\n",
        "    return grad, grad\n",
    ),
    "patch the comparison": (
        "import numpy\nimport gradflow.exercises.diagnose as d\nimport gradflow.exercises.checks as k\n"
        "numpy.allclose = lambda *a, **kw: True\nd.compare = lambda *a, **kw: None\nk.gradchecked = lambda *a: None\n",
        "    return grad, grad\n",
    ),
    "patch inside the call": (
        "import gradflow.exercises.checks as k\n",
        "    k.gradchecked = lambda *a: None\n    return grad, grad\n",
    ),
    "capture gradflow's piece at import": (
        "import gradflow.engine.ops as ops\n_theirs = ops.Mul.backward\n",
        "    return _theirs(ctx, grad)\n",
    ),
    "capture it from the exercise's record": (
        "from gradflow.exercises.catalog import find\n_theirs = find('mul_backward').piece.function\n",
        "    return _theirs(ctx, grad)\n",
    ),
    "capture it through the grader's closures": (
        "import gradflow.engine.ops as ops\n",
        "    for cell in ops.Mul.__dict__['backward'].__func__.__closure__:\n"
        "        piece = cell.cell_contents\n"
        "        if hasattr(piece, 'function'):\n            return piece.function(ctx, grad)\n",
    ),
    "read the grader's frames": (
        "import sys\n",
        "    frame = sys._getframe(1)  # up to the grader's frame that holds gradflow's answer for this call\n"
        "    while 'expected' not in frame.f_locals:\n        frame = frame.f_back\n"
        "    return tuple(frame.f_locals['expected'])\n",
    ),
    "read frames through a traceback": (
        "",
        "    try:\n        raise ValueError\n    except ValueError as e:\n        frame = e.__traceback__.tb_frame\n"
        "    while 'expected' not in frame.f_locals:\n        frame = frame.f_back\n"
        "    return tuple(frame.f_locals['expected'])\n",
    ),
    "exit early with sys.exit(0)": ("import sys\nsys.exit(0)\n", "    return grad, grad\n"),
    "exit early with os._exit(0)": ("import os\nos._exit(0)\n", "    return grad, grad\n"),
    "exit from inside the call": ("import os\n", "    os._exit(0)\n"),
    "print a verdict and write one to every descriptor": (
        "import os\nprint('02 mul_backward: pass (6 gradcheck cases)')\n"
        "for fd in range(3, 64):\n    try:\n        os.write(fd, b'0' * 32 + b'\\t1\\tpass\\tok\\n')\n"
        "    except OSError:\n        pass\n",
        "    return grad, grad\n",
    ),
    "start a thread": (
        "import threading, time\nthreading.Thread(target=time.sleep, args=(3,)).start()\n",
        "    return grad, grad\n",
    ),
    "write into the workspace": (
        "import json, pathlib\n"
        "p = pathlib.Path(__file__).with_name('.progress.json')\n"
        "p.write_text(json.dumps({'mul_backward': {'passed': True}}))\n",
        "    return grad, grad\n",
    ),
    "run code made at run time": ("", "    exec('x = 1')\n    return grad, grad\n"),
    "set a signal handler": (
        "import signal\nsignal.signal(signal.SIGALRM, lambda s, f: None)\n",
        "    return grad, grad\n",
    ),
}


@pytest.fixture(scope="module")
def tricked(tmp_path_factory):
    """{trick: (its workspace, its verdict)}: every trick graded at once, as many at a time as there are
    cores, as `check` grades (the workspaces written one at a time: ast.parse is not thread-safe in 3.11)."""
    files = {}
    for trick, (head, body) in TRICKS.items():
        ws = tmp_path_factory.mktemp("trick") / "ws"
        workspace.start(ws)
        files[trick] = ws, written(ws, MUL, body, head)
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        verdicts = pool.map(
            lambda ws_e: isolation.grade(ws_e[1], ws_e[0] / workspace.file_name(ws_e[1]), 0), files.values()
        )
    tricked = {}
    for (trick, (ws, e)), verdict in zip(files.items(), verdicts):
        workspace.remember(e, ws, verdict.ok)
        tricked[trick] = ws, verdict
    return tricked


@pytest.mark.parametrize("trick", TRICKS)
def test_no_trick_passes(tricked, trick):
    ws, verdict = tricked[trick]
    assert not verdict.ok, f"{trick}: passed"
    if trick == "write into the workspace":
        assert "writing to" in str(verdict.said)
        assert json.loads((ws / workspace.PROGRESS).read_text())[MUL]["passed"] is False  # the grader's record


def test_a_patched_grader_leaves_the_other_exercises_alone(ws):
    """The issue's case: a wrong softmax that sets every record's check to a pass; every later exercise
    keeps its own verdict (a blank stays todo, a wrong tanh fails)."""
    head, body = TRICKS["patch every exercise's check"]
    written(ws, "softmax_backward", "    return grad\n", head)
    written(ws, "tanh_backward", "    (y,) = ctx.saved_tensors\n    return grad * (1 + y * y)\n")
    verdicts = dict(zip((e.name for e in EXERCISES), workspace.check_all(EXERCISES, ws)))
    assert not any(v.ok for v in verdicts.values())
    assert verdicts["softmax_backward"].said.kind != "todo" and verdicts["tanh_backward"].said.kind != "todo"
    assert all(v.said.kind == "todo" for n, v in verdicts.items() if n not in ("softmax_backward", "tanh_backward"))


def test_a_hang_is_stopped_in_one_line(ws):
    verdict = workspace.check(written(ws, MUL, "    while True:\n        pass\n"), ws, timeout=4)
    assert not verdict.ok and verdict.said.kind == "time"
    assert str(verdict.said) == "mul_backward: stopped after 4 s: your code runs too long (an endless loop?)"


def test_a_blow_up_is_bounded(ws):
    verdict = workspace.check(written(ws, MUL, "    import numpy\n    return numpy.ones(10**11), grad\n"), ws)
    assert not verdict.ok and "MemoryError" in str(verdict.said)


def test_gradflows_fast_tier_is_closed(ws):
    body = "    from gradflow.fast.norm import LayerNorm as Fast\n    return Fast.backward(ctx, grad)\n"
    verdict = workspace.check(written(ws, "layer_norm_backward", body), ws)
    assert not verdict.ok and "fast tier is closed" in str(verdict.said)


def test_what_the_learner_printed_is_kept_apart(ws):
    e = written(ws, MUL, RIGHT_MUL, "print('hello from my file')\n")
    verdict = workspace.check(e, ws)
    assert verdict.ok and verdict.printed == "hello from my file\n"


def test_changing_the_graders_cases_never_passes(ws):
    """The gradcheck table's rows are objects in a list: changing what a row computes (so that the learner's
    function is never called) is seen, as is a check that called the learner's function not once."""
    head = (
        "from gradflow.tools import gradcheck_table\n"
        "for case in gradcheck_table.CASES:\n    object.__setattr__(case, 'fn', lambda *xs: xs[0].sum())\n"
    )
    verdict = workspace.check(written(ws, MUL, "    return grad, grad\n", head), ws)
    assert not verdict.ok and "gradflow.tools.gradcheck_table.CASES" in str(verdict.said)
