"""Training-step terms against hand-worked cases: context parallelism (ring attention), the
interleaved pipeline (VP), recomputation, Megatron's bucketed DP overlap, FSDP's prefetch, the
two MFU conventions, the search and the Hugging Face config import."""
from __future__ import annotations

import json

import pytest

import perfmodel as pm
from perfmodel.cli.models import model_from_hf_config
from perfmodel.errors import InputError
from perfmodel.plan.memory import memory_fit
from perfmodel.plan.training import (bucket_params, bucketed_exposed_s, megatron_flop_per_token,
                                     model_flop_per_token, plan_training, prefetched_exposed_s,
                                     search_training_plans)
from perfmodel.workloads.builder import Workload, build_graph
from perfmodel.workloads.models import load_model, parse_model


def test_megatron_bucket_and_overlap_rules():
    assert bucket_params(8) == 40_000_000 and bucket_params(64) == 64_000_000
    # comm shorter than the window: only the last bucket (10 s / 5) shows
    assert bucketed_exposed_s(10.0, 5, 100.0) == pytest.approx(2.0)
    # comm longer: first bucket ready at 40/4 = 10 s, then 100 s of buckets, window 40 s
    assert bucketed_exposed_s(100.0, 4, 40.0) == pytest.approx(70.0)
    # FSDP prefetch: first layer exposed, later layers only beyond their compute
    assert prefetched_exposed_s(2.0, 5.0, 10) == pytest.approx(2.0)
    assert prefetched_exposed_s(5.0, 2.0, 4) == pytest.approx(5.0 + 3 * 3.0)


def test_ring_attention_shapes_and_transfers():
    m = load_model("llama3-8b")
    s, cp = 8192, 4
    g = build_graph(m, "train", batch=1, seq=s, dp=2, cp=cp)
    nodes = {n.name: n for n in g.nodes}
    sq = s // cp
    step0, step1 = nodes["l31.attn.cp0"].op.params, nodes["l31.attn.cp1"].op.params
    assert (step0["seq_q"], step0["seq_kv"], step0["causal"]) == (sq, sq, True)
    assert (step1["seq_q"], step1["seq_kv"], step1["causal"]) == (sq, sq // 2, False)
    # causal work of the whole sequence / cp: sq²/2 + (cp−1)·sq·sq/2 = s²/(2·cp)
    work = sq * sq / 2 + (cp - 1) * sq * (sq // 2)
    assert work == pytest.approx(s * s / 2 / cp)
    # K and V of one chunk pair: 2048 tokens × 8 KV heads × (128 + 128) × 2 bytes
    kv = 2048 * 8 * 256 * 2
    sends = [n for n in g.nodes if n.name.startswith("l31.attn.cp_send")]
    assert len(sends) == cp - 1 and all(n.stream == "cp" for n in sends)
    assert sends[0].op.params["bytes"] == kv
    assert nodes["l31.attn_bwd.cp_send0"].op.params["bytes"] == 2 * kv  # K, V, dK, dV
    # step i + 1 waits for step i and the transfer of its block
    assert set(nodes["l31.attn.cp1"].after) == {"l31.attn.cp0", "l31.attn.cp_send0"}
    # every other op sees seq/cp tokens; gradients reduce over dp·cp
    assert nodes["l31.qkv"].op.params["m"] == sq
    assert nodes["grad_reduce_scatter"].op.params["gpus"] == 2 * cp
    with pytest.raises(InputError, match="multiple of 8"):
        build_graph(m, "train", batch=1, seq=8188, cp=4)
    with pytest.raises(InputError, match="context parallelism applies to training"):
        build_graph(m, "prefill", batch=1, seq=8192, cp=2)


def test_context_parallelism_divides_activations_and_shards_the_optimizer():
    m, h = load_model("llama3-8b"), pm.hardware("H100-SXM")
    one = memory_fit(m, h, Workload("train", 1, 8192, dp=4))
    two = memory_fit(m, h, Workload("train", 1, 8192, dp=4, cp=2))
    assert two.activation_bytes == pytest.approx(one.activation_bytes / 2)
    assert two.optimizer_bytes == pytest.approx(one.optimizer_bytes / 2)  # over dp·cp = 8
    a = plan_training(m, h, batch=4, seq=8192, dp=4, microbatches=4, allow_oversubscribed=True)
    b = plan_training(m, h, batch=4, seq=8192, dp=4, cp=2, microbatches=4)
    assert b.gpus == 2 * a.gpus == 8
    # half the tokens per GPU: a bit more than half the step (the ring's exposed hop)
    assert 0.45 < b.step_time_s / a.step_time_s < 0.7


def test_interleaved_pipeline_bubble_and_memory():
    m = load_model("llama3-70b")
    kw = dict(batch=16, seq=4096, tp=8, pp=4, dp=1, microbatches=16)
    for vp in (1, 5):
        g = build_graph(m, "train", virtual_stages=vp, **kw)
        p = pm.predict(g, "H100-SXM")
        assert p.pipeline_bubble_s == pytest.approx(p.microbatch_time_s * 3 / vp)
    w1 = Workload("train", 16, 4096, tp=8, pp=4, microbatches=16)
    w5 = Workload("train", 16, 4096, tp=8, pp=4, microbatches=16, virtual_stages=5)
    h = pm.hardware("H100-SXM")
    ratio = memory_fit(m, h, w5).activation_bytes / memory_fit(m, h, w1).activation_bytes
    assert ratio == pytest.approx(1 + 3 / (4 * 5))  # Korthikanti et al. §4.2.3


def test_recomputation_adds_its_forward():
    m = load_model("llama3-8b")
    kw = dict(batch=1, seq=4096, dp=1)
    names = {rc: [n.name for n in build_graph(m, "train", recompute=rc, **kw).nodes]
             for rc in ("none", "selective", "op", "full")}
    assert not any("recompute" in n for n in names["none"])
    # Megatron selective: one attention forward again per layer
    assert [n for n in names["selective"] if "recompute" in n and n.startswith("l0.")] == \
        ["l0.recompute.attn"]
    # torchtitan per-op SAC: GEMMs 2 and 4 (o_proj, down) and the non-GEMM ops, no attention
    op = [n.split(".", 2)[2] for n in names["op"] if n.startswith("l0.recompute.")]
    assert [n for n in op if n in ("qkv", "o_proj", "gate_up", "down")] == ["o_proj", "down"]
    assert "attn" not in op and {"attn_norm", "rope", "act", "ffn_residual"} <= set(op)
    t = {rc: plan_training(m, "H100-SXM", recompute=rc, allow_oversubscribed=True,
                           **kw).step_time_s
         for rc in ("none", "selective", "op", "full")}
    assert t["none"] < t["selective"] < t["full"] and t["none"] < t["op"] < t["full"]
    # full: about one more forward, a third of forward + backward
    assert 1.2 < t["full"] / t["none"] < 1.45


def test_fsdp_overlap_is_between_one_gather_and_no_overlap():
    kw = dict(batch=2, seq=4096, dp=8, microbatches=2, zero=3)
    on = plan_training("llama3-8b", "H100-SXM", **kw)
    off = plan_training("llama3-8b", "H100-SXM", overlap=False, **kw)
    assert 0 < on.dp_exposed_s < off.dp_exposed_s
    assert on.step_time_s == pytest.approx(on.pipeline_s + on.dp_exposed_s + on.optimizer_s)
    z1 = plan_training("llama3-8b", "H100-SXM", **{**kw, "zero": 1})
    assert z1.dp_exposed_s < on.dp_exposed_s  # one bucketed sync vs every microbatch's


def test_gradient_accumulation_without_pipeline_repeats_the_microbatch():
    one = plan_training("llama3-8b", "H100-SXM", batch=1, seq=4096, dp=8)
    eight = plan_training("llama3-8b", "H100-SXM", batch=8, seq=4096, dp=8, microbatches=8)
    assert eight.pipeline_s == pytest.approx(8 * one.pipeline_s)
    assert 0.3 < eight.mfu < 0.85  # the defect: 5.9 with the microbatches ignored


def test_two_mfu_conventions():
    m = load_model("llama3-8b")
    s = 8192
    palm = 6 * m.params(active=True) + 12 * 32 * 4096 * s
    assert model_flop_per_token(m, s) == palm
    layers = 32 * (m.attention_params() + m.ffn_params(0))
    assert megatron_flop_per_token(m, s) == 6 * layers + 6 * 128256 * 4096 + 6 * 32 * s * 32 * 256
    p = plan_training(m, "H100-SXM", batch=1, seq=s, dp=8, allow_oversubscribed=True)
    assert p.mfu_megatron / p.mfu == pytest.approx(megatron_flop_per_token(m, s) / palm)


def test_search_ranks_fitting_plans():
    plans, tried, refused = search_training_plans("llama3-8b", "H100-SXM", 16, 64, 8192)
    assert plans and tried >= len(plans) and all(p.memory.fits for p in plans)
    assert [p.tokens_per_s for p in plans] == sorted((p.tokens_per_s for p in plans),
                                                     reverse=True)
    assert all(p.gpus == 16 and p.global_batch == 64 for p in plans)
    assert any(p.cp > 1 for p in plans) and any(p.vp > 1 for p in plans)


# Hugging Face config.json files of shipped models (the fields perfmodel reads), with their model
# cards' parameter counts (the shipped model files' params_total)
HF_CONFIGS = {
    "llama3-8b": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
                  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
                  "vocab_size": 128256, "hidden_act": "silu", "tie_word_embeddings": False},
    "llama3-70b": {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
                   "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8,
                   "vocab_size": 128256, "hidden_act": "silu", "tie_word_embeddings": False},
    "mixtral-8x7b": {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
                     "num_attention_heads": 32, "num_hidden_layers": 32,
                     "num_key_value_heads": 8, "vocab_size": 32000, "hidden_act": "silu",
                     "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": None,
                     "tie_word_embeddings": False},
    "qwen3-30b-a3b": {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
                      "moe_intermediate_size": 768, "num_attention_heads": 32, "head_dim": 128,
                      "num_hidden_layers": 48, "num_key_value_heads": 4, "vocab_size": 151936,
                      "hidden_act": "silu", "num_experts": 128, "num_experts_per_tok": 8,
                      "tie_word_embeddings": False, "sliding_window": None,
                      "use_sliding_window": False},
    "deepseek-v3": {"model_type": "deepseek_v3", "hidden_size": 7168,
                    "intermediate_size": 18432, "moe_intermediate_size": 2048,
                    "num_attention_heads": 128, "num_hidden_layers": 61,
                    "num_key_value_heads": 128, "vocab_size": 129280, "hidden_act": "silu",
                    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
                    "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512,
                    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                    "tie_word_embeddings": False},
    "mpt-30b": {"model_type": "mpt", "d_model": 7168, "n_layers": 48, "n_heads": 64,
                "expansion_ratio": 4, "vocab_size": 50432,
                "attn_config": {"alibi": True}},
}


@pytest.mark.parametrize("name", sorted(HF_CONFIGS))
def test_hf_import_round_trips_the_model_card_parameters(name):
    shipped = load_model(name)
    out, notes = model_from_hf_config(HF_CONFIGS[name], name, shipped.params_total_stated)
    spec = parse_model(out, f"{name}.yaml")
    assert spec.params() == pytest.approx(shipped.params_total_stated, rel=0.005)
    assert spec.params() == shipped.params() and spec.params(True) == shipped.params(True)
    assert not [n for n in notes if "off the stated" in n]


def test_hf_import_notes_and_refusals(tmp_path, capsys):
    from perfmodel.cli.main import main
    cfg = dict(HF_CONFIGS["llama3-8b"], sliding_window=4096)
    _, notes = model_from_hf_config(cfg, "x")
    assert any("sliding_window 4096" in n for n in notes)
    with pytest.raises(InputError, match="hidden size"):
        model_from_hf_config({"vocab_size": 10}, "x")
    f = tmp_path / "config.json"
    f.write_text(json.dumps(HF_CONFIGS["mixtral-8x7b"]))
    out = tmp_path / "m.yaml"
    assert main(["models", "import", str(f), "-o", str(out), "--name", "mix"]) == 0
    assert load_model(str(out)).experts == 8
    f.write_text("{not json")
    assert main(["models", "import", str(f)]) == 2
    assert "not JSON" in capsys.readouterr().err
