"""MoE decode in the memory-bound regime (METRO issue): the op, the study and the CLI."""
from __future__ import annotations

import json

import pytest

import perfmodel as pm
from perfmodel.cli.main import main
from perfmodel.studies.moe_decode import decode_step, layer_study
from perfmodel.ops.moe.traces import expected_activated_per_gpu


def qwen_moe(tokens, routing, replication=1.5, skew=1.0, seed=0):
    return pm.ops.Moe(tokens=tokens, experts=128, top_k=8, hidden=2048, expert_hidden=768,
                      dtype="bf16", gpus=8, replication=replication, routing=routing, skew=skew,
                      seed=seed)


def test_qwen3_30b_decode_on_8_b200_metro_beats_eplb_near_optimal_hbm_bound():
    """The issue's acceptance case: 1.5x replication, skewed routing, 32 tokens per GPU."""
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


def test_layer_study_reports_each_policy():
    r = layer_study("qwen3-235b-a22b", "B200", 8, 32)
    assert set(r) == {"token_balanced", "metro", "optimal"}
    assert r["metro"].max_activated < r["token_balanced"].max_activated
    assert r["metro"].ffn_s < r["token_balanced"].ffn_s
    assert r["optimal"].routing_s > r["metro"].routing_s > r["token_balanced"].routing_s == 0


def test_decode_step_uses_the_policy():
    eplb = decode_step("deepseek-v3", "B200", 16, 32, policy="token_balanced")
    metro = decode_step("deepseek-v3", "B200", 16, 32, policy="metro")
    assert metro < eplb


def test_cli_json(capsys):
    assert main(["moe", "--model", "qwen3-30b-a3b", "--hw", "B200", "--tokens-per-gpu", "32",
                 "--replication", "1.5", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["policy"] for r in rows} == {"token_balanced", "metro", "optimal"}


def test_cli_rejects_dense_models(capsys):
    assert main(["moe", "--model", "llama3-8b", "--hw", "B200"]) == 2
    assert "has no experts" in capsys.readouterr().err


def test_tp_ep_sweep_prefers_full_tp_at_small_batch_and_ep_at_large():
    from perfmodel.studies.moe_decode import tp_ep_sweep
    from perfmodel.plan.serving import pareto_front
    rows = tp_ep_sweep("qwen3-235b-a22b", "B200", 8, global_batches=(64, 1024),
                       policy="token_balanced")
    assert {(r["tp"], r["ep"]) for r in rows} >= {(8, 1), (1, 8)}
    front = pareto_front(rows)
    assert front[0]["global_batch"] == 64 and front[-1]["ep"] == 8
