"""`perfmodel op`: one op's prediction as a table or JSON, each kernel of a multi-kernel op."""
from __future__ import annotations

import json

import pytest

from perfmodel.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_op_prediction_table_and_json(capsys):
    code, out, _ = run(capsys, "op", "gemm", "m=8192", "n=8192", "k=8192", "dtype=bf16",
                       "--hw", "h100")
    assert code == 0 and "bound: tensor:bf16" in out
    code, out, _ = run(capsys, "op", "rng", "elements=1e9", "--hw", "b200", "--format", "json")
    got = json.loads(out)  # 1e9 is an integral number: accepted as an integer count
    assert code == 0 and got["op"]["elements"] == 10**9 and got["time_s"] > 0
    assert got["bound"] in got["resource_time_s"]


def test_op_lists_each_kernel_of_a_multi_kernel_op(capsys):
    """Attention fwd+bwd runs 4 kernels: forward, backward preprocess, main, postprocess; the
    table lists each with its time, and the times add up to the op's."""
    code, out, _ = run(capsys, "op", "attention", "batch=2", "heads=16", "seq_q=2048",
                       "head_dim=128", "dtype=bf16", "direction=fwd+bwd", "--hw", "h100")
    assert code == 0
    table = out[out.index("kernel  part"):].splitlines()[2:6]
    assert [row.split()[0] for row in table] == ["1", "2", "3", "4"]
    assert "bwd preprocess" in table[1] and "bwd postprocess" in table[3]
    total_us = float(out.split("time")[1].split()[0])
    parts_us = [float(row.split()[-2]) for row in table]
    assert sum(parts_us) == pytest.approx(total_us, rel=0.01)
