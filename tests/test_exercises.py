"""`gradflow exercises`: the exercises are gradflow's own code, every reference passes, every blank fails
with a helpful message, and the checker names the common mistakes."""

import inspect
import json
import sys
import textwrap
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from gradflow.cli import exercises as command
from gradflow.cli.main import Parser, one_line
from gradflow.engine import autograd, ops
from gradflow.exercises import EXERCISES, TRACKS, find, workspace
from gradflow.exercises.checks import Learner


def gradflow(*argv):
    """`gradflow exercises ...` as the command line runs it: bad input is one line and exit code 2."""
    parser = Parser(prog="gradflow")
    command.add_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["exercises", *argv])
    try:
        return args.run(args)
    except (ValueError, OSError) as e:
        print(one_line(args.command, e), file=sys.stderr)
        return 2


@pytest.fixture(scope="module")
def blank(tmp_path_factory):
    """A workspace as `start` writes it, every file still blank."""
    directory = tmp_path_factory.mktemp("blank")
    workspace.start(directory)
    return directory


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """A workspace whose every file holds gradflow's own code in the blank."""
    directory = tmp_path_factory.mktemp("solved")
    workspace.start(directory)
    for e in EXERCISES:
        (directory / workspace.file_name(e)).write_text(workspace.file_text(e, solution=True))
    return directory


def attempt(tmp_path, name, old, new):
    """Check gradflow's own solution of `name` with `old` replaced by `new`: a learner's typical mistake."""
    e = find(name)
    text = workspace.file_text(e, solution=True)
    assert old in text, f"{name}: gradflow's code no longer reads {old!r}"
    tmp_path.joinpath(workspace.file_name(e)).write_text(text.replace(old, new))
    verdict = workspace.check(e, tmp_path)
    ok, failed = verdict.ok, verdict.said
    assert not ok
    return failed


def test_at_least_25_exercises_in_tracks_in_order():
    assert len(EXERCISES) >= 25
    assert len({e.name for e in EXERCISES}) == len(EXERCISES)
    tracks = [e.track for e in EXERCISES]
    assert [t for i, t in enumerate(tracks) if i == 0 or t != tracks[i - 1]] == list(
        TRACKS
    )  # each track once, in order


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_the_files_are_gradflows_own_code(exercise):
    piece = exercise.piece
    solution, stub = workspace.file_text(exercise, solution=True), workspace.file_text(exercise)
    assert piece.source() in solution  # the very code gradflow runs
    assert textwrap.dedent(inspect.getsource(piece.function)).strip().endswith(piece.source().strip())
    assert f'raise NotImplementedError("TODO: write {piece.qualname}")' in stub
    signature = piece.source().split(":\n")[0]
    assert signature in stub and piece.source().split(":\n", 1)[1] not in stub
    compile(stub, "stub", "exec")
    compile(solution, "solution", "exec")
    if "ctx.saved_tensors" in piece.source():  # the stub says how to read what forward saved
        assert "= ctx.saved_tensors" in stub.split("def ", 1)[1]


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_every_blank_fails_as_todo_and_every_solution_passes(exercise, blank, solved):
    verdict = workspace.check(exercise, blank)
    ok, failed = verdict.ok, verdict.said
    assert not ok and failed.kind == "todo"
    assert str(failed) == f"still TODO: write the body of {exercise.piece.qualname} in {workspace.file_name(exercise)}"
    learner = workspace.load(exercise, solved)
    assert isinstance(learner, Learner)
    said = exercise.check(exercise.piece, learner)
    assert learner.calls > 0, "the check never ran the learner's code"
    assert isinstance(said, str) and said


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_a_backward_states_its_forward_and_leaves_the_derivation_to_the_hints(exercise):
    """Derive, not transcribe: a backward's file states the forward and what to find; no line of the op's
    docstring that gives a gradient (a "dL/d...", "d loss / d z" or "Backward:" line) shows in it, given code
    included."""
    stub = workspace.file_text(exercise)
    assert len(exercise.hints) == 3 and all(isinstance(h, str) and len(h) > 10 for h in exercise.hints)
    if exercise.piece.attribute != "backward":
        return
    assert exercise.states and exercise.states.splitlines()[0] in stub and "find" in exercise.states
    doc = inspect.cleandoc(exercise.piece.owner.__doc__ or "")
    derivation = [line.strip() for line in doc.splitlines() if any(w in line for w in ("dL/d", " / d", "Backward"))]
    assert derivation, f"{exercise.name}: the op's docstring no longer gives its backward"
    shown = [line for line in derivation if line in stub]
    assert not shown, f"{exercise.name} shows its derivation: {shown}"


def test_hints_come_in_levels_remembered_in_the_workspace(tmp_path, capsys):
    ws = tmp_path / "ws"
    workspace.start(ws)
    said = []
    for _ in range(4):
        assert gradflow("hint", "softmax_backward", "--dir", str(ws)) == 0
        said.append(capsys.readouterr().out)
    hints = find("softmax_backward").hints
    assert [f"hint {n} of 3" in out for out, n in zip(said, (1, 2, 3, 3))] == [True] * 4
    assert [" ".join(out.split()).count(" ".join(h.split())) for out, h in zip(said, hints)] == [1, 1, 1]
    assert "gradflow exercises solution softmax_backward" in said[2] and "again" in said[0]
    solution = find("softmax_backward").piece.source()
    assert all(line.strip() not in out for out in said for line in solution.splitlines()[1:])
    assert gradflow("hint", "mul_backward", "--dir", str(ws)) == 0  # each exercise has its own level
    assert "hint 1 of 3" in capsys.readouterr().out
    assert gradflow("hint", "softmax_backward", "--dir", str(tmp_path / "nowhere")) == 2
    assert "holds no exercise files" in capsys.readouterr().err


def test_a_check_puts_gradflows_own_piece_back(tmp_path):
    original = ops.Mul.__dict__["backward"]
    attempt(tmp_path, "mul_backward", "da = grad * b if", "da = grad * a if")
    assert ops.Mul.__dict__["backward"] is original
    attempt(tmp_path, "unbroadcast", "keepdims=True).reshape(shape)", "keepdims=True)[0]")
    assert autograd.unbroadcast is find("unbroadcast").piece.function


# --- the mistakes the checker names -------------------------------------------------------------------


def test_a_gradient_not_summed_over_the_broadcast_axis(tmp_path):
    failed = attempt(tmp_path, "unbroadcast", "return grad.sum(axis=tuple(range(extra)) + stretched, keepdims=True)"
                     ".reshape(shape)", "return grad")  # fmt: skip
    assert failed.kind == "broadcast"
    message = str(failed)
    assert "case add [(), (3,)]" in message and "has shape (3,), expected ()" in message
    assert "not summed back over the broadcast axes (0,)" in message


def test_keepdims_lost(tmp_path):
    failed = attempt(tmp_path, "unbroadcast", ", keepdims=True).reshape(shape)", ")")
    assert failed.kind == "keepdims"
    assert "has shape (4,), expected (1, 4)" in str(failed) and "without the axis of size 1 at 0" in str(failed)
    assert "keepdims lost" in str(failed)
    # the same mistake inside a formula: numpy refuses to broadcast, and the hint names it
    failed = attempt(tmp_path, "softmax_backward", "sum(axis=ctx.axis, keepdims=True)", "sum(axis=ctx.axis)")
    assert failed.kind == "error" and "hint: keepdims lost" in str(failed)


def test_a_missing_transpose(tmp_path):
    failed = attempt(tmp_path, "linear_backward", "dw = g.T @ rows", "dw = rows.T @ g")
    assert failed.kind == "transpose"
    message = str(failed)
    assert "the gradient of w (input 1, shape (5, 4)) has shape (4, 5), expected (5, 4)" in message
    assert "missing transpose" in message


def test_a_sign_error(tmp_path):
    failed = attempt(tmp_path, "div_backward", "db = -grad * z / b", "db = grad * z / b")
    assert failed.kind == "sign"
    message = str(failed)
    assert "the gradient of b (input 1, shape (3, 4)): element (" in message
    expected, got = (float(s.split(",")[0].split()[0]) for s in message.split("expected ")[1].split(" got "))
    assert got == pytest.approx(-expected)
    assert "a sign error" in message


def test_a_scale_off_by_a_known_constant(tmp_path):
    failed = attempt(tmp_path, "mean_backward", "spread(grad / ctx.n,", "spread(grad,")
    assert failed.kind == "scale" and "12 times the expected one" in str(failed)  # the mean of a (3, 4)
    failed = attempt(tmp_path, "layer_norm_backward", "dx = r * (", "dx = 2 * r * (")
    assert failed.kind == "scale" and "2 times the expected one" in str(failed)


def test_the_learners_error_is_shown_as_their_line(tmp_path):
    failed = attempt(tmp_path, "matmul_backward", "da = g @ np.swapaxes(b2, -1, -2)", "da = g @ b2")
    message = str(failed)
    assert failed.kind == "error"
    assert "your Matmul.backward raised ValueError at line" in message and "of 13_matmul_backward.py:" in message
    assert "    da = g @ b2" in message and "Traceback" not in message and "gradflow/engine" not in message
    assert "hint: the inner sizes of a product differ" in message


def test_a_recursive_walk_is_told_to_use_a_stack(tmp_path):
    e = find("topological_order")
    recursive = (
        "def topological_order(root):\n    order, seen = [], set()\n\n    def visit(node):\n"
        "        if node in seen:\n            return\n        seen.add(node)\n"
        "        for t in node.inputs:\n            if t is not None and t.grad_fn is not None:\n"
        "                visit(t.grad_fn)\n        order.append(node)\n\n    visit(root)\n    return order[::-1]\n"
    )
    tmp_path.joinpath(workspace.file_name(e)).write_text(recursive)
    verdict = workspace.check(e, tmp_path)
    ok, failed = verdict.ok, verdict.said
    assert not ok and "chain of 3000 tanh" in str(failed) and "RecursionError" in str(failed)
    assert "keep the nodes to visit in a list (a stack)" in str(failed)
    failed = attempt(tmp_path, "topological_order", "return order[::-1]", "return order")
    assert failed.kind == "order" and "backward starts at the root" in str(failed)


def test_a_syntax_error_names_the_line(tmp_path):
    failed = attempt(tmp_path, "exp_backward", "return grad * y", "return grad *")
    assert failed.kind == "error" and str(failed).startswith("05_exp_backward.py, line")
    assert "return grad *" in str(failed)


def test_adam_named_mistakes(tmp_path):
    update = "    p -= lr * m_hat / (np.sqrt(v_hat) + eps)"
    failed = attempt(tmp_path, "adam_update", update, "    p = p - lr * m_hat / (np.sqrt(v_hat) + eps)")
    assert failed.kind == "inplace" and "update p in place" in str(failed)
    failed = attempt(tmp_path, "adam_update", update, "    p += lr * m_hat / (np.sqrt(v_hat) + eps)")
    assert failed.kind == "sign"
    inside = "    p -= lr * m_hat / np.sqrt(v_hat + eps)"  # under the root: off by digits eps = 1e-8 never shows
    failed = attempt(tmp_path, "adam_update", update, inside)
    assert failed.kind == "eps inside the square root" and "hint: eps is added to sqrt(v_hat)" in str(failed)
    left_out = "    p -= lr * m_hat / np.sqrt(v_hat)"  # NaN where a gradient was always 0
    failed = attempt(tmp_path, "adam_update", update, left_out)
    assert failed.kind == "eps left out" and "divides 0 by 0" in str(failed)
    corrected = "undo the bias that leaves\n    v_hat = v / (1 - beta2**t)"
    failed = attempt(
        tmp_path, "adam_update", "m / (1 - beta1**t)  # m and v start at zero: " + corrected, "m\n    v_hat = v"
    )
    assert failed.kind == "bias correction"
    failed = attempt(tmp_path, "adam_update", "    m[...] = beta1", "    m = beta1")  # the state never sees m
    assert failed.kind == "state in place" and "m[...] = " in str(failed)


def test_matmul_reports_the_2d_case_before_a_vector_operand(tmp_path):
    """Cases in teaching order: the textbook 2-D answer passes the 2-D case, and the learner is told so."""
    two_d_only = (
        "    a, b = ctx.saved_tensors\n    return grad @ np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2) @ grad\n"
    )
    e = find("matmul_backward")
    stub = workspace.file_text(e)
    tmp_path.joinpath(workspace.file_name(e)).write_text(stub.split("    raise NotImplementedError")[0] + two_d_only)
    verdict = workspace.check(e, tmp_path)
    ok, failed = verdict.ok, verdict.said
    assert not ok and str(failed).startswith(
        "2-D cases pass; now a vector operand, on gradflow's gradcheck case matmul [(4,)"
    )


def test_softmax_checks_one_row_first(tmp_path):
    failed = attempt(tmp_path, "softmax_backward", "keepdims=True))", "keepdims=True) * 2)")
    assert str(failed).startswith("on gradflow's gradcheck case softmax [(4,)]")


@pytest.mark.parametrize(
    "name, old, new, said",
    [
        (
            "mul_backward",
            "da = grad * b if ctx.needs_input_grad[0] else None\n    db = grad * a",
            "da = grad * a if ctx.needs_input_grad[0] else None\n    db = grad * b",
            "hint: the operands swapped: a nudge to a changes z = a * b by the other factor",
        ),
        (
            "softmax_backward",
            "return y * (grad - (grad * y).sum(axis=ctx.axis, keepdims=True))",
            "return grad * y * (1 - y)",
            "hint: only the diagonal of the Jacobian (g * y * (1 - y)): each y_i depends on every x_j",
        ),
        (
            "softmax_backward",
            "(grad * y).sum(axis=ctx.axis, keepdims=True)",
            "(grad * y).sum(axis=0, keepdims=True)",
            "hint: the sum over the wrong axis: softmax normalises along ctx.axis only",
        ),
        (
            "layer_norm_backward",
            "dx = r * (gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True))",
            "dx = r * gh",
            "hint: the mean and the variance treated as constants: mu and r are functions of x too",
        ),
        (
            "layer_norm_backward",
            " - xhat * (gh * xhat).mean(axis=-1, keepdims=True))",
            ")",
            "hint: the path through the variance left out",
        ),
        ("cross_entropy_backward", "dz[np.arange(len(t)), t] -= 1", "pass", "hint: the one-hot target left out"),
    ],
    ids=["mul swapped", "softmax diagonal", "softmax axis", "layer_norm constants", "layer_norm variance", "ce"],
)
def test_the_classic_mistakes_are_named_with_the_idea(tmp_path, name, old, new, said):
    failed = attempt(tmp_path, name, old, new)
    assert failed.kind == "named" and said in str(failed), str(failed)
    assert "expected" in str(failed)  # still which value and element, as for any wrong gradient


# --- the command -----------------------------------------------------------------------------------------


def test_start_list_check_and_what_comes_after_a_pass(tmp_path, capsys, monkeypatch):
    ws = tmp_path / "ws"
    assert gradflow("start", str(ws)) == 0
    assert len(list(ws.glob("*.py"))) == len(EXERCISES)
    assert gradflow("check", "--dir", str(ws)) == 1
    out = capsys.readouterr().out
    assert out.count("still TODO") == len(EXERCISES) and f"0 of {len(EXERCISES)} pass" in out
    mul = find("mul_backward")
    (ws / workspace.file_name(mul)).write_text(workspace.file_text(mul, solution=True))
    assert gradflow("check", "mul_backward", "--dir", str(ws)) == 0
    out = capsys.readouterr().out
    assert "mul_backward: pass (6 gradcheck cases)" in out
    assert "next: exercise 3, unbroadcast" in out and "03_unbroadcast.py" in out and "unlock" not in out
    (ws / workspace.file_name(find("add_backward"))).write_text("def backward(ctx, grad):\n    return grad, -grad\n")
    assert gradflow("list", "--dir", str(ws)) == 0
    rows = {
        line.split()[1]: line.split()[2] for line in capsys.readouterr().out.splitlines() if line[:4].strip().isdigit()
    }
    assert rows["mul_backward"] == "pass" and rows["add_backward"] == "changed" and rows["unbroadcast"] == "todo"
    assert gradflow("check", "add_backward", "--dir", str(ws)) == 1
    out = capsys.readouterr().out
    assert "a sign error" in out and "stuck? gradflow exercises hint add_backward (hint 1 of 3)" in out
    assert gradflow("list", "--dir", str(ws)) == 0
    assert " add_backward             fail " in capsys.readouterr().out
    monkeypatch.chdir(ws)  # from inside the workspace, --dir ws still names it
    assert gradflow("list", "--dir", "ws") == 0
    out = capsys.readouterr().out
    assert "no workspace" not in out and " add_backward             fail " in out


def test_json_and_junit_for_a_course(tmp_path, capsys):
    """One record per exercise; the learner's files are what is graded: a blank scores zero, a wrong answer
    fails although gradflow's own piece is right, and a deleted file is an error, never a pass."""
    ws = tmp_path / "ws"
    workspace.start(ws)
    junit = tmp_path / "results.xml"
    assert gradflow("check", "--dir", str(ws), "--format", "json", "--junit", str(junit)) == 1
    blank = json.loads(capsys.readouterr().out)
    assert blank["score"] == 0 and blank["max_score"] == len(EXERCISES) == len(blank["exercises"])
    assert {(r["status"], r["score"]) for r in blank["exercises"]} == {("todo", 0)}
    assert [r["name"] for r in blank["exercises"]] == [e.name for e in EXERCISES]
    cases = ET.parse(junit).getroot().findall("./testsuite/testcase")
    assert len(cases) == len(EXERCISES) and all(c.find("failure") is not None for c in cases)

    for name in ("add_backward", "mul_backward"):
        e = find(name)
        (ws / workspace.file_name(e)).write_text(workspace.file_text(e, solution=True))
    tanh = find("tanh_backward")
    (ws / workspace.file_name(tanh)).write_text(workspace.file_text(tanh, solution=True).replace("1 - y", "1 + y"))
    (ws / workspace.file_name(find("unbroadcast"))).unlink()
    assert gradflow("hint", "mul_backward", "--dir", str(ws)) == 0  # a teacher sees the hints taken
    capsys.readouterr()
    assert gradflow("check", "--dir", str(ws), "--format", "json", "--junit", str(junit)) == 1
    graded = json.loads(capsys.readouterr().out)
    by_name = {r["name"]: r for r in graded["exercises"]}
    seed = by_name["mul_backward"]["seed"]  # the inputs are drawn afresh each run, from a seed the record keeps
    assert (
        isinstance(seed, int)
        and graded["score"] == 2
        and by_name["mul_backward"]
        == {
            "seed": seed,
            "number": 2,
            "name": "mul_backward",
            "track": "autograd basics",
            "status": "pass",
            "score": 1,
            "message": "6 gradcheck cases",
            "hints": 1,
        }
    )
    assert by_name["tanh_backward"]["status"] == "fail" and "expected" in by_name["tanh_backward"]["message"]
    assert by_name["unbroadcast"]["status"] == "error" and by_name["unbroadcast"]["message"].startswith("no file ")
    root = ET.parse(junit).getroot()
    case = {c.get("name"): c for c in root.iter("testcase")}
    assert case["02_mul_backward"].find("failure") is None and case["02_mul_backward"].find("error") is None
    assert case["03_unbroadcast"].find("error") is not None and case["08_tanh_backward"].find("failure") is not None
    said = case["08_tanh_backward"].find("failure").get("message")  # the diagnosis, not "on ... case ...:"
    assert said in by_name["tanh_backward"]["message"] and "expected" in said and not said.endswith(":")
    suite = root.find("testsuite")
    assert suite.get("name") == "autograd basics" and (suite.get("tests"), suite.get("errors")) == ("8", "1")


def test_start_never_overwrites_a_workspace(tmp_path, capsys):
    ws = tmp_path / "ws"
    assert gradflow("start", str(ws)) == 0
    mine = ws / workspace.file_name(EXERCISES[0])
    mine.write_text("# my work\n")
    (ws / workspace.file_name(EXERCISES[5])).unlink()
    capsys.readouterr()
    assert gradflow("start", str(ws)) == 2
    err = capsys.readouterr().err
    assert err.startswith("gradflow exercises: ") and err.count("\n") == 1 and "never overwrites your work" in err
    assert mine.read_text() == "# my work\n" and not (ws / workspace.file_name(EXERCISES[5])).exists()


def test_a_folder_without_exercises_is_one_line(tmp_path, capsys):
    for action in ("check", "train"):
        assert gradflow(action, "--dir", str(tmp_path)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "holds no exercise files: write them with `gradflow exercises start" in err


def test_bad_names_give_one_line_with_the_names(blank, capsys):
    for argv in (["check", "nope", "--dir", str(blank)], ["solution", "nope", "--yes"]):
        assert gradflow(*argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("gradflow exercises: no exercise named 'nope'; the exercises: add_backward, ")
        assert err.count("\n") == 1 and "kv_cache_append" in err


def test_solution_asks_first(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", type("NoTerminal", (), {"isatty": staticmethod(lambda: False)})())
    assert gradflow("solution", "mul_backward") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "confirm with --yes" in err
    assert gradflow("solution", "mul_backward", "--yes") == 0
    out = capsys.readouterr().out
    assert "from gradflow/engine/ops/elementwise.py" in out and find("mul_backward").piece.source() in out
    monkeypatch.setattr(sys, "stdin", type("Terminal", (), {"isatty": staticmethod(lambda: True)})())
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert gradflow("solution", "layer_norm_backward") == 0
    assert capsys.readouterr().out == "not shown\n"
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    assert gradflow("solution", "layer_norm_backward") == 0
    out = capsys.readouterr().out
    assert "from gradflow.engine.ops.norm import sum_over_rows" in out and "def backward(ctx, grad):" in out


def test_the_capstone_waits_for_the_training_track(blank, capsys):
    assert gradflow("train", "--dir", str(blank)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "do not pass yet (the first: add_backward)" in err


def test_the_capstone_trains_on_the_learners_pieces(solved, capsys, monkeypatch):
    from gradflow.engine.ops import norm

    calls = []
    learned = workspace.load

    def counting(exercise, directory):  # the learner's layer norm must be the one the model runs
        learner = learned(exercise, directory)
        if exercise.name == "layer_norm_backward":
            calls.append(learner)
        return learner

    monkeypatch.setattr(workspace, "load", counting)
    argv = ["--max-iters", "2", "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "8"]
    argv += ["--sample-tokens", "12"]
    assert gradflow("train", "--dir", str(solved), *argv, "--batch-size", "2", "--eval-iters", "1") == 0
    out = capsys.readouterr().out
    losses = [float(line.split()[-1]) for line in out.splitlines() if "validation loss" in line]
    assert len(losses) == 2 and np.isfinite(losses).all() and losses[0] == pytest.approx(losses[1], abs=1e-4)
    samples = [
        line.split(": ", 1)[1] for line in out.splitlines() if line.strip().startswith(("gradflow's: '", "yours: '"))
    ]
    assert len(samples) == 2 and all(s.startswith("'The ") and len(s) > 10 for s in samples), out
    assert (solved / "capstone.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "both loss curves:" in out
    assert f"What trained this model was yours, {len(workspace.capstone_exercises())} pieces" in out
    assert "adam_step" in out
    assert [c.calls > 0 for c in calls] == [True, True]  # the gate's check, then the training run
    assert norm.LayerNorm.__dict__["backward"].__func__ is find("layer_norm_backward").piece.function


def test_a_deleted_file_is_told_how_to_come_back(tmp_path, capsys):
    ws = tmp_path / "ws"
    workspace.start(ws)
    e = find("unbroadcast")
    mine = ws / workspace.file_name(EXERCISES[0])
    mine.write_text("# my work\n")
    (ws / workspace.file_name(e)).unlink()
    said = str(workspace.check(e, ws).said)
    command = said.split("`")[1].split()
    assert command[:3] == ["gradflow", "exercises", "start"] and command[-2:] == ["--restore", "unbroadcast"]
    assert gradflow(*command[2:]) == 0 and (ws / workspace.file_name(e)).read_text() == workspace.file_text(e)
    assert gradflow("start", str(ws), "--restore", EXERCISES[0].name) == 2  # never over work
    assert "never over your work" in capsys.readouterr().err and mine.read_text() == "# my work\n"


def test_named_mistakes_where_they_recur(tmp_path):
    """The softmax's mistakes inside attention, the row weight of cross-entropy along the classes, and
    per-tensor clipping each get their own name, not a generic difference."""
    said = str(attempt(tmp_path, "attention_backward", "attn * (dattn - (dattn * attn).sum(axis=-1, keepdims=True))",
                       "attn * (1 - attn) * dattn"))  # fmt: skip
    assert "only the diagonal of the softmax's Jacobian" in said and "inside attention" in said
    said = str(attempt(tmp_path, "cross_entropy_backward", "return dz * weight[:, None]", "return dz * weight"))
    assert "keepdims lost" in said and "[:, None]" in said  # (5, 6) logits: numpy refuses (5, 6) * (5,)
    per_tensor = (
        "    for p in (p for p in parameters if p.grad is not None):\n"
        "        own = max_norm / (np.linalg.norm(np.asarray(p.grad).ravel(), norm_type) + 1e-6)\n"
        "        if own < 1:\n            g = p.grad.in_place()\n            g *= own\n"
    )
    said = str(attempt(tmp_path, "clip_grad_norm", "    if scale < 1:\n", per_tensor + "    if False:\n"))
    assert "each gradient is clipped by its own norm" in said


def test_the_capstone_says_what_a_gap_between_the_runs_means():
    """The same seed and batches: a gap is rounding only while it stays near float32's few parts in 1e8."""
    assert command._gap_in_words(0.0, 2.72).startswith("the same to the last digit")
    assert command._gap_in_words(-2.38e-08, 2.72).startswith("float32 rounding")  # Adam's denominator in one line
    assert command._gap_in_words(1e-4, 2.72).startswith("more than float32 rounding explains")


def test_a_bad_seed_timeout_or_restore_is_one_line(tmp_path, capsys):
    ws = tmp_path / "ws"
    workspace.start(ws)
    for argv, said in (
        (("check", "--dir", str(ws), "--seed", "-1"), "argument --seed: a seed is from 0 to 2^31 - 1, got -1"),
        (("check", "--dir", str(ws), "--timeout", "0"), "argument --timeout: seconds from more than 0 to 3600, got 0"),
        (("start", str(ws), "--restore", "nosuch"), "no exercise named 'nosuch'"),
        (("start", str(tmp_path / "none"), "--restore", "mul_backward"), "is not a folder"),
    ):
        capsys.readouterr()
        try:
            status = gradflow(*argv)
        except SystemExit as refused:  # the parser's own refusal, as the command line exits with it
            status = refused.code
        err = capsys.readouterr().err
        assert status == 2 and err.count("\n") == 1 and said in err, err
