"""Every tutorial notebook runs from a clean kernel without error, and ships with its outputs saved.

How long a notebook takes is not asserted here (a timing depends on the machine's load, and
speed is measured by benchmarks, not tests); the per-cell timeout only stops a hang.
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

TUTORIALS = sorted((Path(__file__).resolve().parents[1] / "tutorials").glob("*.ipynb"))


def test_there_are_tutorials():
    assert len(TUTORIALS) >= 1


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs_from_a_clean_kernel(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("outputs") is not None for c in code)
    assert any(c.outputs for c in code), f"{path.name} was committed without its outputs"
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
