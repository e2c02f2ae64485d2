"""The serving simulator: step cost (interpolation against exact predictions), KV budget, engine
presets, workloads, and the continuous-batching loop's invariants and limits."""
from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.errors import InputError
from perfmodel.plan.simulator import (ENGINES, Engine, StepCost, Workload, engine_preset,
                                      kv_budget, simulate)
from perfmodel.plan.simulator.interp import Axis, TileAxis

MODEL, HW = "llama3-8b", "H100-SXM"


@functools.lru_cache(maxsize=None)
def cost(model: str = MODEL, hw: str = HW, tp: int = 1, pp: int = 1,
         kv_dtype: str = "bf16", fp8_attention: bool = False,
         fusion: str = "none", attention_kernel: str | None = None) -> StepCost:
    """One StepCost per deployment for the whole module: its nodes are memoized."""
    return StepCost(model, hw, tp=tp, pp=pp, kv_dtype=kv_dtype, fp8_attention=fp8_attention,
                    fusion=fusion, attention_kernel=attention_kernel)


def sim(workload: Workload, engine="vllm", **kw):
    kv = kw.get("kv_dtype", "bf16")
    pp = kw.get("pp", 1)
    preset = engine_preset(engine, HW)
    fp8 = kw.get("fp8_attention", preset.fp8_attention)
    fusion = kw.get("kernel_fusion", preset.kernel_fusion)
    kernel = kw.get("attention_kernel", preset.attention_kernel)
    return simulate(MODEL, HW, workload, engine=engine,
                    cost=cost(pp=pp, kv_dtype=kv, fp8_attention=fp8, fusion=fusion,
                              attention_kernel=kernel), **kw)


def check_consistent(r) -> None:
    """Every request completes with exactly its output tokens; latencies are ordered; the KV
    cache never overflows; ITL samples are the gaps between a request's tokens."""
    assert (r.generated == r.osl).all()
    assert (r.ttft_s > 0).all() and (r.ttft_s <= r.e2e_s + 1e-12).all()
    assert np.isfinite(r.e2e_s).all()
    assert len(r.itl_s) == int((r.osl - 1).sum()) and (r.itl_s > 0).all()
    many = r.osl > 1
    assert np.allclose(r.tpot_s[many] * (r.osl[many] - 1), (r.e2e_s - r.ttft_s)[many])
    assert r.peak_kv_blocks <= r.kv_capacity_blocks
    assert r.duration_s >= r.e2e_s.max() - 1e-9
    json.dumps(r.to_dict())


# -- interpolation ----------------------------------------------------------------------------

@given(st.floats(1, 1e6), st.sampled_from([Axis(2), Axis(4), Axis(2, lo=0), TileAxis(4),
                                           TileAxis(2, exact_to=32)]))
def test_axis_brackets_its_point(x, axis):
    x0, x1, w = axis.bracket(x)
    assert isinstance(x0, int) and isinstance(x1, int)
    assert x0 <= x <= x1 and 0.0 <= w <= 1.0
    assert math.isclose(x0 + w * (x1 - x0), x, rel_tol=1e-9) or x0 == x1


def test_tile_axis_brackets_gemm_tile_intervals():
    a = TileAxis(4)
    assert a.bracket(300) == (257, 320, (300 - 257) / 63)
    assert a.bracket(320) == (320, 320, 0.0) and a.bracket(40) == (40, 40, 0.0)


# Measured on H100 SXM and H200 (llama3-8b, llama3-70b TP8 FP8, qwen3-30b-a3b; 90-150 random
# steps each): whole-step error against exact predictions max 3.0 %, mean 0.1-0.4 %. The
# parts: body (GEMMs etc.) max 3.8 % / mean 0.7 %; decode attention max 17 % / mean 0.3 % (split
# heuristics of tiny kernels); chunk attention max 30 % / mean 0.7 % (few-token chunks crossing a
# key tile). Tolerances a little above the measured bounds:
STEP_MAX_ERROR, STEP_MEAN_ERROR = 0.05, 0.01


def test_step_interpolation_error_within_the_measured_tolerance():
    rng = np.random.default_rng(7)
    fast, exact = cost(), StepCost(MODEL, HW, exact=True)
    errs = []
    for i in range(24):
        d = 0 if i % 3 == 1 else int(rng.integers(1, 400))
        chunks = [] if i % 3 == 0 else [(int(np.exp(rng.uniform(0, np.log(8000 - d)))),
                                         int(rng.choice([0, int(rng.uniform(0, 8000))])))]
        ctx = d * float(rng.uniform(64, 8000))
        errs.append(abs(fast.step_time_s(d, ctx, chunks) / exact.step_time_s(d, ctx, chunks)
                        - 1))
    assert max(errs) < STEP_MAX_ERROR and np.mean(errs) < STEP_MEAN_ERROR


def test_step_cost_parts_add_up_and_grow():
    c = cost()
    b = c.breakdown(64, 64 * 2000.0, [(512, 1024)])
    parts = sum(v for k, v in b.items() if k != "total_s")
    assert math.isclose(parts, b["total_s"], rel_tol=1e-9)
    assert c.decode_time_s(256, 2000) > c.decode_time_s(16, 2000) > 0
    assert c.decode_time_s(64, 8000) > c.decode_time_s(64, 1000)
    assert c.prefill_time_s(4096) > 2 * c.prefill_time_s(1024)
    # weights once per step: a mixed step costs less than its parts run apart
    assert c.step_time_s(64, 64 * 2000.0, [(512, 0)]) < (c.decode_time_s(64, 2000)
                                                         + c.prefill_time_s(512))


def test_cuda_graphs_remove_launch_overhead():
    c = cost()
    eager = c.step_time_s(8, 8 * 1000.0)
    assert c.step_time_s(8, 8 * 1000.0, graphs="all", pad_tokens=8) < eager
    assert c.step_time_s(8, 8 * 1000.0, graphs="body", pad_tokens=8) < eager


@pytest.mark.parametrize("pp", [1, 2])
def test_a_decode_only_step_is_its_parts(pp):
    """The decode-only fast path (StepCost._decode_step_times, memoizing what does not depend
    on the contexts) prices a step as its parts: body, head and every layer's decode attention,
    less the launches the graph mode removes, plus pipeline sends; the same floats whichever
    step came first."""
    c = cost(pp=pp)
    for decode, mean, graphs, pad in ((8, 1000.0, "none", 0), (8, 1003.5, "all", 8),
                                      (24, 517.25, "body", 32), (300, 2048.0, "all", 304)):
        padded = max(decode, pad)
        t, lb = c.body(padded)[:2]
        ht, hl = c.head(padded)
        at, al = c.decode_attention(decode, mean)
        t, lb = t + ht, lb + hl
        t, la = t + c.attention_layers * at, c.attention_layers * al
        if graphs == "all":
            t -= (lb + la) * c._graph_removes
        elif graphs == "body":
            t -= lb * c._graph_removes
        latency, stage = c.step_times(decode, decode * mean, graphs=graphs, pad_tokens=pad)
        if pp == 1:
            assert latency == stage == t
        else:
            p2p = c.sends(padded)[0]
            assert latency == t + (pp - 1) * p2p and stage == t / pp + p2p
        assert c.step_times(decode, decode * mean, graphs=graphs, pad_tokens=pad) == (latency,
                                                                                      stage)


def test_pipeline_latency_is_all_stages_throughput_one():
    c2 = cost(pp=2)
    latency, stage = c2.step_times(32, 32 * 1000.0)
    assert stage < latency < 2 * stage
    assert math.isclose(latency, cost().step_time_s(32, 32 * 1000.0), rel_tol=0.05)


# -- memory -----------------------------------------------------------------------------------

def test_kv_budget_scales_with_kv_dtype_and_memory_fraction():
    bf16 = kv_budget(MODEL, HW)
    fp8 = kv_budget(MODEL, HW, kv_dtype="fp8")
    assert math.isclose(fp8.kv_bytes_per_token, bf16.kv_bytes_per_token / 2)
    assert abs(fp8.blocks / bf16.blocks - 2) < 1e-3
    assert kv_budget(MODEL, HW, gpu_memory_utilization=0.5).blocks < bf16.blocks
    # 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes
    assert bf16.kv_bytes_per_token == 32 * 8 * 128 * 2 * 2
    assert bf16.tokens == bf16.blocks * 16


def test_weights_that_do_not_fit_raise_one_line():
    with pytest.raises(InputError) as e:
        simulate("llama3-405b", HW, Workload(requests=2, isl=16, osl=4))
    assert len(e.value.problems) == 1 and "does not fit" in e.value.problems[0]


def test_a_request_longer_than_the_cache_is_refused():
    with pytest.raises(InputError, match="KV blocks"):
        sim(Workload(requests=2, isl=2000, osl=10), kv_blocks_override=50)


# -- engines and workloads --------------------------------------------------------------------

def test_engine_presets_carry_the_cited_defaults():
    v1 = engine_preset("vllm", "H100-SXM")
    assert (v1.max_batch, v1.max_tokens_per_step, v1.block_tokens) == (1024, 8192, 16)
    assert v1.chunked_prefill and v1.mixed_batching and max(v1.cuda_graph_sizes) == 512
    assert engine_preset("vllm", "A100-SXM").max_batch == 1024  # 80 GB: the large defaults
    v0 = engine_preset("vllm-v0", "H100-SXM")
    assert (v0.max_batch, v0.chunked_prefill, v0.mixed_batching) == (256, False, False)
    assert engine_preset("sglang", "H100-SXM").max_tokens_per_step == 8192
    assert engine_preset("sglang", "B200").max_tokens_per_step == 16384
    assert engine_preset("tensorrt-llm", "H100-SXM").reserve_output_fraction == 1.0
    for name in ENGINES:
        engine_preset(name, "B200").check()
    with pytest.raises(InputError):
        engine_preset("tgi", HW)
    with pytest.raises(InputError):
        v1.replace(max_num_seqs=3)


def test_workload_lengths_and_arrivals_are_seeded():
    w = Workload("rate", requests=500, isl=("uniform", 10, 20), osl=("normal", 5, 10), rate=4.0,
                 seed=3)
    isl, osl, arr = w.draw()
    assert isl.min() >= 10 and isl.max() <= 20 and osl.min() >= 1
    assert (np.diff(arr) > 0).all() and abs(len(arr) / arr[-1] - 4.0) < 0.5
    assert all((a == b).all() for a, b in zip(w.draw(), Workload(**{**w.__dict__}).draw()))
    pairs = Workload(requests=5, pairs=[(3, 4), (5, 6)]).draw()
    assert pairs[0].tolist() == [3, 5, 3, 5, 3] and pairs[1].tolist() == [4, 6, 4, 6, 4]
    for bad in (dict(mode="rate"), dict(mode="concurrency"), dict(isl=0),
                dict(osl=("uniform", 5, 2)), dict(mode="burst")):
        with pytest.raises(InputError):
            Workload(**bad)


# -- the simulation ---------------------------------------------------------------------------

@settings(max_examples=25)
@given(engine=st.sampled_from(ENGINES), mode=st.sampled_from(["offline", "rate", "concurrency"]),
       isl=st.one_of(st.integers(1, 600), st.just(("uniform", 1, 900))),
       osl=st.one_of(st.integers(1, 40), st.just(("normal", 20, 15))),
       kv_tokens=st.sampled_from([None, 1500, 6400]), seed=st.integers(0, 3))
def test_every_request_completes_with_its_output(engine, mode, isl, osl, kv_tokens, seed):
    w = Workload(mode, requests=24, isl=isl, osl=osl, rate=40.0, concurrency=5, seed=seed)
    blocks = kv_tokens and kv_tokens // engine_preset(engine, HW).block_tokens
    r = sim(w, engine, kv_blocks_override=blocks, max_batch=16)
    check_consistent(r)


def test_simulation_is_deterministic():
    w = Workload("rate", requests=40, isl=("uniform", 50, 500), osl=("normal", 30, 10),
                 rate=20.0, seed=5)
    a, b = sim(w), sim(w)
    assert a.to_dict() == b.to_dict()


def test_throughput_rises_with_max_batch_until_bound():
    w = Workload(requests=64, isl=256, osl=64)
    rates = [sim(w, max_batch=b).output_tokens_per_s for b in (1, 2, 4, 8, 16, 32, 64)]
    assert all(b >= a * 0.999 for a, b in zip(rates, rates[1:]))
    assert rates[-1] > 20 * rates[0]
    # KV-bound: a cache for 8 sequences caps it, whatever max_batch allows
    capped = [sim(w, max_batch=b, kv_blocks_override=8 * 20,
                  reserve_output_fraction=1.0).output_tokens_per_s for b in (8, 32, 64)]
    assert max(capped) / min(capped) < 1.02


def test_chunked_prefill_beats_one_prompt_at_a_time():
    w = Workload(requests=200, isl=512, osl=128)
    one_at_a_time = sim(w, "vllm-v0", max_tokens_per_step=512)  # one prompt per prefill step
    chunked = sim(w, "vllm")
    check_consistent(chunked)
    assert chunked.mixed_steps > 0 and one_at_a_time.mixed_steps == 0
    assert chunked.output_tokens_per_s > 1.08 * one_at_a_time.output_tokens_per_s


def test_fp8_kv_admits_twice_the_sequences_when_kv_bound():
    w = Workload(requests=200, isl=1000, osl=24)
    kw = dict(gpu_memory_utilization=0.3, reserve_output_fraction=1.0)
    bf16, fp8 = sim(w, **kw), sim(w, kv_dtype="fp8", **kw)
    assert bf16.peak_running < 64  # KV-bound, not max_batch-bound
    assert 1.9 <= fp8.peak_running / bf16.peak_running <= 2.1
    assert fp8.output_tokens_per_s > bf16.output_tokens_per_s


def test_fp8_attention_reads_the_fp8_cache_without_converting_it():
    """An engine whose kernels run FP8 MMAs on an FP8 cache (Engine.fp8_attention) prices the
    decode attention as the FP8 op: no K/V conversion work, so never slower than converting,
    and at a long context bound by the cache's bytes alone; a GPU without FP8 tensor cores
    (A100) converts whatever the engine's setting."""
    fp8, convert = cost(kv_dtype="fp8", fp8_attention=True), cost(kv_dtype="fp8")
    assert fp8.fp8_attention and not convert.fp8_attention
    a_fp8, a_conv = fp8._decode_attn, convert._decode_attn
    assert a_fp8.dtype == "fp8" and a_conv.dtype == "bf16" and a_conv.kv_dtype == "fp8"
    for batch, context in ((64, 4096), (256, 2048), (8, 32768)):
        t8, tc = (c.decode_attention(batch, context)[0] for c in (fp8, convert))
        assert t8 <= tc * (1 + 1e-9)
    assert not StepCost(MODEL, "A100-SXM", kv_dtype="fp8", fp8_attention=True).fp8_attention
    with pytest.raises(InputError, match="fp8_attention"):
        simulate(MODEL, HW, Workload(requests=4, isl=64, osl=4), engine="vllm",
                 kv_dtype="fp8", cost=convert)


def test_preemption_when_memory_is_tiny_and_results_stay_consistent():
    w = Workload(requests=64, isl=256, osl=64)
    r = sim(w, max_batch=32, kv_blocks_override=50)
    assert r.preemptions > 0
    check_consistent(r)
    # admission that reserves every running request's output never preempts
    safe = sim(w, max_batch=32, kv_blocks_override=50, reserve_output_fraction=1.0)
    assert safe.preemptions == 0
    check_consistent(safe)


def test_low_rate_gives_one_prefill_ttft_and_one_decode_step_tpot():
    isl, osl = 256, 32
    r = sim(Workload("rate", requests=20, isl=isl, osl=osl, rate=0.5, seed=1),
            cuda_graph_sizes=())
    s = r.summary()
    c = cost(fusion=engine_preset("vllm", HW).kernel_fusion)  # the engine's kernels
    # one prefill, plus the preset's per-request host path (Engine.request_overhead_s)
    path = engine_preset("vllm", HW).request_overhead_s
    assert math.isclose(s["ttft_s"]["p50"], c.prefill_time_s(isl) + path, rel_tol=0.01)
    assert math.isclose(s["tpot_s"]["p50"], c.decode_time_s(1, isl + osl / 2), rel_tol=0.03)
    graphs = sim(Workload("rate", requests=20, isl=isl, osl=osl, rate=0.5, seed=1))
    assert graphs.summary()["tpot_s"]["p50"] < s["tpot_s"]["p50"]


def test_littles_law_in_concurrency_mode():
    n = 16
    r = sim(Workload("concurrency", requests=200, isl=256, osl=64, concurrency=n))
    check_consistent(r)
    assert r.peak_running <= n
    assert math.isclose(r.requests_per_s, n / r.e2e_s.mean(), rel_tol=0.1)


def test_pipeline_parallel_keeps_stages_busy():
    w = Workload(requests=64, isl=256, osl=64)
    one, two = sim(w), sim(w, pp=2)
    check_consistent(two)
    assert two.gpus == 2 and two.output_tokens_per_s > 1.1 * one.output_tokens_per_s
    # two micro-batches in flight keep the first stage busy; one at a time would leave it idle
    # half of the time (the step's latency is both stages)
    assert two.busy_s / two.duration_s > 0.8
    low = sim(Workload("rate", requests=10, isl=256, osl=8, rate=0.5), pp=2,
              cuda_graph_sizes=())
    fusion = engine_preset("vllm", HW).kernel_fusion
    path = engine_preset("vllm", HW).request_overhead_s
    assert math.isclose(low.summary()["ttft_s"]["p50"],
                        cost(pp=2, fusion=fusion).prefill_time_s(256) + path, rel_tol=0.01)


def test_metrics_use_the_validation_names():
    METRICS = pytest.importorskip("perfmodel.validation.serving").METRICS
    r = sim(Workload(requests=8, isl=64, osl=8))
    m = r.metrics()
    assert {k for k in METRICS if "with_ctx" not in k} <= set(m)
    assert math.isclose(m["output_tokens_per_s"], 64 / r.duration_s)


def test_engine_settings_are_checked():
    with pytest.raises(InputError, match="max_tokens_per_step"):
        sim(Workload(requests=2, isl=8, osl=2), max_batch=64, max_tokens_per_step=32)
    with pytest.raises(InputError, match="without chunked prefill"):
        sim(Workload(requests=2, isl=900, osl=2), "trtllm", max_tokens_per_step=512)
    with pytest.raises(InputError):
        Engine("x", block_tokens=0).check()


def test_a_preset_budget_below_the_longest_prompt_is_raised_with_a_note():
    """TensorRT-LLM's preset (no chunked prefill, max_num_tokens 8192) meets a 9000-token
    prompt: the budget becomes the prompt, the result says so, and the prompt's prefill step
    holds all of it (one step of 9000 tokens, so TTFT at least that prefill)."""
    r = sim(Workload(requests=3, isl=9000, osl=4), "trtllm")
    assert r.extra["max_tokens_per_step"] == 9000
    assert any("raised" in n and "9000" in n for n in r.extra["notes"])
    assert r.ttft_s.min() >= cost(fusion="trtllm").prefill_time_s(9000) * 0.99
    short = sim(Workload(requests=3, isl=512, osl=4), "trtllm")
    assert "notes" not in short.extra and short.extra["max_tokens_per_step"] == 8192


def test_step_costs_of_one_stage_share_their_nodes_and_price_alike():
    """StepCosts differing only in pp share filled nodes (a search visits several pipeline
    depths of one tp); a shared node gives what a fresh evaluation gives, and pp adds only the
    activation sends."""
    from perfmodel.plan.simulator import cost as cost_mod
    cost_mod._shared.clear()
    one = StepCost("llama3-8b", "H100-SXM", tp=1, pp=1)
    t1 = one.step_time_s(64, 64 * 900.0, ((300, 0),))
    two = StepCost("llama3-8b", "H100-SXM", tp=1, pp=2)
    assert two.body.nodes is one.body.nodes  # shared, not recomputed
    cost_mod._shared.clear()
    fresh = StepCost("llama3-8b", "H100-SXM", tp=1, pp=2)
    assert fresh.body.nodes is not one.body.nodes
    lat_shared, stage_shared = two.step_times(64, 64 * 900.0, ((300, 0),))
    lat_fresh, stage_fresh = fresh.step_times(64, 64 * 900.0, ((300, 0),))
    assert lat_shared == pytest.approx(lat_fresh, rel=1e-12)
    assert stage_shared == pytest.approx(stage_fresh, rel=1e-12)
    send = fresh.sends(364)[0]
    assert send > 0 and lat_fresh == pytest.approx(t1 + send, rel=1e-9)


def test_expected_tokens_of_a_speculative_step():
    from perfmodel.plan.simulator.sim import expected_tokens_per_step
    assert expected_tokens_per_step(0, 0.0) == 1.0
    assert expected_tokens_per_step(3, 1.0) == 4.0
    assert expected_tokens_per_step(2, 0.5) == pytest.approx(1.75)  # 1 + 0.5 + 0.25


def test_speculative_decoding_emits_every_token_and_speeds_up_a_lone_request():
    """k drafts at full acceptance: k + 1 tokens per (dearer) step; exactly `osl` tokens each;
    TPOT falls as the acceptance rises, and the step costs more than a plain decode step."""
    w = Workload("concurrency", requests=6, isl=512, osl=200, concurrency=2)
    plain = simulate("llama3-8b", "H100-SXM", w, "vllm")
    tpots = []
    for a in (0.3, 0.7, 1.0):
        r = simulate("llama3-8b", "H100-SXM", w, "vllm", spec_tokens=3, spec_acceptance=a)
        assert (r.generated == 200).all()
        tpots.append(r.metrics()["tpot_mean_s"])
    assert tpots[0] > tpots[1] > tpots[2]
    assert tpots[2] < plain.metrics()["tpot_mean_s"] < 4 * tpots[2]
    c = StepCost("llama3-8b", "H100-SXM")
    assert c.step_time_s(2, 2 * 600.0) < c.step_times(2, 2 * 600.0, spec_tokens=3)[0]


@pytest.mark.parametrize("settings, message", [
    (dict(spec_tokens=3), "needs the draft acceptance rate"),
    (dict(spec_tokens=-1, spec_acceptance=0.5), "spec_tokens"),
    (dict(spec_tokens=2, spec_acceptance=1.5), "spec_acceptance"),
])
def test_bad_speculative_settings_are_input_errors(settings, message):
    with pytest.raises(InputError, match=message):
        engine_preset("vllm", "H100-SXM").replace(**settings)


def test_a_step_cost_for_the_engine_is_accepted_and_another_named():
    """StepCost.for_engine builds the cost a simulation with that engine builds (its FP8
    attention and fused kernels); a cost for other kernels is refused with what the engine
    runs, not silently used."""
    w = Workload(requests=8, isl=128, osl=8)
    for engine in ("vllm", "trtllm", "sglang"):
        c = StepCost.for_engine(MODEL, HW, engine, kv_dtype="fp8")
        r = simulate(MODEL, HW, w, engine=engine, kv_dtype="fp8", cost=c)
        assert r.to_dict(per_request=False) == simulate(
            MODEL, HW, w, engine=engine, kv_dtype="fp8").to_dict(per_request=False)
    with pytest.raises(InputError, match="fusion=add_norm"):
        simulate(MODEL, HW, w, engine="vllm", cost=cost())


def test_trtllm_preset_dispatches_with_deepep_and_a_bad_exchange_is_refused():
    assert engine_preset("trtllm", "B200", 8, 1).moe_exchange == "deepep"
    assert engine_preset("vllm", "B200", 8, 1).moe_exchange == "alltoall"
    with pytest.raises(InputError, match="moe_exchange"):
        Engine("x", moe_exchange="nvshmem").check()
    # the DeepSeek-V3 attention-DP step: TensorRT-LLM's DeepEP exchange is slower than the
    # all-to-all (validate/data/aiconfigurator_moe_a2a.csv: DeepEP's copies are SM-limited)
    deep = StepCost("deepseek-v3", "B200", tp=1, ep=8, dtype="nvfp4", moe_exchange="deepep")
    nccl = StepCost("deepseek-v3", "B200", tp=1, ep=8, dtype="nvfp4")
    assert deep.decode_time_s(256, 2000) > nccl.decode_time_s(256, 2000)


# -- SGLang's scheduler: admission and overlap schedule ---------------------------------------

def _lane_with(running: list[tuple[int, int, int]], capacity: int):
    """A one-token-page lane holding decoding requests of (prompt, output, generated)."""
    from perfmodel.plan.simulator.sim import DECODE, Lane, Request
    ln = Lane(capacity, 4096, 1)
    for i, (p, o, g) in enumerate(running):
        r = Request(i, 0.0, p, o, 1)
        r.state, r.generated, r.computed = DECODE, g, p + g
        ln.running[r.id] = r
        ln.used += p + g
        ln.start_decode(r)
    return ln


def test_sglang_admission_holds_every_request_to_its_end_as_shorter_ones_free_theirs():
    """Two running requests (prompt 100; 10 and 50 tokens left) and a new one (prompt 100,
    output 30): sorted by tokens left 10, 30, 50 holding 110, 100, 150. With F free tokens
    the test is F − 100 − 30·3 > 0, F − 100 + 110 − 50·2 > 0, F − 100 + 210 − 50 > 0:
    F > 190 (the first term binds)."""
    from perfmodel.plan.simulator.sim import Request
    new = Request(9, 0.0, 100, 30, 1)
    for free, fits in ((190, False), (191, True)):
        ln = _lane_with([(100, 20, 10), (100, 100, 50)], capacity=260 + free)
        assert ln.capacity - ln.used == free
        assert ln.sglang_future_fits(new) is fits
    # a long running request and a short new one (sorted 5, 200 holding 10, 300): the first
    # term charges both for the long one's 200 steps, F − 10 − 200·2 > 0: F > 410, more than
    # reserving every remaining output at once would (200 + 10 + 5)
    short = Request(8, 0.0, 10, 5, 1)
    for free, fits in ((410, False), (411, True)):
        ln = _lane_with([(100, 400, 200)], capacity=300 + free)
        assert ln.sglang_future_fits(short) is fits


def test_sglang_budget_takes_the_running_outputs_at_the_decaying_ratio():
    ln = _lane_with([(100, 20, 10), (100, 100, 50)], capacity=1000)
    assert ln.sglang_budget() == pytest.approx(1000 - 260 - 0.7 * 60)
    for _ in range(600):
        ln.decayed_token_ratio()
    assert ln.token_ratio == pytest.approx(0.7 * 0.14)
    ln.decayed_token_ratio()  # at its floor
    assert ln.token_ratio == pytest.approx(0.098)


def test_sglang_presets_schedule_as_sglang_does():
    for name in ("sglang", "sglang-0.4.1"):
        e = engine_preset(name, "H200-SXM", tp=4)
        assert e.admission == "sglang" and e.overlap_schedule and not e.mixed_batching
    old = engine_preset("sglang-0.4.1", "H200-SXM", tp=4)
    assert old.gpu_memory_utilization == 0.85 and max(old.cuda_graph_sizes) == 160
    assert old.attention_kernel == "fa2" and not old.fp8_attention
    assert engine_preset("sglang-0.4.1", "H200-SXM", tp=8).gpu_memory_utilization == 0.81
    with pytest.raises(InputError, match="admission"):
        Engine("x", admission="fcfs").check()


def test_overlap_schedule_makes_an_arrival_wait_for_the_step_already_formed():
    """One long request decoding, a second arriving mid-step: without the overlap schedule its
    prefill is the next step; with it, the step after (the next batch was formed when the
    current one started), so its TTFT grows by about one decode step."""
    w = Workload("trace", pairs=((128, 64), (128, 64)), arrivals=(0.0, 0.05))
    kw = dict(cuda_graph_sizes=(), mixed_batching=False, step_overhead_s=0.0)
    plain = sim(w, "sglang", overlap_schedule=False, **kw)
    overlapped = sim(w, "sglang", overlap_schedule=True, **kw)
    step = cost(fusion=engine_preset("sglang", HW).kernel_fusion).decode_time_s(1, 128 + 16)
    extra = overlapped.ttft_s[1] - plain.ttft_s[1]
    assert 0.5 * step < extra < 1.5 * step
    assert overlapped.ttft_s[0] == pytest.approx(plain.ttft_s[0])  # an idle engine forms at once
    check_consistent(overlapped)


@pytest.mark.parametrize("engine, workload", [
    ("vllm", Workload("offline", requests=120, isl=600, osl=200)),
    ("trtllm", Workload("offline", requests=120, isl=600, osl=200)),
    ("sglang", Workload("rate", requests=150, isl=("uniform", 1, 800),
                        osl=("uniform", 1, 300), rate=12.0, seed=3)),
    ("vllm", Workload("concurrency", requests=150, isl=300, osl=120, concurrency=32)),
])
def test_runs_of_decode_steps_change_nothing(engine, workload, monkeypatch):
    """Simulation.decode_run takes the decode-only steps after one in a tight loop: the result
    is the step-by-step one, float for float."""
    from perfmodel.plan.simulator import sim as simulator
    fast = sim(workload, engine)
    monkeypatch.setattr(simulator.Simulation, "decode_run", lambda self, *a: None)
    slow = sim(workload, engine)
    for f in ("ttft_s", "tpot_s", "e2e_s", "itl_s", "generated"):
        assert np.array_equal(getattr(fast, f), getattr(slow, f)), f
    assert (fast.steps, fast.duration_s, fast.peak_kv_blocks) == \
        (slow.steps, slow.duration_s, slow.peak_kv_blocks)
    assert fast.to_dict() == slow.to_dict()
