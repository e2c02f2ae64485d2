"""Graph files: loading, every validation failure mode, round trips, and the scheduler."""
from __future__ import annotations

import json

import pytest

import perfmodel as pm
from perfmodel.cli.main import main
from perfmodel.graph import parse_graph

H100 = "H100-SXM"


def g(*ops, **top):
    return {"schema_version": 1, "name": "t", "ops": list(ops), **top}


GEMM = {"op": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}


@pytest.mark.parametrize("raw, message", [
    (g({**GEMM, "op": "gemmm"}), "ops[0] (gemmm0): unknown op 'gemmm'"),
    (g({**GEMM, "mm": 1}), "ops[0] (gemm0).mm: unknown parameter for op 'gemm'"),
    (g({**GEMM, "m": -3}), "ops[0] (gemm0).m: expected an integer >= 1, got -3"),
    (g({**GEMM, "dtype": 7}), "ops[0] (gemm0).dtype: expected a dtype (fp32"),
    (g({k: v for k, v in GEMM.items() if k != "k"}), "ops[0] (gemm0).k: missing required"),
    (g({**GEMM, "name": "a"}, {**GEMM, "name": "a"}), "ops[1] (a).name: duplicate name"),
    (g({**GEMM, "name": "a", "after": ["nope"]}), "ops[0] (a).after: unknown op 'nope'"),
    (g({**GEMM, "name": "a", "after": ["b"]}, {**GEMM, "name": "b", "after": ["a"]}),
     "dependency cycle"),
    (g({**GEMM, "name": "a", "after": "a"}), "depends on itself"),
    (g(), "ops: expected a non-empty list"),
    (g(GEMM, extra=1), "extra: unknown key"),
    (g(GEMM, schema_version=3), "schema_version: expected 1"),
    (g("gemm"), "ops[0]: expected a mapping"),
])
def test_bad_graphs_name_the_key_path(raw, message):
    with pytest.raises(pm.InputError) as e:
        parse_graph(raw, "bad.yaml")
    assert message in str(e.value)
    assert all(p.startswith("bad.yaml") for p in e.value.problems)


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


def test_sequential_graph_total_is_the_sum():
    pred = pm.predict(parse_graph(g({**GEMM, "name": "a"}, {**GEMM, "name": "b", "m": 512})), H100)
    a, b = pred.ops
    assert b.start_s == pytest.approx(a.end_s)
    assert pred.total_time_s == pytest.approx(a.estimate.time_s + b.estimate.time_s)
    assert all(o.critical for o in pred.ops) and a.hidden_s == pytest.approx(0)


@pytest.mark.parametrize("second", [
    {"op": "elementwise", "elements": 1 << 26, "dtype": "bf16", "inputs": 2},
    {"op": "rng", "elements": 1 << 28},
    {**GEMM, "m": 2048},
])
def test_two_streams_overlap_between_max_and_sum(second):
    raw = g({**GEMM, "name": "a", "m": 8192}, {**second, "name": "b", "after": [], "stream": "s2"})
    pred = pm.predict(parse_graph(raw), H100)
    a, b = (o.estimate.time_s for o in pred.ops)
    assert max(a, b) * (1 - 1e-9) <= pred.total_time_s <= (a + b) * (1 + 1e-9)
    assert pred.ops[1].start_s == 0.0
    assert sum(o.hidden_s for o in pred.ops) > 0


def _overlap_ratio(first, second):
    raw = g({**first, "name": "a"}, {**second, "name": "b", "after": [], "stream": "s2"})
    pred = pm.predict(parse_graph(raw), H100)
    return pred.total_time_s / sum(o.estimate.time_s for o in pred.ops)


def test_kernels_that_fill_the_sms_serialize():
    """A GEMM whose CTAs hold every SM's registers leaves no room for a second kernel."""
    assert _overlap_ratio({**GEMM, "m": 8192}, {**GEMM, "m": 8192}) > 0.95


def test_small_grid_kernel_hides_under_a_gemm():
    """A 16-CTA latency-bound norm needs few SM slots and little bandwidth: it runs beside a
    GEMM that holds the SMs' registers almost entirely."""
    small = {"op": "norm", "rows": 16, "cols": 1 << 20, "dtype": "bf16"}
    raw = g({**GEMM, "name": "a", "m": 8192}, {**small, "name": "b", "after": [],
                                               "stream": "s2"})
    pred = pm.predict(parse_graph(raw), H100)
    longest = max(o.estimate.time_s for o in pred.ops)
    assert pred.total_time_s < 1.1 * longest
    assert pred.ops[1].hidden_s > 0.9 * pred.ops[1].time_s


def test_dependencies_hold_across_streams():
    raw = g({**GEMM, "name": "a"}, {**GEMM, "name": "b", "after": [], "stream": "s2"},
            {**GEMM, "name": "c", "after": ["a", "b"]})
    pred = pm.predict(parse_graph(raw), H100)
    a, b, c = pred.ops
    assert c.start_s == pytest.approx(max(a.end_s, b.end_s))


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


def test_csv_has_one_row_per_op():
    pred = pm.predict(parse_graph(g({**GEMM, "name": "a"}, {**GEMM, "name": "b"})), H100)
    lines = pred.to_csv().strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("name,op,stream,time_s")


def test_build_round_trips_through_predict(tmp_path, capsys):
    out = tmp_path / "g.yaml"
    args = ["llama3-8b", "--phase", "train", "--batch", "2", "--seq", "1024", "--tp", "2",
            "--dp", "2", "--dtype", "fp8"]
    assert main(["build", *args, "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "--hw", H100, "--format", "json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert main(["predict", *args, "--hw", H100, "--format", "json"]) == 0
    direct = json.loads(capsys.readouterr().out)
    assert from_file["total_time_s"] == pytest.approx(direct["total_time_s"], rel=1e-12)
    assert len(from_file["ops"]) == len(direct["ops"])


def test_dag_view_has_dependency_and_stream_edges():
    raw = g({**GEMM, "name": "a"}, {**GEMM, "name": "b", "after": [], "stream": "s2"},
            {**GEMM, "name": "c", "after": ["a", "b"]}, {**GEMM, "name": "d", "stream": "s2",
                                                           "after": []})
    dag = parse_graph(raw).dag()
    assert set(dag.edges) == {("a", "c"), ("b", "c"), ("b", "d"), ("a", "c")}
