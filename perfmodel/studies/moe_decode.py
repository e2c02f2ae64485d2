"""Memory-bound MoE decode: EPLB (token-balanced) vs METRO vs optimal routing, per layer and per
decode step (METRO, arXiv:2512.09277; docs/studies.md §2).

Per layer and policy:
  * max activated expert replicas on any GPU, averaged over seeded routing draws;
  * the expert FFN time of the slowest GPU (the `moe` op: weight bytes of its activated replicas
    over HBM, token MMAs on the tensor pipe);
  * token exchange: EPLB dispatches with an all-to-all and combines with an all-to-all; METRO
    (and optimal) all-gather the tokens before top-k so every GPU knows every expert's load,
    then combine with an all-to-all (§2.5);
  * the routing algorithm's own time, measured in the paper on 8×A100 (§2.3, §2.7) and used as a
    fixed cost: METRO ≤ 26 µs (one SM), optimal 116–129 µs on the CPU plus 26.5–29.2 µs to move
    the top-k tensors there. EPLB's routing is a lookup and costs nothing here.
A decode step is the whole model graph (`perfmodel.workloads.builder`) under each policy, plus the
routing cost per MoE layer.

On recorded loads (`real_layers`, `real_loads_rows`, `slo_gain`; docs/studies.md §2.8): routing
sampled per layer from SGLang's DeepSeek-V3/R1 expert-load statistics with DeepSeek's
group-limited routing (`perfmodel.ops.moe.loads`), DeepSeek's EPLB placement from the same file
(`perfmodel.ops.moe.eplb`), and each layer priced as dispatch + gate + replica choice + the slowest
GPU's FFN + combine; the decode step adds the rest of the model's graph.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from perfmodel.workloads.builder import ACT_BYTES, build_graph
from perfmodel.engine import estimate
from perfmodel.hardware import Hardware, hardware
from perfmodel.workloads.models import ModelSpec, load_model
from perfmodel.ops import op as make_op
from perfmodel.ops.moe.routing import POLICIES

# Routing-algorithm cost per MoE layer, measured by the METRO paper on 8x A100 (Qwen3-30B).
ROUTING_COST_S = {"token_balanced": 0.0, "metro": 26e-6, "optimal": 116.3e-6 + 26.5e-6}
# The policies the study compares: the paper's three, whose routing cost it measured. `uniform`
# (each token to a random replica of its expert) is left out: it is not one of the paper's
# policies, the paper gives it no routing cost, and it activates about as many replicas as token
# balancing (benchmarks/moe_routing_speed.py), so it adds no contrast.
STUDY_POLICIES = tuple(p for p in POLICIES if p in ROUTING_COST_S)


@dataclass(frozen=True)
class LayerResult:
    policy: str
    max_activated: float        # mean over seeds of the max activated replicas on a GPU
    ffn_s: float                # slowest GPU's expert FFN
    comm_s: float               # dispatch + combine
    routing_s: float
    bound: str

    @property
    def layer_s(self) -> float:
        return self.ffn_s + self.comm_s + self.routing_s

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "layer_s": self.layer_s}


def _model(m: ModelSpec | str) -> ModelSpec:
    return m if isinstance(m, ModelSpec) else load_model(m)


def layer_study(model: ModelSpec | str, hw: Hardware | str, gpus: int, tokens_per_gpu: int,
                replication: float = 1.5, skew: float = 1.0, dtype: str = "bf16",
                seeds: Sequence[int] = (0, 1, 2)) -> dict[str, LayerResult]:
    """One MoE layer of a decode step under each routing policy (full expert parallelism with
    data-parallel attention: every GPU brings `tokens_per_gpu` tokens)."""
    m, h = _model(model), hardware(hw)
    tokens = tokens_per_gpu * gpus
    a2a = float(tokens_per_gpu * m.top_k * m.hidden * ACT_BYTES)
    gather = float(tokens * m.hidden * ACT_BYTES)
    out = {}
    for policy in STUDY_POLICIES:
        acts, times, bound = [], [], ""
        for seed in seeds:
            o = make_op("moe", tokens=tokens, experts=m.experts, top_k=m.top_k, hidden=m.hidden,
                        expert_hidden=m.expert_hidden, dtype=dtype, gpus=gpus,
                        shared_experts=m.shared_experts, replication=replication,
                        routing=policy, skew=skew, seed=seed)
            acts.append(o.routing_result.max_activated)
            e = estimate(o.demand(h), h)
            times.append(e.time_s)
            bound = e.bound
        if policy == "token_balanced":
            comm = 2 * _collective(h, "alltoall", a2a, gpus)
        else:
            comm = _collective(h, "allgather", gather, gpus) + _collective(h, "alltoall", a2a,
                                                                         gpus)
        out[policy] = LayerResult(policy, float(np.mean(acts)), float(np.mean(times)), comm,
                                  ROUTING_COST_S[policy], bound)
    return out


def _collective(hw: Hardware, kind: str, nbytes: float, gpus: int) -> float:
    if gpus == 1:
        return 0.0
    o = make_op(kind, bytes=nbytes, gpus=gpus)
    return estimate(o.demand(hw), hw).time_s


def decode_step(model: ModelSpec | str, hw: Hardware | str, gpus: int, batch_per_gpu: int,
                context: int = 2048, replication: float = 1.5, skew: float = 1.0,
                policy: str = "metro", dtype: str = "bf16", tp: int = 1) -> float:
    """TPOT of the whole model with EP over `gpus` (TP `tp` inside attention) under a policy."""
    m, h = _model(model), hardware(hw)
    from perfmodel.predict import predict
    g = build_graph(m, "decode", batch=batch_per_gpu, context=context, tp=tp, ep=gpus,
                    dtype=dtype, moe_routing=policy, moe_replication=replication,
                    moe_skew=skew)
    moe_layers = m.layers - m.dense_layers
    return predict(g, h).total_time_s + moe_layers * ROUTING_COST_S[policy]


def study_rows(model: ModelSpec | str, hw: Hardware | str, gpus: int,
               tokens_per_gpu: Sequence[int] = (4, 16, 32, 64, 128),
               replications: Sequence[float] = (1.0, 1.125, 1.5), skew: float = 1.0,
               dtype: str = "bf16") -> list[dict[str, Any]]:
    """Tidy rows: model × tokens/GPU × replication × policy."""
    m = _model(model)
    rows = []
    for t in tokens_per_gpu:
        for r in replications:
            res = layer_study(m, hw, gpus, t, r, skew, dtype)
            for p, lr in res.items():
                rows.append({"model": m.name, "hardware": hardware(hw).name, "gpus": gpus,
                             "tokens_per_gpu": t, "replication": r, **lr.to_dict()})
    return rows


def tp_ep_sweep(model: ModelSpec | str, hw: Hardware | str, gpus: int,
                global_batches: Sequence[int] = (64, 128, 256, 512, 1024),
                policy: str = "metro", replication: float = 1.5, skew: float = 1.0,
                context: int = 2048, dtype: str = "bf16") -> list[dict[str, Any]]:
    """TPOT and throughput over TP × EP layouts of `gpus` GPUs (METRO Table II style): attention
    tensor-parallel over `tp` GPUs in gpus/tp data-parallel groups; experts either
    tensor-parallel over all GPUs (ep = 1) or expert-parallel over all of them (ep = gpus)."""
    m = _model(model)
    rows = []
    layouts = [(gpus, 1)] + [(tp, gpus) for tp in (1, 2, 4, 8, 16) if tp <= gpus and
                             gpus % tp == 0 and m.heads % tp == 0]
    for tp, ep in layouts:
        groups = gpus // tp  # data-parallel attention groups
        for batch in global_batches:
            if batch % groups:
                continue
            try:
                tpot = decode_step(m, hw, ep if ep > 1 else 1, batch // groups, context,
                                   replication, skew, policy if ep > 1 else "token_balanced",
                                   dtype, tp=tp) if ep > 1 else _tp_only(m, hw, tp, batch,
                                                                         context, dtype)
            except Exception as e:  # noqa: BLE001 - a layout the builder rejects is skipped
                from perfmodel.errors import InputError
                if isinstance(e, InputError):
                    continue
                raise
            rows.append({"tp": tp, "ep": ep, "global_batch": batch, "policy": policy,
                         "tpot_s": tpot, "tokens_per_s_per_gpu": batch / tpot / gpus,
                         "fits": True})
    return rows


def _tp_only(m: ModelSpec, hw, tp: int, batch: int, context: int, dtype: str) -> float:
    from perfmodel.predict import predict
    g = build_graph(m, "decode", batch=batch, context=context, tp=tp, dtype=dtype)
    return predict(g, hardware(hw)).total_time_s


# ------------------------------------------------------------ real expert loads (SGLang) ----
# The study on recorded loads (docs/studies.md §2.8): routing sampled per layer from an
# expert-loads file (`perfmodel.ops.moe.loads`, DeepSeek's group-limited routing), DeepSeek's
# EPLB placement from the same file (`perfmodel.ops.moe.eplb`: what SGLang deploys from these
# statistics), then token balancing (EPLB), METRO and the optimum on that placement, beside
# contiguous placement without replicas.

DEFAULT_LOADS = "decode_in1000out1000.json"
REAL_POLICIES = ("contiguous", *STUDY_POLICIES)
STUDY_GPUS = (8, 16, 32, 64, 72)
STUDY_TOKENS_PER_GPU = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
STUDY_HARDWARE = ("H100-SXM", "H200-SXM", "B200", "GB200")
# Redundant slots: at least 32 (SGLang's decode runs on these loads, LMSYS 2025-05-05: 32
# redundant experts at EP72; TensorRT-LLM's EP32: 288 slots) or at least 128 (METRO's headline
# replication 1.5 × 256), rounded up so that every GPU gets the same number of slots (EPLB).
REDUNDANT_AT_LEAST = (32, 128)
# DeepSeek-V3 serves its experts in FP8 (block-scaled E4M3, the released weights).
REAL_DTYPE = "fp8"
FALLBACK_CONTEXT = 2048  # KV length when the loads file name gives no ISL/OSL


def redundant_slots(experts: int, gpus: int, at_least: int) -> int:
    """The fewest redundant replicas ≥ at_least that give every GPU equal slots (EPLB)."""
    r = max(0, at_least)
    return r + (-(experts + r)) % gpus


def group_limit(model: ModelSpec) -> tuple[int, int | None]:
    """(expert groups, groups per token) of the model's gate (its file's expert_groups and
    group_top_k: DeepSeek-V3's 8 and 4); (1, None): not group-limited."""
    return model.group_limit


def loads_context(loads: str) -> int:
    """Mean KV length of a decode step on a loads file named `..._in{ISL}out{OSL}.json`:
    ISL + OSL/2 (a request halfway through its output); FALLBACK_CONTEXT otherwise."""
    m = re.search(r"in(\d+)out(\d+)", str(loads))
    return int(m[1]) + int(m[2]) // 2 if m else FALLBACK_CONTEXT


@dataclass(frozen=True)
class RealLayer:
    """One MoE layer of a decode step on recorded loads, under one policy (times in s)."""
    policy: str
    layer: int
    max_activated: float    # λ: the most activated replicas on one GPU (mean over seeds)
    mean_activated: float   # activated replicas per GPU, mean over GPUs and seeds
    ffn_s: float            # slowest GPU's expert FFN (routed + shared experts)
    dispatch_s: float       # all-to-all (EPLB, contiguous) or all-gather (METRO, optimal)
    gate_s: float           # router GEMM + top-k, on all gathered tokens under METRO/optimal
    routing_s: float        # choosing replicas (ROUTING_COST_S, measured by METRO on A100)
    combine_s: float        # all-to-all
    bound: str

    @property
    def layer_s(self) -> float:
        return self.ffn_s + self.dispatch_s + self.gate_s + self.routing_s + self.combine_s

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "layer_s": self.layer_s}


def _moe_op(m: ModelSpec, gpus: int, tokens: int, policy: str, loads: str, layer: int,
            redundant: int, seed: int, variation: float, dtype: str, gpus_per_node: int):
    groups, group_top_k = group_limit(m)
    extra = (dict(placement="contiguous") if policy == "contiguous" else
             dict(placement="eplb", redundant_experts=redundant, routing=policy,
                  gpus_per_node=gpus_per_node))
    return make_op("moe", tokens=tokens, experts=m.experts, top_k=m.top_k, hidden=m.hidden,
                   expert_hidden=m.expert_hidden, dtype=dtype, gpus=gpus,
                   shared_experts=m.shared_experts, seed=seed, loads=loads, layer=layer,
                   expert_groups=groups, group_top_k=group_top_k, variation=variation, **extra)


def _op_time(kind: str, hw: Hardware, **params) -> float:
    return estimate(make_op(kind, **params).demand(hw), hw).time_s


def real_layers(model: ModelSpec | str, hws, gpus: int, tokens_per_gpu: int,
                loads: str = DEFAULT_LOADS, layers: Sequence[int] | None = None,
                redundant: int | None = None, seeds: Sequence[int] = (0,),
                variation: float = 0.0, dtype: str = REAL_DTYPE,
                policies: Sequence[str] = REAL_POLICIES) -> dict[str, list[RealLayer]]:
    """Per hardware name, one RealLayer per (MoE layer of the loads file, policy): DP attention
    with `tokens_per_gpu` tokens on each of `gpus` expert-parallel GPUs, EPLB placement from the
    file with `redundant` slots (None: redundant_slots(E, gpus, 32)). `hws`: one GPU or several
    (the routing is drawn once and priced on each; EPLB's nodes follow each GPU's NVLink
    domain). Contiguous placement is skipped where the experts do not divide over the GPUs."""
    from perfmodel.ops.moe.loads import load_expert_loads
    m = _model(model)
    hw_list = [hardware(h) for h in ([hws] if isinstance(hws, (str, Hardware)) else hws)]
    data = load_expert_loads(loads)
    data.check_experts(m.experts)
    layer_ids = list(layers) if layers is not None else data.moe_layers
    red = redundant_slots(m.experts, gpus, REDUNDANT_AT_LEAST[0]) if redundant is None \
        else redundant
    pols = [p for p in policies if p != "contiguous" or m.experts % gpus == 0]
    tokens = tokens_per_gpu * gpus
    a2a = float(tokens_per_gpu * m.top_k * m.hidden * ACT_BYTES)
    gather = float(tokens * m.hidden * ACT_BYTES)
    out: dict[str, list[RealLayer]] = {h.name: [] for h in hw_list}
    fixed = {}  # per hardware and policy: dispatch, gate, routing, combine
    for h in hw_list:
        for p in pols:
            gathered = p in ("metro", "optimal")  # all-gather before top-k (§2.5)
            rows = tokens if gathered else tokens_per_gpu
            gate = (_op_time("gemm", h, m=rows, n=m.experts, k=m.hidden, dtype="bf16")
                    + _op_time("softmax", h, rows=rows, cols=m.experts, dtype="fp32"))
            dispatch = (_collective(h, "allgather", gather, gpus) if gathered
                        else _collective(h, "alltoall", a2a, gpus))
            fixed[h.name, p] = (dispatch, gate, ROUTING_COST_S.get(p, 0.0),
                                _collective(h, "alltoall", a2a, gpus))
    for layer in layer_ids:
        for p in pols:
            per_node: dict[int, list] = {}  # the routing per EPLB node size, drawn once
            for h in hw_list:
                node = h.nvlink_domain_gpus
                if node not in per_node:
                    per_node[node] = [_moe_op(m, gpus, tokens, p, loads, layer, red, s,
                                              variation, dtype, node) for s in seeds]
                ops = per_node[node]
                ests = [estimate(o.demand(h), h) for o in ops]
                acts = [o.routing_result.activated_per_gpu for o in ops]
                dispatch, gate, routing, combine = fixed[h.name, p]
                out[h.name].append(RealLayer(
                    p, layer, float(np.mean([a.max() for a in acts])),
                    float(np.mean([a.mean() for a in acts])),
                    float(np.mean([e.time_s for e in ests])), dispatch, gate, routing, combine,
                    ests[-1].bound))
    return out


def _non_moe_step_s(m: ModelSpec, hw: Hardware, batch_per_gpu: int, context: int,
                    dtype: str) -> float:
    """A decode step's time outside the MoE layers' experts, router, top-k and token exchange:
    the graph of one data-parallel attention GPU (tp = 1) with its MoE ops left out (they are
    priced per layer by `real_layers`). The graph is one stream, so its ops add up."""
    from perfmodel.predict import predict
    g = build_graph(m, "decode", batch=batch_per_gpu, context=context, dtype=dtype)
    moe_roles = (".experts", ".router", ".topk", ".dispatch", ".combine")
    return sum(o.estimate.time_s for o in predict(g, hw).ops
               if not o.name.endswith(moe_roles))


def _fits(m: ModelSpec, hw: Hardware, gpus: int, batch_per_gpu: int, context: int,
          redundant: int, dtype: str) -> bool:
    """Weights (experts over `gpus`, plus the redundant slots' copies), KV cache and workspace
    within the usable HBM (`perfmodel.plan.memory.serving_memory`, DP attention)."""
    from perfmodel.plan.memory import serving_memory
    from perfmodel.units import bytes_per_element
    fit = serving_memory(m, hw, batch_per_gpu, context, tp=1, ep=gpus, dtype=dtype)
    extra = (redundant / gpus) * (m.layers - m.dense_layers) * m.ffn_matrices * m.hidden \
        * m.expert_hidden * bytes_per_element(dtype)
    return fit.total_bytes + extra <= fit.capacity_bytes


def real_loads_rows(model: ModelSpec | str = "deepseek-v3", hws: Sequence[str] = STUDY_HARDWARE,
                    gpus_list: Sequence[int] = STUDY_GPUS,
                    tokens_per_gpu: Sequence[int] = STUDY_TOKENS_PER_GPU,
                    loads: str = DEFAULT_LOADS, layers: Sequence[int] | None = None,
                    redundant_at_least: Sequence[int] = REDUNDANT_AT_LEAST,
                    seeds: Sequence[int] = (0,), variation: float = 0.0,
                    dtype: str = REAL_DTYPE, context: int | None = None,
                    policies: Sequence[str] = REAL_POLICIES, progress=None
                    ) -> list[dict[str, Any]]:
    """The sweep: one row per hardware × EP size × tokens/GPU × redundancy × policy, with the
    per-layer results aggregated over the layers (mean; `max_*` the worst layer) and the decode
    step's TPOT: the non-MoE part of the graph plus every MoE layer's time (mean over the
    layers studied × the model's MoE layers). `fits`: weights + KV within HBM."""
    m = _model(model)
    ctx = context or loads_context(loads)
    hw_list = [hardware(h) for h in hws]
    moe_layers = m.layers - m.dense_layers
    rows = []
    for gpus in gpus_list:
        for t in tokens_per_gpu:
            non_moe = {h.name: _non_moe_step_s(m, h, t, ctx, dtype) for h in hw_list}
            for at_least in redundant_at_least:
                red = redundant_slots(m.experts, gpus, at_least)
                res = real_layers(m, hw_list, gpus, t, loads, layers, red, seeds, variation,
                                  dtype, policies)
                for h in hw_list:
                    fits = _fits(m, h, gpus, t, ctx, red, dtype)
                    by_policy: dict[str, list[RealLayer]] = {}
                    for r in res[h.name]:
                        by_policy.setdefault(r.policy, []).append(r)
                    for p, rs in by_policy.items():
                        layer_s = np.array([r.layer_s for r in rs])
                        rows.append({
                            "model": m.name, "hardware": h.name, "gpus": gpus,
                            "tokens_per_gpu": t, "redundant": 0 if p == "contiguous" else red,
                            "policy": p, "layers": len(rs), "moe_layers": moe_layers,
                            "context": ctx,
                            "max_activated": float(np.mean([r.max_activated for r in rs])),
                            "max_activated_worst": float(max(r.max_activated for r in rs)),
                            "mean_activated": float(np.mean([r.mean_activated for r in rs])),
                            "ffn_s": float(np.mean([r.ffn_s for r in rs])),
                            "dispatch_s": rs[0].dispatch_s, "gate_s": rs[0].gate_s,
                            "routing_s": rs[0].routing_s, "combine_s": rs[0].combine_s,
                            "layer_s": float(layer_s.mean()),
                            "tpot_s": non_moe[h.name] + moe_layers * float(layer_s.mean()),
                            "fits": fits, "bound": rs[0].bound})
                if progress is not None:
                    progress(gpus, t, at_least)
    return rows


def slo_gain(rows: Sequence[dict[str, Any]], policy: str = "metro",
             baseline: str = "token_balanced") -> list[dict[str, Any]]:
    """Decode throughput at a fixed TPOT SLO (METRO §2.7 "at equal TPOT"), per hardware × EP
    size × redundancy: the largest ratio, over SLOs the baseline can meet, of the two policies'
    best tokens/s/GPU among batches that meet the SLO and fit in memory. Two readings:
      grid          batches restricted to the rows' tokens/GPU (powers of two, like the decode
                    CUDA graphs METRO captures, §2.5); the SLOs tried are the rows' TPOTs;
      interpolated  TPOT linear in tokens/GPU between rows, any batch allowed (the ratio of the
                    largest batches that meet the SLO); SLOs tried on a fine grid.
    Where decode is memory-bound, TPOT is nearly flat in the batch, so a small TPOT gain buys a
    much larger batch at an SLO near the TPOT floor; the grid reading then moves in the grid's
    factors of 2 (one policy just fits the next batch up, the other does not)."""
    out = []
    keys = sorted({(r["hardware"], r["gpus"], r["redundant"]) for r in rows
                   if r["policy"] == policy})
    for hw, gpus, red in keys:
        sel = {p: sorted((r for r in rows if r["hardware"] == hw and r["gpus"] == gpus
                          and r["redundant"] == red and r["policy"] == p and r["fits"]),
                         key=lambda r: r["tokens_per_gpu"])
               for p in (policy, baseline)}
        if not sel[policy] or not sel[baseline]:
            continue
        floor = min(r["tpot_s"] for r in sel[baseline])
        best = {"hardware": hw, "gpus": gpus, "redundant": red, "grid_ratio": 0.0,
                "grid_slo_s": None, "interpolated_ratio": 0.0, "interpolated_slo_s": None}
        for slo in sorted({r["tpot_s"] for rs in sel.values() for r in rs if r["tpot_s"] >= floor}):
            tput = {p: max((r["tokens_per_gpu"] / r["tpot_s"] for r in rs
                            if r["tpot_s"] <= slo), default=0.0) for p, rs in sel.items()}
            if tput[baseline] and tput[policy] / tput[baseline] > best["grid_ratio"]:
                best.update(grid_ratio=tput[policy] / tput[baseline], grid_slo_s=slo)
        curves = {p: (np.array([r["tpot_s"] for r in rs]),
                      np.array([r["tokens_per_gpu"] for r in rs], float))
                  for p, rs in sel.items()}
        top = min(c[0].max() for c in curves.values())
        for slo in np.linspace(floor, top, 400) if top > floor else []:
            batch = {p: _largest_batch(*c, slo) for p, c in curves.items()}
            if batch[baseline] > 0 and batch[policy] / batch[baseline] > best[
                    "interpolated_ratio"]:
                best.update(interpolated_ratio=batch[policy] / batch[baseline],
                            interpolated_slo_s=float(slo))
        out.append(best)
    return out


def _largest_batch(tpot: np.ndarray, batch: np.ndarray, slo: float) -> float:
    """The largest batch whose TPOT, linear between the points (batch ascending), is ≤ slo."""
    best = batch[0] if tpot[0] <= slo else 0.0
    for i in range(len(batch) - 1):
        t0, t1 = tpot[i], tpot[i + 1]
        if t1 <= slo:
            best = max(best, batch[i + 1])
        elif t0 <= slo < t1:
            best = max(best, batch[i] + (batch[i + 1] - batch[i]) * (slo - t0) / (t1 - t0))
    return float(best)


def metro_order_gap(model: ModelSpec | str = "deepseek-v3", gpus: int = 16,
                    tokens_per_gpu: int = 32, loads: str = DEFAULT_LOADS,
                    layers: Sequence[int] | None = None, redundant: int | None = None,
                    gpus_per_node: int = 8, seed: int = 0) -> dict[str, float]:
    """Mean over layers of λ for METRO's Algorithm 1 in expert id order (`route_metro`), the
    same greedy with the single-replica experts counted first (`route_metro_forced_first`)
    and the optimum, on the same batches and EPLB placement: how much of METRO's gap to the
    optimum is the order in which experts choose."""
    from perfmodel.ops.moe.loads import load_expert_loads
    from perfmodel.ops.moe.routing import route_metro, route_metro_forced_first
    m = _model(model)
    layer_ids = list(layers) if layers is not None else load_expert_loads(loads).moe_layers
    red = redundant_slots(m.experts, gpus, REDUNDANT_AT_LEAST[1]) if redundant is None \
        else redundant
    acc = {"metro": [], "metro_forced_first": [], "optimal": []}
    for layer in layer_ids:
        o = _moe_op(m, gpus, tokens_per_gpu * gpus, "optimal", loads, layer, red, seed, 0.0,
                    REAL_DTYPE, gpus_per_node)
        counts, placement = o.expert_counts(), o.routing_result.placement
        acc["metro"].append(route_metro(counts, placement).max_activated)
        acc["metro_forced_first"].append(route_metro_forced_first(counts, placement)
                                         .max_activated)
        acc["optimal"].append(o.routing_result.max_activated)
    return {k: float(np.mean(v)) for k, v in acc.items()}


def real_loads_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per hardware × EP size × redundancy × tokens/GPU: λ of each policy, METRO against EPLB
    (token balancing) and the optimum, and the decode step's TPOT change with its split into
    the expert FFN and the rest (dispatch, gate, routing algorithm, combine), per step."""
    idx = {(r["hardware"], r["gpus"], r["tokens_per_gpu"], r["redundant"], r["policy"]): r
           for r in rows}
    out = []
    for (hw, gpus, t, red, p), metro in sorted(idx.items()):
        if p != "metro":
            continue
        tb, opt = idx[hw, gpus, t, red, "token_balanced"], idx[hw, gpus, t, red, "optimal"]
        contiguous = idx.get((hw, gpus, t, 0, "contiguous"))
        layers = tb["moe_layers"]
        out.append({
            "hardware": hw, "gpus": gpus, "redundant": red, "tokens_per_gpu": t,
            "lambda_contiguous": contiguous["max_activated"] if contiguous else None,
            "lambda_eplb": tb["max_activated"], "lambda_metro": metro["max_activated"],
            "lambda_optimal": opt["max_activated"],
            "metro_vs_eplb": metro["max_activated"] / tb["max_activated"] - 1,
            "metro_vs_optimal": metro["max_activated"] / opt["max_activated"] - 1,
            "tpot_eplb_s": tb["tpot_s"], "tpot_metro_s": metro["tpot_s"],
            "tpot_change": metro["tpot_s"] / tb["tpot_s"] - 1,
            "ffn_change_s": layers * (metro["ffn_s"] - tb["ffn_s"]),
            "rest_change_s": layers * ((metro["layer_s"] - metro["ffn_s"])
                                       - (tb["layer_s"] - tb["ffn_s"])),
            "fits": tb["fits"]})
    return out


if __name__ == "__main__":  # the real-loads sweep behind docs/studies.md §2.8 (~10 min, 1 core)
    import json
    import sys
    study = real_loads_rows(progress=lambda g, t, r: print(f"EP{g} {t} tokens/GPU >= {r} "
                                                           f"redundant", file=sys.stderr))
    print(json.dumps({"summary": real_loads_summary(study), "slo_gain": slo_gain(study),
                      "metro_order_gap": {g: metro_order_gap(gpus=g) for g in STUDY_GPUS}},
                     indent=1))
