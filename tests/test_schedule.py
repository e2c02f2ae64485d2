"""The scheduler: streams, dependencies, makespan, the pipeline bubble, CSV output."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.graph import parse_graph


H100 = "H100-SXM"


def g(*ops, **top):
    return {"schema_version": 1, "name": "t", "ops": list(ops), **top}


GEMM = {"op": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}


def test_sequential_graph_total_is_the_sum():
    pred = pm.predict(parse_graph(g({**GEMM, "name": "a"}, {**GEMM, "name": "b", "m": 512})), H100)
    a, b = pred.ops
    assert b.start_s == pytest.approx(a.end_s)
    assert pred.total_time_s == pytest.approx(a.estimate.time_s + b.estimate.time_s)
    assert all(o.critical for o in pred.ops) and a.hidden_s == pytest.approx(0)


def test_dependencies_hold_across_streams():
    raw = g({**GEMM, "name": "a"}, {**GEMM, "name": "b", "after": [], "stream": "s2"},
            {**GEMM, "name": "c", "after": ["a", "b"]})
    pred = pm.predict(parse_graph(raw), H100)
    a, b, c = pred.ops
    assert c.start_s == pytest.approx(max(a.end_s, b.end_s))


def test_csv_has_one_row_per_op():
    pred = pm.predict(parse_graph(g({**GEMM, "name": "a"}, {**GEMM, "name": "b"})), H100)
    lines = pred.to_csv().strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("name,op,stream,time_s")


def test_pipeline_step_is_microbatches_plus_bubble():
    m = pm.load_model("llama3-70b")
    g = pm.build_graph(m, "train", batch=16, seq=1024, tp=8, pp=4)
    pred = pm.predict(g, "H100-SXM")
    mb, stages = g.pipeline.microbatches, 4
    assert mb == 16 and len([n for n in g.nodes if n.name.endswith(".qkv")]) == 20
    assert pred.pipeline_bubble_s == pytest.approx(pred.microbatch_time_s * (stages - 1))
    assert pred.total_time_s >= pred.microbatch_time_s * (mb + stages - 1)
