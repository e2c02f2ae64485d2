"""Deployment search: every way to lay a model out on exactly `gpus` GPUs, each one simulated
(serving) or predicted (training), ranked, with the layouts that do not fit kept and their
reason given.

Serving (`search_serving`). A layout is tensor parallelism `tp`, pipeline stages `pp` and, for
MoE models, expert parallelism `ep`; one replica takes max(tp, ep) · pp GPUs (the simulator's
count: with ep > tp the experts span ep GPUs and attention runs in ep / tp data-parallel
groups) and `gpus` / (max(tp, ep) · pp) replicas serve side by side. Enumerated: tp and pp over
the divisors of `gpus`; for MoE models ep = 1 (experts sharded like the dense layers) or ep a
multiple of tp dividing `gpus`; dense models ep = 1; only layouts whose replicas use exactly
`gpus` GPUs. A fixed `tp`, `pp` or `ep` pins that axis. Each layout is checked in order:
  not valid       the builder refuses it (tp must divide the heads, pp ≤ layers, ep must divide
                  the experts, ...);
  does not fit    the weights (+ activations + workspace) leave no KV block, or the longest
                  request does not fit one scheduler's KV cache (the reason gives the numbers);
  else it is simulated once (`perfmodel.plan.simulator.simulate`, one `StepCost` per layout
  reused by its sweep points) and its row gets the replica's numbers times the replicas.
The workload describes the whole deployment's traffic: a rate of R requests/s gives each replica
R / replicas (a Poisson stream split at random is Poisson); a concurrency of C gives each
replica c = ceil(C / replicas) in flight, and the deployment's throughput is the replica's times
C / c (the replicas that have work); offline gives every replica a full queue. A replica whose
experts span more GPUs than its attention (ep > tp) runs ep / tp data-parallel attention groups,
each its own scheduler (TensorRT-LLM's attention DP, SGLang's --enable-dp-attention): the
simulated group gets its share, R / (replicas · groups) or ceil(C / (replicas · groups)).

Simulated requests per replica (`requests` of the workload: its share, N / replicas; else):
  offline      B = min(the engine's max batch, KV tokens // mean(isl + osl)) requests a replica
               holds at once; 4 × B when the KV cache sets B (preemption and recompute need a
               few refills to settle: throughput within 0.3-2 % of 8 × B on Llama-3 8B/70B
               and Qwen3-30B-A3B, where 2 × B is up to 13 % off), else 1 × B with fixed
               lengths (within 1 % of 4 × B: the batch runs in lockstep, there is no refill
               dynamics to wait for), 2 × B with varying lengths;
  concurrency  10 × c (InferenceX's prompts per run), a sweep point 4 × c;
  rate         4 × the expected requests in flight (the replica's rate × one request's
               unloaded latency, at least 1, at most B);
clamped to [MIN_REQUESTS, MAX_REQUESTS]. Offline latencies (TTFT above all) grow with the
requests queued at t = 0, so they are the simulated queue's: latency SLOs are meaningful with a
rate or a concurrency (or the sweep's points).

Row metrics: output tokens/s of the deployment, per GPU, per user (1 / mean TPOT; the
simulator's `SimResult.metrics` averages 1 / TPOT over requests instead), TTFT, TPOT
and E2E p50/p99, preemptions, and the memory of one GPU (weights, KV cache space, activations,
workspace, usable HBM: the simulator's `KvBudget`). `meets_slo` compares p99 TTFT and p99 TPOT
with the SLOs given. `best(rows)` is the highest tokens/s/GPU that meets the SLOs; `pareto(rows)`
the rows that fit and are not dominated in (tokens/s/GPU, tokens/s/user). With `sweep=True` each
layout is also simulated at SWEEP_CONCURRENCY requests in flight per replica, the points that
trace its throughput-interactivity curve.

Training (`search_training`): tp · pp · dp = `gpus` (MoE: ep = 1 or a divisor of tp · dp that
divides the experts), the global batch split over dp replicas (it must divide), each layout
checked by the builder and `perfmodel.plan.memory.memory_fit`, then predicted by
`perfmodel.plan.training.plan_training`; ranked by step time.

Speed: a layout costs its StepCost's node evaluations (each body node builds and predicts a
prefill graph, ~4-5 ms for Llama-3-70B; layouts of one (tp, ep) at several pipeline depths share
them, plan/simulator/cost.py SHARED_TABLES) and ~10-20 µs per simulated step (a pipeline of pp
stages steps pp schedulers; decode-only steps take the simulator's shortcut, sim.py
`Simulation.decode_step`). A row reads the TTFT, TPOT and E2E distributions only (not the ITL's,
whose percentiles over every token gap cost more than the rest of the row). Layouts run in worker processes (`jobs`; default one per CPU on
Linux, where forking is cheap; `jobs=1` runs them here), the heaviest first.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from perfmodel.errors import InputError, check_result
from perfmodel.hardware import Hardware, hardware
from perfmodel.plan.arguments import check_arguments
from perfmodel.plan.memory import as_model
from perfmodel.plan.simulator.layout import Layout
from perfmodel.plan.serving import pareto_front
from perfmodel.report.progress import Progress
from perfmodel.workloads.models import ModelSpec

SWEEP_CONCURRENCY = (1, 4, 16, 64, 256)
MIN_REQUESTS = 4
MAX_REQUESTS = 4096
OFFLINE_WAVES = 2           # batch-limited offline, varying lengths: a batch and a refill
KV_LIMITED_WAVES = 4        # KV-limited offline: preemption and recompute settle by then
# a closed loop sends 10 x its concurrency (InferenceX's benchmark_lib.sh run_benchmark_serving:
# --num-prompts 10 x CONC): about ten waves, the first one's prefill collision and the last
# one's ramp-down tail among them, as the benchmark measures them
CONCURRENCY_WAVES = 10
# a sweep point (five a layout) simulates fewer waves: its Pareto point, not a benchmark replay
SWEEP_WAVES = 4
RATE_WAVES = 4
V0_MIN_BATCHED_TOKENS = 2048  # the simulator's token budget when an engine sets none


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def serving_layouts(model: ModelSpec, gpus: int, tp: int | None = None, pp: int | None = None,
                    ep: int | None = None) -> list[Layout]:
    """The replica layouts that use exactly `gpus` GPUs (module docstring), fixed axes
    honoured; InputError naming the flag when none does."""
    _check_positive(gpus=gpus, tp=tp, pp=pp, ep=ep)
    divs = divisors(gpus)
    tps = [tp] if tp else divs
    pps = [pp] if pp else divs
    if ep:
        eps = [ep]
    elif model.is_moe:
        eps = divs
    else:
        eps = [1]
    out = []
    for t in tps:
        for e in eps:
            if not ep and e > 1 and e % t:
                continue  # experts sharded like the dense layers (1) or over a multiple of tp
            for p in pps:
                per = max(t, e) * p
                if gpus % per == 0:
                    out.append(Layout(tp=t, ep=e, pp=p, replicas=gpus // per))
    if not out:
        fixed = " ".join(f"--{k} {v}" for k, v in (("tp", tp), ("ep", ep), ("pp", pp)) if v)
        raise InputError(f"--gpus: {gpus} GPUs cannot be split into replicas of {fixed} "
                         f"(a replica takes max(tp, ep) · pp GPUs)")
    return sorted(out, key=lambda lay: (lay.gpus_per_replica, lay.tp, lay.ep, lay.pp))


def _check_positive(**values: int | None) -> None:
    bad = [f"--{k}: expected a positive integer, got {v!r}" for k, v in values.items()
           if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1)]
    if bad:
        raise InputError(bad)


# -- serving -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Serving:
    """What every layout of one serving search shares (sent to the worker processes)."""

    model: ModelSpec
    hw: Hardware
    workload: Any          # perfmodel.plan.simulator.Workload of the whole deployment
    engine: str
    dtype: str
    kv_dtype: str
    tpot_slo_s: float | None
    ttft_slo_s: float | None
    sweep: tuple[int, ...]
    engine_overrides: tuple[tuple[str, Any], ...]
    moe_loads: str | None = None   # routing from recorded expert loads (Workload.moe_loads)
    moe_replication: float = 1.0   # > 1: EPLB's redundant slots (from the loads' statistics)


def search_serving(model: ModelSpec | str, hw: Hardware | str, gpus: int, workload=None,
                   engine: str = "vllm", dtype: str = "bf16", kv_dtype: str | None = None,
                   tp: int | None = None, pp: int | None = None, ep: int | None = None,
                   tpot_slo_s: float | None = None, ttft_slo_s: float | None = None,
                   progress: bool = False, sweep: bool | Sequence[int] = False,
                   jobs: int | None = None, moe_loads: str | None = None,
                   moe_replication: float = 1.0,
                   while_waiting: Callable[[], Any] | None = None,
                   **engine_overrides: Any) -> list[dict[str, Any]]:
    """Simulate every replica layout of `model` on exactly `gpus` GPUs of `hw` serving
    `workload` (a `perfmodel.plan.simulator.Workload` of the whole deployment; default offline,
    isl 1024, osl 128) and return one row per layout, best first (`rank`), layouts that are not
    valid or do not fit after with their `reason`. `sweep`: also simulate each layout at
    SWEEP_CONCURRENCY (or the given) requests in flight per replica (rows with `point`
    "c=N"). `progress`: a bar on stderr. `jobs`: worker processes (module docstring).
    `engine_overrides`: Engine fields (max_batch=..., ...). `moe_loads`, `moe_replication`:
    route an MoE model's layers from a recorded expert-loads file, with EPLB's placement of
    (replication − 1)·experts redundant slots when replication > 1 (Workload.moe_loads).
    `while_waiting`: called here once the worker processes run, if there are any (the CLI
    imports its plotting then). See the module docstring."""
    check_arguments(search_serving, locals())  # types and ranges, one line per problem
    from perfmodel.plan.simulator import Workload
    from perfmodel.plan.simulator.engines import ALIASES, ENGINES
    from perfmodel.plan.simulator.kv import KV_DTYPES
    m, h = as_model(model), hardware(hw)
    workload = workload if workload is not None else Workload()
    if ALIASES.get(engine, engine) not in ENGINES:
        raise InputError(f"--engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
    kv_dtype = kv_dtype or "bf16"
    if kv_dtype not in KV_DTYPES:
        raise InputError(f"--kv-dtype: expected one of {', '.join(KV_DTYPES)}, got "
                         f"{kv_dtype!r}")
    _check_slo(tpot_slo_s, "--tpot-slo")
    _check_slo(ttft_slo_s, "--ttft-slo")
    points = tuple(SWEEP_CONCURRENCY if sweep is True else (sweep or ()))
    if any(not isinstance(c, int) or c < 1 for c in points):
        raise InputError(f"sweep: expected positive concurrencies, got {points!r}")
    if engine_overrides:  # a bad setting is the caller's, not a layout's
        from perfmodel.plan.simulator.engines import engine_preset
        engine_preset(engine, h).replace(**engine_overrides)
    check_moe_loads(m, moe_loads, moe_replication)
    layouts = serving_layouts(m, gpus, tp, pp, ep)
    job = _Serving(m, h, workload, engine, dtype, kv_dtype, tpot_slo_s, ttft_slo_s, points,
                   tuple(sorted(engine_overrides.items())), moe_loads, moe_replication)
    label = f"{m.name} on {gpus}x {h.name}"
    per_layout = _run_all(_serve_layout, job, layouts, label, progress, jobs,
                          # a process runs a key's layouts in turn: those of one (tp, ep) share
                          # StepCost tables (cost.py _shared); an MoE model's of one ep also
                          # share its routings (the MoE op's at each token count)
                          group=lambda lay: (lay.ep if m.is_moe else (lay.tp, lay.ep),
                                             (-lay.pp, lay.tp)),
                          weight=lambda lay: _weight(job, lay), while_waiting=while_waiting)
    return rank_serving([r for rows in per_layout for r in rows])


def check_moe_loads(m: ModelSpec, moe_loads: str | None, moe_replication: float) -> None:
    """The expert-loads options against the model, as the CLI names them."""
    from perfmodel.workloads.builder import Workload as GraphWorkload
    GraphWorkload("decode", moe_loads=moe_loads, moe_replication=moe_replication).check(
        m, {"moe_loads": "--moe-loads", "moe_replication": "--moe-replication"})
    if moe_replication != 1.0 and not m.is_moe:
        raise InputError(f"--moe-replication: {m.name} has no experts to replicate")


def _check_slo(v: float | None, flag: str) -> None:
    if v is not None and not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
        raise InputError(f"{flag}: expected a positive duration in seconds, got {v!r}")


def _layout_fields(lay: Layout) -> dict[str, Any]:
    return {"layout": lay.label, "tp": lay.tp, "pp": lay.pp, "ep": lay.ep,
            "replicas": lay.replicas, "gpus_per_replica": lay.gpus_per_replica,
            "gpus": lay.gpus}


# the latency statistics of a serving row: mean, median (p50), p90, p99 of each metric, as the
# benchmark clients report them (docs/cli.md "plan" defines each)
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
LATENCY_STATS = ("mean", "p50", "p90", "p99")
SERVING_NUMBERS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu",
                   "output_tokens_per_s_per_user", "replica_output_tokens_per_s",
                   "total_tokens_per_s", "total_tokens_per_s_per_gpu", "requests_per_s",
                   "steady_output_tokens_per_s", "steady_output_tokens_per_s_per_gpu",
                   "steady_total_tokens_per_s_per_gpu", "steady_state",
                   *(f"{m}_{s}_s" for m in LATENCY_METRICS for s in LATENCY_STATS),
                   "preemptions", "requests", "concurrency")
MEMORY_FIELDS = ("weights_bytes", "kv_cache_bytes", "activation_bytes", "workspace_bytes",
                 "usable_bytes", "kv_capacity_tokens")


def _empty_row(job: _Serving, lay: Layout, point: str) -> dict[str, Any]:
    row = {**_layout_fields(lay), "point": point, "mode": job.workload.mode,
           "engine": job.engine, "dtype": job.dtype, "kv_dtype": job.kv_dtype,
           "fits": False, "valid": True, "reason": None, "meets_slo": False}
    row.update({k: None for k in MEMORY_FIELDS})
    row.update({k: None for k in SERVING_NUMBERS})
    return row


@dataclass
class _Prepared:
    """A layout's checks before simulating: its refusal, or what the simulation needs."""

    reason: str | None = None
    valid: bool = True
    memory: dict[str, Any] | None = None
    batch: int = 1               # requests one replica holds at once (engine or KV limit)
    kv_limited: bool = False
    isl_mean: float = 0.0
    osl_mean: float = 0.0
    fixed_lengths: bool = True
    fp8_attention: bool = False  # the engine's attention on an FP8 cache (Engine.fp8_attention)
    fusion: str = "none"         # the engine's fused kernels (Engine.kernel_fusion)
    attention_kernel: str | None = None  # the engine's GQA attention family
    moe_exchange: str = "alltoall"       # the engine's MoE dispatch (Engine.moe_exchange)
    allreduce: str = "auto"              # the engine's all-reduce dispatch (Engine.allreduce)
    gemm_dispatch: str = "best"          # the engine's GEMM kernels (Engine.gemm_dispatch)
    moe_kernel: str = "grouped"          # the engine's mixed-input MoE kernel (Engine.moe_kernel)

    def requests(self, w) -> int:
        """Simulated requests of the workload's own point, before clamping (module
        docstring); rate mode needs the StepCost and is estimated later."""
        if w.mode == "offline":
            return self.batch * (KV_LIMITED_WAVES if self.kv_limited else
                                 1 if self.fixed_lengths else OFFLINE_WAVES)
        if w.mode == "concurrency":
            return CONCURRENCY_WAVES * w.concurrency
        return RATE_WAVES * self.batch


def _prepare(job: _Serving, lay: Layout) -> _Prepared:
    from perfmodel.plan.simulator import Workload
    from perfmodel.plan.simulator.engines import engine_preset
    from perfmodel.plan.simulator.kv import kv_budget
    from perfmodel.workloads.builder import Workload as GraphWorkload
    m, h, w = job.model, job.hw, job.workload
    try:
        GraphWorkload("decode", batch=1, seq=16, tp=lay.tp, ep=lay.ep, pp=lay.pp,
                      dtype=job.dtype, kv_dtype=job.kv_dtype).check(m)
        eng = engine_preset(job.engine, h, lay.tp, lay.pp)
        if job.engine_overrides:
            eng = eng.replace(**dict(job.engine_overrides))
    except InputError as e:
        return _Prepared("not valid: " + "; ".join(_strip(p, "workload: ")
                                                    for p in e.problems), valid=False)
    isl, osl, _ = Workload("offline", min(w.n, MAX_REQUESTS), w.isl, w.osl, w.pairs,
                           seed=w.seed).draw()  # the lengths the replicas will see
    longest = int((isl + osl).max())
    budget_tokens = eng.max_tokens_per_step or max(longest, V0_MIN_BATCHED_TOKENS)
    redundant = GraphWorkload("decode", moe_loads=job.moe_loads,
                              moe_replication=job.moe_replication).redundant_experts(m)
    kv = kv_budget(m, h, lay.tp, lay.ep, lay.pp, job.dtype, job.kv_dtype, eng.block_tokens,
                   eng.gpu_memory_utilization, eng.fraction_of_free, budget_tokens,
                   redundant_experts=redundant, max_seqs=eng.max_batch,
                   **({"workspace_bytes": 0.0, "activations": False}
                      if eng.activations_in_reserve else {}))
    p = _Prepared(fp8_attention=eng.fp8_attention, fusion=eng.kernel_fusion,
                  attention_kernel=eng.attention_kernel, moe_exchange=eng.moe_exchange,
                  allreduce=eng.allreduce, gemm_dispatch=eng.gemm_dispatch,
                  moe_kernel=eng.moe_kernel,
                  memory={"weights_bytes": kv.weights_bytes, "kv_cache_bytes": kv.kv_bytes,
                          "activation_bytes": kv.activation_bytes,
                          "workspace_bytes": kv.workspace_bytes,
                          "usable_bytes": kv.usable_bytes, "kv_capacity_tokens": kv.tokens},
                  isl_mean=float(isl.mean()), osl_mean=float(osl.mean()),
                  fixed_lengths=w.pairs is None and all(isinstance(x, int)
                                                        for x in (w.isl, w.osl)))
    gib = 2.0 ** 30
    if not kv.fits:
        p.reason = (f"does not fit: weights {kv.weights_bytes / gib:.1f} GiB + activations "
                    f"{kv.activation_bytes / gib:.1f} GiB + workspace "
                    f"{kv.workspace_bytes / gib:.1f} GiB per GPU leave no KV block in "
                    f"{kv.usable_bytes / gib:.1f} GiB usable")
        return p
    lane_tokens = kv.blocks // lay.pp * eng.block_tokens
    if longest > lane_tokens:
        p.reason = (f"does not fit: a request of {longest} tokens needs more than the "
                    f"{lane_tokens} tokens of KV cache of one scheduler")
        return p
    engine_batch = eng.max_batch or min(kv.tokens // 2, 4096)  # SGLang's rule (simulator)
    kv_batch = max(1, int(kv.tokens // (p.isl_mean + p.osl_mean)))
    p.batch, p.kv_limited = max(1, min(engine_batch, kv_batch)), kv_batch < engine_batch
    return p


def _weight(job: _Serving, lay: Layout) -> float:
    """Rough cost of a layout's simulation in decode steps: every pipeline lane steps through
    each of its requests' outputs once per batch it holds, plus the nodes' evaluations."""
    p = _prepare(job, lay)
    if p.reason:
        return 0.0
    n = [min(MAX_REQUESTS, p.requests(job.workload))] + [2 * c for c in job.sweep]
    return sum(lay.pp * p.osl_mean * max(1.0, k / p.batch) for k in n) + NODE_STEPS


NODE_STEPS = 8000   # a layout's node evaluations cost about this many simulated steps


def _serve_layout(job: _Serving, lay: Layout) -> list[dict[str, Any]]:
    """The rows of one layout: the workload's, then its sweep points."""
    from perfmodel.plan.simulator import simulate
    m, h, w = job.model, job.hw, job.workload
    base = _empty_row(job, lay, "workload")
    sweep_rows = [{**_empty_row(job, lay, f"c={c}"), "mode": "concurrency"} for c in job.sweep]
    rows = [base] + sweep_rows
    p = _prepare(job, lay)
    if p.memory:
        for r in rows:
            r.update(p.memory)
    cost = None
    if p.reason is None:
        try:
            cost = step_cost(m, h, lay.tp, lay.ep, lay.pp, job.dtype, job.kv_dtype,
                             p.fp8_attention, p.fusion, p.attention_kernel, job.moe_loads,
                             job.moe_replication, p.moe_exchange, p.allreduce,
                             p.gemm_dispatch, p.moe_kernel)
        except InputError as e:
            p.reason, p.valid = "not valid: " + "; ".join(e.problems), False
    if p.reason is not None:
        for r in rows:
            r["reason"], r["valid"] = p.reason, p.valid
        return rows
    overrides = dict(job.engine_overrides)

    def run(row: dict[str, Any], wl, scale: float, concurrency: int | None) -> None:
        try:
            r = simulate(m, h, wl, job.engine, lay.tp, lay.ep, lay.pp, job.dtype, job.kv_dtype,
                         cost=cost, moe_loads=job.moe_loads,
                         moe_replication=job.moe_replication, **overrides)
        except InputError as e:
            row["reason"] = "does not fit: " + "; ".join(e.problems)
            return
        _fill(row, r, scale, lay, concurrency, job)

    reps = lay.replicas
    # the simulation is one data-parallel attention group of the replica (ep / tp of them when
    # ep > tp: SimResult.attention_groups), so it carries its group's share of the traffic;
    # `scale` takes its replica_output_tokens_per_s (the group's x the groups) to the deployment
    groups = max(1, lay.ep // lay.tp)
    if w.mode == "offline":
        wl, scale, conc = _per_replica(w, p.requests(w), reps * groups), float(reps), None
    elif w.mode == "concurrency":
        c = -(-w.concurrency // (reps * groups))
        wl = _per_replica(w, CONCURRENCY_WAVES * c, reps * groups, concurrency=c)
        scale, conc = w.concurrency / (c * groups), w.concurrency
    else:  # expected requests in flight: the rate times one request's unloaded latency
        lone = cost.prefill_time_s(round(p.isl_mean)) + p.osl_mean * cost.decode_time_s(
            1, p.isl_mean + p.osl_mean / 2)
        rate = w.rate / (reps * groups)
        in_flight = min(p.batch, max(1.0, rate * lone))
        wl = _per_replica(w, math.ceil(RATE_WAVES * in_flight), reps * groups, rate=rate)
        scale, conc = float(reps), None
    run(base, wl, scale, conc)
    for row, c in zip(sweep_rows, job.sweep):
        cg = -(-c // groups)  # c in flight per replica: its groups' share
        wl = _per_replica(w, SWEEP_WAVES * cg, 1, "concurrency", concurrency=cg, given=False)
        run(row, wl, reps * c / (cg * groups), c * reps)
    return rows


def search_disaggregated(model: ModelSpec | str, hw: Hardware | str, gpus: int,
                         workload=None, engine: str = "vllm", dtype: str = "bf16",
                         kv_dtype: str | None = None, tp: int | None = None,
                         pp: int | None = None, ep: int | None = None,
                         tpot_slo_s: float | None = None, ttft_slo_s: float | None = None,
                         progress: bool = False, jobs: int | None = None,
                         **engine_overrides: Any) -> list[dict[str, Any]]:
    """Every replica layout of `search_serving` with at least two replicas, split every way
    into a prefill pool of P replicas and a decode pool of the other D
    (`perfmodel.plan.simulator.simulate_disaggregated`), one row per (layout, P:D), ranked
    like search_serving's rows (`layout` reads "TP4 1P:1D"). Offline or a Poisson rate."""
    check_arguments(search_disaggregated, locals())  # types and ranges, one line each
    from perfmodel.plan.simulator import Workload
    m, h = as_model(model), hardware(hw)
    workload = workload if workload is not None else Workload()
    if workload.mode not in ("offline", "rate"):
        raise InputError(f"--disagg: the {workload.mode} mode is not simulated disaggregated "
                         f"(a fixed concurrency is a closed loop across both pools); use "
                         f"--offline or --rate")
    _check_slo(tpot_slo_s, "--tpot-slo")
    _check_slo(ttft_slo_s, "--ttft-slo")
    splits = [(lay, p) for lay in serving_layouts(m, gpus, tp, pp, ep) if lay.replicas > 1
              for p in range(1, lay.replicas)]
    if not splits:
        raise InputError(f"--disagg: no layout of {gpus} GPUs has two replicas to split into "
                         f"a prefill and a decode pool (use more GPUs or a smaller --tp)")
    job = _Serving(m, h, workload, engine, dtype, kv_dtype or "bf16", tpot_slo_s, ttft_slo_s,
                   (), tuple(sorted(engine_overrides.items())))
    rows = _run_all(_serve_split, job, splits, f"{m.name} on {gpus}x {h.name} (disaggregated)",
                    progress, jobs, weight=lambda s: float(s[0].gpus_per_replica))
    return rank_serving(rows)


def _serve_split(job: _Serving, split) -> dict[str, Any]:
    """One (layout, prefill replicas) row of search_disaggregated."""
    from perfmodel.plan.simulator import Pool, simulate_disaggregated
    lay, n_prefill = split
    n_decode = lay.replicas - n_prefill
    row = _empty_row(job, lay, "workload")
    row.update(layout=f"{lay.label} {n_prefill}P:{n_decode}D", prefill_replicas=n_prefill,
               decode_replicas=n_decode)
    p = _prepare(job, lay)
    if p.memory:
        row.update(p.memory)
    if p.reason is not None:
        row["reason"], row["valid"] = p.reason, p.valid
        return row
    w = job.workload
    if w.mode == "offline":  # a few refills of the decode pool
        auto = OFFLINE_WAVES * p.batch * n_decode
    else:  # as search_serving: RATE_WAVES x the requests in flight at the unloaded latency
        cost = step_cost(job.model, job.hw, lay.tp, lay.ep, lay.pp, job.dtype, job.kv_dtype,
                         p.fp8_attention, p.fusion, p.attention_kernel, job.moe_loads,
                         job.moe_replication, p.moe_exchange, p.allreduce,
                         p.gemm_dispatch, p.moe_kernel)
        lone = cost.prefill_time_s(round(p.isl_mean)) + p.osl_mean * cost.decode_time_s(
            1, p.isl_mean + p.osl_mean / 2)
        auto = RATE_WAVES * min(p.batch * lay.replicas, max(1.0, w.rate * lone))
    n = w.requests or int(min(MAX_REQUESTS, max(MIN_REQUESTS, math.ceil(auto))))
    from perfmodel.plan.simulator import Workload
    wl = Workload(w.mode, n, w.isl, w.osl, w.pairs, w.rate, None, w.seed,
                  burstiness=w.burstiness)
    try:
        r = simulate_disaggregated(job.model, job.hw, wl, Pool(lay.tp, lay.ep, lay.pp,
                                                               n_prefill),
                                   Pool(lay.tp, lay.ep, lay.pp, n_decode), job.engine,
                                   job.dtype, job.kv_dtype, **dict(job.engine_overrides))
    except InputError as e:
        row["reason"] = "does not fit: " + "; ".join(e.problems)
        return row
    s = r.summary()
    tpot = s["tpot_s"]["mean"]
    row.update({
        "fits": True, "output_tokens_per_s": r.output_tokens_per_s,
        "output_tokens_per_s_per_gpu": r.output_tokens_per_s_per_gpu,
        # the two pools' steady state is not separated from the benchmark window
        "steady_output_tokens_per_s": r.output_tokens_per_s,
        "steady_output_tokens_per_s_per_gpu": r.output_tokens_per_s_per_gpu,
        "steady_state": False,
        "output_tokens_per_s_per_user": 1.0 / tpot if tpot > 0 else None,
        "replica_output_tokens_per_s": r.output_tokens_per_s / lay.replicas,
        "ttft_p50_s": s["ttft_s"]["p50"], "ttft_p99_s": s["ttft_s"]["p99"],
        "tpot_mean_s": tpot, "tpot_p50_s": s["tpot_s"]["p50"], "tpot_p99_s": s["tpot_s"]["p99"],
        "e2e_p50_s": s["e2e_s"]["p50"], "e2e_p99_s": s["e2e_s"]["p99"],
        "preemptions": r.preemptions, "requests": len(r.isl), "kv_link": r.link,
        "kv_transfer_p50_s": s["transfer_s"]["p50"]})
    row["meets_slo"] = _meets(row, job.tpot_slo_s, job.ttft_slo_s)
    for k, v in list(row.items()):
        if isinstance(v, float) and not math.isfinite(v):
            row[k] = None
    return row


def step_cost(model: ModelSpec, hw: Hardware, tp: int, ep: int, pp: int, dtype: str,
              kv_dtype: str, fp8_attention: bool = False, fusion: str = "none",
              attention_kernel: str | None = None, moe_loads: str | None = None,
              moe_replication: float = 1.0, moe_exchange: str = "alltoall",
              allreduce: str = "auto", gemm_dispatch: str = "best",
              moe_kernel: str = "grouped"):
    """The StepCost of one layout (its nodes are memoized across that layout's simulations)."""
    from perfmodel.plan.simulator import StepCost
    return StepCost(model, hw, tp, ep, pp, dtype, kv_dtype, fp8_attention=fp8_attention,
                    fusion=fusion, attention_kernel=attention_kernel, moe_loads=moe_loads,
                    moe_replication=moe_replication, moe_exchange=moe_exchange,
                    allreduce=allreduce, gemm_dispatch=gemm_dispatch, moe_kernel=moe_kernel)


def _strip(text: str, prefix: str) -> str:
    return text[len(prefix):] if text.startswith(prefix) else text


def _per_replica(w, auto_requests: int, replicas: int, mode: str | None = None,
                 rate: float | None = None, concurrency: int | None = None,
                 given: bool = True):
    """`w` as one replica sees it: its share of the requests (`w.requests` / replicas when
    given and `given`, else `auto_requests` clamped to [MIN_REQUESTS, MAX_REQUESTS]), its
    mode, rate or concurrency."""
    from perfmodel.plan.simulator import Workload
    if given and w.requests is not None:
        n = -(-w.requests // replicas)
    else:
        n = int(min(MAX_REQUESTS, max(MIN_REQUESTS, auto_requests)))
    return Workload(mode or w.mode, n, w.isl, w.osl, w.pairs,
                    rate if rate is not None else w.rate,
                    concurrency if concurrency is not None else w.concurrency, w.seed,
                    burstiness=w.burstiness)


def _fill(row: dict[str, Any], r, scale: float, lay: Layout, concurrency: int | None,
          job: _Serving) -> None:
    s = r.summary()
    total = r.replica_output_tokens_per_s * scale
    groups = r.attention_groups * scale  # the deployment's schedulers: attention groups x replicas
    steady = r.steady_output_tokens_per_s * groups
    tpot = s["tpot_s"]["mean"]
    notes = list(r.extra.get("notes", ()))
    if not r.steady_state and r.workload.get("mode") in ("rate", "concurrency"):
        notes.append("too few requests for a steady state (the load never settles before the "
                     "last arrival): the steady throughputs are the benchmark window's; raise "
                     "--requests")
    row.update({
        "fits": True, "reason": None,
        "output_tokens_per_s": total,
        "output_tokens_per_s_per_gpu": total / lay.gpus,
        "output_tokens_per_s_per_user": 1.0 / tpot if tpot > 0 else None,
        "replica_output_tokens_per_s": r.replica_output_tokens_per_s,
        "total_tokens_per_s": r.total_tokens_per_s * groups,
        "total_tokens_per_s_per_gpu": r.total_tokens_per_s * groups / lay.gpus,
        "requests_per_s": r.requests_per_s * groups,
        "steady_output_tokens_per_s": steady,
        "steady_output_tokens_per_s_per_gpu": steady / lay.gpus,
        "steady_total_tokens_per_s_per_gpu": r.steady_total_tokens_per_s * groups / lay.gpus,
        "steady_state": r.steady_state,
        **{f"{m}_{k}_s": s[f"{m}_s"][k] for m in LATENCY_METRICS for k in LATENCY_STATS},
        "preemptions": r.preemptions, "requests": len(r.isl), "concurrency": concurrency,
        "notes": notes})
    row["meets_slo"] = _meets(row, job.tpot_slo_s, job.ttft_slo_s)
    for k, v in list(row.items()):
        if isinstance(v, float) and not math.isfinite(v):
            row[k] = None


def _meets(row: dict[str, Any], tpot_slo_s: float | None, ttft_slo_s: float | None) -> bool:
    if not row["fits"]:
        return False
    for slo, key in ((tpot_slo_s, "tpot_p99_s"), (ttft_slo_s, "ttft_p99_s")):
        if slo is not None and (row[key] is None or row[key] > slo):
            return False
    return True


def rank_serving(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows that fit first, SLO-meeting ones before the rest, by steady-state tokens/s/GPU
    (SimResult.steady_output_tokens_per_s); then the ones
    that do not fit, then the not valid, each in enumeration order. Sets `rank` (1 = best)."""
    def key(ir):
        i, r = ir
        if r["fits"]:
            return (0, not r["meets_slo"], -r["steady_output_tokens_per_s_per_gpu"], i)
        return (1 if r["valid"] else 2, 0, 0.0, i)
    out = [r for _, r in sorted(enumerate(rows), key=key)]
    for k, r in enumerate(out, 1):
        r["rank"] = k
    return checked(out)


def checked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows`, each row's numbers finite and non-negative (errors.check_result): what the
    searches return."""
    for r in rows:
        check_result(f"search row {r.get('layout')} ({r.get('point', 'step')})", r)
    return rows


def best(rows: list[dict[str, Any]], key: str = "steady_output_tokens_per_s_per_gpu"
         ) -> dict[str, Any] | None:
    """The row with the highest `key` among those that fit and meet the SLOs (None if none);
    ties go to the more interactive row (serving) or the first."""
    ok = [r for r in rows if r["fits"] and r.get("meets_slo", True)]
    if not ok:
        return None
    return max(ok, key=lambda r: (r[key], r.get("output_tokens_per_s_per_user") or 0.0))


def pareto(rows: list[dict[str, Any]], x: str = "output_tokens_per_s_per_user",
           y: str = "output_tokens_per_s_per_gpu") -> list[dict[str, Any]]:
    """The rows that fit and are not dominated in (higher `x`, higher `y`): no other row is at
    least as good in both and better in one. Sorted by `x` descending."""
    return pareto_front(rows, x, y, maximize_x=True)


# -- training ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Training:
    model: ModelSpec
    hw: Hardware
    batch: int
    seq: int
    dtype: str
    recompute: str
    zero: int
    microbatches: int | None


def training_layouts(model: ModelSpec, gpus: int, tp: int | None = None, pp: int | None = None,
                     dp: int | None = None, ep: int | None = None
                     ) -> list[tuple[int, int, int, int]]:
    """(tp, pp, dp, ep) with tp · pp · dp = `gpus`; MoE models also ep = 1 or a divisor of
    tp · dp (plan_training's rule) dividing the experts; fixed axes honoured."""
    _check_positive(gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep)
    out = []
    for t in ([tp] if tp else divisors(gpus)):
        for p in ([pp] if pp else divisors(gpus)):
            if gpus % (t * p):
                continue
            d = gpus // (t * p)
            if dp and d != dp:
                continue
            if ep:
                eps = [ep]
            elif model.is_moe:
                eps = [e for e in divisors(t * d) if model.experts % e == 0]
            else:
                eps = [1]
            out += [(t, p, d, e) for e in eps]
    if not out:
        fixed = " ".join(f"--{k} {v}" for k, v in (("tp", tp), ("pp", pp), ("dp", dp),
                                                  ("ep", ep)) if v)
        raise InputError(f"--gpus: {gpus} GPUs are not tp · pp · dp with {fixed}")
    return sorted(out, key=lambda x: (x[0] * x[1], x[0], x[1], x[3]))


def search_training(model: ModelSpec | str, hw: Hardware | str, gpus: int, batch: int,
                    seq: int = 4096, dtype: str = "bf16", tp: int | None = None,
                    pp: int | None = None, dp: int | None = None, ep: int | None = None,
                    recompute: str | None = None, zero: int | None = None,
                    microbatches: int | None = None, progress: bool = False,
                    jobs: int | None = None) -> list[dict[str, Any]]:
    """Predict one training step of every tp × pp × dp (× ep) layout of exactly `gpus` GPUs
    with a global batch of `batch` sequences (batch / dp per replica) and return the rows,
    fastest first, the ones that are not valid or do not fit after with their reason."""
    check_arguments(search_training, locals())  # types and ranges, one line per problem
    from perfmodel.plan.memory import DEFAULT_RECOMPUTE, DEFAULT_ZERO
    m, h = as_model(model), hardware(hw)
    _check_positive(batch=batch, seq=seq, microbatches=microbatches)
    job = _Training(m, h, batch, seq, dtype, recompute or DEFAULT_RECOMPUTE,
                    DEFAULT_ZERO if zero is None else zero, microbatches)
    layouts = training_layouts(m, gpus, tp, pp, dp, ep)
    rows = _run_all(_train_layout, job, layouts, f"{m.name} train on {gpus}x {h.name}",
                    progress, jobs, weight=lambda lay: lay[0] * lay[1])

    def key(ir):
        i, r = ir
        return (0, r["step_time_s"], i) if r["fits"] else (1 if r["valid"] else 2, 0.0, i)
    out = [r for _, r in sorted(enumerate(rows), key=key)]
    for k, r in enumerate(out, 1):
        r["rank"] = k
    return checked(out)


def _train_layout(job: _Training, lay: tuple[int, int, int, int]) -> dict[str, Any]:
    from perfmodel.plan.memory import memory_fit
    from perfmodel.plan.training import plan_training
    from perfmodel.workloads.builder import Workload as GraphWorkload
    tp, pp, dp, ep = lay
    label = " ".join([f"TP{tp}"] + ([f"EP{ep}"] if ep > 1 else []) + [f"PP{pp}", f"DP{dp}"])
    row = {"layout": label, "tp": tp, "pp": pp, "dp": dp, "ep": ep, "gpus": tp * pp * dp,
           "global_batch": job.batch, "batch_per_replica": None, "seq": job.seq,
           "dtype": job.dtype, "recompute": job.recompute, "zero": job.zero, "fits": False,
           "valid": True, "reason": None, "step_time_s": None, "tokens_per_s": None,
           "tokens_per_s_per_gpu": None, "mfu": None, "weights_bytes": None,
           "optimizer_bytes": None, "activation_bytes": None, "total_bytes": None,
           "capacity_bytes": None, "meets_slo": True}
    if job.batch % dp:
        row.update(valid=False, reason=f"not valid: the global batch {job.batch} does not "
                                       f"split over dp {dp}")
        return row
    b = job.batch // dp
    row["batch_per_replica"] = b
    try:
        w = GraphWorkload("train", batch=b, seq=job.seq, tp=tp, ep=ep, pp=pp, dp=dp,
                          dtype=job.dtype, microbatches=job.microbatches,
                          recompute=job.recompute)
        if ep > 1 and (tp * dp) % ep:
            raise InputError(f"ep: {ep} must divide tp·dp = {tp * dp}")
        fit = memory_fit(job.model, job.hw, w, job.zero)
    except InputError as e:
        row.update(valid=False, reason="not valid: " + "; ".join(_strip(p, "workload: ")
                                                                 for p in e.problems))
        return row
    row.update(weights_bytes=fit.weights_bytes, optimizer_bytes=fit.optimizer_bytes,
               activation_bytes=fit.activation_bytes, total_bytes=fit.total_bytes,
               capacity_bytes=fit.capacity_bytes)
    if not fit.fits:
        row["reason"] = "does not fit: " + fit.summary()
        return row
    try:
        plan = plan_training(job.model, job.hw, b, job.seq, tp, pp, dp, job.dtype, ep,
                             job.microbatches, recompute=job.recompute, zero=job.zero)
    except InputError as e:
        row.update(valid=False, reason="not valid: " + "; ".join(e.problems))
        return row
    row.update(fits=True, step_time_s=plan.step_time_s, tokens_per_s=plan.tokens_per_s,
               tokens_per_s_per_gpu=plan.tokens_per_s / row["gpus"], mfu=plan.mfu)
    return row


# -- running the layouts -------------------------------------------------------------------------

_JOB: Any = None   # the search a forked worker runs (inherited, not pickled)
_FN: Callable | None = None


def _worker(task):
    i, group = task
    return i, [_FN(_JOB, lay) for lay in group]


def default_jobs(n_tasks: int) -> int:
    """Worker processes: one per CPU this process may use, on Linux (fork), else 1 (also in
    a daemonic process, which may not have children)."""
    import multiprocessing
    if (not sys.platform.startswith("linux") or n_tasks < 2
            or multiprocessing.current_process().daemon):
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, n_tasks))


def check_jobs(jobs: int | None) -> None:
    """An InputError naming --jobs unless `jobs` is None or a positive integer of at most
    MAX_GPUS processes (ops/base.py: the bound of GPU and process counts)."""
    from perfmodel.ops.base import MAX_GPUS, bound_text
    if jobs is None:
        return
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"--jobs: expected a positive integer, got {jobs!r}")
    if jobs > MAX_GPUS:
        raise InputError(f"--jobs: expected a positive integer <= {bound_text(MAX_GPUS)}, got "
                         f"{jobs}")


def worker_count(jobs: int | None, n_tasks: int) -> int:
    """Worker processes for `n_tasks` tasks: `jobs` (check_jobs) capped at the tasks, or
    default_jobs; 1 in a daemonic process, which may not have children."""
    import multiprocessing
    check_jobs(jobs)
    if multiprocessing.current_process().daemon:
        return 1
    return default_jobs(n_tasks) if jobs is None else min(jobs, n_tasks)


def _run_all(fn: Callable, job: Any, layouts: list, label: str, progress: bool,
             jobs: int | None, group: Callable | None = None,
             weight: Callable = lambda lay: 1.0,
             while_waiting: Callable[[], Any] | None = None) -> list:
    """fn(job, layout) for every layout, returned in layout order, in `jobs` forked workers
    (default_jobs), the heaviest (`weight`) first. `group(layout)` = (key, order): with fewer
    workers than half the layouts, the layouts of one key run in turn in one process, in
    `order`. `while_waiting()`: this process's own work, done while the workers run (after
    they are forked, so they do not inherit it)."""
    global _JOB, _FN
    n = worker_count(jobs, len(layouts))
    weights = [weight(lay) for lay in layouts] if n > 1 else [1.0] * len(layouts)
    if group is not None and 2 * n < len(layouts):
        keyed: dict[Any, list[int]] = {}
        for i in sorted(range(len(layouts)), key=lambda i: group(layouts[i])[1]):
            keyed.setdefault(group(layouts[i])[0], []).append(i)
        tasks = list(keyed.values())
    else:
        tasks = [[i] for i in range(len(layouts))]
    tasks.sort(key=lambda g: -sum(weights[i] for i in g))
    n = min(n, len(tasks))
    bar = Progress(len(layouts), label, force=True) if progress else None
    results: list = [None] * len(layouts)
    try:
        if n <= 1:
            for g in tasks:
                for i in g:
                    results[i] = fn(job, layouts[i])
                    if bar:
                        bar.update()
            return results
        import multiprocessing
        _JOB, _FN = job, fn
        with multiprocessing.get_context("fork").Pool(n) as pool:
            work = [(k, [layouts[i] for i in g]) for k, g in enumerate(tasks)]
            done = pool.imap_unordered(_worker, work)
            if while_waiting is not None:
                while_waiting()
            for k, res in done:
                for i, r in zip(tasks[k], res):
                    results[i] = r
                if bar:
                    bar.update(len(res))
        return results
    finally:
        _JOB = _FN = None
