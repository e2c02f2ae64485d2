"""Training steps: step time, tokens/s, MFU and time to train for a TP × PP × DP (× EP)
deployment, with the memory of weights, gradients, optimizer state and activations."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.plan.memory import HBM_USABLE_FRACTION, WORKSPACE_BYTES, MemoryFit, as_model, \
    weight_bytes_per_gpu
from perfmodel.predict import predict
from perfmodel.workloads.builder import ACT_BYTES, Workload, build_graph
from perfmodel.workloads.models import ModelSpec

# Mixed-precision Adam: bf16 weights (2) + bf16 grads (2) + fp32 master weights, m, v (12)
# bytes per parameter (Rajbhandari et al., ZeRO, SC20 §3.1); the 12 are sharded over DP.
TRAIN_BYTES_PER_PARAM_REPLICATED = 4
TRAIN_BYTES_PER_PARAM_SHARDED = 12
# Activations kept per layer for backward: 34·s·b·h bytes with sequence parallelism and flash
# attention (Korthikanti et al., arXiv:2205.05198, Eq. 2 without the 5as/h score term), / TP.
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 34


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
    m, h = as_model(model), hardware(hw)
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
