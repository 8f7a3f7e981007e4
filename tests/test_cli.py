"""The `gradflow` command."""

import shutil
import subprocess
import sys

import pytest

from gradflow.cli import main


def test_help_from_the_installed_script():
    exe = shutil.which("gradflow")
    cmd = [exe, "--help"] if exe else [sys.executable, "-m", "gradflow.cli", "--help"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "gradcheck" in out


def test_gradcheck_prints_the_table(capsys):
    assert main(["gradcheck", "--op", "softmax"]) == 0
    out = capsys.readouterr().out
    assert "softmax [(3, 5)]" in out and "pass" in out and "FAIL" not in out
    assert "passed, 0 failed" in out.splitlines()[-1]


def test_gradcheck_unknown_op(capsys):
    assert main(["gradcheck", "--op", "nope"]) == 2
    assert "no op named 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["--help"]])
def test_no_command_prints_help(argv, capsys):
    if argv:
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
    else:
        assert main(argv) == 0
    assert "gradcheck" in capsys.readouterr().out
