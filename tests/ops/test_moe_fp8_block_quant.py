"""TensorRT-LLM's fused-MoE runner with block-scaled FP8 experts on Hopper quantizes each grouped
GEMM's BF16 input itself (`scale_1x128_kernel`, one 256-thread CTA per SM, a warp per 1x128
group): a latency-bound kernel before each GEMM (ops/moe/op.py BLOCK_QUANT_THREADS)."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.engine import pipes
from perfmodel.ops.moe.op import block_quant_demand


def _experts(tokens: int = 4096, quant: str = "trtllm") -> pm.ops.Moe:
    return pm.ops.Moe(tokens=tokens, hidden=7168, expert_hidden=2048, experts=256, top_k=8,
                      gpus=8, dtype="fp8", routing="token_balanced", fp8_scaling="block",
                      fp8_block_quant=quant)


def _parts(op: pm.ops.Moe, hw) -> dict:
    rows = list(op.per_gpu_rows()[0])
    return {d.details["part"]: d for d in op._gpu_demand(rows, 160 * 1024, hw).sequence}


def test_quant_kernel_is_one_group_per_warp_per_dram_round_trip():
    """Hand-worked, 16384 rows of K = 7168 on H200: 917,504 groups, so the grid is capped at one
    CTA per SM (132); each CTA's 8 warps move 8 groups of 128 x (2 B read + 1 B written) + a 4-B
    scale per DRAM round trip: 3,104 B in flight, and the HBM time is the bytes over
    132 x 3,104 B per round trip."""
    hw = pm.hardware("H200-SXM")
    d = block_quant_demand(16384.0, 7168, 1.0, hw, "q")
    assert d.launch.ctas == 132 and d.launch.threads_per_cta == 256
    assert d.launch.bytes_in_flight_per_cta == 8 * (128 * 3 + 4)
    moved = 16384 * 7168 * 3 + 16384 * 56 * 4
    assert d.work["hbm"] == moved
    rate = 132 * 3104 / hw.hbm_latency_s
    assert rate < hw.hbm_bandwidth_bytes_per_s  # latency-bound, not bandwidth-bound
    assert pipes(d, hw).resource_time_s["hbm"] == pytest.approx(moved / rate, rel=1e-12)


def test_few_groups_launch_fewer_ctas():
    """One row of K = 2048: 16 groups, two CTAs of 8 warps."""
    d = block_quant_demand(1.0, 2048, 1.0, pm.hardware("H100-SXM"), "q")
    assert d.launch.ctas == 2


def test_runner_quantizes_before_each_gemm_and_keeps_bf16_between():
    """trtllm: two quantization launches (GEMM1's input over the hidden size, GEMM2's over the
    expert's), and the expand and activation write BF16; fused: the cast in those kernels."""
    hw = pm.hardware("H200-SXM")
    runner, fused = _parts(_experts(), hw), _parts(_experts(quant="fused"), hw)
    assert set(runner) - set(fused) == {"quantize GEMM1 input", "quantize GEMM2 input"}
    tokens = runner["grouped GEMMs"].details["tokens_on_gpu"]
    assert runner["quantize GEMM1 input"].work["hbm"] == tokens * 7168 * 3 + tokens * 56 * 4
    assert runner["quantize GEMM2 input"].work["hbm"] == tokens * 2048 * 3 + tokens * 16 * 4
    # expand: BF16 in, BF16 out (2 + 2 B per element) against BF16 in, FP8 out (2 + 1)
    assert runner["expand rows (cast)"].work["hbm"] == tokens * 7168 * 4
    assert fused["expand rows (cast)"].work["hbm"] == tokens * 7168 * 3
    assert runner["grouped GEMMs"] == fused["grouped GEMMs"]
    t_runner = pm.predict_op(_experts(), hw).time_s
    t_fused = pm.predict_op(_experts(quant="fused"), hw).time_s
    assert t_runner > t_fused


def test_quant_time_grows_with_tokens_and_dominates_the_extra_cost_at_prefill():
    """The quantization's share of the module grows with the tokens: at 16k tokens (EP8) it is
    a large part of the time (the measured module is ~1.7x its FLOP at the model's GEMM rate)."""
    hw = pm.hardware("H200-SXM")
    share = []
    for tokens in (1024, 16384):
        parts = _parts(_experts(tokens), hw)
        q = sum(pipes(parts[p], hw).time_s for p in ("quantize GEMM1 input",
                                                      "quantize GEMM2 input"))
        share.append(q / sum(pipes(d, hw).time_s for d in parts.values()))
    assert share[0] < share[1] and share[1] > 0.25


def test_blackwell_and_per_tensor_experts_have_no_runner_quant():
    """The choice applies where block scales are promoted on the CUDA cores (Hopper): on B200
    both choices are the same demand; per-tensor experts reject a non-default choice. The
    default is the cast fused in the expand and activation (the op before this kernel)."""
    b200 = pm.hardware("B200")
    a = pm.predict_op(_experts(), b200).time_s
    b = pm.predict_op(_experts(quant="fused"), b200).time_s
    assert a == b
    with pytest.raises(pm.InputError, match="fp8_block_quant: applies to block-scaled fp8"):
        pm.ops.Moe(tokens=16, hidden=7168, expert_hidden=2048, experts=256, top_k=8, gpus=8,
                   dtype="fp8", fp8_block_quant="trtllm")
    assert pm.ops.Moe(tokens=16, hidden=64, expert_hidden=64, experts=8, top_k=2, gpus=1,
                      dtype="fp8", fp8_scaling="block").fp8_block_quant == "fused"
