"""Block-scaled GEMM cost and the low-precision training recipe (NVFP4 issue, cost side)."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.workloads.recipes import FORMATS, linear_layer
from perfmodel.validation.te_profile import FIT_ROWS, fit_b300_sustained_fraction, te_rows

BIG = dict(m=8192, n=8192, k=8192)


def t(dtype, hw, **kw):
    return pm.predict_op(pm.ops.Gemm(**{**BIG, **kw}, dtype=dtype), hw).time_s


def test_b200_nvfp4_speedup_over_bf16_is_between_2_5_and_4():
    assert 2.5 <= t("bf16", "B200") / t("nvfp4", "B200") <= 4.0


def test_b300_fp4_rate_is_1_5x_b200_per_clock_and_fp4_without_scales_is_not_offered():
    b200, b300 = pm.hardware("B200"), pm.hardware("B300")
    assert b300.tensor_flop_per_sm_per_clk["nvfp4"] == pytest.approx(
        1.5 * b200.tensor_flop_per_sm_per_clk["nvfp4"], rel=0.05)
    assert b200.tensor_flop_per_sm_per_clk["mxfp8"] == b200.tensor_flop_per_sm_per_clk["fp8"]


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4", "mxfp8"])
def test_block_scaled_formats_are_refused_on_hopper(fmt):
    with pytest.raises(pm.InputError, match="not supported by H100-SXM"):
        t(fmt, "H100-SXM")


def test_scale_bytes_are_counted():
    nv = pm.predict_op(pm.ops.Gemm(**BIG, dtype="nvfp4"), "B200").hbm_bytes
    mx = pm.predict_op(pm.ops.Gemm(**BIG, dtype="mxfp4"), "B200").hbm_bytes
    payload = 2 * 8192 * 8192 * 0.5 + 8192 * 8192 * 2
    assert nv == pytest.approx(payload + 2 * 8192 * 8192 / 16, rel=1e-6)  # E4M3 per 16
    assert mx == pytest.approx(payload + 2 * 8192 * 8192 / 32, rel=1e-6)  # UE8M0 per 32


def test_fp8_block_scaling_costs_promotion_on_hopper_only():
    h = pm.hardware("H100-SXM")
    tensor = t("fp8", h)
    block = pm.predict_op(pm.ops.Gemm(**BIG, dtype="fp8", fp8_scaling="block"), h)
    assert block.time_s > 1.15 * tensor and block.resource_time_s["fma"] > 0
    b = pm.hardware("B200")
    assert pm.predict_op(pm.ops.Gemm(**BIG, dtype="fp8", fp8_scaling="block"),
                         b).time_s < 1.1 * t("fp8", b)


def test_recipe_has_three_passes_and_nvfp4_quantization_features():
    layer = linear_layer(4096, 4096, 4096, "nvfp4")
    assert set(layer) == {"fprop", "dgrad", "wgrad"}
    q = [o for ops in layer.values() for o in ops if o.name == "quantize"]
    assert any(o.scaling == "2d" for o in q)              # weights 16x16
    assert any(o.rht for o in q)                          # Wgrad inputs
    assert any(o.stochastic_rounding for o in q)          # gradients
    assert not [o for o in linear_layer(4096, 4096, 4096, "bf16")["fprop"]
                if o.name == "quantize"]
    assert set(FORMATS) == {"bf16", "fp8_block", "mxfp8", "nvfp4"}


def test_on_the_fly_quantization_costs_time_and_nvfp4_still_wins():
    b300 = pm.hardware("B300")
    def layer(fmt, q):
        return sum(pm.predict_op(o, b300).time_s
                   for ops in linear_layer(15872, 4096, 16384, fmt, q).values() for o in ops)
    assert layer("nvfp4", True) > layer("nvfp4", False)
    assert layer("nvfp4", True) < layer("mxfp8", True) < layer("bf16", True)


def test_b300_fitted_fraction_reproduces_and_other_formats_are_judged():
    assert pm.hardware("B300").tensor_sustained_fraction == pytest.approx(
        fit_b300_sustained_fraction(), abs=0.005)
    rows = te_rows()
    assert sum(r.fitted for r in rows) == len(FIT_ROWS) == 3
    mx = [r for r in rows if r.format == "mxfp8" and r.mode == "prequantized"]
    assert all(abs(r.error) < 0.2 for r in mx)
