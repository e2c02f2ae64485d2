"""Graph builder: FLOP cross-checks, the ops of a layer, parallelism ops, the dtype policy."""
from __future__ import annotations

from collections import Counter

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.workloads.builder import Workload, build_graph, layer_nodes


def _gemm_flop(graph) -> float:
    return sum(n.op.flop for n in graph.nodes if n.op.name == "gemm") + sum(
        pm.predict_op(n.op, "H100-SXM").flop for n in graph.nodes if n.op.name == "moe")


def _linear_params(m) -> float:
    """Parameters that multiply every token: all but the embedding table and the LM head."""
    return m.params(active=True) - m.vocab * m.hidden * (1 if m.tie_embeddings else 2)


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "qwen3-30b-a3b", "deepseek-v3"])
@pytest.mark.parametrize("tp", [1, 8])
def test_prefill_flop_is_2_params_tokens(name, tp):
    """GEMM FLOP = 2·(linear params)·tokens + LM head on the last token of each sequence,
    within 2 % (router and MLA absorbed forms differ slightly)."""
    m = pm.load_model(name)
    if m.is_moe and tp > 1 and m.expert_hidden % tp:
        pytest.skip("expert_hidden not divisible")
    b, s = 2, 1024
    g = pm.build_graph(m, "prefill", batch=b, seq=s, tp=tp)
    # with fewer KV heads than TP ranks each rank keeps a replica of one KV head
    kv_replicas = 0 if m.is_mla else tp * max(1, m.kv_heads // tp) - m.kv_heads
    extra = kv_replicas * 2 * m.head_dim * m.hidden * m.layers
    # MLA's low-rank down-projections and the router are replicated on every TP rank (vLLM
    # ReplicatedLinear)
    if m.is_mla:
        extra += (tp - 1) * m.hidden * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim) \
            * m.layers
    extra += (tp - 1) * m.hidden * m.experts * (m.layers - m.dense_layers) if m.is_moe else 0
    expected = 2 * (_linear_params(m) + extra) * b * s + 2 * m.hidden * m.vocab * b
    assert _gemm_flop(g) * tp == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "qwen3-30b-a3b"])
def test_training_flop_is_6_params_tokens(name):
    m = pm.load_model(name)
    b, s = 1, 2048
    g = pm.build_graph(m, "train", batch=b, seq=s)
    expected = 6 * (_linear_params(m) + m.hidden * m.vocab) * b * s  # LM head on every token
    assert _gemm_flop(g) == pytest.approx(expected, rel=0.02)


def test_layer_ops_are_all_present():
    g = pm.build_graph(pm.load_model("llama3-8b"), "prefill", batch=1, seq=512, tp=2)
    roles = Counter(n.name.split(".", 1)[1] if n.name.startswith("l") and "." in n.name
                    else n.name for n in g.nodes)
    for role in ("attn_norm", "qkv", "rope", "attn", "o_proj", "attn_allreduce", "attn_residual",
                 "ffn_norm", "gate_up", "act", "down", "ffn_allreduce", "ffn_residual"):
        assert roles[role] == 32, role
    for single in ("embed", "final_norm", "lm_head"):
        assert roles[single] == 1


def test_expert_and_data_parallel_ops():
    g = pm.build_graph(pm.load_model("deepseek-v3"), "train", batch=8, seq=1024, ep=8, dp=4)
    kinds = Counter(n.op.name for n in g.nodes)
    assert kinds["alltoall"] == 4 * (61 - 3)  # dispatch + combine, forward and backward
    assert kinds["reduce_scatter"] == 1 and kinds["allgather"] == 1
    assert kinds["moe"] == 3 * 58 and kinds["attention"] == 2 * 61


def test_mla_decode_uses_the_latent_cache():
    g = pm.build_graph(pm.load_model("deepseek-v3"), "decode", batch=32, context=4096)
    attn = next(n.op for n in g.nodes if n.op.name == "attention")
    assert attn.head_dim == 576 and attn.head_dim_v == 512 and attn.kv_heads == 1
    assert attn.shared_kv


@pytest.mark.parametrize("kw, message", [
    (dict(tp=3), "tp: 3 must divide the 64 attention heads"),
    (dict(ep=2), "has no experts"),
    (dict(phase="serve"), "phase: expected one of"),
    (dict(dtype="int3"), "dtype: expected one of"),
    (dict(batch=0), "batch: expected a positive integer"),
])
def test_bad_workloads_are_input_errors(kw, message):
    args = {"phase": "decode", "batch": 4, **kw}
    with pytest.raises(pm.InputError, match=message):
        pm.build_graph(pm.load_model("llama3-70b"), **args)


def test_fp8_policy_speeds_up_prefill_on_h100():
    m = pm.load_model("llama3-70b")
    bf16 = pm.predict(pm.build_graph(m, "prefill", batch=4, seq=4096, tp=8), "H100-SXM")
    fp8 = pm.predict(pm.build_graph(m, "prefill", batch=4, seq=4096, tp=8, dtype="fp8"),
                     "H100-SXM")
    assert 1.2 < bf16.total_time_s / fp8.total_time_s < 2.0


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
