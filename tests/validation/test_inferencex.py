"""InferenceX H200 rows replayed on the simulator: every row a case or a one-line reason, and
one Llama-3.3-70B vLLM row replayed to finite metrics (perfmodel.validation.inferencex)."""
from __future__ import annotations

import csv
import dataclasses
import math
from collections import Counter

from perfmodel.validation import inferencex as ix

CASES, SKIPPED = ix.load_cases()
BY_ID = {c.id: c for c in CASES}
with open(ix.INFERENCEX_CSV, newline="") as f:
    ROWS = list(csv.DictReader(f))


def test_every_row_is_a_case_or_has_a_one_line_reason():
    assert len(ROWS) == 1032
    ids = [c.id for c in CASES] + [s.id for s in SKIPPED]
    assert sorted(ids) == sorted(r["id"] for r in ROWS)  # each row once, none dropped
    for s in SKIPPED:
        assert s.reason.strip() and "\n" not in s.reason, s.id
    reasons = Counter(s.reason for s in SKIPPED)
    assert reasons["disaggregated prefill/decode deployment (dynamo): not one aggregated "
                   "replica"] == 224
    assert any(r.startswith("not a built-in model (MiniMax") for r in reasons)
    # Llama-70B (vLLM and TensorRT-LLM) and DeepSeek-R1 (SGLang, TensorRT-LLM) replay
    engines = {(c.model, c.engine) for c in CASES}
    assert {("llama3-70b", "vllm"), ("llama3-70b", "trtllm"), ("deepseek-v3", "sglang"),
            ("deepseek-v3", "trtllm")} <= engines
    for c in CASES:
        assert c.measured and all(v > 0 for v in c.measured.values())
        assert set(c.measured) <= set(ix.METRICS)


def test_speculative_duplicate_and_attention_dp_rows():
    by_row = {r["id"]: r for r in ROWS}
    reason = {s.id: s.reason for s in SKIPPED}
    for r in ROWS:
        if r["disaggregated"] == "true":
            continue
        if r["spec_method"] == "mtp" and r["id"] in reason:
            assert "speculative" in reason[r["id"]]
        same = ix._same_as(r)
        if same and same in by_row and r["id"] in reason \
                and not reason[r["id"]].startswith("not a built-in"):
            assert reason[r["id"]].startswith("same measurement")
    dpa = [c for c in CASES if c.attention_dp]
    assert dpa
    for c in dpa:  # the ranks are attention groups: tp=1, ep=ranks, the load split over them
        d = c.deployment
        assert d.tp == 1 and d.ep == c.ep and d.concurrency * d.ep == c.concurrency


def test_a_llama_vllm_row_replays_to_finite_metrics():
    case = next(c for c in CASES if c.model == "llama3-70b" and c.engine == "vllm"
                and c.tp == 8 and c.concurrency == 4 and c.lengths == "1024/1024")
    d = case.deployment
    assert d.workload().isl == ("uniform", 819, 1024) and d.requests == 40
    assert d.kv_dtype == "fp8" and dict(d.settings)["max_batch"] == 4
    small = dataclasses.replace(d, requests=8)  # a short replay of the same deployment
    m = ix.simulate_deployment(small)
    assert isinstance(m, dict)
    for metric in case.measured:
        assert math.isfinite(m[metric]) and m[metric] > 0
    # mean TPOT within a factor of two of the measurement (no constant fitted on these rows)
    assert 0.5 < m["tpot_mean_s"] / case.measured["tpot_mean_s"] < 2


def test_trtllm_graph_sizes_follow_its_padding_rule():
    assert ix.trtllm_graph_sizes(128) == (1, 2, 4) + tuple(range(8, 129, 8))
    assert ix.trtllm_graph_sizes(1024)[-3:] == (256, 512, 1024)
    assert ix.trtllm_graph_sizes(4) == (1, 2, 4)
