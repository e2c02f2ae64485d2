"""Serving capacity: the largest decode batch under latency SLOs, the GPUs a throughput target
needs, and sweeps over hardware × TP × dtype with their Pareto front; memory fit enforced
(`perfmodel.plan.memory`).

Serving model: the steady state of continuous batching with chunked prefill, as vLLM, SGLang and
TensorRT-LLM run it and as the serving simulator (`perfmodel.plan.simulator`) replays it step by
step. `batch` sequences decode together, each step one token per sequence, at the mean context
prompt + output/2. A sequence finishes every `output` steps and its slot is refilled, so each
step also prefills batch · prompt / output prompt tokens on average, as chunks in the same step:
the step is priced once with both (its weights read once, `StepCost.step_times` with the decode
tokens and the chunks), and
    TPOT = that step's time,   throughput (output tokens/s) = batch / TPOT.
TTFT is the prefill of one prompt on an idle replica (a lower bound: queueing is the simulator's
job). Pipeline stages: pp micro-batches of batch / pp sequences in flight; a sequence's next token
waits for its micro-batch to pass every stage, TPOT = max(step latency, pp × stage time).
Memory: a paged KV cache holds each sequence's current length, on average prompt + output/2 of
the prompt + output it grows to: `kv_occupancy` None sizes the cache at that mean (1.0: the
worst case a static reservation needs), in `kv_dtype` (`plan.memory.serving_memory`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from perfmodel.errors import InputError, check_result
from perfmodel.hardware import Hardware, hardware
from perfmodel.plan.arguments import check_arguments
from perfmodel.plan.memory import MemoryFit, as_model, serving_memory
from perfmodel.report.progress import Progress
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
                 kv_occupancy: float | None = None) -> ServingPlan:
    """Evaluate decode batches for one deployment; `best` is the largest under the SLOs.
    `kv_dtype`: the KV cache's storage type (None: bf16), in the attention ops and in memory;
    `kv_occupancy`: the share of the worst-case cache that memory is sized for (None: a paged
    cache's mean, module docstring)."""
    check_arguments(plan_serving, locals())  # types and ranges, one line per problem
    from perfmodel.plan.simulator.cost import StepCost
    m, h = as_model(model), hardware(hw)
    gpus = max(tp, ep) * pp
    replicas_attn = max(1, ep // tp)  # data-parallel attention groups sharing the experts
    context = prompt + output / 2
    if kv_occupancy is None:
        kv_occupancy = context / (prompt + output)
    cost = StepCost(m, h, tp, ep, pp, dtype, kv_dtype or "bf16", level)
    ttft = cost.prefill_time_s(prompt)
    plan = ServingPlan(m.name, h.name, tp, ep, pp, dtype, prompt, output, gpus, tpot_slo_s,
                       ttft_slo_s)
    batches = sorted(set(batches))
    bar = Progress(len(batches), f"{m.name} on {h.name}", force=progress)
    for b in batches:
        # each tensor-parallel group keeps the KV cache of its own `b` sequences
        mem = serving_memory(m, h, b, prompt + output, tp, ep, pp, dtype, prompt, kv_dtype,
                             kv_occupancy)
        micro = max(1, -(-b // pp))  # sequences of one pipeline micro-batch
        latency, stage = cost.step_times(micro, micro * context,
                                         refill_chunks(micro, prompt, output))
        tpot = max(latency, pp * stage)
        seqs = b * replicas_attn
        rate = seqs / tpot
        ok = (tpot_slo_s is None or tpot <= tpot_slo_s) and (ttft_slo_s is None
                                                             or ttft <= ttft_slo_s)
        check_result(f"plan_serving batch {b}", {"tpot_s": tpot, "ttft_s": ttft,
                                                  "tokens_per_s": rate,
                                                  "memory": mem.total_bytes})
        plan.points.append(ServingPoint(seqs, tpot, ttft, rate, rate / gpus, mem, ok))
        bar.update()
    return plan


def refill_chunks(batch: int, prompt: int, output: int) -> list[tuple[int, int]]:
    """The prefill chunks of one steady-state step: batch / output prompts start per step, i.e.
    batch · prompt / output fresh prompt tokens, as whole prompts and one partial (prior context
    0: a chunk's own causal attention, the cheaper end of chunked prefill)."""
    tokens = batch * prompt / output
    whole, part = int(tokens // prompt), round(tokens % prompt)
    return [(prompt, 0)] * whole + ([(part, 0)] if part else [])


def sweep_serving(model: ModelSpec | str, hws: Sequence[str], tps: Sequence[int],
                  dtypes: Sequence[str] = ("bf16",), batches: Iterable[int] = DEFAULT_BATCHES,
                  progress: bool = False, **kw: Any) -> list[dict[str, Any]]:
    """Tidy rows (one per hardware × TP × dtype × batch) for tables, CSV and Pareto plots."""
    # plan_serving's checks, before the loop that skips the combinations it refuses
    check_arguments(plan_serving, {"model": model, "batches": batches, "progress": progress,
                                   **kw})
    for name, values in (("hw", hws), ("tp", tps), ("dtype", dtypes)):
        for v in values:
            check_arguments(plan_serving, {name: v})
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
