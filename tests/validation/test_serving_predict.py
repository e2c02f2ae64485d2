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


def test_speculative_and_disaggregated_rows_are_not_replayed():
    for c in CASES:
        if c.spec_decoding in ("mtp", "eagle"):
            assert "speculative" in sp.why_not(c)
        elif c.disaggregated:
            assert "disaggregated" in sp.why_not(c)


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
