"""Serving engines' fused kernels in the builder's graphs (builder.FUSIONS) and the fused
residual add + RMSNorm op they use (ops.Norm residual=True)."""
import pytest

import perfmodel as pm
from perfmodel import ops
from perfmodel.errors import InputError
from perfmodel.plan.memory import as_model
from perfmodel.plan.simulator import StepCost
from perfmodel.predict import predict_op
from perfmodel.workloads.builder import build_graph, inference_op_counts


def test_the_fused_add_norm_reads_one_tensor_less_than_an_add_then_a_norm():
    rows, cols = 512, 8192
    fused = ops.Norm(rows=rows, cols=cols, dtype="bf16", residual=True).demand(pm.hardware("H200"))
    add = ops.Elementwise(elements=rows * cols, dtype="bf16", inputs=2).demand(pm.hardware("H200"))
    norm = ops.Norm(rows=rows, cols=cols, dtype="bf16").demand(pm.hardware("H200"))
    tensor = rows * cols * 2.0
    assert fused.hbm_bytes == pytest.approx(add.hbm_bytes + norm.hbm_bytes - tensor, rel=1e-9)
    hw = pm.hardware("H200")
    apart = predict_op(ops.Elementwise(elements=rows * cols, dtype="bf16", inputs=2), hw).time_s \
        + predict_op(ops.Norm(rows=rows, cols=cols, dtype="bf16"), hw).time_s
    one = predict_op(ops.Norm(rows=rows, cols=cols, dtype="bf16", residual=True), hw).time_s
    assert one < apart


@pytest.mark.parametrize("kw", [dict(direction="bwd"), dict(implementation="eager")])
def test_the_residual_add_is_only_the_fused_forward(kw):
    with pytest.raises(InputError, match="residual"):
        ops.Norm(rows=8, cols=64, dtype="bf16", residual=True, **kw)


def _layer(fusion, dtype="fp8"):
    return {name.partition(".")[2]: o for name, o, _ in inference_op_counts(
        as_model("llama3-70b"), "decode", batch=64, context=1024, tp=4, dtype=dtype,
        fusion=fusion) if name.startswith("l0.")}


def test_add_norm_drops_the_residual_kernels_and_trtllm_the_casts_of_quantized_inputs():
    none, add_norm, trt = _layer("none"), _layer("add_norm"), _layer("trtllm")
    assert {"attn_residual", "ffn_residual"} <= set(none)
    assert not {"attn_residual", "ffn_residual"} & set(add_norm)
    assert set(add_norm) == set(none) - {"attn_residual", "ffn_residual"}
    # TensorRT-LLM's QKV preprocessing also appends to the KV cache (builder._cache_append)
    assert set(trt) == set(add_norm) - {"kv_append"}
    for layer in (add_norm, trt):
        assert layer["attn_norm"].residual and layer["ffn_norm"].residual
    # the QKV and gate/up linears cast their BF16 input in every engine; TensorRT-LLM's
    # attention and SwiGLU write the o_proj and down inputs already quantized
    for name in ("qkv", "gate_up"):
        assert none[name].quantize_input and trt[name].quantize_input
    for name in ("o_proj", "down"):
        assert add_norm[name].quantize_input and not trt[name].quantize_input
    # a BF16 model has no casts to fuse: trtllm and add_norm are the same graph but for the
    # cache append TensorRT-LLM fuses
    add_norm_bf16 = _layer("add_norm", "bf16")
    assert add_norm_bf16.pop("kv_append") and _layer("trtllm", "bf16") == add_norm_bf16


def test_fusion_is_a_serving_engines_and_named():
    m = as_model("llama3-8b")
    with pytest.raises(InputError, match="fusion"):
        build_graph(m, "train", batch=1, seq=128, fusion="add_norm")
    with pytest.raises(InputError, match="fusion"):
        build_graph(m, "decode", batch=1, context=128, fusion="everything")
    g = build_graph(m, "decode", batch=1, context=128, fusion="add_norm")
    assert g.nodes[-2].name == "final_norm" and g.nodes[-2].op.residual


@pytest.mark.parametrize("fusion", ["add_norm", "trtllm"])
def test_a_fused_step_is_faster_by_the_kernels_it_saves(fusion):
    """Each fused layer runs fewer kernels and moves fewer bytes: its decode and prefill steps
    are faster than the unfused graph's, by less than the removed ops' own time."""
    plain = StepCost("llama3-70b", "H200", tp=4, dtype="fp8")
    fused = StepCost("llama3-70b", "H200", tp=4, dtype="fp8", fusion=fusion)
    for decode, chunks in ((1, ()), (256, ()), (0, ((2048, 0),))):
        ctx = decode * 1500.0
        a, b = plain.step_time_s(decode, ctx, chunks), fused.step_time_s(decode, ctx, chunks)
        assert b < a
        assert a - b < 0.2 * a


def test_the_engine_attention_kernel_is_the_gqa_attentions_and_trtllms_mla_too():
    gqa = {name.partition(".")[2]: o for name, o, _ in inference_op_counts(
        as_model("llama3-70b"), "decode", batch=64, context=1024, tp=4, dtype="fp8",
        attention_kernel="trtllm") if name.startswith("l0.")}
    assert gqa["attn"].kernel == "trtllm"
    mla = {name.partition(".")[2]: o for name, o, _ in inference_op_counts(
        as_model("deepseek-v3"), "decode", batch=8, context=1024, tp=8, ep=8, dtype="fp8",
        attention_kernel="trtllm") if name.startswith("l0.")}
    # TensorRT-LLM runs MLA's generation in its own kernels too (trtllm-gen's MLA kernels on
    # Blackwell); other engines' MLA keeps the default family
    assert mla["attn"].kernel == "trtllm" and mla["attn"].shared_kv
    other = {name.partition(".")[2]: o for name, o, _ in inference_op_counts(
        as_model("deepseek-v3"), "decode", batch=8, context=1024, tp=8, ep=8, dtype="fp8",
        attention_kernel="fa3") if name.startswith("l0.")}
    assert other["attn"].kernel is None
    with pytest.raises(InputError, match="attention_kernel"):
        build_graph(as_model("llama3-8b"), "train", batch=1, seq=128, attention_kernel="trtllm")
    trt = StepCost.for_engine("llama3-8b", "H200", "trtllm", kv_dtype="fp8")
    assert trt.attention_kernel == "trtllm" and trt._decode_attn.kernel == "trtllm"
    assert StepCost.for_engine("llama3-8b", "H200", "vllm").attention_kernel is None
    # TensorRT-LLM's family is modelled for wgmma/tcgen05 GPUs: an A100 keeps the default
    a100 = StepCost.for_engine("llama3-8b", "A100-SXM", "trtllm")
    assert a100.attention_kernel is None and a100._decode_attn.kernel is None


def test_fp8_mla_decode_streams_the_whole_query_into_fp8():
    """FP8 MMAs take Q in FP8: the MLA decode's preprocessing (TensorRT-LLM's
    mla_rope_generation) then writes every query head's 576 dims in FP8, not only the 64 rotary
    dims it rotates; a BF16 cache keeps the rotary-only op."""
    kw = dict(batch=64, context=2048, tp=8, ep=8, dtype="fp8", attention_kernel="trtllm")
    fp8 = {name.partition(".")[2]: o for name, o, _ in inference_op_counts(
        as_model("deepseek-v3"), "decode", kv_dtype="fp8", fp8_attention=True, **kw)
        if name.startswith("l0.")}
    assert fp8["attn"].dtype == "fp8"
    assert fp8["rope"].name == "quantize"
    assert (fp8["rope"].rows, fp8["rope"].cols) == (64 * 16, 576)
    bf16 = {name.partition(".")[2]: o for name, o, _ in inference_op_counts(
        as_model("deepseek-v3"), "decode", **kw) if name.startswith("l0.")}
    assert bf16["rope"].name == "elementwise" and bf16["rope"].elements == 64 * 17 * 64

