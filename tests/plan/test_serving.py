"""Serving plans: SLO search with memory fit, GPUs for a target rate, sweeps and Pareto fronts."""
from __future__ import annotations

import math

import pytest

from perfmodel.plan.memory import HBM_USABLE_FRACTION
from perfmodel.plan.serving import pareto_front, plan_serving, sweep_serving


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


def test_sweep_and_pareto_front():
    rows = sweep_serving("llama3-8b", ["H100-SXM", "B200"], tps=[1, 2], batches=(1, 16, 256))
    assert len(rows) == 2 * 2 * 3
    front = pareto_front(rows)
    xs = [r["tpot_s"] for r in front]
    ys = [r["tokens_per_s_per_gpu"] for r in front]
    assert xs == sorted(xs) and ys == sorted(ys)
