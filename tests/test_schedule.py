"""The scheduler: streams, dependencies, makespan, the pipeline bubble, CSV output."""
from __future__ import annotations

import json

import pytest

import perfmodel as pm
from perfmodel import yamlio
from perfmodel.errors import InputError
from perfmodel.graph import OpGraph, Pipeline, parse_graph
from perfmodel.workloads.builder import build_graph


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


# ---- the typed 1F1B pipeline: builder → graph file → Prediction -------------------------
H100_HW = pm.hardware("H100-SXM")


def _graph(*ops, **top):
    return {"schema_version": 1, "name": "t", "ops": list(ops), **top}


@pytest.fixture(scope="module")
def pp_graph():
    return build_graph(pm.load_model("llama3-8b"), "train", batch=8, seq=1024, tp=8, pp=2,
                       microbatches=4, virtual_stages=2)


def test_builder_gives_a_typed_pipeline(pp_graph):
    p = pp_graph.pipeline
    assert isinstance(p, Pipeline) and "pipeline" not in pp_graph.meta
    assert (p.stages, p.microbatches, p.virtual_stages) == (2, 4, 2)
    assert pp_graph.nodes[p.per_microbatch_ops - 1].name == "send_grads.allgather"
    # a training step always carries its (one-stage) pipeline: plan.training reads its
    # microbatch time
    one = build_graph(pm.load_model("llama3-8b"), "train", batch=8, seq=1024).pipeline
    assert (one.stages, one.microbatches) == (1, 1)
    assert build_graph(pm.load_model("llama3-8b"), "prefill", batch=8, seq=1024).pipeline is None
    with pytest.raises(AttributeError):
        p.stages = 3  # frozen


def test_graph_file_round_trip_keeps_meta_pipeline(pp_graph):
    text = pp_graph.dump()
    assert "pipeline: {stages: 2, microbatches: 4, virtual_stages: 2, per_microbatch_ops:" in text
    again = parse_graph(yamlio.loads(text))
    assert again.pipeline == pp_graph.pipeline and again.meta == pp_graph.meta
    assert again.dump() == text


def test_prediction_has_typed_pipeline_results_and_the_same_json_meta(pp_graph):
    pred = pm.predict(pp_graph, H100_HW)
    assert pred.pipeline == pp_graph.pipeline
    assert pred.pipeline_bubble_s == pytest.approx(pred.microbatch_time_s * (2 - 1) / 2)
    meta = json.loads(pred.to_json())["meta"]
    assert list(meta)[-3:] == ["pipeline", "pipeline_bubble_s", "microbatch_time_s"]
    assert meta["pipeline"] == pp_graph.pipeline.to_dict()
    assert meta["microbatch_time_s"] == pred.microbatch_time_s
    plain = pm.predict(build_graph(pm.load_model("llama3-8b"), "decode", batch=4), H100_HW)
    assert plain.pipeline is plain.pipeline_bubble_s is plain.microbatch_time_s is None
    assert "pipeline" not in plain.to_dict()["meta"]


@pytest.mark.parametrize("bad, message", [
    ({"stages": 2}, "meta.pipeline.microbatches: missing"),
    ({"stages": 0, "microbatches": 2, "per_microbatch_ops": 1}, "meta.pipeline.stages: expected"),
    ({"stages": 2, "microbatches": 2, "per_microbatch_ops": 9}, "at most 1"),
    ({"stages": 2, "microbatches": 2, "per_microbatch_ops": 1, "bubble": 1}, "unknown key"),
    ([1, 2], "meta.pipeline: expected a mapping"),
])
def test_malformed_meta_pipeline_is_reported(bad, message):
    with pytest.raises(InputError, match=message):
        parse_graph(_graph({**GEMM, "name": "a"}, meta={"pipeline": bad}))


def test_a_pipeline_in_meta_is_refused_by_the_constructor():
    with pytest.raises(ValueError, match="pipeline="):
        OpGraph("g", [], meta={"pipeline": {"stages": 2}})


def test_hand_written_pipeline_without_virtual_stages_defaults_to_one():
    g = parse_graph(_graph({**GEMM, "name": "a"}, {**GEMM, "name": "b"},
                          meta={"pipeline": {"stages": 3, "microbatches": 2,
                                             "per_microbatch_ops": 1}}))
    assert g.pipeline == Pipeline(1, 3, 2, 1)
    pred = pm.predict(g, H100_HW)
    a, b = pred.ops
    assert pred.pipeline_bubble_s == pytest.approx(2 * a.estimate.time_s)
    assert pred.total_time_s == pytest.approx(4 * a.estimate.time_s + b.estimate.time_s)
