"""`perfmodel predict` on graph files: bad graphs exit 2, hardware is required, the JSON output."""
from __future__ import annotations

import json

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
