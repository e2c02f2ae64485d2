"""`perfmodel hw list` and `perfmodel hw show` (table and JSON)."""
from __future__ import annotations

import json

import pytest

from perfmodel.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_hw_list(capsys):
    code, out, _ = run(capsys, "hw", "list")
    assert code == 0
    for name in ("H100-SXM", "H200-SXM", "B200", "GB200", "B300", "A100-SXM", "H100-PCIe"):
        assert name in out


def test_hw_show_table_and_json(capsys):
    code, out, _ = run(capsys, "hw", "show", "h100")
    assert code == 0 and "989.4 TFLOP/s" in out and "ridge" in out and "assumed" in out
    code, out, _ = run(capsys, "hw", "show", "B200", "--format", "json")
    info = json.loads(out)
    assert info["derived"]["tensor_peak_flop_per_s"]["nvfp4"] == pytest.approx(9e15, rel=0.01)
