"""Megatron-Core's selective recomputation by module (plan_training `recompute_modules`,
builder.RECOMPUTE_MODULES, plan.memory.recomputed_bytes_per_token) and the Megatron-Bridge
DeepSeek-V3 replay that uses it."""
import dataclasses

import pytest

from perfmodel.errors import InputError
from perfmodel.plan.memory import activation_bytes_per_token, recomputed_bytes_per_token
from perfmodel.plan.training import plan_training
from perfmodel.validation import training_predict as tp_
from perfmodel.workloads.builder import build_graph
from perfmodel.workloads.models import load_model

DSV3 = load_model("deepseek-v3")
LLAMA = dataclasses.replace(load_model("llama3-8b"), layers=2)
TRAIN = dict(batch=1, seq=1024, tp=2, dtype="bf16")


def _recomputed(g) -> list[str]:
    """The recomputed ops' roles, every layer in graph order (the name after `.recompute.`)."""
    return [n.name.split(".recompute.", 1)[1] for n in g.nodes if ".recompute." in n.name]


def test_default_modules_are_the_attention_core():
    # None is Megatron-Core's default ["core_attn"]: the same graph as before the parameter
    base = build_graph(LLAMA, "train", recompute="selective", **TRAIN)
    core = build_graph(LLAMA, "train", recompute="selective", recompute_modules=("core_attn",),
                       **TRAIN)
    assert [(n.name, n.op) for n in base.nodes] == [(n.name, n.op) for n in core.nodes]
    assert _recomputed(base) == ["attn"] * LLAMA.layers


def test_dense_mlp_recomputes_the_ffn_and_its_allreduce():
    g = build_graph(LLAMA, "train", recompute="selective", recompute_modules=("mlp",), **TRAIN)
    assert _recomputed(g) == ["gate_up", "act", "down", "ffn_allreduce"] * LLAMA.layers
    none = build_graph(LLAMA, "train", recompute="selective", recompute_modules=(), **TRAIN)
    assert _recomputed(none) == []


def test_mlp_skips_moe_layers_and_moe_recomputes_the_block():
    # transformer_layer.py: recompute_mlp only where the layer is not a MoE layer
    m = dataclasses.replace(DSV3, layers=4, dense_layers=1)
    kw = dict(batch=1, seq=512, tp=1, ep=8, dp=8, dtype="bf16", recompute="selective")
    mlp = _recomputed(build_graph(m, "train", recompute_modules=("mlp",), **kw))
    assert mlp == ["gate_up", "act", "down"]  # layer 0, the one dense layer
    moe = _recomputed(build_graph(m, "train", recompute_modules=("moe",), **kw))
    assert moe == ["router", "topk", "dispatch", "experts", "combine"] * 3
    up = _recomputed(build_graph(m, "train", recompute_modules=("mla_up_proj",), **kw))
    assert up == ["q_norm", "q_b", "kv_norm", "rope", "kv_b"] * 4


def test_mla_up_proj_bytes_hand_worked():
    # (q_lora + kv_lora)·2 (the up-projections' BF16 inputs) + heads·(2·192 + 128)·2 (Q, K, V)
    want = ((1536 + 512) * 2 + 128 * (2 * 192 + 128) * 2) / 4
    got = recomputed_bytes_per_token(DSV3, 10, tp=4, modules={"mla_up_proj"})
    assert got == pytest.approx(want)
    # a dense layer's MLP: SwiGLU's gate and up pre-activations and the down input, BF16
    dense = recomputed_bytes_per_token(LLAMA, 0, tp=2, modules={"mlp"})
    assert dense == pytest.approx(3 * LLAMA.ffn_hidden * 2 / 2)
    assert recomputed_bytes_per_token(DSV3, 10, modules={"mlp", "core_attn"}) == 0.0


def test_dropped_bytes_stay_within_what_the_layer_keeps():
    all_ = {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"}
    for layer in (0, 10):  # a dense and a MoE layer
        for dtype in ("bf16", "fp8"):
            kept = activation_bytes_per_token(DSV3, layer, 8, 8, dtype)
            dropped = recomputed_bytes_per_token(DSV3, layer, 8, 8, dtype, all_)
            assert 0 < dropped < kept


def test_plan_memory_falls_and_time_rises_with_modules():
    kw = dict(batch=2, seq=2048, tp=2, recompute="selective", allow_oversubscribed=True)
    plans = [plan_training(LLAMA, "H100-SXM", recompute_modules=mods, **kw)
             for mods in ((), ("mlp",), ("mlp", "layernorm"))]
    acts = [p.memory.activation_bytes for p in plans]
    steps = [p.step_time_s for p in plans]
    assert acts[0] > acts[1] > acts[2]
    assert steps[0] < steps[1] < steps[2]


@pytest.mark.parametrize("recompute, modules, says", [
    ("selective", ("core_attn", "attn"), "unknown module 'attn'"),
    ("selective", "mlp", "expected a tuple"),
    ("none", ("mlp",), "recompute='selective'"),
    ("selective", ("mla_up_proj",), "multi-head latent attention"),
])
def test_bad_modules_are_refused_naming_the_parameter(recompute, modules, says):
    with pytest.raises(InputError) as e:
        plan_training(LLAMA, "H100-SXM", batch=2, seq=2048, recompute=recompute,
                      recompute_modules=modules)
    assert str(e.value).startswith("recompute_modules: ") and says in str(e.value)


def test_bridge_deepseek_rows_replay_the_recipe_modules():
    assert tp_.recompute_choice("selective:mla_up_proj,mlp") == (
        "selective", ("mla_up_proj", "mlp"))
    assert tp_.recompute_choice("full") == ("full", None)
    cases = [c for c in tp_.load_bridge_cases()[0] if c.model == "deepseek-v3"]
    by_layout = {(c.pp, c.vp): tp_.replayed_recompute(c) for c in cases if not c.recompute}
    assert by_layout[(8, 4)] == ("selective:mla_up_proj,mlp",)
    assert by_layout[(16, 1)] == ("selective:mla_up_proj",)


def test_bridge_gpt_oss_rows_recompute_layernorm_and_moe_act():
    # Megatron-Bridge's GPT-OSS-120B recipes (H100 PP4, B200 PP1) recompute both modules
    cases = [c for c in tp_.load_bridge_cases()[0]
             if c.model == "gpt-oss-120b" and not c.recompute]
    assert {c.hardware.name for c in cases} == {"H100-SXM", "B200"}
    for c in cases:
        assert tp_.replayed_recompute(c) == ("selective:layernorm,moe_act",)
    # and the replay plans with it
    c = next(c for c in cases if c.hardware.name == "B200")
    planned = tp_.plan_case(c)
    assert planned.recompute == "selective"
