"""The expert exchange the Megatron-Bridge replay runs per release (training_predict
BRIDGE_DISPATCHER): read from the release diffs of the perf recipes, not from the rows."""
from __future__ import annotations

from perfmodel.validation import training_predict as tp_


def test_bridge_qwen3_235b_b200_rows_of_26_02_and_26_04_run_deepep():
    # Megatron-Bridge 26.02 moved Qwen3-235B on B200 to DeepEP (BRIDGE_DISPATCHER); 25.11 and
    # every other model and GPU keep the planner's auto
    cases = {c.id: c for c in tp_.load_bridge_cases()[0]}
    assert tp_.release_of(cases["MBR-26.04.01-082-tps"]) == "26.04.01"
    assert tp_.moe_dispatcher_of(cases["MBR-26.04.01-082-tps"]) == "deepep"
    assert tp_.moe_dispatcher_of(cases["MBR-26.02-209-tps"]) == "deepep"
    assert tp_.moe_dispatcher_of(cases["MBR-25.11-241-tps"]) == "auto"
    assert tp_.moe_dispatcher_of(cases["MBR-26.04.01-083-tps"]) == "auto"  # H100
    deepep = tp_.plan_case(cases["MBR-26.02-209-tps"])
    assert deepep.breakdown.get("deepep", 0) > 0 and not deepep.breakdown.get("alltoall")
