"""The published serving rows (`perfmodel.validation.serving`) replayed on the serving simulator
(`perfmodel.plan.simulator`): one simulation per distinct deployment and load, each row's metric
read from it, and the rows the simulator cannot express returned with the reason.

    python -m perfmodel.validation.serving_predict     # error tables by source, GPU, model, lengths

What a row becomes: its engine's preset (vllm, sglang, trtllm), its per-replica TP/PP/EP, weights
and KV-cache dtypes (an unstated KV dtype is the engine default, the activation dtype), its
lengths (dataset means taken as fixed lengths, flagged by the `lengths` column) and its load
(offline, saturated and sweep maxima as offline; a fixed concurrency; a Poisson rate shared by the
replicas). One constant is fitted on these rows: SGLang's step overhead
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
SIM_DTYPES = ("bf16", "fp16", "fp8", "nvfp4", "mxfp8")
OFFLINE_MODES = ("offline", "saturated", "sweep-max")
# Requests per simulation: enough for several refills of the batch at steady state, few enough
# that the 100-odd distinct simulations of the table run in about a minute on two cores.
MAX_REQUESTS = 600
MIN_REQUESTS = 200


def why_not(case: ServingCase) -> str | None:
    """Why the simulator cannot replay this row, or None if it can."""
    if case.spec_decoding in ("mtp", "eagle"):
        return f"speculative decoding ({case.spec_decoding}) is not simulated"
    if case.disaggregated or case.phase != "both":
        return "disaggregated prefill/decode pools are not simulated"
    if case.isl is None or case.osl is None:
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


def _workload(case: ServingCase) -> Workload:
    isl, osl = max(1, round(case.isl)), max(1, round(case.osl))
    replicas = case.replicas or 1
    if case.mode in OFFLINE_MODES:
        n = case.num_requests or MAX_REQUESTS
        return Workload("offline", requests=max(MIN_REQUESTS, min(MAX_REQUESTS, n // replicas)),
                        isl=isl, osl=osl)
    if case.mode == "concurrency":
        c = max(1, case.concurrency // replicas)
        return Workload("concurrency", requests=max(MIN_REQUESTS, min(MAX_REQUESTS, 4 * c)),
                        isl=isl, osl=osl, concurrency=c)
    n = case.num_requests or MAX_REQUESTS
    return Workload("rate", requests=max(MIN_REQUESTS, min(MAX_REQUESTS, n // replicas)),
                    isl=isl, osl=osl, rate=case.rate / replicas)


@functools.lru_cache(maxsize=None)
def _metrics(model: str, hw_name: str, engine: str, tp: int, ep: int, pp: int, dtype: str,
             kv_dtype: str, workload: Workload, overrides: tuple) -> dict[str, float]:
    r = simulate(model, hw_name, workload, engine=engine, tp=tp, ep=ep, pp=pp, dtype=dtype,
                 kv_dtype=kv_dtype, **dict(overrides))
    return r.metrics()


def simulate_case(case: ServingCase, **engine_overrides) -> float | None:
    """The row's metric from a simulation of one replica under its load (None where the
    simulator cannot express the row, see `why_not`, or the deployment does not fit);
    `engine_overrides` replace preset settings (the fit varies `step_overhead_s`)."""
    if why_not(case) is not None:
        return None
    kv = case.kv_dtype if case.kv_dtype in SIM_DTYPES else "bf16"  # engines' default: auto
    try:
        m = _metrics(case.model, case.hardware.name, ENGINE_PRESETS[case.engine], case.tp,
                     case.ep, case.pp, case.weights_dtype, kv, _workload(case),
                     tuple(sorted(engine_overrides.items())))
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
        # system-wide rates are compared per replica: scale the prediction back up
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
