"""The MoE decode study (METRO vs EPLB): per-layer policies, a decode step, the TP/EP sweep."""
from __future__ import annotations

from perfmodel.studies.moe_decode import decode_step, layer_study


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


def test_tp_ep_sweep_prefers_full_tp_at_small_batch_and_ep_at_large():
    from perfmodel.studies.moe_decode import tp_ep_sweep
    from perfmodel.plan.serving import pareto_front
    rows = tp_ep_sweep("qwen3-235b-a22b", "B200", 8, global_batches=(64, 1024),
                       policy="token_balanced")
    assert {(r["tp"], r["ep"]) for r in rows} >= {(8, 1), (1, 8)}
    front = pareto_front(rows)
    assert front[0]["global_batch"] == 64 and front[-1]["ep"] == 8
