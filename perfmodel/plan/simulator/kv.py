"""The KV-cache budget of one GPU of a serving replica, and KV bytes per token by kv_dtype.

Usable memory: vLLM and SGLang plan with a fraction of the whole HBM (gpu_memory_utilization,
mem_fraction_static), TensorRT-LLM gives the KV cache a fraction of the memory left free after
the model (free_gpu_memory_fraction); weights per GPU from `perfmodel.plan.memory`
(weight_bytes_per_gpu through serving_memory), activations of the largest step and the workspace
likewise. The rest holds paged blocks of `block_tokens` tokens, each token
`kv_cache_bytes_per_token(model, tp)` bytes for the layers of one pipeline stage
(ceil(layers / pp) of them), in `kv_dtype` (the builder's kv_cache_bytes_per_token sizes it:
fp8 half of bf16, nvfp4 with its E4M3 scale per 16 elements).

Sliding-window layers (ModelSpec.window; gpt-oss's even layers): with `max_seqs` given, the cache
is a hybrid one (vLLM's hybrid KV cache manager, on by default; its
`disable_hybrid_kv_cache_manager` turns it off): the blocks of `block_tokens` count only the
full-attention layers' bytes per token, and each of up to `max_seqs` running sequences keeps
ceil(window / block_tokens) + 1 blocks of the windowed layers (the window and the block being
filled; blocks behind the window are freed), reserved up front (`window_reserve_bytes`).
Without `max_seqs` every layer is charged per token, as a cache without window support does.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.plan.memory import WORKSPACE_BYTES, as_model, serving_memory
from perfmodel.units import GiB
from perfmodel.workloads.builder import kv_cache_bytes_per_token
from perfmodel.workloads.models import ModelSpec

KV_DTYPES = ("bf16", "fp16", "fp8", "fp8_e4m3", "nvfp4")


def check_kv_dtype(kv_dtype: str) -> None:
    if kv_dtype not in KV_DTYPES:
        raise InputError(f"kv_dtype: expected one of {', '.join(KV_DTYPES)}, got {kv_dtype!r}")


def kv_bytes_per_token(model: ModelSpec, tp: int, kv_dtype: str) -> float:
    """KV bytes per token per GPU, all layers, in `kv_dtype`."""
    check_kv_dtype(kv_dtype)
    return kv_cache_bytes_per_token(model, tp, kv_dtype)


@dataclass(frozen=True)
class KvBudget:
    """Memory of one GPU of the replica and the paged KV cache it leaves: usable HBM (the
    engine's memory fraction), weights, activations of the largest step, workspace, and the KV
    blocks of `block_tokens` tokens that fit in the rest."""

    hbm_bytes: float
    usable_bytes: float
    weights_bytes: float
    activation_bytes: float
    workspace_bytes: float
    kv_bytes: float
    kv_bytes_per_token: float   # per GPU: its pipeline stage's layers, its TP shard, kv_dtype
    block_tokens: int
    blocks: int
    # the sliding-window layers' blocks of max_seqs sequences, held apart from `blocks`
    # (module docstring); 0 without windows or without max_seqs
    window_reserve_bytes: float = 0.0

    @property
    def tokens(self) -> int:
        return self.blocks * self.block_tokens

    @property
    def fits(self) -> bool:
        return self.blocks > 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens": self.tokens, "fits": self.fits}


def kv_budget(model: ModelSpec | str, hw: Hardware | str, tp: int = 1, ep: int = 1,
              pp: int = 1, dtype: str = "bf16", kv_dtype: str = "bf16", block_tokens: int = 16,
              gpu_memory_utilization: float = 0.9, fraction_of_free: bool = False,
              max_tokens_per_step: int = 8192, workspace_bytes: float = WORKSPACE_BYTES,
              activations: bool = True, redundant_experts: int = 0,
              max_seqs: int | None = None) -> KvBudget:
    """KV blocks per GPU. vLLM and SGLang plan with a fraction of the whole HBM
    (gpu_memory_utilization, mem_fraction_static); TensorRT-LLM gives the KV cache a fraction of
    the memory left free after weights and activations (`fraction_of_free`). Activations are
    those of a step of `max_tokens_per_step` tokens (`perfmodel.plan.memory.serving_memory`);
    `activations=False` with `workspace_bytes=0` where the fraction already leaves them out
    (SGLang's mem_fraction_static). `redundant_experts`: EPLB's extra expert slots per MoE
    layer, their weights spread over the ep GPUs. `max_seqs`: the most sequences running at
    once, for which a sliding-window model's windowed layers are reserved (module docstring)."""
    m, h = as_model(model), hardware(hw)
    mem = serving_memory(m, h, 0, 0, tp, ep, pp, dtype, max_tokens_per_step,
                         redundant_experts=redundant_experts)
    hbm = h.hbm_capacity_bytes
    act = mem.activation_bytes if activations else 0.0
    fixed = mem.weights_bytes + act + workspace_bytes
    if fraction_of_free:
        usable = hbm
        kv = gpu_memory_utilization * (hbm - fixed)
    else:
        usable = hbm * gpu_memory_utilization
        kv = usable - fixed
    stage_layers = math.ceil(m.layers / pp)
    per_token = kv_bytes_per_token(m, tp, kv_dtype) * stage_layers / m.layers
    windowed = m.window_layers()
    reserve = 0.0
    if windowed and windowed < m.layers and max_seqs is not None:
        # a hybrid cache: the full layers' tokens in blocks, the windowed layers' windows
        # reserved per sequence (the stage's share of each kind, as per_token's)
        per_layer = per_token / m.layers
        per_token = per_layer * (m.layers - windowed)
        window_blocks = -(-m.sliding_window // block_tokens) + 1
        reserve = max_seqs * window_blocks * block_tokens * per_layer * windowed
        kv -= reserve
    blocks = max(0, int(kv // (per_token * block_tokens)))
    return KvBudget(hbm, usable, mem.weights_bytes, act, workspace_bytes,
                    max(0.0, kv), per_token, block_tokens, blocks, reserve)


def check_fits(budget: KvBudget, what: str) -> None:
    """One clear line when the weights (with activations and workspace) leave no KV cache."""
    if not budget.fits:
        raise InputError(
            f"{what}: does not fit: weights {budget.weights_bytes / GiB:.1f} GiB + activations "
            f"{budget.activation_bytes / GiB:.1f} GiB + workspace "
            f"{budget.workspace_bytes / GiB:.1f} GiB per GPU leave no room for a KV block in "
            f"{budget.usable_bytes / GiB:.1f} GiB usable (raise tp/pp/ep or use a smaller dtype)")
