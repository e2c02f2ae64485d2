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
"""
from __future__ import annotations

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
