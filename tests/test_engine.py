"""The engine (Demand x Hardware -> Estimate): what it charges beyond the raw resource rates, and
what it resolves that ops leave open: kernel candidates, algorithm and straggler choices, and the
latency counts ops report (DRAM round trips per CTA, link steps)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import perfmodel as pm
from perfmodel.demand import Choice, Demand, KernelCandidates, LaunchShape
from perfmodel.engine import candidate_times_s, estimate, pipes, pipes_time_s, resolve


def test_small_grid_cannot_fill_hbm(h100):
    """Little's law: a handful of CTAs keeps too few bytes in flight to reach HBM bandwidth."""
    small = pm.predict_op(pm.ops.Norm(rows=8, cols=1 << 20, dtype="bf16"), h100)
    big = pm.predict_op(pm.ops.Norm(rows=8192, cols=1024, dtype="bf16"), h100)
    assert small.hbm_bytes == pytest.approx(big.hbm_bytes, rel=0.1)  # weight vector differs
    assert small.time_s > 3 * big.time_s


@pytest.mark.parametrize("hw_name", ["A100-SXM", "H100-SXM", "B200"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096, "bf16"), (4096, 4096, 4096, "bf16"),
                                   (128, 28672, 8192, "fp8"), (8192, 1024, 65536, "bf16")])
def test_candidate_scores_are_the_pipes_time_of_each_candidate(hw_name, shape):
    """The vectorized scoring must equal the scalar engine on every valid candidate's Demand:
    the GEMM search ranks kernels with exactly the formula that later times the winner."""
    m, n, k, dtype = shape
    hw = pm.hardware(hw_name)
    if not hw.supports(dtype):
        pytest.skip(f"{hw_name} has no {dtype} tensor cores")
    cands = pm.ops.Gemm(m=m, n=n, k=k, dtype=dtype).demand(hw)
    assert isinstance(cands, KernelCandidates)
    scores = candidate_times_s(cands, hw)
    valid = np.flatnonzero(np.isfinite(scores))
    assert len(valid) >= 1
    for i in valid:
        assert scores[i] == pytest.approx(pipes(cands.demand_at(int(i)), hw).time_s, rel=1e-12)
    best = resolve(cands, hw)
    assert pipes(best, hw).time_s == pytest.approx(scores.min(), rel=1e-12)


def test_block_scaled_fp8_promotion_is_scored_serial_with_the_mmas():
    hw = pm.hardware("H100-SXM")
    cands = pm.ops.Gemm(m=4096, n=4096, k=4096, dtype="fp8", fp8_scaling="block").demand(hw)
    assert cands.overlap is not None and cands.overlap.efficiency == 0.0
    scores = candidate_times_s(cands, hw)
    for i in np.flatnonzero(np.isfinite(scores)):
        assert scores[i] == pytest.approx(pipes(cands.demand_at(int(i)), hw).time_s, rel=1e-12)
    # Blackwell's block-scaled MMA applies the scales in the tensor core: no promotion
    assert pm.ops.Gemm(m=4096, n=4096, k=4096, dtype="fp8",
                       fp8_scaling="block").demand(pm.hardware("B200")).overlap is None


def _stream(hbm_bytes: float) -> Demand:
    return Demand(work={"hbm": hbm_bytes}, launch=LaunchShape(132, 256), hbm_bytes=hbm_bytes)


def test_choice_picks_fastest_or_slowest_at_the_requested_level():
    hw = pm.hardware("H100-SXM")
    small, big = _stream(1e6), _stream(1e9)
    for level in pm.LEVELS:
        assert resolve(Choice((big, small), "fastest"), hw, level) is small
        assert resolve(Choice((small, big), "slowest"), hw, level) is big
    # a single option is itself
    assert resolve(Choice((small,)), hw) is small
    with pytest.raises(ValueError):
        Choice(())
    with pytest.raises(ValueError):
        Choice((small,), pick="median")


def test_choice_is_resolved_at_the_level_asked():
    """Where latency and bandwidth disagree the two levels choose differently: the roofline has
    no latency, so it takes the algorithm with fewer bytes; the pipes level, for a tiny
    all-reduce, the one-shot algorithm with a single step."""
    hw = pm.hardware("H100-SXM")
    op = pm.ops.op("allreduce", bytes=1e4, gpus=8, algorithm="auto")
    pipes_pick = pm.predict_op(op, hw, "pipes").details["algorithm"]
    roof_pick = pm.predict_op(op, hw, "roofline").details["algorithm"]
    assert pipes_pick == "oneshot" and roof_pick in ("ring", "tree")
    for algorithm in ("ring", "tree", "oneshot"):
        fixed = pm.ops.op("allreduce", bytes=1e4, gpus=8, algorithm=algorithm)
        for level in pm.LEVELS:
            assert pm.predict_op(op, hw, level).time_s <= pm.predict_op(fixed, hw, level).time_s


def test_moe_layer_waits_for_its_slowest_gpu():
    hw = pm.hardware("H100-SXM")
    op = pm.ops.op("moe", tokens=256, experts=64, top_k=4, hidden=2048, expert_hidden=1024,
                   dtype="bf16", gpus=8, skew=1.5)
    choice = op.demand(hw)
    assert isinstance(choice, Choice) and choice.pick == "slowest" and len(choice.options) == 8
    times = [pipes_time_s(d, hw) for d in choice.options]
    assert estimate(choice, hw).time_s == max(times)


def test_link_steps_pay_the_link_latency():
    hw = pm.hardware("H100-SXM")
    ring = pm.ops.op("allreduce", bytes=1e3, gpus=8, algorithm="ring").demand(hw)
    assert ring.link_steps == {"nvlink": 14}  # 2 (G − 1) ring steps
    est = estimate(ring, hw)
    assert est.resource_time_s["latency"] == pytest.approx(14 * hw.link("nvlink").latency_s)
    with pytest.raises(ValueError):
        Demand(work={}, launch=None, link_steps={"nvlink": -1})


def test_cta_round_trips_are_charged_per_round_of_ctas():
    hw = pm.hardware("H100-SXM")
    work = {"fma": 1.0}
    one = Demand(work=work, launch=LaunchShape(hw.sm_count, 128), cta_dram_round_trips=2.0)
    three = Demand(work=work, launch=LaunchShape(3 * hw.sm_count, 128, smem_per_cta_bytes=200_000),
                   cta_dram_round_trips=2.0)  # one CTA per SM: three rounds
    lat = hw.hbm_latency_s
    assert pipes(one, hw).resource_time_s["latency"] == pytest.approx(2 * lat)
    assert pipes(three, hw).resource_time_s["latency"] == pytest.approx(3 * 2 * lat)
    assert math.isclose(pipes(one, hw).time_s - pipes(Demand(work=work, launch=one.launch),
                                                      hw).time_s, 2 * lat, rel_tol=1e-9)
