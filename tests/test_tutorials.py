"""Every tutorial notebook runs from a clean kernel without error, ships with its outputs saved (its
your-turn cells without theirs), and shows no answer before the learner asks: its your-turn cells hold
a blank and `check(id, answer, **data)`, while the expected value, the hints and the solution live in
gradflow/exercises/notebook_checks.py.

A your-turn cell is tagged `your-turn`; its blanks are the lines that hold `# YOUR CODE`. The suite runs
each notebook once, with every your-turn cell run three ways in a row: as committed (each check must say
"fill in the blank"), with its blanks replaced by the table's solutions (each check must say ✓), and,
in that solved cell, with each answer made wrong (times 2, negated, transposed, an axis of size 1
dropped: each must say "not yet", with the diagnosis's hint where diagnose recognises the mistake). One
run covers all because no other cell reads a name that a your-turn cell binds (checked below).
"""

import ast
import copy
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from gradflow.exercises import notebook
from gradflow.exercises.notebook_checks import EXERCISES

TUTORIALS = sorted((Path(__file__).resolve().parents[1] / "tutorials").glob("*.ipynb"))
IDS = [p.stem for p in TUTORIALS]
TAG, BLANK = "your-turn", "# YOUR CODE"
RIGHT, NOT_YET, FILL = "✓", "not yet:", "not yet: fill in the blank"
# sections that hold no new material of their own, so no exercise: a closing summary, the errata of the source documents
NO_EXERCISE = re.compile(r"^## (Summary|Errata in the walk-through, in one place|Aside: where the source documents)")
# the hint each wrong variant must bring when diagnose can recognise it (see AUDIT)
DIAGNOSED = {
    "times 2": "scale factor off",
    "negated": "sign error",
    "transposed": "transpose",
    "axis dropped": "keepdims",
}


def read(path):
    return nbformat.read(path, as_version=4)


def your_turn(cell):
    return cell.cell_type == "code" and TAG in cell.metadata.get("tags", [])


def parsed(source):
    """A cell's syntax tree, its IPython % and ! lines left out."""
    return ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))


def check_calls(source):
    """The cell's check(...) calls, in order."""
    calls = [n for n in ast.walk(parsed(source)) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "check"]
    return sorted(calls, key=lambda call: call.lineno)


def exercise_ids(cell):
    return [call.args[0].value for call in check_calls(cell.source)]


def solved(cell):
    """The cell with each `# YOUR CODE` line replaced by the next solution line of its checks, at its indent,
    and each check(...) by _audit(...) (AUDIT), which also tries wrong answers."""
    answers = iter([line for name in exercise_ids(cell) for line in EXERCISES[name].solution])
    lines = [
        line[: len(line) - len(line.lstrip())] + next(answers) if BLANK in line else line
        for line in cell.source.splitlines()
    ]
    out = copy.deepcopy(cell)
    out.source = re.sub(r"^check\(", "_audit(", "\n".join(lines), flags=re.M)
    out.metadata["tags"] = ["solved"]
    return out


# Run first in each notebook of the test run: _audit(name, answer, **data) checks the right answer, then says
# whether a data argument is itself the answer (pasteable), then checks each wrong variant of the answer.
AUDIT = """
import numpy as _np
from gradflow.exercises.notebook import check as _check
from gradflow.exercises.notebook_checks import EXERCISES as _EXERCISES


def _same(a, b):
    try:
        a, b = (_np.asarray(getattr(v, "data", v), dtype=_np.float64) for v in (a, b))
        return a.shape == b.shape and bool(_np.allclose(a, b))
    except (TypeError, ValueError):
        return isinstance(b, (str, set, dict)) and type(a) is type(b) and a == b


def _variants(value):
    a = _np.asarray(getattr(value, "data", value))
    if isinstance(value, (set, str, bool, _np.bool_)) or a.dtype.kind in "biuO":
        if isinstance(value, (set, str)):
            return {"changed": value ^ {"?"} if isinstance(value, set) else value + "?"}
        return {"changed": _np.logical_not(a) if a.dtype.kind == "b" else a + 1}
    out = {"times 2": 2 * a, "negated": -a}
    if a.ndim >= 2 and min(a.shape[-2:]) > 1 and not _same(a, _np.swapaxes(a, -1, -2)):  # not a vector's reshape
        out["transposed"] = _np.swapaxes(a, -1, -2)
    if 1 in a.shape:
        out["axis dropped"] = a.squeeze(axis=a.shape.index(1))
    return out


def _audit(name, got, **data):
    _check(name, got, **data)
    value = got() if callable(got) else got
    expected = _EXERCISES[name].expected(**data)
    for key, v in data.items():
        if _same(v, expected):
            print(f"pasteable: {name} {key}")
    for label, wrong in _variants(value).items():
        print(f"wrong {label} | ", end="")
        _check(name, wrong, **data)
"""


def reports(cell):
    """The lines that check() printed: one per check, starting with ✓ or "not yet:"."""
    return [line for line in stream(cell).splitlines() if line.startswith((RIGHT, NOT_YET))]


def stream(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_there_are_tutorials():
    assert len(TUTORIALS) >= 9


def test_notebooks_quote_the_same_corrections():
    """A correction of a source document quoted by several notebooks (as `NAME = value  # ...`, each
    notebook asserting its value from the model) has one value everywhere."""
    quoted = {}
    for path in TUTORIALS:
        for cell in read(path).cells:
            for name, value in re.findall(r"^(LOSS_ON|P_HALF) = (.+?)  #", cell.source, flags=re.M):
                quoted.setdefault(name, {})[path.stem] = ast.literal_eval(value)
    assert set(quoted) == {"LOSS_ON", "P_HALF"}
    for name, values in quoted.items():
        assert len(values) >= 2 and len({repr(v) for v in values.values()}) == 1, (name, values)


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_tutorial_is_saved_with_outputs_and_its_prerequisites(path):
    nb = read(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("outputs") is not None for c in code)
    assert any(c.outputs for c in code), f"{path.name} was committed without its outputs"
    first = nb.cells[0].source
    assert nb.cells[0].cell_type == "markdown" and "**Prerequisites:**" in first and "**Builds on:**" in first


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_every_section_ends_with_checked_your_turn_cells(path):
    nb = read(path)
    sections, current = [], None
    for cell in nb.cells:
        heading = next((h for h in cell.source.splitlines() if h.startswith("## ")), None)
        if cell.cell_type == "markdown" and heading:
            current = [heading, 0]
            sections.append(current)
        if current and your_turn(cell):
            current[1] += 1
    assert sections, f"{path.name} has no sections"
    missing = [h for h, n in sections if n == 0 and not NO_EXERCISE.match(h)]
    assert not missing, f"{path.name}: sections without a your-turn cell: {missing}"
    for cell in filter(your_turn, nb.cells):
        blanks = [line for line in cell.source.splitlines() if BLANK in line]
        names = exercise_ids(cell)
        assert names and all(name in EXERCISES for name in names), cell.source
        assert blanks and len(blanks) == sum(len(EXERCISES[name].solution) for name in names), cell.source
        assert not cell.outputs, (
            f"{path.name}: a your-turn cell saved with its output (a hint shows before it is asked):\n{cell.source}"
        )


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_no_your_turn_cell_keeps_a_solution_in_its_metadata(path):
    for cell in filter(your_turn, read(path).cells):
        assert set(cell.metadata) <= {"tags", "execution"}, (
            f"{path.name}: metadata {sorted(cell.metadata)} in:\n{cell.source}"
        )


def test_every_exercise_is_checked_once_and_has_its_three_levels():
    code = [cell for path in TUTORIALS for cell in read(path).cells if cell.cell_type == "code"]
    used = [name for cell in code for name in set(exercise_ids(cell))]
    assert sorted(used) == sorted(EXERCISES), "an exercise of the table is checked in no cell, or in two"
    for name, exercise in EXERCISES.items():
        assert len(exercise.hints) == 3 and all(isinstance(h, str) for h in exercise.hints), name


def squeezed(text):
    return re.sub(r"\s+", "", text)


def answer(line):
    """A solution line's answer, without spaces: what follows its `name =`, its `return` or its `if`."""
    code = line.strip().rstrip(":")
    code = re.sub(r"^(return|if)\s+", "", code)
    code = re.sub(r"^[A-Za-z_][A-Za-z_0-9.\[\]\"]*\s*(-=|\+=|=)\s*", "", code)
    return squeezed(code)


def test_no_notebook_shows_a_hint_or_a_solution():
    """No hint level of the table is in any notebook's cells or saved outputs, and no solution's answer is in
    any your-turn cell, markdown cell or saved output (spaces ignored; answers under 5 characters, a number or a
    name, are not searched for: they are in any text). The lessons' own code cells may hold an answer: a few
    exercises ask to write again what the lesson ran (the depth-first order, a perplexity, a bias's gradient)."""
    cells = [c for p in TUTORIALS for c in read(p).cells]
    outputs = "".join(str(o) for c in cells for o in c.get("outputs", []))
    everything = squeezed("".join(c.source for c in cells) + outputs)
    shown = squeezed("".join(c.source for c in cells if c.cell_type == "markdown" or your_turn(c)) + outputs)
    for name, exercise in EXERCISES.items():
        for hint in exercise.hints:
            assert squeezed(hint) not in everything, f"{name}: the hint {hint!r} shows in a notebook"
        for line in exercise.solution:
            assert len(answer(line)) < 5 or answer(line) not in shown, f"{name}: the answer {line!r} shows"


# what a check's data may be: the problem's names and numbers, picked out of them or built by a constructor;
# no arithmetic and no method call, which is how an expected value is computed
DATA = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Slice, ast.Load)


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_a_check_is_passed_data_not_an_answer(path):
    for cell in filter(your_turn, read(path).cells):
        for call in check_calls(cell.source):
            assert len(call.args) == 2 and isinstance(call.args[0], ast.Constant), ast.unparse(call)
            for keyword in call.keywords:
                for node in ast.walk(keyword.value):
                    constructor = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    negative = isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)
                    is_data = (
                        isinstance(node, DATA) or constructor or negative or isinstance(node, (ast.keyword, ast.USub))
                    )
                    assert is_data, f"{path.name}: {keyword.arg}={ast.unparse(keyword.value)} computes something"


def test_a_blank_is_told_to_fill_then_diagnosis_then_the_ladder(capsys, monkeypatch):
    """A blank uses up no hint level; a recognised mistake gets its diagnosis; only an unrecognised one
    climbs the ladder, one level per run, so the formula comes on the third such run, and the solution
    after the last level."""
    monkeypatch.setattr(notebook, "_shown", {})
    name, hints = "01.bias_grad", EXERCISES["01.bias_grad"].hints
    A_bar = np.arange(8.0).reshape(4, 2)
    check = lambda got: notebook.check(name, got, A_bar=A_bar, shape=(4, 1))  # noqa: E731
    check(...)
    check(lambda: ...)
    check(A_bar.sum(axis=1))  # keepdims lost
    check(A_bar)  # not summed back over the broadcast axis
    check(-A_bar.sum(axis=1, keepdims=True))
    notebook.solution(name)
    check(A_bar[:, :1])  # wrong, and nothing diagnose recognises
    check(A_bar[:, 1:])
    check(A_bar[:, :1] * 0)
    notebook.solution(name)
    check(A_bar.sum(axis=1, keepdims=True))
    said = capsys.readouterr().out.splitlines()
    assert said[0] == said[1] and said[0].startswith(FILL)
    assert "keepdims lost" in said[2] and "not summed back over the broadcast axes" in said[3]
    assert "sign error" in said[4] and "hint(" in said[5]
    assert not any(hints[2] in line for line in said[:8])
    assert [hints[0] in said[6], hints[1] in said[7], hints[2] in said[8]] == [True, True, True]
    assert said[9] == EXERCISES[name].solution[0] and said[10] == "✓ right"
    assert not any(re.search(r"expected -?\d", line) for line in said), "a value the learner could paste"


def test_hint_asks_for_the_next_level(capsys, monkeypatch):
    monkeypatch.setattr(notebook, "_shown", {})
    for _ in range(4):
        notebook.hint("00.partial_x")
    notebook.solution("00.partial_x")
    said = capsys.readouterr().out.splitlines()
    levels = EXERCISES["00.partial_x"].hints
    assert [level in line for level, line in zip(levels + levels[-1:], said)] == [True] * 4
    assert said[4] == EXERCISES["00.partial_x"].solution[0]


def names_bound(source):
    """The names a cell binds at its top level: assigned, defined or imported (not a comprehension's own)."""
    bound = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif not isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            for child in ast.iter_child_nodes(node):
                visit(child)

    visit(parsed(source))
    return bound


def names_read(source):
    return {n.id for n in ast.walk(parsed(source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_no_cell_reads_what_a_your_turn_cell_binds(path):
    nb = read(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        if your_turn(cell):
            leaked = names_bound(cell.source) & set().union(*(names_read(c.source) for c in code[i + 1 :]))
            assert not leaked, f"{path.name}: later cells read {sorted(leaked)}, bound in:\n{cell.source}"


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_tutorial_runs_with_blanks_with_solutions_and_with_wrong_answers(path, tmp_path):
    nb = read(path)
    cells = [nbformat.v4.new_code_cell(AUDIT)]
    for cell in nb.cells:
        cells.append(cell)
        if your_turn(cell):
            cells.append(solved(cell))
    nb.cells = cells
    # No time limit on a notebook (speed is the benchmarks' business): the per-cell timeout guards against a
    # true hang alone, since without one nbclient waits for a kernel that never answers (a deadlock, an
    # endless loop) and the suite with it. An hour is 25 times the slowest cell here (notebook 06's
    # training run, 150 s on a busy machine) and 8 times what it took on a 2-core machine loaded with a
    # second test run (7.5 min): a slow machine never trips it, and a hang still ends the run.
    NotebookClient(nb, timeout=3600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    for blank, answer in zip(cells, cells[1:]):
        if your_turn(blank):
            said, says = reports(blank), reports(answer)
            assert len(said) == len(check_calls(blank.source)) and all(r.startswith(FILL) for r in said), (
                blank.source,
                said,
            )
            assert len(says) == len(said) and all(r.startswith(RIGHT) for r in says), (answer.source, says)
            out = stream(answer)
            assert "pasteable:" not in out, (answer.source, out)
            for line in out.splitlines():
                if line.startswith("wrong "):
                    label, _, verdict = line[len("wrong ") :].partition(" | ")
                    assert verdict.startswith(NOT_YET) and not verdict.startswith(FILL), (answer.source, line)
                    assert DIAGNOSED.get(label, "") in verdict, (answer.source, line)
