"""`perfmodel sol`: the two speeds of light, the SOL score, problems as input, --coverage, and
exit 2 on bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfmodel.cli.main import main

FIXTURES = Path(__file__).resolve().parents[1] / "sol" / "fixtures"
GEMM_DEF = str(FIXTURES / "gemm" / "definition.json")


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_op_json_has_both_speeds_of_light_and_the_score(capsys):
    code, out, _ = run(capsys, "sol", "gemm", "m=8192", "n=8192", "k=8192", "dtype=bf16",
                       "--hw", "b200", "--sm-clock", "1500MHz", "--measured", "0.7ms",
                       "--baseline", "1ms", "--format", "json")
    assert code == 0
    r = json.loads(out)
    for key in ("sol_time_s", "roofline_time_s", "attainable_time_s", "bound", "sol_score"):
        assert r[key] is not None, key
    assert r["sol_time_s"] == pytest.approx(8192 ** 3 / (148 * 4096 * 1.5e9))
    assert r["roofline_time_s"] >= r["sol_time_s"] * (1 - 1e-9)
    assert r["attainable_time_s"] >= r["roofline_time_s"]
    t = r["sol_time_s"]
    assert r["sol_score"] == pytest.approx(1 / (1 + (0.7e-3 - t) / (1e-3 - t)))
    assert r["sm_clock_lock_hz"] == 1.5e9


def test_definition_with_workload_table(capsys):
    code, out, _ = run(capsys, "sol", GEMM_DEF, "--workload", "fixture-gemm-m16", "--hw",
                       "h100", "--measured", "20us")
    assert code == 0
    assert "fixture_gemm_n4096_k4096[1] on H100-SXM" in out
    assert "mapping   direct" in out and "of the speed of light" in out
    assert "speed of light, SOLAR's convention" in out and "perfmodel attainable" in out


def test_graph_file(capsys, tmp_path):
    g = tmp_path / "g.yaml"
    g.write_text("schema_version: 1\nname: two\nops:\n"
                 "  - {name: up, op: gemm, m: 4096, n: 4096, k: 4096, dtype: bf16}\n"
                 "  - {name: act, op: elementwise, elements: 16777216, dtype: bf16}\n")
    code, out, _ = run(capsys, "sol", str(g), "--hw", "h100", "--format", "json")
    r = json.loads(out)
    assert code == 0 and [o["name"] for o in r["ops"]] == ["up", "act"]
    assert r["solar"]["macs"] == {"fp16": 4096 ** 3}


@pytest.mark.parametrize("argv, flag", [
    (["sol", "gemm", "m=8", "n=8", "k=8", "dtype=bf16"], "--hw"),
    (["sol", "gemm", "m=8", "n=8", "k=8", "dtype=bf16", "--hw", "h100", "--measured", "fast"],
     "--measured"),
    (["sol", "gemm", "m=8", "n=8", "k=8", "dtype=bf16", "--hw", "h100", "--baseline", "1ms"],
     "--baseline"),
    (["sol", "gemm", "m=8", "n=8", "k=8", "dtype=bf16", "--hw", "h100", "--sm-clock", "9GHz"],
     "--sm-clock"),
    (["sol", GEMM_DEF, "--hw", "h100", "--workload", "9"], "--workload"),
    (["sol", "nosuchop", "--hw", "h100"], "sol: 'nosuchop'"),
    (["sol", "gemm", "m=-1", "n=8", "k=8", "dtype=bf16", "--hw", "h100"], "m:"),
    (["sol", "gemm", "m=8", "n=8", "k=8", "dtype=bf16", "--hw", "h100", "--measured", "1s",
      "--baseline", "2s"], None),
])
def test_bad_input_exits_2_naming_the_flag(capsys, argv, flag):
    code, _, err = run(capsys, *argv)
    if flag is None:  # a valid command for contrast
        assert code == 0
        return
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and lines[0].startswith("perfmodel: error:")


def test_the_score_pole_is_bad_input(capsys):
    # T_SOL of this GEMM on B200 at 1.5 GHz is ~1.106 µs; baseline 1.5 µs puts the pole at
    # 2·T_SOL − T_b ≈ 0.711 µs, inside the reachable range
    code, out, _ = run(capsys, "sol", "gemm", "m=1024", "n=1024", "k=1024", "dtype=bf16",
                       "--hw", "b200", "--sm-clock", "1500MHz", "--format", "json")
    t = json.loads(out)["sol_time_s"]
    pole = 2 * t - 1.5e-6
    code, _, err = run(capsys, "sol", "gemm", "m=1024", "n=1024", "k=1024", "dtype=bf16",
                       "--hw", "b200", "--sm-clock", "1500MHz", "--baseline", "1.5us",
                       "--measured", f"{pole}")
    assert code == 2 and "pole" in err


def test_coverage_table_and_json(capsys):
    code, out, _ = run(capsys, "sol", "--coverage")
    assert code == 0
    assert "problems: 235:" in out and "not mapped:" in out
    assert "where the conventions agree" in out
    code, out, _ = run(capsys, "sol", "--coverage", "--format", "json")
    r = json.loads(out)
    assert r["summary"]["problems"]["total"] == 235 and len(r["problems"]) == 235
    code, _, err = run(capsys, "sol", "gemm", "--coverage")
    assert code == 2 and "--coverage" in err
