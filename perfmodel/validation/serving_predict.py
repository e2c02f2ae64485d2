"""The published serving rows (`perfmodel.validation.serving`) replayed on the serving simulator
(`perfmodel.plan.simulator`): one simulation per distinct deployment and load, each row's metric
read from it, and the rows the simulator cannot express returned with the reason.

    python -m perfmodel.validation.serving_predict     # error tables by source, GPU, model, lengths

What a row becomes: its engine's preset (vllm, sglang, trtllm) with the scheduler limits the row
states (max_batch_size per rank, max_num_tokens), its per-replica TP/PP/EP (an attention-DP row
as one scheduler per attention group: `layout`), weights and KV-cache dtypes (an unstated KV
dtype is the engine default, the activation dtype), its lengths (a "random uniform lo..hi" draw
as such; other dataset means taken as fixed lengths, flagged by the `lengths` column) and its
load (offline, saturated and sweep maxima as offline; a fixed concurrency; a Poisson rate), split
over the replicas and attention groups. A row that measures one pool of a disaggregated
deployment alone is replayed as that pool: a prefill pool's prompts (one output token each) or
a decode pool's requests arriving with their KV cache (`Workload(prefilled=True)`). One constant is fitted on these rows: SGLang's step overhead
(perfmodel/fitted.yaml `serving.step_overhead_s.sglang`, on its two named light-load rows, which
the tables report apart); the other engines' stays 0.
"""
from __future__ import annotations

import functools
from perfmodel import fitted
from perfmodel.errors import InputError
from perfmodel.plan.simulator import Workload, simulate
from perfmodel.report.tables import format_table
from perfmodel.validation.serving import (SYSTEM_METRICS, ServingCase, compare,
                                          comparison_report, load_serving_cases)

ENGINE_PRESETS = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm"}
# Rows whose engine text names an older release with its own defaults -> that release's preset
# (engines.py): DataCrunch's SGLang runs are the December 2024 dev image, SGLang 0.4.1's
# defaults (0.4.0 of 2024-12-04 and 0.4.1 of 2024-12-26 share them)
VERSION_PRESETS = (("sglang", "Dec 2024", "sglang-0.4.1"),)
SIM_DTYPES = ("bf16", "fp16", "fp8", "nvfp4", "mxfp8")
OFFLINE_MODES = ("offline", "saturated", "sweep-max")
# Requests per simulation: enough for several refills of the batch at steady state, few enough
# that the 100-odd distinct simulations of the table run in about a minute on two cores.
MAX_REQUESTS = 600
MIN_REQUESTS = 200
# A Poisson-rate row replays its own request count (up to this many): above the engine's
# capacity the queue and the batch grow for the benchmark's whole duration, so the latencies it
# reports depend on how many requests it sent
MAX_RATE_REQUESTS = 4000
# a high-concurrency row simulates up to 4 waves of its concurrency (TensorRT-LLM's 896
# sequences per attention group: 3584 requests)
MAX_CONCURRENT_REQUESTS = 4096


def why_not(case: ServingCase) -> str | None:
    """Why the simulator cannot replay this row, or None if it can."""
    if case.spec_decoding in ("mtp", "eagle"):
        if not case.draft_tokens:
            return f"speculative decoding ({case.spec_decoding}) without a stated draft length"
        if case.relaxed_acceptance:
            return "speculative decoding with relaxed acceptance: no acceptance rate known"
        if spec_acceptance(case) is None:
            return (f"speculative decoding ({case.spec_decoding}) without a stated acceptance "
                    f"rate")
    if case.phase == "prefill":  # a prefill pool alone (the decode side assumed unlimited)
        if case.isl is None:
            return "no input length"
    elif case.phase == "decode":  # a decode pool alone, its requests' KV arriving prefilled
        if case.isl is None or case.osl is None:
            return "decode pool alone without an output length (its contexts are unknown)"
    elif case.disaggregated:
        return "disaggregated deployment whose prefill/decode pool split is not stated"
    elif case.isl is None or case.osl is None:
        return "no input or output length"
    if case.mode not in (*OFFLINE_MODES, "concurrency", "rate"):
        return f"load mode {case.mode} (MLPerf server/interactive scheduling) is not simulated"
    if case.mode == "rate" and not case.rate:
        return "no request rate"
    if case.mode == "concurrency" and not case.concurrency:
        return "no concurrency"
    if case.engine not in ENGINE_PRESETS:
        return f"engine {case.engine} has no preset"
    if case.weights_dtype not in SIM_DTYPES:
        return f"weights dtype {case.weights_dtype}"
    if case.metric in SYSTEM_METRICS and not case.replicas:
        return "replica count unknown for a system-wide rate"
    return None


# DeepSeek-V3's MTP module: "the acceptance rate of the second token prediction ranges between
# 85% and 90%" (DeepSeek-V3 Technical Report, arXiv 2412.19437, §5.4.3); the midpoint, taken for
# every draft of a DeepSeek MTP row that states no rate of its own (later drafts of a chained
# MTP3 are accepted less often in practice: an optimistic reading)
DEEPSEEK_MTP_ACCEPTANCE = 0.875


def spec_acceptance(case: ServingCase) -> float | None:
    """The draft acceptance probability a speculative row runs at: its own, else DeepSeek-V3's
    published MTP rate for DeepSeek MTP rows, else unknown (None)."""
    if case.spec_acceptance:
        return case.spec_acceptance
    if case.spec_decoding == "mtp" and case.model.startswith("deepseek"):
        return DEEPSEEK_MTP_ACCEPTANCE
    return None


def layout(case: ServingCase) -> tuple[int, int, int]:
    """(tp, ep, pp) the simulator runs. An attention-data-parallel row (TensorRT-LLM's
    enable_attention_dp, SGLang's --enable-dp-attention) keeps its rank count in `tp`, but its
    attention is not tensor-parallel: each rank schedules its own requests and the experts are
    spread over the ranks, which is the simulator's tp=1, ep=ranks (one simulated scheduler
    stands for one attention group, plan/simulator/cost.py)."""
    if case.attention_dp and case.ep > 1:
        return 1, case.ep, case.pp
    return case.tp, case.ep, case.pp


def schedulers(case: ServingCase) -> int:
    """Independent schedulers the row's load is split over: replicas × attention groups."""
    tp, ep, _ = layout(case)
    return (case.replicas or 1) * max(1, ep // tp)


def _lengths(value: float, span: tuple[int, int] | None):
    return ("uniform", *span) if span else max(1, round(value))


def _workload(case: ServingCase) -> Workload:
    isl = _lengths(case.isl, case.isl_range)
    k = schedulers(case)
    if case.phase == "prefill":  # one output token each: the pool's prompt throughput
        n = case.num_requests or MAX_REQUESTS
        return Workload("offline", requests=max(MIN_REQUESTS, min(MAX_REQUESTS, n // k)),
                        isl=isl, osl=1)
    osl = _lengths(case.osl, case.osl_range)
    if case.phase == "decode":  # requests arrive with their prompt's KV cache
        n = case.num_requests or MAX_REQUESTS
        return Workload("offline", requests=max(MIN_REQUESTS, min(MAX_REQUESTS, n // k)),
                        isl=isl, osl=osl, prefilled=True)
    if case.mode in OFFLINE_MODES:
        n = case.num_requests or MAX_REQUESTS
        return Workload("offline", requests=max(MIN_REQUESTS, min(MAX_REQUESTS, n // k)),
                        isl=isl, osl=osl)
    if case.mode == "concurrency":
        c = max(1, case.concurrency // k)
        # several waves of the concurrency (a fixed-length wave repeats exactly), at least
        # MIN_REQUESTS, never fewer than the concurrency itself
        return Workload("concurrency", requests=max(MIN_REQUESTS,
                                                    min(4 * c, MAX_CONCURRENT_REQUESTS)),
                        isl=isl, osl=osl, concurrency=c)
    n = case.num_requests or MAX_REQUESTS
    return Workload("rate", requests=max(MIN_REQUESTS, min(MAX_RATE_REQUESTS, n // k)),
                    isl=isl, osl=osl, rate=case.rate / k)


def engine_settings(case: ServingCase) -> dict:
    """The scheduler limits the row states (per rank = per scheduler), over the preset's."""
    out = {}
    if case.spec_decoding in ("mtp", "eagle") and case.draft_tokens:
        out["spec_tokens"] = case.draft_tokens
        out["spec_acceptance"] = spec_acceptance(case)
    if case.max_batch_per_rank:
        out["max_batch"] = case.max_batch_per_rank
    if case.max_num_tokens:
        out["max_tokens_per_step"] = case.max_num_tokens
    if case.mem_fraction is not None:
        out["gpu_memory_utilization"] = case.mem_fraction
    if "deepep" in case.engine_version.lower().replace("-", "") and case.ep > 1:
        out["moe_exchange"] = "deepep"  # the row's engine states DeepEP's kernels
    return out


@functools.lru_cache(maxsize=None)
def _metrics(model: str, hw, engine: str, tp: int, ep: int, pp: int, dtype: str,
             kv_dtype: str, workload: Workload, overrides: tuple) -> dict[str, float]:
    """One simulation's metrics; `hw` a hardware name or a Hardware (hashable: memoized)."""
    r = simulate(model, hw, workload, engine=engine, tp=tp, ep=ep, pp=pp, dtype=dtype,
                 kv_dtype=kv_dtype, **dict(overrides))
    return r.metrics()


def preset(case: ServingCase) -> str:
    """The engine preset the row runs on: its release's (VERSION_PRESETS), else its engine's."""
    for engine, text, name in VERSION_PRESETS:
        if case.engine == engine and text in case.engine_version:
            return name
    return ENGINE_PRESETS[case.engine]


def simulate_case(case: ServingCase, hw=None, **engine_overrides) -> float | None:
    """The row's metric from a simulation of one replica under its load (None where the
    simulator cannot express the row, see `why_not`, or the deployment does not fit);
    `engine_overrides` replace preset settings (the fit varies `step_overhead_s`); `hw` a
    Hardware to simulate on instead of the row's (the fit's, with its own fitted values)."""
    if why_not(case) is not None:
        return None
    kv = case.kv_dtype if case.kv_dtype in SIM_DTYPES else "bf16"  # engines' default: auto
    tp, ep, pp = layout(case)
    settings = {**engine_settings(case), **engine_overrides}
    try:
        m = _metrics(case.model, hw or case.hardware.name, preset(case), tp, ep,
                     pp, case.weights_dtype, kv, _workload(case),
                     tuple(sorted(settings.items())))
    except InputError:
        return None
    value = m.get(case.metric)
    if value is None:
        return None
    return value


def run(cases: list[ServingCase]):
    """Comparisons of every case (unpredicted ones included, with None)."""
    def predict(c: ServingCase) -> float | None:
        p = simulate_case(c)
        if p is None:
            return None
        # system-wide rates are compared per replica: scale the prediction back up (the
        # simulator's metrics already count a replica's attention groups)
        if c.metric in SYSTEM_METRICS and c.replicas:
            return p * c.replicas
        return p
    ids = {c.id for c in cases}
    fitted_rows = [r for k, c in fitted.CONSTANTS.items() if k.startswith("serving.")
                   for r in c.fitted_on if r in ids]
    return compare(cases, predict, fitted=fitted_rows)


def main() -> None:
    cases, skipped = load_serving_cases()
    comparisons = run(cases)
    reasons: dict[str, int] = {}
    for c in cases:
        r = why_not(c)
        if r is None and simulate_case(c) is None:
            r = "the deployment does not fit or the metric is not simulated"
        if r is not None:
            reasons[r] = reasons.get(r, 0) + 1
    print("Published serving rows replayed on the simulator (rows that informed a fitted constant "
          "apart)\n")
    print(comparison_report(comparisons, groupings=("source", "hardware", "model", "lengths",
                                                    "metric")))
    print("\nrows the simulator cannot replay:")
    print(format_table(["reason", "rows"], sorted(reasons.items(), key=lambda kv: -kv[1])))
    print(f"\n(and {len(skipped)} rows without a model file or hardware spec; "
          f"`python -m perfmodel.validation.serving`)")


if __name__ == "__main__":
    main()
