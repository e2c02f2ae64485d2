"""Op-level behaviour the hardware has, and the issue's acceptance points."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.ops.rng import philox_work, rng_instruction_work


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


def test_large_elementwise_is_hbm_bound(any_hw):
    est = pm.predict_op(pm.ops.Elementwise(elements=1 << 28, dtype="bf16", inputs=2), any_hw)
    assert est.bound == "hbm"
    assert est.time_s == pytest.approx(3 * (1 << 28) * 2 / any_hw.hbm_bandwidth_bytes_per_s,
                                       rel=0.05)


def test_small_grid_cannot_fill_hbm(h100):
    """Little's law: a handful of CTAs keeps too few bytes in flight to reach HBM bandwidth."""
    small = pm.predict_op(pm.ops.Norm(rows=8, cols=1 << 20, dtype="bf16"), h100)
    big = pm.predict_op(pm.ops.Norm(rows=8192, cols=1024, dtype="bf16"), h100)
    assert small.hbm_bytes == pytest.approx(big.hbm_bytes, rel=0.1)  # weight vector differs
    assert small.time_s > 3 * big.time_s


def test_fp4_gemm_on_hopper_is_an_input_error(h100):
    with pytest.raises(pm.InputError, match="not supported by H100-SXM"):
        pm.predict_op(pm.ops.Gemm(m=1024, n=1024, k=1024, dtype="nvfp4"), h100)


def test_nvfp4_is_faster_than_fp8_on_b200_for_large_gemms():
    b200 = pm.hardware("B200")
    fp8 = pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="fp8"), b200)
    fp4 = pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="nvfp4"), b200)
    assert 1.5 < fp8.time_s / fp4.time_s <= 2.0
    assert fp4.hbm_bytes > 3 * 8192 * 8192 * 0.5 * (1 + 1 / 32)  # scale bytes counted


def test_skinny_deep_gemm_uses_split_k(h100):
    est = pm.predict_op(pm.ops.Gemm(m=64, n=1024, k=65536, dtype="bf16"), h100)
    assert est.details["split_k"] > 1
    assert est.details["busiest_sm_ctas"] == 1


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


def test_quantize_options_add_their_work(h100):
    plain = pm.predict_op(pm.ops.Quantize(rows=8192, cols=8192, to="fp8", amax_pass=False), h100)
    amax = pm.predict_op(pm.ops.Quantize(rows=8192, cols=8192, to="fp8", amax_pass=True), h100)
    trans = pm.predict_op(pm.ops.Quantize(rows=8192, cols=8192, to="fp8", amax_pass=False,
                                          transpose=True), h100)
    assert amax.hbm_bytes > plain.hbm_bytes and trans.hbm_bytes > plain.hbm_bytes
    b200 = pm.hardware("B200")
    sr = pm.predict_op(pm.ops.Quantize(rows=8192, cols=8192, to="nvfp4", rht=True,
                                       stochastic_rounding=True), b200)
    assert sr.resource_time_s["fma_heavy"] > 0 and sr.details["block"] == 16


def test_attention_decode_is_hbm_bound(any_hw):
    est = pm.predict_op(pm.ops.Attention(batch=64, heads=32, kv_heads=8, seq_q=1, seq_kv=8192,
                                         head_dim=128, dtype="bf16"), any_hw)
    assert est.bound == "hbm"


def test_causal_costs_about_half_at_long_sequences(h100):
    def t(causal, s):
        return pm.predict_op(pm.ops.Attention(batch=1, heads=32, seq_q=s, head_dim=128,
                                              dtype="bf16", causal=causal), h100).time_s
    assert t(True, 16384) / t(False, 16384) == pytest.approx(0.5, abs=0.05)
    assert t(True, 512) / t(False, 512) > 0.55  # diagonal tiles dominate at short sequences


def test_collectives_follow_ring_bytes(h100):
    ar = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=8), h100)
    ag = pm.predict_op(pm.ops.Allgather(bytes=1e9, gpus=8), h100)
    assert ar.bound == "link:nvlink"
    assert ar.resource_time_s["link:nvlink"] == pytest.approx(
        2 * ag.resource_time_s["link:nvlink"])


@pytest.mark.parametrize("params, message", [
    (dict(m=0, n=1, k=1, dtype="bf16"), "m: expected an integer >= 1, got 0"),
    (dict(m=1, n=1, k=1, dtype="bf17"), "dtype: expected a dtype"),
    (dict(m=1, n=1, k=1, dtype="bf16", mm=3), "mm: unknown parameter for op 'gemm'"),
    (dict(n=1, k=1, dtype="bf16"), "m: missing required parameter of op 'gemm'"),
    (dict(m="big", n=1, k=1, dtype="bf16"), "m: expected an integer >= 1, got 'big'"),
])
def test_bad_op_parameters_name_the_key(params, message):
    with pytest.raises(pm.InputError, match=message):
        pm.ops.op("gemm", **params)


def test_unknown_op_is_named():
    with pytest.raises(pm.InputError, match="unknown op 'gemmm'"):
        pm.ops.op("gemmm", m=1)


def test_allreduce_auto_picks_oneshot_for_small_and_ring_for_large(h100):
    def t(nbytes, algorithm):
        return pm.predict_op(pm.ops.Allreduce(bytes=nbytes, gpus=8, algorithm=algorithm),
                             h100).time_s
    assert t(1e6, "oneshot") < t(1e6, "ring")
    assert t(1e9, "ring") < t(1e9, "oneshot")
    for nbytes in (1e4, 1e6, 1e8, 1e9):
        assert t(nbytes, "auto") == pytest.approx(min(t(nbytes, a) for a in
                                                      ("ring", "tree", "oneshot")))
    with pytest.raises(pm.InputError, match="'oneshot' is not an algorithm of allgather"):
        pm.ops.Allgather(bytes=1e6, gpus=8, algorithm="oneshot")
