"""Block-scaled FP8 experts (DeepSeek-V3/R1's FP8 checkpoints: 128x128 weight blocks, 1x128
activation blocks): on Hopper, whose wgmma takes no scales, every 128 of K the partial sums are
scaled into the FP32 accumulators on the CUDA cores, serial with the MMAs (ops.gemm's
promotion); Blackwell's block-scaled MMA applies them in the tensor core."""
from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel.workloads.builder import build_graph
from perfmodel.workloads.models import load_model, parse_model


def _experts(scaling: str) -> pm.ops.Moe:
    return pm.ops.Moe(tokens=4096, hidden=7168, expert_hidden=2048, experts=256, top_k=8,
                      gpus=8, dtype="fp8", routing="token_balanced", fp8_scaling=scaling)


def test_promotion_is_one_ffma_per_output_and_k_block_of_both_gemms():
    """Hand-worked: GEMM1 has 2 x 2048 outputs per row over K = 7168 (56 blocks), GEMM2 7168
    outputs over K = 2048 (16 blocks): 2·2048·56 + 7168·16 = 344,064 FFMAs per padded row."""
    op = _experts("block")
    rows = list(op.per_gpu_rows()[0])
    padded = sum(math.ceil(r / 64) for r in rows) * 64
    hopper = pm.hardware("H100-SXM")
    def fma(moe, hw) -> float:  # the grouped GEMMs' FMA-pipe work: promotion, epilogue
        seq = moe._gpu_demand(rows, 160 * 1024, hw).sequence
        gemms = next(d for d in seq if d.details.get("part") == "grouped GEMMs")
        return gemms.work.get("fma", 0.0)

    tensor = _experts("tensor")
    assert fma(op, hopper) - fma(tensor, hopper) == padded * (2 * 2048 * 56 + 7168 * 16)
    # a block-scaled MMA (B200) applies the scales itself: nothing promoted
    b200 = pm.hardware("B200")
    assert fma(op, b200) == fma(tensor, b200)


def test_block_scaled_experts_cost_more_on_hopper_and_the_same_on_blackwell():
    for hw, slower in (("H200-SXM", True), ("B200", False)):
        block = pm.predict_op(_experts("block"), hw).time_s
        tensor = pm.predict_op(_experts("tensor"), hw).time_s
        assert (block > tensor) if slower else block == pytest.approx(tensor, rel=1e-12)


def test_block_scaling_applies_to_fp8_experts_only():
    with pytest.raises(pm.InputError, match="fp8_scaling: block scaling applies to fp8"):
        pm.ops.Moe(tokens=16, hidden=64, expert_hidden=64, experts=8, top_k=2, gpus=1,
                   dtype="bf16", fp8_scaling="block")


def test_deepseek_fp8_serving_runs_its_checkpoints_block_scales():
    """deepseek-v3's file states 128x128 weight blocks: an fp8 serving graph's linears and
    experts are block-scaled; Llama's per-tensor checkpoint stays per-tensor."""
    ds = build_graph(load_model("deepseek-v3"), "decode", batch=8, seq=512, tp=8, ep=8,
                     dtype="fp8")
    moe = [n.op for n in ds.nodes if n.op.name == "moe"]
    linears = [n.op for n in ds.nodes if n.op.name == "linear"]
    assert moe and all(o.fp8_scaling == "block" for o in moe)
    assert linears and all(o.fp8_scaling == "block" for o in linears)
    llama = build_graph(load_model("llama3-8b"), "decode", batch=8, seq=512, dtype="fp8")
    assert all(n.op.fp8_scaling == "tensor" for n in llama.nodes if n.op.name == "linear")


def test_a_model_file_states_only_the_block_the_kernels_implement():
    raw = {"schema_version": 1, "name": "x", "source": {"title": "t", "url": "u"},
           "params_total": {"value": 1e9, "source": "s"}, "hidden": 64, "layers": 2,
           "heads": 4, "kv_heads": 4, "head_dim": 16, "ffn_hidden": 128, "vocab": 100,
           "fp8_weight_block": 64}
    with pytest.raises(pm.InputError, match="fp8_weight_block: expected 0 .* or 128"):
        parse_model(raw, "x.yaml")
    raw["fp8_weight_block"] = 128
    assert parse_model(raw, "x.yaml").fp8_weight_block == 128
