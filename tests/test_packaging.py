"""What an installed gradflow promises: one version everywhere, a license, numba's compiled loops
wherever numba has a wheel and nowhere else, no paths outside the repository, and example models
that a user's own `models` package cannot shadow.

The checks of repository files (pyproject.toml, LICENSE, the files git tracks) skip when the tests
run from a copy outside a checkout, as CI does against the installed wheel.
"""

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement  # pytest's own dependency

import gradflow

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
in_checkout = pytest.mark.skipif(not PYPROJECT.is_file(), reason="not run from a checkout or an sdist")


def table_texts(toml):
    """{table name: its text} of a TOML file (no parser needed, tomllib is 3.11+)."""
    parts = re.split(r"^\[([^\]]+)\]\s*$", toml, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def run(*args, cwd=None):
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


# --- one version --------------------------------------------------------------------------------


def test_python_m_gradflow_prints_the_version():
    assert run(sys.executable, "-m", "gradflow", "--version") == f"gradflow {gradflow.__version__}\n"


def test_the_gradflow_command_prints_the_version():
    # the script installed beside this interpreter (a virtual environment's bin/), else the one on PATH
    exe = shutil.which("gradflow", path=str(Path(sys.executable).parent)) or shutil.which("gradflow")
    if exe is None:
        pytest.skip("no gradflow script installed")
    assert run(exe, "--version") == f"gradflow {gradflow.__version__}\n"


def test_the_version_is_a_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|(a|b|rc)\d+)?", gradflow.__version__)


@in_checkout
def test_pyproject_reads_the_version_from_gradflow_version():
    tables = table_texts(PYPROJECT.read_text())
    assert re.search(r'^dynamic = \[[^\]]*"version"', tables["project"], re.M)
    assert not re.search(r"^version\s*=", tables["project"], re.M)  # no literal version
    assert 'version = { attr = "gradflow.version.__version__" }\n' in tables["tool.setuptools.dynamic"]


@in_checkout
def test_every_package_folder_is_listed_for_the_wheel():
    """pyproject.toml lists the packages by name: a folder left out is missing from the installed copy."""
    listed = set(re.findall(r'"(gradflow[\w.]*)"', table_texts(PYPROJECT.read_text())["tool.setuptools"]))
    folders = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "gradflow").rglob("__init__.py")} | {
        "gradflow.models"
    }
    assert folders == listed, f"not listed: {sorted(folders - listed)}; listed, not there: {sorted(listed - folders)}"


# --- license --------------------------------------------------------------------------------------


@in_checkout
def test_the_license_is_there_and_named():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
    project = table_texts(PYPROJECT.read_text())["project"]
    assert re.search(r'^license = "MIT"$', project, re.M)
    assert re.search(r'^license-files = \["LICENSE"\]$', project, re.M)


# --- numba wherever it has a wheel ---------------------------------------------------------------
# The installed metadata, as pip reads it (an editable install's in a checkout, the wheel's in CI).


def requirements():
    """{name: Requirement} of the installed gradflow's dependencies, extras left out."""
    found = (Requirement(line) for line in metadata.requires("gradflow"))
    return {r.name: r for r in found if "extra" not in str(r.marker)}


def where(system, machine, python, implementation="CPython", release="23.1.0"):
    """A Python's environment markers (PEP 508); `release` is the OS's, Darwin 21 being macOS 12."""
    return {
        "sys_platform": system, "platform_machine": machine, "python_version": python,
        "platform_python_implementation": implementation, "platform_release": release,
    }  # fmt: skip


PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15")
# numba 0.68.1's wheels on PyPI: CPython 3.10 to 3.15 on Linux x86-64 and ARM64 (manylinux), macOS 12 or
# newer on Apple silicon and Windows x86-64; Windows ARM64 for 3.12 to 3.14
WHEELS = [where(system, machine, python) for system, machine in (
    ("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64"), ("win32", "AMD64")) for python in PYTHONS] + [
    where("win32", "ARM64", python) for python in ("3.12", "3.13", "3.14")]  # fmt: skip
NO_WHEEL = [
    where("linux", "x86_64", "3.16"),  # a Python newer than numba's wheels
    where("darwin", "x86_64", "3.12"),  # an Intel Mac: numba 0.62 was the last with wheels for it
    where("darwin", "arm64", "3.12", release="20.6.0"),  # macOS 11
    where("win32", "ARM64", "3.11"), where("win32", "ARM64", "3.15"),
    where("linux", "i686", "3.12"), where("linux", "armv7l", "3.12"), where("linux", "ppc64le", "3.12"),
    where("linux", "s390x", "3.12"), where("emscripten", "wasm32", "3.12"),
    where("linux", "x86_64", "3.11", implementation="PyPy"),
]  # fmt: skip


@pytest.mark.parametrize(
    "environment", WHEELS, ids=lambda e: f"{e['sys_platform']}-{e['platform_machine']}-{e['python_version']}"
)
def test_numba_comes_with_gradflow_where_it_has_a_wheel(environment):
    assert requirements()["numba"].marker.evaluate(environment)


@pytest.mark.parametrize("environment", NO_WHEEL, ids=lambda e: "-".join(e.values()))
def test_numba_is_left_out_where_pip_would_have_to_build_it(environment):
    assert not requirements()["numba"].marker.evaluate(environment)


def test_numba_from_the_release_whose_wheels_the_markers_name_and_numpy_unbounded():
    """0.68.1 is the first numba with every wheel above: pip, trading numba's releases against numpy's,
    never picks one it would have to build. numpy's only upper bound is numba's, where numba installs."""
    needs = requirements()
    assert str(needs["numba"].specifier) == ">=0.68.1"
    assert str(needs["numpy"].specifier) == ">=1.26"
    assert "fast" in metadata.metadata("gradflow").get_all("Provides-Extra")  # the old extra: `.[fast]` still installs


# --- nothing outside the repository ----------------------------------------------------------------


def tracked_files():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_points_outside_the_repository():
    outside = ["../" + "shared", "/" + "work/"]  # spelled in two parts so that this file does not match
    found = []
    for path in tracked_files():
        if not path.is_file():  # deleted in the working tree, not yet committed
            continue
        data = path.read_bytes()
        found += [f"{path.relative_to(ROOT)}: {word}" for word in outside if word.encode() in data]
    assert found == []


# --- a user's own `models` next to their script ----------------------------------------------------

BROKEN = "raise ImportError('the user\\'s own models, not gradflow\\'s')\n"
QUICK_TRAIN = [
    "--max-iters", "1", "--eval-iters", "1", "--n-layer", "1", "--n-embd", "16", "--n-head", "2",
    "--block-size", "8", "--batch-size", "2", "--sample-tokens", "0",
]  # fmt: skip


@pytest.fixture(params=["package", "module"])
def users_folder(request, tmp_path):
    """A working directory holding the user's own `models`: a package, or a module, that fails to import."""
    if request.param == "package":
        (tmp_path / "models").mkdir()
        (tmp_path / "models" / "__init__.py").write_text(BROKEN)
    else:
        (tmp_path / "models.py").write_text(BROKEN)
    (tmp_path / "tiny.txt").write_text("to be or not to be, that is the question. " * 10)
    done = subprocess.run([sys.executable, "-c", "import models"], cwd=tmp_path, capture_output=True, text=True)
    assert "the user's own models" in done.stderr  # it is the one Python finds first
    return tmp_path


def test_the_example_models_import_beside_a_users_models(users_folder):
    code = "from gradflow.models.gpt import GPT; import gradflow.cli; import gradflow.models.llama; print(GPT)"
    assert "gradflow.models.gpt.GPT" in run(sys.executable, "-c", code, cwd=users_folder)


def test_graph_and_train_run_beside_a_users_models(users_folder):
    run(sys.executable, "-m", "gradflow", "graph", "--toy", "-o", "g.dot", cwd=users_folder)
    assert (users_folder / "g.dot").read_text().startswith("digraph")
    argv = ["train", "--data", "tiny.txt", "--out-dir", "run", *QUICK_TRAIN]
    assert "done at step 1" in run(sys.executable, "-m", "gradflow", *argv, cwd=users_folder)
    assert (users_folder / "run" / "ckpt.npz").is_file()


# --- which gradflow the tests import ---------------------------------------------------------------


@pytest.mark.skipif("GRADFLOW_TEST_INSTALLED" not in os.environ, reason="set by CI's run against the wheel")
def test_the_installed_copy_is_the_one_tested():
    """CI sets GRADFLOW_TEST_INSTALLED when it runs the tests against the installed wheel."""
    import gradflow.models

    for module in (gradflow, gradflow.models):
        path = Path(module.__file__).resolve()
        assert path.is_relative_to(Path(sys.prefix).resolve()), path  # inside the virtual environment
        assert "site-packages" in path.parts, path
