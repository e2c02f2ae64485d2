"""vLLM's Marlin MoE (`Moe(kernel="marlin")`): its block rule, its MMAs on mma.sync at the fitted
share, and where it applies."""
from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.ops.moe import op as moe_op

# a 896-expert top-16 layer, the shape of AIConfigurator's Marlin MXFP4 rows
SHAPE = dict(hidden=3584, expert_hidden=3072, experts=896, top_k=16, dtype="bf16",
             weight_dtype="mxfp4", routing="token_balanced")


@pytest.mark.parametrize("rows_per_expert, block", [
    (0.5, 8), (7.1, 8), (7.2, 16), (14.3, 16), (14.4, 32), (28.7, 32), (28.8, 48), (43.1, 48),
    (43.2, 64), (300.0, 64)])
def test_the_block_is_the_first_under_nine_tenths_of_a_block_per_expert(rows_per_expert, block):
    """fused_marlin_moe: `for block_size_m in [8, 16, 32, 48, 64]: if M * topk / E /
    block_size_m < 0.9: break` (64 when none breaks)."""
    assert moe_op.marlin_block_m(rows_per_expert) == block


def test_the_mmas_run_whole_blocks_at_the_share_of_mma_sync():
    """At 16384 tokens each expert gets ~16384·16/896 ≈ 293 rows, 64-row blocks (about five per
    expert); the tensor work counts whole blocks of the routed rows, at the native rate's share
    MARLIN_MMA_FRACTION · mma.sync / wgmma."""
    hw = pm.hardware("H200-SXM")
    op = pm.ops.Moe(tokens=16384, gpus=1, kernel="marlin", **SHAPE)
    gemms = next(d for d in op.demand(hw).options[0].sequence
                 if d.details.get("part") == "grouped GEMMs")
    share = (moe_op.MARLIN_MMA_FRACTION * hw.mma_sync_flop_per_sm_per_clk["bf16"]
             / hw.tensor_flop_per_sm_per_clk["bf16"])
    assert share == pytest.approx(moe_op.marlin_rate_share(hw, "bf16"))
    rows = op.per_gpu_rows()[0]
    assert len(rows) == 896 and 280 < sum(rows) / len(rows) < 300
    blocks = sum(math.ceil(r / 64) for r in rows)
    assert gemms.work["tensor:bf16"] == pytest.approx(
        2.0 * blocks * 64 * 3 * 3584 * 3072 / share, rel=1e-12)


def test_marlin_binds_on_its_mmas_only_at_large_batches():
    """Decode-sized calls convert the weights either way (within 15 % of the grouped kernel);
    at 16384 tokens Marlin's MMAs make it ~2x slower, as AIConfigurator's H200 rows measure
    (74.7 ms against the grouped pricing's ~36 ms)."""
    hw = pm.hardware("H200-SXM")

    def t(tokens, kernel):
        return pm.predict_op(pm.ops.Moe(tokens=tokens, gpus=1, kernel=kernel, **SHAPE),
                             hw).time_s
    assert t(16, "marlin") == pytest.approx(t(16, "grouped"), rel=0.15)
    assert t(16384, "marlin") / t(16384, "grouped") > 1.8


def test_marlin_needs_16_bit_activations_on_narrower_weights():
    with pytest.raises(InputError, match="kernel"):
        pm.ops.Moe(tokens=64, gpus=1, kernel="marlin",
                   **{**SHAPE, "weight_dtype": None})
    with pytest.raises(InputError, match="kernel"):
        pm.ops.Moe(tokens=64, gpus=1, kernel="marlin", **{**SHAPE, "dtype": "fp8",
                                                          "weight_dtype": "mxfp4"})


def test_the_engine_setting_reaches_the_experts_and_stays_out_of_training():
    from perfmodel.plan.memory import as_model
    from perfmodel.plan.simulator.engines import Engine
    from perfmodel.validation.inferencex import recipe
    from perfmodel.workloads.builder import build_graph, inference_op_counts
    m = as_model("gpt-oss-120b")
    experts = {n.partition(".")[2]: o for n, o, _ in inference_op_counts(
        m, "decode", batch=8, context=1024, moe_kernel="marlin") if n.startswith("l0.")}
    assert experts["experts"].kernel == "marlin"
    with pytest.raises(InputError, match="moe_kernel"):
        build_graph(m, "train", batch=8, seq=1024, microbatches=8, moe_kernel="marlin")
    with pytest.raises(InputError, match="moe_kernel"):
        Engine("x", moe_kernel="machete").check()
    # InferenceX's gpt-oss vLLM recipe sets VLLM_MXFP4_USE_MARLIN=1
    assert recipe("gpt-oss-120b", "vllm", 8, 1024, 1024, False, 1)[1]["moe_kernel"] == "marlin"
