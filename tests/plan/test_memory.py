"""Memory fit: weights sharded by TP and EP, the KV cache (GQA and MLA)."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.plan.memory import serving_memory, weight_bytes_per_gpu


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
