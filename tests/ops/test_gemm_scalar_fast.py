"""The pruned scalar GEMM search (perfmodel.predict.gemm_estimate): what it skips cannot change
the pick. The pruned search gives the full search's Estimate bit for bit (every field by repr) on
random shapes of every GPU and dtype at both levels, split-K-heavy ones included; each lower
bound it prunes by stays below the time of every candidate it bounds; a twin tile is never
strictly faster than its tile where the search skips it; and the family facts go with
clear_cache."""
from __future__ import annotations

import importlib
import math

import pytest

import perfmodel as pm
from perfmodel.predict import SPLIT_BOUND, gemm_estimate
from tests.ops.gemm_cases import candidate_rows, engine_estimate, exact, random_gemms

# the module (perfmodel.predict is also the name of a function on the package)
gemm_scalar = importlib.import_module("perfmodel.predict")
family = gemm_scalar.family



def check_pruned_is_full(cases) -> int:
    """Pruned and full searches agree on every case; the number of split-K picks."""
    splits = 0
    for op, hw, level in cases:
        fast = gemm_estimate(op, hw, level)
        full = gemm_estimate(op, hw, level, prune=False)
        assert (fast is None) == (full is None), (op, hw.name, level)
        if fast is not None:
            assert exact(fast) == exact(full), (op, hw.name, level)
            splits += fast.details["split_k"] > 1
    return splits


def test_the_pruned_search_picks_what_the_full_search_picks():
    check_pruned_is_full(random_gemms(11, 300))


def test_and_where_split_k_and_near_ties_are_common():
    # the full search scans every split factor of every short tile (~100 candidates)
    assert check_pruned_is_full(random_gemms(12, 300, short=True)) > 30


def test_the_pruned_search_is_the_engine_where_split_k_wins():
    """The engine path on the same split-heavy shapes."""
    picked = 0
    for op, hw, level in random_gemms(13, 120, short=True):
        fast = gemm_estimate(op, hw, level)
        if fast is None:
            continue
        assert exact(fast) == exact(engine_estimate(op, hw, level)), (op, hw.name, level)
        picked += fast.details["split_k"] > 1
    assert picked > 10


@pytest.mark.slow
def test_the_pruned_search_picks_what_the_full_search_picks_on_thousands_of_shapes():
    check_pruned_is_full(random_gemms(14, 2000) + random_gemms(15, 2000, short=True))


def candidate_totals(op, hw):
    """Every candidate of the full kernel search (gemm_cases.candidate_rows) that is valid, with
    its MMA, L2 and HBM-rate terms and its time (predict._total)."""
    op = op.resolved(hw)
    fam = family(op, hw)
    if fam is None:
        return fam, []
    tiles = {t.i: t for t in fam.tiles}
    cands = candidate_rows(op, hw)
    out = []
    for i, split, valid, w_t, w_f, w_s, w_l2, w_h, ctas, kernels in cands:
        if not valid:
            continue
        t = tiles[i]
        busiest = math.ceil(ctas / fam.sms) + 0.0
        rate = min(fam.hbm_bw, min(ctas, t.sms_cps) * t.in_flight / fam.hbm_lat)
        t_t = busiest * (w_t / ctas) / fam.r_tensor * fam.power_ratio if fam.tensor else 0.0
        total = gemm_scalar._total(fam, ctas, kernels, busiest, rate, t_t, w_f, w_s, w_l2, w_h)
        out.append((split, kernels, t_t, w_l2 / fam.l2_rate, rate, w_h, total))
    return fam, out


def test_every_bound_stays_below_the_times_it_bounds():
    """_time_bound (of the MMA, L2 and HBM-floor terms), the MMA-only one and
    _splits_lower_s, shaved by SPLIT_BOUND, never exceed a candidate's computed time."""
    checked = 0
    for op, hw, _ in random_gemms(16, 150) + random_gemms(17, 150, short=True):
        fam, cands = candidate_totals(op, hw)
        r = op.resolved(hw)
        a, b, c = r.unique_bytes() if fam else (0, 0, 0)
        for split, kernels, t_t, t_l2, rate, w_h, total in cands:
            fixed = fam.hbm_lat + fam.launch_s * kernels
            floor = (a + b + c) / rate
            assert w_h >= a + b + c
            for lower in (gemm_scalar._time_bound(fam, t_t, max(t_t, t_l2), floor),
                          max(t_t * fam.mma_factor, floor)):
                assert (lower + fixed) * SPLIT_BOUND <= total, (op, hw.name, split)
            if split > 1:
                assert gemm_scalar._splits_lower_s(fam, r.m, r.n, r.k, r.batch,
                                                   a + b + c) <= total, (op, hw.name, split)
            checked += 1
    assert checked > 5000


def test_a_twin_tile_is_never_strictly_faster_than_its_tile():
    """A twin's candidate differs from its tile's by its L2 bytes alone (no fewer), and where
    its L2 time is within the tile's largest SM-clocked time the two totals are equal: the
    search skips it there."""
    h100 = pm.hardware("H100-SXM")
    fam = family(pm.ops.Gemm(m=1, n=1, k=1, dtype="bf16"), h100)
    twins = [(t.twin, t.i) for t in fam.tiles if t.twin is not None]
    assert twins  # wgmma's 128x128 tile with and without the 2x1 cluster
    tiles = {t.i: t for t in fam.tiles}
    equal = 0
    for op, _, _ in random_gemms(18, 400):
        if op.dtype != "bf16" or op.tile or op.b_dtype or op.persistent is not None \
                or op.out_dtype != "bf16":
            continue
        cands = candidate_rows(op, h100)
        unsplit = {c[0]: c for c in cands if c[1] == 1}
        for i, j in twins:
            ci, cj = unsplit[i], unsplit[j]
            assert ci[3:6] + ci[7:] == cj[3:6] + cj[7:] and ci[6] <= cj[6]
            _, _, _, w_t, w_f, w_s, _, w_h, ctas, _ = ci
            t = tiles[i]
            busiest = math.ceil(ctas / fam.sms) + 0.0
            rate = min(fam.hbm_bw, min(ctas, t.sms_cps) * t.in_flight / fam.hbm_lat)
            t_t = busiest * (w_t / ctas) / fam.r_tensor * fam.power_ratio
            x = max(busiest * (w_f / ctas) / fam.r_fma, busiest * (w_s / ctas) / fam.r_smem,
                    ci[6] / fam.l2_rate, t_t)
            total_i, total_j = (gemm_scalar._total(fam, ctas, 1, busiest, rate, t_t, w_f, w_s,
                                                   c[6], w_h) for c in (ci, cj))
            assert total_j >= total_i * (1 - 1e-12)
            if cj[6] / fam.l2_rate <= x:
                assert total_j == total_i
                equal += 1
    assert equal > 10


def test_family_facts_go_with_clear_cache(h100):
    op = pm.ops.Gemm(m=100, n=200, k=300, dtype="bf16")
    first = family(op, h100)
    assert family(op, h100) is first
    pm.clear_cache()
    assert family(op, h100) is not first
    # a promoted block-scaled FP8 GEMM and a dtype the GPU lacks: the engine's path
    assert family(pm.ops.Gemm(m=64, n=64, k=64, dtype="fp8", fp8_scaling="block"),
                  h100) is None
    assert gemm_estimate(pm.ops.Gemm(m=64, n=64, k=64, dtype="nvfp4"), h100, "pipes") is None
