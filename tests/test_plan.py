"""Capacity planning: serving search, memory fit, GPU counts, training plans, reality check."""
from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel.plan.memory import HBM_USABLE_FRACTION, serving_memory, weight_bytes_per_gpu
from perfmodel.plan.serving import pareto_front, plan_serving, sweep_serving
from perfmodel.plan.training import plan_training
from perfmodel.validation.reality import training_reality

BATCHES = (1, 8, 32, 128, 512, 1024)


@pytest.fixture(scope="module")
def plan70():
    return plan_serving("llama3-70b", "H100-SXM", tp=8, prompt=2048, output=256,
                        tpot_slo_s=0.05, batches=BATCHES)


def test_tpot_grows_and_throughput_rises_with_batch(plan70):
    tpots = [p.tpot_s for p in plan70.points]
    assert tpots == sorted(tpots)
    rates = [p.tokens_per_s_per_gpu for p in plan70.points]
    assert rates[0] < rates[2] < rates[-1]


def test_best_batch_meets_slo_and_fits(plan70):
    best = plan70.best
    assert best is not None and best.tpot_s <= 0.05 and best.memory.fits
    bigger = [p for p in plan70.points if p.batch > best.batch]
    assert all(not (p.meets_slo and p.memory.fits) for p in bigger)


def test_memory_limit_is_enforced(plan70):
    over = [p for p in plan70.points if not p.memory.fits]
    assert over, "1024 sequences of 2.3k tokens exceed 8x80 GB"
    assert all(p.memory.total_bytes > 80e9 * HBM_USABLE_FRACTION for p in over)
    assert plan70.best.batch < min(p.batch for p in over)


def test_gpus_for_a_target_throughput(plan70):
    gpus = plan70.gpus_for(1e5)
    assert gpus % 8 == 0
    assert gpus == math.ceil(1e5 / plan70.best.tokens_per_s) * 8


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


def test_training_plan_mfu_and_time_to_train():
    tr = plan_training("llama3-8b", "H100-SXM", batch=8, seq=4096, tp=1, dp=8)
    assert 0.2 < tr.mfu < 0.85 and tr.gpus == 8
    assert tr.time_to_train_s(1e9) == pytest.approx(1e9 / tr.tokens_per_s)
    assert set(tr.to_dict()) >= {"step_time_s", "tokens_per_s", "mfu", "memory", "gpus"}


def test_more_data_parallel_gpus_raise_throughput():
    a = plan_training("llama3-8b", "H100-SXM", batch=4, seq=4096, dp=8)
    b = plan_training("llama3-8b", "H100-SXM", batch=4, seq=4096, dp=16)
    assert b.tokens_per_s > 1.8 * a.tokens_per_s


def test_sweep_and_pareto_front():
    rows = sweep_serving("llama3-8b", ["H100-SXM", "B200"], tps=[1, 2], batches=(1, 16, 256))
    assert len(rows) == 2 * 2 * 3
    front = pareto_front(rows)
    xs = [r["tpot_s"] for r in front]
    ys = [r["tokens_per_s_per_gpu"] for r in front]
    assert xs == sorted(xs) and ys == sorted(ys)


def test_pretraining_runs_within_25_percent_of_the_papers():
    """Llama 3 Table 4 and DeepSeek-V3's GPU-hours (nothing fitted): plain 1F1B within 25 %."""
    rows = training_reality()
    assert len(rows) == 3
    for row in rows:
        assert abs(row.error(1)) < 0.25, row
