"""Capacity planning: serving (largest batch under SLOs, GPUs for a throughput target) and
training (step time, tokens/s, MFU, time to train), each with the memory fit enforced.

Serving model (continuous batching, as vLLM/SGLang/TensorRT-LLM run it): `batch` sequences decode
together; each step emits one token per sequence. A sequence's KV cache holds its prompt and the
tokens generated so far; the decode step is predicted at the mean context, prompt + output/2.
Every `output` steps a slot is refilled by a prefill of `prompt` tokens, so per step the replica
also pays batch/output prefills on average:
    throughput (output tokens/s) = batch / (TPOT + batch · TTFT / output)
with TTFT the prefill time of one prompt on an idle replica (queueing is not modelled).

Memory per GPU: weights (sharded by TP and PP; experts by EP) + KV cache + activations +
workspace must fit in the usable HBM.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from .builder import ACT_BYTES, Workload, build_graph, kv_cache_bytes_per_token
from .errors import InputError
from .hardware import Hardware, hardware
from .models import ModelSpec, load_model
from .report import Progress
from .units import GiB, bytes_per_element

# vLLM's default gpu_memory_utilization: the share of HBM the engine plans with.
HBM_USABLE_FRACTION = 0.90
# CUDA graphs, NCCL buffers, cuBLAS workspace and allocator slack (vLLM reserves ~1-3 GiB).
WORKSPACE_BYTES = 2 * GiB
# Mixed-precision Adam: bf16 weights (2) + bf16 grads (2) + fp32 master weights, m, v (12)
# bytes per parameter (Rajbhandari et al., ZeRO, SC20 §3.1); the 12 are sharded over DP.
TRAIN_BYTES_PER_PARAM_REPLICATED = 4
TRAIN_BYTES_PER_PARAM_SHARDED = 12
# Activations kept per layer for backward: 34·s·b·h bytes with sequence parallelism and flash
# attention (Korthikanti et al., arXiv:2205.05198, Eq. 2 without the 5as/h score term), / TP.
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 34
DEFAULT_BATCHES = tuple(sorted({1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320,
                                384, 512, 640, 768, 1024}))


@dataclass(frozen=True)
class MemoryFit:
    weights_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    workspace_bytes: float
    optimizer_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.kv_cache_bytes + self.activation_bytes
                + self.workspace_bytes + self.optimizer_bytes)

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_bytes": self.total_bytes, "fits": self.fits}


def weight_bytes_per_gpu(model: ModelSpec, dtype: str, tp: int, ep: int, pp: int) -> float:
    """Weights one GPU holds: GEMM weights in the dtype policy, embeddings in bf16."""
    w = bytes_per_element(dtype)
    layers = model.layers / pp
    attn = model.attention_params() / tp
    if model.is_moe:
        moe_layers = model.layers - model.dense_layers
        per_expert = model.ffn_matrices * model.hidden * model.expert_hidden
        routed = model.experts * per_expert / (ep if ep > 1 else tp)
        shared = model.shared_experts * per_expert / tp
        dense = model.ffn_matrices * model.hidden * model.ffn_hidden / tp
        ffn_total = (moe_layers * (routed + shared) + model.dense_layers * dense) / pp
        per_layer_attn = attn * layers
        body = (per_layer_attn + ffn_total) * w
    else:
        body = (attn + model.ffn_matrices * model.hidden * model.ffn_hidden / tp) * layers * w
    embeddings = model.vocab * model.hidden * ACT_BYTES * (1 if model.tie_embeddings else 2) / tp
    return body + embeddings / (1 if pp == 1 else 2)  # embedding and LM head on end stages


def serving_memory(model: ModelSpec, hw: Hardware, batch: int, context: int, tp: int = 1,
                   ep: int = 1, pp: int = 1, dtype: str = "bf16",
                   prefill_tokens: int = 0) -> MemoryFit:
    kv = batch * context * kv_cache_bytes_per_token(model, tp) / pp
    act = max(batch, prefill_tokens) * (model.hidden + model.ffn_hidden / tp) * ACT_BYTES * 2
    return MemoryFit(weight_bytes_per_gpu(model, dtype, tp, ep, pp), kv, act, WORKSPACE_BYTES,
                     0.0, hw.hbm_capacity_bytes * HBM_USABLE_FRACTION)


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
        from .plan_plots import plot_serving_plan
        return plot_serving_plan(self, ax=ax)


def _as_model(model: ModelSpec | str) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else load_model(model)


def plan_serving(model: ModelSpec | str, hw: Hardware | str, tp: int = 1, ep: int = 1,
                 pp: int = 1, dtype: str = "bf16", prompt: int = 2048, output: int = 256,
                 tpot_slo_s: float | None = None, ttft_slo_s: float | None = None,
                 batches: Iterable[int] = DEFAULT_BATCHES, level: str = "pipes",
                 progress: bool = False) -> ServingPlan:
    """Evaluate decode batches for one deployment; `best` is the largest under the SLOs."""
    from . import predict  # late: perfmodel/__init__ imports this module
    m, h = _as_model(model), hardware(hw)
    gpus = max(tp, ep) * pp
    replicas_attn = max(1, ep // tp)  # data-parallel attention groups sharing the experts
    context = prompt + output // 2
    ttft = predict(build_graph(m, "prefill", batch=1, seq=prompt, tp=tp, ep=ep, pp=pp,
                               dtype=dtype), h, level).total_time_s
    plan = ServingPlan(m.name, h.name, tp, ep, pp, dtype, prompt, output, gpus, tpot_slo_s,
                       ttft_slo_s)
    batches = sorted(set(batches))
    bar = Progress(len(batches), f"{m.name} on {h.name}", force=progress)
    for b in batches:
        # each tensor-parallel group keeps the KV cache of its own `b` sequences
        mem = serving_memory(m, h, b, prompt + output, tp, ep, pp, dtype, prompt)
        tpot = predict(build_graph(m, "decode", batch=b, context=context, tp=tp, ep=ep, pp=pp,
                                   dtype=dtype), h, level).total_time_s
        seqs = b * replicas_attn
        rate = seqs / (tpot + seqs * ttft / output)
        ok = (tpot_slo_s is None or tpot <= tpot_slo_s) and (ttft_slo_s is None
                                                             or ttft <= ttft_slo_s)
        plan.points.append(ServingPoint(seqs, tpot, ttft, rate, rate / gpus, mem, ok))
        bar.update()
    return plan


@dataclass(frozen=True)
class TrainingPlan:
    model: str
    hardware: str
    tp: int
    pp: int
    dp: int
    dtype: str
    global_batch: int
    seq: int
    step_time_s: float
    tokens_per_s: float
    mfu: float
    memory: MemoryFit
    ep: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def time_to_train_s(self, tokens: float) -> float:
        return tokens / self.tokens_per_s

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["memory"] = self.memory.to_dict()
        d["gpus"] = self.gpus
        return d


def model_flop_per_token(model: ModelSpec, seq: int) -> float:
    """Training FLOP per token: 6·N (activated params) + 12·L·h·s for attention (PaLM,
    Chowdhery et al. 2022, Appendix B)."""
    return 6 * model.params(active=True) + 12 * model.layers * model.hidden * seq


def plan_training(model: ModelSpec | str, hw: Hardware | str, batch: int, seq: int = 4096,
                  tp: int = 1, pp: int = 1, dp: int = 1, dtype: str = "bf16", ep: int = 1,
                  microbatches: int | None = None, virtual_stages: int = 1,
                  level: str = "pipes") -> TrainingPlan:
    """One training step; `batch` sequences per model replica (global batch = batch·dp).
    MFU is against the dense BF16 datasheet peak, whatever the GEMM dtype (the usual
    convention)."""
    from . import predict
    m, h = _as_model(model), hardware(hw)
    if ep > 1 and (tp * dp) % ep:
        raise InputError(f"ep: {ep} must divide tp·dp = {tp * dp} (experts are spread over the "
                         f"data- and tensor-parallel ranks)")
    g = build_graph(m, "train", batch=batch, seq=seq, tp=tp, ep=ep, pp=pp, dp=dp, dtype=dtype,
                    microbatches=microbatches, virtual_stages=virtual_stages)
    step = predict(g, h, level).total_time_s
    tokens = batch * seq * dp
    gpus = tp * pp * dp
    mfu = model_flop_per_token(m, seq) * tokens / (step * gpus * h.tensor_peak_flop_per_s("bf16"))
    params_gpu = weight_bytes_per_gpu(m, "bf16", tp, ep, pp) / ACT_BYTES
    w = Workload("train", batch, seq, None, tp, ep, pp, dp, dtype, microbatches, virtual_stages)
    mb_seqs = batch // w.n_microbatches
    in_flight = min(pp, w.n_microbatches)
    act = ACTIVATION_BYTES_PER_TOKEN_HIDDEN * seq * mb_seqs * m.hidden * (m.layers / pp) \
        * in_flight / tp
    mem = MemoryFit(params_gpu * TRAIN_BYTES_PER_PARAM_REPLICATED, 0.0, act, WORKSPACE_BYTES,
                    params_gpu * TRAIN_BYTES_PER_PARAM_SHARDED / dp,
                    h.hbm_capacity_bytes * HBM_USABLE_FRACTION)
    return TrainingPlan(m.name, h.name, tp, pp, dp, dtype, batch * dp, seq, step,
                        tokens / step, mfu, mem, ep)


def sweep_serving(model: ModelSpec | str, hws: Sequence[str], tps: Sequence[int],
                  dtypes: Sequence[str] = ("bf16",), batches: Iterable[int] = DEFAULT_BATCHES,
                  progress: bool = False, **kw: Any) -> list[dict[str, Any]]:
    """Tidy rows (one per hardware × TP × dtype × batch) for tables, CSV and Pareto plots."""
    rows = []
    m = _as_model(model)
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
                 y: str = "tokens_per_s_per_gpu") -> list[dict[str, Any]]:
    """Rows not dominated in (lower x, higher y) among those that fit in memory."""
    front, best_y = [], -math.inf
    for r in sorted((r for r in rows if r["fits"]), key=lambda r: (r[x], -r[y])):
        if r[y] > best_y:
            front.append(r)
            best_y = r[y]
    return front
