"""The package's layers: each folder imports only the folders below it, and only the CLI imports the models.

The order, lowest first (gradflow/__init__.py says the same in words):
engine -> optim -> fast -> nn, text, cuda, utils -> pretrained -> training, inference -> tools -> models -> cli.

Beside the layers, the compatibility surface (docs/layout.md): the modules that exist only so that
PyTorch's import paths work (torch.cuda, torch.backends, torch.utils, torch.amp, torch.distributed,
torch.onnx, torch.serialization, torch.nn.parallel, torch.nn.utils). Two rules hold for them: each
defines only names PyTorch has at that path, and no core file imports them (only the package's and
nn's __init__.py, which put them at PyTorch's paths).
"""

import ast
import importlib
import importlib.util
import os
import re
from pathlib import Path

import pytest

import gradflow

PACKAGE = Path(gradflow.__file__).parent
MODELS = Path(__import__("gradflow.models", fromlist=["_"]).__file__).parent
RANK = {"engine": 0, "optim": 1, "fast": 2, "nn": 3, "text": 3, "cuda": 3, "backends": 3, "utils": 3, "pretrained": 4}
RANK |= {"training": 5, "inference": 5}
RANK |= {"tools": 6, "exercises": 7, "models": 7, "cli": 8}
RANK |= {"amp": 2, "distributed": 3, "onnx": 3, "serialization": 3}  # the top-level files (cuda.amp imports amp)
FOLDERS = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists() and p != MODELS)
TOP_FILES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem in RANK)

# The compatibility surface: PyTorch's paths, gradflow's answers (docs/layout.md, "PyTorch's paths").
COMPATIBILITY = ["cuda", "backends", "utils", "amp", "distributed", "onnx", "serialization", "nn.parallel", "nn.utils"]
COMPATIBILITY += ["nn.modules", "nn.parameter"]  # torch.nn.modules.<sub> and torch.nn.parameter: the paths pickles name
EXPOSERS = [PACKAGE / "__init__.py", PACKAGE / "nn" / "__init__.py"]  # they put the surface at PyTorch's paths


def imported_modules(path):
    """Every gradflow module a file imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: a relative import; gradflow writes where a name lives in full")
    return {m for m in found if m.startswith("gradflow.")}


def folder_of(module):
    """The layer a module belongs to ("engine", "models", ...), or None for gradflow's top-level files."""
    name = module.split(".")[1]
    return name if name in RANK else None


def library_files():
    for folder in FOLDERS:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            yield folder, path
    for name in TOP_FILES:
        yield name, PACKAGE / f"{name}.py"


def test_every_folder_has_a_rank_and_says_what_it_is():
    assert set(FOLDERS) | set(TOP_FILES) == set(RANK) - {"models"}, "a new folder needs its place in RANK"
    for folder in FOLDERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text()))
        assert doc and len(doc.split()) >= 12, f"gradflow/{folder}/__init__.py: a paragraph on what the folder is"


@pytest.mark.parametrize("folder, path", list(library_files()), ids=lambda v: str(v).split("gradflow/")[-1])
def test_a_layer_imports_only_the_layers_below_it(folder, path):
    for module in imported_modules(path):
        other = folder_of(module)
        if other is None or other == folder:
            continue
        assert other != "models" or folder == "cli", f"{path}: imports {module}; only gradflow/cli imports the models"
        assert RANK[other] < RANK[folder], f"{path} ({folder}) imports {module} ({other}), a layer not below it"


def test_the_models_use_the_library_but_not_its_command_line():
    for path in sorted(MODELS.glob("*.py")):
        for module in imported_modules(path):
            other = folder_of(module)
            assert other is None or RANK[other] <= RANK["models"], f"{path}: imports {module}"


def test_importing_gradflow_loads_no_model():
    import subprocess
    import sys

    code = "import sys, gradflow; print(sorted(m for m in sys.modules if m.startswith('gradflow.models')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# --- the engine's walk reads in one screen ---------------------------------------------------------

AUTOGRAD = PACKAGE / "engine" / "autograd.py"


def complexity(function):
    """Cyclomatic complexity as radon counts it: 1, plus one per if (and conditional expression), for,
    while, except, assert and comprehension (and per `if` inside one), one per `else` of a for, while or
    try, and one per extra operand of and/or. A function defined inside is a function of its own."""
    count, todo = 1, list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.If, ast.IfExp, ast.Assert)):
            count += 1
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            count += 1 + bool(node.orelse)
        elif isinstance(node, ast.Try):
            count += len(node.handlers) + bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        elif isinstance(node, ast.Match):
            count += sum(not (isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None) for c in node.cases)
        todo.extend(ast.iter_child_nodes(node))
    return count


def autograd_function(qualname):
    """The ast of a function of autograd.py, `backward` or `Function.apply`."""
    body = ast.parse(AUTOGRAD.read_text()).body
    *classes, name = qualname.split(".")
    for cls in classes:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_complexity_is_counted_as_radon_counts_it():
    source = '''
def f(xs, y):
    """if, for, while, except, and, or in words do not count"""
    for x in xs:
        if x and y or not x:
            continue
        elif x:
            y = [a for a in xs if a if not a] + [b for b in xs]
    while y:
        y = y - 1 if y > 2 else 0
    else:
        pass
    try:
        assert y
    except ValueError:
        pass
    except TypeError:
        pass
    else:
        pass

    def inner(z):
        return z if z else None
    return inner
'''
    # radon cc gives f 17: for 1, if 1, `and`/`or` 2, elif 1, two comprehensions 1 + 2 and 1, while 1 and
    # its else 1, the conditional expression 1, assert 1, two excepts 2 and the try's else 1
    assert complexity(ast.parse(source).body[0]) == 17


def test_autograd_imports_no_tool():
    """The tools that watch ops run attach at engine/hooks.py; the file a learner reads first knows none."""
    for module in imported_modules(AUTOGRAD):
        assert not module.startswith("gradflow.tools"), f"autograd.py imports {module}"
        assert not module.startswith("gradflow.engine.anomaly"), f"autograd.py imports {module}"


@pytest.mark.parametrize("qualname, most_lines, most_complexity", [("backward", 35, 10), ("Function.apply", 15, 8)])
def test_the_walk_and_apply_read_in_one_screen(qualname, most_lines, most_complexity):
    function = autograd_function(qualname)
    lines = function.end_lineno - function.lineno + 1
    assert lines <= most_lines, f"autograd.{qualname} is {lines} lines; at most {most_lines}"
    assert complexity(function) <= most_complexity, (
        f"autograd.{qualname} has cyclomatic complexity {complexity(function)}; at most {most_complexity}"
    )


# --- the compatibility surface ----------------------------------------------------------------------


def compatibility_files():
    """(gradflow's module name, its file) for every module of the surface."""
    for name in COMPATIBILITY:
        path = PACKAGE.joinpath(*name.split("."))
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
        for file in files:
            parts = file.relative_to(PACKAGE).with_suffix("").parts
            yield "gradflow." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts), file


def is_compatibility(module):
    return any(module == f"gradflow.{name}" or module.startswith(f"gradflow.{name}.") for name in COMPATIBILITY)


def test_no_core_file_imports_the_compatibility_surface():
    surface = {file for _, file in compatibility_files()}
    for _, path in library_files():
        if path in surface or path in EXPOSERS:
            continue
        used = sorted(m for m in imported_modules(path) if is_compatibility(m))
        assert not used, f"{path} imports {used[0]}: the compatibility surface is PyTorch's paths, not a library"


def public_names(path):
    """The functions, classes and (lower-case) values a file defines at its top, without a leading _."""
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name) and t.id != t.id.upper()]
    return [name for name in names if not name.startswith("_")]


def torch_has(module):
    """Whether PyTorch's module of that name has a name: asked of the module (torch.backends.cudnn answers
    through properties), or read from its source where importing it needs an optional package
    (torch.utils.tensorboard needs tensorboard)."""
    try:
        theirs = importlib.import_module(module)
        return lambda name: hasattr(theirs, name)
    except ImportError:
        spec = importlib.util.find_spec(module)
        assert spec is not None, f"PyTorch has no module {module}"
        tree = ast.parse(Path(spec.origin).read_text())
        names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        return names.__contains__


@pytest.mark.parametrize("module, path", list(compatibility_files()), ids=lambda v: str(v).split("gradflow/")[-1])
def test_the_compatibility_surface_holds_only_pytorchs_paths(module, path):
    torch = pytest.importorskip("torch") if os.environ.get("GRADFLOW_REQUIRE_TORCH") != "1" else __import__("torch")
    theirs = torch_has("torch" + module.removeprefix("gradflow"))
    stray = [name for name in public_names(path) if not theirs(name) and not hasattr(torch, name)]
    assert not stray, f"{path} defines {stray}, which PyTorch has neither at {module} nor at its top level"


def test_no_test_file_imports_another():
    """What test files share lives in tests/helpers.py (and its fixtures in conftest.py), also for the
    scripts a test writes out for mpiexec or a subprocess."""
    importing = re.compile(r"^\s*(?:from|import)\s+(test_\w+)", re.M)
    for path in sorted(Path(__file__).parent.glob("*.py")):
        found = importing.findall(path.read_text(encoding="utf-8"))
        assert not found, f"{path.name} imports {found[0]}: what test files share belongs in tests/helpers.py"


# --- the loop and the ranks --------------------------------------------------------------------------

RANKS = ["training/mpi.py", "training/distributed.py", "training/__init__.py"]  # mpi.py runs on them
MPI4PY = re.compile(r"^\s*(?:from|import)\s+mpi4py\b", re.M)


def test_only_the_mpi_files_know_of_ranks():
    """The Trainer holds the loop and the command line parses flags: running on MPI ranks attaches from
    training/mpi.py (the hook OnRanks, and the entry `gradflow train` calls), built on distributed.py. No
    other file imports distributed.py or mpi4py, so a step followed from `gradflow train` to the optimizer
    goes down the layers without climbing back."""
    for _, path in library_files():
        if path.relative_to(PACKAGE).as_posix() in RANKS:
            continue
        assert "gradflow.training.distributed" not in imported_modules(path), f"{path}: ranks are mpi.py's"
        assert not MPI4PY.search(path.read_text(encoding="utf-8")), f"{path}: mpi4py is distributed.py's"


def test_the_trainer_reads_in_one_sitting():
    """trainer.py is the loop: a run's settings and their checks are settings.py's, the log's reading
    metrics.py's, running on ranks mpi.py's."""
    lines = (PACKAGE / "training" / "trainer.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 350, f"training/trainer.py has {lines} lines; at most 350"
