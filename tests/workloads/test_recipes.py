"""Low-precision training recipes per linear layer (the NVFP4 study): passes, quantization
features."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel import units
from perfmodel.workloads import recipes
from perfmodel.workloads.builder import build_graph
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


@pytest.mark.parametrize("fmt", units.GEMM_DTYPES)
def test_linear_layer_accepts_every_builder_policy(fmt):
    layer = recipes.linear_layer(1024, 4096, 4096, fmt)
    gemms = [o for ops in layer.values() for o in ops if o.name == "gemm"]
    assert len(gemms) == 3 and {o.dtype for o in gemms} == {fmt}
    quants = [o for ops in layer.values() for o in ops if o.name == "quantize"]
    assert bool(quants) == units.LINEAR_RECIPES[fmt].quantized


def test_fp8_is_the_builders_per_tensor_fp8():
    """The builder's fp8 policy and linear_layer('fp8') run the same kernels: fp8 GEMMs with
    per-tensor scaling, fed by amax-pass quantization (current scaling)."""
    layer = recipes.linear_layer(2048, 4096, 14336, "fp8")
    fprop_q = [o for o in layer["fprop"] if o.name == "quantize"]
    assert all(o.to == "fp8" and o.amax_pass for o in fprop_q)
    assert all(o.fp8_scaling == "tensor" for ops in layer.values() for o in ops
               if o.name == "gemm")
    g = build_graph(pm.load_model("llama3-8b"), "train", batch=2, seq=1024, dtype="fp8")
    built = {n.name: n.op for n in g.nodes}
    assert built["l0.gate_up.quant_x"].to_dict() == \
        recipes.quantize_op("fp8", 2048, 4096, "activation").to_dict()
    assert built["l0.gate_up"].fp8_scaling == "tensor"
    with pytest.raises(ValueError, match="unquantized"):
        recipes.quantize_op("bf16", 16, 16, "weight")
    with pytest.raises(ValueError, match="format must be one of"):
        recipes.linear_layer(16, 16, 16, "int8")
