"""The package's layers: each folder imports only the folders below it, and only the CLI imports the models.

The order, lowest first (gradflow/__init__.py says the same in words):
engine -> fast -> nn, optim, text -> pretrained -> training, inference -> tools -> gradflow.models -> cli.
"""

import ast
from pathlib import Path

import pytest

import gradflow

PACKAGE = Path(gradflow.__file__).parent
MODELS = Path(__import__("gradflow.models", fromlist=["_"]).__file__).parent
RANK = {"engine": 0, "fast": 1, "nn": 2, "optim": 2, "text": 2, "pretrained": 3, "training": 4, "inference": 4}
RANK |= {"tools": 5, "exercises": 6, "models": 6, "cli": 7}
FOLDERS = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists() and p != MODELS)


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


def test_every_folder_has_a_rank_and_says_what_it_is():
    assert set(FOLDERS) == set(RANK) - {"models"}, "a new folder needs its place in RANK"
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
