"""The MoE op in the memory-bound decode regime (the METRO study): routing policies, bounds, the
closed form of activated experts."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.ops.moe.traces import expected_activated_per_gpu


def qwen_moe(tokens, routing, replication=1.5, skew=1.0, seed=0):
    return pm.ops.Moe(tokens=tokens, experts=128, top_k=8, hidden=2048, expert_hidden=768,
                      dtype="bf16", gpus=8, replication=replication, routing=routing, skew=skew,
                      seed=seed)


def test_qwen3_30b_decode_on_8_b200_metro_beats_eplb_near_optimal_hbm_bound():
    """The METRO study's headline case: 1.5x replication, skewed routing, 32 tokens per GPU."""
    b200 = pm.hardware("B200")
    t = {r: pm.predict_op(qwen_moe(256, r), b200) for r in ("token_balanced", "metro", "optimal")}
    assert t["metro"].time_s < t["token_balanced"].time_s
    assert t["metro"].time_s <= 1.15 * t["optimal"].time_s
    assert t["metro"].bound == "hbm"
    act = {r: qwen_moe(256, r).routing_result.max_activated for r in t}
    assert act["optimal"] <= act["metro"] < act["token_balanced"]


def test_very_large_batches_turn_compute_bound():
    e = pm.predict_op(qwen_moe(256 * 1024, "metro"), "B200")
    assert e.bound.startswith("tensor:")


def test_activated_experts_follow_the_closed_form_without_replication():
    per_gpu = [qwen_moe(64, "token_balanced", replication=1.0, skew=0.0, seed=s)
               .routing_result.activated_per_gpu.mean() for s in range(20)]
    expected = expected_activated_per_gpu(128, 8, 64, 8)
    assert sum(per_gpu) / len(per_gpu) == pytest.approx(expected, rel=0.05)
