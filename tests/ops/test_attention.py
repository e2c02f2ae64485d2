"""Attention behaviour the hardware has (FlashAttention-2/3/4 and cuDNN kernel families)."""
from __future__ import annotations

import pytest

import perfmodel as pm


FWD = dict(batch=4, heads=32, seq_q=8192, head_dim=128, dtype="bf16")


def est(hw, **kw):
    return pm.predict_op(pm.ops.Attention(**{**FWD, **kw}), hw)


def test_h100_forward_hd128_is_tensor_bound():
    assert est("H100-SXM").bound == "tensor:bf16"


def test_b200_exponentials_rival_the_mmas():
    """B200 doubled the MMA rate but not MUFU: per 128x128 tile both take ~1024 cycles (FA4).
    On H100 the exps take half the MMA time at head dim 128 (FA3 paper: 256x lower throughput,
    512 MMA FLOP per exp); both run at the kernel's one SM clock."""
    e = est("B200")
    t = e.resource_time_s
    # same order (FA4 emulates ~15 % of the exps on the FMA pipe)
    assert 0.5 < t["xu"] / t["tensor:bf16"] < 1.5
    h = est("H100-SXM").resource_time_s
    assert h["xu"] / h["tensor:bf16"] <= 0.5 + 1e-9


def test_b300_double_mufu_makes_it_faster_than_b200():
    """On an exp-heavy shape (head dim 64: as many exps per MMA FLOP as hd128 has per two),
    B300's doubled MUFU wins even at its lower sustained tensor clock (fitted on TE's B300 run).
    B300 (cc 10.3) emulates no exp on the FMA pipe (flash-attn-4 4.0.0b40 select_ex2_emu) where
    B200 moves 12.5 % of them there at head dim 64, so B300's MUFU time is under 2/3 of B200's
    rather than half."""
    assert est("B300", head_dim=64).time_s < 0.99 * est("B200", head_dim=64).time_s
    assert est("B300", head_dim=64).resource_time_s["xu"] < \
        0.7 * est("B200", head_dim=64).resource_time_s["xu"]


def test_b300_halves_b200s_exp_time_on_hd128_at_the_same_sustained_tensor_clock():
    """The B300-vs-B200 headline shape (bf16 hd128) at B200's sustained fraction (taken for both,
    so only the MUFU differs): B300's doubled MUFU halves the exps' time. It does not show
    in the kernel's time there: with FA4's overlap fitted at its bound (1.0, B200's headline at
    B200's own sustained clock) the softmax hides entirely under the MMAs at head dim 128, so
    both GPUs are tensor-bound (the FA4 paper's B300 gain at hd128 is not reproduced). B300 runs
    every exp on the MUFU (no emulation on cc 10.3), B200 18.75 % of them on the FMA pipe."""
    import dataclasses
    b200 = pm.hardware("B200")
    b300 = dataclasses.replace(pm.hardware("B300"),
                               tensor_sustained_fraction=b200.tensor_sustained_fraction)
    fast, slow = est(b300), est(b200)
    assert fast.time_s <= slow.time_s * 1.001
    # every exp on B300's doubled MUFU; B200 emulates 18.75 % of them at hd128 (2-CTA, no mask:
    # freq 10 from fragment 1, att.e2e_emulated_fraction(128, 10, 1))
    from perfmodel.ops.attention import op as att
    kept = 1.0 - att.e2e_emulated_fraction(128, 10, 1)
    assert fast.resource_time_s["xu"] == pytest.approx(
        slow.resource_time_s["xu"] / (2.0 * kept), rel=1e-6)


def test_b200_backward_is_shared_memory_or_tensor_bound():
    """FA4: per tile SMEM 3328 cycles vs MMA 2560; 2-CTA mode (its default) cuts SMEM to 2688, so
    shared memory and the tensor pipe end up balanced (tensor at its sustained rate)."""
    e = est("B200", direction="bwd")
    assert e.bound in ("smem", "tensor:bf16")
    t = e.resource_time_s
    assert 0.8 < t["smem"] / t["tensor:bf16"] < 1.2


def test_decode_reads_the_kv_cache_at_hbm_speed():
    e = est("H100-SXM", batch=64, seq_q=1, seq_kv=8192, kv_heads=8)
    assert e.bound == "hbm"
    assert e.hbm_bytes == pytest.approx(64 * 8 * 8192 * 256 * 2, rel=0.02)


def test_fused_dropout_costs_more_than_two_percent():
    plain, drop = est("H100-SXM"), est("H100-SXM", dropout_p=0.1)
    assert drop.time_s > 1.02 * plain.time_s
    assert drop.resource_time_s["fma_heavy"] > 0  # Philox IMAD.WIDE


def test_precomputed_mask_reads_it_from_hbm():
    fused = est("H100-SXM", dropout_p=0.1)
    pre = est("H100-SXM", dropout_p=0.1, dropout_rng="precomputed")
    assert pre.hbm_bytes > fused.hbm_bytes + 4 * 32 * 8192 * 8192 * 0.99
    assert "fma_heavy" not in pre.resource_time_s


def test_gqa_reads_kv_once_per_kv_head():
    mha = est("H100-SXM", batch=8, seq_q=1, seq_kv=4096)
    gqa = est("H100-SXM", batch=8, seq_q=1, seq_kv=4096, kv_heads=4)
    assert gqa.hbm_bytes < mha.hbm_bytes / 6


def test_sliding_window_skips_far_tiles():
    full = est("H100-SXM", causal=True)
    window = est("H100-SXM", causal=True, window=1024)
    assert window.time_s < 0.3 * full.time_s


@pytest.mark.parametrize("kernel, hw", [("fa3", "B200"), ("fa4", "H100-SXM"), ("fa4", "A100-SXM")])
def test_kernel_family_must_match_the_architecture(kernel, hw):
    with pytest.raises(pm.InputError, match=f"'{kernel}' does not run on"):
        est(hw, kernel=kernel)


def test_fa3_beats_fa2_on_hopper():
    assert est("H100-SXM", kernel="fa3").time_s < 0.7 * est("H100-SXM", kernel="fa2").time_s


def test_mla_latent_kv_is_read_once():
    e = est("H100-SXM", batch=128, heads=16, kv_heads=1, seq_q=1, seq_kv=4096, head_dim=576,
            head_dim_v=512, shared_kv=True, causal=True)
    assert e.hbm_bytes == pytest.approx(128 * 4096 * 576 * 2, rel=0.02)


def test_backward_runs_preprocess_main_and_postprocess_kernels():
    """FA2/FA3 backward = dot(dO, O) preprocess + main + dQ-convert postprocess. The two small
    kernels stream tokens·d bytes, so at a fixed token count their time is the same at every
    sequence length while the main kernel's grows with it."""
    def parts(seq):
        op = pm.ops.Attention(batch=16384 // seq, heads=16, seq_q=seq, head_dim=128,
                              dtype="fp16", direction="bwd", kernel="fa3")
        e = pm.predict_op(op, "H100-SXM")
        return [p["part"] for p in e.details["parts"][::2]], e.time_s, op.demand(
            pm.hardware("H100-SXM"))

    names, t_short, d_short = parts(512)
    assert names[0].startswith("bwd preprocess") and names[1].startswith("bwd postprocess")
    _, t_long, d_long = parts(8192)
    side = [pm.engine.estimate(d, pm.hardware("H100-SXM")).time_s
            for d in (d_short.sequence[0], d_short.sequence[2])]
    side_long = [pm.engine.estimate(d, pm.hardware("H100-SXM")).time_s
                 for d in (d_long.sequence[0], d_long.sequence[2])]
    assert side == pytest.approx(side_long, rel=0.05)
    assert sum(side) / t_short > 5 * sum(side_long) / t_long  # matters at short sequences


def _work(hw, **kw):
    return pm.ops.Attention(**{**FWD, **kw}).demand(pm.hardware(hw)).work


def test_fp8_probability_packs_go_to_the_spec_s_convert_pipe():
    """P → E4M3 (cvt…e4m3x2, two scores per instruction): on Hopper the XU beside the exps, on
    Blackwell the ALU (isa.fp8_convert_pipe)."""
    scores = _work("H100-SXM", dtype="fp16", kernel="fa3")["xu"]  # one exp per score
    assert _work("H100-SXM", dtype="fp8", kernel="fa3")["xu"] == pytest.approx(1.5 * scores)
    b16, b8 = _work("B200", kernel="cudnn", causal=True), _work("B200", dtype="fp8",
                                                                kernel="cudnn", causal=True)
    assert pm.hardware("B200").fp8_convert_pipe == "alu"
    # FP8 emulates a quarter of its unmasked exps (cuDNN's FP8 pattern; its key tile is wider,
    # so fewer scores are masked) and converts P on the ALU
    assert 0.74 < b8["xu"] / b16["xu"] < 0.80
    assert b8["alu"] > b16["alu"] + 0.45 * b16["xu"]


@pytest.mark.parametrize("kernel, extra, read_factor", [("fa2", "bwd GQA: sum dK, dV", 8),
                                                        ("fa3", "bwd postprocess: dK, dV", 2)])
def test_gqa_backward_reduces_dk_dv_over_the_query_head_group(kernel, extra, read_factor):
    """With 8 query heads per KV head, FA2 writes dK/dV per query head and a reduction sums each
    group (reads 8x the compact bytes); FA3-style kernels accumulate in FP32 and a postprocess
    converts (reads 2x in bf16 terms). MHA needs neither kernel."""
    kw = dict(batch=1, heads=64, seq_q=4096, head_dim=128, dtype="bf16", direction="bwd",
              kernel=kernel)
    hw = pm.hardware("H100-SXM")
    gqa = pm.ops.Attention(kv_heads=8, **kw).demand(hw)
    assert len(gqa.sequence) == 4 and gqa.sequence[3].details["part"].startswith(extra)
    compact = 2 * 4096 * 8 * 128 * 2  # dK + dV of the 8 KV heads, bf16
    assert gqa.sequence[3].hbm_bytes == pytest.approx((read_factor + 1) * compact)
    assert len(pm.ops.Attention(kv_heads=64, **kw).demand(hw).sequence) == 3


def test_backward_at_head_dim_64_is_slower_per_flop_than_at_128():
    """Same FLOP (heads x head_dim fixed): hd64 has twice the scores, so twice the softmax work per
    MMA FLOP. FA3's dQ atomics run on their own warp, beside the MMA+softmax pipeline, so they do
    not hide that work (measured FA3 paper rows: 474 vs 561 TFLOPS at 16k)."""
    def t(hd):
        return pm.predict_op(pm.ops.Attention(batch=1, heads=2048 // hd, seq_q=16384, head_dim=hd,
                                              dtype="fp16", direction="bwd", kernel="fa3"),
                             "H100-SXM").time_s
    assert t(64) > 1.05 * t(128)  # measured 1.18; the model without the third stage gave 1.00


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_forward_rescales_the_output_once_per_key_tile(head_dim):
    """Online softmax multiplies the bm x dv accumulator at every key tile: dv / bn FP32 ops per
    score on top of the per-score softmax work (FA3); FA4 rescales conditionally and skips it."""
    from perfmodel.ops.attention import op as att
    from perfmodel.ops.attention import tiles
    hw = pm.hardware("H100-SXM")
    op = pm.ops.Attention(batch=1, heads=8, seq_q=4096, head_dim=head_dim, dtype="bf16",
                          kernel="fa3")
    work = op.demand(hw).work
    bn = tiles.kv_tile_width(hw, 128, 128, head_dim, head_dim, 2, False)
    tile_scores = work["xu"]  # one exp per computed score on Hopper
    assert work["fma"] / tile_scores == pytest.approx(
        att.SOFTMAX_FMA_PER_SCORE["fwd"] + head_dim / bn, rel=1e-9)
    b200 = pm.hardware("B200")
    fa4 = pm.ops.Attention(batch=1, heads=8, seq_q=4096, head_dim=head_dim, dtype="bf16",
                           kernel="fa4").demand(b200).work
    # flash-attn-4 4.0.0b40 select_ex2_emu, MHA without a mask: head dim 64 freq 16 from
    # fragment 1 (1-CTA), head dim 128 freq 10 from fragment 1 (2-CTA); above 128 the model's
    # narrower key tile leaves the row no emulating fragment
    share = {64: att.e2e_emulated_fraction(128, 16, 1),
             128: att.e2e_emulated_fraction(128, 10, 1)}.get(head_dim, 0.0)
    scores = fa4["xu"] / (1 - share)
    assert fa4["fma"] == pytest.approx(att.SOFTMAX_FMA_PER_SCORE["fwd"] * scores
                                       + share * scores * att.FA4_EMULATED_EXP_FMA, rel=1e-9)


@pytest.mark.parametrize("head_dim, kv_heads, causal, share", [
    (128, 8, False, 0.1875),    # 2-CTA, no mask: freq 10 from fragment 1 (4 of 10 in 2 of 4)
    (128, 1, False, 0.1875),    # packed GQA, no mask, head dim > 64: the tuned freq, 10
    (128, 1, True, 0.125),      # causal: freq 16 from fragment 1, masked tiles emulating too
    (256, 8, False, 0.0),       # head dim > 128 without 2-CTA: MUFU only
])
def test_fa4_emulates_the_exps_its_source_says(head_dim, kv_heads, causal, share):
    """flash-attn-4 4.0.0b40: softmax.py:516-535 apply_exp2_convert (in fragments start .. last
    - 1 of a row, the pairs k with k mod freq >= freq - 4), config.py:540-573 select_ex2_emu
    (freq, start by 2-CTA, causal, head dim, packed GQA), flash_fwd_sm100.py:3036-3041 (the
    schedule applies whatever the mask: masked tiles emulate too)."""
    from perfmodel.ops.attention import op as att
    hw = pm.hardware("B200")
    op = pm.ops.Attention(batch=1, heads=8, kv_heads=kv_heads, seq_q=8192, head_dim=head_dim,
                          dtype="bf16", kernel="fa4", causal=causal)
    work = op.demand(hw).work
    t = att.tiling(hw, "fa4", "fa4", "fwd", batch=1, heads=8, kv_heads=kv_heads, seq_q=8192,
                   seq_kv=8192, d=head_dim, dv=head_dim, element_bytes=2, causal=causal,
                   window=None, dropout=False, v_transposed=False, shared_kv=False)
    masked = op._masked_scores(t)
    # every computed score takes one exp, on MUFU or emulated
    emulated = t.tile_scores - work["xu"]
    assert emulated == pytest.approx(share * t.tile_scores, rel=1e-9, abs=1e-6)
    assert masked > 0 or not causal


@pytest.mark.parametrize("hw", ["H100-SXM", "B200"])
def test_masked_tiles_never_exceed_the_tiles_computed(hw):
    """Causal with 1 key and 2048 queries (bottom-right aligned): only the last query row sees a
    key; the mask work (and FA4's unemulated share) is bounded by the one tile computed per head
    (found by the fuzz test: negative FMA work on B200)."""
    op = pm.ops.Attention(batch=1, heads=32, kv_heads=8, seq_q=2048, seq_kv=1, head_dim=128,
                          dtype="bf16", causal=True)
    work = op.demand(pm.hardware(hw)).work
    assert all(w >= 0 for w in work.values())
    assert pm.predict_op(op, hw).time_s > 0


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


DECODE = dict(batch=64, seq_q=1, seq_kv=8192, kv_heads=8)


@pytest.mark.parametrize("hw", ["H100-SXM", "B200", "A100-SXM"])
def test_kv_dtype_none_or_the_compute_dtype_is_the_attention_before_it(hw):
    for kw in (DECODE, dict(causal=True), dict(direction="fwd+bwd")):
        plain = est(hw, **kw)
        for same in (None, "bf16"):
            e = est(hw, kv_dtype=same, **kw)
            assert (e.time_s, e.hbm_bytes, e.resource_time_s) == \
                (plain.time_s, plain.hbm_bytes, plain.resource_time_s)
    assert "kv_dtype" not in pm.ops.Attention(**FWD).to_dict()


@pytest.mark.parametrize("hw", ["H100-SXM", "B200"])
def test_fp8_kv_cache_halves_the_kv_bytes_of_decode(hw):
    bf16, fp8 = est(hw, **DECODE), est(hw, kv_dtype="fp8", **DECODE)
    kv = 64 * 8 * 8192 * (128 + 128) * 2.0   # K and V in BF16
    q_o_lse = bf16.hbm_bytes - kv
    assert q_o_lse < 0.01 * kv
    assert fp8.hbm_bytes == pytest.approx(q_o_lse + kv / 2, rel=1e-12)
    assert fp8.flop == bf16.flop
    # still memory-bound on H100, and much faster: not twice, since FA3 (H100's default
    # family) decodes on its 128-row tile (tiles.FULL_TILE_DECODE), whose padded rows' MMAs and
    # the conversion overlap the halved reads less
    if hw == "H100-SXM":
        assert fp8.bound == "hbm" and 1.45 < bf16.time_s / fp8.time_s < 2.0
    nvfp4 = est(hw, kv_dtype="nvfp4", **DECODE)
    assert nvfp4.hbm_bytes == pytest.approx(q_o_lse + kv / 4 * 1.125, rel=1e-12)


def test_fp8_kv_with_bf16_queries_converts_each_loaded_element_on_the_cuda_cores(h100):
    """FlashInfer's fast_dequant_f8f16x4: 2 ALU ops and half an HMUL2 per element."""
    a = pm.ops.Attention(**{**FWD, **DECODE})
    b = pm.ops.Attention(**{**FWD, **DECODE, "kv_dtype": "fp8"})
    da, db = a.demand(h100), b.demand(h100)
    loaded = 64 * 8 * 8192 * 256  # each KV head's tile loaded once (the whole query group packed)
    assert db.work["alu"] - da.work["alu"] == pytest.approx(2.0 * loaded)
    assert db.work["fma"] - da.work["fma"] == pytest.approx(0.5 * loaded)
    assert db.work["smem"] - da.work["smem"] == pytest.approx(3.0 * loaded)  # read 1 B, write 2
    assert db.launch.bytes_in_flight_per_cta == da.launch.bytes_in_flight_per_cta / 2
    # FP8 K/V with FP8 MMAs converts nothing
    fp8 = {**FWD, **DECODE, "dtype": "fp8"}
    c = pm.ops.Attention(**fp8, kv_dtype="fp8_e4m3")
    assert c.demand(h100).work == pm.ops.Attention(**fp8).demand(h100).work


@pytest.mark.parametrize("kw, message", [
    (dict(kv_dtype="fp16"), "stored in dtype or narrower"),
    (dict(dtype="fp8", kv_dtype="bf16"), "stored in dtype or narrower"),
    (dict(kv_dtype="fp8", direction="bwd"), "backward needs K and V in dtype"),
    (dict(kv_dtype="int8"), "expected a dtype"),
])
def test_bad_kv_dtypes_are_input_errors(kw, message):
    with pytest.raises(pm.InputError, match=message):
        pm.ops.Attention(**{**FWD, **kw})


# ---- FA2's mma.sync, cuDNN's own Blackwell design, per-pass overlaps ----------------------------


def test_fa2_on_b200_is_not_priced_at_the_tcgen05_rate():
    """FA2 issues mma.sync, which sm_100 runs on its legacy path at its own declared rate
    (isa.mma_sync_flop_per_sm_per_clk), not tcgen05's: B200 gains no more over H100 than its SMs
    times its SM clock give."""
    shape = dict(batch=8, heads=16, seq_q=8192, head_dim=128, dtype="bf16", kernel="fa2")
    h, b = pm.hardware("H100-SXM"), pm.hardware("B200")
    speedup = est(h, **shape).time_s / est(b, **shape).time_s
    clocks = max(b.sustained_sm_clock_hz / h.sustained_sm_clock_hz,
                 b.max_sm_clock_hz / h.max_sm_clock_hz)
    assert speedup <= b.sm_count / h.sm_count * clocks * 1.01
    assert b.mma_sync_flop_per_sm_per_clk["bf16"] < b.tensor_flop_per_sm_per_clk["bf16"] / 2
    # and FA4-class kernels on B200 are far faster than FA2 there
    assert est(b, **{**shape, "kernel": "cudnn"}).time_s < 0.5 * est(b, **shape).time_s


def test_fa2_mma_sync_work_follows_the_declared_rate():
    """FA2's tensor work is its MMA FLOP at (native rate / (mma.sync rate × FA2's share)); on an
    mma.sync GPU (A100) it is the MMA FLOP itself."""
    from perfmodel.ops.attention import op as attention
    shape = dict(FWD, kernel="fa2")
    a100 = pm.ops.Attention(**shape).demand(pm.hardware("A100-SXM"))
    h = pm.hardware("H100-SXM")
    hop = pm.ops.Attention(**shape).demand(h)  # the same FA2 tiles as on A100 at head dim 128
    ratio = h.tensor_flop_per_sm_per_clk["bf16"] / (
        h.mma_sync_flop_per_sm_per_clk["bf16"] * attention.MMA_SYNC_FRACTION)
    assert hop.work["tensor:bf16"] == pytest.approx(ratio * a100.work["tensor:bf16"], rel=1e-9)


def test_fa2_on_tcgen05_takes_its_own_mma_sync_share():
    """On tcgen05 GPUs FA2's mma.sync share is its own fitted one (FA2's B200 rows), not
    Hopper's: the tensor work differs by exactly the ratio of the two shares."""
    from perfmodel.ops.attention import op as attention
    shape = dict(FWD, kernel="fa2")
    h, b = pm.hardware("H100-SXM"), pm.hardware("B200")
    hop, bw = (pm.ops.Attention(**shape).demand(g) for g in (h, b))
    per_flop = lambda d, g: d.work["tensor:bf16"] * g.mma_sync_flop_per_sm_per_clk["bf16"] \
        / g.tensor_flop_per_sm_per_clk["bf16"]  # noqa: E731
    assert per_flop(bw, b) / per_flop(hop, h) == pytest.approx(
        attention.MMA_SYNC_FRACTION / attention.MMA_SYNC_FRACTION_TCGEN05, rel=1e-9)
    assert attention.MMA_SYNC_FRACTION_TCGEN05 < attention.MMA_SYNC_FRACTION


def test_cudnn_on_tcgen05_has_its_own_design_not_fa4_s():
    """cuDNN on Blackwell: FA4's tile shape, but its own exp emulation (a quarter of the exps of
    unmasked 16-bit attention, none with a causal mask; FP8 always) and its own overlaps."""
    from perfmodel.ops.attention import op as attention
    b = pm.hardware("B200")
    dense = pm.ops.Attention(**{**FWD, "kernel": "cudnn"}).demand(b)
    causal = pm.ops.Attention(**{**FWD, "kernel": "cudnn", "causal": True}).demand(b)
    scores = dense.work["tensor:bf16"] / (4 * 128)
    assert dense.work["xu"] == pytest.approx(0.75 * scores, rel=0.01)
    assert causal.details["tile_pairs"] < dense.details["tile_pairs"]
    assert causal.work["xu"] == pytest.approx(causal.work["tensor:bf16"] / 512, rel=0.01)
    # its own fitted overlap (today at the range's bound, as FA4's: both headlines need it)
    assert dense.overlap.efficiency == attention.DESIGN_OVERLAP[("cudnn_tcgen05", "fwd")]
    assert ("cudnn_tcgen05", "fwd") in attention.DESIGN_OVERLAP
    assert "cudnn_tcgen05" not in attention.SOFTMAX_OVERLAP
    # B300's doubled MUFU keeps every exp there (cuDNN emulates on cc 10.0 only)
    b300 = pm.ops.Attention(**{**FWD, "kernel": "cudnn"}).demand(pm.hardware("B300"))
    assert b300.work["xu"] == pytest.approx(scores, rel=0.01)


@pytest.mark.parametrize("hw, kernel, design", [
    ("H100-SXM", "fa2", "fa2"), ("H100-SXM", "fa3", "fa3"), ("H100-SXM", "cudnn", "cudnn"),
    ("B200", "cudnn", "cudnn_tcgen05"), ("B200", "fa4", "cudnn_tcgen05"),
    ("A100-SXM", "fa2", "fa2")])
def test_a_backward_never_uses_a_forward_fitted_overlap(hw, kernel, design):
    """Each design's backward main kernel takes its own backward overlap (FA4's, unmeasured, the
    tcgen05 backward fitted on cuDNN's Blackwell rows), never the forward's."""
    from perfmodel.ops.attention import op as attention
    bwd = pm.ops.Attention(**{**FWD, "kernel": kernel, "direction": "bwd"}).demand(
        pm.hardware(hw))
    main = bwd.sequence[1]
    effs = set()

    def walk(o):  # the softmax overlaps, not FA2's own operand-load overlap inside its MMA group
        effs.add(o.efficiency)
        if hasattr(o.a, "efficiency") and o.a.b != ("smem",):
            walk(o.a)
    walk(main.overlap)
    assert effs == {attention.DESIGN_OVERLAP[(design, "bwd")]}
    forward = attention.SOFTMAX_OVERLAP.get(kernel, attention.DESIGN_OVERLAP.get((design, "fwd")))
    assert forward not in effs


def test_design_overlaps_come_from_fitted_yaml():
    from perfmodel import fitted
    from perfmodel.ops.attention import op as attention
    for (design, direction), value in attention.DESIGN_OVERLAP.items():
        assert value == fitted.value(f"attention.softmax_overlap.{design}.{direction}")
        assert 0.0 <= value <= 1.0


def test_dropout_p_is_pytorchs_name_and_dropout_its_alias():
    """dropout_p (F.scaled_dot_product_attention's and flash_attn_func's name) is the parameter;
    `dropout`, its earlier name, gives the same op; both at once are refused."""
    shape = dict(batch=2, heads=8, seq_q=1024, head_dim=64, dtype="bf16")
    new, old = pm.ops.op("attention", dropout_p=0.1, **shape), \
        pm.ops.op("attention", dropout=0.1, **shape)
    assert new == old and old.to_dict()["dropout_p"] == 0.1 and "dropout" not in old.to_dict()
    with pytest.raises(pm.InputError, match="dropout: the same parameter as dropout_p"):
        pm.ops.op("attention", dropout=0.1, dropout_p=0.1, **shape)


@pytest.mark.parametrize("options, rng_needed", [
    (dict(dropout_mask="bits"), "precomputed"),
    (dict(dropout_generator="philox4x32-10"), "fused"),
    (dict(dropout_bits_per_score=128), "fused"),
    (dict(dropout_rng="precomputed"), None)])
def test_dropout_options_warn_where_they_change_nothing(options, rng_needed):
    """Each dropout option warns without dropout, and a mode-specific one under the other RNG
    mode; the warned-of option leaves the time as it is, the unwarned one moves it."""
    hw = pm.hardware("H100-SXM")
    shape = dict(batch=2, heads=8, seq_q=1024, head_dim=64, dtype="bf16")

    def run(**kw):
        o = pm.ops.op("attention", **shape, **kw)
        return pm.predict_op(o, hw).time_s, [k for k, _ in o.warnings()]
    key = next(iter(options))
    assert run() == (run()[0], [])
    off, warned = run(**options)
    assert warned == [key] and off == run()[0]
    if rng_needed is not None:
        other = "fused" if rng_needed == "precomputed" else "precomputed"
        base, _ = run(dropout_p=0.1, dropout_rng=other)
        ignored, warned = run(dropout_p=0.1, dropout_rng=other, **options)
        assert warned == [key] and ignored == base
        base, _ = run(dropout_p=0.1, dropout_rng=rng_needed)
        used, warned = run(dropout_p=0.1, dropout_rng=rng_needed, **options)
        assert warned == [] and used != base
