"""Serving capacity: the largest decode batch under latency SLOs, the GPUs a throughput target
needs, and sweeps over hardware × TP × dtype with their Pareto front; memory fit enforced
(`perfmodel.plan.memory`).

Serving model (continuous batching, as vLLM/SGLang/TensorRT-LLM run it): `batch` sequences decode
together; each step emits one token per sequence. A sequence's KV cache holds its prompt and the
tokens generated so far; the decode step is predicted at the mean context, prompt + output/2.
Every `output` steps a slot is refilled by a prefill of `prompt` tokens, so per step the replica
also pays batch/output prefills on average:
    throughput (output tokens/s) = batch / (TPOT + batch · TTFT / output)
with TTFT the prefill time of one prompt on an idle replica (queueing is not modelled).
Memory: each sequence's KV cache is sized at prompt + output tokens in `kv_dtype` (the worst case
a static reservation needs); `kv_occupancy` < 1 sizes it at that share, e.g. a paged cache's mean
(prompt + output/2) / (prompt + output) under continuous batching (`plan.memory.serving_memory`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.plan.memory import MemoryFit, as_model, serving_memory
from perfmodel.predict import predict
from perfmodel.report.progress import Progress
from perfmodel.workloads.builder import build_graph
from perfmodel.workloads.models import ModelSpec

DEFAULT_BATCHES = tuple(sorted({1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320,
                                384, 512, 640, 768, 1024}))


@dataclass(frozen=True)
class ServingPoint:
    batch: int
    tpot_s: float
    ttft_s: float
    tokens_per_s: float          # output tokens/s of one replica
    tokens_per_s_per_gpu: float
    memory: MemoryFit
    meets_slo: bool

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["memory"] = self.memory.to_dict()
        return d


@dataclass
class ServingPlan:
    model: str
    hardware: str
    tp: int
    ep: int
    pp: int
    dtype: str
    prompt: int
    output: int
    gpus_per_replica: int
    tpot_slo_s: float | None
    ttft_slo_s: float | None
    points: list[ServingPoint] = field(default_factory=list)

    @property
    def best(self) -> ServingPoint | None:
        """The largest batch that fits in memory and meets every SLO."""
        ok = [p for p in self.points if p.meets_slo and p.memory.fits]
        return max(ok, key=lambda p: p.batch) if ok else None

    def gpus_for(self, tokens_per_s: float) -> int:
        """GPUs needed for a target output-token throughput at the best batch."""
        best = self.best
        if best is None:
            raise InputError(f"{self.model} on {self.hardware}: no batch meets the SLOs and fits")
        return math.ceil(tokens_per_s / best.tokens_per_s) * self.gpus_per_replica

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "points"}
        d["points"] = [p.to_dict() for p in self.points]
        d["best"] = self.best.to_dict() if self.best else None
        return d

    def plot(self, ax=None):
        from perfmodel.plan.plots import plot_serving_plan
        return plot_serving_plan(self, ax=ax)


def plan_serving(model: ModelSpec | str, hw: Hardware | str, tp: int = 1, ep: int = 1,
                 pp: int = 1, dtype: str = "bf16", prompt: int = 2048, output: int = 256,
                 tpot_slo_s: float | None = None, ttft_slo_s: float | None = None,
                 batches: Iterable[int] = DEFAULT_BATCHES, level: str = "pipes",
                 progress: bool = False, kv_dtype: str | None = None,
                 kv_occupancy: float = 1.0) -> ServingPlan:
    """Evaluate decode batches for one deployment; `best` is the largest under the SLOs.
    `kv_dtype`: the KV cache's storage type (None: bf16), in the attention ops and in memory;
    `kv_occupancy`: the share of the worst-case cache that memory is sized for (module
    docstring)."""
    m, h = as_model(model), hardware(hw)
    gpus = max(tp, ep) * pp
    replicas_attn = max(1, ep // tp)  # data-parallel attention groups sharing the experts
    context = prompt + output // 2
    ttft = predict(build_graph(m, "prefill", batch=1, seq=prompt, tp=tp, ep=ep, pp=pp,
                               dtype=dtype, kv_dtype=kv_dtype), h, level).total_time_s
    plan = ServingPlan(m.name, h.name, tp, ep, pp, dtype, prompt, output, gpus, tpot_slo_s,
                       ttft_slo_s)
    batches = sorted(set(batches))
    bar = Progress(len(batches), f"{m.name} on {h.name}", force=progress)
    for b in batches:
        # each tensor-parallel group keeps the KV cache of its own `b` sequences
        mem = serving_memory(m, h, b, prompt + output, tp, ep, pp, dtype, prompt, kv_dtype,
                             kv_occupancy)
        tpot = predict(build_graph(m, "decode", batch=b, context=context, tp=tp, ep=ep, pp=pp,
                                   dtype=dtype, kv_dtype=kv_dtype), h, level).total_time_s
        seqs = b * replicas_attn
        rate = seqs / (tpot + seqs * ttft / output)
        ok = (tpot_slo_s is None or tpot <= tpot_slo_s) and (ttft_slo_s is None
                                                             or ttft <= ttft_slo_s)
        plan.points.append(ServingPoint(seqs, tpot, ttft, rate, rate / gpus, mem, ok))
        bar.update()
    return plan


def sweep_serving(model: ModelSpec | str, hws: Sequence[str], tps: Sequence[int],
                  dtypes: Sequence[str] = ("bf16",), batches: Iterable[int] = DEFAULT_BATCHES,
                  progress: bool = False, **kw: Any) -> list[dict[str, Any]]:
    """Tidy rows (one per hardware × TP × dtype × batch) for tables, CSV and Pareto plots."""
    rows = []
    m = as_model(model)
    for hw_name in hws:
        for tp in tps:
            for dt in dtypes:
                try:
                    plan = plan_serving(m, hw_name, tp=tp, dtype=dt, batches=batches,
                                        progress=progress, **kw)
                except InputError:
                    continue  # e.g. tp does not divide the heads, dtype unsupported
                for p in plan.points:
                    rows.append({"hardware": plan.hardware, "tp": tp, "dtype": dt,
                                 "batch": p.batch, "tpot_s": p.tpot_s, "ttft_s": p.ttft_s,
                                 "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu,
                                 "fits": p.memory.fits, "meets_slo": p.meets_slo,
                                 "gpus": plan.gpus_per_replica})
    return rows


def pareto_front(rows: list[dict[str, Any]], x: str = "tpot_s",
                 y: str = "tokens_per_s_per_gpu", maximize_x: bool = False
                 ) -> list[dict[str, Any]]:
    """Rows not dominated in (lower x, or higher with `maximize_x`; higher y) among those that
    fit in memory and have both values, in the order of x from best to worst."""
    sign = -1.0 if maximize_x else 1.0
    cand = [r for r in rows if r["fits"] and r.get(x) is not None and r.get(y) is not None]
    front, best_y = [], -math.inf
    for r in sorted(cand, key=lambda r: (sign * r[x], -r[y])):
        if r[y] > best_y:
            front.append(r)
            best_y = r[y]
    return front
