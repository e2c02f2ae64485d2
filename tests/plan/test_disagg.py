"""Disaggregated serving: a prefill pool, a decode pool, the KV cache moved between them."""
from __future__ import annotations

import numpy as np
import pytest

from perfmodel.errors import InputError
from perfmodel.hardware import hardware
from perfmodel.plan.simulator import (Pool, StepCost, Workload, engine_preset, simulate,
                                      simulate_disaggregated)
from perfmodel.plan.simulator.disagg import transfer_link, transfer_time_s
from perfmodel.plan.search import search_disaggregated
from perfmodel.workloads.builder import kv_cache_bytes_per_token
from perfmodel.workloads.models import load_model


def test_a_lone_request_gets_its_prefill_then_the_transfer_then_pure_decode_steps():
    """At a light load TTFT is one prefill step, and the decode pool's steps carry no prefill."""
    w = Workload("rate", requests=4, isl=1500, osl=50, rate=0.2)
    r = simulate_disaggregated("llama3-8b", "H100-SXM", w, Pool(), Pool())
    fusion = engine_preset("vllm", "H100-SXM").kernel_fusion  # the pools' engine's kernels
    prefill = StepCost("llama3-8b", "H100-SXM", fusion=fusion).prefill_time_s(1500)
    assert np.median(r.ttft_s) == pytest.approx(prefill, rel=0.05)  # (one may queue)
    assert (r.ttft_s >= prefill * 0.999).all()
    one = StepCost("llama3-8b", "H100-SXM", fusion=fusion).decode_time_s(1, 1525)
    assert 0.5 * one < np.nanmedian(r.tpot_s) < 2.0 * one
    assert (r.transfer_s > 0).all() and r.link == "nvlink"


def test_decode_pool_tpot_beats_a_colocated_replica_under_the_same_load():
    """Prefill chunks in the decode steps are what disaggregation removes (DistServe §2)."""
    w = Workload("rate", requests=120, isl=3000, osl=200, rate=4.0, seed=1)
    colocated = simulate("llama3-8b", "H100-SXM", Workload(
        "rate", requests=60, isl=3000, osl=200, rate=2.0, seed=1))  # each of 2 replicas
    d = simulate_disaggregated("llama3-8b", "H100-SXM", w, Pool(replicas=1), Pool(replicas=1))
    assert np.nanmean(d.tpot_s) < np.nanmean(colocated.tpot_s)
    assert d.output_tokens_per_s == pytest.approx(float(d.osl.sum()) / d.duration_s)


def test_the_kv_cache_crosses_nvlink_inside_a_domain_and_the_network_beyond():
    h = hardware("H100-SXM")
    assert transfer_link(h, Pool(tp=4), Pool(tp=4)) == "nvlink"
    assert transfer_link(h, Pool(tp=8), Pool(tp=8)) == "network"
    m = load_model("llama3-70b")
    t = transfer_time_s(m, h, np.array([1000.0]), "bf16", Pool(tp=8), "network")[0]
    ln = h.links["network"]
    bytes_ = 1000 * kv_cache_bytes_per_token(m, 1, "bf16")
    assert t == pytest.approx(bytes_ / (8 * ln.bandwidth_bytes_per_s) + ln.latency_s)


def test_fixed_concurrency_is_refused_and_the_search_splits_every_way():
    with pytest.raises(InputError, match="closed loop"):
        simulate_disaggregated("llama3-8b", "H100-SXM",
                               Workload("concurrency", requests=8, concurrency=4), Pool(), Pool())
    rows = search_disaggregated("llama3-8b", "H100-SXM", 4,
                                Workload("rate", requests=40, isl=1000, osl=100, rate=4.0),
                                tp=1, pp=1, jobs=1)
    assert sorted(r["layout"] for r in rows) == ["TP1 1P:3D", "TP1 2P:2D", "TP1 3P:1D"]
    assert all(r["fits"] and r["output_tokens_per_s_per_gpu"] > 0 for r in rows)
    with pytest.raises(InputError, match="two replicas"):
        search_disaggregated("llama3-8b", "H100-SXM", 1, Workload("offline", requests=8))
