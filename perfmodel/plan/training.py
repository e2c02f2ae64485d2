"""Training steps: step time, tokens/s, MFU and time to train for a TP × PP × DP (× EP)
deployment, with the memory of weights, gradients, optimizer state and activations
(`perfmodel.plan.memory.training_memory`). A plan that does not fit in memory is refused unless
asked for (`allow_oversubscribed`).

Options beyond the graph's: `recompute` ("none" | "selective" | "full", Korthikanti et al.
arXiv:2205.05198): "full" adds one forward of every layer to the training graph (the builder's
`recompute="full"` replays each layer's forward ops before its backward) and keeps only each
layer's input; "none" and "selective" are the same graph and memory, because the FlashAttention
backward already recomputes the attention scores. `zero` (0-3, ZeRO, Rajbhandari et al. SC20):
the memory sharding of plan.memory; stages 0-2 move the same data-parallel bytes as the graph's
reduce-scatter + all-gather (ZeRO §7.2.1), stage 3 re-gathers the parameters in every
microbatch's forward and backward and reduce-scatters every microbatch's gradients (§7.2.2):
(2·microbatches − 1) extra all-gathers and (microbatches − 1) extra reduce-scatters of the graph's
sizes, added to the step without overlap (as the graph's own data-parallel collectives are)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.plan.memory import DEFAULT_RECOMPUTE, DEFAULT_ZERO, MemoryFit, as_model, \
    memory_fit
from perfmodel.predict import predict, predict_op
from perfmodel.workloads.builder import RECOMPUTE, Workload, build_graph
from perfmodel.workloads.models import ModelSpec


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
                  level: str = "pipes", recompute: str = DEFAULT_RECOMPUTE,
                  zero: int = DEFAULT_ZERO, allow_oversubscribed: bool = False) -> TrainingPlan:
    """One training step; `batch` sequences per model replica (global batch = batch·dp).
    MFU is against the dense BF16 datasheet peak, whatever the GEMM dtype (the usual
    convention). Raises InputError with the memory per GPU when the plan does not fit in the
    usable HBM, unless `allow_oversubscribed` (then `memory.fits` is False). `recompute` and
    `zero`: module docstring."""
    m, h = as_model(model), hardware(hw)
    if ep > 1 and (tp * dp) % ep:
        raise InputError(f"ep: {ep} must divide tp·dp = {tp * dp} (experts are spread over the "
                         f"data- and tensor-parallel ranks)")
    if recompute not in RECOMPUTE:
        raise InputError(f"recompute: expected one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    w = Workload("train", batch, seq, None, tp, ep, pp, dp, dtype, microbatches, virtual_stages,
                 recompute=recompute)
    mem = memory_fit(m, h, w, zero)
    if not (mem.fits or allow_oversubscribed):
        raise InputError(f"{m.name} train on {h.name} (batch {batch}, seq {seq}, tp {tp}, pp {pp}"
                         f", dp {dp}, ep {ep}, zero {zero}, recompute {recompute}): "
                         f"{mem.summary()}; shard more (tp, pp, dp with zero >= 2), use "
                         f"recompute='full' or more microbatches, or pass "
                         f"allow_oversubscribed=True")
    g = build_graph(m, "train", batch=batch, seq=seq, tp=tp, ep=ep, pp=pp, dp=dp, dtype=dtype,
                    microbatches=microbatches, virtual_stages=virtual_stages,
                    recompute=recompute)
    step = predict(g, h, level).total_time_s
    if zero == 3 and dp > 1:
        step += _zero3_extra_comm_s(g, h, level, w.n_microbatches)
    tokens = batch * seq * dp
    gpus = tp * pp * dp
    mfu = model_flop_per_token(m, seq) * tokens / (step * gpus * h.tensor_peak_flop_per_s("bf16"))
    return TrainingPlan(m.name, h.name, tp, pp, dp, dtype, batch * dp, seq, step,
                        tokens / step, mfu, mem, ep)


def _zero3_extra_comm_s(graph, hw: Hardware, level: str, microbatches: int) -> float:
    """ZeRO-3's data-parallel traffic beyond the graph's one reduce-scatter and all-gather per
    step: per microbatch a parameter all-gather before its forward and its backward and a
    gradient reduce-scatter (module docstring)."""
    ops = {n.name: n.op for n in graph.nodes}
    gather = scatter = 0.0
    for prefix in ("", "expert_"):  # dense, and the routed experts over their own group
        if f"{prefix}param_allgather" in ops:
            gather += predict_op(ops[f"{prefix}param_allgather"], hw, level).time_s
            scatter += predict_op(ops[f"{prefix}grad_reduce_scatter"], hw, level).time_s
    return (2 * microbatches - 1) * gather + (microbatches - 1) * scatter
