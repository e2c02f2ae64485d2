"""Low-precision training recipes per linear layer (NVFP4 issue): passes, quantization features."""
from __future__ import annotations

import perfmodel as pm
from perfmodel.workloads.recipes import TE_FORMATS as FORMATS, linear_layer


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
