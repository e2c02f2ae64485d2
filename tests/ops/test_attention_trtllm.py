"""TensorRT-LLM's attention family (kernel="trtllm"): XQA's launch rules, trtllm-gen's generation
grid, the context FMHA's grid and kernels (perfmodel/ops/attention/trtllm.py)."""
import math

import pytest

from perfmodel import ops
from perfmodel.errors import InputError
from perfmodel.hardware import hardware
from perfmodel.ops.attention.trtllm import (fmha_v2_kv_step, mla_padded_tile_q,
                                            trtllm_gen_decode_launch, trtllm_gen_mla_launch,
                                            xqa_launch)
from perfmodel.predict import predict_op


def _attn(**kw):
    base = dict(batch=16, heads=16, kv_heads=2, head_dim=128, seq_q=1, seq_kv=4096,
                dtype="fp8", kernel="trtllm")
    return ops.Attention(**{**base, **kw})


def test_xqa_sm90_split_rule_is_the_launchers():
    hw = hardware("H200-SXM")
    for batch, kv, seq in [(1, 2, 65536), (16, 2, 4096), (64, 8, 512), (256, 8, 128)]:
        x = xqa_launch(hw, "xqa_sm90", batch=batch, kv_heads=kv, group=8, seq_kv=seq)
        # mha_sm90.cu: min(max(1, round((3 * SMs / (batch * kv heads)) * 0.25)), tiles of 64)
        want = min(max(1, round((3 * hw.sm_count // (batch * kv)) * 0.25)), math.ceil(seq / 64))
        assert x.splits == want
        assert x.bn == 64 and x.threads == 384
    # the whole grid stays under one CTA per SM: the kernel never fills the 2-3 an SM holds
    x = xqa_launch(hw, "xqa_sm90", batch=1, kv_heads=2, group=8, seq_kv=1 << 17)
    assert 2 * x.splits <= hw.sm_count


def test_xqa_sm90_ctas_per_sm_follow_launch_bounds():
    hw = hardware("H100-SXM")
    assert xqa_launch(hw, "xqa_sm90", batch=1, kv_heads=1, group=8, seq_kv=64).ctas_per_sm == 3
    assert xqa_launch(hw, "xqa_sm90", batch=1, kv_heads=1, group=32, seq_kv=64).ctas_per_sm == 2


def test_fp8_generation_on_hopper_is_one_kernel_even_when_split():
    e = predict_op(_attn(batch=1, seq_kv=65536), hardware("H200-SXM"))
    assert e.details["design"] == "xqa_sm90" and e.details["kv_splits"] > 1
    generic = predict_op(_attn(batch=1, seq_kv=65536, kernel=None), hardware("H200-SXM"))
    assert generic.details["kv_splits"] > 1
    # XQA merges the sub-sequences inside its kernel: one launch fewer than flash-decoding
    assert e.resource_time_s["launch"] < generic.resource_time_s["launch"]


def test_context_fmha_has_no_decode_path_and_a_metadata_kernel():
    hw = hardware("H200-SXM")
    one = predict_op(_attn(batch=128, heads=32, kv_heads=4, seq_q=1, seq_kv=1, dtype="bf16"), hw)
    assert one.details["decode"] is False and one.details["design"] == "trtllm_fmha_v2"
    # buildDecoderInfo, then the FMHA
    assert one.resource_time_s["launch"] == pytest.approx(2 * hw.kernel_launch_s)
    # one CTA per (sequence, head, query tile): more sequences, more CTA rounds, more time
    more = predict_op(_attn(batch=512, heads=32, kv_heads=4, seq_q=1, seq_kv=1, dtype="bf16"), hw)
    assert more.time_s > one.time_s


def test_fmha_v2_key_step():
    assert fmha_v2_kv_step(128, 2) == 128 and fmha_v2_kv_step(64, 2) == 256
    assert fmha_v2_kv_step(256, 2) == 64 and fmha_v2_kv_step(128, 1) == 256


def test_blackwell_context_is_trtllm_gen_and_generation_its_generation_kernels():
    hw = hardware("B200")
    ctx = predict_op(_attn(seq_q=4096, seq_kv=4096, causal=True, dtype="bf16"), hw)
    assert ctx.details["design"] == "trtllm_gen"
    gen = predict_op(_attn(dtype="bf16"), hw)
    assert gen.details["design"] == "trtllm_gen_decode"
    # one kernel: the KV split's partials are reduced inside it
    assert gen.resource_time_s["launch"] == pytest.approx(hw.kernel_launch_s)


@pytest.mark.parametrize("group, seq_q, rows, swapped", [
    (1, 1, 8, True), (4, 1, 8, True), (8, 1, 8, True), (16, 1, 16, True), (32, 1, 32, True),
    (64, 1, 64, False), (128, 1, 128, False), (4, 4, 16, True), (8, 4, 32, True)])
def test_trtllm_gen_query_tile_is_the_groups_rows_padded(group, seq_q, rows, swapped):
    """selectGqGenerationKernel: heads × tokens of a KV head padded to 8/16/32 on the swapped
    MMA's N side; more rows take the unswapped kernel's 64 or 128."""
    x = trtllm_gen_decode_launch(hardware("B200"), batch=4, heads=8 * group, kv_heads=8,
                                 seq_q=seq_q, seq_kv=4096)
    assert (x.rows, x.swapped) == (rows, swapped)


def test_trtllm_gen_splits_fill_one_wave():
    """computeCtaAndClusterConfig: min(ceil(seq_kv / 256), max(1, SMs // base CTAs))."""
    hw = hardware("B200")
    for batch, kv, seq in [(1, 1, 16384), (16, 1, 131072), (4, 2, 1024), (64, 8, 512),
                           (256, 8, 128)]:
        x = trtllm_gen_decode_launch(hw, batch=batch, heads=4 * kv, kv_heads=kv, seq_q=1,
                                     seq_kv=seq)
        assert x.base_ctas == batch * kv
        assert x.splits == min(math.ceil(seq / 256), max(1, hw.sm_count // (batch * kv)))
        assert x.splits == 1 or x.base_ctas * x.splits <= hw.sm_count


def test_trtllm_gen_packs_a_gqa_group_into_8_rows_not_64():
    hw = hardware("B200")
    a = _attn(batch=512, heads=32, kv_heads=8, seq_kv=512, dtype="bf16")
    gen = predict_op(a, hw)
    fa4 = predict_op(ops.Attention(**{**a.params, "kernel": "fa4"}), hw)
    # the same keys are read; FA4's decode pads the group of 4 to 64 MMA rows, trtllm-gen to 8
    assert gen.resource_time_s["xu"] < fa4.resource_time_s["xu"] / 4
    assert gen.resource_time_s["hbm"] == pytest.approx(fa4.resource_time_s["hbm"])


def test_trtllm_gen_persistent_grid_hides_tile_rounds_under_the_stream():
    """Without a KV split the persistent scheduler pipelines the work tiles: a bandwidth-bound
    call costs its stream (the rounds under it), a call of tiny tiles costs its rounds."""
    hw = hardware("B200")
    streamed = predict_op(_attn(batch=512, heads=32, kv_heads=8, seq_kv=512, dtype="bf16"), hw)
    assert streamed.details["kv_splits"] == 1
    rounds = streamed.details["tile_rounds_s"]
    hbm = streamed.resource_time_s["hbm"]
    assert 0 < rounds < hbm
    body = streamed.time_s - streamed.resource_time_s["latency"] - hw.kernel_launch_s
    assert body == pytest.approx(hbm)
    tiny = predict_op(_attn(batch=2048, heads=32, kv_heads=8, seq_kv=32, dtype="bf16"), hw)
    assert tiny.details["tile_rounds_s"] > tiny.resource_time_s["hbm"]
    # the rounds beyond the stream are exposed latency: the call is latency-bound
    assert tiny.bound == "latency"
    from perfmodel.ops.attention import op as attention
    fixed = attention.TRTLLM_GEN_DECODE_FIXED_S
    assert tiny.time_s - hw.kernel_launch_s - hw.hbm_latency_s - fixed == pytest.approx(
        tiny.details["tile_rounds_s"])


def test_trtllm_gen_generation_pays_its_one_time_start_once_per_call():
    """The fitted start (attention.fixed_s.trtllm_gen_decode) is in every trtllm-gen generation
    call's latency, once, and in no other design's."""
    from perfmodel.ops.attention import op as attention
    hw = hardware("B200")
    fixed = attention.TRTLLM_GEN_DECODE_FIXED_S
    assert 0 < fixed < 10e-6
    small = predict_op(_attn(batch=1, seq_kv=256, dtype="bf16"), hw)
    fa4 = predict_op(_attn(batch=1, seq_kv=256, dtype="bf16", kernel="fa4"), hw)
    assert small.resource_time_s["latency"] >= fixed
    assert fa4.resource_time_s["latency"] < fixed
    big = predict_op(_attn(batch=64, seq_kv=65536, dtype="bf16"), hw)
    assert big.resource_time_s["latency"] - fixed < 0.1 * big.time_s


def _mla(**kw):
    base = dict(batch=64, heads=16, kv_heads=1, head_dim=576, head_dim_v=512, shared_kv=True,
                seq_q=1, seq_kv=4096, dtype="bf16", kernel="trtllm")
    return ops.Attention(**{**base, **kw})


@pytest.mark.parametrize("heads, padded", [(1, 8), (4, 8), (8, 0), (12, 16), (16, 0), (20, 32),
                                           (32, 0), (48, 64), (64, 0), (128, 0)])
def test_mla_padded_tile_is_the_next_shipped_power_of_two(heads, padded):
    assert mla_padded_tile_q(heads) == padded


def test_mla_generation_swaps_up_to_32_heads_and_pairs_ctas_at_128():
    """selectMlaGenerationKernel: 16 heads run swapped 16-row tiles; 128 heads run swapped too
    while 16-head CTAs fill at most one wave with <= 1024 keys per split, else the unswapped
    64-row kernel as a 2-CTA pair per token, reduced by a separate kernel."""
    hw = hardware("B200")
    x = trtllm_gen_mla_launch(hw, batch=64, heads=16, seq_q=1, seq_kv=4096)
    assert (x.rows, x.swapped, x.kernels) == (16, True, 1)
    x = trtllm_gen_mla_launch(hw, batch=8, heads=128, seq_q=1, seq_kv=1024)
    assert (x.rows, x.swapped) == (16, True)         # 64 CTAs, 2 splits of 512 keys
    x = trtllm_gen_mla_launch(hw, batch=256, heads=128, seq_q=1, seq_kv=4096)
    assert (x.rows, x.swapped, x.v_splits, x.base_ctas) == (64, False, 1, 512)
    assert x.splits == 1 and x.kernels == 1          # the grid fills the GPU: no split
    x = trtllm_gen_mla_launch(hw, batch=1, heads=128, seq_q=1, seq_kv=16384)
    assert x.swapped                                 # 18 splits of 911 keys
    x = trtllm_gen_mla_launch(hw, batch=1, heads=128, seq_q=1, seq_kv=65536)
    assert not x.swapped and x.base_ctas == 2 and x.kernels == 2
    assert x.splits == hw.sm_count // 2


def test_mla_generation_splits_v_dims_where_the_grid_leaves_sms_idle():
    """"Use smaller headDimPerCtaV to fully utilize the SMs": a small swapped grid splits the
    512 V dims over 4 CTAs (2 when only half as many fit), and the KV split is recomputed over
    the larger grid; each V-split CTA computes the whole 576-deep scores."""
    hw = hardware("B200")
    x = trtllm_gen_mla_launch(hw, batch=1, heads=16, seq_q=1, seq_kv=16384)
    assert x.v_splits == 4 and x.base_ctas == 4
    assert x.splits == min(math.ceil(16384 / 256), hw.sm_count // 4)
    big = trtllm_gen_mla_launch(hw, batch=256, heads=16, seq_q=1, seq_kv=4096)
    assert big.v_splits == 1
    # the V split adds score work (each CTA's QK^T) but not output work
    one = predict_op(_mla(batch=1, seq_kv=16384), hw)
    assert one.flop == pytest.approx(2 * (576 + 512) * 16 * 16384)


def test_mla_generation_on_blackwell_is_trtllm_gen_and_pays_its_start():
    from perfmodel.ops.attention import op as attention
    b200 = hardware("B200")
    e = predict_op(_mla(), b200)
    assert e.details["design"] == "trtllm_gen_decode"
    assert e.resource_time_s["latency"] >= attention.TRTLLM_GEN_DECODE_FIXED_S
    # Hopper's MLA generation keeps FA3's FlashMLA-class decode
    h = hardware("H100-SXM")
    assert predict_op(_mla(), h).details["design"] == "fa3"


def test_trtllm_is_forward_only():
    with pytest.raises(InputError):
        predict_op(_attn(seq_q=512, seq_kv=512, dtype="bf16", direction="bwd"),
                   hardware("H100-SXM"))
