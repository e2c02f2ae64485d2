"""Deployment search (perfmodel.plan.search): layouts that use exactly the GPUs, reasons for the
ones that do not fit, best under the SLOs, a non-dominated Pareto front, the per-replica share
of the workload, node sharing that changes no number, and the training search."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.plan import search as S
from perfmodel.plan.search import (best, pareto, search_serving, search_training,
                                   serving_layouts, training_layouts)
from perfmodel.plan.simulator import StepCost, Workload, engine_preset, simulate

SMALL = Workload("offline", isl=512, osl=128)


@pytest.fixture(scope="module")
def small_rows():
    """llama3-8b on 2 H100s (TP1 x 2, TP2, TP1 PP2), with two sweep points each."""
    return search_serving("llama3-8b", "H100", 2, SMALL, sweep=(4, 64), tpot_slo_s=0.03,
                          jobs=1)


@pytest.mark.parametrize("model", ["llama3-70b", "qwen3-30b-a3b", "deepseek-v3"])
@pytest.mark.parametrize("gpus", [1, 6, 8, 12, 64])
def test_layouts_use_exactly_the_gpus(model, gpus):
    m = pm.load_model(model)
    lays = serving_layouts(m, gpus)
    assert lays and all(lay.gpus == gpus for lay in lays)
    assert len({(lay.tp, lay.pp, lay.ep) for lay in lays}) == len(lays)
    assert all(lay.ep == 1 for lay in lays) or m.is_moe
    assert all(lay.ep == 1 or lay.ep % lay.tp == 0 for lay in lays)
    if m.is_moe and gpus % 8 == 0:
        assert any(lay.ep == 8 for lay in lays)
    for t, p, d, e in training_layouts(m, gpus):
        assert t * p * d == gpus and (e == 1 or (t * d) % e == 0)


def test_fixed_axes_are_honoured():
    m = pm.load_model("llama3-70b")
    assert {(x.tp, x.pp, x.replicas) for x in serving_layouts(m, 16, tp=4)} == {
        (4, 1, 4), (4, 2, 2), (4, 4, 1)}
    assert [(x.tp, x.pp) for x in serving_layouts(m, 16, tp=4, pp=2)] == [(4, 2)]
    with pytest.raises(InputError, match="--gpus"):
        serving_layouts(m, 6, tp=4)


def test_search_rows_use_exactly_the_gpus(small_rows):
    assert {(r["tp"], r["pp"], r["replicas"]) for r in small_rows} == {(1, 1, 2), (2, 1, 1),
                                                                        (1, 2, 1)}
    assert all(r["gpus"] == 2 and r["gpus_per_replica"] * r["replicas"] == 2
               for r in small_rows)
    assert all(r["fits"] for r in small_rows)
    assert [r["rank"] for r in small_rows] == list(range(1, len(small_rows) + 1))


def test_layouts_that_do_not_fit_carry_a_reason():
    rows = search_serving("llama3-70b", "H100", 1, Workload("offline", isl=1000, osl=1000))
    (r,) = rows
    assert (r["layout"], r["fits"], r["valid"]) == ("TP1", False, True)
    assert r["reason"].startswith("does not fit: weights 131.4 GiB")
    assert r["output_tokens_per_s"] is None and r["weights_bytes"] > r["usable_bytes"]
    assert not r["meets_slo"] and best(rows) is None and pareto(rows) == []
    # tp 3 does not divide Llama-3-70B's 64 heads: listed, not dropped
    rows = search_serving("llama3-70b", "H200", 3, Workload("offline", isl=100, osl=10))
    bad = {r["layout"]: r["reason"] for r in rows if not r["valid"]}
    assert bad["TP3"].startswith("not valid: tp: 3 must divide the 64 attention heads")


def test_a_request_longer_than_the_kv_cache_does_not_fit():
    rows = search_serving("llama3-8b", "H100", 1, Workload("offline", isl=600_000, osl=10))
    assert rows[0]["reason"].startswith("does not fit: a request of 600010 tokens")


def test_best_is_the_fastest_per_gpu_that_meets_the_slo(small_rows):
    top = best(small_rows)
    ok = [r for r in small_rows if r["fits"] and r["tpot_p99_s"] <= 0.03]
    assert top is not None and top["meets_slo"] and top["tpot_p99_s"] <= 0.03
    assert top["output_tokens_per_s_per_gpu"] == max(r["output_tokens_per_s_per_gpu"]
                                                     for r in ok)
    assert any(not r["meets_slo"] for r in small_rows if r["fits"])  # the SLO binds
    assert small_rows[0] is top


def test_best_on_rows():
    """The best row meets the SLOs and has the most steady-state tokens/s per GPU (not the
    benchmark window's, which depends on how many requests were sent)."""
    rows = [{"fits": True, "meets_slo": False, "steady_output_tokens_per_s_per_gpu": 9.0},
            {"fits": True, "meets_slo": True, "steady_output_tokens_per_s_per_gpu": 5.0,
             "output_tokens_per_s_per_gpu": 4.0},
            {"fits": True, "meets_slo": True, "steady_output_tokens_per_s_per_gpu": 4.5,
             "output_tokens_per_s_per_gpu": 6.0},
            {"fits": False, "meets_slo": False, "steady_output_tokens_per_s_per_gpu": None}]
    assert best(rows) is rows[1]
    assert best(rows[:1]) is None


def test_pareto_rows_are_not_dominated(small_rows):
    x, y = "output_tokens_per_s_per_user", "output_tokens_per_s_per_gpu"
    front = pareto(small_rows)
    fit = [r for r in small_rows if r["fits"]]
    assert len(front) >= 2 and all(r["fits"] for r in front)
    for f in front:
        assert not any(r[x] >= f[x] and r[y] >= f[y] and (r[x] > f[x] or r[y] > f[y])
                       for r in fit)
    for r in fit:
        if r not in front:
            assert any(f[x] >= r[x] and f[y] >= r[y] for f in front)
    assert [f[x] for f in front] == sorted((f[x] for f in front), reverse=True)


def test_sweep_points(small_rows):
    points = {(r["layout"], r["point"]): r for r in small_rows}
    r = points[("TP1", "c=64")]
    assert r["mode"] == "concurrency" and r["concurrency"] == 128  # 64 per replica x 2
    assert r["requests"] == 4 * 64 and r["replicas"] == 2  # SWEEP_WAVES x c per replica
    assert r["output_tokens_per_s"] == pytest.approx(2 * r["replica_output_tokens_per_s"])


def test_the_workload_is_shared_by_the_replicas():
    """A concurrency of 3 over 2 replicas: 2 in flight in the simulated one, which stands for
    3 / 2 replicas' worth of work; --requests is split over the replicas."""
    rows = search_serving("llama3-8b", "H100", 2, Workload("concurrency", 10, 256, 16,
                                                           concurrency=3), tp=1, pp=1)
    (r,) = rows
    assert (r["replicas"], r["concurrency"], r["requests"]) == (2, 3, 5)
    assert r["output_tokens_per_s"] == pytest.approx(1.5 * r["replica_output_tokens_per_s"])
    rate = search_serving("llama3-8b", "H100", 2, Workload("rate", 64, 256, 16, rate=4.0),
                          tp=1, pp=1)[0]
    assert rate["requests"] == 32 and rate["mode"] == "rate"


def test_the_search_prices_a_layout_as_the_simulator_does():
    m, h = pm.load_model("llama3-8b"), pm.hardware("H100")
    w = Workload("offline", 96, 300, 40)
    for pp in (2, 1):
        fusion = engine_preset("vllm", h).kernel_fusion
        r = simulate(m, h, w, tp=1, pp=pp, cost=S.step_cost(m, h, 1, 1, pp, "bf16", "bf16",
                                                            fusion=fusion))
        ref = simulate(m, h, w, tp=1, pp=pp, cost=StepCost(m, h, 1, 1, pp, fusion=fusion))
        assert r.to_dict(per_request=False) == ref.to_dict(per_request=False)


def test_worker_processes_give_the_same_rows(small_rows):
    rows = search_serving("llama3-8b", "H100", 2, SMALL, sweep=(4, 64), tpot_slo_s=0.03,
                          jobs=2)
    assert rows == small_rows


def test_bad_arguments():
    # the Python API names its parameters (perfmodel.plan.arguments); the CLI its flags
    with pytest.raises(InputError, match="^engine: expected one of"):
        search_serving("llama3-8b", "H100", 1, SMALL, engine="nope")
    with pytest.raises(InputError, match="^tpot_slo_s: expected a positive duration"):
        search_serving("llama3-8b", "H100", 1, SMALL, tpot_slo_s=-1.0)
    with pytest.raises(InputError, match="^gpus: expected a positive integer, got 0"):
        search_serving("llama3-8b", "H100", 0, SMALL)
    with pytest.raises(InputError, match="^jobs: expected a positive integer"):
        search_serving("llama3-8b", "H100", 1, SMALL, jobs=0)


def test_training_search():
    rows = search_training("llama3-8b", "H100", 4, batch=8, seq=2048, jobs=1)
    assert {(r["tp"], r["pp"], r["dp"]) for r in rows} == {
        (t, p, 4 // (t * p)) for t in (1, 2, 4) for p in (1, 2, 4) if 4 % (t * p) == 0}
    fit = [r for r in rows if r["fits"]]
    assert fit and rows[:len(fit)] == fit  # the ones that fit first
    assert [r["step_time_s"] for r in fit] == sorted(r["step_time_s"] for r in fit)
    assert all(r["reason"].startswith("does not fit: needs") for r in rows if not r["fits"])
    assert best(rows, "tokens_per_s") is fit[0]
    odd = search_training("llama3-8b", "H100", 4, batch=3, seq=2048, dp=4, jobs=1)[0]
    assert odd["reason"] == "not valid: the global batch 3 does not split over dp 4"


def test_attention_groups_share_the_deployments_concurrency():
    """An expert-parallel replica with ep > tp runs ep / tp attention groups, each its own
    scheduler: 64 in flight over TP1 x EP8 is 8 per group, not 64 each. Little's law bounds
    the output: C requests in flight each emitting one token per TPOT make at most C / TPOT
    tokens/s."""
    rows = search_serving("qwen3-30b-a3b", "H100", 8, Workload("concurrency", None, 256, 64,
                                                               concurrency=64), tp=1, ep=8)
    (r,) = [x for x in rows if x["fits"]]
    assert r["requests"] == 10 * 8  # ten waves of the group's 8
    assert r["output_tokens_per_s"] <= 64 / r["tpot_mean_s"] * 1.02
