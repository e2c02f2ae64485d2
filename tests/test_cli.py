"""The command line: every subcommand runs, prints what SPEC.md says, and exits with its code."""
from __future__ import annotations

import json
import subprocess
import sys

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


def test_ops_lists_every_op_with_units(capsys):
    code, out, _ = run(capsys, "ops")
    assert code == 0
    for name in ("gemm", "attention", "elementwise", "norm", "softmax", "rng", "quantize", "moe",
                 "allreduce", "allgather", "reduce_scatter", "alltoall", "memcpy"):
        assert f"\n{name}  (" in "\n" + out
    assert "[rows]" in out


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


@pytest.mark.parametrize("argv, message", [
    (["op", "gemm", "m=8192", "n=8192", "k=8192", "dtype=nvfp4", "--hw", "h100"],
     "not supported by H100-SXM"),
    (["op", "gemm", "m=-1", "n=1", "k=1", "dtype=bf16", "--hw", "h100"], "m: expected"),
    (["op", "gemm", "m=1", "--hw", "h900"], "unknown hardware 'h900'"),
    (["op", "conv", "x=1", "--hw", "h100"], "unknown op 'conv'"),
    (["op", "gemm", "m", "--hw", "h100"], "expected key=value"),
    (["frobnicate"], "usage:"),
    (["hw", "show"], "usage:"),
])
def test_bad_input_exits_2_with_one_line_per_problem(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_validate_prints_accuracy_table(capsys):
    code, out, _ = run(capsys, "validate")
    assert code == 0 and "gemm" in out and "roofline MAPE" in out


def test_validate_splits_classes_by_op_parameters(capsys):
    code, out, _ = run(capsys, "validate", "--by", "kernel,dtype", "--format", "json")
    assert code == 0
    summary = json.loads(out)["summary"]
    fwd = [s for s in summary if s["op_class"] == "attention_fwd" and s["rows"] == "judged"
           and s["hardware"] == "H100-SXM"]
    assert {tuple(s["group"]) for s in fwd} >= {("fa2", "fp16"), ("fa3", "fp8"), ("cudnn", "fp16")}
    # the groups partition the class: their counts add up to the class's
    code, out, _ = run(capsys, "validate", "--format", "json")
    whole = next(s for s in json.loads(out)["summary"] if s["op_class"] == "attention_fwd"
                 and s["rows"] == "judged" and s["hardware"] == "H100-SXM")
    assert sum(s["n"] for s in fwd) == whole["n"]
    code, _, err = run(capsys, "validate", "--by", "kernal")
    assert code == 2 and "kernal" in err and "kernel" in err


def test_console_script_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "perfmodel.cli", "hw", "show", "nope.yaml"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
