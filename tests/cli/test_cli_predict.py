"""`perfmodel predict` on graph files: bad graphs exit 2, hardware is required, the JSON output;
on models: the memory fit (a warning on stderr, `memory` in the JSON) and --kv-dtype."""
from __future__ import annotations

import json

import pytest

from perfmodel.cli.main import main


H100 = "H100-SXM"


def test_cli_bad_graph_exits_2(tmp_path, capsys):
    p = tmp_path / "g.yaml"
    p.write_text("ops:\n  - {op: gemm, m: 1, n: 1, k: 1, dtype: bf16, after: [x]}\n")
    assert main(["predict", str(p), "--hw", H100]) == 2
    err = capsys.readouterr().err
    assert "after: unknown op 'x'" in err and "Traceback" not in err
    p.write_text("ops: [unclosed\n")
    assert main(["predict", str(p), "--hw", H100]) == 2
    assert "malformed YAML at line" in capsys.readouterr().err


def test_missing_hardware_is_a_usage_error(tmp_path, capsys):
    p = tmp_path / "g.yaml"
    p.write_text("ops:\n  - {op: gemm, m: 1, n: 1, k: 1, dtype: bf16}\n")
    assert main(["predict", str(p)]) == 2
    assert "no hardware" in capsys.readouterr().err


def test_json_matches_spec(tmp_path, capsys):
    p = tmp_path / "g.yaml"
    p.write_text("name: demo\nhardware: h100\nops:\n"
                 "  - {name: qkv, op: gemm, m: 64, n: 6144, k: 4096, dtype: bf16}\n")
    assert main(["predict", str(p), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["schema_version"] == 1 and d["graph"] == "demo" and d["hardware"] == "H100-SXM"
    assert d["level"] == "pipes" and d["total_time_s"] > 0
    op = d["ops"][0]
    for key in ("name", "op", "time_s", "start_s", "end_s", "bound", "flop", "hbm_bytes",
                "resource_time_s"):
        assert key in op
    assert op["bound"] in op["resource_time_s"]


def test_a_model_that_does_not_fit_warns_and_the_json_says_so(capsys):
    assert main(["predict", "llama3-70b", "--phase", "decode", "--hw", H100,
                 "--format", "json"]) == 0
    out = capsys.readouterr()
    warning = [line for line in out.err.splitlines() if line.startswith("perfmodel: warning:")]
    assert warning == ["perfmodel: warning: llama3-70b decode on H100-SXM: needs 143.9 GB per "
                       "GPU (weights 141.1, KV 0.7, activations 0.0, workspace 2.1), has 77.3 GB "
                       "usable"]
    mem = json.loads(out.out)["memory"]
    assert mem["fits"] is False and mem["weights_bytes"] > 140e9
    assert mem["total_bytes"] == pytest.approx(sum(mem[k] for k in (
        "weights_bytes", "kv_cache_bytes", "activation_bytes", "workspace_bytes",
        "optimizer_bytes")))
    # the table and CSV get the same warning on stderr
    assert main(["predict", "llama3-70b", "--phase", "decode", "--hw", H100]) == 0
    assert "perfmodel: warning: llama3-70b decode" in capsys.readouterr().err


def test_a_model_that_fits_has_no_warning_and_kv_dtype_shrinks_its_cache(capsys):
    args = ["predict", "llama3-8b", "--phase", "decode", "--batch", "32", "--context", "8192",
            "--hw", H100, "--format", "json"]
    assert main(args) == 0
    out = capsys.readouterr()
    assert "warning" not in out.err
    bf16 = json.loads(out.out)
    assert bf16["memory"]["fits"] is True and bf16["meta"]["model"] == "llama3-8b"
    assert main(args + ["--kv-dtype", "FP8"]) == 0
    fp8 = json.loads(capsys.readouterr().out)
    assert fp8["memory"]["kv_cache_bytes"] == bf16["memory"]["kv_cache_bytes"] / 2
    assert fp8["meta"]["kv_dtype"] == "fp8" and fp8["total_time_s"] < bf16["total_time_s"]


def test_a_graph_file_has_no_memory_object(tmp_path, capsys):
    p = tmp_path / "g.yaml"
    p.write_text("name: demo\nhardware: h100\nops:\n"
                 "  - {name: qkv, op: gemm, m: 64, n: 6144, k: 4096, dtype: bf16}\n")
    assert main(["predict", str(p), "--format", "json"]) == 0
    out = capsys.readouterr()
    assert "memory" not in json.loads(out.out) and "warning" not in out.err


def test_kv_dtype_of_a_training_step_is_bad_input(capsys):
    assert main(["predict", "llama3-8b", "--phase", "train", "--kv-dtype", "fp8",
                 "--hw", H100]) == 2
    assert "--kv-dtype: training keeps K and V" in capsys.readouterr().err


def test_a_built_graph_file_is_checked_for_memory_as_its_model_is(tmp_path, capsys):
    """`perfmodel build` records the built-in model and workload in the graph's meta; predicting
    the file warns as predicting the model does (DeepSeek-V3 EP8 decode does not fit an H100)."""
    args = ["--phase", "decode", "--batch", "64", "--context", "4096", "--ep", "8", "--tp", "8",
            "--dtype", "fp8"]
    path = tmp_path / "dsv3.yaml"
    assert main(["build", "deepseek-v3", *args, "--output", str(path)]) == 0
    capsys.readouterr()
    assert main(["predict", "deepseek-v3", *args, "--hw", "h100", "--format", "json"]) == 0
    from_model = json.loads(capsys.readouterr().out)["memory"]
    assert main(["predict", str(path), "--hw", "h100", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["memory"] == from_model and not from_model["fits"]
    assert "does not fit" in err or "needs" in err
    # a graph whose meta names no built-in model: one note, no check
    text = path.read_text().replace("model: deepseek-v3", "model: my-moe", 1)
    other = tmp_path / "other.yaml"
    other.write_text(text)
    assert main(["predict", str(other), "--hw", "h100", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert "memory" not in json.loads(out) and "not a built-in one" in err
