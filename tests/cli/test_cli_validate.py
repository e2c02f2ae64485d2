"""`perfmodel validate`: the accuracy table, classes split by op parameters."""
from __future__ import annotations

import json

from perfmodel.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


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


def test_validate_lists_rows_not_modeled_by_reason(capsys):
    code, out, _ = run(capsys, "validate")
    assert code == 0
    lines = out[out.index("not modeled ("):].splitlines()
    reasons = [ln for ln in lines[1:] if ln.startswith("  ") and ln.split()[0].isdigit()]
    # one line per reason, with the count; many rows sharing a reason do not list their ids
    moe = next(ln for ln in reasons if "MoE expert-parallel dispatch" in ln)
    assert moe.split()[0] == "14" and "FI-EP-001" not in moe
    mxfp8 = next(ln for ln in reasons if "MXFP8 attention" in ln)
    assert "CUDNN-TRN-013" in mxfp8  # few rows: their ids
    assert sum(int(ln.split()[0]) for ln in reasons) == int(lines[0].split("(")[1].split()[0])
    # the new Blackwell rows appear per op class and GPU beside the roofline baseline
    assert any(ln.startswith("cross_entropy_fwd ") and "B200" in ln for ln in out.splitlines())
    code, out, _ = run(capsys, "validate", "--rows")
    assert "FI-EP-001" in out[out.index("not modeled ("):]
