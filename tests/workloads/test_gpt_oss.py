"""gpt-oss-120b / 20b: sliding-window layers (attention over the window, KV sized to it) and
MXFP4 expert weights (models/gpt-oss-*.yaml, docs/model-format.md)."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.plan.memory import serving_memory, weight_bytes_per_gpu
from perfmodel.plan.simulator.kv import kv_budget
from perfmodel.units import GB
from perfmodel.workloads.builder import kv_cache_bytes, kv_cache_bytes_per_token
from perfmodel.workloads.models import load_model, parse_model


@pytest.mark.parametrize("name, total", [("gpt-oss-120b", 116.8e9), ("gpt-oss-20b", 20.9e9)])
def test_gpt_oss_loads_with_its_parameter_count(name, total):
    m = pm.load_model(name)
    assert m.params() == pytest.approx(total, rel=0.02)
    assert m.sliding_window == 128 and m.expert_dtype == "mxfp4"
    assert [m.window(i) for i in range(4)] == [128, None, 128, None]  # even layers slide
    assert m.window_layers() == m.layers // 2


def _attention(graph, layer):
    return next(n.op for n in graph.nodes if n.name == f"l{layer}.attn")


def test_decode_reads_the_window_on_sliding_layers_and_the_context_on_full_ones():
    m = pm.load_model("gpt-oss-120b")
    g = pm.build_graph(m, "decode", batch=8, context=8192)
    sliding, full = _attention(g, 0), _attention(g, 1)
    assert sliding.window == 128 and sliding.seq_kv <= 128
    assert full.window is None and full.seq_kv == 8192
    hw = pm.hardware("H200")
    kv_bytes = lambda o: pm.predict_op(o, hw).demand.hbm_bytes  # noqa: E731
    # K and V of 8 KV heads x 64 dims in BF16 per key: the sliding layer reads 128 keys
    assert sliding.demand(hw).hbm_bytes < 8 * 8 * 2 * 64 * 2 * 200
    assert full.demand(hw).hbm_bytes > 8 * 8 * 2 * 64 * 2 * 8192
    # a short context is not padded to the window
    short = _attention(pm.build_graph(m, "decode", batch=8, context=100), 0)
    assert short.seq_kv == 100


def test_prefill_masks_the_window():
    m = pm.load_model("gpt-oss-20b")
    g = pm.build_graph(m, "prefill", batch=1, seq=4096)
    sliding, full = _attention(g, 0), _attention(g, 1)
    assert sliding.window == 128 and sliding.seq_kv in (None, 4096) and sliding.causal
    hw = pm.hardware("H100-SXM")
    assert pm.predict_op(sliding, hw).time_s < pm.predict_op(full, hw).time_s / 4


def test_experts_read_mxfp4_weights_and_weights_total_61_to_65_gb():
    m = pm.load_model("gpt-oss-120b")
    g = pm.build_graph(m, "decode", batch=64, context=2048)
    experts = next(n.op for n in g.nodes if n.name == "l0.experts")
    assert experts.dtype == "bf16" and experts.weight_dtype == "mxfp4"
    qkv = next(n.op for n in g.nodes if n.name == "l0.qkv")
    assert qkv.dtype == "bf16"  # attention stays in the run's dtype
    w = weight_bytes_per_gpu(m, "bf16", 1, 1, 1)
    assert 61e9 <= w <= 65.5e9
    # experts at 4.25 bits: the same model with BF16 experts holds ~3.7x the bytes
    bf16 = weight_bytes_per_gpu(parse_model({**_raw("gpt-oss-120b"), "expert_dtype": "bf16"}),
                                "bf16", 1, 1, 1)
    assert bf16 / w == pytest.approx(3.6, rel=0.05)
    # a decode step's experts read 4.25-bit weights: the MXFP4 op moves ~1/3.8 of the bytes
    hw = pm.hardware("H200")
    wide = experts.with_params(weight_dtype=None)
    ratio = (max(d.hbm_bytes for d in wide.demand(hw).options)
             / max(d.hbm_bytes for d in experts.demand(hw).options))
    assert 3.0 < ratio < 3.8
    # training keeps the policy's weights
    train = pm.build_graph(pm.load_model("gpt-oss-20b"), "train", batch=1, seq=256)
    assert next(n.op for n in train.nodes if n.name == "l0.experts").weight_dtype is None


def _raw(name):
    from perfmodel import yamlio
    from perfmodel.workloads.models import builtin_model_dir
    return yamlio.load(builtin_model_dir() / f"{name}.yaml", "model file")


def test_kv_cache_counts_sliding_layers_at_the_window():
    m = pm.load_model("gpt-oss-120b")
    per_layer = 2 * 8 * 64 * 2  # K and V, 8 KV heads x 64, BF16
    assert kv_cache_bytes(m, 8192) == per_layer * (18 * 8192 + 18 * 128)
    assert kv_cache_bytes(m, 100) == per_layer * 36 * 100
    assert kv_cache_bytes_per_token(m, full_only=True) == per_layer * 18
    fit = serving_memory(m, pm.hardware("H200"), batch=64, context=8192)
    assert fit.kv_cache_bytes == 64 * kv_cache_bytes(m, 8192)
    # the simulator's budget: blocks of the full layers, the windows reserved per sequence
    plain = kv_budget(m, "H200")
    hybrid = kv_budget(m, "H200", max_seqs=256)
    assert hybrid.kv_bytes_per_token == plain.kv_bytes_per_token / 2
    assert hybrid.window_reserve_bytes == 256 * (128 // 16 + 1) * 16 * per_layer * 18
    assert hybrid.tokens > 1.9 * plain.tokens


@pytest.mark.parametrize("tp", [1, 8])
def test_plan_serve_runs_gpt_oss_on_h200(tp):
    from perfmodel.plan.simulator import Workload, simulate
    r = simulate("gpt-oss-120b", "H200", Workload("offline", 32, 512, 128, seed=0),
                 engine="vllm", tp=tp)
    assert r.output_tokens_per_s > 0


def test_cli_predict_gpt_oss(capsys):
    from perfmodel.cli.main import main
    assert main(["predict", "gpt-oss-120b", "--phase", "decode", "--batch", "64",
                 "--context", "2048", "--hw", "H100-SXM"]) in (0, None)
    assert "gpt-oss-120b-decode-b64-ctx2048" in capsys.readouterr().out


BASE = {"schema_version": 1, "source": {"title": "t", "url": "u"},
        "params_total": {"value": 1e9, "source": "s"}, "hidden": 64, "layers": 2, "heads": 4,
        "kv_heads": 2, "head_dim": 16, "ffn_hidden": 128, "vocab": 100}


@pytest.mark.parametrize("extra, message", [
    ({"sliding_window": -1}, "m.yaml: sliding_window: expected an integer >= 0"),
    ({"sliding_window": 8, "sliding_window_layers": "third"},
     "m.yaml: sliding_window_layers: expected one of all, even, odd"),
    ({"sliding_window_layers": "even"}, "m.yaml: sliding_window_layers: needs sliding_window"),
    ({"expert_dtype": "int3"}, "m.yaml: expert_dtype: expected one of"),
    ({"expert_dtype": "mxfp4"}, "m.yaml: expert_dtype: applies to routed experts"),
    ({"expert_bias": "true"}, "m.yaml: expert_bias: expected true or false"),
    ({"expert_bias": True}, "m.yaml: expert_bias: applies to routed experts"),
    ({"swiglu_limit": -1.0}, "m.yaml: swiglu_limit: expected a number in [0,"),
    ({"swiglu_limit": float("nan")}, "m.yaml: swiglu_limit: expected a number in [0,"),
    ({"swiglu_limit": True}, "m.yaml: swiglu_limit: expected a number in [0,"),
    ({"swiglu_limit": 7.0}, "m.yaml: swiglu_limit: clamps the routed experts' SwiGLU inputs"),
    ({"experts": 4, "top_k": 2, "expert_hidden": 32, "activation": "gelu", "swiglu_limit": 7.0},
     "m.yaml: swiglu_limit: clamps the routed experts' SwiGLU inputs"),
])
def test_bad_new_keys_are_one_line_errors(extra, message):
    with pytest.raises(pm.InputError) as e:
        parse_model({**BASE, **extra}, "m.yaml")
    assert len(e.value.problems) == 1 and e.value.problems[0].startswith(message)


def test_gpt_oss_experts_carry_biases_and_clamp_their_swiglu_at_7():
    for name in ("gpt-oss-120b", "gpt-oss-20b"):
        m = load_model(name)
        assert m.expert_bias is True and m.swiglu_limit == 7.0
    other = load_model("qwen3-30b-a3b")
    assert other.expert_bias is False and other.swiglu_limit == 0.0


def _train_graph(model="gpt-oss-120b", **kw):
    from perfmodel.workloads.builder import build_graph
    args = dict(batch=1, seq=4096, tp=1, ep=8, dtype="bf16")
    args.update(kw)
    return build_graph(load_model(model) if isinstance(model, str) else model, "train", **args)


def test_training_adds_megatrons_unfused_clamp_and_expert_bias_by_hand():
    g = _train_graph()
    ops = {n.name: n.op for n in g.nodes}
    order = [n.name for n in g.nodes if n.name.startswith("l1.")]
    rows = 4096 * 4  # the GPU's routed rows: t * top_k / tp
    # the clamp over FC1's two halves (2 x 2880), the bias over FC2's output (2880)
    clamp, bias = ops["l1.experts_clamp"], ops["l1.experts_bias"]
    assert (clamp.elements, clamp.inputs, clamp.outputs) == (rows * 5760, 2, 2)
    assert (bias.elements, bias.inputs, bias.outputs) == (rows * 2880, 3, 3)
    assert (ops["l1.experts_bias_bwd"].inputs, ops["l1.experts_bias_bwd"].outputs) == (4, 2)
    assert (ops["l1.experts_clamp_bwd"].inputs, ops["l1.experts_clamp_bwd"].outputs) == (3, 2)
    assert clamp.dtype == bias.dtype == "bf16"
    # forward: after the experts, before the combine; backward: the bias's gradients before the
    # experts' dgrad, the clamp's after it
    at = order.index
    assert at("l1.experts") < at("l1.experts_clamp") < at("l1.experts_bias") < at("l1.combine")
    assert (at("l1.combine_bwd") < at("l1.experts_bias_bwd") < at("l1.experts_dgrad")
            < at("l1.experts_clamp_bwd") < at("l1.experts_wgrad"))
    # tensor parallelism splits the routed rows (sequence parallelism)
    assert _train_graph(tp=2).nodes  # builds
    ops2 = {n.name: n.op for n in _train_graph(tp=2, ep=8).nodes}
    assert ops2["l1.experts_bias"].elements == rows // 2 * 2880


def test_serving_graphs_and_models_without_them_add_nothing():
    from perfmodel.workloads.builder import build_graph
    m = load_model("gpt-oss-120b")
    for phase, kw in (("prefill", dict(batch=1, seq=1024)),
                      ("decode", dict(batch=8, context=1024))):
        names = [n.name for n in build_graph(m, phase, tp=8, dtype="bf16", **kw).nodes]
        assert not [n for n in names if "experts_clamp" in n or "experts_bias" in n]
    names = [n.name for n in _train_graph("qwen3-30b-a3b").nodes]
    assert not [n for n in names if "experts_clamp" in n or "experts_bias" in n]


def test_recomputed_moe_act_clamps_again():
    from perfmodel.workloads.builder import build_graph
    g = build_graph(load_model("gpt-oss-120b"), "train", batch=1, seq=4096, tp=1, ep=8,
                    dtype="bf16", recompute="selective", recompute_modules=("moe_act",))
    names = [n.name for n in g.nodes]
    assert "l1.recompute.experts_clamp" in names and "l1.recompute.experts_bias" not in names


def test_the_extras_cost_a_training_step_time():
    from dataclasses import replace
    from perfmodel.plan.training import plan_training
    m = load_model("gpt-oss-120b")
    bare = replace(m, expert_bias=False, swiglu_limit=0.0)
    kw = dict(batch=16, seq=4096, tp=1, pp=1, dp=8, ep=8, dtype="bf16", microbatches=16)
    with_them = plan_training(m, "H100-SXM", **kw, allow_oversubscribed=True)
    without = plan_training(bare, "H100-SXM", **kw, allow_oversubscribed=True)
    assert with_them.step_time_s > without.step_time_s


def test_the_clamped_pre_activation_is_kept_unless_the_activation_is_recomputed():
    from dataclasses import replace
    from perfmodel.plan.memory import activation_bytes_per_token, recomputed_bytes_per_token
    m = load_model("gpt-oss-120b")
    bare = replace(m, swiglu_limit=0.0)
    # per token at EP 8, TP 1: top_k = 4 routed rows, each the concatenated clamped halves
    # (2 x 2880 BF16 elements) the fused activation saves beside FC1's output
    extra = 4 * 2 * 2880 * 2
    assert activation_bytes_per_token(m, 1, 1, 8) - activation_bytes_per_token(bare, 1, 1, 8) \
        == extra
    # moe_act's checkpoint keeps FC1's output only: the clamp's copy goes with it
    for modules in ({"moe_act"}, {"moe"}):
        assert (recomputed_bytes_per_token(m, 1, 1, 8, modules=modules)
                - recomputed_bytes_per_token(bare, 1, 1, 8, modules=modules)) == extra
