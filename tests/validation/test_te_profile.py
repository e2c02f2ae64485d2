"""TransformerEngine's B300 GEMM profile: the fitted sustained fraction reproduces, the other
formats are judged against it."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.validation.te_profile import FIT_ROWS, fit_b300_sustained_fraction, te_rows


def test_b300_fitted_fraction_reproduces_and_other_formats_are_judged():
    assert pm.hardware("B300").tensor_sustained_fraction == pytest.approx(
        fit_b300_sustained_fraction(), abs=0.005)
    rows = te_rows()
    assert sum(r.fitted for r in rows) == len(FIT_ROWS) == 3
    mx = [r for r in rows if r.format == "mxfp8" and r.mode == "prequantized"]
    assert all(abs(r.error) < 0.2 for r in mx)
