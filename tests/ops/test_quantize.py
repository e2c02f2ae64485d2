"""Quantize kernels: amax pass, transpose, RHT and stochastic rounding add their work."""
from __future__ import annotations

import perfmodel as pm


def test_quantize_options_add_their_work(h100):
    plain = pm.predict_op(pm.ops.Quantize(rows=8192, cols=8192, to="fp8", amax_pass=False), h100)
    amax = pm.predict_op(pm.ops.Quantize(rows=8192, cols=8192, to="fp8", amax_pass=True), h100)
    trans = pm.predict_op(pm.ops.Quantize(rows=8192, cols=8192, to="fp8", amax_pass=False,
                                          transpose=True), h100)
    assert amax.hbm_bytes > plain.hbm_bytes and trans.hbm_bytes > plain.hbm_bytes
    b200 = pm.hardware("B200")
    sr = pm.predict_op(pm.ops.Quantize(rows=8192, cols=8192, to="nvfp4", rht=True,
                                       stochastic_rounding=True), b200)
    assert sr.resource_time_s["fma_heavy"] > 0 and sr.details["block"] == 16
