"""Disaggregated serving: a prefill pool and a decode pool of replicas, the KV cache moved
between them (`simulate_disaggregated`).

As DistServe (Zhong et al., OSDI'24, "DistServe: Disaggregating Prefill and Decoding for
Goodput-optimized LLM Serving", §2-3), Splitwise (Patel et al., ISCA'24) and the engines that
ship it (vLLM's and SGLang's PD disaggregation, NVIDIA Dynamo) run it:
  1. a request is prefilled on one of the prefill pool's schedulers (one per replica and
     attention group), which samples its first token: TTFT ends there;
  2. its prompt's KV cache, all layers, moves to a decode scheduler: every GPU of the prefill
     replica sends its shard over its own link at once, NVLink when both pools sit in one NVLink
     domain (an NVL72 rack, one HGX board), else the scale-out network (NIXL / Mooncake over
     RDMA NICs); time = bytes / (GPUs of the replica × link bandwidth) + the link's latency;
  3. the decode scheduler admits it with that KV already in its cache and decodes the remaining
     output (simulator Workload `prefilled`).
Each pool is the continuous-batching simulator (sim.py) replaying its share of the requests
(round robin over the schedulers) at the times they reach it. The decode pool never prefills,
so its steps carry no prefill chunks (the interference disaggregation removes); the prefill pool
never decodes. What the model leaves out: the transfer overlapping the prefill layer by layer
(engines that stream per layer hide most of it: ours is serial, an upper bound), the routers'
load balancing beyond round robin, and KV-transfer contention between requests.

Modes: offline (every request at t = 0) and a Poisson rate; a fixed concurrency is a closed
loop across both pools, not modelled (an InputError says so).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.plan.memory import as_model
from perfmodel.plan.simulator.layout import Layout
from perfmodel.plan.simulator.result import distribution, flat_metrics
from perfmodel.plan.simulator.sim import simulate
from perfmodel.plan.simulator.workload import Workload
from perfmodel.workloads.builder import kv_cache_bytes_per_token
from perfmodel.workloads.models import ModelSpec


# A pool is `replicas` replicas of one layout serving one phase.
Pool = Layout


def transfer_link(hw: Hardware, prefill: Pool, decode: Pool) -> str:
    """The link the KV cache crosses: NVLink when both pools fit one NVLink domain."""
    domain = hw.nvlink_domain_gpus
    if "nvlink" in hw.links and prefill.gpus + decode.gpus <= domain:
        return "nvlink"
    if "network" in hw.links:
        return "network"
    return "nvlink" if "nvlink" in hw.links else next(iter(hw.links))


def transfer_time_s(model: ModelSpec, hw: Hardware, prompt_tokens: np.ndarray, kv_dtype: str,
                    prefill: Pool, link: str) -> np.ndarray:
    """Seconds to move each prompt's KV cache (all layers) from a prefill replica, its GPUs
    sending their shards in parallel over `link`."""
    per_token = kv_cache_bytes_per_token(model, 1, kv_dtype)  # whole model, unsharded
    ln = hw.links[link]
    return (prompt_tokens * per_token / (prefill.gpus_per_replica * ln.bandwidth_bytes_per_s)
            + ln.latency_s)


@dataclass
class DisaggResult:
    """Per-request times of a disaggregated deployment and its throughput."""

    model: str
    hardware: str
    prefill: Pool
    decode: Pool
    link: str
    arrival_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    transfer_s: np.ndarray
    itl_s: np.ndarray
    duration_s: float
    preemptions: int

    @property
    def gpus(self) -> int:
        return self.prefill.gpus + self.decode.gpus

    @property
    def output_tokens_per_s(self) -> float:
        return float(self.osl.sum()) / self.duration_s

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus

    def summary(self) -> dict[str, dict[str, float]]:
        """mean, p50, p90, p99 of TTFT, TPOT, ITL, E2E and the KV transfer, in seconds."""
        return {k: distribution(getattr(self, k))
                for k in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "transfer_s")}

    def metrics(self) -> dict[str, float]:
        """The names SimResult.metrics uses, for the whole deployment."""
        out = {"output_tokens_per_s": self.output_tokens_per_s,
               "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
               "total_tokens_per_s": float(self.isl.sum() + self.osl.sum()) / self.duration_s,
               "input_tokens_per_s_per_gpu": float(self.isl.sum()) / self.duration_s
               / self.gpus}
        tpot = self.tpot_s[np.isfinite(self.tpot_s) & (self.tpot_s > 0)]
        out["output_tokens_per_s_per_user"] = float(np.mean(1.0 / tpot)) if len(tpot) else 0.0
        out.update(flat_metrics(self.summary()))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "hardware": self.hardware, "link": self.link,
                "prefill": self.prefill.__dict__, "decode": self.decode.__dict__,
                "gpus": self.gpus, "duration_s": self.duration_s,
                "preemptions": self.preemptions, **self.metrics()}


def _pool_share(n: int, schedulers: int) -> list[np.ndarray]:
    """Request indices of each scheduler: round robin in arrival order."""
    return [np.arange(k, n, schedulers) for k in range(schedulers)]


def simulate_disaggregated(model: ModelSpec | str, hw: Hardware | str, workload: Workload,
                           prefill: Pool, decode: Pool, engine: str = "vllm",
                           dtype: str = "bf16", kv_dtype: str = "bf16",
                           link: str | None = None, **engine_settings: Any) -> DisaggResult:
    """Serve `workload` (offline or a Poisson rate, for the whole deployment) on a prefill pool
    and a decode pool (see the module docstring); `link` overrides the KV transfer's link."""
    m, h = as_model(model), hardware(hw)
    if workload.mode not in ("offline", "rate", "trace"):
        raise InputError(f"workload: mode {workload.mode!r} is not simulated disaggregated "
                         f"(a fixed concurrency is a closed loop across both pools); use "
                         f"offline or a rate")
    if workload.prefilled:
        raise InputError("workload: prefilled requests are the decode pool's input, not a "
                         "deployment's")
    link = link or transfer_link(h, prefill, decode)
    if link not in h.links:
        raise InputError(f"link: {h.name} has no link {link!r} (has {', '.join(h.links)})")
    isl, osl, arrivals = workload.draw()
    n = len(isl)
    first = np.empty(n)
    preempted = 0
    for idx in _pool_share(n, prefill.schedulers):
        if not len(idx):
            continue
        w = Workload("trace", requests=len(idx), pairs=[(int(isl[i]), 1) for i in idx],
                     arrivals=[float(arrivals[i]) for i in idx], seed=workload.seed)
        r = simulate(m, h, w, engine, prefill.tp, prefill.ep, prefill.pp, dtype, kv_dtype,
                     **engine_settings)
        first[idx] = r.arrival_s + r.e2e_s
        preempted += r.preemptions
    moved = transfer_time_s(m, h, isl.astype(float), kv_dtype, prefill, link)
    ready = first + moved
    finish = first.copy()
    itl = [np.zeros(0)]
    decoding = np.flatnonzero(osl > 1)
    order = decoding[np.argsort(ready[decoding], kind="stable")]
    for idx in _pool_share(len(order), decode.schedulers):
        ids = order[idx]
        if not len(ids):
            continue
        w = Workload("trace", requests=len(ids), pairs=[(int(isl[i]), int(osl[i])) for i in ids],
                     arrivals=[float(ready[i]) for i in ids], prefilled=True,
                     seed=workload.seed)
        r = simulate(m, h, w, engine, decode.tp, decode.ep, decode.pp, dtype, kv_dtype,
                     **engine_settings)
        finish[ids] = r.arrival_s + r.e2e_s
        itl.append(r.itl_s)
        preempted += r.preemptions
    ttft = first - arrivals
    e2e = finish - arrivals
    tpot = np.full(n, np.nan)
    many = osl > 1
    tpot[many] = (finish[many] - first[many]) / (osl[many] - 1)
    duration = float(finish.max() - arrivals.min())
    return DisaggResult(m.name, h.name, prefill, decode, link, arrivals, isl, osl, ttft, tpot,
                        e2e, moved, np.concatenate(itl), duration, preempted)
