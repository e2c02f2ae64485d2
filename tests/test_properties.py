"""Property-based checks (hypothesis) of the engine and the GEMM model."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel.demand import Demand, LaunchShape, Overlap
from perfmodel.engine import estimate, occupancy

H100 = pm.hardware("H100-SXM")
B200 = pm.hardware("B200")
dims = st.integers(min_value=1, max_value=20000)
gpus = st.sampled_from([H100, B200])


@given(m=dims, n=dims, k=dims, hw=gpus, dtype=st.sampled_from(["bf16", "fp8", "tf32"]))
def test_gemm_never_beats_its_roofline_and_reports_true_flop(m, n, k, hw, dtype):
    g = pm.ops.Gemm(m=m, n=n, k=k, dtype=dtype)
    est = pm.predict_op(g, hw)
    assert est.flop == 2.0 * m * n * k
    assert est.time_s >= est.roofline_time_s
    assert est.time_s >= hw.kernel_launch_s


@given(m=dims, n=dims, k=st.integers(1, 10000), hw=gpus)
def test_gemm_time_grows_with_k(m, n, k, hw):
    a = pm.predict_op(pm.ops.Gemm(m=m, n=n, k=k, dtype="bf16"), hw).time_s
    b = pm.predict_op(pm.ops.Gemm(m=m, n=n, k=2 * k, dtype="bf16"), hw).time_s
    assert b >= a * (1 - 1e-9)


@given(m=dims, n=dims, k=st.integers(min_value=128, max_value=20000))
def test_fp8_is_never_slower_than_bf16(m, n, k):
    # k from one FP8 k-tile (128): below it FP8 pads K to 128 where BF16 pads to 64, and the
    # padded MMA work, at FP8's power-limited rate (engine.tensor_power_ratio), can cost more
    bf16 = pm.predict_op(pm.ops.Gemm(m=m, n=n, k=k, dtype="bf16"), H100).time_s
    fp8 = pm.predict_op(pm.ops.Gemm(m=m, n=n, k=k, dtype="fp8"), H100).time_s
    assert fp8 <= bf16 * 1.0001


work_values = st.floats(min_value=0, max_value=1e13, allow_nan=False)


@given(tensor=work_values, fma=work_values, hbm=work_values, l2=work_values,
       ctas=st.integers(1, 100000), threads=st.sampled_from([32, 128, 256, 512, 1024]),
       regs=st.integers(16, 255), smem=st.integers(0, 200_000))
def test_engine_time_covers_every_resource_and_floors(tensor, fma, hbm, l2, ctas, threads,
                                                      regs, smem):
    d = Demand(work={"tensor:bf16": tensor, "fma": fma, "hbm": hbm, "l2": l2},
               launch=LaunchShape(ctas, threads, regs, smem), flop=tensor, hbm_bytes=hbm)
    est = estimate(d, H100, "pipes")
    roof = estimate(d, H100, "roofline")
    floors = est.resource_time_s.get("latency", 0) + est.resource_time_s["launch"]
    busy = max((t for r, t in est.resource_time_s.items() if r not in ("latency", "launch")),
               default=0.0)
    assert math.isclose(est.time_s, busy + floors, rel_tol=1e-12)
    assert est.time_s >= roof.time_s
    per_sm, _ = occupancy(d.launch, H100)
    assert 1 <= per_sm <= H100.max_ctas_per_sm


@given(ctas=st.integers(1, 5000))
def test_wave_quantization_charges_partial_waves_fully(ctas):
    """Same per-CTA work: time depends on ceil(ctas / SMs), not on ctas / SMs."""
    per_cta = 1e9
    d = Demand(work={"tensor:bf16": per_cta * ctas},
               launch=LaunchShape(ctas, 384, 168, 200_000), flop=per_cta * ctas)
    t = estimate(d, H100).resource_time_s["tensor:bf16"]
    one = estimate(Demand(work={"tensor:bf16": per_cta}, launch=LaunchShape(1, 384, 168, 200_000),
                          flop=per_cta), H100).resource_time_s["tensor:bf16"]
    assert math.isclose(t, one * math.ceil(ctas / H100.sm_count), rel_tol=1e-9)


times_s = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(ta=times_s, tb=times_s, lo=st.floats(0.0, 1.0), hi=st.floats(0.0, 1.0))
def test_overlap_lies_between_max_and_sum_and_grows_as_efficiency_falls(ta, tb, lo, hi):
    lo, hi = min(lo, hi), max(lo, hi)
    times = {"tensor:bf16": ta, "xu": tb}
    joint = [Overlap(("tensor:bf16",), ("xu",), e).time_s(times) for e in (lo, hi)]
    for t in joint:
        assert max(ta, tb) * (1 - 1e-12) <= t <= (ta + tb) * (1 + 1e-12)
    assert joint[0] >= joint[1] * (1 - 1e-12)  # less efficient overlap never runs faster
    assert Overlap(("tensor:bf16",), ("xu",), 0.0).time_s(times) == \
        pytest.approx(ta + tb, rel=1e-12, abs=1e-15)
    assert Overlap(("tensor:bf16",), ("xu",), 1.0).time_s(times) == max(ta, tb)


def test_overlap_hides_the_smaller_group_better_the_more_slack_there_is():
    """Power mean: the exposed fraction of the smaller group falls as the bigger one grows."""
    ov = Overlap(("tensor:bf16",), ("xu",), 0.25)
    exposed = [(ov.time_s({"tensor:bf16": big, "xu": 1.0}) - big) / 1.0
               for big in (1.0, 2.0, 4.0, 8.0)]
    assert all(a > b for a, b in zip(exposed, exposed[1:]))


# ---- attention ------------------------------------------------------------------------------
attn_gpus = st.sampled_from([H100, B200, pm.hardware("A100-SXM")])
attn_shapes = dict(batch=st.integers(1, 16), heads=st.sampled_from([8, 16, 32, 64]),
                   seq_q=st.integers(17, 16384), head_dim=st.sampled_from([64, 96, 128, 256]))


def attention(hw, **kw):
    return pm.predict_op(pm.ops.Attention(dtype="bf16", **kw), hw)


@given(hw=attn_gpus, direction=st.sampled_from(["fwd", "bwd"]), **attn_shapes)
def test_attention_reports_the_flash_flop_count_and_never_beats_its_roofline(
        hw, direction, batch, heads, seq_q, head_dim):
    est = attention(hw, batch=batch, heads=heads, seq_q=seq_q, head_dim=head_dim,
                    direction=direction)
    fwd_flop = 4.0 * batch * heads * seq_q * seq_q * head_dim
    assert est.flop == pytest.approx(fwd_flop * (1.0 if direction == "fwd" else 2.5))
    assert est.time_s >= est.roofline_time_s


@given(hw=attn_gpus, causal=st.booleans(), **attn_shapes)
def test_attention_time_grows_with_sequence_length(hw, causal, batch, heads, seq_q, head_dim):
    """Whole key tiles more never cost less. (Any longer length need not: one that fills the
    last key tile drops the partial tile's seqlen_k mask, as FlashAttention's even-length path
    does, and can be a little faster.)"""
    kw = dict(batch=batch, heads=heads, head_dim=head_dim, causal=causal)
    shorter = attention(hw, seq_q=seq_q, **kw)
    key_tile = shorter.details["key_tile"]
    extra = -(-max(1, seq_q // 3) // key_tile) * key_tile
    longer = attention(hw, seq_q=seq_q + extra, **kw)
    assert longer.time_s >= shorter.time_s * (1 - 1e-9)


@given(hw=attn_gpus, direction=st.sampled_from(["fwd", "bwd"]), **attn_shapes)
def test_masks_and_shared_kv_heads_never_cost_more(hw, direction, batch, heads, seq_q, head_dim):
    """Causal ≤ full, a sliding window ≤ causal, GQA ≤ MHA (within 2 % on FA4, whose exp
    emulation schedule changes with packed GQA): each only removes work. Causal may
    cost up to 5 % more below 1k tokens, or when no SM runs two CTAs: with few key tiles it skips
    little while its diagonal tiles add mask work (and on FA4 run all their exps on MUFU), and
    with one CTA per SM the full-length last query tile is the critical path either way."""
    kw = dict(batch=batch, heads=heads, seq_q=seq_q, head_dim=head_dim, direction=direction)
    full_est = attention(hw, **kw)
    full = full_est.time_s
    busiest = full_est.details.get("busiest_sm_ctas") or max(
        p.get("busiest_sm_ctas", 0) for p in full_est.details["parts"])
    causal = attention(hw, causal=True, **kw).time_s
    window = attention(hw, causal=True, window=max(1, seq_q // 4), **kw).time_s
    gqa = attention(hw, kv_heads=max(1, heads // 8), **kw).time_s
    assert causal <= full * (1 + 1e-9 if seq_q >= 1024 and busiest >= 2 else 1.05)
    assert window <= causal * (1 + 1e-9)
    if direction == "fwd":  # backward adds the GQA reduction / FP32 accumulator kernels
        # FA4 (tcgen05) packs GQA heads and then emulates exps at another frequency (flash-attn-4
        # 4.0.0b40 select_ex2_emu): work moves between the MUFU and FMA pipes, a few % either way
        slack = 1.02 if hw.mma_instruction == "tcgen05" else 1 + 1e-9
        assert gqa <= full * slack


@given(hw=attn_gpus, **attn_shapes)
def test_forward_plus_backward_is_the_two_passes_back_to_back(hw, batch, heads, seq_q, head_dim):
    kw = dict(batch=batch, heads=heads, seq_q=seq_q, head_dim=head_dim, causal=True)
    both = attention(hw, direction="fwd+bwd", **kw).time_s
    assert both == pytest.approx(attention(hw, direction="fwd", **kw).time_s
                                 + attention(hw, direction="bwd", **kw).time_s, rel=1e-9)
