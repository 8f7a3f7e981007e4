"""Every tutorial notebook runs from a clean kernel without error, ships with its outputs saved (its
your-turn cells without theirs, so that no hint or answer shows before the learner asks), and its
your-turn cells are right both ways: blank, they print "not yet" and a hint; solved, every check passes.

A your-turn cell is tagged `your-turn`. Its blanks are the lines that hold `# YOUR CODE`, and its
metadata `solution` holds one line per blank, in order. The suite runs each notebook once, with every
your-turn cell run twice in a row: as committed (each of its checks must say "not yet") and then with
its blanks replaced by the solution (each check must say ✓). One run covers both modes because no
other cell reads a name that a your-turn cell binds (checked below): what a blank leaves behind is
seen by nobody.
"""

import ast
import copy
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from gradflow.exercises.notebook import check

TUTORIALS = sorted((Path(__file__).resolve().parents[1] / "tutorials").glob("*.ipynb"))
IDS = [p.stem for p in TUTORIALS]
TAG, BLANK = "your-turn", "# YOUR CODE"
RIGHT, NOT_YET = "✓", "not yet:"
# sections that hold no new material of their own, so no exercise: a closing summary, the errata of the source documents
NO_EXERCISE = re.compile(r"^## (Summary|Errata in the walk-through, in one place|Aside: where the source documents)")


def read(path):
    return nbformat.read(path, as_version=4)


def your_turn(cell):
    return cell.cell_type == "code" and TAG in cell.metadata.get("tags", [])


def solved(cell):
    """The cell with each `# YOUR CODE` line replaced by the next line of its solution."""
    answers = iter(cell.metadata["solution"])
    lines = [next(answers) if BLANK in line else line for line in cell.source.splitlines()]
    out = copy.deepcopy(cell)
    out.source = "\n".join(lines)
    out.metadata["tags"] = ["solved"]
    return out


def reports(cell):
    """The lines that check() printed: one per check, starting with ✓ or "not yet:"."""
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    return [line for line in text.splitlines() if line.startswith((RIGHT, NOT_YET))]


def parsed(source):
    """A cell's syntax tree, its IPython % and ! lines left out."""
    return ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))


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
        assert blanks and len(blanks) == len(cell.metadata.get("solution", [])), cell.source
        assert "check(" in cell.source, cell.source
        assert not cell.outputs, (
            f"{path.name}: a your-turn cell saved with its output (a hint shows before it is asked):\n{cell.source}"
        )


def answer(line):
    """A solution line's answer, without spaces: what follows its `name =`, its `return` or its `if`."""
    code = line.strip().rstrip(":")
    code = re.sub(r"^(return|if)\s+", "", code)
    code = re.sub(r"^[A-Za-z_][A-Za-z_0-9.\[\]\"]*\s*(-=|\+=|=)\s*", "", code)
    return re.sub(r"\s+", "", code)


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_no_your_turn_cell_shows_its_solution(path):
    """No answer ships visible: neither a your-turn cell's source (its blanks, comments and hints) nor a stored
    output holds an answer of its solution (answers under 5 characters, a number or a name, are not
    searched for: they would be found in any text)."""
    for cell in filter(your_turn, read(path).cells):
        visible = re.sub(r"\s+", "", cell.source + "".join(o.get("text", "") for o in cell.outputs))
        for line in cell.metadata["solution"]:
            shown = answer(line)
            assert len(shown) < 5 or shown not in visible, (
                f"{path.name}: the answer {line.strip()!r} shows in:\n{cell.source}"
            )


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_every_check_gives_its_hint_in_levels(path):
    """Each check of a your-turn cell passes a tuple of at least two hints (the idea first, then more)."""
    for cell in filter(your_turn, read(path).cells):
        for call in ast.walk(parsed(cell.source)):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "check":
                hints = call.args[2]
                assert isinstance(hints, ast.Tuple) and len(hints.elts) >= 2, f"{path.name}: {ast.unparse(call)}"


def test_the_hints_say_more_each_time(capsys):
    check(..., 1.0, ("the idea", "the shape", "the formula"))
    check(2.0, 1.0, ("the idea", "the shape", "the formula"))
    check(lambda: 1 / 0, 1.0, ("the idea", "the shape", "the formula"))
    check(..., 1.0, ("the idea", "the shape", "the formula"))
    check(1.0, 1.0, ("the idea", "the shape", "the formula"))
    assert capsys.readouterr().out.splitlines() == [
        "not yet: the idea (run it again for more: hint 1 of 3)",
        "not yet: the shape (run it again for more: hint 2 of 3)",
        "not yet: the formula (ZeroDivisionError: division by zero)",
        "not yet: the formula",
        "✓ right",
    ]


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_no_cell_reads_what_a_your_turn_cell_binds(path):
    nb = read(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        if your_turn(cell):
            leaked = names_bound(cell.source) & set().union(*(names_read(c.source) for c in code[i + 1 :]))
            assert not leaked, f"{path.name}: later cells read {sorted(leaked)}, bound in:\n{cell.source}"


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_tutorial_runs_with_blanks_and_with_solutions(path, tmp_path):
    nb = read(path)
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if your_turn(cell):
            cells.append(solved(cell))
    nb.cells = cells
    # No time limit on a notebook (speed is the benchmarks' business). The per-cell timeout is there for a hang
    # alone: without one, nbclient waits for a kernel that never answers (a deadlock, an endless loop)
    # and the suite with it. 600 s is four times the slowest cell (notebook 06's training run,
    # about 150 s on a busy machine), so load alone does not trip it.
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    for blank, answer in zip(cells, cells[1:]):
        if your_turn(blank):
            said, says = reports(blank), reports(answer)
            assert said and all(r.startswith(NOT_YET) for r in said), (blank.source, said)
            assert len(says) == len(said) and all(r.startswith(RIGHT) for r in says), (answer.source, says)
