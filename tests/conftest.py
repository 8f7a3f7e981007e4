import os
from collections import Counter

import numpy as np
import pytest
from helpers import CORPUS, train

import gradflow as gf
from gradflow.fast import compiled
from gradflow.training.distributed import MPIUnavailable, mpiexec

# These modules run every test once per tier of kernels (gradflow/engine/kernels.py): the fast kernels a
# model trains with, and the plain ops a learner reads. Other modules run in the tier in use: the
# library's plain, the fast one inside what trains (the Trainer, the commands), unless
# GRADFLOW_KERNELS chooses (GRADFLOW_KERNELS=plain runs them all on the plain ops).
BOTH_TIERS = {"test_gradcheck.py", "test_gradcheck_table.py", "test_fused.py", "test_layers.py", "test_models.py"}


# What each worker's BLAS, OpenMP (PyTorch) and numba may use when pytest-xdist runs the tests in workers
# (pyproject's addopts: -n 2): one thread each. Two workers of two threads on two cores spend their time
# waiting for each other (OpenBLAS's idle threads spin after every product): the suite took 688 s so and
# 494 s with one thread a worker (notebook 06's three runs 235 s against 43). A variable already set is kept.
WORKER_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def pytest_configure(config):
    """Before pytest-xdist starts its workers (they inherit the environment), one thread each for them."""
    if getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ:
        for name in WORKER_THREADS:
            os.environ.setdefault(name, "1")


def pytest_generate_tests(metafunc):
    if metafunc.definition.path.name in BOTH_TIERS:
        metafunc.parametrize("kernels", ["fast", "plain"], indirect=True)


@pytest.fixture(autouse=True)
def kernels(request):
    """The tier a test runs in: its parameter in BOTH_TIERS, else the one in use. Either way the next test
    finds the switch as it was, chosen or not (a test that calls gf.use_kernels would otherwise leave
    its choice to every later one, and a later run in this process and one in a subprocess would
    differ in the last bits)."""
    tier = getattr(request, "param", None)
    with gf.use_kernels(tier or gf.kernels_in_use(), chosen=tier is not None):
        yield gf.kernels_in_use()


@pytest.fixture(autouse=True)
def own_folder(tmp_path, monkeypatch):
    """Every test runs in its own empty folder, its tmp_path, and every command it starts runs there too: what
    gradflow writes by default (out/, graph.svg, explorer.html, an exercises workspace) lands there, and the
    folder pytest was started from, where a user's own run may sit in out/, is never read or written."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def torch():
    """PyTorch, for a test that compares with it: skipped where it is not installed, a failure when
    GRADFLOW_REQUIRE_TORCH=1 (CI sets it)."""
    if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
        import torch

        return torch
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def compiled_loops():
    """gradflow.fast.loops (numba's), for a test of the fast tier's compiled loops: skipped where they do not
    load (numba not installed), a failure when GRADFLOW_REQUIRE_NUMBA=1 (CI sets it)."""
    if compiled.loops() is None:
        with gf.use_kernels("fast"):
            why = compiled.describe()
        if os.environ.get("GRADFLOW_REQUIRE_NUMBA") == "1":
            pytest.fail(f"GRADFLOW_REQUIRE_NUMBA=1, and the compiled loops did not load: {why}")
        pytest.skip(f"the compiled loops: {why}")
    return compiled.loops()


@pytest.fixture
def float64():
    """Build and check in float64 (gradcheck's precision); float32 again afterwards."""
    gf.set_default_dtype(np.float64)
    gf.manual_seed(0)
    try:
        yield
    finally:
        gf.set_default_dtype(np.float32)


@pytest.fixture
def data(tmp_path):
    """A small text file to train on (helpers.CORPUS)."""
    path = tmp_path / "tiny.txt"
    path.write_text(CORPUS)
    return path


@pytest.fixture
def checkpoint(tmp_path, data, capsys):
    """The ckpt.npz of a one-step `gradflow train` run."""
    out = tmp_path / "run"
    assert train(out, data, "--max-iters", "1", "--eval-interval", "1") == 0
    capsys.readouterr()
    return out / "ckpt.npz"


@pytest.fixture(scope="session")
def run_200(tmp_path_factory):
    """The folder of a 200-step `gradflow train` run evaluated every 50 steps, with its weight snapshots, for
    the explorer's tests to read (never to change): one run for them all."""
    folder = tmp_path_factory.mktemp("run_200")
    data = folder / "tiny.txt"
    data.write_text(CORPUS)
    assert train(folder / "run", data, "--max-iters", "200", "--eval-interval", "50") == 0
    return folder / "run"


@pytest.fixture(scope="module")
def mpi():
    """The start of a command running two ranks: [mpiexec, -n, 2]; skipped where MPI is missing, a failure
    when GRADFLOW_REQUIRE_MPI=1 (CI sets it)."""
    try:
        return [mpiexec(), "-n", "2"]
    except MPIUnavailable:
        if os.environ.get("GRADFLOW_REQUIRE_MPI") == "1":
            raise
        pytest.skip("MPI is not installed (pip install mpi4py mpich)")


def pytest_terminal_summary(terminalreporter):
    """Why tests skipped: one line per reason, with its count (an optional tool not installed, say), so that a
    run that skips shows what it did not try."""
    reasons = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if reasons:
        terminalreporter.section(f"why {sum(reasons.values())} tests skipped")
        for reason, count in reasons.most_common():
            terminalreporter.write_line(f"{count:6d}  {reason}")
