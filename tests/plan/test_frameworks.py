"""What the training frameworks do to a microbatch (perfmodel.plan.frameworks), against
hand-worked cases: Transformer Engine's ring-exchange, pipelined and bulk TP overlaps, the FP8
weight cast once per step, the norm-fused activation cast; and the training clock
(plan_training sm_clock_fraction)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.graph import DEFAULT_STREAM
from perfmodel.plan import frameworks as fw
from perfmodel.plan.training import (TRAINING_SM_CLOCK_FRACTION, plan_training,
                                     training_hardware)


def scheduled(name: str, kind: str, time_s: float, stream: str = DEFAULT_STREAM):
    """A scheduled op as frameworks reads it: its name, its op's kind, stream and time."""
    return SimpleNamespace(name=name, op=SimpleNamespace(name=kind), time_s=time_s,
                           stream=stream)


def test_ring_exchange_hides_the_shards_behind_the_gemm_chunks():
    # tp 4: 3 shards of C/3 each beside a GEMM chunk of G/4
    assert fw.ring_exchange_exposed_s(4.0, 6.0, 4) == 0.0             # 4/3 < 6/4
    assert fw.ring_exchange_exposed_s(6.0, 4.0, 4) == pytest.approx(3.0)  # 3·(2 − 1)
    assert fw.ring_exchange_exposed_s(6.0, 4.0, 1) == 6.0             # no ring without TP


def test_pipelined_reduce_scatter_exposes_the_last_split():
    # 4 splits: c = 2, g = 1 -> 2 + 3·(2 − 1)
    assert fw.pipelined_exposed_s(8.0, 4.0) == pytest.approx(5.0)
    assert fw.pipelined_exposed_s(4.0, 8.0) == pytest.approx(1.0)     # only the last split's
    assert fw.bulk_exposed_s(4.0, 3.0) == pytest.approx(1.0)
    assert fw.bulk_exposed_s(3.0, 4.0) == 0.0
    # 24 of 132 SMs held by the communication: the GEMM runs on 108
    assert fw.sm_margin_s(1.0, 24, 132) == pytest.approx(24 / 108)


def test_forward_allreduce_split_beside_its_gemms():
    """BF16, tp 4, H100's 132 SMs: o_proj (10 s), the all-reduce (4 s), a norm, the next
    layer's QKV (12 s). The reduce-scatter half (2 s) is pipelined beside o_proj, which runs on
    108 SMs: stretched by 10·24/108 = 2.222 s, then 2/4 = 0.5 s exposed (each split's 0.5 s
    hides behind 12.222/4). The all-gather half rings beside QKV: 3·max(0, 2/3 − 3) = 0."""
    ops = [scheduled("l0.o_proj", "gemm", 10.0), scheduled("l0.attn_allreduce", "allreduce", 4.0),
           scheduled("l1.norm", "norm", 1.0), scheduled("l1.qkv", "gemm", 12.0)]
    saved = fw.tp_overlap_savings_s(ops, tp=4, sms=132, dtype="bf16", backward_at=len(ops))
    assert saved == pytest.approx(4.0 - (10 * 24 / 108 + 0.5))
    # FP8: the forward reduce-scatter rings too (no SM margin): nothing exposed
    assert fw.tp_overlap_savings_s(ops, 4, 132, "fp8", len(ops)) == pytest.approx(4.0)
    # without TP there is nothing to overlap
    assert fw.tp_overlap_savings_s(ops, 1, 132, "bf16", len(ops)) == 0.0


def test_backward_reduce_scatter_is_bulk_beside_the_wgrad():
    """Backward: the QKV wgrad (6 s) holds 24 SMs' worth of bulk reduce-scatter (2 s): the GEMM
    stretches by 6·24/108, the collective hides; the all-gather half has no GEMM after it and is
    exposed whole (2 s)."""
    ops = [scheduled("l0.qkv.wgrad", "gemm", 6.0), scheduled("l0.qkv_allreduce", "allreduce", 4.0),
           scheduled("l0.embedding_grad", "embedding", 1.0)]
    saved = fw.tp_overlap_savings_s(ops, tp=8, sms=132, dtype="bf16", backward_at=0)
    assert saved == pytest.approx(4.0 - (6 * 24 / 108 + 0.0 + 2.0))


def test_a_collective_between_non_gemm_kernels_stays_exposed():
    ops = [scheduled("l0.attn", "attention", 5.0), scheduled("l0.ar", "allreduce", 4.0),
           scheduled("l0.moe", "moe_dispatch", 3.0)]
    assert fw.tp_overlap_savings_s(ops, 8, 132, "bf16", len(ops)) == 0.0
    # a collective on another stream is already overlapped by the schedule: not counted
    side = [scheduled("l0.o_proj", "gemm", 10.0),
            scheduled("l0.ar", "allreduce", 4.0, stream="comm")]
    assert fw.tp_overlap_savings_s(side, 8, 132, "bf16", len(side)) == 0.0


def test_fp8_weights_cast_once_per_step_and_casts_fused_into_norms():
    ops = [scheduled("l0.norm", "norm", 1.0), scheduled("l0.qkv.quant_x", "quantize", 0.3),
           scheduled("l0.qkv.quant_w", "quantize", 0.5), scheduled("l0.qkv", "gemm", 8.0),
           scheduled("l0.o_proj.quant_x", "quantize", 0.2),
           scheduled("l0.o_proj.quant_w", "quantize", 0.25)]
    # 4 microbatches: 3 of every 4 weight casts go
    assert fw.weight_cache_savings_s(ops, 4) == pytest.approx(0.75 * 0.75)
    assert fw.weight_cache_savings_s(ops, 1) == 0.0
    # only the cast right after the norm is fused (o_proj's input comes from attention)
    assert fw.fused_cast_savings_s(ops) == pytest.approx(0.3)
    got = fw.microbatch_savings_s(fw.framework("megatron"), ops, 1, 132, "fp8", 4, len(ops))
    assert got == pytest.approx({"tp_comm_overlap": 0.0, "fp8_weight_cache": 0.5625,
                                 "norm_fused_casts": 0.3})
    assert fw.microbatch_savings_s(fw.framework("pytorch"), ops, 1, 132, "fp8", 4,
                                   len(ops)) == {}


def test_unknown_framework_is_one_input_error():
    with pytest.raises(InputError, match=r"framework: expected one of megatron, pytorch"):
        fw.framework("deepspeed")
    with pytest.raises(InputError, match="framework"):
        plan_training("llama3-8b", "H100-SXM", batch=8, seq=4096, dp=8, framework="jax")


def test_megatron_overlaps_what_pytorch_exposes():
    """Llama 3 70B, TP 8 FP8 on 64 H100s: Megatron-Core's step is shorter by exactly the
    savings its breakdown lists (negative entries), and PyTorch's lists none."""
    kw = dict(batch=16, seq=4096, tp=8, pp=1, dp=8, dtype="fp8", microbatches=16,
              recompute="full", allow_oversubscribed=True)
    mega = plan_training("llama3-70b", "H100-SXM", framework="megatron", **kw)
    torch = plan_training("llama3-70b", "H100-SXM", framework="pytorch", **kw)
    saved = {k: v for k, v in mega.breakdown.items() if k in ("tp_comm_overlap",
                                                             "fp8_weight_cache",
                                                             "norm_fused_casts")}
    assert set(saved) == {"tp_comm_overlap", "fp8_weight_cache", "norm_fused_casts"}
    assert all(v < 0 for v in saved.values())
    assert not {"tp_comm_overlap", "fp8_weight_cache"} & set(torch.breakdown)
    # no pipeline: the step is the microbatches plus what follows them
    assert torch.pipeline_s - mega.pipeline_s == pytest.approx(-sum(saved.values()), rel=1e-9)
    assert mega.tokens_per_s > torch.tokens_per_s


def test_training_clock_scales_the_step_and_is_validated():
    h = pm.hardware("H100-SXM")
    assert training_hardware(h, 0.8).max_sm_clock_hz == pytest.approx(
        0.8 * h.sustained_sm_clock_hz)
    assert training_hardware(h).max_sm_clock_hz == pytest.approx(
        TRAINING_SM_CLOCK_FRACTION * h.sustained_sm_clock_hz)
    assert 0.5 <= TRAINING_SM_CLOCK_FRACTION <= 1.0
    kw = dict(batch=8, seq=8192, dp=8, microbatches=8, allow_oversubscribed=True)
    slow = plan_training("llama3-8b", "H100-SXM", sm_clock_fraction=0.6, **kw)
    fast = plan_training("llama3-8b", "H100-SXM", sm_clock_fraction=1.0, **kw)
    # a compute-bound step: most of it scales with the clock, none of it faster at a lower one
    assert 1.0 / 0.6 >= slow.step_time_s / fast.step_time_s > 1.3
    # the roofline keeps the datasheet clocks
    roof = [plan_training("llama3-8b", "H100-SXM", level="roofline", sm_clock_fraction=f, **kw)
            for f in (0.6, 1.0)]
    assert roof[0].step_time_s == roof[1].step_time_s
    for bad in (0, 1.5, True, "0.8", float("nan")):
        with pytest.raises(InputError, match=r"sm_clock_fraction: expected a number in \(0, 1\]"):
            plan_training("llama3-8b", "H100-SXM", sm_clock_fraction=bad, **kw)


def test_dualpipe_pairs_hide_the_communication_and_shrink_the_bubble():
    """A microbatch of forward compute 3 s, an all-to-all 2 s, backward compute 6 s with 2 s of
    weight-gradient GEMMs (the schedule's microbatch: 11 s), 132 SMs of which DualPipe's
    communication holds 20: the pair runs max(9·132/112, 2) = 10.607 s; the bubble at pp 8 is
    (8/2 − 1)·(10.607 + (132/112)·(6 − 3·2)) = 31.82 s, against 1F1B's 7 · 11 = 77 s."""
    from perfmodel.plan.training import dualpipe_step_s
    ops = [scheduled("l0.qkv", "gemm", 3.0), scheduled("l0.dispatch", "alltoall", 2.0),
           scheduled("l0.qkv.dgrad", "gemm", 4.0), scheduled("l0.qkv.wgrad", "gemm", 2.0)]
    pair, bubble = dualpipe_step_s(ops, 2, 11.0, pp=8, sms=132)
    assert pair == pytest.approx(9 * 132 / 112)
    assert bubble == pytest.approx(3 * (9 * 132 / 112 + 132 / 112 * (6 - 6)))
    # communication longer than the paired compute stays exposed beyond it
    pair, _ = dualpipe_step_s([scheduled("a", "alltoall", 20.0), scheduled("g", "gemm", 1.0)],
                              1, 21.0, pp=2, sms=132)
    assert pair == pytest.approx(20.0)


def test_dualpipe_plans_are_checked_and_beat_1f1b_on_expert_parallel_runs():
    kw = dict(batch=32, seq=4096, tp=1, pp=4, dp=16, ep=16, dtype="fp8",
              allow_oversubscribed=True)
    one = plan_training("deepseek-v3", "H100-SXM", **kw)
    dual = plan_training("deepseek-v3", "H100-SXM", pipeline_schedule="dualpipe", **kw)
    assert dual.step_time_s < one.step_time_s and dual.breakdown["dualpipe_overlap"] < 0
    for bad in (dict(pp=3, dp=16), dict(virtual_stages=2)):
        with pytest.raises(InputError, match="dualpipe needs an even pp"):
            plan_training("deepseek-v3", "H100-SXM", pipeline_schedule="dualpipe",
                          **{**kw, **bad})
    with pytest.raises(InputError, match="pipeline_schedule: expected one of 1f1b, dualpipe"):
        plan_training("llama3-8b", "H100-SXM", batch=8, dp=8, pipeline_schedule="gpipe")
