"""One stepping loop (contention.run) for the scheduler and the joint time; the typed 1F1B
pipeline (graph.Pipeline) from builder through graph files to Prediction; the builder's public
layer API; one dtype vocabulary (perfmodel.units); routing policies named once; test oracles kept
out of the package."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

import perfmodel as pm
from perfmodel import contention, units, yamlio
from perfmodel.engine import estimate, resolve
from perfmodel.errors import InputError
from perfmodel.graph import OpGraph, Pipeline, parse_graph
from perfmodel.ops.moe import routing
from perfmodel.studies import moe_decode
from perfmodel.studies.numerics import quantizers
from perfmodel.workloads import recipes
from perfmodel.workloads.builder import Workload, build_graph, layer_nodes

H100 = pm.hardware("H100-SXM")
GEMM = {"op": "gemm", "m": 8192, "n": 4096, "k": 4096, "dtype": "bf16"}


def graph(*ops, **top):
    return {"schema_version": 1, "name": "t", "ops": list(ops), **top}


# ---- one stepping loop ----------------------------------------------------------------------
def _loads(*raw_ops):
    out = []
    for raw in raw_ops:
        params = dict(raw)
        o = pm.ops.op(params.pop("op"), **params)
        d = resolve(o.demand(H100), H100, "pipes")
        out.append(contention.load_of(d, estimate(d, H100), H100))
    return out


def test_joint_time_is_the_schedule_of_kernels_started_together():
    second = {"op": "rng", "elements": 1 << 28}
    loads = _loads(GEMM, second)
    pred = pm.predict(parse_graph(graph({**GEMM, "name": "a"},
                                        {**second, "name": "b", "after": [], "stream": "s2"})),
                      H100)
    assert contention.joint_time_s(loads) == pred.total_time_s
    a, b = (ld.time_s for ld in loads)
    assert max(a, b) <= contention.joint_time_s(loads) <= (a + b) * (1 + 1e-12)


def test_run_respects_dependencies_and_reports_exposed_time():
    a, b, c = _loads(GEMM, {**GEMM, "m": 512}, {**GEMM, "m": 1024})
    # c waits for a; a and b start together
    r = contention.run([a, b, c], successors=[[2], [], []], waiting=[0, 0, 1])
    assert r.start_s[:2] == [0.0, 0.0] and r.start_s[2] == r.end_s[0]
    assert r.released_by == [-1, -1, 0]
    assert r.makespan_s == max(r.end_s)
    assert all(0.0 <= e <= end - start + 1e-18
               for e, start, end in zip(r.exposed_s, r.start_s, r.end_s))


def test_finish_tolerance_is_relative():
    """A long kernel whose remaining time keeps a rounding residue (≈ 1e-13 s, far above an
    absolute 1e-15 s) after the step that should end it still ends at that event."""
    a = contention.Load(3000.0, {"hbm": 0.7})
    s = contention.slowdown([a, contention.Load(1.0, {"hbm": 0.6})])
    v = next(t for t in (1000.0 + i / 10 for i in range(1000)) if t - (t * s) / s > 1e-15)
    r = contention.run([a, contention.Load(v, {"hbm": 0.6})], [[], []], [0, 0])
    assert r.end_s[1] == v * s  # ended in the first step, not after a residue step
    assert r.end_s[0] == pytest.approx(v * s + (3000.0 - v), rel=1e-12)


def test_the_scheduler_has_no_stepping_loop_of_its_own():
    src = Path(importlib.import_module("perfmodel.schedule").__file__).read_text()
    assert "contention.run(" in src and "slowdown(" not in src


# ---- the typed pipeline ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def pp_graph():
    return build_graph(pm.load_model("llama3-8b"), "train", batch=8, seq=1024, tp=8, pp=2,
                       microbatches=4, virtual_stages=2)


def test_builder_gives_a_typed_pipeline(pp_graph):
    p = pp_graph.pipeline
    assert isinstance(p, Pipeline) and "pipeline" not in pp_graph.meta
    assert (p.stages, p.microbatches, p.virtual_stages) == (2, 4, 2)
    assert pp_graph.nodes[p.per_microbatch_ops - 1].name == "send_grads"
    assert build_graph(pm.load_model("llama3-8b"), "train", batch=8, seq=1024).pipeline is None
    with pytest.raises(AttributeError):
        p.stages = 3  # frozen


def test_graph_file_round_trip_keeps_meta_pipeline(pp_graph):
    text = pp_graph.dump()
    assert "pipeline: {stages: 2, microbatches: 4, virtual_stages: 2, per_microbatch_ops:" in text
    again = parse_graph(yamlio.loads(text))
    assert again.pipeline == pp_graph.pipeline and again.meta == pp_graph.meta
    assert again.dump() == text


def test_prediction_has_typed_pipeline_results_and_the_same_json_meta(pp_graph):
    pred = pm.predict(pp_graph, H100)
    assert pred.pipeline == pp_graph.pipeline
    assert pred.pipeline_bubble_s == pytest.approx(pred.microbatch_time_s * (2 - 1) / 2)
    meta = json.loads(pred.to_json())["meta"]
    assert list(meta)[-3:] == ["pipeline", "pipeline_bubble_s", "microbatch_time_s"]
    assert meta["pipeline"] == pp_graph.pipeline.to_dict()
    assert meta["microbatch_time_s"] == pred.microbatch_time_s
    plain = pm.predict(build_graph(pm.load_model("llama3-8b"), "decode", batch=4), H100)
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
        parse_graph(graph({**GEMM, "name": "a"}, meta={"pipeline": bad}))


def test_a_pipeline_in_meta_is_refused_by_the_constructor():
    with pytest.raises(ValueError, match="pipeline="):
        OpGraph("g", [], meta={"pipeline": {"stages": 2}})


def test_hand_written_pipeline_without_virtual_stages_defaults_to_one():
    g = parse_graph(graph({**GEMM, "name": "a"}, {**GEMM, "name": "b"},
                          meta={"pipeline": {"stages": 3, "microbatches": 2,
                                             "per_microbatch_ops": 1}}))
    assert g.pipeline == Pipeline(1, 3, 2, 1)
    pred = pm.predict(g, H100)
    a, b = pred.ops
    assert pred.pipeline_bubble_s == pytest.approx(2 * a.estimate.time_s)
    assert pred.total_time_s == pytest.approx(4 * a.estimate.time_s + b.estimate.time_s)


# ---- the builder's public layer API ---------------------------------------------------------
def test_layer_nodes_are_the_builders_layer():
    m = pm.load_model("llama3-8b")
    w = Workload("train", 2, 1024, tp=2, dtype="fp8")
    nodes = layer_nodes(m, w, "l31.", layer=31, backward=True)
    full = build_graph(m, "train", batch=2, seq=1024, tp=2, dtype="fp8")
    want = [n for n in full.nodes if n.name.startswith("l31.")]
    assert [n.name for n in nodes] == [n.name for n in want]
    assert [n.op.to_dict() for n in nodes] == [n.op.to_dict() for n in want]
    assert nodes[0].after == () and all(n.after == (p.name,) for p, n in zip(nodes, nodes[1:]))
    with pytest.raises(InputError, match="tp: 3"):
        layer_nodes(m, Workload("train", 2, 1024, tp=3))


# ---- one dtype vocabulary -------------------------------------------------------------------
def test_dtype_lists_derive_from_units():
    hardware = importlib.import_module("perfmodel.hardware")
    builder = importlib.import_module("perfmodel.workloads.builder")
    assert hardware.TENSOR_DTYPES is units.TENSOR_DTYPES
    assert builder.GEMM_DTYPES is units.GEMM_DTYPES
    assert set(units.TENSOR_DTYPES) <= set(units.DTYPES)
    assert set(units.GEMM_DTYPES) <= set(units.LINEAR_RECIPES)
    assert set(recipes.TE_FORMATS) <= set(units.LINEAR_RECIPES)
    for r in units.LINEAR_RECIPES.values():
        assert r.gemm_dtype in units.TENSOR_DTYPES
    # every recipe that quantizes has an emulator in the numerics study
    assert {n for n, r in units.LINEAR_RECIPES.items() if r.quantized} <= set(quantizers.FORMATS)


@pytest.mark.parametrize("fmt", units.GEMM_DTYPES)
def test_linear_layer_accepts_every_builder_policy(fmt):
    layer = recipes.linear_layer(1024, 4096, 4096, fmt)
    gemms = [o for ops in layer.values() for o in ops if o.name == "gemm"]
    assert len(gemms) == 3 and {o.dtype for o in gemms} == {fmt}
    quants = [o for ops in layer.values() for o in ops if o.name == "quantize"]
    assert bool(quants) == units.LINEAR_RECIPES[fmt].quantized


def test_fp8_is_the_builders_per_tensor_fp8():
    """The builder's fp8 policy and linear_layer('fp8') run the same kernels: fp8 GEMMs with
    per-tensor scaling, fed by amax-pass quantization (current scaling)."""
    layer = recipes.linear_layer(2048, 4096, 14336, "fp8")
    fprop_q = [o for o in layer["fprop"] if o.name == "quantize"]
    assert all(o.to == "fp8" and o.amax_pass for o in fprop_q)
    assert all(o.fp8_scaling == "tensor" for ops in layer.values() for o in ops
               if o.name == "gemm")
    g = build_graph(pm.load_model("llama3-8b"), "train", batch=2, seq=1024, dtype="fp8")
    built = {n.name: n.op for n in g.nodes}
    assert built["l0.gate_up.quant_x"].to_dict() == \
        recipes.quantize_op("fp8", 2048, 4096, "activation").to_dict()
    assert built["l0.gate_up"].fp8_scaling == "tensor"
    with pytest.raises(ValueError, match="unquantized"):
        recipes.quantize_op("bf16", 16, 16, "weight")
    with pytest.raises(ValueError, match="format must be one of"):
        recipes.linear_layer(16, 16, 16, "int8")


# ---- routing policies and oracles ----------------------------------------------------------
def test_routing_policies_are_named_once():
    assert routing.POLICIES == ("token_balanced", "metro", "optimal", "uniform")
    assert moe_decode.STUDY_POLICIES == ("token_balanced", "metro", "optimal")
    assert set(moe_decode.STUDY_POLICIES) == set(moe_decode.ROUTING_COST_S)


def test_routing_takes_load_and_the_oracles_live_in_tests():
    p = routing.place_contiguous(8, 4)
    counts = [3, 0, 1, 5, 0, 0, 2, 1]
    assert routing.route_metro(load=counts, placement=p).max_activated == 2
    assert routing.expert_counts(load=[[0, 1], [1, 7]], experts=8).tolist() == \
        [1, 2, 0, 0, 0, 0, 0, 1]
    for name in ("route_metro_sequential", "route_metro_fixpoint", "route_optimal_milp"):
        assert not hasattr(routing, name)
    from tests.oracles import route_metro_sequential
    assert route_metro_sequential(counts, p).max_activated == 2
