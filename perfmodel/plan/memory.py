"""Memory per GPU of a deployment: weights (sharded by TP and PP; experts by EP), KV cache,
activations, workspace and optimizer state, against the usable HBM."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from perfmodel.hardware import Hardware
from perfmodel.units import GiB, bytes_per_element
from perfmodel.workloads.builder import ACT_BYTES, kv_cache_bytes_per_token
from perfmodel.workloads.models import ModelSpec, load_model

# vLLM's default gpu_memory_utilization: the share of HBM the engine plans with.
HBM_USABLE_FRACTION = 0.90
# CUDA graphs, NCCL buffers, cuBLAS workspace and allocator slack (vLLM reserves ~1-3 GiB).
WORKSPACE_BYTES = 2 * GiB


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


def as_model(model: ModelSpec | str) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else load_model(model)
