"""Philox RNG: instruction counts per call, elements per call, where the output conversion lands."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.ops.rng import philox_work, rng_instruction_work


@pytest.mark.parametrize("rounds, imad", [(10, 20), (7, 14)])
def test_philox_instruction_counts(rounds, imad):
    """Per call: 2 IMAD.WIDE per round; 2 LOP3 per round folded, 4 unfolded; 2(R-1) IADD3."""
    w = philox_work(1, rounds, lop3_fold=True, precomputed_keys=True)
    assert w["fma_heavy"] == imad
    assert w["alu"] == 2 * rounds + 4
    unfolded = philox_work(1, rounds, lop3_fold=False, precomputed_keys=False)
    assert unfolded["alu"] == 4 * rounds + 2 * (rounds - 1) + 4


def test_rng_elements_per_call_follow_bits_per_element():
    eight = rng_instruction_work(1600, 8, 7, "bytes")
    thirty_two = rng_instruction_work(1600, 32, 7, "bytes")
    assert eight["fma_heavy"] == 1600 / 16 * 14  # 16 elements per Philox4x32-7 call (FA2)
    assert thirty_two["fma_heavy"] == 4 * eight["fma_heavy"]


def test_philox10_costs_more_than_philox7(h100):
    r7 = pm.predict_op(pm.ops.Rng(elements=1 << 30, generator="philox4x32-7"), h100)
    r10 = pm.predict_op(pm.ops.Rng(elements=1 << 30, generator="philox4x32-10"), h100)
    assert r10.resource_time_s["fma_heavy"] == pytest.approx(
        r7.resource_time_s["fma_heavy"] * 10 / 7)


def test_rng_float_output_lands_on_xu(h100):
    est = pm.predict_op(pm.ops.Rng(elements=1 << 28, bits_per_element=32, output="float"), h100)
    assert est.resource_time_s["xu"] > 0
