"""Fused-dropout cost mechanism (ops/rng.py fused_dropout_work, attention's dropout terms), the
rng_in_gemm schedule, the judged GB200/GB10 rows and the paper's setup (docs/studies.md §1.6)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import perfmodel as pm
from perfmodel.studies.dropout import (DropoutConfig, dropout_terms, evaluate, judged_overheads,
                                       paper_setup, rng_in_gemm_demand, speedups)

SHAPE = dict(batch=4, heads=16, seq_q=8192, head_dim=64, dtype="bf16")


def _overhead(hw, direction, **kw):
    base = pm.predict_op(pm.ops.op("attention", direction=direction, **SHAPE, **kw), hw)
    drop = pm.predict_op(pm.ops.op("attention", direction=direction, dropout_p=0.1, **SHAPE, **kw),
                         hw)
    return drop.time_s / base.time_s - 1.0


def test_fused_dropout_costs_more_on_blackwell_forward_than_on_hopper():
    """FA4's softmax warpgroups are the forward's critical path on Blackwell (MUFU/issue, the
    MMAs twice as fast per SM as Hopper's): Philox in their issue slots shows; on Hopper it
    hides more under the slower MMAs."""
    assert _overhead("B200", "fwd") > _overhead("H100-SXM", "fwd") + 0.05
    assert _overhead("GB200", "fwd") > _overhead("H200-SXM", "fwd") + 0.05


def test_backward_pays_for_the_regenerated_mask():
    hw = pm.hardware("B200")
    op = pm.ops.op("attention", direction="fwd+bwd", dropout_p=0.1, **SHAPE)
    d = pm.engine.resolve(op.demand(hw), hw)
    fwd, bwd = (p.sequence[1] if p.sequence else p for p in d.sequence)
    tf, tb = fwd.details["dropout"], bwd.details["dropout"]
    # the backward regenerates every random number the forward drew, and applies the mask twice
    assert tb["philox_calls"] == pytest.approx(tf["philox_calls"])
    assert tb["mask_alu"] == pytest.approx(2 * tf["mask_alu"])
    assert _overhead("B200", "bwd") > 0.05
    # the terms are visible, with their time on the busiest SM
    terms = dropout_terms(pm.ops.op("attention", direction="bwd", dropout_p=0.1, **SHAPE), hw)
    assert terms["issue_time_s"] > 0 and terms["fma_heavy_time_s"] > 0


def test_imad_wide_takes_fma_lanes_and_issue_slots():
    hw = pm.hardware("H100-SXM")
    base = pm.ops.op("attention", **SHAPE).demand(hw)
    drop = pm.ops.op("attention", dropout_p=0.1, **SHAPE).demand(hw)
    t = drop.details["dropout"]
    assert drop.work["fma_heavy"] == pytest.approx(t["philox_imad_wide"])
    assert drop.work["fma"] - base.work["fma"] == pytest.approx(t["philox_imad_wide"])
    assert drop.work["issue"] > base.work["issue"]


def test_too_few_chains_in_flight_make_philox_latency_bound():
    from perfmodel.ops.rng import fused_dropout_work
    kw = dict(scores=1e9, bits_per_score=16, rounds=7, direction="fwd", lop3_fold=True,
              precomputed_keys=True, register_budget=64, live_registers=60, scores_per_thread=64)
    few = fused_dropout_work(rng_warps_per_sm=1, **kw)[1]
    many = fused_dropout_work(rng_warps_per_sm=16, **{**kw, "register_budget": 200})[1]
    assert few["chain_issue_floor"] > few["rng_issue"]      # one warp, one chain: stalls
    assert many["chain_issue_floor"] < many["rng_issue"]    # enough chains: issue-bound


def test_rng_in_gemm_beats_two_streams_when_the_gemm_fills_the_sms():
    r = evaluate("llama3-8b", "H100-SXM", seq=4096, dtype="fp8")
    assert set(r) == {"sequential", "fused", "overlap", "rng_in_gemm"}
    assert r["rng_in_gemm"].time_s < r["overlap"].variants["streams_s"]
    assert r["rng_in_gemm"].time_s <= r["sequential"].time_s
    assert speedups(r)["rng_in_gemm_vs_overlap"] > 1.0


def test_rng_in_gemm_demand_adds_philox_to_the_gemms_own_kernel():
    hw = pm.hardware("H100-SXM")
    g = pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="fp8")
    alone = pm.engine.resolve(g.demand(hw), hw)
    d = rng_in_gemm_demand(g, 1 << 28, DropoutConfig(), hw)
    assert d.launch == alone.launch
    assert d.work["issue"] > alone.work.get("issue", 0.0)
    assert d.hbm_bytes > alone.hbm_bytes and "rng_in_gemm" in d.details


def test_judged_rows_are_all_priced_with_their_terms():
    rows = judged_overheads()
    assert len(rows) == 30
    assert {r["hardware"] for r in rows} == {"GB200", "GB10"}
    assert all("philox_calls" in r["terms"] for r in rows)
    gb200 = {r["id"]: r for r in rows if r["hardware"] == "GB200"}
    # FA4's forward at head dim 128 lands within 6 points of the published 17.6-33.3 % range
    # (inside it while FA4's fitted overlap was partial; at its bound, 1.0, since GB200 runs at
    # B200's own sustained clock, the Philox work hides more under the MMAs: a known gap)
    fwd = gb200["fa4pr2597-fwd-d128"]
    assert 0 < fwd["predicted_pct"] < fwd["published_range_pct"][0]
    assert fwd["outside_pp"] < 6.0


def test_paper_direction_needs_per_element_philox10():
    """1.26x / 1.22x appear only with one Philox4x32-10 call per decision at long sequences
    (the RNG a large share of the block) and the RNG inside the GEMMs; FlashAttention's 8-bit
    draws leave little to hide."""
    rows = {(r["bits_per_element"], r["seq"]): r for r in paper_setup(seqs=(8192,))}
    per_element = rows[(128, 8192)]
    assert per_element["rng_in_gemm_vs_sequential"] > 1.2
    assert per_element["rng_in_gemm_vs_fused"] > 1.2
    assert rows[(8, 8192)]["rng_in_gemm_vs_sequential"] < 1.1


def test_gb10_spec_is_an_mma_sync_blackwell():
    hw = pm.hardware("dgx-spark")
    assert hw.name == "GB10" and hw.mma_instruction == "mma_sync" and hw.sm_count == 48
    est = pm.predict_op(pm.ops.op("attention", dropout_p=0.1, **SHAPE), hw)
    assert est.details["kernel"] == "fa2" and "dropout" in est.details


def test_dropout_bench_skips_without_a_gpu():
    here = Path(__file__).resolve().parents[2] / "validate"
    r = subprocess.run([sys.executable, str(here / "dropout_bench.py")], capture_output=True,
                       text=True, timeout=120, cwd=here)
    assert r.returncode == 0
