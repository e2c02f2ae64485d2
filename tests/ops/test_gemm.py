"""The GEMM model: cuBLAS-class tiles, GEMV at HBM speed, split-K, weight-only quantization,
block-scaled GEMM cost (the NVFP4 study's cost side), and the fixed costs (prologue, epilogue) of
persistent and non-persistent kernels."""
from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel.demand import Demand, LaunchShape
from perfmodel.engine import resolve


def test_gemm_8192_bf16_h100_matches_cublas(h100):
    est = pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16"), h100)
    assert est.bound == "tensor:bf16"
    assert est.time_s == pytest.approx(1.378e-3, rel=0.10)  # gemm-h100-001, cuBLAS


def test_gemv_is_hbm_bound_within_25_percent(h100):
    g = pm.ops.Gemm(m=1, n=36864, k=7168, dtype="bf16")
    est = pm.predict_op(g, h100)
    measured = g.flop / 2.915775e12  # gemm-h100-006
    assert est.bound == "hbm"
    assert est.time_s == pytest.approx(measured, rel=0.25)


def test_fp4_gemm_on_hopper_is_an_input_error(h100):
    with pytest.raises(pm.InputError, match="not supported by H100-SXM"):
        pm.predict_op(pm.ops.Gemm(m=1024, n=1024, k=1024, dtype="nvfp4"), h100)


def test_nvfp4_is_faster_than_fp8_on_b200_for_large_gemms():
    b200 = pm.hardware("B200")
    fp8 = pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="fp8"), b200)
    fp4 = pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="nvfp4"), b200)
    # the datasheet's 2x less each type's power limit (FP8 r^(1-e) = 1.75x BF16, NVFP4 2.6x
    # with its own exponent): AIConfigurator's B200 linears measure NVFP4 ~1.4x FP8
    assert 1.3 < fp8.time_s / fp4.time_s <= 2.0
    assert fp4.hbm_bytes > 3 * 8192 * 8192 * 0.5 * (1 + 1 / 32)  # scale bytes counted


def test_skinny_deep_gemm_uses_split_k(h100):
    est = pm.predict_op(pm.ops.Gemm(m=64, n=1024, k=65536, dtype="bf16"), h100)
    assert est.details["split_k"] > 1
    assert est.details["busiest_sm_ctas"] == 1
    assert est.details["persistent"]  # wgmma's default


def test_count_repeats_time_exactly(h100):
    one = pm.predict_op(pm.ops.Gemm(m=512, n=4096, k=4096, dtype="bf16"), h100)
    three = pm.predict_op(pm.ops.Gemm(m=512, n=4096, k=4096, dtype="bf16", count=3), h100)
    assert three.time_s == pytest.approx(3 * one.time_s)
    assert three.flop == pytest.approx(3 * one.flop)


def test_w4a16_reads_fewer_weight_bytes_but_pays_dequant(h100):
    bf16 = pm.predict_op(pm.ops.Gemm(m=16, n=8192, k=8192, dtype="bf16"), h100)
    w4 = pm.predict_op(pm.ops.Gemm(m=16, n=8192, k=8192, dtype="bf16", b_dtype="int4"), h100)
    assert w4.hbm_bytes < 0.3 * bf16.hbm_bytes
    assert w4.time_s < bf16.time_s
    assert w4.resource_time_s["fma"] > bf16.resource_time_s["fma"]


# ------------------------------------------------------------------ block-scaled formats --


BIG = dict(m=8192, n=8192, k=8192)


def t(dtype, hw, **kw):
    return pm.predict_op(pm.ops.Gemm(**{**BIG, **kw}, dtype=dtype), hw).time_s


def test_b200_nvfp4_speedup_over_bf16_is_between_2_5_and_4():
    assert 2.5 <= t("bf16", "B200") / t("nvfp4", "B200") <= 4.0


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4", "mxfp8"])
def test_block_scaled_formats_are_refused_on_hopper(fmt):
    with pytest.raises(pm.InputError, match="not supported by H100-SXM"):
        t(fmt, "H100-SXM")


def test_scale_bytes_are_counted():
    nv = pm.predict_op(pm.ops.Gemm(**BIG, dtype="nvfp4"), "B200").hbm_bytes
    mx = pm.predict_op(pm.ops.Gemm(**BIG, dtype="mxfp4"), "B200").hbm_bytes
    payload = 2 * 8192 * 8192 * 0.5 + 8192 * 8192 * 2
    assert nv == pytest.approx(payload + 2 * 8192 * 8192 / 16, rel=1e-6)  # E4M3 per 16
    assert mx == pytest.approx(payload + 2 * 8192 * 8192 / 32, rel=1e-6)  # UE8M0 per 32


def test_fp8_block_scaling_costs_promotion_on_hopper_only():
    h = pm.hardware("H100-SXM")
    tensor = t("fp8", h)
    block = pm.predict_op(pm.ops.Gemm(**BIG, dtype="fp8", fp8_scaling="block"), h)
    # (the power-limited FP8 clock, engine.tensor_power_ratio, slows the MMAs and so hides more
    # of the promotion than at the 16-bit sustained clock)
    assert block.time_s > 1.08 * tensor and block.resource_time_s["fma"] > 0
    b = pm.hardware("B200")
    assert pm.predict_op(pm.ops.Gemm(**BIG, dtype="fp8", fp8_scaling="block"),
                         b).time_s < 1.1 * t("fp8", b)


# ------------------------------------------------------------------ fixed costs --


def gemm_demand(hw, **kw):
    hw = pm.hardware(hw)
    return resolve(pm.ops.Gemm(**{"dtype": "bf16", **kw}).demand(hw), hw)


@pytest.mark.parametrize("hw, default", [("H100-SXM", True), ("H200-SXM", True), ("B200", True),
                                         ("GB200", True), ("A100-SXM", False)])
def test_persistence_defaults_by_mma_instruction(hw, default):
    """wgmma/tcgen05: persistent warp-specialized (CUTLASS's sm90 KernelScheduleAuto, sm100
    kernels); mma_sync: one tile per CTA (CUTLASS 2.x sm80); the parameter overrides it."""
    assert gemm_demand(hw, m=4096, n=4096, k=4096).details["persistent"] is default
    assert gemm_demand(hw, m=4096, n=4096, k=4096,
                       persistent=not default).details["persistent"] is (not default)
    assert gemm_demand(hw, m=4096, n=4096, k=4096, dtype="fp32").details["persistent"] is False


def test_fixed_costs_are_exposed_once_per_sm_or_once_per_round():
    """Serial work: one k-block stage in and the output tile out, for each SM's first and last
    tile (persistent) or for every tile (non-persistent, one CTA per SM), which also waits a DRAM
    round trip per round after the first."""
    hw = pm.hardware("H100-SXM")
    shape = dict(m=8192, n=8192, k=8192)
    per_sm = gemm_demand(hw, **shape, persistent=True)
    per_round = gemm_demand(hw, **shape, persistent=False)
    assert per_sm.details["tile"] == per_round.details["tile"]  # the ranking is the main loop's
    tiles = per_sm.details["tiles"]
    rounds = math.ceil(tiles / hw.sm_count)
    tm, tn, kb = (int(x) for x in per_sm.details["tile"].split()[0].split("x"))
    stage_l2 = (tm + tn / 2) * kb * 2.0  # B multicast once per 2x1 cluster
    c_tile = tm * tn * 2.0
    assert per_round.serial_work["l2"] == pytest.approx(tiles * (stage_l2 + c_tile))
    assert per_sm.serial_work["l2"] == pytest.approx(tiles / rounds * (stage_l2 + c_tile))
    assert per_round.serial_work["smem"] == pytest.approx(
        tiles * ((tm + tn) * kb * 2.0 + 2 * c_tile))
    assert per_sm.serial_round_trips == 0 and per_round.serial_round_trips == rounds - 1
    # part of the work, which is the same either way
    assert per_sm.work == per_round.work
    for d in (per_sm, per_round):
        assert all(d.serial_work[r] <= d.work[r] for r in d.serial_work)


def test_a_single_wave_exposes_the_same_fixed_costs_either_way():
    a = gemm_demand("H100-SXM", m=1024, n=1024, k=8192, persistent=True)
    b = gemm_demand("H100-SXM", m=1024, n=1024, k=8192, persistent=False)
    assert a.details["tiles"] <= 132 and a.serial_work == b.serial_work
    assert a.serial_round_trips == b.serial_round_trips == 0


def test_gemv_fixed_costs_count_only_the_real_output_rows():
    """A 1-row GEMM's 64-row tile writes one row of C: the drain counts the bytes TMA stores."""
    d = gemm_demand("H100-SXM", m=1, n=36864, k=7168)
    assert d.serial_work["l2"] <= d.work["l2"]
    tiles = d.details["tiles"]
    exposed = min(tiles, 132)
    c = 36864 * 2.0 / (tiles / d.details["split_k"])
    assert d.serial_work["l2"] > exposed * c


def test_serial_work_must_be_part_of_the_work():
    with pytest.raises(ValueError, match="not part of the work"):
        Demand(work={"l2": 1.0}, launch=LaunchShape(1, 32), serial_work={"l2": 2.0})
    with pytest.raises(ValueError, match="unknown resource"):
        Demand(work={"l2": 1.0}, launch=LaunchShape(1, 32), serial_work={"dram": 0.5})


def test_the_4bit_mmas_take_their_own_power_exponent_where_the_spec_has_one():
    """engine.tensor_power_ratio: NVFP4/MXFP4 MMAs stretch by r**tensor_power_exponent_fp4 on
    the Blackwell specs that carry it, FP8 by r**tensor_power_exponent; a spec without the FP4
    field (or one set to None) uses the general exponent for every narrow type."""
    import dataclasses
    from perfmodel.engine import tensor_power_ratio
    b200 = pm.hardware("B200")
    rates = b200.tensor_flop_per_sm_per_clk
    r4, r8 = rates["nvfp4"] / rates["bf16"], rates["fp8"] / rates["bf16"]
    assert b200.tensor_power_exponent_fp4 is not None
    assert tensor_power_ratio(b200, "tensor:nvfp4") == pytest.approx(
        r4 ** b200.tensor_power_exponent_fp4)
    assert tensor_power_ratio(b200, "tensor:fp8") == pytest.approx(
        r8 ** b200.tensor_power_exponent)
    plain = dataclasses.replace(b200, tensor_power_exponent_fp4=None)
    assert tensor_power_ratio(plain, "tensor:nvfp4") == pytest.approx(
        r4 ** b200.tensor_power_exponent)
    assert pm.hardware("H100").tensor_power_exponent_fp4 is None
