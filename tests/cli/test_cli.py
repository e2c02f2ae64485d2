"""The command line's contract (cli/main.py): bad input exits 2 with one line per problem and no
traceback; `python -m perfmodel.cli` runs."""
from __future__ import annotations

import subprocess
import sys

import pytest

from perfmodel.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv, message", [
    (["op", "gemm", "m=8192", "n=8192", "k=8192", "dtype=nvfp4", "--hw", "h100"],
     "not supported by H100-SXM"),
    (["op", "gemm", "m=-1", "n=1", "k=1", "dtype=bf16", "--hw", "h100"], "m: expected"),
    (["op", "gemm", "m=1", "--hw", "h900"], "unknown hardware 'h900'"),
    (["op", "fft", "x=1", "--hw", "h100"], "unknown op 'fft'"),
    (["op", "gemm", "m", "--hw", "h100"], "expected key=value"),
    (["frobnicate"], "usage:"),
    (["hw", "show"], "usage:"),
])
def test_bad_input_exits_2_with_one_line_per_problem(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_console_script_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "perfmodel.cli", "hw", "show", "nope.yaml"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
