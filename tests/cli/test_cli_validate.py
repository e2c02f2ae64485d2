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
