"""TransformerEngine's B300 GEMM profile, judged: its BF16 rows' own fit (the fraction's fallback
and the value the project ran on before) reproduces, and every row, BF16 included, is judged
against B300's fraction fitted on AIConfigurator's compute-bound BF16 linears."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.validation.te_profile import FIT_ROWS, fit_b300_sustained_fraction, te_rows


def test_the_profiles_own_fit_reproduces_and_every_row_is_judged():
    assert fit_b300_sustained_fraction() == pytest.approx(0.672, abs=0.005)
    # B300 now sustains more than the profile's one machine: the BF16 rows read a few % fast
    assert pm.hardware("B300").tensor_sustained_fraction > fit_b300_sustained_fraction()
    rows = te_rows()
    assert not any(r.fitted for r in rows) and len(FIT_ROWS) == 3
    bf16 = [r for r in rows if r.id in FIT_ROWS]
    assert all(-0.12 < r.error < 0 for r in bf16)
    mx = [r for r in rows if r.format == "mxfp8" and r.mode == "prequantized"]
    assert all(abs(r.error) < 0.2 for r in mx)
