"""What a serving simulation measured (`SimResult`), per request and in summary.

TTFT = first token - arrival; E2E = last token - arrival; TPOT = (E2E - TTFT) / (output - 1)
per request (NaN for one-token outputs); ITL = every gap between a request's consecutive tokens.
Throughputs are over the window from the first arrival to the last completion, of the simulated
scheduler (`output_tokens_per_s`, `total_tokens_per_s`: input + output), and of the replica
(`replica_output_tokens_per_s`: × its data-parallel attention groups, ep / tp when ep > tp; per
GPU over max(tp, ep) · pp GPUs). That window is the benchmark clients' (vLLM's benchmark_serving,
SGLang's bench_serving, InferenceX: first send to last completion), so it holds the ramp-down tail
after the last request is sent, and its throughput depends on how many requests were sent.
The steady-state throughputs (`steady_*`) count only the tokens produced while the offered load
is on and the requests in flight have ramped up: from the first arrival plus the median decode
time (E2E − TTFT: a request's lifetime once served, over which the batch fills; queueing left
out, so an overloaded queue does not push the window past its end) to the last arrival (a
closed loop's last send, when its queue empties; a Poisson stream's last arrival). A request's
first token counts at its time, the rest spread evenly over its decode (first token to last),
its prompt's tokens at its first token. Where that window is empty (offline; too few requests
for the load to settle) the steady figures are the benchmark's. `metrics()` flattens them under
the names the serving validation rows use (perfmodel.validation.serving.METRICS).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfmodel.plan.simulator.engines import Engine
from perfmodel.plan.simulator.kv import KvBudget

PERCENTILES = (50, 90, 99)


def distribution(values: np.ndarray) -> dict[str, float]:
    """mean, p50, p90, p99 of the finite values (NaN each where there is none)."""
    v = values[np.isfinite(values)]
    if not len(v):
        return {"mean": math.nan, "p50": math.nan, "p90": math.nan, "p99": math.nan}
    # the three percentiles from one partition of the values (each the same order statistics
    # and the same interpolation as its own np.percentile call)
    p50, p90, p99 = np.percentile(v, PERCENTILES).tolist()
    return {"mean": float(v.mean()), "p50": p50, "p90": p90, "p99": p99}


def flat_metrics(summary: dict[str, dict[str, float]]) -> dict[str, float]:
    """`summary()` flattened under the validation names: ttft_mean_s, ttft_median_s, ..."""
    out = {}
    for k, v in summary.items():
        base = k[:-2]
        out.update({f"{base}_mean_s": v["mean"], f"{base}_median_s": v["p50"],
                    f"{base}_p90_s": v["p90"], f"{base}_p99_s": v["p99"]})
    return out


@dataclass
class SimResult:
    """What one simulation measured (see the module docstring for the definitions)."""

    model: str
    hardware: str
    tp: int
    ep: int
    pp: int
    dtype: str
    kv_dtype: str
    engine: Engine
    workload: dict[str, Any]
    gpus: int
    attention_groups: int
    budget: KvBudget
    kv_capacity_blocks: int
    arrival_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    itl_s: np.ndarray
    generated: np.ndarray
    duration_s: float
    steps: int
    decode_steps: int
    prefill_steps: int
    mixed_steps: int
    preemptions: int
    peak_kv_blocks: int
    busy_s: float
    peak_running: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.kv_capacity_blocks * self.engine.block_tokens

    @property
    def weights_fit(self) -> bool:
        return self.budget.fits

    @property
    def output_tokens_per_s(self) -> float:
        return float(self.generated.sum()) / self.duration_s

    @property
    def total_tokens_per_s(self) -> float:
        return float(self.generated.sum() + self.isl.sum()) / self.duration_s

    @property
    def requests_per_s(self) -> float:
        return len(self.isl) / self.duration_s

    @property
    def replica_output_tokens_per_s(self) -> float:
        return self.output_tokens_per_s * self.attention_groups

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.replica_output_tokens_per_s / self.gpus

    @functools.cached_property
    def _steady(self) -> tuple[float, float, bool, float, float]:
        """(start, end, reached, output tokens, input tokens) of the steady window (module
        docstring), computed once; the benchmark's window, reached False, where the load has
        none."""
        first = float(self.arrival_s.min())
        start = first + float(np.median(self.e2e_s - self.ttft_s))
        end = float(self.arrival_s.max())
        reached = end > start
        if not reached:
            start, end = first, first + self.duration_s
        out, inp = self._tokens_in(start, end)
        return start, end, reached, out, inp

    def steady_window_s(self) -> tuple[float, float]:
        """(start, end) of the steady state (module docstring); the benchmark's window where
        the load has none."""
        return self._steady[:2]

    @property
    def steady_state(self) -> bool:
        """Whether the steady window exists (else the steady figures are the benchmark's)."""
        return self._steady[2]

    def _tokens_in(self, start: float, end: float) -> tuple[float, float]:
        """(output, input) tokens produced in [start, end] (module docstring)."""
        first = self.arrival_s + self.ttft_s
        last = self.arrival_s + self.e2e_s
        in_window = (first >= start) & (first <= end)
        out = in_window.astype(float)  # the first token
        rest = np.maximum(self.generated - 1, 0).astype(float)
        span = last - first
        overlap = np.clip(np.minimum(last, end) - np.maximum(first, start), 0.0, None)
        share = np.where(span > 0, overlap / np.where(span > 0, span, 1.0), in_window)
        out += rest * share
        return float(out.sum()), float(self.isl[in_window].sum())

    @property
    def steady_output_tokens_per_s(self) -> float:
        start, end, _, out, _ = self._steady
        return out / (end - start)

    @property
    def steady_total_tokens_per_s(self) -> float:
        start, end, _, out, inp = self._steady
        return (out + inp) / (end - start)

    @property
    def steady_requests_per_s(self) -> float:
        """Completions in the steady window per second."""
        start, end = self.steady_window_s()
        done = self.arrival_s + self.e2e_s
        return float(((done >= start) & (done <= end)).sum()) / (end - start)

    def summary(self) -> dict[str, dict[str, float]]:
        """mean, p50, p90, p99 of TTFT, TPOT, ITL and E2E in seconds."""
        return {k: distribution(getattr(self, k)) for k in ("ttft_s", "tpot_s", "itl_s", "e2e_s")}

    def metrics(self) -> dict[str, float]:
        """Flat metrics under the names of `perfmodel.validation.serving.METRICS`: throughputs
        of the replica (per GPU where named so), per user (1 / TPOT, mean over requests), and
        mean / median / p99 latencies in seconds."""
        gpus = self.gpus
        groups = self.attention_groups
        out = {"output_tokens_per_s": self.replica_output_tokens_per_s,
               "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
               "total_tokens_per_s": self.total_tokens_per_s * groups,
               "total_tokens_per_s_per_gpu": self.total_tokens_per_s * groups / gpus,
               "input_tokens_per_s_per_gpu": float(self.isl.sum()) / self.duration_s * groups
               / gpus}
        tpot = self.tpot_s[np.isfinite(self.tpot_s) & (self.tpot_s > 0)]
        out["output_tokens_per_s_per_user"] = float(np.mean(1.0 / tpot)) if len(tpot) else 0.0
        # trtllm-bench's "per user output throughput [w/ ctx]": output tokens over the whole
        # request latency, prefill and queueing included, averaged over requests
        e2e = self.e2e_s > 0
        out["output_tokens_per_s_per_user_with_ctx"] = (
            float(np.mean(self.osl[e2e] / self.e2e_s[e2e])) if e2e.any() else 0.0)
        out.update(flat_metrics(self.summary()))
        return out

    def to_dict(self, per_request: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "model": self.model, "hardware": self.hardware, "tp": self.tp, "ep": self.ep,
            "pp": self.pp, "dtype": self.dtype, "kv_dtype": self.kv_dtype,
            "engine": self.engine.to_dict(), "workload": self.workload, "gpus": self.gpus,
            "attention_groups": self.attention_groups, "memory": self.budget.to_dict(),
            "weights_fit": self.weights_fit, "kv_capacity_blocks": self.kv_capacity_blocks,
            "kv_capacity_tokens": self.kv_capacity_tokens, "requests": len(self.isl),
            "input_tokens": int(self.isl.sum()), "output_tokens": int(self.generated.sum()),
            "duration_s": self.duration_s, "output_tokens_per_s": self.output_tokens_per_s,
            "total_tokens_per_s": self.total_tokens_per_s,
            "requests_per_s": self.requests_per_s,
            "replica_output_tokens_per_s": self.replica_output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
            "steady_state": self.steady_state,
            "steady_window_s": list(self.steady_window_s()),
            "steady_output_tokens_per_s": self.steady_output_tokens_per_s,
            "steady_total_tokens_per_s": self.steady_total_tokens_per_s,
            "steady_requests_per_s": self.steady_requests_per_s,
            "steps": self.steps, "decode_steps": self.decode_steps,
            "prefill_steps": self.prefill_steps, "mixed_steps": self.mixed_steps,
            "preemptions": self.preemptions, "peak_kv_blocks": self.peak_kv_blocks,
            "peak_running": self.peak_running,
            "gpu_busy_fraction": self.busy_s / self.duration_s if self.duration_s else 0.0,
            **self.summary(), **self.extra}
        if per_request:
            d["per_request"] = {k: getattr(self, k).tolist() for k in
                                ("arrival_s", "isl", "osl", "ttft_s", "tpot_s", "e2e_s")}
        return d
