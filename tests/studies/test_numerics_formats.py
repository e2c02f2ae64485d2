"""Numerics emulator, element formats: exact rounding to E2M1/E4M3/E5M2, UE8M0 and BF16, stochastic
rounding.

Hand-computed cases come from the format definitions (OCP MX v1.0, OCP FP8); properties are checked
with hypothesis or exhaustively over code tables, against a brute-force oracle.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from perfmodel.studies.numerics.formats import (E2M1, E4M3, E5M2, decode, encode,
                                                overflow_threshold, representable_values,
                                                round_to_bf16, round_to_format, to_ue8m0,
                                                ue8m0_encode)


F32 = np.float32
ELEMS = (E2M1, E4M3, E5M2)


def rne(x, fmt, **kw):
    return round_to_format(np.asarray(x, dtype=F32), fmt, **kw)


# ---------------------------------------------------------------------------------------------
# Element formats: hand-computed cases
# ---------------------------------------------------------------------------------------------
def test_e2m1_grid_and_ties_to_even():
    assert representable_values(E2M1).tolist() == [-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1,
                                                     1.5, 2, 3, 4, 6]
    got = rne([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 7, -0.2], E2M1)
    # 0.25: tie 0|0.5 → 0 (even); 0.75: tie 0.5|1 → 1; 1.25: tie 1|1.5 → 1; 1.75: tie 1.5|2 → 2;
    # 2.5: tie 2|3 → 2; 3.5: tie 3|4 → 4; 5: tie 4|6 → 4; 7 → saturates to 6; −0.2 → −0.
    assert got.tolist() == [0, 1, 1, 2, 2, 4, 4, 6, 0]
    assert np.signbit(got[-1])
    assert rne([np.inf, -np.inf, 1e30], E2M1).tolist() == [6, -6, 6]
    assert np.isnan(rne([np.nan], E2M1)[0])


def test_e4m3_limits_subnormals_ties_and_nan():
    assert E4M3.max_finite == 448 and E4M3.min_subnormal == 2.0 ** -9
    vals = representable_values(E4M3)
    assert vals.max() == 448 and vals[vals > 0].min() == 2.0 ** -9
    assert len(vals) == 253                     # 256 codes − 2 NaNs − (−0 ≡ +0)
    got = rne([448, 449, 464, 465, 480, 1e9], E4M3)
    assert got.tolist() == [448] * 6            # satfinite; 464 is a tie 448|480 → 448 (even)
    nonsat = rne([464, 465, np.inf], E4M3, saturate=False)
    assert nonsat[0] == 448 and np.isnan(nonsat[1:]).all()   # no Inf in E4M3: overflow → NaN
    sub = 2.0 ** -9
    got = rne([sub, sub / 2, sub / 2 * 1.001, 1.5 * sub, 2.5 * sub, 1.0625, 1.1875, -3 * sub], E4M3)
    # sub/2: tie 0|2^-9 → 0; 1.5·2^-9: tie 1|2 quanta → 2; 2.5·2^-9 → 2; 1.0625: tie 1|1.125 → 1;
    # 1.1875: tie 1.125|1.25 → 1.25 (mantissa 010 is even).
    assert got.tolist() == [sub, 0, sub, 2 * sub, 2 * sub, 1.0, 1.25, -3 * sub]
    codes = np.arange(256)
    nan_codes = codes[np.isnan(decode(codes, E4M3))]
    assert nan_codes.tolist() == [0x7F, 0xFF]
    assert encode([448.0, -448.0, np.nan, sub], E4M3).tolist() == [0x7E, 0xFE, 0x7F, 0x01]


def test_e5m2_limits_inf_and_ties():
    assert representable_values(E5M2).max() == 57344
    assert rne([61439, 61440, 1e6], E5M2).tolist() == [57344] * 3
    nonsat = rne([61439, 61440, np.inf, -1e6], E5M2, saturate=False)
    # 61440 is a tie 57344|65536; 57344 = 1.11b·2^15 has an odd mantissa → rounds up → Inf.
    assert nonsat.tolist() == [57344, np.inf, np.inf, -np.inf]
    assert rne([2.0 ** -16, 2.0 ** -17, 1.5 * 2.0 ** -16], E5M2).tolist() == [
        2.0 ** -16, 0, 2.0 ** -15]
    assert encode([np.inf, -np.inf], E5M2, saturate=False).tolist() == [0x7C, 0xFC]
    assert encode([np.inf], E5M2).tolist() == [0x7B]                 # satfinite: max


def test_overflow_thresholds():
    assert overflow_threshold(E2M1) == (7.0, True)
    assert overflow_threshold(E4M3) == (464.0, False)
    assert overflow_threshold(E5M2) == (61440.0, True)


def test_ue8m0_rounding_modes_and_range():
    assert to_ue8m0([3.0], "floor")[0] == 2 and to_ue8m0([3.0], "ceil")[0] == 4
    # rne: 3 = 1.5·2^1 is a tie between 2 (biased code 128, even) and 4 (code 129) → 2;
    # 6 = 1.5·2^2 ties 4 (code 129) and 8 (code 130) → 8.
    assert to_ue8m0([3.0, 3.01, 6.0, 5.9, 1.0], "rne").tolist() == [2, 4, 8, 4, 1]
    assert to_ue8m0([0.0, 1e-45], "floor").tolist() == [2.0 ** -127] * 2   # no zero in UE8M0
    assert to_ue8m0([F32(3e38)], "ceil")[0] == 2.0 ** 127                   # clamps at the top
    assert np.isnan(to_ue8m0([-1.0, np.nan, np.inf])).all()
    assert ue8m0_encode([1.0, 2.0 ** -127, 2.0 ** 127, np.nan]).tolist() == [127, 0, 254, 255]


def test_bf16_rne():
    one_ulp = 2.0 ** -7
    got = round_to_bf16(np.array([1 + one_ulp / 2, 1 + 3 * one_ulp / 2, 1 + one_ulp * 0.51,
                                  3.4e38, np.nan], dtype=F32))
    assert got[:3].tolist() == [1.0, 1 + 2 * one_ulp, 1 + one_ulp]
    assert np.isinf(got[3]) and np.isnan(got[4])


# ---------------------------------------------------------------------------------------------
# Element formats: exhaustive and property checks against a brute-force oracle
# ---------------------------------------------------------------------------------------------
def oracle_rne(x, fmt):
    """Nearest value of the format's table, ties to the even code; saturating. Independent of the
    bit arithmetic under test."""
    vals = representable_values(fmt).astype(np.float64)
    pos = vals[vals >= 0]
    a = np.minimum(np.abs(np.asarray(x, np.float64)), pos[-1])
    hi = np.clip(np.searchsorted(pos, a), 0, len(pos) - 1)
    lo = np.clip(hi - 1, 0, len(pos) - 1)
    lo = np.where(pos[hi] == a, hi, lo)
    d_lo, d_hi = a - pos[lo], pos[hi] - a
    even_hi = (encode(pos[hi], fmt) & 1) == 0
    pick = np.where(d_hi < d_lo, hi, np.where(d_lo < d_hi, lo, np.where(even_hi, hi, lo)))
    return np.copysign(pos[pick], x)


@pytest.mark.parametrize("fmt", ELEMS, ids=lambda f: f.name)
def test_every_code_is_a_fixed_point_and_encodes_back(fmt):
    codes = np.arange(1 << fmt.bits)
    v = decode(codes, fmt)
    finite = np.isfinite(v)
    assert np.array_equal(rne(v[finite], fmt), v[finite])          # idempotent on the grid
    assert np.array_equal(encode(v[finite], fmt), codes[finite])


@pytest.mark.parametrize("fmt", ELEMS, ids=lambda f: f.name)
def test_all_midpoints_and_their_neighbours_match_the_oracle(fmt):
    vals = representable_values(fmt)
    mids = ((vals[:-1].astype(np.float64) + vals[1:]) / 2).astype(F32)   # exact in float32
    probes = np.concatenate([mids, np.nextafter(mids, F32(np.inf)),
                             np.nextafter(mids, F32(-np.inf))])
    assert np.array_equal(rne(probes, fmt), oracle_rne(probes, fmt))


@given(hnp.arrays(F32, 64, elements=st.floats(-1e5, 1e5, width=32)),
       st.sampled_from(ELEMS))
def test_rne_matches_oracle_on_random_floats(x, fmt):
    assert np.array_equal(rne(x, fmt), oracle_rne(x, fmt))


@given(hnp.arrays(F32, 64, elements=st.floats(-1e5, 1e5, width=32)),
       st.sampled_from(ELEMS), st.integers(0, 2 ** 32 - 1))
def test_sr_lands_on_a_neighbour(x, fmt, seed):
    """SR returns one of the two grid points bracketing x (or the clamp value)."""
    y = rne(x, fmt, rounding="sr", rng=seed).astype(np.float64)
    vals = representable_values(fmt).astype(np.float64)
    a = np.clip(x.astype(np.float64), vals[0], vals[-1])
    lo = vals[np.searchsorted(vals, a, side="right") - 1]
    hi = vals[np.minimum(np.searchsorted(vals, a, side="left"), len(vals) - 1)]
    assert np.all((y == lo) | (y == hi))


def test_sr_is_unbiased_and_rne_is_not():
    """0.3 in E2M1 lies between 0 and 0.5; SR gives 0.5 with probability p = 0.6, so the mean of N
    draws has std 0.5·sqrt(p(1−p)/N) = 7.7e-4 for N = 1e5. A 6σ tolerance (4.6e-3) would fail
    spuriously with probability ~2e-9; RNE always gives 0.5, a bias of 0.2 ≫ tolerance. Same for an
    E4M3 subnormal (1.3 quanta)."""
    n = 100_000
    for fmt, x, lo_hi_gap in ((E2M1, 0.3, 0.5), (E4M3, 1.3 * 2.0 ** -9, 2.0 ** -9)):
        frac = (x % lo_hi_gap) / lo_hi_gap
        tol = 6 * lo_hi_gap * np.sqrt(frac * (1 - frac) / n)
        draws = rne(np.full(n, x), fmt, rounding="sr", rng=np.random.default_rng(7))
        assert abs(draws.mean() - F32(x)) < tol
        assert abs(rne([x], fmt)[0] - F32(x)) > 10 * tol
    a = rne(np.full(1000, 0.3), E2M1, rounding="sr", rng=1)
    assert np.array_equal(a, rne(np.full(1000, 0.3), E2M1, rounding="sr", rng=1))
    assert not np.array_equal(a, rne(np.full(1000, 0.3), E2M1, rounding="sr", rng=2))
