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
    """Where latency and bandwidth disagree the two levels choose differently among what `auto`
    offers (the engine's one-shot kernel and the pair NCCL's tuner picks, ring LL for 10 kB):
    the roofline has no latency, so it takes the algorithm with the fewest bytes on the wire
    (the ring's 2(G-1)/G of the buffer against the one-shot's G-1 buffers read); the pipes
    level, for a tiny all-reduce, the one-shot algorithm with a single step."""
    hw = pm.hardware("H100-SXM")
    op = pm.ops.op("allreduce", bytes=1e4, gpus=8, algorithm="auto")
    pipes_pick = pm.predict_op(op, hw, "pipes").details["algorithm"]
    roof_pick = pm.predict_op(op, hw, "roofline").details["algorithm"]
    assert pipes_pick == "oneshot" and roof_pick == "ring"
    for algorithm in ("nccl", "oneshot"):
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
    """A ring all-reduce with NCCL's Simple protocol: 2 (G − 1) hops of the link's Simple hop
    latency plus Simple's base latency (NCCL tuning.cc; perfmodel/ops/nccl.py)."""
    hw = pm.hardware("H100-SXM")
    ring = pm.ops.op("allreduce", bytes=1e3, gpus=8, algorithm="ring",
                     protocol="simple").demand(hw)
    assert ring.details["hops"] == {"nvlink": 14}  # 2 (G − 1) ring hops
    est = estimate(ring, hw)
    # the chunk pipeline's fill (nccl.pipeline_fill_s) is serial time beside the hops
    assert est.resource_time_s["latency"] == pytest.approx(
        ring.link_steps["nvlink"] * hw.link("nvlink").latency_s + ring.fixed_s)
    # Simple's base (8.4 us in tuning.cc) scaled by the family's measured ring LL base over
    # tuning.cc's 6.6 us (perfmodel/fitted.yaml nccl.ll_base_s.hopper)
    scale = hw.link("nvlink").nccl_base_latency_s / 6.6e-6
    assert est.resource_time_s["latency"] == pytest.approx((8.4 * scale + 14 * 3.4) * 1e-6
                                                           + ring.fixed_s)
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



def test_a_persistent_grid_takes_the_longer_of_its_stream_and_its_tile_rounds():
    """Demand.persistent: the tiles' rounds run under the pipelined stream (max, not sum)."""
    hw = pm.hardware("H100-SXM")
    tiles = LaunchShape(3 * hw.sm_count, 128, smem_per_cta_bytes=200_000)  # three per SM
    rounds = 3 * 2 * hw.hbm_latency_s
    for hbm_bytes in (1e6, 1e9):  # rounds longer than the stream, then shorter
        work = {"hbm": hbm_bytes}
        serial = pipes(Demand(work=work, launch=tiles, cta_dram_round_trips=2.0), hw)
        piped = pipes(Demand(work=work, launch=tiles, cta_dram_round_trips=2.0,
                             persistent=True), hw)
        stream = serial.resource_time_s["hbm"]
        assert serial.time_s - piped.time_s == pytest.approx(min(stream, rounds), rel=1e-9)
        assert piped.details["tile_rounds_s"] == pytest.approx(rounds)


def test_fixed_time_adds_to_the_latency_and_must_be_finite():
    hw = pm.hardware("H100-SXM")
    work = {"hbm": 1e6}
    plain = pipes(Demand(work=work, launch=None), hw)
    held = pipes(Demand(work=work, launch=None, fixed_s=50e-6), hw)
    assert held.time_s - plain.time_s == pytest.approx(50e-6)
    assert held.roofline_time_s == pytest.approx(plain.roofline_time_s)
    for bad in (-1e-6, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            Demand(work=work, launch=None, fixed_s=bad)

# ---- clock domains -------------------------------------------------------------------------


def _attention(hw, **kw):
    shape = dict(batch=4, heads=32, seq_q=8192, head_dim=128, dtype="bf16", kernel="cudnn")
    return pm.predict_op(pm.ops.Attention(**{**shape, **kw}), hw)


def test_one_sm_clock_drives_every_sm_clocked_rate_of_a_kernel():
    """The tensor pipe, MUFU, shared memory and issue slots of one kernel run at one SM clock (the
    power limit lowers the whole SM's clock, not the tensor pipe's alone): their times are their
    per-clock work over the same clock."""
    from perfmodel.engine import sm_rate_per_clk
    b200 = pm.hardware("B200")
    op = pm.ops.Attention(batch=4, heads=32, seq_q=8192, head_dim=128, dtype="bf16",
                          kernel="cudnn")
    d = op.demand(b200)
    e = pm.predict_op(op, b200)
    cycles = {r: d.work[r] / sm_rate_per_clk(r, b200) for r in ("tensor:bf16", "xu", "smem")}
    clocks = {r: cycles[r] / e.resource_time_s[r] for r in cycles}
    assert len({round(c / 1e6, 3) for c in clocks.values()}) == 1
    clock = e.details["sm_clock_hz"]
    assert b200.sustained_sm_clock_hz <= clock < b200.boost_clock_hz
    # cycles on the busiest SM over the kernel's clock: the per-SM share of the work
    assert clocks["xu"] == pytest.approx(clock * d.launch.ctas / e.details["busiest_sm_ctas"],
                                         rel=1e-9)


def test_kernels_without_tensor_work_run_at_max_boost_and_dense_mma_at_the_sustained_clock():
    b200 = pm.hardware("B200")
    stream = pm.predict_op(pm.ops.Elementwise(elements=10**9, dtype="bf16"), b200)
    assert stream.details["sm_clock_hz"] == b200.boost_clock_hz
    gemm = pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16"), b200)
    assert gemm.details["sm_clock_hz"] == pytest.approx(b200.sustained_sm_clock_hz, rel=0.02)
    assert b200.sustained_sm_clock_hz == pytest.approx(
        b200.tensor_clock_hz * b200.tensor_sustained_fraction)


def test_locked_clock_scales_an_exp_bound_attention_by_the_clock_ratio():
    """Below the sustained clock a lock replaces it: an exp-bound attention (head dim 64 on B200)
    slows by the clock ratio; an HBM-bound streaming op does not change."""
    # B200's sustained clock is ~1.24 GHz (tensor_sustained_fraction.b200): locks below it
    fast, slow = pm.hardware("B200", sm_clock_hz=1.2e9), pm.hardware("B200", sm_clock_hz=0.8e9)
    a, b = _attention(fast, head_dim=64), _attention(slow, head_dim=64)
    assert a.bound == b.bound == "xu"
    assert b.resource_time_s["xu"] / a.resource_time_s["xu"] == pytest.approx(1.5, rel=1e-9)
    assert b.time_s / a.time_s == pytest.approx(1.5, rel=0.02)  # the DRAM-latency floors stay
    assert a.details["sm_clock_hz"] == 1.2e9
    op = pm.ops.Elementwise(elements=10**9, dtype="bf16")
    free = pm.predict_op(op, "B200")
    for hw in (fast, slow):
        locked = pm.predict_op(op, hw)
        assert locked.bound == "hbm" and locked.time_s == pytest.approx(free.time_s, rel=1e-9)


def test_smem_bound_backward_follows_the_lock_too():
    fast, slow = pm.hardware("B200", sm_clock_hz=1.2e9), pm.hardware("B200", sm_clock_hz=0.96e9)
    a, b = (_attention(h, direction="bwd", seq_q=16384) for h in (fast, slow))
    main_a, main_b = a.details["parts"][1], b.details["parts"][1]
    assert main_a["bound"] == main_b["bound"] == "smem"
    assert main_b["time_s"] / main_a["time_s"] == pytest.approx(1.25, rel=0.01)


def test_a_lock_above_the_sustained_clock_leaves_tensor_heavy_kernels_power_limited():
    """FA4's authors ran B200 at 1755 MHz: above the sustained clock, so a dense GEMM still runs
    at the sustained clock while a streaming kernel's SM runs at the lock."""
    b200 = pm.hardware("B200")
    locked = pm.hardware("B200", sm_clock_hz=1.755e9)
    assert locked.sustained_sm_clock_hz == b200.sustained_sm_clock_hz < 1.755e9
    g = pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16")
    t, t_locked = pm.predict_op(g, b200).time_s, pm.predict_op(g, locked).time_s
    assert t <= t_locked < 1.01 * t  # only the kernel's light-load share of the clock range


def test_roofline_and_l2_follow_a_locked_clock():
    from perfmodel.engine import kernel_resource_times
    b200 = pm.hardware("B200")
    locked = pm.hardware("B200", sm_clock_hz=1.2e9)
    assert locked.tensor_peak_flop_per_s("bf16") == pytest.approx(
        b200.tensor_peak_flop_per_s("bf16") * 1.2e9 / b200.tensor_clock_hz)
    assert locked.pipe_peak_per_s("xu") == pytest.approx(
        b200.pipe_peak_per_s("xu") * 1.2e9 / b200.boost_clock_hz)
    # L2 runs on the SM (graphics) clock; the spec's bandwidth is read at the sustained SM clock
    ref = b200.sustained_sm_clock_hz
    t = kernel_resource_times(b200, {"l2": 1e9}, clock_hz=ref)["l2"]
    t_half = kernel_resource_times(b200, {"l2": 1e9}, clock_hz=ref / 2)["l2"]
    assert t == pytest.approx(1e9 / b200.l2_bandwidth_bytes_per_s) and t_half == 2 * t
    assert locked.l2_reference_clock_hz == ref
    gemm = pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16")
    assert pm.predict_op(gemm, locked, level="roofline").time_s == pytest.approx(
        pm.predict_op(gemm, b200, level="roofline").time_s * b200.tensor_clock_hz / 1.2e9)


def test_the_scalar_resource_times_equal_the_candidate_arrays_bit_for_bit():
    """kernel_resource_times' scalar path (one kernel, Python floats) gives exactly the floats
    its numpy path gives for the same kernel as a one-candidate array: the tile search and a
    single prediction price a kernel alike."""
    import numpy as np
    from perfmodel.engine import kernel_resource_times
    for name in ("H100-SXM", "B200", "A100-SXM"):
        hw = pm.hardware(name)
        work = {"tensor:bf16": 3.1e12, "smem": 7.7e9, "hbm": 2.5e9, "l2": 5.0e9, "fma": 1e9}
        for ctas, per_sm, flight, imbalance in ((1, 1, 65536.0, 0.0), (1000, 2, 32768.0, 0.5),
                                                (133, 3, 0.0, 0.0), (5000, 1, 1e6, 1.0)):
            one = kernel_resource_times(hw, work, ctas, per_sm, flight, imbalance)
            arr = kernel_resource_times(hw, work, np.array([ctas]), per_sm,
                                        np.array([flight]), imbalance)
            assert set(one) == set(arr)
            for r in one:
                assert isinstance(one[r], float)
                assert one[r] == float(np.asarray(arr[r]).reshape(-1)[0]), (name, ctas, r)
