"""What a serving simulation measured (`SimResult`), per request and in summary.

TTFT = first token - arrival; E2E = last token - arrival; TPOT = (E2E - TTFT) / (output - 1)
per request (NaN for one-token outputs); ITL = every gap between a request's consecutive tokens.
Throughputs are over the window from the first arrival to the last completion, of the simulated
scheduler (`output_tokens_per_s`, `total_tokens_per_s`: input + output), and of the replica
(`replica_output_tokens_per_s`: × its data-parallel attention groups, ep / tp when ep > tp; per
GPU over max(tp, ep) · pp GPUs). `metrics()` flattens them under the names the serving validation
rows use (perfmodel.validation.serving.METRICS).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfmodel.plan.simulator.engines import Engine
from perfmodel.plan.simulator.kv import KvBudget


def distribution(values: np.ndarray) -> dict[str, float]:
    """mean, p50, p90, p99 of the finite values (NaN each where there is none)."""
    v = values[np.isfinite(values)]
    if not len(v):
        return {"mean": math.nan, "p50": math.nan, "p90": math.nan, "p99": math.nan}
    return {"mean": float(v.mean()), "p50": float(np.percentile(v, 50)),
            "p90": float(np.percentile(v, 90)), "p99": float(np.percentile(v, 99))}


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
