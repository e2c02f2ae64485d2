"""Published serving rows replayed on the simulator: which rows can be, and the replay itself."""
from __future__ import annotations

import dataclasses
import math

import pytest

from perfmodel.validation import serving_predict as sp
from perfmodel.validation.serving import SYSTEM_METRICS, load_serving_cases

CASES, _ = load_serving_cases()
BY_ID = {c.id: c for c in CASES}


def test_every_row_is_replayed_or_has_a_reason():
    for c in CASES:
        reason = sp.why_not(c)
        assert reason is None or reason.strip(), c.id
    replayable = [c for c in CASES if sp.why_not(c) is None]
    assert len(replayable) >= 50  # DataCrunch, TensorRT-LLM and vLLM rows with lengths


def test_speculative_rows_replay_with_their_drafts_and_disaggregated_pools_alone():
    for c in CASES:
        if c.spec_decoding in ("mtp", "eagle"):
            reason = sp.why_not(c)
            if not c.draft_tokens or c.relaxed_acceptance or sp.spec_acceptance(c) is None:
                assert "speculative" in reason
            elif reason is None:
                settings = sp.engine_settings(c)
                assert settings["spec_tokens"] == c.draft_tokens
                assert 0 < settings["spec_acceptance"] <= 1
        elif c.phase != "both":  # one pool of a disaggregated deployment, alone
            reason = sp.why_not(c)
            assert reason is None or "length" in reason
            if reason is None:
                w = sp._workload(c)
                assert (w.osl == 1) if c.phase == "prefill" else w.prefilled
        elif c.disaggregated:
            assert "disaggregated" in sp.why_not(c)
    mtp = BY_ID["TRT-0269"]  # DeepSeek-R1 MTP3 on B200, no acceptance rate stated
    assert sp.spec_acceptance(mtp) == sp.DEEPSEEK_MTP_ACCEPTANCE
    assert "relaxed" in sp.why_not(BY_ID["TRT-0271"])


def test_a_vllm_latency_row_replays_to_a_finite_time_of_the_right_order():
    case = BY_ID["VLB-0329"]  # vLLM blog: Llama-3.1-8B on H100, median TTFT at 20k/2k tokens
    predicted = sp.simulate_case(case)
    assert predicted is not None and math.isfinite(predicted)
    assert 0.3 < predicted / case.value < 3


def test_system_wide_rates_are_scaled_by_the_replicas():
    """A system of two replicas delivers twice one replica's rate, each at half the load."""
    one = next(c for c in CASES if sp.why_not(c) is None and c.metric in SYSTEM_METRICS
               and c.mode in sp.OFFLINE_MODES)
    two = dataclasses.replace(one, replicas=2)
    (comparison,) = sp.run([two])
    assert comparison.predicted == pytest.approx(sp.simulate_case(two) * 2)


def test_uniform_length_rows_replay_a_uniform_draw():
    """sglang.bench_serving's 'random uniform 1..N' rows are drawn uniformly, not fixed at
    their mean: the workload carries the range, and the stated mean is its midpoint."""
    case = BY_ID["DCR-0307"]
    assert case.isl_range == (1, 4096) and case.osl_range == (1, 2048)
    w = sp._workload(case)
    assert w.isl == ("uniform", 1, 4096) and w.osl == ("uniform", 1, 2048)
    isl, osl, _ = w.draw()
    assert isl.min() >= 1 and isl.max() <= 4096 and abs(isl.mean() - case.isl) < 0.1 * case.isl


def test_attention_dp_rows_run_one_scheduler_per_attention_group():
    """TensorRT-LLM's attention-DP rows (tp_size 8, EP8) are eight schedulers of tp=1 sharing
    experts over 8 GPUs; the load and the stated per-rank limits are per scheduler."""
    case = BY_ID["TRT-0264"]  # H200, concurrency 1024, max_batch_size 128/rank
    assert case.attention_dp
    assert sp.layout(case) == (1, 8, 1)
    assert sp.schedulers(case) == 8
    assert sp._workload(case).concurrency == 128
    assert sp.engine_settings(case) == {"max_batch": 128, "max_tokens_per_step": 1151}
    tp_case = BY_ID["TRT-0268"]  # TP8/EP8 without attention DP: one scheduler
    assert not tp_case.attention_dp and sp.layout(tp_case) == (8, 8, 1)


def test_a_concurrency_row_simulates_at_least_its_concurrency():
    case = BY_ID["TRT-0252"]  # 7168 in flight over 8 attention groups
    w = sp._workload(case)
    assert w.requests >= w.concurrency == 896


def test_rows_run_the_engine_release_and_memory_fraction_they_state():
    """DataCrunch's December 2024 SGLang rows run SGLang 0.4.1's preset; the 405B launch's
    `--mem-frac 0.87` (argparse's prefix of --mem-fraction-static) sets its KV pool, the 70B
    launch sets none (0.4.1's TP4 default, 0.85); the v0.4.9 rows keep the current preset."""
    from perfmodel.validation.serving import mem_fraction_of
    big, small = BY_ID["DCR-0313"], BY_ID["DCR-0286"]
    assert sp.preset(big) == sp.preset(small) == "sglang-0.4.1"
    assert big.mem_fraction == 0.87 and small.mem_fraction is None
    assert sp.engine_settings(big)["gpu_memory_utilization"] == 0.87
    assert "gpu_memory_utilization" not in sp.engine_settings(small)
    newer = [c for c in CASES if c.engine == "sglang" and "v0.4.9" in c.engine_version]
    assert newer and all(sp.preset(c) == "sglang" for c in newer)
    assert mem_fraction_of("--tp 8 --mem-fraction-static=0.9 --x") == 0.9
    assert mem_fraction_of("--mem-frac 1.5") is None and mem_fraction_of("no flags") is None


def test_a_rate_row_replays_its_own_request_count():
    c = BY_ID["DCR-0296"]  # 3200 requests at 16 req/s
    assert c.num_requests == 3200 and sp._workload(c).requests == 3200
    offline = BY_ID["DCR-0309"]  # 6000 prompts at t = 0: capped
    assert sp._workload(offline).requests == sp.MAX_REQUESTS
