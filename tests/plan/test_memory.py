"""Memory fit: weights sharded by TP and EP, the KV cache (GQA and MLA, its dtype and
occupancy), training state by ZeRO stage and activations by recomputation, for a workload."""
from __future__ import annotations

import dataclasses

import pytest

import perfmodel as pm
from perfmodel.plan.memory import DEFAULT_ZERO, memory_fit, serving_memory, weight_bytes_per_gpu
from perfmodel.workloads.builder import Workload, kv_cache_bytes_per_token


def test_weights_shard_by_tp_and_ep():
    m = pm.load_model("llama3-70b")
    full = weight_bytes_per_gpu(m, "bf16", 1, 1, 1)
    assert full == pytest.approx(m.params() * 2, rel=0.01)
    assert weight_bytes_per_gpu(m, "bf16", 8, 1, 1) == pytest.approx(full / 8, rel=0.01)
    assert weight_bytes_per_gpu(m, "fp8", 8, 1, 1) < 0.6 * full / 8
    ds = pm.load_model("deepseek-v3")
    # FP8 DeepSeek-V3 on 8 GPUs with EP8: routed experts split 8 ways, attention replicated
    # (data-parallel attention): ~100 GB per GPU, why it is served on 8x H200 (141 GB)
    per_gpu = weight_bytes_per_gpu(ds, "fp8", 1, 8, 1)
    assert 90e9 < per_gpu < 110e9


def test_kv_cache_of_mla_is_small_but_not_sharded_by_tp():
    h = pm.hardware("H200-SXM")
    ds, ll = pm.load_model("deepseek-v3"), pm.load_model("llama3-70b")
    # per token: 61 layers x 576 latent vs 80 layers x 2 x 8 heads x 128
    assert serving_memory(ds, h, 64, 8192).kv_cache_bytes < \
        0.25 * serving_memory(ll, h, 64, 8192).kv_cache_bytes
    # TP shards GQA heads but every rank keeps the whole latent (why MLA serving uses DP
    # attention)
    assert serving_memory(ds, h, 64, 8192, tp=8).kv_cache_bytes > \
        serving_memory(ll, h, 64, 8192, tp=8).kv_cache_bytes


def test_70b_bf16_on_one_h100_does_not_fit_and_8b_does():
    h = pm.hardware("H100-SXM")
    big = memory_fit("llama3-70b", h, Workload("decode", batch=1, context=2048))
    assert not big.fits and big.weights_bytes > 140e9 and big.capacity_bytes == pytest.approx(0.9 * 80 * 2**30)
    assert big.summary().startswith("needs 143.9 GB per GPU (weights 141.1, KV 0.7, ")
    assert big.summary().endswith("has 77.3 GB usable")
    small = memory_fit("llama3-8b", h, Workload("decode", batch=32, context=8192))
    assert small.fits and small.to_dict()["fits"] is True


def test_fp8_kv_cache_halves_the_kv_bytes():
    m = pm.load_model("llama3-70b")
    bf16 = kv_cache_bytes_per_token(m, 8)
    assert bf16 == kv_cache_bytes_per_token(m, 8, "bf16") == 80 * 2 * 1 * 128 * 2
    assert kv_cache_bytes_per_token(m, 8, "fp8") == bf16 / 2
    assert kv_cache_bytes_per_token(m, 8, "nvfp4") == bf16 / 2 * 0.5625  # + E4M3 scale per 16
    h = pm.hardware("H200-SXM")
    a = memory_fit(m, h, Workload("decode", batch=64, context=8192, tp=8))
    b = memory_fit(m, h, Workload("decode", batch=64, context=8192, tp=8, kv_dtype="fp8"))
    assert b.kv_cache_bytes == a.kv_cache_bytes / 2 and b.weights_bytes == a.weights_bytes


def test_kv_occupancy_sizes_a_paged_cache_below_the_worst_case():
    m, h = pm.load_model("llama3-8b"), pm.hardware("H100-SXM")
    worst = serving_memory(m, h, 64, 4096)
    assert worst == serving_memory(m, h, 64, 4096, occupancy=1.0)
    assert worst.kv_cache_bytes == 64 * 4096 * kv_cache_bytes_per_token(m)
    assert serving_memory(m, h, 64, 4096, occupancy=0.5).kv_cache_bytes == \
        worst.kv_cache_bytes / 2
    with pytest.raises(pm.InputError, match="occupancy"):
        serving_memory(m, h, 64, 4096, occupancy=0.0)


def test_prefill_holds_its_prompts_cache_and_activations():
    h = pm.hardware("H100-SXM")
    fit = memory_fit("llama3-8b", h, Workload("prefill", batch=2, seq=8192))
    assert fit.kv_cache_bytes == 2 * 8192 * kv_cache_bytes_per_token(pm.load_model("llama3-8b"))
    assert fit.activation_bytes > 100 * memory_fit("llama3-8b", h, Workload(
        "decode", batch=2, context=8192)).activation_bytes


def test_training_memory_default_is_zero_1_with_34_sbh_activations():
    """The accounting plan_training always had: BF16 weights and gradients replicated, the
    12 bytes of FP32 Adam state sharded over DP (ZeRO-1), 34·s·b·h/t bytes per layer."""
    m, h = pm.load_model("llama3-8b"), pm.hardware("H100-SXM")
    w = Workload("train", batch=2, seq=4096, tp=2, dp=4)
    fit = memory_fit(m, h, w)
    params = weight_bytes_per_gpu(m, "bf16", 2, 1, 1) / 2
    assert fit.weights_bytes == params * 4 and fit.optimizer_bytes == params * 12 / 4
    assert fit.activation_bytes == 34 * 4096 * 2 * m.hidden * m.layers / 2
    assert fit.kv_cache_bytes == 0 and fit.fits
    assert "weights+grads 16.1, optimizer 12.0" in fit.summary()
    assert memory_fit(m, h, w, zero=DEFAULT_ZERO) == fit
    assert memory_fit(m, h, dataclasses.replace(w, recompute="selective")) == fit
    assert memory_fit(m, h, dataclasses.replace(w, recompute="none")) == fit


def test_full_recompute_keeps_only_each_layers_input():
    m, h = pm.load_model("llama3-8b"), pm.hardware("H100-SXM")
    w = Workload("train", batch=2, seq=4096, tp=2, dp=4)
    full = memory_fit(m, h, dataclasses.replace(w, recompute="full"))
    layer = 4096 * 2 * m.hidden / 2  # tokens × hidden / tp
    assert full.activation_bytes == pytest.approx(2 * layer * m.layers + 34 * layer)
    assert full.activation_bytes < memory_fit(m, h, w).activation_bytes / 10


@pytest.mark.parametrize("zero, weights, grads, optimizer", [
    (0, 1, 1, 1), (1, 1, 1, 1 / 8), (2, 1, 1 / 8, 1 / 8), (3, 1 / 8, 1 / 8, 1 / 8)])
def test_zero_stages_shard_optimizer_then_gradients_then_weights(zero, weights, grads,
                                                                   optimizer):
    m, h = pm.load_model("llama3-70b"), pm.hardware("B200")
    w = Workload("train", batch=4, seq=4096, tp=8, dp=8)
    fit = memory_fit(m, h, w, zero=zero)
    params = weight_bytes_per_gpu(m, "bf16", 8, 1, 1) / 2
    live = params / m.layers * 2 * 2 if zero == 3 else 0.0  # two gathered layers in BF16
    assert fit.weights_bytes == pytest.approx(params * (2 * weights + 2 * grads) + live)
    assert fit.optimizer_bytes == pytest.approx(params * 12 * optimizer)
    if zero == 3:
        assert fit.weights_bytes < memory_fit(m, h, w, zero=2).weights_bytes / 4


def test_bad_memory_options_are_input_errors():
    m, h = pm.load_model("llama3-8b"), pm.hardware("H100-SXM")
    with pytest.raises(pm.InputError, match="zero: expected a ZeRO stage"):
        memory_fit(m, h, Workload("train", batch=2, seq=4096), zero=4)
    with pytest.raises(pm.InputError, match="recompute: expected one of"):
        memory_fit(m, h, Workload("train", batch=2, seq=4096, recompute="some"))
    with pytest.raises(pm.InputError, match="kv_dtype: training keeps K and V"):
        memory_fit(m, h, Workload("train", batch=2, seq=4096, kv_dtype="fp8"))
